// Attention masks as exporters build them, reduced to what they are. HuggingFace transformers 5
// (masking_utils) exports BERT's padding mask as index arithmetic: the [B,K] mask flattened and
// gathered at b·K + k over Range iotas, And-ed with `q >= 0` over a query iota (always true),
// Expand-ed to [B,1,Q,K] and turned additive with Where. Run as is, that is a dozen small kernels
// and a [B,1,Q,K] mask the attention kernel reads per query row, where a [B,1,1,K] mask is one
// row shared by every query (bench/results/mask_bcast_*). Three exact rewrites:
//  1. A Gather of a flattened 2-D M at b·K + k, b and k Range(0, n, 1) outputs through Unsqueeze,
//     is M with unit axes inserted: an Unsqueeze (a view).
//  2. A value that is only a broadcast of a smaller one (Expand; And with an operand that is true
//     everywhere; Cast and Where with scalar branches over such values) is read at its narrow
//     shape by broadcasting elementwise consumers whose output shape the other operands already
//     give: the attention's Add(scores [B,H,Q,K], mask) then reads [B,1,1,K].
//  3. A view of a Cast whose other readers only take its shape is the Cast of the view, so the
//     casts meet the Where after the views and run in its kernel (BERT-base's mask: one kernel).
#pragma once

#include "ir/graph.h"

namespace sabre::transform {

/** Gather-over-iota as a view, broadcasts read narrow. Tests: tests/unit/simplify_masks_test.cpp */
ir::Graph simplify_masks(ir::Graph g);

}  // namespace sabre::transform
