// sabre.compile, sabre.inspect and sabre.partition in-process: the library calls the CLI's
// compile, inspect and partition commands make (tools/sabre/cmd_*.cpp), with their results as
// Python dicts that python/sabre/__init__.py turns into dataclasses.
// Tests: tests/python/test_api.py
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "backends/cutlass/patterns.h"
#include "codegen/compile.h"
#include "codegen/lower.h"
#include "codegen/lowering_summary.h"
#include "ext.h"
#include "frontend/onnx/importer.h"
#include "ir/printer.h"
#include "ir/stats.h"
#include "partition/partitioner.h"
#include "partition/report.h"
#include "sabre/compiler.h"
#include "transform/canonicalize.h"
#include "transform/fold_shapes.h"

namespace sabre::python {

namespace {

ir::DType parse_dtype(const std::string& dt) {
  if (dt == "f16" || dt == "fp16" || dt == "float16") return ir::DType::f16;
  if (dt == "bf16" || dt == "bfloat16") return ir::DType::bf16;
  raise_invalid("dtype '" + dt + "': use \"f16\" or \"bf16\"");
}

void require_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) raise_model("model file '" + path + "' does not exist");
  if (std::filesystem::is_directory(path, ec)) raise_model("model '" + path + "' is a directory, not an ONNX file");
}

// The value a symbol gets where the caller binds none: as `sabre inspect` (batch-like 1, others 8).
int64_t default_dim(const std::string& symbol) {
  std::string s = symbol;
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  bool batch_like = s.find("batch") != std::string::npos || s == "n" || s == "b" || s == "bs";
  return batch_like ? 1 : 8;
}

py::dict value_dict(const ir::Value* v) {
  py::dict d;
  d["name"] = v->name();
  if (v->type().known) {
    d["dtype"] = std::string(ir::name(v->dtype()));
    py::list shape;
    for (const ir::Dim& dim : v->shape()) {
      auto c = dim.evaluate({});
      if (c)
        shape.append(*c);
      else
        shape.append(dim.str());
    }
    d["shape"] = shape;
  } else {
    d["dtype"] = py::none();
    d["shape"] = py::none();
  }
  return d;
}

py::dict flops_dict(const ir::OpKindFlops& k, const std::map<std::string, int64_t>& bindings) {
  py::dict d;
  d["nodes"] = k.nodes;
  auto v = k.evaluate(bindings);
  d["flops"] = v ? py::cast(*v) : py::none();
  d["expression"] = k.exact ? py::cast(k.flops.str()) : py::none();
  d["unknown_nodes"] = k.unknown;
  return d;
}

py::dict inspect_model(const std::string& path, const std::map<std::string, int64_t>& dims) {
  require_file(path);
  ir::Graph g;
  ir::ModelStats st;
  {
    py::gil_scoped_release nogil;
    g = transform::fold_shapes(onnx_frontend::import_model(path));  // as sabre inspect
    st = ir::compute_stats(g);
  }
  for (const auto& [name, v] : dims)
    if (std::find(st.symbols.begin(), st.symbols.end(), name) == st.symbols.end()) {
      std::string known;
      for (const auto& s : st.symbols) known += (known.empty() ? "" : ", ") + s;
      raise_invalid("model has no dim '" + name + "'; " +
                    (known.empty() ? std::string("its inputs have static shapes") : "its dims are: " + known));
    }
  std::map<std::string, int64_t> bindings = dims;
  for (const auto& s : st.symbols)
    if (!bindings.count(s)) bindings[s] = default_dim(s);
  py::dict d;
  d["model"] = path;
  d["graph"] = g.name;
  py::list ins, outs;
  for (const ir::Value* v : st.inputs) ins.append(value_dict(v));
  for (const ir::Value* v : st.outputs) outs.append(value_dict(v));
  d["inputs"] = ins;
  d["outputs"] = outs;
  d["symbols"] = st.symbols;
  d["dims"] = bindings;
  d["nodes"] = st.num_nodes;
  d["ops"] = st.op_histogram;
  d["parameters"] = st.parameter_count;
  d["parameter_bytes"] = st.parameter_bytes;
  d["constants"] = st.num_constants;
  py::dict fl;
  for (const auto& [kind, k] : st.flops) fl[py::str(kind)] = flops_dict(k, bindings);
  d["flops"] = fl;
  d["total_flops"] = flops_dict(st.total_flops(), bindings);
  return d;
}

