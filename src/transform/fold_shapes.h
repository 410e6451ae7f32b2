// Folds shape subgraphs: a value produced by a node whose known_dims() are all static becomes a
// constant (i64, or the value's own integer dtype), and nodes nobody reads any more are removed.
// Values with symbolic known_dims stay computed. Needs ir::infer_types to have run.
#pragma once

#include "ir/graph.h"

namespace sabre::transform {

/** Replace statically known shape values with constants, drop dead nodes. Tests: tests/unit/fold_shapes_test.cpp */
ir::Graph fold_shapes(ir::Graph g);

}  // namespace sabre::transform
