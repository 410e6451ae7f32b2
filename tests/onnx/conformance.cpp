// ONNX node conformance: imports every test model of onnx's backend node tests, runs it on the
// reference executor and compares with the expected outputs. The evidence that the importer, shape
// inference and the reference agree with ONNX semantics.
//
// Usage: sabre_onnx_conformance [node-test-dir] [--filter SUBSTRING] [--verbose] [--expected FILE]
// A test is skipped when sabre does not support it (op, attribute value, dtype: the importer says
// `unsupported`, or no reference kernel exists); every other problem is a failure. With --expected,
// every test FILE names (one a line, # comments) must pass: a skip there is a failure too, so an op
// that stops being supported cannot hide as a skip. Passing tests FILE lacks are listed to be added.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#ifndef ONNX_ML
#define ONNX_ML 1  // Debian builds onnx with ONNX_ML (onnx-ml.pb.h)
#endif
#include <onnx/onnx_pb.h>

#include <fstream>

#include "frontend/onnx/importer.h"
#include "ir/infer.h"
#include "reference/reference.h"
#include "transform/fold_shapes.h"

namespace fs = std::filesystem;
using sabre::ir::Tensor;

namespace {

constexpr double kRtol = 1e-3, kAtol = 1e-5;
constexpr int kMinPassed = 820;

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// A skip reason without the per-test parts (model path, node and value names), so equal reasons group.
std::string skip_key(const std::string& msg) {
  std::string line = first_line(msg);
  if (auto p = line.find("model.onnx: "); p != std::string::npos) line = line.substr(p + 12);
  const std::string ops_tag = "ops sabre does not support (";
  if (auto p = line.find(ops_tag); p != std::string::npos) {
    auto e = line.find(')', p);
    return "unsupported op " + line.substr(p + ops_tag.size(), e - p - ops_tag.size());
  }
  if (line.rfind("model uses ONNX opset ", 0) == 0) return line.substr(0, line.find(';')) + ", outside 13..21";
  // Blank out the quoted name after node/input/output/initializer; keep quoted values ('cubic').
  for (const char* tag : {"node '", "input '", "output '", "initializer '"}) {
    for (size_t p = line.find(tag); p != std::string::npos; p = line.find(tag, p + 1)) {
      size_t b = p + std::string(tag).size(), e = line.find('\'', b);
      if (e == std::string::npos) break;
      line.replace(b, e - b, "");
    }
  }
  if (auto p = line.find("node '' ("); p == 0)
    if (auto q = line.find("): "); q != std::string::npos) line = line.substr(q + 3);
  return line.size() > 110 ? line.substr(0, 110) + "..." : line;
}

std::string dims_str(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

// Empty when equal, else what differs.
std::string compare(const Tensor& got, const Tensor& want) {
  if (got.is_sequence() != want.is_sequence()) return got.is_sequence() ? "a sequence vs an expected tensor" : "a tensor vs an expected sequence";
  if (want.is_sequence()) {
    if (got.elements().size() != want.elements().size())
      return "sequence of " + std::to_string(got.elements().size()) + " vs expected " + std::to_string(want.elements().size());
    for (size_t i = 0; i < want.elements().size(); ++i)
      if (std::string d = compare(got.elements()[i], want.elements()[i]); !d.empty()) return "element " + std::to_string(i) + ": " + d;
    return "";
  }
  if (got.dtype() != want.dtype())
    return "dtype " + std::string(sabre::ir::name(got.dtype())) + " vs expected " + std::string(sabre::ir::name(want.dtype()));
  if (got.dims() != want.dims()) return "shape " + dims_str(got.dims()) + " vs expected " + dims_str(want.dims());
  if (want.dtype() == sabre::ir::DType::str) {
    for (int64_t i = 0; i < want.numel(); ++i)
      if (got.strings()[i] != want.strings()[i])
        return "element " + std::to_string(i) + ": '" + got.strings()[i] + "' vs expected '" + want.strings()[i] + "'";
    return "";
  }
  const bool fl = sabre::ir::is_float(want.dtype());
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < want.numel(); ++i) {
    bool ok;
    if (fl) {
      double a = got.get_f64(i), b = want.get_f64(i);
      ok = (std::isnan(a) && std::isnan(b)) || a == b || std::fabs(a - b) <= kAtol + kRtol * std::fabs(b);
    } else {
      ok = got.get_i64(i) == want.get_i64(i);
    }
    if (!ok && bad++ == 0) first = i;
  }
  if (!bad) return "";
  char buf[200];
  if (fl)
    std::snprintf(buf, sizeof buf, "%lld of %lld elements differ; first at %lld: %.8g vs expected %.8g", (long long)bad,
                  (long long)want.numel(), (long long)first, got.get_f64(first), want.get_f64(first));
  else
    std::snprintf(buf, sizeof buf, "%lld of %lld elements differ; first at %lld: %lld vs expected %lld", (long long)bad,
                  (long long)want.numel(), (long long)first, (long long)got.get_i64(first),
                  (long long)want.get_i64(first));
  return buf;
}

// input_0.pb, input_1.pb, ... in numeric order.
std::vector<fs::path> numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> out;
  for (int i = 0;; ++i) {
    fs::path p = dir / (prefix + std::to_string(i) + ".pb");
    if (!fs::exists(p)) break;
    out.push_back(p);
  }
  return out;
}