py::dict partition_model(const std::string& path, const std::string& dtype, const std::map<std::string, int64_t>& dims) {
  require_file(path);
  const ir::DType dt = parse_dtype(dtype);
  std::optional<partition::PartitionResult> res;
  partition::PartitionReport rep;
  codegen::LoweringSummary low;
  std::string name, text;
  {
    py::gil_scoped_release nogil;
    ir::Graph g = onnx_frontend::import_model(path);
    g = codegen::canonicalize_model(std::move(g), /*fuse_attention=*/true);  // as sabre compile
    name = g.name;
    res.emplace(partition::partition(std::move(g), cutlass_backend::pattern_table()));
    rep = partition::make_report(*res, dims);
    codegen::annotate_gpu_routes(rep, res->graph);
    codegen::LowerOptions lo;  // sabre compile's defaults, as `sabre partition` without options
    lo.dtype = dt;
    lo.fuse_attention = true;  // as canonicalized above
    low = codegen::lowering_summary(res->graph, lo);
    text = partition::format_report(rep, "cutlass");
  }
  const partition::PartitionResult& r = *res;
  py::dict d;
  d["model"] = path;
  d["graph"] = name;
  d["backend"] = "cutlass";
  d["dtype"] = std::string(ir::name(dt));
  py::list regions;
  for (size_t i = 0; i < r.regions.size(); ++i) {
    py::dict reg;
    reg["name"] = r.regions[i].composite;
    reg["pattern"] = r.regions[i].pattern;
    reg["nodes"] = r.regions[i].nodes;
    reg["summary"] = i < rep.region_lines.size() ? rep.region_lines[i] : std::string();
    regions.append(reg);
  }
  d["regions"] = regions;
  py::list left;
  for (const auto& lo : rep.left_out) {
    py::dict l;
    l["node"] = lo.node;
    l["op"] = lo.op;
    l["operands"] = lo.operands;
    l["reason"] = lo.reason;
    l["runs_on"] = lo.runs_on;
    left.append(l);
  }
  d["left_out"] = left;
  py::list refused;
  for (const auto& rf : r.refusals) {
    py::dict x;
    x["pattern"] = rf.pattern;
    x["nodes"] = rf.nodes;
    x["reason"] = rf.reason;
    refused.append(x);
  }
  d["refusals"] = refused;
  py::dict fl;
  fl["counted"] = !rep.flops.overflow;
  fl["total"] = rep.flops.total_at;
  fl["offloaded"] = rep.flops.offloaded_at;
  fl["share"] = rep.flops.share();
  fl["total_expression"] = rep.flops.total.str();
  fl["offloaded_expression"] = rep.flops.offloaded.str();
  fl["exact"] = rep.flops.exact;
  fl["dims"] = rep.flops.bindings;
  d["flops"] = fl;
  d["layout"] = low.layout;
  py::list not_fired;  // `sabre partition`'s "fusions that did not fire", one dict per line
  for (const auto& f : low.not_fired) {
    py::dict x;
    x["pass"] = f.pass;
    x["node"] = f.node;
    x["reason"] = f.reason;
    not_fired.append(x);
  }
  d["fusions_not_fired"] = not_fired;
  d["text"] = text;
  return d;
}

