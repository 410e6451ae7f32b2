// The LayerNorm idiom that exporters emit before opset 17, to LayerNormalization.
#pragma once

#include "ir/graph.h"

namespace sabre::transform {

/** Replace d=x-mean(x); d/sqrt(mean(d²)+eps)·γ(+β) over the last axis with LayerNormalization.
    Tests: tests/golden/fuse_layernorm/ */
ir::Graph fuse_layernorm(ir::Graph g);

}  // namespace sabre::transform
