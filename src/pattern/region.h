// Whether a matched region can become one node: the rule both the partitioner (Composite regions)
// and the fusing transforms (fuse_gelu, fuse_layernorm) apply before they replace a region.
// Tests: tests/unit/pattern_test.cpp
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace sabre::pattern {

// A sabre.Composite node: a region the partitioner already claimed.
bool is_composite(const ir::Node* n);

// Why a region cannot become one node; nullopt when it can. `region` in topological order, the
// last node's first output is the region's only output. Checks, in order: overlap with another
// Composite, a path that leaves the region and re-enters it (a cycle once contracted), an
// intermediate value read outside the region or a graph output.
std::optional<std::string> region_problem(const ir::Graph& g, const std::vector<ir::Node*>& region);

}  // namespace sabre::pattern
