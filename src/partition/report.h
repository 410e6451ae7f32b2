// The partition report: each region (name, pattern, nodes, operand shapes with symbolic dims),
// the share of the model's GEMM and conv FLOPs that regions took, and every GEMM or conv left
// out with the reason. Backend-neutral: it reads the PartitionResult only.
// Tests: tests/unit/partition_models_test.cpp
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "partition/partitioner.h"

namespace sabre::partition {

// 2·M·N·K (batch included) for MatMul, sabre.MatMulTransB and Gemm; 2·N·OC·OH·OW·(IC/group)·KH·KW
// for Conv; nullopt for other ops or when shapes are not inferred.
std::optional<ir::Dim> gemm_flops(const ir::Node& n);

struct LeftOut {
  std::string node, op, operands;  // operands: "f32[batch,16] x f32[10,16]"
  std::string reason;
  std::string runs_on;  // set by the caller that knows the lowering ("" : not said)
};

struct FlopShare {
  ir::Dim total, offloaded;  // symbolic
  double total_at = 0, offloaded_at = 0;  // at `bindings`
  std::map<std::string, int64_t> bindings;
  bool exact = false;  // the share is the same at other values of the symbols
  bool overflow = false;  // the FLOPs pass int64: nothing above is counted
  double share() const { return total_at > 0 ? offloaded_at / total_at : 1.0; }
};

struct PartitionReport {
  std::vector<std::string> region_lines;  // formatted, one block per region
  std::vector<LeftOut> left_out;
  FlopShare flops;
};

// `bindings` gives representative values for the symbols (missing ones: batch-like 1, others 128).
PartitionReport make_report(const PartitionResult& r, const std::map<std::string, int64_t>& bindings = {});
std::string format_report(const PartitionReport& rep, const std::string& backend);

}  // namespace sabre::partition