py::dict compile_model(const std::string& model, const std::string& out, const std::string& dtype,
                       const std::string& dynamic, const std::string& tune, bool plan_only,
                       const std::function<void(const std::string&)>& progress, const std::string& arch, int jobs,
                       const std::string& cache_dir, const std::string& db, const std::string& tuned_for) {
  require_file(model);
  if (out.empty()) raise_invalid("out is empty: give the artifact directory to write (model.sabre)");
  sabre::CompileOptions o;  // the public compile API (include/sabre/compiler.h)
  o.dtype = ir::name(parse_dtype(dtype));  // the aliases and message Python callers know
  if (!dynamic.empty()) o.dynamic_dims = codegen::parse_dynamic(dynamic);
  if (tune == "auto")
    o.tune = sabre::CompileOptions::Tune::automatic;
  else if (tune == "always")
    o.tune = sabre::CompileOptions::Tune::always;
  else if (tune == "never")
    o.tune = sabre::CompileOptions::Tune::never;
  else
    raise_invalid("tune '" + tune + "': use True, False or \"auto\"");
  o.plan_only = plan_only;
  o.arch = arch;
  o.jobs = jobs;
  o.cache_dir = cache_dir;
  o.tuning_db = db;
  o.tuned_for = tuned_for;
  if (progress)
    o.progress = [&progress](const std::string& line) {
      py::gil_scoped_acquire gil;
      progress(line);
      // Ctrl-C between stages stops the compile (the compiler's children die with it).
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    };
  sabre::CompileOutcome s;
  {
    py::gil_scoped_release nogil;
    s = sabre::compile(model, out, o);
  }
  if (!s.ok()) raise_compile_status(s.status, s.message);
  py::dict d;
  d["artifact"] = out;
  d["steps_by_op"] = s.steps_by_op;
  d["gemm_kernels"] = s.gemm_kernels;
  d["conv_kernels"] = s.conv_kernels;
  d["elementwise_kernels"] = s.elementwise_kernels;
  d["kernels_compiled"] = s.kernels_compiled;
  d["kernels_cached"] = s.kernels_cached;
  d["weights_bytes"] = s.weights_bytes;
  d["artifact_bytes_without_weights"] = s.artifact_bytes_without_weights;
  d["seconds"] = s.seconds;
  d["tune_seconds"] = s.tune_seconds;
  py::dict phases;  // insertion order is the order the phases ran
  for (const auto& [phase, secs] : s.phase_seconds) phases[py::str(phase)] = secs;
  d["phase_seconds"] = phases;
  d["tuned_points"] = s.tuned_points;
  d["measured_candidates"] = s.measured_candidates;
  d["notes"] = s.notes;
  d["plan_only"] = plan_only;
  return d;
}

}  // namespace

void register_compiler(py::module_& m) {
  m.def(
      "compile",
      [](const std::string& model, const std::string& out, const std::string& dtype, const std::string& dynamic,
         const std::string& tune, bool plan_only, const std::function<void(const std::string&)>& progress,
         const std::string& arch, int jobs, const std::string& cache_dir, const std::string& db,
         const std::string& tuned_for) {
        return guarded([&] {
          return compile_model(model, out, dtype, dynamic, tune, plan_only, progress, arch, jobs, cache_dir, db, tuned_for);
        });
      },
      py::arg("model"), py::arg("out"), py::arg("dtype"), py::arg("dynamic"), py::arg("tune"), py::arg("plan_only"),
      py::arg("progress"), py::arg("arch"), py::arg("jobs"), py::arg("cache_dir"), py::arg("db"), py::arg("tuned_for"));
  m.def(
      "inspect", [](const std::string& model, const std::map<std::string, int64_t>& dims) {
        return guarded([&] { return inspect_model(model, dims); });
      },
      py::arg("model"), py::arg("dims"));
  m.def(
      "partition",
      [](const std::string& model, const std::string& dtype, const std::map<std::string, int64_t>& dims) {
        return guarded([&] { return partition_model(model, dtype, dims); });
      },
      py::arg("model"), py::arg("dtype"), py::arg("dims"));
}

}  // namespace sabre::python
