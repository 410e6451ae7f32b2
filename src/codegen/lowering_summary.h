// What the GPU lowering makes of a partitioned graph, as data: the layout line and the fusions that
// did not fire. One source for `sabre partition` (text and --json) and sabre.partition.
#pragma once

#include <string>
#include <vector>

#include "codegen/lower.h"

namespace sabre::codegen {

// A fusion of the lowering that did not fire: the pass, the node its pattern is anchored at, why.
struct UnfiredFusion {
  std::string pass;
  std::string node;
  std::string reason;
};

struct LoweringSummary {
  // The values stored NHWC and the NCHW<->NHWC transposes at the conv regions' edges, or
  // "not lowered: <why>" when the model does not lower.
  std::string layout;
  std::vector<UnfiredFusion> not_fired;  // in pass order; empty when the model does not lower
};

// Lowers `partitioned` as sabre compile --no-tune would (analytic GEMM and conv picks, default dim
// ranges, `lo`'s dtype and fusion options; no weights packed) and summarizes it.
// Tests: tests/cli/partition_report.py, tests/python/test_api.py
LoweringSummary lowering_summary(const ir::Graph& partitioned, LowerOptions lo);

}  // namespace sabre::codegen
