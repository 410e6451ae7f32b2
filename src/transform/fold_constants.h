// Constant folding: a node whose inputs are all constants is evaluated once, on the CPU
// reference, and replaced by its result.
#pragma once

#include "ir/graph.h"

namespace sabre::transform {

/** Evaluate nodes whose inputs are all constant (outputs up to 64 Mi elements). Tests: tests/golden/fold_constants/ */
ir::Graph fold_constants(ir::Graph g);

}  // namespace sabre::transform
