// sabre inspect: what a model is (inputs, outputs, ops, parameters, GEMM/conv FLOPs) and, with
// --ir, its graph in the IR text form. Tests: tests/cli/ (end to end).
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_util.h"
#include "command.h"
#include "frontend/onnx/importer.h"
#include "ir/printer.h"
#include "ir/stats.h"
#include "transform/fold_shapes.h"

namespace sabre::cli {
namespace {

const std::vector<FlagSpec> kFlags = {
    onnx_flag(),
    dim_flag("value of a symbolic dim for the numeric FLOPs (default: batch-like 1, others 8)"),
    {"--ir", "", "", "also print the graph in sabre's IR text form (docs/IR.md; with --json: as the key \"ir\")", false},
    {"--no-fold", "", "", "print the IR as imported, before shape-subgraph folding", false},
    json_flag(),
};

void print_help() {
  std::printf(
      "usage: sabre inspect MODEL.onnx [--dim NAME=VALUE ...] [--ir] [--json]\n\n"
      "Imports MODEL.onnx (with shape inference) and prints its inputs and outputs with symbolic dims,\n"
      "the op histogram, the parameter count and the GEMM and convolution FLOPs per op kind, both as\n"
      "polynomials in the dims and as numbers for the --dim values.\n\noptions:\n%s",
      flags_help(kFlags).c_str());
}

std::string join_bindings(const std::map<std::string, int64_t>& b, const std::vector<std::string>& order) {
  std::string out;
  for (const auto& s : order) {
    auto it = b.find(s);
    if (it == b.end()) continue;
    out += (out.empty() ? "" : ", ") + s + "=" + std::to_string(it->second);
  }
  return out;
}

// A dim for JSON: its number where static, else its expression ("batch", "seq*2").
nlohmann::ordered_json dim_json(const ir::Dim& d) {
  if (d.is_static()) return d.value();
  return d.str();
}

nlohmann::ordered_json values_json(const std::vector<const ir::Value*>& vs) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const ir::Value* v : vs) {
    nlohmann::ordered_json e;
    e["name"] = v->name();
    if (v->type().known) {
      e["dtype"] = std::string(ir::name(v->dtype()));
      e["shape"] = nlohmann::ordered_json::array();
      for (const auto& d : v->shape()) e["shape"].push_back(dim_json(d));
    } else {
      e["dtype"] = nullptr;
      e["shape"] = nullptr;
    }
    a.push_back(std::move(e));
  }
  return a;
}

std::string with_commas(int64_t v) {
  std::string s = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return (v < 0 ? "-" : "") + out;
}