// ONNX stores bfloat16 test data as UINT16 bit patterns (numpy has no bfloat16): read those as bf16
// where the model wants bf16; everything else goes through the importer's loader.
Tensor load_pb(const fs::path& path, const sabre::ir::Value* want) {
  using sabre::onnx_frontend::ImportError;
  if (want && want->type().sequence) return sabre::onnx_frontend::load_sequence_pb(path.string(), want->dtype());
  try {
    return sabre::onnx_frontend::load_tensor_pb(path.string());
  } catch (const ImportError& e) {
    if (e.kind != ImportError::Kind::unsupported || !want || want->dtype() != sabre::ir::DType::bf16) throw;
    std::ifstream f(path, std::ios::binary);
    onnx::TensorProto tp;
    if (!tp.ParseFromIstream(&f) || tp.data_type() != onnx::TensorProto::UINT16) throw;
    std::vector<int64_t> dims(tp.dims().begin(), tp.dims().end());
    Tensor t(sabre::ir::DType::bf16, dims);
    const size_t n = static_cast<size_t>(t.numel());
    if (tp.has_raw_data() && tp.raw_data().size() == 2 * n) {
      std::memcpy(t.mutable_bytes(), tp.raw_data().data(), 2 * n);
    } else if (static_cast<size_t>(tp.int32_data_size()) == n) {
      for (size_t i = 0; i < n; ++i) t.mutable_data<uint16_t>()[i] = static_cast<uint16_t>(tp.int32_data(static_cast<int>(i)));
    } else {
      throw;
    }
    return t;
  }
}

// Empty when the tensor fits the input's declared static dims.
std::string declared_mismatch(const Tensor& t, const sabre::ir::Value* v) {
  if (!v->type().known || t.is_sequence()) return "";
  const auto& s = v->shape();
  bool ok = static_cast<size_t>(t.rank()) == s.size();
  for (size_t i = 0; ok && i < s.size(); ++i) ok = !s[i].is_static() || s[i].value() == t.dims()[i];
  return ok ? "" : "input '" + v->name() + "' data has shape " + dims_str(t.dims()) + " but the model declares " + sabre::ir::str(s);
}

// Tests whose expected data disagrees with the opset-21 semantics sabre implements; skipped with the reason.
const std::map<std::string, std::string> kKnownDivergent = {
    // libonnx-testdata 1.12 truncates float -> bfloat16; ONNX's Cast rounds to nearest even, as sabre does.
    {"test_cast_FLOAT_to_BFLOAT16", "expected data truncates to bf16; ONNX Cast rounds to nearest even"},
};

