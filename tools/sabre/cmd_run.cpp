// sabre run --reference: runs a model on the CPU reference executor with given or random inputs
// and writes every output (and every input it used) as .npy. Tests: tests/cli/ (end to end).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cli_util.h"
#include "command.h"
#include "frontend/onnx/importer.h"
#include "ir/npy.h"
#include "ir/printer.h"
#include "ir/tensor_size.h"
#include "reference/compare.h"
#include "reference/reference.h"
#include "run_values.h"
#include "runtime/resolve.h"
#include "runtime/artifact.h"
#include "sabre/session.h"
#include "support/files.h"
#include "transform/fold_shapes.h"

#if SABRE_RUNTIME_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace sabre::cli {
namespace {

namespace fs = std::filesystem;

const std::vector<FlagSpec> kFlags = {
    {"--reference", "", "", "run on the CPU reference executor (the only engine today)", false},
    {"--input", "", "NAME=FILE.npy", "use this tensor for input NAME (give all inputs, or none for random ones)",
     true},
    onnx_flag(),
    dim_flag("value of a symbolic dim not set by a given input"),
    {"--seed", "", "N", "seed of the random inputs (default 0)", false},
    output_flag("the directory where outputs (DIR/NAME.npy) and inputs (DIR/inputs/NAME.npy) go"),
    {"--compare-reference", "", "", "with MODEL.sabre: also run the CPU reference on the same inputs and report the error per output", false},
    {"--model", "", "MODEL.onnx", "with --compare-reference: the ONNX model (default: the one recorded in the artifact)", false},
    {"--device", "", "N", "with MODEL.sabre: the CUDA device (default 0)", false},
    {"--rtol", "", "X", "with --compare-reference: largest relative L2 error an output may have (default by dtype, below)", false},
    {"--atol", "", "X", "with --compare-reference: an output whose every element is within X passes too (default 1e-3)", false},
};

// A tolerance flag: a non-negative finite number.
std::optional<double> tolerance_flag(const ParsedArgs& args, const std::string& flag) {
  auto v = args.value(flag);
  if (!v) return std::nullopt;
  size_t used = 0;
  double x = -1;
  try {
    x = std::stod(*v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v->size() || !(x >= 0) || !std::isfinite(x))
    throw UsageError("bad " + flag + " '" + *v + "': expected a non-negative number such as 1e-2");
  return x;
}

void print_help() {
  std::printf(
      "usage: sabre run --reference MODEL.onnx [--input NAME=FILE.npy ...] [--dim NAME=VALUE ...] [--seed N] -o DIR\n\n"
      "Runs MODEL.onnx on sabre's CPU reference executor. Dims come from --dim and from the shapes of given\n"
      "inputs; every dim needs a value, except in a bare run (no --dim, no --input), where batch-like dims\n"
      "default to 1 and others to 8. Without --input, inputs are random: floats uniform\n"
      "in [-1, 1]; integer inputs used as Gather indices uniform in [0, rows of the table); other integers\n"
      "in {0, 1} (masks); bools random. Writes each output to DIR/<name>.npy and each input to\n"
      "DIR/inputs/<name>.npy (names with characters other than letters, digits, _ . - get '_' for them).\n"
      "String tensors (--reference only) are .npy files of numpy str or bytes (np.save(f, np.array(['a', 'bc'])));\n"
      "outputs are written as str (as bytes where an element is not UTF-8 text). A sequence input is a\n"
      "directory holding 0.npy, 1.npy, ... (its elements in order); a sequence output is written as the\n"
      "directory DIR/<name>/ the same way. Sequences and strings are never random: give every input when the\n"
      "model has one.\n\n"
      "       sabre run MODEL.sabre [--input NAME=FILE.npy ...] [--dim NAME=VALUE ...] [--compare-reference [--model M.onnx]] -o DIR\n\n"
      "Runs a compiled artifact (the directory sabre compile writes) on the GPU, with the same input rules.\n"
      "--compare-reference also runs the CPU reference on the same inputs and prints, per output, the max\n"
      "absolute and the relative L2 error. An output passes when its relative L2 error is at most --rtol or\n"
      "every element is within --atol; defaults: f32/f16 outputs rtol 1e-2, bf16 5e-2 (the artifact computes\n"
      "in f16 or bf16), atol 1e-3; integer and bool outputs must match exactly. Exit code 3 when any output\n"
      "is beyond them (or missing, or of another shape); 0 when all pass.\n\n"
      "options:\n%s",
      flags_help(kFlags).c_str());
}

std::string shape_text(const std::vector<int64_t>& d) { return ir::str(ir::to_shape(d)); }

std::string names_of(const std::vector<ir::Value*>& vs) {
  std::string out;
  for (const ir::Value* v : vs) out += (out.empty() ? "" : ", ") + v->name();
  return out;
}

// Values that carry `v`'s elements unchanged in value (only reshaped or cast), so an index input
// still reaches a Gather through them.
std::vector<const ir::Value*> value_aliases(const ir::Value* v) {
  static const std::set<std::string> kPassThrough = {"Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity"};
  std::vector<const ir::Value*> out = {v};
  for (size_t i = 0; i < out.size(); ++i)
    for (const ir::Node* n : out[i]->users())
      if (n->domain().empty() && kPassThrough.count(n->op()) && n->input(0) == out[i] &&
          std::find(out.begin(), out.end(), n->output(0)) == out.end())
        out.push_back(n->output(0));
  return out;
}

// Upper bound (exclusive) for random values of integer input `v`: the fewest rows of any table it
// indexes through Gather, or 2 when it indexes nothing (masks, token types).
int64_t int_bound(const ir::Value* v, const std::map<std::string, int64_t>& bindings) {
  int64_t bound = -1;
  for (const ir::Value* a : value_aliases(v))
    for (const ir::Node* n : a->users()) {
      if (!n->domain().empty() || (n->op() != "Gather" && n->op() != "GatherElements") || n->input(1) != a) continue;
      const ir::Value* data = n->input(0);
      if (!data || !data->type().known) continue;
      int64_t rank = static_cast<int64_t>(data->shape().size());
      int64_t axis = n->attr_int("axis", 0);
      if (axis < 0) axis += rank;
      if (axis < 0 || axis >= rank) continue;
      auto rows = data->shape()[static_cast<size_t>(axis)].evaluate(bindings);
      if (rows && *rows > 0) bound = bound < 0 ? *rows : std::min(bound, *rows);
    }
  return bound < 0 ? 2 : bound;
}

ir::Tensor random_input(const ir::Value* v, const std::vector<int64_t>& dims, int64_t int_hi, std::mt19937_64& rng) {
  ir::Tensor t(v->dtype(), dims);
  std::uniform_real_distribution<double> uf(-1.0, 1.0);
  std::uniform_int_distribution<int64_t> ui(0, std::max<int64_t>(int_hi, 1) - 1);
  const int64_t n = t.numel();
  if (v->dtype() == ir::DType::i64) {
    auto* p = t.mutable_data<int64_t>();
    for (int64_t i = 0; i < n; ++i) p[i] = ui(rng);
    return t;
  }
  for (int64_t i = 0; i < n; ++i) {
    if (ir::is_float(v->dtype())) t.set_f64(i, uf(rng));
    else if (v->dtype() == ir::DType::boolean) t.set_f64(i, static_cast<double>(rng() & 1));
    else t.set_f64(i, static_cast<double>(ui(rng)));
  }
  return t;
}

struct Summary {
  double min = 0, max = 0, mean = 0;
  int64_t nonfinite = 0;
};

Summary summarize(const ir::Tensor& t) {
  Summary s;
  double sum = 0;
  int64_t finite = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    double x = t.get_f64(i);
    if (!std::isfinite(x)) {
      ++s.nonfinite;
      continue;
    }
    if (finite == 0 || x < s.min) s.min = x;
    if (finite == 0 || x > s.max) s.max = x;
    sum += x;
    ++finite;
  }
  s.mean = finite ? sum / static_cast<double>(finite) : 0;
  return s;
}

// Picks a file name for `name` in `taken`'s directory that no earlier tensor took.
std::string unique_file(const std::string& name, std::set<std::string>& taken) {
  std::string base = sanitize_filename(name), f = base;
  for (int k = 1; !taken.insert(f).second; ++k) f = base + "_" + std::to_string(k);
  return f + ".npy";
}

int run_reference(const ParsedArgs& args) {
  if (args.positional.size() != 1)
    throw UsageError(args.positional.empty() ? "no model given: sabre run --reference MODEL.onnx -o DIR"
                                             : "one model at a time (got " + std::to_string(args.positional.size()) +
                                                   " paths)");
  const std::string path = args.positional[0];
  auto out_dir = args.value("--output");
  if (!out_dir) throw UsageError("no output directory: add -o DIR");
  std::map<std::string, int64_t> dims = parse_dims(dim_texts(args));
  const uint64_t seed = unsigned_flag(args, "--seed", 0, 19, "a non-negative integer");
  std::vector<std::pair<std::string, std::string>> given;  // name, file
  for (const auto& a : args.all("--input")) given.push_back(split_assignment(a, "--input", "NAME=FILE.npy"));
  if (!fs::exists(path)) throw std::runtime_error("model file '" + path + "' does not exist");

  ir::Graph g = transform::fold_shapes(onnx_frontend::import_model(path));
  const std::vector<std::string> symbols = g.symbols();
  add_input_shape_dims(dims, args, graph_input_dims(g));

  // Check names before reading files, so a typo is reported as such.
  std::map<std::string, const ir::Value*> by_name;
  for (const ir::Value* v : g.inputs()) by_name[v->name()] = v;
  std::set<std::string> seen_inputs;
  for (const auto& [name, file] : given) {
    if (!by_name.count(name))
      throw UsageError("model has no input '" + name + "'; its inputs are: " + names_of(g.inputs()));
    if (!seen_inputs.insert(name).second) throw UsageError("--input " + name + " is given twice");
  }
  // Random inputs only when none is given: a partial list is more likely a forgotten input.
  if (!given.empty())
    for (const ir::Value* v : g.inputs())
      if (!seen_inputs.count(v->name()))
        throw UsageError("input '" + v->name() + "' is not given: add --input " + v->name() +
                         "=FILE.npy (or give no --input at all for random inputs)");
  for (const auto& [name, v] : dims)
    if (std::find(symbols.begin(), symbols.end(), name) == symbols.end()) {
      std::string known;
      for (const auto& s : symbols) known += (known.empty() ? "" : ", ") + s;
      throw UsageError("model has no dim '" + name + "'; " +
                       (known.empty() ? std::string("its inputs have static shapes") : "its dims are: " + known));
    }

  // Given tensors: dtype and rank must match; plain-symbol dims bind (or must agree with) the dims.
  std::map<std::string, ir::Tensor> inputs;
  std::map<std::string, std::string> bound_by;  // symbol -> where its value came from
  std::map<std::string, int64_t> bindings = dims;
  for (const auto& [name, v] : dims) bound_by[name] = "--dim";
  for (const auto& [name, file] : given) {
    const ir::Value* v = by_name[name];
    ir::Tensor t = load_input_value(file, *v);
    if (t.is_sequence()) {  // dtype checked per element; element shapes are the ops' business
      inputs.emplace(name, std::move(t));
      continue;
    }
    const std::string expected = ir::print_type(v->type());
    const std::string got = std::string(ir::name(t.dtype())) + shape_text(t.dims());
    if (t.dtype() != v->dtype())
      throw std::runtime_error("input '" + name + "' from " + file + " has dtype " + std::string(ir::name(t.dtype())) +
                               " but the model expects " + expected + " (got " + got + ")");
    if (t.rank() != static_cast<int64_t>(v->shape().size()))
      throw std::runtime_error("input '" + name + "' from " + file + " has shape " + shape_text(t.dims()) +
                               " but the model expects " + expected);
    for (size_t i = 0; i < v->shape().size(); ++i) {
      const ir::Dim& d = v->shape()[i];
      if (!d.is_symbol()) continue;
      const std::string s = d.symbols()[0];
      auto [it, fresh] = bindings.emplace(s, t.dims()[i]);
      if (fresh) bound_by[s] = file;
      else if (it->second != t.dims()[i])
        throw std::runtime_error("input '" + name + "' from " + file + " has shape " + shape_text(t.dims()) +
                                 " but the model expects " + expected + " with " + s + "=" +
                                 std::to_string(it->second) + " (from " + bound_by[s] + ")");
    }
    inputs.emplace(name, std::move(t));
  }
  // A bare run (no --dim, no --input) is a smoke test: defaults fill every dim. Once the user says
  // anything, a dim left out is more likely forgotten than meant to be defaulted.
  const bool bare = dims.empty() && given.empty();
  std::vector<std::string> dim_notes;
  for (const auto& s : symbols) {
    if (!bindings.count(s)) {
      if (!bare)
        throw UsageError("dim '" + s + "' has no value: add --dim " + s + "=N (or run with neither --dim nor "
                         "--input to use defaults)");
      bindings[s] = default_dim(s);
      bound_by[s] = "default";
    }
    dim_notes.push_back(s + "=" + std::to_string(bindings[s]) + " (" + bound_by[s] + ")");
  }
  // Now every symbol is bound: check the given tensors' other dims (static or expressions).
  for (const auto& [name, t] : inputs) {
    const ir::Value* v = by_name[name];
    if (t.is_sequence()) continue;
    for (size_t i = 0; i < v->shape().size(); ++i) {
      auto want = v->shape()[i].evaluate(bindings);
      if (want && *want != t.dims()[i])
        throw std::runtime_error("input '" + name + "' has shape " + shape_text(t.dims()) + " but the model expects " +
                                 ir::print_type(v->type()) + " = " + shape_text([&] {
                                   std::vector<int64_t> e;
                                   for (const auto& d : v->shape()) e.push_back(d.evaluate(bindings).value_or(-1));
                                   return e;
                                 }()) + " at these dims");
    }
  }
  if (!dim_notes.empty()) {
    std::string line;
    for (const auto& n : dim_notes) line += (line.empty() ? "" : ", ") + n;
    std::printf("dims     %s\n", line.c_str());
  }

  std::mt19937_64 rng(seed);
  std::vector<std::string> generated;
  for (const ir::Value* v : g.inputs()) {
    if (inputs.count(v->name())) continue;
    if (v->type().sequence || v->dtype() == ir::DType::str)
      throw UsageError("input '" + v->name() + "' is " + (v->type().sequence ? "a sequence" : "a string tensor") +
                       ", which sabre does not make up: give every input with --input (" +
                       (v->type().sequence ? "a directory of 0.npy, 1.npy, ..." : "a .npy of numpy str") + ")");
    std::vector<int64_t> shape;
    for (const auto& d : v->shape()) {
      std::optional<int64_t> e;
      try {
        e = d.evaluate(bindings);
      } catch (const std::overflow_error&) {
        throw std::runtime_error("input '" + v->name() + "' dim " + d.str() + " overflows int64 at these dims; use smaller --dim values");
      }
      if (!e || *e < 0)
        throw std::runtime_error("input '" + v->name() + "' dim " + d.str() + " has no valid value at these dims");
      shape.push_back(*e);
    }
    // Before allocating: a declared [1<<40] or a --dim in the billions is refused by name.
    ir::check_tensor_size(v->dtype(), shape, "input '" + v->name() + "' (" + ir::print_type(v->type()) + ")");
    int64_t hi = ir::is_float(v->dtype()) || v->dtype() == ir::DType::boolean ? 2 : int_bound(v, bindings);
    inputs.emplace(v->name(), random_input(v, shape, hi, rng));
    generated.push_back(v->name() + (ir::is_float(v->dtype()) || v->dtype() == ir::DType::boolean
                                         ? ""
                                         : " in [0," + std::to_string(hi) + ")"));
  }
  if (!generated.empty()) {
    std::string line;
    for (const auto& n : generated) line += (line.empty() ? "" : ", ") + n;
    std::printf("random   %s (seed %llu)\n", line.c_str(), static_cast<unsigned long long>(seed));
  }

  // Before the run, so a bad -o fails fast.
  std::error_code ec;
  fs::create_directories(fs::path(*out_dir) / "inputs", ec);
  if (ec) throw std::runtime_error("cannot create output directory '" + *out_dir + "': " + ec.message());
  std::vector<ir::Tensor> outputs = reference::run(g, inputs);

  std::set<std::string> taken_in;
  for (const ir::Value* v : g.inputs())
    save_value((fs::path(*out_dir) / "inputs" / unique_file(v->name(), taken_in)).string(), inputs.at(v->name()));

  std::set<std::string> taken_out;
  size_t w = 0;
  for (const ir::Value* v : g.outputs()) w = std::max(w, v->name().size());
  std::printf("outputs\n");
  for (size_t i = 0; i < outputs.size() && i < g.outputs().size(); ++i) {
    const ir::Tensor& t = outputs[i];
    std::string file = (fs::path(*out_dir) / unique_file(g.outputs()[i]->name(), taken_out)).string();
    file = save_value(file, t);
    if (t.is_sequence() || t.dtype() == ir::DType::str) {  // no numeric summary
      std::printf("  %-*s  %-18s -> %s\n", static_cast<int>(w), g.outputs()[i]->name().c_str(), value_text(t).c_str(),
                  file.c_str());
      continue;
    }
    Summary s = summarize(t);
    std::string type = std::string(ir::name(t.dtype())) + shape_text(t.dims());
    std::printf("  %-*s  %-18s min %-11.5g max %-11.5g mean %-11.5g", static_cast<int>(w),
                g.outputs()[i]->name().c_str(), type.c_str(), s.min, s.max, s.mean);
    if (s.nonfinite) std::printf(" nonfinite %lld", static_cast<long long>(s.nonfinite));
    std::printf(" -> %s%s\n", file.c_str(), t.dtype() == ir::DType::bf16 ? " (bf16 saved as f32)" : "");
  }
  return kExitOk;
}

// sabre run MODEL.sabre: the artifact on the GPU (docs/RUNTIME.md section 6).
int run_artifact(const ParsedArgs& args) {
  // A bad command line is a usage error in every build, a CUDA-less one included.
  [[maybe_unused]] const std::string path = args.positional[0];
  [[maybe_unused]] auto out_dir = args.value("--output");
  if (!out_dir) throw UsageError("no output directory: add -o DIR");
  [[maybe_unused]] const int device = static_cast<int>(unsigned_flag(args, "--device", 0, 3, "a GPU index such as 0"));
  [[maybe_unused]] std::map<std::string, int64_t> dims = parse_dims(dim_texts(args));
  [[maybe_unused]] const uint64_t seed = unsigned_flag(args, "--seed", 0, 19, "a non-negative integer");
  [[maybe_unused]] const std::optional<double> rtol = tolerance_flag(args, "--rtol"), atol = tolerance_flag(args, "--atol");
  if ((rtol || atol) && !args.has("--compare-reference")) throw UsageError("--rtol and --atol go with --compare-reference");
#if SABRE_RUNTIME_HAVE_CUDA
  sabre::Session session(path, device);
  const auto& specs = session.inputs();
  {
    InputDims input_dims;
    for (const auto& sp : specs) input_dims.push_back({sp.name, sp.shape});
    add_input_shape_dims(dims, args, input_dims);
  }
  std::string in_names;
  std::set<std::string> symbols;
  for (const auto& sp : specs) {
    in_names += (in_names.empty() ? "" : ", ") + sp.name;
    for (const auto& d : sp.shape)
      if (!d.empty() && !std::isdigit(static_cast<unsigned char>(d[0])) && d.find_first_of("*+-") == std::string::npos)
        symbols.insert(d);
  }
  for (const auto& [name, v] : dims)
    if (!symbols.count(name)) throw UsageError("model has no dim '" + name + "'");
  std::map<std::string, ir::Tensor> inputs;
  for (const auto& a : args.all("--input")) {
    auto [name, file] = split_assignment(a, "--input", "NAME=FILE.npy");
    bool known = false;
    for (const auto& sp : specs) known |= sp.name == name;
    if (!known) throw UsageError("model has no input '" + name + "'; its inputs are: " + in_names);
    if (inputs.count(name)) throw UsageError("--input " + name + " is given twice");
    inputs.emplace(name, ir::load_npy(file));
  }
  if (!inputs.empty())
    for (const auto& sp : specs)
      if (!inputs.count(sp.name))
        throw UsageError("input '" + sp.name + "' is not given: add --input " + sp.name +
                         "=FILE.npy (or give no --input at all for random inputs)");
  // Dims not bound by --dim take their values from given inputs, else defaults (random inputs).
  for (const auto& sp : specs) {
    auto it = inputs.find(sp.name);
    if (it == inputs.end()) continue;
    for (size_t i = 0; i < sp.shape.size() && i < it->second.dims().size(); ++i)
      if (symbols.count(sp.shape[i])) dims.emplace(sp.shape[i], it->second.dims()[i]);
  }
  for (const auto& s : symbols) dims.emplace(s, default_dim(s));
  std::mt19937_64 rng(seed);
  for (const auto& sp : specs) {
    if (inputs.count(sp.name)) continue;
    auto dt = runtime::from_dlpack(sp.dtype);
    if (!dt) throw std::runtime_error("input '" + sp.name + "' has a dtype this CLI cannot make");
    std::vector<int64_t> shape;
    for (const auto& d : sp.shape) shape.push_back(runtime::DimExpr::parse(d).eval(dims));
    ir::Tensor t(*dt, shape);
    std::uniform_real_distribution<double> uf(-1.0, 1.0);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.set_f64(i, ir::is_float(*dt) ? uf(rng) : static_cast<double>(rng() & 1));
    inputs.emplace(sp.name, std::move(t));
  }
  std::error_code ec;
  fs::create_directories(fs::path(*out_dir) / "inputs", ec);
  if (ec) throw std::runtime_error("cannot create output directory '" + *out_dir + "': " + ec.message());

  // Host -> device, run, device -> host.
  DeviceInputs dev;
  std::vector<sabre_tensor> ins;
  for (const auto& sp : specs) {
    const ir::Tensor& t = inputs.at(sp.name);
    void* p = dev.upload(sp.name, t.bytes(), t.nbytes());
    sabre_tensor d{sp.name.c_str(), p, SABRE_DEVICE_CUDA, device, runtime::to_dlpack(t.dtype()),
                   static_cast<int32_t>(t.rank()), t.dims().data(), nullptr};
    ins.push_back(d);
  }
  sabre::ExecutionContext ctx(session);
  std::vector<sabre_tensor> outs;
  for (const auto& sp : session.outputs()) outs.push_back(sabre_tensor{sp.name.c_str(), nullptr, 0, 0, {}, 0, nullptr, nullptr});
  ctx.run(ins, outs);
  std::set<std::string> taken_in, taken_out;
  for (const auto& sp : specs)
    ir::save_npy((fs::path(*out_dir) / "inputs" / unique_file(sp.name, taken_in)).string(), inputs.at(sp.name));
  std::vector<ir::Tensor> results;
  std::printf("outputs (GPU, peak activations %.1f MiB)\n", ctx.last_stats().peak_activation_bytes / 1048576.0);
  for (size_t i = 0; i < outs.size(); ++i) {
    auto dt = runtime::from_dlpack(outs[i].dtype);
    ir::Tensor t(dt.value_or(ir::DType::f32), std::vector<int64_t>(outs[i].shape, outs[i].shape + outs[i].ndim));
    if (cudaMemcpy(t.mutable_bytes(), outs[i].data, t.nbytes(), cudaMemcpyDeviceToHost) != cudaSuccess)
      throw std::runtime_error("copying output '" + session.outputs()[i].name + "' from the GPU failed");
    const std::string file = (fs::path(*out_dir) / unique_file(session.outputs()[i].name, taken_out)).string();
    ir::save_npy(file, t);
    Summary s = summarize(t);
    std::printf("  %-24s %-18s min %-11.5g max %-11.5g mean %-11.5g", session.outputs()[i].name.c_str(),
                (std::string(ir::name(t.dtype())) + shape_text(t.dims())).c_str(), s.min, s.max, s.mean);
    if (s.nonfinite) std::printf(" nonfinite %lld", static_cast<long long>(s.nonfinite));
    std::printf(" -> %s\n", file.c_str());
    results.push_back(std::move(t));
  }
  if (!args.has("--compare-reference")) return kExitOk;
  std::string model = args.value("--model").value_or("");
  if (model.empty()) {
    // The artifact records the model's file name and checksum: look next to the artifact, then here.
    const runtime::ManifestInfo mi = runtime::ManifestInfo::from_json(
        support::read_input_file((fs::path(path) / "manifest.json").string(), "manifest", support::kMaxTextBytes));
    if (mi.source_model.empty())
      throw UsageError("--compare-reference needs the ONNX model: add --model MODEL.onnx (the artifact records none)");
    const std::string name = fs::path(mi.source_model).filename().string();
    fs::path art = fs::absolute(path).lexically_normal();
    if (!art.has_filename()) art = art.parent_path();  // "model.sabre/"
    for (const fs::path& c : {art.parent_path() / name, fs::path(name)})
      if (fs::is_regular_file(c) && (mi.source_model_checksum.empty() || runtime::file_checksum(c.string()) == mi.source_model_checksum)) {
        model = c.string();
        break;
      }
    if (model.empty())
      throw std::runtime_error("the artifact was compiled from '" + name + "', which is neither next to the artifact " +
                               "nor here with the same content; give it with --model MODEL.onnx");
  }
  if (!fs::exists(model)) throw std::runtime_error("model file '" + model + "' does not exist (give --model MODEL.onnx)");
  ir::Graph g = transform::fold_shapes(onnx_frontend::import_model(model));
  std::vector<ir::Tensor> ref = reference::run(g, inputs);
  std::printf("compare with the CPU reference (%s)\n", model.c_str());
  std::vector<std::string> beyond;
  for (size_t i = 0; i < results.size(); ++i) {
    const std::string& name = session.outputs()[i].name;
    size_t r = 0;
    while (r < g.outputs().size() && g.outputs()[r]->name() != name) ++r;
    if (r == g.outputs().size() || r >= ref.size()) {
      std::printf("  %-24s not an output of %s\n", name.c_str(), model.c_str());
      beyond.push_back(name + " (not an output of the model)");
      continue;
    }
    const ir::Tensor& a = results[i];
    const ir::Tensor& b = ref[r];
    if (a.dims() != b.dims()) {
      std::printf("  %-24s shape %s vs reference %s\n", name.c_str(), shape_text(a.dims()).c_str(), shape_text(b.dims()).c_str());
      beyond.push_back(name + " (shape " + shape_text(a.dims()) + " vs " + shape_text(b.dims()) + ")");
      continue;
    }
    reference::Tolerance tol = reference::default_tolerance(b.dtype());
    if (rtol) tol.rtol = *rtol;
    if (atol) tol.atol = *atol;
    const reference::Comparison c = reference::compare(a, b, tol);
    std::printf("  %-24s max abs %-11.4g rel L2 %-11.4g %s (rtol %g, atol %g)\n", name.c_str(), c.max_abs, c.rel_l2,
                c.within ? "ok  " : "FAIL", tol.rtol, tol.atol);
    if (!c.within) {
      char buf[96];
      std::snprintf(buf, sizeof buf, " (rel L2 %.3g > %g, max abs %.3g > %g)", c.rel_l2, tol.rtol, c.max_abs, tol.atol);
      beyond.push_back(name + buf);
    }
  }
  if (!beyond.empty()) {
    std::string list;
    for (const auto& b : beyond) list += (list.empty() ? "" : ", ") + b;
    std::fflush(stdout);
    std::fprintf(stderr, "sabre run: error: %zu of %zu outputs differ from the CPU reference beyond tolerance: %s\n",
                 beyond.size(), results.size(), list.c_str());
    return kExitMismatch;
  }
  return kExitOk;
#else
  throw std::runtime_error("this sabre was built without CUDA: it cannot run artifacts on a GPU");
#endif
}

int run(const std::vector<std::string>& argv) {
  return guarded("run", [&] {
    ParsedArgs args = parse_args(argv, kFlags);
    if (args.help) {
      print_help();
      return kExitOk;
    }
    if (!args.has("--reference") && args.positional.size() == 1 && fs::is_directory(args.positional[0]))
      return run_artifact(args);
    if (!args.has("--reference")) {
      std::fprintf(stderr,
                   "sabre run: error: running on the GPU needs a compiled artifact (a directory written by "
                   "`sabre compile MODEL.onnx -o MODEL.sabre`); use --reference to run an ONNX model on the CPU "
                   "reference executor\n");
      return kExitUsage;
    }
    return run_reference(args);
  });
}

const bool reg = register_command({"run", "run a model (--reference: on the CPU reference executor)", run});

}  // namespace
}  // namespace sabre::cli