int run(const std::vector<std::string>& argv) {
  return guarded("inspect", [&] {
    ParsedArgs args = parse_args(argv, kFlags);
    if (args.help) {
      print_help();
      return kExitOk;
    }
    if (args.positional.size() != 1)
      throw UsageError(args.positional.empty() ? "no model given: sabre inspect MODEL.onnx"
                                               : "one model at a time (got " + std::to_string(args.positional.size()) +
                                                     " paths)");
    const std::string path = args.positional[0];
    std::map<std::string, int64_t> dims = parse_dims(dim_texts(args));
    if (!std::filesystem::exists(path)) throw std::runtime_error("model file '" + path + "' does not exist");

    ir::Graph g = onnx_frontend::import_model(path);
    if (!args.has("--no-fold")) g = transform::fold_shapes(std::move(g));
    ir::ModelStats st = ir::compute_stats(g);
    add_input_shape_dims(dims, args, graph_input_dims(g));

    for (const auto& [name, v] : dims)
      if (std::find(st.symbols.begin(), st.symbols.end(), name) == st.symbols.end()) {
        std::string known;
        for (const auto& s : st.symbols) known += (known.empty() ? "" : ", ") + s;
        throw UsageError("model has no dim '" + name + "'; " +
                         (known.empty() ? std::string("its inputs have static shapes") : "its dims are: " + known));
      }
    std::map<std::string, int64_t> bindings = dims;
    std::vector<std::string> defaulted;
    for (const auto& s : st.symbols)
      if (!bindings.count(s)) {
        bindings[s] = default_dim(s);
        defaulted.push_back(s);
      }

    if (args.has("--json")) {
      nlohmann::ordered_json j = json_header("inspect");
      j["model"] = path;
      j["graph"] = g.name;
      j["inputs"] = values_json(st.inputs);
      j["outputs"] = values_json(st.outputs);
      j["dims"] = nlohmann::ordered_json::object();
      for (const auto& s : st.symbols) j["dims"][s] = bindings[s];
      j["defaulted_dims"] = defaulted;
      j["nodes"] = st.num_nodes;
      j["ops"] = st.op_histogram;
      j["parameters"] = {{"count", st.parameter_count}, {"bytes", st.parameter_bytes}, {"constants", st.num_constants}};
      j["flops"] = nlohmann::ordered_json::object();
      for (const auto& [kind, k] : st.flops) {
        auto v = k.evaluate(bindings);
        j["flops"][kind] = {{"nodes", k.nodes},
                            {"flops", v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr)},
                            {"polynomial", k.exact ? nlohmann::ordered_json(k.flops.str()) : nlohmann::ordered_json(nullptr)},
                            {"nodes_not_inferred", k.unknown}};
      }
      auto total = st.total_flops().evaluate(bindings);
      j["total_flops"] = total ? nlohmann::ordered_json(*total) : nlohmann::ordered_json(nullptr);
      if (args.has("--ir")) j["ir"] = ir::print(g);
      print_json(j);
      return kExitOk;
    }
    std::printf("model    %s (graph '%s')\n", path.c_str(), g.name.c_str());
    size_t w = 0;
    for (const auto* list : {&st.inputs, &st.outputs})
      for (const ir::Value* v : *list) w = std::max(w, v->name().size());
    auto print_values = [&](const char* title, const std::vector<const ir::Value*>& vs) {
      std::printf("%s\n", title);
      for (const ir::Value* v : vs)
        std::printf("  %-*s  %s\n", static_cast<int>(w), v->name().c_str(),
                    v->type().known ? ir::print_type(v->type()).c_str() : "(type not inferred)");
    };
    print_values("inputs", st.inputs);
    print_values("outputs", st.outputs);
    if (!st.symbols.empty()) {
      std::string given = join_bindings(dims, st.symbols);
      std::map<std::string, int64_t> def;
      for (const auto& s : defaulted) def[s] = bindings[s];
      std::string defaults = join_bindings(def, st.symbols);
      std::printf("dims     %s", join_bindings(bindings, st.symbols).c_str());
      if (!defaulted.empty()) std::printf("   (defaults: %s; set with --dim NAME=VALUE)", defaults.c_str());
      std::printf("\n");
    }

    std::printf("\nops      %lld nodes, %zu kinds\n", static_cast<long long>(st.num_nodes), st.op_histogram.size());
    std::vector<std::pair<std::string, int64_t>> hist(st.op_histogram.begin(), st.op_histogram.end());
    std::stable_sort(hist.begin(), hist.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    for (const auto& [op, n] : hist) std::printf("  %-24s %6lld\n", op.c_str(), static_cast<long long>(n));

    std::printf("\nparameters  %s (%s elements of float constants, %s bytes; %lld constants in all)\n",
                ir::human_count(static_cast<double>(st.parameter_count)).c_str(),
                with_commas(st.parameter_count).c_str(), with_commas(st.parameter_bytes).c_str(),
                static_cast<long long>(st.num_constants));

    std::printf("\nFLOPs at %s\n", st.symbols.empty() ? "the model's static shapes" : join_bindings(bindings, st.symbols).c_str());
    if (st.flops.empty()) std::printf("  no MatMul, Gemm, Conv or ConvTranspose nodes\n");
    auto flops_line = [&](const std::string& kind, const ir::OpKindFlops& k) {
      auto v = k.evaluate(bindings);  // in double: a count past int64 still prints right
      std::string num = v ? ir::human_count(*v) : "?";
      char sci[32] = "";
      if (v) std::snprintf(sci, sizeof sci, "%.4g", *v);
      std::printf("  %-14s %4lld nodes  %10s   %s", kind.c_str(), static_cast<long long>(k.nodes), num.c_str(),
                  k.exact ? k.flops.str().c_str() : sci);
      if (k.unknown) std::printf("   (+%lld nodes with shapes not inferred)", static_cast<long long>(k.unknown));
      std::printf("\n");
    };
    for (const auto& [kind, k] : st.flops) flops_line(kind, k);
    if (st.flops.size() > 1) flops_line("total", st.total_flops());

    if (args.has("--ir")) std::printf("\n%s", ir::print(g).c_str());
    return kExitOk;
  });
}

const bool reg = register_command({"inspect", "show a model's inputs, ops, parameters and FLOPs (--ir: its IR)", run});

}  // namespace
}  // namespace sabre::cli