enum class Outcome { pass, fail, skip };

struct Result {
  Outcome outcome;
  std::string detail;     // failure message or skip reason
  bool no_infer = false;  // ran on the reference without shape inference (runtime axes)
};

Result run_test(const fs::path& dir) {
  using sabre::onnx_frontend::ImportError;
  if (auto it = kKnownDivergent.find(dir.filename().string()); it != kKnownDivergent.end())
    return {Outcome::skip, "known divergence: " + it->second};
  sabre::ir::Graph g;
  bool no_infer = false;
  const std::string model = (dir / "model.onnx").string();
  try {
    g = sabre::transform::fold_shapes(sabre::onnx_frontend::import_model(model));  // as sabre run --reference
  } catch (const ImportError& e) {
    // Axes/split sizes fed as run-time inputs: sabre compiles only with them constant, but the reference
    // executor needs no static shapes, so its semantics are still checked on the untyped graph.
    const std::string msg = e.what();
    const bool runtime_axes = msg.find("computes it at run time") != std::string::npos;
    if (!runtime_axes && e.kind == ImportError::Kind::unsupported) return {Outcome::skip, skip_key(msg)};
    if (!runtime_axes) return {Outcome::fail, "import: " + first_line(msg)};
    try {
      g = sabre::onnx_frontend::import_model(model, {.infer = false});
      no_infer = true;
    } catch (const std::exception& e2) {
      return {Outcome::fail, "import without shape inference: " + first_line(e2.what())};
    }
  } catch (const std::exception& e) {
    return {Outcome::fail, "import: " + first_line(e.what())};
  }
  for (const sabre::ir::Node* n : g.nodes())
    if (!sabre::reference::has_kernel(n->domain(), n->op()))
      return {Outcome::skip, "no reference kernel for op " + (n->domain().empty() ? "" : n->domain() + ".") + n->op()};

  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return {Outcome::fail, "no test_data_set_* directory"};

  for (const fs::path& set : sets) {
    std::map<std::string, Tensor> inputs;
    std::vector<Tensor> expected;
    try {
      std::vector<fs::path> ins = numbered(set, "input_");
      if (ins.size() != g.inputs().size())
        return {Outcome::fail, set.filename().string() + ": " + std::to_string(ins.size()) + " input files for " +
                                   std::to_string(g.inputs().size()) + " graph inputs"};
      for (size_t i = 0; i < ins.size(); ++i) {
        Tensor t = load_pb(ins[i], g.inputs()[i]);
        // The test data contradicts the model (castlike *_expanded): nothing to check sabre against.
        if (std::string m = declared_mismatch(t, g.inputs()[i]); !m.empty())
          return {Outcome::skip, "test data does not match the model's declared input shape"};
        inputs[g.inputs()[i]->name()] = std::move(t);
      }
      std::vector<fs::path> outs = numbered(set, "output_");
      for (size_t i = 0; i < outs.size(); ++i)
        expected.push_back(load_pb(outs[i], i < g.outputs().size() ? g.outputs()[i] : nullptr));
    } catch (const ImportError& e) {
      if (e.kind == ImportError::Kind::unsupported) return {Outcome::skip, "test data: " + skip_key(e.what())};
      return {Outcome::fail, "test data: " + first_line(e.what())};
    }
    std::vector<Tensor> got;
    try {
      got = sabre::reference::run(g, inputs);
    } catch (const std::exception& e) {
      return {Outcome::fail, "run: " + first_line(e.what())};
    }
    if (got.size() != expected.size())
      return {Outcome::fail, std::to_string(got.size()) + " outputs vs " + std::to_string(expected.size()) + " expected"};
    for (size_t i = 0; i < got.size(); ++i) {
      std::string diff = compare(got[i], expected[i]);
      if (!diff.empty()) return {Outcome::fail, "output " + std::to_string(i) + " ('" + g.outputs()[i]->name() + "'): " + diff};
    }
  }
  return {Outcome::pass, "", no_infer};
}

}  // namespace

