// sabre partition: canonicalize a model, cut it into backend regions and report what went where.
// Tests: tests/golden/partition/, tests/unit/partition_models_test.cpp, tests/cli/partition_report.py
#include <cstdio>
#include <string>
#include <vector>

#include "backends/cutlass/patterns.h"
#include "cli_util.h"
#include "command.h"
#include "frontend/onnx/importer.h"
#include "ir/printer.h"
#include "partition/partitioner.h"
#include "codegen/compile.h"
#include "codegen/lower.h"
#include "partition/report.h"
#include "tune/select.h"
#include "transform/canonicalize.h"

namespace sabre::cli {
namespace {

const std::vector<FlagSpec> kFlags = {
    onnx_flag(),
    {"--backend", "", "NAME", "the pattern table to apply (default cutlass, the only one)", false},
    dim_flag("representative value of a symbolic dim for the FLOP share (default: batch-like 1, others 128)"),
    json_flag(),
    {"--ir", "", "", "also print the partitioned graph in the IR text form (with --json: as the key \"ir\")", false},
    {"--dump-passes", "", "", "print the IR after every canonicalization pass (stderr)", false},
};

void print_help() {
  std::printf(
      "usage: sabre partition MODEL.onnx [--backend cutlass] [--dim NAME=VALUE ...] [--ir] [--json]\n\n"
      "Imports MODEL.onnx, canonicalizes it (constant and shape folding, GELU/LayerNorm idioms, BatchNorm\n"
      "folding, weight layouts, GEMM biases), applies the backend's pattern table and prints each region,\n"
      "the share of GEMM and conv FLOPs offloaded, every GEMM or conv left out with its reason and what\n"
      "runs it, and the layout the GPU lowering gives conv models (values stored NHWC, NCHW<->NHWC\n"
      "transposes at the region edges; untuned fp16 picks, as sabre compile --no-tune).\n\noptions:\n%s",
      flags_help(kFlags).c_str());
}

// The layout line of the report: what the GPU lowering (fp16, the analytic picks of sabre compile
// --no-tune, default dim ranges) stores NHWC and how many NCHW<->NHWC transposes it adds at the
// edges of the conv regions; or why the model does not lower.
std::string layout_line(const ir::Graph& partitioned) {
  codegen::LowerOptions lo;
  lo.dtype = ir::DType::f16;
  lo.pick = [](const tune::GemmProblem& p) { return tune::pick_kernels(p, tune::PickOptions{}); };
  lo.pick_conv = [](const codegen::ConvProblem& p) { return codegen::analytic_conv_kernel(p, 90); };
  try {
    codegen::Lowered low = codegen::lower(partitioned, lo);
    for (const std::string& n : low.notes)
      if (n.rfind("NHWC inside conv regions", 0) == 0) return "layout: " + n;
    return "layout: nothing runs NHWC (no conv regions): no transposes";
  } catch (const codegen::UnsupportedError& e) {
    std::string what = e.what();
    return "layout: not lowered: " + what.substr(0, what.find('\n'));
  }
}

int run(const std::vector<std::string>& argv) {
  return guarded("partition", [&] {
    ParsedArgs args = parse_args(argv, kFlags);
    if (args.help) {
      print_help();
      return kExitOk;
    }
    if (args.positional.size() != 1)
      throw UsageError(args.positional.empty() ? "no model given: sabre partition MODEL.onnx"
                                               : "one model at a time: sabre partition MODEL.onnx");
    std::string backend = args.value("--backend").value_or("cutlass");
    if (backend != "cutlass") throw UsageError("unknown backend '" + backend + "': the pattern tables are: cutlass");
    auto dims = parse_dims(dim_texts(args));

    ir::Graph g = onnx_frontend::import_model(args.positional[0]);
    add_input_shape_dims(dims, args, graph_input_dims(g));
    transform::PassOptions opts;
    opts.dump = args.has("--dump-passes");
    g = transform::canonicalize(std::move(g), opts);
    const std::string name = g.name;
    partition::PartitionResult r = partition::partition(std::move(g), cutlass_backend::pattern_table());
    partition::PartitionReport rep = partition::make_report(r, dims);
    // What runs each left-out GEMM or conv on the GPU: the native depthwise kernel, or nothing.
    for (auto& lo : rep.left_out)
      for (const ir::Node* n : r.graph.nodes())
        if (n->name() == lo.node) {
          std::string why;
          std::string route = codegen::gpu_route(*n, &why);
          lo.runs_on = route.empty() ? "no GPU path (" + why + "): sabre compile refuses the model" : "runs on " + route;
          break;
        }
    if (args.has("--json")) {
      nlohmann::ordered_json j = json_header("partition");
      j["model"] = args.positional[0];
      j["graph"] = name;
      j["backend"] = backend;
      j["regions"] = nlohmann::ordered_json::array();
      for (const auto& reg : r.regions)
        j["regions"].push_back({{"composite", reg.composite}, {"pattern", reg.pattern}, {"nodes", reg.nodes}});
      j["left_out"] = nlohmann::ordered_json::array();
      for (const auto& lo : rep.left_out)
        j["left_out"].push_back(
            {{"node", lo.node}, {"op", lo.op}, {"operands", lo.operands}, {"reason", lo.reason}, {"runs_on", lo.runs_on}});
      const auto& f = rep.flops;
      j["flops"] = {{"dims", f.bindings},
                    {"total", f.overflow ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(f.total_at)},
                    {"offloaded", f.overflow ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(f.offloaded_at)},
                    {"share", f.overflow ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(f.share())},
                    {"share_is_exact", f.exact},
                    {"total_polynomial", f.overflow ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(f.total.str())},
                    {"offloaded_polynomial", f.overflow ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(f.offloaded.str())}};
      j["layout"] = layout_line(r.graph).substr(std::string("layout: ").size());
      if (args.has("--ir")) j["ir"] = ir::print(r.graph);
      print_json(j);
      return kExitOk;
    }
    std::printf("model %s, backend %s\n%s", name.c_str(), backend.c_str(),
                partition::format_report(rep, backend).c_str());
    std::printf("%s\n", layout_line(r.graph).c_str());
    if (args.has("--ir")) std::printf("\n%s\n", ir::print(r.graph).c_str());
    return kExitOk;
  });
}

const bool reg = register_command({"partition", "cut a model into backend regions and report what was offloaded", run});

}  // namespace
}  // namespace sabre::cli
