// slice_range_gather: Gather(data, Range(start, limit, delta)) along an axis is a slice: no index
// tensor needed. Tests: tests/unit/codegen_passes_test.cpp
#include "codegen/passes/pass.h"

namespace sabre::codegen::passes {

PassResult slice_range_gather(LowerContext& cx) {
  PassResult r;
  for (Node* g : cx.order) {
    if (!g->domain().empty() || g->op() != "Gather") continue;
    const Node* range = g->input(1)->producer();
    if (!range || range->op() != "Range") continue;
    if (!scalar_constant(range->input(0)) || !scalar_constant(range->input(2))) {
      r.refused.push_back({g->name(), "indices " + range->name() + " not read as a slice: start or delta is not a constant"});
      continue;
    }
    auto limit = cx.dims_of(range->input(1));
    if (!limit || limit->size() != 1) {
      r.refused.push_back({g->name(), "indices " + range->name() + " not read as a slice: the limit is not a known scalar"});
      continue;
    }
    cx.range_gather[g] = {range->input(0)->constant().get_i64(0), (*limit)[0], range->input(2)->constant().get_i64(0)};
    ++r.fired;
  }
  return r;
}

}  // namespace sabre::codegen::passes