int main(int argc, char** argv) {
  fs::path root = "/usr/share/libonnx-testdata/data/node";
  std::string filter;
  bool verbose = false;
  fs::path expected_file;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--filter" && i + 1 < argc) filter = argv[++i];
    else if (a == "--expected" && i + 1 < argc) expected_file = argv[++i];
    else if (a == "--verbose") verbose = true;
    else if (a == "-h" || a == "--help") {
      std::cout << "usage: sabre_onnx_conformance [node-test-dir] [--filter SUBSTRING] [--verbose] [--expected FILE]\n";
      return 0;
    } else root = a;
  }
  if (!fs::is_directory(root)) {
    std::cerr << "error: test directory " << root << " does not exist; install libonnx-testdata or pass the path\n";
    return 2;
  }
  std::vector<fs::path> tests;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory() && fs::exists(e.path() / "model.onnx") &&
        (filter.empty() || e.path().filename().string().find(filter) != std::string::npos))
      tests.push_back(e.path());
  std::sort(tests.begin(), tests.end());

  std::set<std::string> expected;
  if (!expected_file.empty()) {
    std::ifstream f(expected_file);
    if (!f) {
      std::cerr << "error: cannot read the expected-pass list " << expected_file << "\n";
      return 2;
    }
    for (std::string line; std::getline(f, line);)
      if (!line.empty() && line[0] != '#') expected.insert(line);
  }
  int passed = 0, failed = 0, skipped = 0, passed_no_infer = 0;
  std::map<std::string, std::vector<std::string>> skips;
  std::vector<std::string> unlisted;
  for (const fs::path& t : tests) {
    const std::string name = t.filename().string();
    Result r = run_test(t);
    if (r.outcome == Outcome::skip && expected.count(name)) {
      r.outcome = Outcome::fail;
      r.detail = "expected to pass (" + expected_file.filename().string() + ") but skipped: " + r.detail;
    }
    if (r.outcome == Outcome::pass && !expected_file.empty() && !expected.count(name)) unlisted.push_back(name);
    switch (r.outcome) {
      case Outcome::pass:
        ++passed;
        passed_no_infer += r.no_infer;
        if (verbose) std::cout << "PASS " << name << "\n";
        break;
      case Outcome::fail:
        ++failed;
        std::cout << "FAIL " << name << ": " << r.detail << "\n";
        break;
      case Outcome::skip:
        ++skipped;
        skips[r.detail].push_back(name);
        if (verbose) std::cout << "SKIP " << name << ": " << r.detail << "\n";
        break;
    }
  }
  std::vector<std::pair<std::string, std::vector<std::string>>> by_count(skips.begin(), skips.end());
  std::stable_sort(by_count.begin(), by_count.end(), [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  if (!by_count.empty()) std::cout << "skip reasons:\n";
  for (const auto& [reason, names] : by_count)
    std::cout << "  " << names.size() << "  " << reason << "  (e.g. " << names.front() << ")\n";
  if (passed_no_infer)
    std::cout << passed_no_infer << " of the passes ran without shape inference: their axes or split sizes are "
              << "runtime inputs, which sabre's shape inference needs as constants\n";
  if (!unlisted.empty()) {
    std::cout << unlisted.size() << " passing tests are not in " << expected_file << " (add them):\n";
    for (const auto& n : unlisted) std::cout << "  " << n << "\n";
  }
  std::cout << passed << " passed, " << failed << " failed, " << skipped << " skipped\n";
  if (failed > 0) return 1;
  if (filter.empty() && passed < kMinPassed) {
    std::cout << "error: only " << passed << " tests passed; at least " << kMinPassed << " must\n";
    return 1;
  }
  return 0;
}
