// Gemm on a flattened activation, reshaped back: GPT-2's Conv1D exports
// Reshape(Gemm(Reshape(x, [-1, K]), W, b), x.shape[:-1] + [N]); the Reshapes hide the GEMM from
// the epilogue patterns (bias+GELU, residual add). This pass writes it as MatMul(x, W) + b on x's
// own shape, the form BERT exports and the CUTLASS pattern table fuses.
#pragma once

#include "ir/graph.h"

namespace sabre::transform {

/** Rewrites Reshape(Gemm(Reshape(x -> [M, K]), B const, C const [N] or none) -> x.shape[:-1]+[N])
    with alpha = 1, beta = 1, transA = 0 into MatMul(x, B or Bᵀ) (+ Add C). Anything else (other
    alpha/beta, a non-constant B, a reshape to another shape) is left alone. Exact: the same sums in
    the same order. Tests: tests/unit/unflatten_gemm_test.cpp */
ir::Graph unflatten_gemm(ir::Graph g);

}  // namespace sabre::transform
