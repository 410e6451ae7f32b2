// slice_range_gather: Gather(data, Range(start, limit, delta)) along an axis is a slice: no index
// tensor needed. Tests: tests/unit/codegen_passes_test.cpp
#include "codegen/passes/fusion.h"

namespace sabre::codegen::passes {
namespace {

using namespace pattern;

Verdict check(const Match& m, LowerContext& cx) {
  const Node* range = m.nodes.at("range");
  auto refuse = [&](const std::string& why) { return Verdict::refuse("indices " + range->name() + " not read as a slice: " + why); };
  if (!scalar_constant(m.value("start")) || !scalar_constant(m.value("delta")))
    return refuse("start or delta is not a constant");
  auto limit = cx.dims_of(m.value("limit"));
  if (!limit || limit->size() != 1) return refuse("the limit is not a known scalar");
  return Verdict::fuse();
}

void record(const Match& m, LowerContext& cx) {
  cx.range_gather[m.root] = {m.value("start")->constant().get_i64(0), (*cx.dims_of(m.value("limit")))[0],
                             m.value("delta")->constant().get_i64(0)};
}

}  // namespace

const Fusion& range_gather_fusion() {
  static const Fusion f{"slice_range_gather", "Gather(data, Range(start, limit, delta)) = a strided slice of data",
                        op("Gather", {wildcard("data"),
                                      op("Range", {wildcard("start"), wildcard("limit"), wildcard("delta")}).as("range")}),
                        check, record};
  return f;
}

PassResult slice_range_gather(LowerContext& cx) { return run_fusion(range_gather_fusion(), cx); }

}  // namespace sabre::codegen::passes
