// The helpers the plan tests share (plan_interp.h): lowering a graph and checking the interpreted
// plan against the reference executor, and finding steps and params in a plan.
#include "plan_interp.h"

#include <gtest/gtest.h>

#include <deque>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "backends/cutlass/conv_spec.h"
#include "backends/cutlass/patterns.h"
#include "backends/native/stem_conv.h"
#include "codegen/compile.h"
#include "codegen/lower.h"
#include "frontend/onnx/importer.h"
#include "ir/infer.h"
#include "ir/printer.h"
#include "partition/partitioner.h"
#include "reference/reference.h"
#include "runtime/resolve.h"
#include "transform/canonicalize.h"
#include "tune/conv_tune.h"

namespace sabre::plan_interp {

namespace fs = std::filesystem;

std::string model_path(const std::string& name) {
  if (fs::path(name).is_absolute()) return fs::exists(name) ? name : "";
  for (const std::string& dir : {std::string(SABRE_SOURCE_DIR) + "/models", std::string(SABRE_BINARY_DIR) + "/models"}) {
    std::string p = dir + "/" + name + ".onnx";
    if (fs::exists(p)) return p;
  }
  return "";
}

// A stand-in for the conv kernel picker: the CUTLASS conv naming, one tile for every problem.
std::string test_pick_conv(const codegen::ConvProblem& p) {
  if (p.groups != 1) throw std::invalid_argument("groups=" + std::to_string(p.groups) + ": no grouped conv kernels");
  return "sm80_conv_fprop_nhwc_" + p.dtype + "_" + p.dtype + "_f32_128x128x32_w64x64x32_s3_a" +
         std::to_string(p.alignment) + (p.epilogue == "linear" ? "" : "_" + p.epilogue);
}

void check_model(const std::string& name, ir::DType dtype, double tol, bool fuse_attention,
                 codegen::Lowered* lowered_out) {
  std::string path = model_path(name);
  ASSERT_FALSE(path.empty()) << name;
  check_graph(name, onnx_frontend::import_model(path), dtype, tol, lowered_out, fuse_attention);
}

void check_graph(const std::string& name, const ir::Graph& original, ir::DType dtype, double tol,
                 codegen::Lowered* lowered_out, bool fuse_attention, codegen::Stem stem, bool pointwise_gemm,
                 const codegen::ConvKernelPicker& pick_conv) {
  ir::Graph g = partition::partition(codegen::canonicalize_model(original.clone(), fuse_attention),
                                     cutlass_backend::pattern_table()).graph;
  codegen::LowerOptions o;
  o.dtype = dtype;
  for (const std::string& sym : g.symbols()) o.ranges[sym] = {1, sym == "batch" ? 4 : 16};
  o.pick = [](const tune::GemmProblem& p) { return tune::pick_kernels(p, tune::PickOptions{}); };
  o.pick_conv = pick_conv ? pick_conv : test_pick_conv;
  o.fuse_attention = fuse_attention;
  o.stem = stem;
  o.pointwise_gemm = pointwise_gemm;
  codegen::Lowered low = codegen::lower(g, o);

  std::mt19937 rng(7);
  std::map<std::string, int64_t> dims = {{"batch", 2}, {"seq", 7}};
  std::map<std::string, ir::Tensor> ref_in;
  std::vector<Buf> plan_in;
  for (const ir::Value* v : original.inputs()) {
    std::vector<int64_t> shape;
    for (const ir::Dim& d : v->shape()) shape.push_back(*d.evaluate(dims));
    ir::Tensor t(v->dtype(), shape);
    Buf b{shape, {}};
    for (int64_t i = 0; i < t.numel(); ++i) {
      double x = v->name().find("mask") != std::string::npos ? ((i % shape.back()) < 3 ? 1 : double(rng() % 2))
                 : v->name().find("token_type") != std::string::npos ? double(rng() % 2)
                 : shape.size() == 4 && ir::is_float(v->dtype())  // images
                     ? double(int64_t(rng() % 2001) - 1000) / 1000.0
                     : double(rng() % 60);
      t.set_f64(i, x);
      b.v.push_back(x);
    }
    ref_in[v->name()] = t;
    plan_in.push_back(b);
  }
  std::vector<ir::Tensor> want = reference::run(original, ref_in);
  std::vector<Buf> got = Interp(low.plan, low.weights).run(plan_in);
  ASSERT_FALSE(want.empty()) << name;
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(got[o].dims, want[o].dims()) << "output " << o;
    double num = 0, den = 0;
    for (int64_t i = 0; i < want[o].numel(); ++i) {
      ASSERT_FALSE(std::isnan(got[o].v[i])) << "output " << o << " element " << i << " never written";
      double d = got[o].v[i] - want[o].get_f64(i);
      num += d * d;
      den += want[o].get_f64(i) * want[o].get_f64(i);
    }
    double err = std::sqrt(num / std::max(den, 1e-30));
    std::printf("%s %s output %zu: relative L2 error %.2e (tolerance %.0e)\n", name.c_str(),
                std::string(ir::name(dtype)).c_str(), o, err, tol);
    EXPECT_LT(err, tol) << name << " output " << o;
  }
  if (lowered_out) *lowered_out = std::move(low);
}

int count_steps(const runtime::Plan& p, const std::string& op) {
  int n = 0;
  for (const auto& s : p.steps) n += s.op == op;
  return n;
}

ir::Value* random_const(ir::Graph& g, const std::string& name, std::vector<int64_t> dims, double scale, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1, 1);
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<float>(scale) * u(rng);
  return g.add_constant(name, ir::Tensor::from_f32(v, dims));
}
// The one nchw_to_nhwc step of a plan (a failure when there is not exactly one).
const runtime::Step* only_nchw_to_nhwc(const runtime::Plan& p) {
  const runtime::Step* found = nullptr;
  for (const auto& s : p.steps) {
    if (s.op != "nchw_to_nhwc") continue;
    EXPECT_EQ(found, nullptr) << "a second nchw_to_nhwc step: " << s.name;
    found = &s;
  }
  EXPECT_NE(found, nullptr) << "no nchw_to_nhwc step";
  return found;
}
const runtime::Step* conv_step(const runtime::Plan& p, int i, const std::string& op) {
  int seen = 0;
  for (const auto& s : p.steps)
    if (s.op == op && seen++ == i) return &s;
  ADD_FAILURE() << "no " << op << " step " << i;
  return nullptr;
}
std::string kernel_of(const runtime::Step& s) { return pj(s).get("dispatch")->arr().at(0).get("kernel")->str(); }
int64_t num_param(const runtime::Step& s, const char* k) {
  const json::Value* v = pj(s).get(k);
  return v->is_number() ? static_cast<int64_t>(v->num()) : std::stoll(v->str());
}
const runtime::Step* only_step(const runtime::Plan& p, const std::string& op) {
  const runtime::Step* found = nullptr;
  for (const auto& s : p.steps) {
    if (s.op != op) continue;
    EXPECT_EQ(found, nullptr) << "a second " << op << " step: " << s.name;
    found = &s;
  }
  EXPECT_NE(found, nullptr) << "no " << op << " step";
  return found;
}

}  // namespace sabre::plan_interp
