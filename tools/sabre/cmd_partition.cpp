// sabre partition: canonicalize a model, cut it into backend regions and report what went where.
// Tests: tests/golden/partition/, tests/unit/partition_models_test.cpp, tests/cli/partition_report.py
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "backends/cutlass/patterns.h"
#include "cli_util.h"
#include "command.h"
#include "frontend/onnx/importer.h"
#include "ir/printer.h"
#include "partition/partitioner.h"
#include "codegen/compile.h"
#include "codegen/conv_routes.h"
#include "codegen/lower.h"
#include "codegen/lowering_summary.h"
#include "partition/report.h"
#include "support/files.h"
#include "transform/canonicalize.h"

namespace sabre::cli {
namespace {

const std::vector<FlagSpec> kFlags = {
    onnx_flag(),
    {"--backend", "", "NAME", "the pattern table to apply (default cutlass, the only one)", false},
    dim_flag("representative value of a symbolic dim for the FLOP share (default: batch-like 1, others 128)"),
    json_flag(),
    {"--ir", "", "", "also print the partitioned graph in the IR text form (with --json: as the key \"ir\")", false},
    {"--dot", "", "FILE.dot", "also write the partitioned graph for Graphviz (`dot -Tsvg FILE.dot -o FILE.svg`): each CUTLASS region a box with its pattern, other ops as ellipses, GEMMs and convs left out in red", false},
    {"--dump-passes", "", "", "print the IR after every canonicalization pass (stderr)", false},
    dtype_flag("compute dtype the lowering is shown for: fp16 or bf16 (default fp16), as sabre compile"),
    {"--no-fuse-attention", "", "", "as sabre compile: keep attention as GEMMs, softmax and permutes", false},
    {"--stem", "", "direct|im2col|conv", "as sabre compile: how the RGB stem conv runs (default direct)", false},
    {"--no-pointwise-gemm", "", "", "as sabre compile: run 1x1 stride-1 convs on the conv kernels", false},
};

void print_help() {
  std::printf(
      "usage: sabre partition MODEL.onnx [--backend cutlass] [--dim NAME=VALUE ...] [--ir] [--dot FILE.dot] [--json]\n\n"
      "Imports MODEL.onnx, canonicalizes it as sabre compile does (constant and shape folding, GELU/LayerNorm\n"
      "idioms, BatchNorm folding, 1-D convs as 2-D, grouped convs regrouped, weight layouts, GEMM biases),\n"
      "applies the backend's pattern table and prints each region, the share of GEMM and conv FLOPs\n"
      "offloaded, every GEMM or conv left out with its reason and what runs it, every fusion of the\n"
      "lowering that did not fire with its reason, and the layout the GPU lowering gives conv models\n"
      "(values stored NHWC, NCHW<->NHWC transposes at the region edges). The lowering runs with the\n"
      "options given, as sabre compile --no-tune would.\n\noptions:\n%s",
      flags_help(kFlags).c_str());
}

// The partitioned graph as Graphviz DOT: one vertex per node (a CUTLASS region's Composite as a
// filled box naming its pattern, a GEMM or conv the table left out in red, other ops as ellipses),
// one edge per value read, labelled with its type; graph inputs and outputs as plain boxes.
std::string to_dot(const ir::Graph& g) {
  auto quote = [](const std::string& t) {
    std::string o = "\"";
    for (char c : t) {
      if (c == '\n') {
        o += "\\n";  // Graphviz's line break in a label
        continue;
      }
      if (c == '"' || c == '\\') o += '\\';
      if (static_cast<unsigned char>(c) >= 0x20) o += c;
    }
    return o + "\"";
  };
  std::string o = "digraph " + quote(g.name) + " {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n"
                  "  edge [fontname=\"Helvetica\", fontsize=8];\n";
  std::map<const ir::Node*, std::string> id;
  for (const ir::Node* n : g.nodes()) id[n] = "n" + std::to_string(id.size());
  for (const ir::Value* v : g.inputs())
    o += "  " + quote("in:" + v->name()) + " [shape=box, label=" + quote(v->name() + "\n" + ir::print_type(v->type())) + "];\n";
  for (const ir::Node* n : g.nodes()) {
    std::string attrs;
    if (n->op() == "Composite") {
      attrs = "shape=box, style=filled, fillcolor=\"#cfe2ff\", label=" +
              quote(n->attr_string("pattern", "region") + "\n" + n->name());
    } else {
      const bool heavy = n->op() == "MatMul" || n->op() == "Gemm" || n->op() == "Conv" || n->op() == "MatMulTransB";
      attrs = std::string(heavy ? "color=red, fontcolor=red, " : "") + "label=" + quote(n->op() + "\n" + n->name());
    }
    o += "  " + id[n] + " [" + attrs + "];\n";
  }
  for (const ir::Node* n : g.nodes())
    for (const ir::Value* v : n->inputs()) {
      if (!v || v->is_constant()) continue;
      const std::string from = v->producer() ? id[v->producer()] : quote("in:" + v->name());
      o += "  " + from + " -> " + id[n] + " [label=" + quote(ir::print_type(v->type())) + "];\n";
    }
  for (const ir::Value* v : g.outputs()) {
    o += "  " + quote("out:" + v->name()) + " [shape=box, label=" + quote(v->name()) + "];\n";
    if (v->producer()) o += "  " + id[v->producer()] + " -> " + quote("out:" + v->name()) + ";\n";
  }
  return o + "}\n";
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
    codegen::LowerOptions lo;
    lo.dtype = dtype_choice(args, {"f16", "bf16"}, "f16") == "bf16" ? ir::DType::bf16 : ir::DType::f16;
    lo.fuse_attention = !args.has("--no-fuse-attention");
    lo.stem = stem_flag(args);
    lo.pointwise_gemm = !args.has("--no-pointwise-gemm");
    g = codegen::canonicalize_model(std::move(g), lo.fuse_attention, args.has("--dump-passes"));
    const std::string name = g.name;
    partition::PartitionResult r = partition::partition(std::move(g), cutlass_backend::pattern_table());
    if (auto dot = args.value("--dot")) {
      if (dot->empty()) throw UsageError("--dot needs a file name");
      const std::string text = to_dot(r.graph);
      support::write_output_file(*dot, text.data(), text.size());
    }
    partition::PartitionReport rep = partition::make_report(r, dims);
    // What runs each left-out GEMM or conv on the GPU: the native depthwise kernel, or nothing.
    codegen::annotate_gpu_routes(rep, r.graph);
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
      j["conv_routes"] = nlohmann::ordered_json::array();
      for (const auto& cr : codegen::conv_routes(rep, r.graph))
        j["conv_routes"].push_back({{"node", cr.node}, {"route", cr.route}, {"why", cr.why}});
      const codegen::LoweringSummary low = codegen::lowering_summary(r.graph, lo);
      j["layout"] = low.layout;
      j["fusions_not_fired"] = nlohmann::ordered_json::array();
      for (const auto& f : low.not_fired) j["fusions_not_fired"].push_back(f.pass + ": " + f.node + ": " + f.reason);
      if (args.has("--ir")) j["ir"] = ir::print(r.graph);
      print_json(j);
      return kExitOk;
    }
    std::printf("model %s, backend %s\n%s", name.c_str(), backend.c_str(),
                partition::format_report(rep, backend).c_str());
    std::printf("%s", codegen::format_conv_routes(codegen::conv_routes(rep, r.graph)).c_str());
    const codegen::LoweringSummary low = codegen::lowering_summary(r.graph, lo);
    if (!low.not_fired.empty()) {
      std::printf("fusions that did not fire (%zu):\n", low.not_fired.size());
      for (const auto& f : low.not_fired) std::printf("  %s: %s: %s\n", f.pass.c_str(), f.node.c_str(), f.reason.c_str());
    }
    std::printf("layout: %s\n", low.layout.c_str());
    if (args.has("--ir")) std::printf("\n%s\n", ir::print(r.graph).c_str());
    return kExitOk;
  });
}

const bool reg = register_command({"partition", "cut a model into backend regions and report what was offloaded", run});

}  // namespace
}  // namespace sabre::cli
