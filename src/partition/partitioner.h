// The generic partitioner: applies a backend's pattern table, in priority order, and turns every
// accepted match into one sabre.Composite node whose body is the matched subgraph.
//
// A table is data: entries of (name, structure, check). The structure says what the subgraph
// looks like (pattern/pattern.h); the check says whether this backend can run it (dtype, alignment,
// dims, layouts) and adds the attributes its emitter needs. Regions never overlap (a node joins
// one region at most) and never create a cycle: a region is refused when a path leaves it and
// re-enters it. Tests: tests/unit/pattern_test.cpp, tests/golden/partition/
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "pattern/pattern.h"
#include "pattern/region.h"

namespace sabre::partition {

// The pattern language and the region rule (src/pattern/) are the partitioner's vocabulary.
using namespace sabre::pattern;

// A check's verdict: ok, or the reason the backend refuses ("K=3 not a multiple of 8: needs
// alignment-1 kernels"). `attrs` go onto the Composite node (roles, transposes, epilogue, alignment).
struct CheckResult {
  bool ok = true;
  std::string reason;
  std::map<std::string, ir::AttrValue> attrs;
  static CheckResult refuse(std::string why) { return {false, std::move(why), {}}; }
};
using CheckFn = std::function<CheckResult(const Match&)>;

struct PatternEntry {
  std::string name;     // "cutlass.gemm_bias_gelu": composite attribute, emitter key, test name
  std::string algebra;  // "D = gelu(A·Bᵀ + bias)"
  Pat pattern;
  CheckFn check;
  // Captures that are the region's inputs, in the order the Composite takes them ("A", "B", "bias").
  std::vector<std::string> roles;
};

struct PatternTable {
  std::string backend;               // "cutlass"
  std::vector<PatternEntry> entries;  // priority order: the first entry that claims a node wins
};

// One region that became a Composite.
struct RegionInfo {
  std::string composite;           // the Composite node's name
  std::string pattern;             // entry name
  std::vector<std::string> nodes;  // names of the original nodes, topological order
};

// A match that was refused: by the entry's check, or because the region would overlap another,
// leak an intermediate value, or create a cycle.
struct Refusal {
  std::string pattern;
  std::vector<std::string> nodes;
  std::string reason;
};

struct PartitionResult {
  ir::Graph graph;
  std::vector<RegionInfo> regions;
  std::vector<Refusal> refusals;
};

/** Applies `table` to `g`: every accepted match becomes a sabre.Composite. Tests: tests/unit/pattern_test.cpp */
PartitionResult partition(ir::Graph g, const PatternTable& table);

// Replaces `region` by a Composite node (op "Composite", domain "sabre") with attributes
// pattern, backend, body, roles and `extra`; inputs ordered by `roles` first (captured values), then the
// remaining external inputs in the order the region reads them. roles[i] names input i's roles
// ("X,residual" when one value plays two; "" for none). Returns the new node.
ir::Node* make_composite(ir::Graph& g, const std::vector<ir::Node*>& region, const Match& m,
                         const PatternEntry& entry, const std::string& backend,
                         const std::map<std::string, ir::AttrValue>& extra);

}  // namespace sabre::partition
