// Constant GEMM weights into the layout the kernels want: B as [N,K], K contiguous ("tn").
#pragma once

#include "ir/graph.h"

namespace sabre::transform {

/** MatMul(A, W[K,N] const) becomes sabre.MatMulTransB(A, Wᵀ[N,K]); Gemm with a constant B and
    transB=0 gets the transposed constant and transB=1. The transpose happens here, once, on the
    constant: nothing transposes at inference. Tests: tests/golden/layout_weights/ */
ir::Graph layout_weights(ir::Graph g);

// Shape inference and the reference kernel for sabre.MatMulTransB (Y = A·Bᵀ, B stored [N,K]; the
// kernel undoes the transpose and runs MatMul's, so results are bit-identical to the MatMul it
// replaced). Idempotent; layout_weights calls it.
void register_matmul_trans_b_op();

}  // namespace sabre::transform
