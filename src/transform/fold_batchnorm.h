// BatchNormalization (inference) folded into the Conv before it.
#pragma once

#include "ir/graph.h"

namespace sabre::transform {

/** Conv(x,W,b) -> BN(γ,β,μ,σ²,ε) becomes Conv(x, W·s, (b-μ)·s+β) with s=γ/√(σ²+ε), per output
    channel, when the Conv's output feeds only the BN and all parameters are constant.
    Tests: tests/golden/fold_batchnorm/ */
ir::Graph fold_batchnorm(ir::Graph g);

}  // namespace sabre::transform
