// sabre ops: what sabre supports, read from the code's own registries: the ONNX ops shape inference
// knows (ir::supported_ops), whether the CPU reference runs each (reference::has_kernel), how the GPU
// lowering runs it (the fused elementwise table, views, the CUTLASS pattern table, the step kinds of
// the runtime), and per GPU architecture which CUTLASS kernel families have catalog rows.
// scripts/gen_support_tables.py turns `sabre ops --json` into docs/SUPPORT.md; the ctest
// docs.support_tables fails when that file is stale. Tests: tests/cli/support_tables.py
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "backends/cutlass/catalog.h"
#include "backends/cutlass/conv_sm90.h"
#include "backends/cutlass/conv_spec.h"
#include "backends/cutlass/patterns.h"
#include "cli_util.h"
#include "codegen/passes/context.h"
#include "command.h"
#include "frontend/onnx/importer.h"
#include "frontend/onnx/opset_convert.h"
#include "ir/infer.h"
#include "reference/reference.h"
#include "runtime/step_kind.h"

namespace sabre::cli {
namespace {

namespace cb = sabre::cutlass_backend;

const std::vector<FlagSpec> kFlags = {json_flag()};

// The ops the lowering emits as their own step (codegen/passes/emit_steps.cpp: emit_node), by the
// runtime step kind each becomes; tests/cli/support_tables.py checks every kind is one the runtime
// knows. Elementwise ops and views come from the lowering's own tables (passes::ew_ops, is_view).
const std::map<std::string, std::vector<std::string>> kStepOps = {
    {"Softmax", {"softmax"}},
    {"LogSoftmax", {"softmax"}},
    {"LayerNormalization", {"layernorm"}},
    {"Transpose", {"permute"}},
    {"Gather", {"gather", "slice"}},
    {"Slice", {"slice"}},
    {"Concat", {"concat"}},
    {"Split", {"split"}},
    {"Expand", {"strided_copy"}},
    {"DepthToSpace", {"strided_copy"}},
    {"SpaceToDepth", {"strided_copy"}},
    {"Tile", {"strided_copy"}},
    {"ReduceSum", {"reduce"}},
    {"ReduceMean", {"reduce"}},
    {"ReduceMax", {"reduce"}},
    {"ReduceMin", {"reduce"}},
    {"ReduceProd", {"reduce"}},
    {"ReduceSumSquare", {"reduce"}},
    {"ReduceL1", {"reduce"}},
    {"ReduceL2", {"reduce"}},
    {"ReduceLogSum", {"reduce"}},
    {"ReduceLogSumExp", {"reduce"}},
    {"GlobalMaxPool", {"reduce"}},
    {"ArgMax", {"reduce"}},
    {"ArgMin", {"reduce"}},
    {"GatherElements", {"gather_elements"}},
    {"Trilu", {"trilu"}},
    {"CumSum", {"cumsum"}},
    {"MaxPool", {"pool2d"}},
    {"AveragePool", {"pool2d"}},
    {"GlobalAveragePool", {"global_average_pool", "reduce"}},
    {"Range", {"iota"}},
    {"Conv", {"grouped_conv", "depthwise_conv"}},
};

// Ops the importer, canonicalization or a fusion pass turns into something else before steps are emitted.
const std::map<std::string, std::string> kBeforeLowering = {
    {"Dropout", "Identity at import (inference), a view"},
    {"BatchNormalization", "folded into the Conv before it (fold_batchnorm); refused elsewhere"},
    {"Shape", "folded to a constant where its value is static (fold_shapes); refused as run-time data"},
    {"Size", "folded to a constant where its value is static (fold_shapes); refused as run-time data"},
    {"ConstantOfShape", "folded to a constant where its shape is static (fold_shapes); refused as run-time data"},
};

void pattern_ops(const partition::PatternNode* n, std::set<std::string>& out) {
  if (!n) return;
  if (n->kind == partition::PatternNode::Kind::op && n->domain.empty()) out.insert(n->op);
  for (const auto& in : n->inputs) pattern_ops(in.get(), out);
}

nlohmann::ordered_json ops_json() {
  const auto& ew = codegen::passes::ew_ops();
  std::map<std::string, std::vector<std::string>> in_patterns;  // op -> CUTLASS entries naming it
  nlohmann::ordered_json patterns = nlohmann::ordered_json::array();
  for (const auto& e : cb::pattern_table().entries) {
    std::set<std::string> ops;
    pattern_ops(e.pattern.get(), ops);
    for (const auto& op : ops) in_patterns[op].push_back(e.name);
    patterns.push_back({{"name", e.name}, {"algebra", e.algebra}, {"ops", ops}});
  }
  nlohmann::ordered_json ops = nlohmann::ordered_json::array();
  for (const std::string& op : ir::supported_ops()) {
    std::string gpu, detail;
    std::vector<std::string> kinds;
    const bool cutlass = in_patterns.count(op) != 0;
    if (ew.count(op)) {
      gpu = "native";
      kinds = {"elementwise"};
      detail = "generated elementwise kernel; a chain of such ops is one kernel";
      if (cutlass) detail += "; also fused into CUTLASS epilogues";
    } else if (codegen::passes::is_view(op)) {
      gpu = "view";
      kinds = {"reshape"};
      detail = "a view of its input: no kernel";
    } else if (auto it = kStepOps.find(op); it != kStepOps.end()) {
      kinds = it->second;
      gpu = cutlass ? "cutlass+native" : "native";
      detail = cutlass ? "CUTLASS region where the pattern table takes it; else sabre's native kernel" : "sabre's native kernel";
    } else if (cutlass) {
      gpu = "cutlass";
      kinds = {"gemm"};
      detail = "CUTLASS region only (outside one it is refused: sabre partition says why)";
    } else if (auto b = kBeforeLowering.find(op); b != kBeforeLowering.end()) {
      gpu = "compile time";
      detail = b->second;
    } else {
      gpu = "refused";
      detail = "no GPU lowering: sabre compile refuses a model that needs it";
    }
    const auto& since = onnx_frontend::op_oldest_opsets();
    auto first = since.find(op);
    nlohmann::ordered_json row = {{"op", op},
                                  {"oldest_opset", first == since.end() ? nlohmann::ordered_json()
                                                                        : nlohmann::ordered_json(first->second)},
                                  {"reference", reference::has_kernel("", op)}, {"gpu", gpu},
                                  {"gpu_detail", detail}, {"step_kinds", kinds}};
    row["cutlass_patterns"] = cutlass ? nlohmann::ordered_json(in_patterns[op]) : nlohmann::ordered_json::array();
    ops.push_back(std::move(row));
  }
  // The architectures probed: every CUTLASS family's static filter answers for each.
  nlohmann::ordered_json archs = nlohmann::ordered_json::array();
  for (int sm : {75, 80, 86, 89, 90, 100, 120}) {
    const cb::GemmOperands f16{cb::Elem::f16, cb::Elem::f16, cb::Layout::tn};
    size_t sm90_conv = 0;
    for (const cb::Sm90ConvConfig& c : cb::sm90_conv_catalog(cb::Elem::f16))
      if (!cb::sm90_conv_unsupported_reason({c, cb::Elem::f16, {}}, sm)) ++sm90_conv;
    archs.push_back({{"sm", sm},
                     {"arch", normalize_arch(std::to_string(sm))},
                     {"gemm_sm90", cb::catalog(cb::Family::sm90, f16, sm).size()},
                     {"gemm_sm80", cb::catalog(cb::Family::sm80, f16, sm).size()},
                     {"conv_sm90", sm90_conv},
                     {"conv_sm80", cb::conv_catalog(cb::Elem::f16, sm).size()}});
  }
  nlohmann::ordered_json kinds = nlohmann::ordered_json::array();
  for (size_t k = 0; k < runtime::kStepKindCount; ++k) kinds.push_back(runtime::to_string(static_cast<runtime::StepKind>(k)));
  nlohmann::ordered_json j = json_header("ops");
  j["opsets"] = {{"min", onnx_frontend::kMinOpset}, {"max", onnx_frontend::max_opset()}};
  j["ops"] = std::move(ops);
  j["cutlass_patterns"] = std::move(patterns);
  j["step_kinds"] = std::move(kinds);
  j["archs"] = std::move(archs);
  return j;
}

int ops(const std::vector<std::string>& argv) {
  return guarded("ops", [&] {
    ParsedArgs args = parse_args(argv, kFlags);
    if (args.help) {
      std::printf("usage: sabre ops [--json]\n\n"
                  "Lists the ONNX operators sabre imports, whether the CPU reference runs each, and how the GPU\n"
                  "lowering runs it (a CUTLASS region, sabre's native kernels, a view, folded before lowering, or\n"
                  "refused), then per GPU architecture the CUTLASS kernel families with catalog rows for it.\n"
                  "Read from the code's own tables; docs/SUPPORT.md is generated from --json by\n"
                  "scripts/gen_support_tables.py.\n\noptions:\n%s",
                  flags_help(kFlags).c_str());
      return kExitOk;
    }
    if (!args.positional.empty()) throw UsageError("sabre ops takes no arguments (did you mean sabre inspect?)");
    const nlohmann::ordered_json j = ops_json();
    if (args.has("--json")) {
      print_json(j);
      return kExitOk;
    }
    std::printf("%-28s %-9s %-15s %s\n", "op", "reference", "gpu", "how");
    for (const auto& o : j["ops"])
      std::printf("%-28s %-9s %-15s %s\n", o["op"].get<std::string>().c_str(), o["reference"].get<bool>() ? "yes" : "no",
                  o["gpu"].get<std::string>().c_str(), o["gpu_detail"].get<std::string>().c_str());
    std::printf("\n%-8s %10s %10s %10s %10s  (CUTLASS catalog rows, f16)\n", "arch", "gemm sm90", "gemm sm80", "conv sm90",
                "conv sm80");
    for (const auto& a : j["archs"])
      std::printf("%-8s %10zu %10zu %10zu %10zu\n", a["arch"].get<std::string>().c_str(), a["gemm_sm90"].get<size_t>(),
                  a["gemm_sm80"].get<size_t>(), a["conv_sm90"].get<size_t>(), a["conv_sm80"].get<size_t>());
    return kExitOk;
  });
}

const bool reg = register_command({"ops", "list supported ONNX operators and GPU architectures (docs/SUPPORT.md)", ops});

}  // namespace
}  // namespace sabre::cli
