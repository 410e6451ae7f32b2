// A constant vector added to a GEMM's output is its bias: one canonical spelling for it.
#pragma once

#include "ir/graph.h"

namespace sabre::transform {

/** Add(c, gemm) and Add(gemm, c[1,1,N]) with a constant c of N elements become Add(gemm, c[N]):
    the GEMM operand first, the bias a 1-D constant: the form the pattern tables read as "bias".
    (Same values, same broadcast: bit-identical.) Tests: tests/golden/mark_gemm_bias/ */
ir::Graph mark_gemm_bias(ir::Graph g);

}  // namespace sabre::transform
