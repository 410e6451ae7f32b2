// GELU idioms to the Gelu op (ONNX opset 20): the erf form as exporters write it and the tanh form.
#pragma once

#include "ir/graph.h"

namespace sabre::transform {

/** Replace x*0.5*(1+erf(x/√2)) (any Mul order, /√2 or *0.7071) and 0.5*x*(1+tanh(√(2/π)(x+0.044715x³)))
    with Gelu; x*sigmoid(1.702x) is not GELU and stays. Tests: tests/golden/fuse_gelu/ */
ir::Graph fuse_gelu(ir::Graph g);

}  // namespace sabre::transform
