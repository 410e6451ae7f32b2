// The canonicalization pipeline: the passes, in order, that put a model into the form the
// pattern tables read.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "ir/graph.h"
#include "transform/regroup_convs.h"

namespace sabre::transform {

struct PassOptions {
  // Print the IR after every pass to stderr (also on when the environment sets SABRE_DUMP_IR=1).
  bool dump = false;
  // Where dumps go instead of stderr, when set (tests use it).
  std::function<void(const std::string& after, const ir::Graph&)> dump_to;
  // Join attention blocks' Q, K and V projections into one GEMM (merge_qkv), for plans that fuse
  // attention and read them in place.
  bool merge_qkv = false;
  // Widen grouped convs' groups (regroup_convs) to what the GPU's grouped kernels take; unset
  // (the reference's view of the model) leaves them as exported.
  std::optional<RegroupOptions> regroup;
};

/** fold_shapes, fold_constants, fold_shapes, simplify_masks, unflatten_gemm, fuse_gelu, fuse_layernorm, fold_batchnorm, conv1d_as_conv2d, fold_constants, regroup_convs
    where asked, layout_weights, mark_gemm_bias, then merge_qkv where asked; types are re-inferred at the end. Tests: tests/unit/canonicalize_test.cpp */
ir::Graph canonicalize(ir::Graph g, const PassOptions& opts = {});

// Shape inference and reference kernels for the sabre ops the passes create. Idempotent.
void register_ops();

}  // namespace sabre::transform
