// sabre partition: canonicalize a model, cut it into backend regions and report what went where.
// Tests: tests/golden/partition/, tests/unit/partition_models_test.cpp
#include <cstdio>
#include <string>
#include <vector>

#include "backends/cutlass/patterns.h"
#include "cli_util.h"
#include "command.h"
#include "frontend/onnx/importer.h"
#include "ir/printer.h"
#include "partition/partitioner.h"
#include "codegen/lower.h"
#include "partition/report.h"
#include "transform/canonicalize.h"

namespace sabre::cli {
namespace {

const std::vector<FlagSpec> kFlags = {
    {"--backend", "", "NAME", "the pattern table to apply (cutlass)", false},
    {"--dim", "", "NAME=VALUE", "representative value of a symbolic dim for the FLOP share (default: batch-like 1, others 128)",
     true},
    {"--ir", "", "", "also print the partitioned graph in the IR text form", false},
    {"--dump-passes", "", "", "print the IR after every canonicalization pass (stderr)", false},
};

void print_help() {
  std::printf(
      "usage: sabre partition MODEL.onnx [--backend cutlass] [--dim NAME=VALUE ...] [--ir]\n\n"
      "Imports MODEL.onnx, canonicalizes it (constant and shape folding, GELU/LayerNorm idioms, BatchNorm\n"
      "folding, weight layouts, GEMM biases), applies the backend's pattern table and prints each region,\n"
      "the share of GEMM and conv FLOPs offloaded, and every GEMM or conv left out with its reason.\n\noptions:\n%s",
      flags_help(kFlags).c_str());
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
    auto dims = parse_dims(args.all("--dim"));

    ir::Graph g = onnx_frontend::import_model(args.positional[0]);
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
    std::printf("model %s, backend %s\n%s", name.c_str(), backend.c_str(),
                partition::format_report(rep, backend).c_str());
    if (args.has("--ir")) std::printf("\n%s\n", ir::print(r.graph).c_str());
    return kExitOk;
  });
}

const bool reg = register_command({"partition", "cut a model into backend regions and report what was offloaded", run});

}  // namespace
}  // namespace sabre::cli
