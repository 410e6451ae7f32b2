// The Q, K and V projections of an attention block as one GEMM.
#pragma once

#include "ir/graph.h"

namespace sabre::transform {

/** Three sabre.MatMulTransB(x, W_i[N_i, K]) + Add(bias_i[N_i]) that read the same x, each read only by
    a Reshape (to heads), become one MatMulTransB(x, [W_0; W_1; W_2]) + Add([b_0, b_1, b_2]) and a
    Split over the last axis whose outputs replace the three Adds'. One GEMM with three times the
    columns fills the GPU better than three (BERT-base at batch 1: 36 tiles instead of 12 each), and
    the fused attention reads Q, K and V in place from its output (codegen: packed_split). Each output
    element is the same dot product plus the same bias as before: the reference results are
    bit-identical. Runs after layout_weights and mark_gemm_bias, only where PassOptions::merge_qkv asks
    (sabre compile/tune, unless --no-fuse-attention): without the fused attention the Split is one more copy.
    Tests: tests/unit/merge_qkv_test.cpp */
ir::Graph merge_qkv(ir::Graph g);

}  // namespace sabre::transform
