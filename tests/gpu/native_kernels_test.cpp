// GPU tests of sabre's native kernels (src/backends/native) against the CPU reference executor.
//
// Every case: random inputs (never zeros), outputs poisoned with 0xFF bytes (NaN for floats) so
// unwritten elements show, the same op run by sabre::reference on the host, and a normalised L2
// error checked against a per-dtype tolerance. Elementwise chains run twice: through the
// interpreter kernel and through the generated kernel (nvcc at test time, loaded with the driver
// API). Exit 77 (ctest: skipped) without a GPU; 1 on any failure.
// Run: build-g/tests/gpu/native_kernels_test [substring-filter]   (docs/NATIVE.md)
#include <cuda.h>
#include <cuda_runtime.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <type_traits>
#include <unistd.h>
#include <utility>
#include <vector>

#include "backends/native/index_ops.h"
#include "backends/native/native.h"
#include "ir/graph.h"
#include "reference/reference.h"

using namespace sabre;
using ir::DType;
using ir::Tensor;

namespace {

// ---- tolerance table: rel L2 error per output dtype --------------------------------------
double tolerance(DType d) {
  switch (d) {
    case DType::f32: return 1e-5;
    case DType::f16: return 1e-3;
    case DType::bf16: return 8e-3;
    default: return 0.0;  // integers and bool: exact
  }
}

int g_pass = 0, g_fail = 0;
std::string g_filter;
std::mt19937 g_rng(1234);

#define CK(stmt)                                                                                       \
  do {                                                                                                 \
    cudaError_t e_ = (stmt);                                                                           \
    if (e_ != cudaSuccess) {                                                                           \
      std::fprintf(stderr, "%s failed at %s:%d: %s | %s\n", #stmt, __FILE__, __LINE__, cudaGetErrorString(e_), \
                   native::last_error_message().c_str());                                              \
      throw std::runtime_error("cuda");                                                                \
    }                                                                                                  \
  } while (0)

Tensor rnd(DType dt, std::vector<int64_t> dims, double lo = -2.0, double hi = 2.0) {
  Tensor t(dt, std::move(dims));
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = u(g_rng);
    if (dt == DType::boolean) v = v > (lo + hi) / 2 ? 1 : 0;
    else if (!ir::is_float(dt)) v = std::floor(v);
    t.set_f64(i, v);
  }
  return t;
}

struct Dev {
  void* p = nullptr;
  size_t n = 0;
  explicit Dev(size_t bytes) : n(bytes) {
    CK(cudaMalloc(&p, bytes ? bytes : 16));
    CK(cudaMemset(p, 0xFF, bytes ? bytes : 16));  // poison
  }
  explicit Dev(const Tensor& t) : Dev(t.nbytes()) { CK(cudaMemcpy(p, t.bytes(), t.nbytes(), cudaMemcpyHostToDevice)); }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  Tensor get(DType dt, std::vector<int64_t> dims) const {
    CK(cudaDeviceSynchronize());
    Tensor t(dt, std::move(dims));
    CK(cudaMemcpy(t.mutable_bytes(), p, t.nbytes(), cudaMemcpyDeviceToHost));
    return t;
  }
};

bool selected(const std::string& name) { return g_filter.empty() || name.find(g_filter) != std::string::npos; }

void check(const std::string& name, const Tensor& got, const Tensor& want) {
  if (got.numel() != want.numel() || got.dtype() != want.dtype()) {
    std::printf("FAIL %-60s size/dtype mismatch (%lld %s vs %lld %s)\n", name.c_str(), (long long)got.numel(),
                std::string(ir::name(got.dtype())).c_str(), (long long)want.numel(),
                std::string(ir::name(want.dtype())).c_str());
    ++g_fail;
    return;
  }
  double num = 0, den = 0;
  int64_t bad = -1;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.get_f64(i), w = want.get_f64(i);
    if (std::isnan(g) != std::isnan(w) || (std::isinf(w) && g != w)) {
      if (bad < 0) bad = i;
      continue;
    }
    if (std::isnan(w) || std::isinf(w)) continue;
    num += (g - w) * (g - w);
    den += w * w;
  }
  const double err = std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
  const double tol = tolerance(got.dtype());
  if (bad >= 0 || err > tol || (tol == 0 && num != 0)) {
    const int64_t i = bad >= 0 ? bad : 0;
    std::printf("FAIL %-60s rel_l2=%.3g tol=%.1g (first non-finite mismatch at %lld: got %g want %g)\n", name.c_str(),
                err, tol, (long long)bad, got.get_f64(i), want.get_f64(i));
    ++g_fail;
  } else {
    std::printf("PASS %-60s rel_l2=%.3g\n", name.c_str(), err);
    ++g_pass;
  }
}

ir::TensorType type_of(const Tensor& t) {
  return ir::TensorType{t.dtype(), ir::Shape(t.dims().begin(), t.dims().end()), true};
}

// One ONNX node on the reference executor.
std::vector<Tensor> ref_op(const std::string& op, const std::vector<Tensor>& ins,
                           std::map<std::string, ir::AttrValue> attrs = {}, size_t nout = 1) {
  ir::Graph g;
  std::vector<ir::Value*> vals;
  std::vector<const Tensor*> ptrs;
  for (size_t i = 0; i < ins.size(); ++i) {
    vals.push_back(g.add_input("in" + std::to_string(i), type_of(ins[i])));
    ptrs.push_back(&ins[i]);
  }
  ir::Node* n = g.add_node(op, vals, nout, std::move(attrs));
  return reference::eval_node(*n, ptrs);
}

Tensor i64s(std::vector<int64_t> v) { return Tensor::from_i64(v, {static_cast<int64_t>(v.size())}); }

std::string dts(DType d) { return std::string(ir::name(d)); }
std::string shp(const std::vector<int64_t>& d) {
  std::string s;
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "x" : "") + std::to_string(d[i]);
  return s;
}

// ---- elementwise chains -------------------------------------------------------------------
// The reference graph of a chain, with the chain's semantics: float inputs widened to f32, f32
// math, casts to f16/bf16 round (Cast there and back), outputs stored in their dtypes.
std::vector<Tensor> ref_chain(const native::ElementwiseChain& ch, const std::vector<Tensor>& ins) {
  using native::EwOp;
  ir::Graph g;
  std::map<std::string, Tensor> feed;
  std::vector<ir::Value*> v(ch.nodes.size());
  std::vector<ir::Value*> in_vals;
  auto is_f = [](DType d) { return d == DType::f32 || d == DType::f16 || d == DType::bf16; };
  auto cast = [&](ir::Value* x, DType to) { return g.add_node("Cast", {x}, 1, {{"to", dts(to)}})->output(0); };
  for (size_t k = 0; k < ch.inputs.size(); ++k) {
    ir::Value* x = g.add_input("x" + std::to_string(k), type_of(ins[k]));
    feed["x" + std::to_string(k)] = ins[k];
    in_vals.push_back(is_f(ch.inputs[k]) ? cast(x, DType::f32) : x);
  }
  auto node = [&](const std::string& op, std::vector<ir::Value*> xs, std::map<std::string, ir::AttrValue> a = {}) {
    return g.add_node(op, std::move(xs), 1, std::move(a))->output(0);
  };
  auto cst = [&](float f) { return g.add_constant("", Tensor::scalar_f32(f)); };
  for (size_t i = 0; i < ch.nodes.size(); ++i) {
    const native::EwNode& n = ch.nodes[i];
    ir::Value* a = n.a >= 0 && n.op != EwOp::input ? v[n.a] : nullptr;
    ir::Value* b = n.b >= 0 ? v[n.b] : nullptr;
    ir::Value* c = n.c >= 0 ? v[n.c] : nullptr;
    static const std::map<EwOp, std::string> simple = {
        {EwOp::neg, "Neg"}, {EwOp::abs, "Abs"}, {EwOp::exp, "Exp"}, {EwOp::log, "Log"}, {EwOp::sqrt, "Sqrt"},
        {EwOp::reciprocal, "Reciprocal"}, {EwOp::erf, "Erf"}, {EwOp::tanh, "Tanh"}, {EwOp::relu, "Relu"},
        {EwOp::sigmoid, "Sigmoid"}, {EwOp::hardswish, "HardSwish"}, {EwOp::logical_not, "Not"},
        {EwOp::add, "Add"}, {EwOp::sub, "Sub"}, {EwOp::mul, "Mul"}, {EwOp::div, "Div"}, {EwOp::pow, "Pow"},
        {EwOp::min, "Min"}, {EwOp::max, "Max"}, {EwOp::equal, "Equal"}, {EwOp::less, "Less"},
        {EwOp::greater, "Greater"}, {EwOp::less_equal, "LessOrEqual"}, {EwOp::greater_equal, "GreaterOrEqual"},
        {EwOp::logical_and, "And"}, {EwOp::logical_or, "Or"}, {EwOp::where, "Where"},
        {EwOp::sin, "Sin"}, {EwOp::cos, "Cos"}, {EwOp::tan, "Tan"}, {EwOp::asin, "Asin"}, {EwOp::acos, "Acos"},
        {EwOp::atan, "Atan"}, {EwOp::sinh, "Sinh"}, {EwOp::cosh, "Cosh"}, {EwOp::asinh, "Asinh"},
        {EwOp::acosh, "Acosh"}, {EwOp::atanh, "Atanh"}, {EwOp::ceil, "Ceil"}, {EwOp::floor, "Floor"},
        {EwOp::round, "Round"}, {EwOp::softplus, "Softplus"}, {EwOp::softsign, "Softsign"}, {EwOp::mish, "Mish"},
        {EwOp::sign, "Sign"}, {EwOp::isnan, "IsNaN"}, {EwOp::prelu, "PRelu"}};
    if (auto it = simple.find(n.op); it != simple.end()) {
      std::vector<ir::Value*> xs = {a};
      if (b) xs.push_back(b);
      if (c) xs.push_back(c);
      v[i] = node(it->second, xs);
      continue;
    }
    switch (n.op) {
      case EwOp::input: v[i] = in_vals[n.a]; break;
      case EwOp::constant: {
        Tensor t = Tensor::scalar_f32(n.alpha).cast(is_f(n.dtype) ? DType::f32 : n.dtype);
        v[i] = g.add_constant("", t);
        break;
      }
      case EwOp::gelu_erf: v[i] = node("Gelu", {a}); break;
      case EwOp::gelu_tanh: v[i] = node("Gelu", {a}, {{"approximate", std::string("tanh")}}); break;
      case EwOp::silu: v[i] = node("Mul", {a, node("Sigmoid", {a})}); break;
      case EwOp::leaky_relu: v[i] = node("LeakyRelu", {a}, {{"alpha", double(n.alpha)}}); break;
      case EwOp::hard_sigmoid:
        v[i] = node("HardSigmoid", {a}, {{"alpha", double(n.alpha)}, {"beta", double(n.beta)}});
        break;
      case EwOp::clip: v[i] = node("Clip", {a, cst(n.alpha), cst(n.beta)}); break;
      case EwOp::elu: v[i] = node("Elu", {a}, {{"alpha", double(n.alpha)}}); break;
      case EwOp::celu: v[i] = node("Celu", {a}, {{"alpha", double(n.alpha)}}); break;
      case EwOp::thresholded_relu: v[i] = node("ThresholdedRelu", {a}, {{"alpha", double(n.alpha)}}); break;
      case EwOp::selu: v[i] = node("Selu", {a}, {{"alpha", double(n.alpha)}, {"gamma", double(n.beta)}}); break;
      case EwOp::shrink: v[i] = node("Shrink", {a}, {{"lambd", double(n.alpha)}, {"bias", double(n.beta)}}); break;
      case EwOp::isinf:
        v[i] = node("IsInf", {a}, {{"detect_negative", int64_t(n.alpha != 0)}, {"detect_positive", int64_t(n.beta != 0)}});
        break;
      case EwOp::mod: v[i] = node("Mod", {a, b}); break;
      case EwOp::fmod: v[i] = node("Mod", {a, b}, {{"fmod", int64_t{1}}}); break;
      case EwOp::shl: v[i] = node("BitShift", {a, b}, {{"direction", std::string("LEFT")}}); break;
      case EwOp::shr: v[i] = node("BitShift", {a, b}, {{"direction", std::string("RIGHT")}}); break;
      case EwOp::cast:
        v[i] = is_f(n.dtype) ? cast(cast(a, n.dtype), DType::f32) : cast(a, n.dtype);
        break;
      default: throw std::logic_error("ref_chain: unmapped op");
    }
  }
  for (int o : ch.outputs) {
    const DType d = ch.nodes[o].dtype;
    g.add_output(is_f(d) ? cast(v[o], d) : g.add_node("Identity", {v[o]}, 1)->output(0));
  }
  return reference::run(g, feed);
}

// Generated kernels: nvcc -cubin for this GPU, loaded through the driver API.
struct Generated {
  CUmodule mod = nullptr;
  CUfunction fn = nullptr;
};
std::string g_nvcc;
int g_cc = 0;

// Driver entry points through the runtime, so the program links no libcuda and still starts
// (and exits 77) on a machine without a driver.
struct Driver {
  decltype(&cuModuleLoad) module_load = nullptr;
  decltype(&cuModuleGetFunction) get_function = nullptr;
  decltype(&cuLaunchKernel) launch = nullptr;
  decltype(&cuModuleUnload) unload = nullptr;
  bool ok = false;
} g_drv;

void load_driver() {
  auto get = [](const char* sym, auto& fn) {
    cudaDriverEntryPointQueryResult q{};
    void* p = nullptr;
    if (cudaGetDriverEntryPointByVersion(sym, &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      return false;
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
    return true;
  };
  g_drv.ok = get("cuModuleLoad", g_drv.module_load) && get("cuModuleGetFunction", g_drv.get_function) &&
             get("cuLaunchKernel", g_drv.launch) && get("cuModuleUnload", g_drv.unload);
}

bool compile_generated(const native::ElementwiseChain& ch, Generated& out) {
  if (g_nvcc.empty() || !g_drv.ok) return false;
  const std::string name = native::kernel_name(ch);
  const std::string dir = "/tmp/sabre_native_test_" + std::to_string(getpid());
  std::system(("mkdir -p " + dir).c_str());
  const std::string cu = dir + "/" + name + ".cu", cubin = dir + "/" + name + ".cubin";
  std::ofstream(cu) << native::generate_elementwise_kernel(ch);
  const std::string cmd = g_nvcc + " -std=c++17 -O3 -cubin -arch=sm_" + std::to_string(g_cc) + " -o " + cubin + " " + cu;
  if (std::system(cmd.c_str()) != 0) {
    std::printf("nvcc failed: %s\n", cmd.c_str());
    return false;
  }
  if (g_drv.module_load(&out.mod, cubin.c_str()) != CUDA_SUCCESS) {
    std::printf("cuModuleLoad failed: %s\n", cubin.c_str());
    return false;
  }
  if (g_drv.get_function(&out.fn, out.mod, name.c_str()) != CUDA_SUCCESS) {
    std::printf("cuModuleGetFunction failed: %s in %s\n", name.c_str(), cubin.c_str());
    return false;
  }
  return true;
}

void test_chain(const std::string& label, const native::ElementwiseChain& ch, std::vector<int64_t> out_dims,
                std::vector<std::vector<int64_t>> in_dims, bool misalign = false) {
  const std::string base = "Elementwise_" + label + "_" + shp(out_dims) + (misalign ? "_misaligned" : "");
  if (!selected(base)) return;
  std::vector<Tensor> ins;
  for (size_t k = 0; k < ch.inputs.size(); ++k) ins.push_back(rnd(ch.inputs[k], in_dims[k], 0.1, 2.0));
  // Inputs away from 0 so log/sqrt/reciprocal/div stay finite; signs mixed where ops allow.
  for (size_t k = 0; k < ins.size(); ++k)
    if (ir::is_float(ins[k].dtype()) && k % 2 == 1)
      for (int64_t i = 0; i < ins[k].numel(); i += 2) ins[k].set_f64(i, -ins[k].get_f64(i));
  const std::vector<Tensor> want = ref_chain(ch, ins);
  int64_t n = 1;
  for (int64_t d : out_dims) n *= d;
  // Misaligned: shift every pointer by one element so the vector path must refuse.
  const size_t shift = misalign ? 1 : 0;
  std::vector<std::unique_ptr<Dev>> din, dout;
  std::vector<const void*> pin;
  std::vector<void*> pout;
  for (const Tensor& t : ins) {
    auto d = std::make_unique<Dev>(t.nbytes() + 16);
    CK(cudaMemcpy(static_cast<char*>(d->p) + shift * ir::size_of(t.dtype()), t.bytes(), t.nbytes(), cudaMemcpyHostToDevice));
    pin.push_back(static_cast<char*>(d->p) + shift * ir::size_of(t.dtype()));
    din.push_back(std::move(d));
  }
  for (int o : ch.outputs) {
    const size_t es = ir::size_of(ch.nodes[o].dtype);
    dout.push_back(std::make_unique<Dev>(n * es + 16));
    pout.push_back(static_cast<char*>(dout.back()->p) + shift * es);
  }
  auto fetch = [&](size_t k) {
    const DType d = ch.nodes[ch.outputs[k]].dtype;
    CK(cudaDeviceSynchronize());
    Tensor t(d, out_dims);
    CK(cudaMemcpy(t.mutable_bytes(), pout[k], t.nbytes(), cudaMemcpyDeviceToHost));
    return t;
  };
  auto repoison = [&] {
    for (auto& d : dout) CK(cudaMemset(d->p, 0xFF, d->n));
  };
  // Interpreter.
  CK(native::elementwise_run(ch, out_dims, in_dims, pin, pout, nullptr));
  for (size_t k = 0; k < ch.outputs.size(); ++k) check(base + "_interp_out" + std::to_string(k), fetch(k), want[k]);
  // Generated kernel.
  // The generated kernel is what an artifact runs: one that does not compile or load is a failure.
  Generated gen;
  if (!compile_generated(ch, gen)) {
    std::printf("FAIL %s_generated: %s\n", base.c_str(),
                g_nvcc.empty() ? "no nvcc found (set NVCC to the CUDA compiler)"
                : !g_drv.ok    ? "the driver's module entry points are missing"
                               : "nvcc or the module load failed (above)");
    ++g_fail;
    return;
  }
  repoison();
  SabreEwParams p = native::prepare_params(ch, out_dims, in_dims, pin, pout);
  void* args[] = {&p};
  if (g_drv.launch(gen.fn, native::ew_grid_size(p), 1, 1, 256, 1, 1, 0, nullptr, args, nullptr) != CUDA_SUCCESS)
    throw std::runtime_error("cuLaunchKernel failed");
  const std::string path = p.vec > 1 ? "_vec" : "_scalar";
  for (size_t k = 0; k < ch.outputs.size(); ++k)
    check(base + "_generated" + path + "_out" + std::to_string(k), fetch(k), want[k]);
  g_drv.unload(gen.mod);
}

void elementwise_tests() {
  using native::EwOp;
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    const std::string d = dts(dt);
    {  // BERT FFN: gelu(x + bias)
      native::ElementwiseChain ch;
      ch.inputs = {dt, dt};
      ch.outputs = {ch.unary(EwOp::gelu_erf, ch.binary(EwOp::add, ch.input(0), ch.input(1)))};
      test_chain("bias_gelu_" + d, ch, {256, 768}, {{256, 768}, {768}});
      test_chain("bias_gelu_" + d, ch, {256, 768}, {{256, 768}, {768}}, true);
      test_chain("bias_gelu_" + d, ch, {7, 13}, {{7, 13}, {13}});
    }
    {  // Many unary ops in one chain, two outputs (one of them an intermediate).
      native::ElementwiseChain ch;
      ch.inputs = {dt, dt};
      const int x = ch.input(0), y = ch.input(1);
      int t = ch.binary(EwOp::mul, x, ch.unary(EwOp::sigmoid, y));
      t = ch.binary(EwOp::add, t, ch.unary(EwOp::tanh, x));
      t = ch.binary(EwOp::sub, t, ch.unary(EwOp::silu, y));
      t = ch.binary(EwOp::add, t, ch.unary(EwOp::gelu_tanh, y));
      t = ch.binary(EwOp::add, t, ch.unary(EwOp::leaky_relu, y, 0.1f));
      t = ch.binary(EwOp::add, t, ch.unary(EwOp::hard_sigmoid, y, 0.2f, 0.5f));
      t = ch.binary(EwOp::add, t, ch.unary(EwOp::hardswish, y));
      t = ch.binary(EwOp::add, t, ch.unary(EwOp::clip, y, -0.5f, 0.7f));
      t = ch.binary(EwOp::add, t, ch.unary(EwOp::erf, y));
      t = ch.binary(EwOp::add, t, ch.unary(EwOp::relu, ch.unary(EwOp::neg, y)));
      const int s = ch.unary(EwOp::sqrt, ch.unary(EwOp::abs, y));
      t = ch.binary(EwOp::div, t, ch.binary(EwOp::add, s, ch.unary(EwOp::exp, ch.unary(EwOp::log, x))));
      t = ch.binary(EwOp::max, t, ch.unary(EwOp::reciprocal, ch.unary(EwOp::neg, x)));
      t = ch.binary(EwOp::min, t, ch.constant(3.f, dt));
      const int pw = ch.binary(EwOp::pow, x, ch.constant(1.5f, dt));
      ch.outputs = {t, ch.binary(EwOp::add, pw, t)};
      test_chain("unary_mix_" + d, ch, {33, 64}, {{33, 64}, {33, 64}});
      test_chain("unary_mix_" + d, ch, {3, 4, 5}, {{3, 1, 5}, {4, 1}});
    }
    {  // where(x > y, x, 0.5*y) + cast round trip through f16
      native::ElementwiseChain ch;
      ch.inputs = {dt, dt, DType::boolean};
      const int x = ch.input(0), y = ch.input(1), m = ch.input(2);
      const int w = ch.where(ch.binary(EwOp::greater, x, y), x, ch.binary(EwOp::mul, y, ch.constant(0.5f, dt)));
      const int r = ch.cast(ch.cast(w, DType::f16), dt);
      const int z = ch.where(ch.binary(EwOp::logical_and, m, ch.unary(EwOp::logical_not, ch.binary(EwOp::less, x, y))), r,
                             ch.unary(EwOp::neg, r));
      ch.outputs = {z, ch.binary(EwOp::equal, x, w)};
      test_chain("where_cast_" + d, ch, {2, 3, 40}, {{2, 3, 40}, {40}, {2, 1, 40}});
    }
    // Issue 29's ops: x > 0, y of both signs.
    auto sum = [](native::ElementwiseChain& ch, std::vector<int> v) {
      int s = v[0];
      for (size_t i = 1; i < v.size(); ++i) s = ch.binary(EwOp::add, s, v[i]);
      return s;
    };
    {  // trigonometric and hyperbolic
      native::ElementwiseChain ch;
      ch.inputs = {dt, dt};
      const int x = ch.input(0), y = ch.input(1);
      const int h = ch.binary(EwOp::mul, y, ch.constant(0.4f, dt));
      ch.outputs = {sum(ch, {ch.unary(EwOp::sin, y), ch.unary(EwOp::cos, y), ch.unary(EwOp::tan, h),
                             ch.unary(EwOp::asin, h), ch.unary(EwOp::acos, h), ch.unary(EwOp::atan, y),
                             ch.unary(EwOp::sinh, y), ch.unary(EwOp::cosh, y), ch.unary(EwOp::asinh, y),
                             ch.unary(EwOp::acosh, ch.binary(EwOp::add, x, ch.constant(1.f, dt))),
                             ch.unary(EwOp::atanh, h)})};
      test_chain("trig_" + d, ch, {33, 64}, {{33, 64}, {33, 64}});
      test_chain("trig_" + d, ch, {7, 13}, {{7, 13}, {13}});
    }
    {  // rounding, activations, mod, prelu
      native::ElementwiseChain ch;
      ch.inputs = {dt, dt};
      const int x = ch.input(0), y = ch.input(1);
      const int y3 = ch.binary(EwOp::mul, y, ch.constant(3.f, dt)), y7 = ch.binary(EwOp::mul, y, ch.constant(7.f, dt));
      const int r = sum(ch, {ch.unary(EwOp::ceil, y3), ch.unary(EwOp::floor, y3), ch.unary(EwOp::round, y3),
                             ch.unary(EwOp::sign, y)});
      const int a = sum(ch, {ch.unary(EwOp::softplus, y), ch.unary(EwOp::softsign, y), ch.unary(EwOp::mish, y),
                             ch.unary(EwOp::elu, y, 0.7f), ch.unary(EwOp::selu, y, 1.6732632f, 1.0507010f),
                             ch.unary(EwOp::celu, y, 1.3f), ch.unary(EwOp::thresholded_relu, y, 0.2f),
                             ch.unary(EwOp::shrink, y, 0.3f, 0.1f)});
      const int m = sum(ch, {ch.binary(EwOp::mod, y7, ch.constant(2.5f, dt)), ch.binary(EwOp::fmod, y7, ch.constant(-1.5f, dt)),
                             ch.binary(EwOp::prelu, y, ch.binary(EwOp::sub, x, ch.constant(1.f, dt)))});
      ch.outputs = {r, a, m};
      test_chain("round_act_mod_" + d, ch, {33, 64}, {{33, 64}, {33, 64}});
    }
    {  // predicates: NaN from log(y < 0), -inf / +inf from y / 0
      native::ElementwiseChain ch;
      ch.inputs = {dt, dt};
      const int x = ch.input(0), y = ch.input(1);
      const int q = ch.binary(EwOp::div, y, ch.binary(EwOp::sub, x, x));
      ch.outputs = {ch.unary(EwOp::isnan, ch.unary(EwOp::log, y)), ch.unary(EwOp::isinf, q, 1.f, 0.f),
                    ch.unary(EwOp::isinf, q, 0.f, 1.f)};
      test_chain("isnan_isinf_" + d, ch, {16, 40}, {{16, 40}, {16, 40}});
    }
  }
  {  // integer mod / fmod (divisors -2 and -1), sign; u8 shifts that wrap
    native::ElementwiseChain ch;
    ch.inputs = {DType::i64, DType::i64};
    const int a = ch.binary(EwOp::sub, ch.binary(EwOp::mul, ch.input(0), ch.constant(7, DType::i64)), ch.constant(5, DType::i64));
    const int b = ch.binary(EwOp::sub, ch.input(1), ch.constant(2, DType::i64));
    ch.outputs = {ch.binary(EwOp::mod, a, b), ch.binary(EwOp::fmod, a, b), ch.unary(EwOp::sign, a),
                  ch.binary(EwOp::mod, a, ch.input(1))};  // input(1) is 0 or 1: x mod 0 = 0
    test_chain("int_mod_sign", ch, {5, 16}, {{5, 16}, {16}});
    native::ElementwiseChain sh;
    sh.inputs = {DType::u8, DType::u8};
    const int v = sh.binary(EwOp::add, sh.input(0), sh.constant(200, DType::u8));
    const int k = sh.binary(EwOp::add, sh.input(1), sh.constant(3, DType::u8));
    sh.outputs = {sh.binary(EwOp::shr, sh.binary(EwOp::shl, v, k), sh.constant(2, DType::u8)), sh.binary(EwOp::shr, v, k)};
    test_chain("u8_shifts", sh, {5, 16}, {{5, 16}, {16}});
  }
  {  // integers: (a + b) * 3 // 2 cast to f32, with min/max/abs
    native::ElementwiseChain ch;
    ch.inputs = {DType::i64, DType::i32};
    const int a = ch.input(0), b = ch.cast(ch.input(1), DType::i64);
    const int s = ch.binary(EwOp::div, ch.binary(EwOp::mul, ch.binary(EwOp::add, a, b), ch.constant(3, DType::i64)),
                            ch.constant(2, DType::i64));
    const int m = ch.binary(EwOp::max, ch.unary(EwOp::abs, s), ch.binary(EwOp::min, a, b));
    ch.outputs = {m, ch.cast(m, DType::f32), ch.cast(ch.cast(a, DType::f32), DType::i32)};
    test_chain("int_ops", ch, {5, 16}, {{5, 16}, {16}});
  }
}

// ---- softmax -------------------------------------------------------------------------------
void softmax_case(DType dt, int64_t b, int64_t h, int64_t q, int64_t k, int mask_kind, float scale, bool causal) {
  // mask_kind: 0 none, 1 [B,1,1,K], 2 [B,1,Q,K], 3 [Q,K]
  const std::string name = "Softmax_" + dts(dt) + "_" + shp({b, h, q, k}) + "_mask" + std::to_string(mask_kind) +
                           (causal ? "_causal" : "") + (scale != 1.f ? "_scaled" : "");
  if (!selected(name)) return;
  const Tensor x = rnd(dt, {b, h, q, k}, -4, 4);
  std::vector<int64_t> mdims = mask_kind == 1 ? std::vector<int64_t>{b, 1, 1, k}
                               : mask_kind == 2 ? std::vector<int64_t>{b, 1, q, k}
                                                : std::vector<int64_t>{q, k};
  Tensor mask = rnd(dt, mdims, -3, 0);
  // A padding-style mask: some positions get -10000 like BERT's extended attention mask.
  for (int64_t i = 0; i < mask.numel(); i += 7) mask.set_f64(i, -10000.0);
  // Reference graph: Softmax(x * scale + mask [+ causal -inf]).
  Tensor logits = ref_op("Mul", {x, Tensor::scalar_f32(scale).cast(dt)})[0];
  if (mask_kind) logits = ref_op("Add", {logits, mask})[0];
  if (causal) {
    Tensor c(dt, {q, k});
    for (int64_t i = 0; i < q; ++i)
      for (int64_t j = 0; j < k; ++j) c.set_f64(i * k + j, j > i + (k - q) ? -INFINITY : 0.0);
    logits = ref_op("Add", {logits, c})[0];
  }
  const Tensor want = ref_op("Softmax", {logits}, {{"axis", int64_t{-1}}})[0];
  Dev dx(x), dm(mask), dy(x.nbytes());
  native::SoftmaxArgs a;
  a.dtype = dt;
  a.x = dx.p;
  a.y = dy.p;
  a.b = b;
  a.h = h;
  a.q = q;
  a.cols = k;
  a.scale = scale;
  a.causal = causal;
  if (mask_kind) {
    a.mask = dm.p;
    a.mask_dtype = dt;
    if (mask_kind == 1) a.mask_stride[0] = k;
    if (mask_kind == 2) a.mask_stride[0] = q * k, a.mask_stride[2] = k;
    if (mask_kind == 3) a.mask_stride[2] = k;
  }
  CK(native::softmax(a, nullptr));
  check(name, dy.get(dt, {b, h, q, k}), want);
}

// LogSoftmax (SoftmaxArgs::log) on each kernel path: logits wide enough that the smallest
// probabilities underflow f16, so the log of a rounded probability would be -inf.
void log_softmax_case(DType dt, int64_t rows, int64_t k) {
  const std::string name = "LogSoftmax_" + dts(dt) + "_" + shp({rows, k});
  if (!selected(name)) return;
  const Tensor x = rnd(dt, {rows, k}, -30, 30);
  const Tensor want = ref_op("LogSoftmax", {x}, {{"axis", int64_t{-1}}})[0];
  Dev dx(x), dy(x.nbytes());
  native::SoftmaxArgs a;
  a.dtype = dt;
  a.x = dx.p;
  a.y = dy.p;
  a.q = rows;
  a.cols = k;
  a.log = true;
  CK(native::softmax(a, nullptr));
  check(name, dy.get(dt, {rows, k}), want);
}

void softmax_tests() {
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (int64_t k : {5, 1000, 4096, 20000}) log_softmax_case(dt, 3, k);
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    softmax_case(dt, 2, 12, 128, 128, 1, 0.125f, false);  // BERT
    softmax_case(dt, 2, 3, 37, 37, 0, 1.f, true);         // causal, odd
    softmax_case(dt, 2, 2, 9, 50, 2, 0.3f, false);
    softmax_case(dt, 1, 4, 16, 16, 3, 1.f, true);
    softmax_case(dt, 1, 1, 3, 1000, 0, 1.f, false);   // scalar path, warp per row
    softmax_case(dt, 1, 1, 4, 4096, 0, 1.f, false);   // block per row
    softmax_case(dt, 1, 1, 2, 20000, 0, 1.f, false);  // looping kernel
    softmax_case(dt, 1, 1, 5, 3, 0, 2.f, false);      // tiny rows
  }
}

// ---- layernorm -----------------------------------------------------------------------------
void layernorm_case(DType dt, int64_t rows, int64_t cols, bool residual, bool beta, bool misalign = false,
                    bool f32_copy = false) {
  const std::string name = "LayerNorm_" + dts(dt) + "_" + shp({rows, cols}) + (residual ? "_residual" : "") +
                           (beta ? "" : "_nobeta") + (misalign ? "_misaligned" : "") + (f32_copy ? "_f32copy" : "");
  if (!selected(name)) return;
  const Tensor x = rnd(dt, {rows, cols}, -3, 5), r = rnd(dt, {rows, cols}), g = rnd(dt, {cols}, 0.5, 1.5),
               bt = rnd(dt, {cols});
  const Tensor s = residual ? ref_op("Add", {x, r})[0] : x;
  std::vector<Tensor> lin = {s, g};
  if (beta) lin.push_back(bt);
  const Tensor want = ref_op("LayerNormalization", lin, {{"axis", int64_t{-1}}, {"epsilon", 1e-5}})[0];
  const size_t es = ir::size_of(dt), sh = misalign ? es : 0;
  Dev dx(x.nbytes() + 16), dr(r), dg(g), db(bt), dy(x.nbytes() + 16), ds(x.nbytes());
  CK(cudaMemcpy(static_cast<char*>(dx.p) + sh, x.bytes(), x.nbytes(), cudaMemcpyHostToDevice));
  native::LayerNormArgs a;
  a.dtype = dt;
  a.x = static_cast<char*>(dx.p) + sh;
  a.residual = residual ? dr.p : nullptr;
  a.gamma = dg.p;
  a.beta = beta ? db.p : nullptr;
  a.y = static_cast<char*>(dy.p) + sh;
  a.sum_out = residual ? ds.p : nullptr;
  Dev d32(static_cast<size_t>(rows * cols) * 4);
  if (f32_copy) a.y_f32 = static_cast<float*>(d32.p);
  a.rows = rows;
  a.cols = cols;
  a.eps = 1e-5f;
  CK(native::layernorm(a, nullptr));
  CK(cudaDeviceSynchronize());
  Tensor got(dt, {rows, cols});
  CK(cudaMemcpy(got.mutable_bytes(), a.y, got.nbytes(), cudaMemcpyDeviceToHost));
  check(name, got, want);
  if (residual) check(name + "_sum_out", ds.get(dt, {rows, cols}), s);
  if (f32_copy) check(name + "_copy", d32.get(DType::f32, {rows, cols}), got.cast(DType::f32));  // y as stored
}

void layernorm_tests() {
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    layernorm_case(dt, 256, 768, true, true);   // BERT (batch*seq, 768)
    layernorm_case(dt, 7, 13, false, true);     // odd
    layernorm_case(dt, 7, 768, true, false, true);
    layernorm_case(dt, 64, 3072, false, true);  // block per row
    layernorm_case(dt, 3, 20000, true, true);   // looping kernel
    // Hidden sizes off the 16-byte vector: 1000 (8-byte vectors for f16/bf16, 16 for f32), 770
    // (one element for f16/bf16, 8-byte vectors for f32), 37 rows of 40 (8-lane groups, 4 rows a warp).
    layernorm_case(dt, 33, 1000, true, true);
    layernorm_case(dt, 5, 770, true, true);
    layernorm_case(dt, 37, 40, false, true);
    // Chunk counts that round up to a compiled NCH: 1280 halves (5 -> 6 per lane), 4800 (3 -> 4 per thread of a block).
    layernorm_case(dt, 64, 1280, true, true);
    layernorm_case(dt, 9, 4800, true, true);
  }
  layernorm_case(DType::f16, 4096, 3072, true, true);  // large rows
  // BERT-base at batch 1 and 32 (seq 128): a row per warp, 1 warp per block at 128 rows, 4 at 4096;
  // 1001 rows leave the last block partly empty.
  for (DType dt : {DType::f16, DType::bf16}) {
    layernorm_case(dt, 128, 768, true, true);
    layernorm_case(dt, 128, 768, false, true);
    layernorm_case(dt, 4096, 768, true, true);
    layernorm_case(dt, 1001, 768, true, false);
    // The f32 copy of y (a model output): registers, one-element loads, the looping kernel.
    layernorm_case(dt, 128, 768, true, true, false, true);
    layernorm_case(dt, 4096, 768, true, true, false, true);
    layernorm_case(dt, 5, 770, false, true, false, true);
    layernorm_case(dt, 3, 20000, true, true, false, true);
  }
}

// ---- embedding sum + layernorm --------------------------------------------------------------
// BERT's embeddings: word ids (i64, one negative and one past the table: the last row and zeros),
// token type ids (i32), position ids read in place from a [1, 512] arange buffer at `pos_off` with
// step `pos_step` and stride 0 over the batch. Expected: the sum in f32 on the host, the reference
// LayerNormalization over it, cast to dt.
void embed_ln_case(DType dt, int64_t batch, int64_t seq, int64_t cols, int terms, int64_t pos_off = 0,
                   int64_t pos_step = 1, bool beta = true) {
  const std::string name = "EmbedLayerNorm_" + dts(dt) + "_" + shp({batch, seq, cols}) + "_t" + std::to_string(terms) +
                           (pos_off || pos_step != 1 ? "_pos" + std::to_string(pos_off) + "s" + std::to_string(pos_step) : "") +
                           (beta ? "" : "_nobeta");
  if (!selected(name)) return;
  const int64_t rows = batch * seq, vocab[3] = {1000, 2, 512};
  std::vector<Tensor> tables, ids;
  for (int t = 0; t < terms; ++t) tables.push_back(rnd(dt, {vocab[t], cols}));
  Tensor word(DType::i64, {batch, seq}), type(DType::i32, {batch, seq}), pos(DType::i64, {1, 512});
  for (int64_t i = 0; i < rows; ++i) {
    word.set_f64(i, static_cast<double>(g_rng() % 1000));
    type.set_f64(i, static_cast<double>(g_rng() % 2));
  }
  word.set_f64(0, -1);
  if (rows > 1) word.set_f64(1, 5000);
  for (int64_t i = 0; i < 512; ++i) pos.set_f64(i, static_cast<double>(i));
  const Tensor* id_t[3] = {&word, &type, &pos};
  auto id_at = [&](int t, int64_t b, int64_t q) -> int64_t {
    if (t == 2) return static_cast<int64_t>(pos.get_f64(pos_off + q * pos_step));
    return static_cast<int64_t>(id_t[t]->get_f64(b * seq + q));
  };
  Tensor sum(DType::f32, {rows, cols});
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t q = 0; q < seq; ++q)
      for (int64_t c = 0; c < cols; ++c) {
        double v = 0;
        for (int t = 0; t < terms; ++t) {
          int64_t id = id_at(t, b, q);
          if (id < 0) id += vocab[t];
          if (id >= 0 && id < vocab[t]) v += tables[t].get_f64(id * cols + c);
        }
        sum.set_f64((b * seq + q) * cols + c, v);
      }
  const Tensor g = rnd(dt, {cols}, 0.5, 1.5), bt = rnd(dt, {cols});
  std::vector<Tensor> lin = {sum, g.cast(DType::f32)};
  if (beta) lin.push_back(bt.cast(DType::f32));
  const Tensor want = ref_op("LayerNormalization", lin, {{"axis", int64_t{-1}}, {"epsilon", 1e-5}})[0].cast(dt);
  std::deque<Dev> dt_tab, dt_ids;  // Dev cannot move; a deque never does
  for (int t = 0; t < terms; ++t) {
    dt_tab.emplace_back(tables[t]);
    dt_ids.emplace_back(*id_t[t]);
  }
  Dev dg(g), db(bt), dy(static_cast<size_t>(rows * cols) * ir::size_of(dt));
  native::EmbedLayerNormArgs a;
  a.dtype = dt;
  a.rank = 2;
  a.row_dims[0] = batch;
  a.row_dims[1] = seq;
  a.cols = cols;
  a.num_terms = terms;
  for (int t = 0; t < terms; ++t) {
    native::EmbedTerm& m = a.terms[t];
    m.table = dt_tab[t].p;
    m.ids = dt_ids[t].p;
    m.ids_dtype = id_t[t]->dtype();
    m.vocab = vocab[t];
    m.offset = t == 2 ? pos_off : 0;
    m.strides[0] = t == 2 ? 0 : seq;
    m.strides[1] = t == 2 ? pos_step : 1;
  }
  a.gamma = dg.p;
  a.beta = beta ? db.p : nullptr;
  a.y = dy.p;
  a.eps = 1e-5f;
  CK(native::embed_layernorm(a, nullptr));
  check(name, dy.get(dt, {rows, cols}), want);
}

void embed_ln_tests() {
  for (DType dt : {DType::f16, DType::bf16}) {
    embed_ln_case(dt, 1, 128, 768, 3);          // BERT-base at batch 1: a warp per row, one per block
    embed_ln_case(dt, 32, 128, 768, 3, 3, 2);   // batch 32: 4 warps a block; a strided, offset position read
    embed_ln_case(dt, 2, 7, 768, 2, 0, 1, false);
  }
  embed_ln_case(DType::f32, 3, 5, 768, 3);
  embed_ln_case(DType::f16, 1, 7, 770, 3);   // one element a lane (770 halves are not 16-byte rows)
  embed_ln_case(DType::f16, 2, 3, 3000, 3);  // block per row, the tables read on every pass
  embed_ln_case(DType::f16, 4, 33, 64, 3);   // a chunk for the first 8 lanes only
  embed_ln_case(DType::f16, 2, 9, 1280, 3);  // 5 chunks a lane, compiled as 6
  // Refusals: no terms; a term without a table.
  const std::string name = "EmbedLayerNorm_refusals";
  if (!selected(name)) return;
  native::EmbedLayerNormArgs a;
  a.rank = 1;
  a.cols = 8;
  Dev d(64);
  a.gamma = a.y = d.p;
  const bool no_terms = native::embed_layernorm(a, nullptr) == cudaErrorInvalidValue &&
                        native::last_error_message().find("terms") != std::string::npos;
  a.num_terms = 1;
  a.terms[0].ids = d.p;
  a.terms[0].vocab = 4;
  const bool no_table = native::embed_layernorm(a, nullptr) == cudaErrorInvalidValue &&
                        native::last_error_message().find("table") != std::string::npos;
  if (no_terms && no_table) {
    std::printf("ok   %-60s\n", name.c_str());
    ++g_pass;
  } else {
    std::printf("FAIL %-60s no_terms %d no_table %d\n", name.c_str(), no_terms, no_table);
    ++g_fail;
  }
}

// ---- reductions ----------------------------------------------------------------------------
void reduce_case(native::ReduceOp op, const std::string& onnx, DType dt, std::vector<int64_t> dims,
                 std::vector<int64_t> axes) {
  const std::string name = "Reduce_" + onnx + "_" + dts(dt) + "_" + shp(dims) + "_axes" + shp(axes);
  if (!selected(name)) return;
  // prod near 1 (no overflow), log_sum of positives; log_sum_exp far above exp's f32 range (88), so
  // only a max-shifted sum stays finite.
  const Tensor x = op == native::ReduceOp::prod      ? rnd(dt, dims, 0.8, 1.25)
                   : op == native::ReduceOp::log_sum ? rnd(dt, dims, 0.1, 2.0)
                   : op == native::ReduceOp::log_sum_exp ? rnd(dt, dims, 90.0, 100.0)
                                                          : rnd(dt, dims);
  const Tensor want = ref_op(onnx, {x, i64s(axes)}, {{"keepdims", int64_t{0}}})[0];
  Dev dx(x), dy(want.nbytes());
  CK(native::reduce(op, dt, dx.p, dims, axes, dy.p, nullptr));
  check(name, dy.get(dt, want.dims()), want);
}

// ArgMax / ArgMin: inputs rounded to a few values, so ties decide between first and last index.
void arg_case(bool is_max, bool last, DType dt, std::vector<int64_t> dims, int64_t axis) {
  const std::string onnx = is_max ? "ArgMax" : "ArgMin";
  const std::string name = "Reduce_" + onnx + (last ? "_last" : "") + "_" + dts(dt) + "_" + shp(dims) + "_axis" +
                           std::to_string(axis);
  if (!selected(name)) return;
  Tensor x = rnd(dt, dims, -3, 3);
  for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, std::round(x.get_f64(i)));
  const Tensor want = ref_op(onnx, {x}, {{"axis", axis}, {"keepdims", int64_t{0}}, {"select_last_index", int64_t{last}}})[0];
  using R = native::ReduceOp;
  const R op = is_max ? (last ? R::argmax_last : R::argmax) : (last ? R::argmin_last : R::argmin);
  Dev dx(x), dy(want.nbytes());
  CK(native::reduce(op, dt, dx.p, dims, {axis}, dy.p, nullptr));
  check(name, dy.get(DType::i64, want.dims()), want);
}

void reduce_tests() {
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (bool is_max : {true, false})
      for (bool last : {false, true}) {
        arg_case(is_max, last, dt, {8, 16, 33}, 2);
        arg_case(is_max, last, dt, {8, 16, 33}, 0);
        arg_case(is_max, last, dt, {5, 1, 7}, 1);  // a size-1 axis: every index 0
      }
  using R = native::ReduceOp;
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    reduce_case(R::mean, "ReduceMean", dt, {8, 16, 33}, {2});
    reduce_case(R::sum, "ReduceSum", dt, {8, 16, 33}, {0});
    reduce_case(R::max, "ReduceMax", dt, {8, 16, 33}, {0, 2});
    reduce_case(R::min, "ReduceMin", dt, {8, 16, 33}, {1});
    reduce_case(R::sum_square, "ReduceSumSquare", dt, {5, 7, 9, 11}, {1, 3});
    reduce_case(R::prod, "ReduceProd", dt, {6, 40}, {1});
    reduce_case(R::mean, "ReduceMean", dt, {256, 768}, {-1});
    reduce_case(R::sum, "ReduceSum", dt, {3, 5, 7}, {0, 1, 2});
    for (const std::vector<int64_t>& axes : {std::vector<int64_t>{2}, std::vector<int64_t>{0, 2}}) {  // warp, thread per output
      reduce_case(R::l1, "ReduceL1", dt, {8, 16, 33}, axes);
      reduce_case(R::l2, "ReduceL2", dt, {8, 16, 33}, axes);
      reduce_case(R::log_sum, "ReduceLogSum", dt, {8, 16, 33}, axes);
      reduce_case(R::log_sum_exp, "ReduceLogSumExp", dt, {8, 16, 33}, axes);
    }
  }
}

// ---- GatherElements, Trilu, CumSum ---------------------------------------------------------
void gather_elements_case(DType dt, std::vector<int64_t> xdims, std::vector<int64_t> idims, int64_t axis, DType it) {
  const std::string name = "GatherElements_" + dts(dt) + "_" + shp(xdims) + "_idx" + shp(idims) + "_axis" +
                           std::to_string(axis) + "_" + dts(it);
  if (!selected(name)) return;
  const Tensor x = rnd(dt, xdims);
  const int64_t ad = xdims[size_t(axis)];
  Tensor idx(it, idims);  // negative indices count from the end
  std::uniform_int_distribution<int64_t> u(-ad, ad - 1);
  for (int64_t i = 0; i < idx.numel(); ++i) idx.set_f64(i, double(u(g_rng)));
  const Tensor want = ref_op("GatherElements", {x, idx}, {{"axis", axis}})[0];
  Dev dx(x), di(idx), dy(want.nbytes());
  CK(native::gather_elements(ir::size_of(dt), dx.p, xdims, axis, di.p, it, idims, dy.p, nullptr));
  check(name, dy.get(dt, idims), want);
}

void trilu_case(DType dt, std::vector<int64_t> dims, int64_t k, bool upper) {
  const std::string name = std::string("Trilu_") + (upper ? "upper_" : "lower_") + dts(dt) + "_" + shp(dims) + "_k" +
                           std::to_string(k);
  if (!selected(name)) return;
  const Tensor x = rnd(dt, dims, 0.5, 2.0);  // no zeros: a kept element reads as kept
  const Tensor want = ref_op("Trilu", {x, Tensor::from_i64({k}, {})}, {{"upper", int64_t{upper}}})[0];
  Dev dx(x), dy(x.nbytes());
  CK(native::trilu(ir::size_of(dt), dx.p, dims, k, upper, dy.p, nullptr));
  check(name, dy.get(dt, dims), want);
}

void cumsum_case(DType dt, std::vector<int64_t> dims, int64_t axis, bool exclusive, bool reverse) {
  const std::string name = "CumSum_" + dts(dt) + "_" + shp(dims) + "_axis" + std::to_string(axis) +
                           (exclusive ? "_exclusive" : "") + (reverse ? "_reverse" : "");
  if (!selected(name)) return;
  const Tensor x = ir::is_float(dt) ? rnd(dt, dims) : rnd(dt, dims, -50, 50);
  const Tensor want = ref_op("CumSum", {x, Tensor::from_i64({axis}, {})},
                             {{"exclusive", int64_t{exclusive}}, {"reverse", int64_t{reverse}}})[0];
  Dev dx(x), dy(x.nbytes());
  CK(native::cumsum(dt, dx.p, dims, axis, exclusive, reverse, dy.p, nullptr));
  check(name, dy.get(dt, dims), want);
}

void index_ops_tests() {
  for (DType dt : {DType::f32, DType::f16, DType::i64, DType::u8}) {
    gather_elements_case(dt, {4, 5, 6}, {4, 3, 6}, 1, DType::i64);
    gather_elements_case(dt, {4, 5, 6}, {2, 5, 7}, 2, DType::i32);  // more indices than x has along the axis
    gather_elements_case(dt, {7, 3}, {9, 3}, 0, DType::i64);
  }
  for (DType dt : {DType::f32, DType::bf16, DType::i32})
    for (int64_t k : {-2, 0, 1, 7}) {
      trilu_case(dt, {2, 5, 7}, k, true);
      trilu_case(dt, {3, 6, 4}, k, false);
    }
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64})
    for (int64_t axis : {0, 2})
      for (bool excl : {false, true})
        for (bool rev : {false, true}) cumsum_case(dt, {6, 5, 40}, axis, excl, rev);
}

// ---- data movement -------------------------------------------------------------------------
void permute_case(DType dt, std::vector<int64_t> dims, std::vector<int64_t> perm) {
  const std::string name = "Permute_" + dts(dt) + "_" + shp(dims) + "_perm" + shp(perm);
  if (!selected(name)) return;
  const Tensor x = rnd(dt, dims);
  const Tensor want = ref_op("Transpose", {x}, {{"perm", perm}})[0];
  Dev dx(x), dy(x.nbytes());
  CK(native::permute(ir::size_of(dt), dx.p, dims, perm, dy.p, nullptr));
  check(name, dy.get(dt, want.dims()), want);
}

void slice_case(DType dt, std::vector<int64_t> dims, std::vector<int64_t> st, std::vector<int64_t> en,
                std::vector<int64_t> ax, std::vector<int64_t> sp) {
  const std::string name = "Slice_" + dts(dt) + "_" + shp(dims) + "_s" + shp(st) + "_e" + shp(en) + "_st" + shp(sp);
  if (!selected(name)) return;
  const Tensor x = rnd(dt, dims);
  const Tensor want = ref_op("Slice", {x, i64s(st), i64s(en), i64s(ax), i64s(sp)})[0];
  const auto od = native::slice_shape(dims, st, en, ax, sp);
  if (od != want.dims()) {
    std::printf("FAIL %s slice_shape %s vs reference %s\n", name.c_str(), shp(od).c_str(), shp(want.dims()).c_str());
    ++g_fail;
    return;
  }
  Dev dx(x), dy(want.nbytes());
  CK(native::slice(ir::size_of(dt), dx.p, dims, st, en, ax, sp, dy.p, nullptr));
  check(name, dy.get(dt, want.dims()), want);
}

void concat_split_case(DType dt, std::vector<std::vector<int64_t>> parts, int64_t axis) {
  std::vector<Tensor> xs;
  std::string sh;
  for (auto& d : parts) {
    xs.push_back(rnd(dt, d));
    sh += "_" + shp(d);
  }
  const std::string cname = "Concat_" + dts(dt) + sh + "_axis" + std::to_string(axis);
  const Tensor want = ref_op("Concat", xs, {{"axis", axis}})[0];
  if (selected(cname)) {
    std::vector<std::unique_ptr<Dev>> d;
    std::vector<const void*> ps;
    for (auto& t : xs) {
      d.push_back(std::make_unique<Dev>(t));
      ps.push_back(d.back()->p);
    }
    Dev dy(want.nbytes());
    CK(native::concat(ir::size_of(dt), ps, parts, axis, dy.p, nullptr));
    check(cname, dy.get(dt, want.dims()), want);
  }
  const std::string sname = "Split_" + dts(dt) + "_" + shp(want.dims()) + "_axis" + std::to_string(axis);
  if (selected(sname)) {
    const int64_t ax = axis < 0 ? axis + static_cast<int64_t>(want.dims().size()) : axis;
    std::vector<int64_t> sizes;
    for (auto& d : parts) sizes.push_back(d[ax]);
    const auto wants = ref_op("Split", {want, i64s(sizes)}, {{"axis", axis}}, parts.size());
    Dev dx(want);
    std::vector<std::unique_ptr<Dev>> d;
    std::vector<void*> ps;
    for (auto& t : wants) {
      d.push_back(std::make_unique<Dev>(t.nbytes()));
      ps.push_back(d.back()->p);
    }
    CK(native::split(ir::size_of(dt), dx.p, want.dims(), axis, sizes, ps, nullptr));
    for (size_t i = 0; i < wants.size(); ++i) check(sname + "_part" + std::to_string(i), d[i]->get(dt, wants[i].dims()), wants[i]);
  }
}

void gather_case(DType dt, std::vector<int64_t> dims, int64_t axis, DType it, std::vector<int64_t> idims) {
  const std::string name = "Gather_" + dts(dt) + "_" + shp(dims) + "_axis" + std::to_string(axis) + "_" + dts(it) +
                           "_idx" + shp(idims);
  if (!selected(name)) return;
  const Tensor x = rnd(dt, dims);
  const int64_t ad = dims[axis < 0 ? axis + dims.size() : axis];
  Tensor idx(it, idims);
  std::uniform_int_distribution<int64_t> u(-ad, ad - 1);
  for (int64_t i = 0; i < idx.numel(); ++i) idx.set_f64(i, static_cast<double>(u(g_rng)));
  const Tensor want = ref_op("Gather", {x, idx}, {{"axis", axis}})[0];
  Dev dx(x), di(idx), dy(want.nbytes());
  CK(native::gather(ir::size_of(dt), dx.p, dims, axis, di.p, it, idx.numel(), dy.p, nullptr));
  check(name, dy.get(dt, want.dims()), want);
}

Tensor to_nhwc(const Tensor& t);

// nchw_to_nhwc: the reference is Cast (to y's dtype) then Transpose to NHWC, zeros appended as
// channels c..c_pad-1 (the poisoned output shows any the kernel leaves unwritten). misalign
// shifts y one element off 16-byte alignment: the scalar store path.
void nchw_to_nhwc_case(DType xt, DType yt, std::vector<int64_t> dims, int64_t c_pad, bool misalign = false) {
  const std::string name = "NchwToNhwc_" + dts(xt) + "_to_" + dts(yt) + "_" + shp(dims) + "_cpad" +
                           std::to_string(c_pad) + (misalign ? "_misaligned" : "");
  if (!selected(name)) return;
  const int64_t N = dims[0], C = dims[1], H = dims[2], W = dims[3];
  const Tensor x = rnd(xt, dims);
  const Tensor cast = xt == yt ? x : ref_op("Cast", {x}, {{"to", dts(yt)}})[0];
  const Tensor t = to_nhwc(cast);
  Tensor want(yt, {N, H, W, c_pad});
  for (int64_t p = 0; p < N * H * W; ++p)
    for (int64_t c = 0; c < c_pad; ++c) want.set_f64(p * c_pad + c, c < C ? t.get_f64(p * C + c) : 0.0);
  const size_t off = misalign ? ir::size_of(yt) : 0;
  Dev dx(x), dy(want.nbytes() + off);
  void* y = static_cast<char*>(dy.p) + off;
  CK(native::nchw_to_nhwc(xt, yt, dx.p, N, C, H, W, c_pad, y, nullptr));
  CK(cudaDeviceSynchronize());
  Tensor got(yt, want.dims());
  CK(cudaMemcpy(got.mutable_bytes(), y, got.nbytes(), cudaMemcpyDeviceToHost));
  check(name, got, want);
}

void movement_tests() {
  // The ResNet/MobileNet stem: f32 images to f16 NHWC padded to 8 channels (16-byte stores).
  nchw_to_nhwc_case(DType::f32, DType::f16, {2, 3, 224, 224}, 8);
  nchw_to_nhwc_case(DType::f32, DType::f16, {3, 3, 37, 45}, 8);       // W not a multiple of 32
  nchw_to_nhwc_case(DType::f32, DType::f16, {3, 3, 17, 19}, 3);       // no padding: scalar stores
  nchw_to_nhwc_case(DType::f32, DType::f16, {2, 3, 17, 19}, 8, true);  // y off alignment: scalar stores
  nchw_to_nhwc_case(DType::f32, DType::bf16, {2, 5, 9, 70}, 16);
  nchw_to_nhwc_case(DType::f16, DType::f16, {2, 64, 14, 14}, 64);     // two 32-channel tiles
  nchw_to_nhwc_case(DType::f16, DType::f16, {1, 40, 7, 33}, 40);      // tiles of 32 and 8 channels
  nchw_to_nhwc_case(DType::bf16, DType::bf16, {2, 12, 5, 300}, 16);   // rows wider than one tile
  nchw_to_nhwc_case(DType::f32, DType::f32, {2, 3, 10, 11}, 4);       // f32 stores, 4 per vector
  nchw_to_nhwc_case(DType::bf16, DType::f32, {1, 3, 6, 7}, 3);
  nchw_to_nhwc_case(DType::f16, DType::f16, {1, 1, 1, 1}, 8);
  // The few-channel kernel (c_pad one or two 16-byte vectors, y aligned): images over one block's
  // 1024 pixels; f32 into one and two 4-float vectors; c == c_pad; and the tiled fallbacks beside
  // them (c_pad not a multiple of the vector, y off alignment, c_pad over two vectors).
  nchw_to_nhwc_case(DType::f32, DType::f16, {2, 3, 37, 41}, 8);
  nchw_to_nhwc_case(DType::f32, DType::bf16, {2, 3, 37, 41}, 8);
  nchw_to_nhwc_case(DType::f16, DType::f16, {2, 3, 37, 41}, 8);
  nchw_to_nhwc_case(DType::f32, DType::f32, {2, 3, 37, 41}, 4);
  nchw_to_nhwc_case(DType::f32, DType::f32, {2, 3, 37, 41}, 8);
  nchw_to_nhwc_case(DType::f16, DType::f16, {3, 8, 33, 35}, 8);
  nchw_to_nhwc_case(DType::f32, DType::f16, {2, 11, 19, 23}, 16);
  nchw_to_nhwc_case(DType::f32, DType::f16, {2, 3, 37, 41}, 3);
  nchw_to_nhwc_case(DType::f32, DType::f16, {2, 3, 37, 41}, 8, true);
  nchw_to_nhwc_case(DType::f16, DType::f16, {2, 5, 37, 41}, 6);
  nchw_to_nhwc_case(DType::f32, DType::f16, {2, 17, 13, 9}, 24);

  for (DType dt : {DType::f32, DType::f16}) {
    permute_case(dt, {2, 128, 12, 64}, {0, 2, 1, 3});  // BERT heads split: innermost stays
    permute_case(dt, {2, 128, 12, 64}, {0, 2, 3, 1});  // K^T: innermost moves (tiled)
    permute_case(dt, {33, 65}, {1, 0});
    permute_case(dt, {3, 5, 7, 9}, {3, 1, 0, 2});
    permute_case(dt, {4, 6, 10}, {2, 0, 1});
    slice_case(dt, {10, 37}, {1, -30}, {9, 100}, {0, 1}, {2, 3});
    slice_case(dt, {10, 37}, {-1, 20}, {-100, 0}, {1, 0}, {-1, -2});
    slice_case(dt, {4, 16, 768}, {0}, {384}, {2}, {1});
    concat_split_case(dt, {{2, 3, 8}, {2, 5, 8}, {2, 1, 8}}, 1);
    concat_split_case(dt, {{3, 7}, {3, 5}}, -1);
    concat_split_case(dt, {{4, 768}, {8, 768}}, 0);
    gather_case(dt, {1000, 768}, 0, DType::i64, {2, 128});  // embeddings
    gather_case(dt, {4, 10, 6}, 1, DType::i32, {3});
    gather_case(dt, {5, 9}, -1, DType::i64, {2, 2});
  }
  gather_case(DType::i64, {7, 3}, 0, DType::i64, {4});
}

// ---- where / cast --------------------------------------------------------------------------
void where_cast_tests() {
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    const std::string name = "Where_" + dts(dt) + "_4x5x8";
    if (selected(name)) {
      const Tensor c = rnd(DType::boolean, {4, 1, 8}), a = rnd(dt, {4, 5, 8}), b = rnd(dt, {8});
      const Tensor want = ref_op("Where", {c, a, b})[0];
      Dev dc(c), da(a), db(b), dy(want.nbytes());
      CK(native::where(dt, dc.p, {4, 1, 8}, da.p, {4, 5, 8}, db.p, {8}, dy.p, {4, 5, 8}, nullptr));
      check(name, dy.get(dt, {4, 5, 8}), want);
    }
  }
  const std::pair<DType, DType> casts[] = {{DType::f32, DType::f16}, {DType::f16, DType::f32}, {DType::f32, DType::bf16},
                                           {DType::bf16, DType::f32}, {DType::f32, DType::i64}, {DType::i64, DType::f32},
                                           {DType::f16, DType::bf16}, {DType::i64, DType::i32}, {DType::f32, DType::boolean}};
  // 1001: the vector kernel's tail; 3 << 20 + 3: more than one grid-stride pass.
  for (int64_t n : {int64_t{1001}, int64_t{(3 << 20) + 3}})
    for (auto [from, to] : casts) {
      const std::string name = "Cast_" + dts(from) + "_to_" + dts(to) + "_" + std::to_string(n);
      if (!selected(name)) continue;
      const Tensor x = rnd(from, {n}, -50, 50);
      const Tensor want = ref_op("Cast", {x}, {{"to", dts(to)}})[0];
      Dev dx(x), dy(want.nbytes());
      CK(native::cast(from, to, dx.p, dy.p, n, nullptr));
      check(name, dy.get(to, {n}), want);
    }
}

// ---- fused attention -------------------------------------------------------------------------
// Q, K, V and O in BERT's [b, s, h, 64] GEMM-output layout (read through strides), against a
// double-precision reference on the same rounded inputs. mask_kind as softmax_case, the mask in
// mask_dt; 3: a [B,1,Q,K] f32 mask whose rows 3 mod 7 are all finfo(f32).min (HF's padding value),
// rows 5 mod 7 all -inf (zeros) and rows 4 mod 7 finfo.min at every third key (the reference rounds
// scale·s + mask to f32 there, as the kernel does, so a row of finfo.min averages V uniformly).
// packed (sq = sk): Q, K and V read in place from one [b, s, 3, h, d] tensor, as the fused plan reads
// the joined QKV GEMM's output. mask_dt i64: a select mask of 0/1/2 (HF's attention_mask, as the
// fused plan reads it), mask_true where nonzero, else mask_false; with mask_kind 2 its rows 3 mod 7
// are all zeros. kv_group > 1: grouped-query attention, K and V with h / kv_group heads, query head
// hi reading K/V head hi / kv_group (Llama-style GQA; kv_group = h is multi-query). Every case runs each kernel (the automatic choice, the previous
// kernel and each block shape forced), the output poisoned before each run.
void attention_case(DType dt, int64_t b, int64_t h, int64_t sq, int64_t sk, int mask_kind, bool causal,
                    int64_t d = 64, bool packed = false, DType mask_dt = DType::f32, double mask_true = 0,
                    double mask_false = -3.4028234663852886e38, int64_t kv_group = 1) {
  const std::string name = "Attention_" + dts(dt) + "_b" + std::to_string(b) + "h" + std::to_string(h) + "_q" +
                           std::to_string(sq) + "k" + std::to_string(sk) + "d" + std::to_string(d) + "_mask" +
                           std::to_string(mask_kind) + (mask_kind && mask_dt != DType::f32 ? dts(mask_dt) : "") +
                           (causal ? "_causal" : "") + (packed ? "_packedqkv" : "") +
                           (mask_kind && mask_dt == DType::i64 ? "_sel" + std::to_string(int(mask_true)) +
                                                                     (mask_false < -1e38 ? "_fmin" : "_" + std::to_string(int(mask_false)))
                                                               : "") +
                           (kv_group > 1 ? "_gqa" + std::to_string(kv_group) : "");
  const auto& kernels = native::kAttentionKernelNames;
  bool any = false;
  for (const auto& kn : kernels) any = any || selected(name + "_" + kn.second);
  if (!any) return;
  const int64_t hk = h / kv_group;  // K/V heads
  const Tensor q = rnd(dt, {b, sq, h, d}), k = rnd(dt, {b, sk, hk, d}), v = rnd(dt, {b, sk, hk, d});
  std::vector<int64_t> mdims = mask_kind == 1                      ? std::vector<int64_t>{b, 1, 1, sk}
                               : mask_kind == 2 || mask_kind == 3 ? std::vector<int64_t>{b, 1, sq, sk}
                                                                  : std::vector<int64_t>{1};
  const bool select = mask_kind && mask_dt == DType::i64;
  Tensor mask = select ? Tensor(DType::i64, mdims) : rnd(mask_kind ? mask_dt : DType::f32, mdims, -3, 0);
  if (select)
    for (int64_t i = 0; i < mask.numel(); ++i) {
      const int64_t row = mask_kind == 2 ? i / sk % sq : -1;
      mask.set_f64(i, row % 7 == 3 || (i * 7919 + 13) % 10 >= 7 ? 0 : (i % 11 == 4 ? 2 : 1));
    }
  else if (mask_kind)
    for (int64_t i = 0; i < mask.numel(); i += 5) mask.set_f64(i, -10000.0);
  // The addend at a mask element: its value, or a select mask's choice.
  auto addend = [&](int64_t at) { return select ? (mask.get_f64(at) != 0 ? mask_true : mask_false) : mask.get_f64(at); };
  const double fmin = -3.4028234663852886e38;  // finfo(f32).min
  if (mask_kind == 3)
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t i = 0; i < sq; ++i)
        for (int64_t j = 0; j < sk; ++j) {
          const int64_t at = (bi * sq + i) * sk + j;
          if (i % 7 == 3 || (i % 7 == 4 && j % 3 == 0)) mask.set_f64(at, fmin);
          if (i % 7 == 5) mask.set_f64(at, -INFINITY);
        }
  const float scale = 0.125f;
  std::vector<double> want(static_cast<size_t>(b * sq * h * d));
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t hi = 0; hi < h; ++hi)
      for (int64_t i = 0; i < sq; ++i) {
        std::vector<double> s(static_cast<size_t>(sk));
        double mx = -INFINITY;
        for (int64_t j = 0; j < sk; ++j) {
          double acc = 0;
          for (int64_t c = 0; c < d; ++c)
            acc += q.get_f64(((bi * sq + i) * h + hi) * d + c) * k.get_f64(((bi * sk + j) * hk + hi / kv_group) * d + c);
          acc *= scale;
          if (select) acc = double(float(acc) + float(addend(mask_kind == 1 ? bi * sk + j : (bi * sq + i) * sk + j)));
          else if (mask_kind == 1) acc += addend(bi * sk + j);
          else if (mask_kind == 2) acc += addend((bi * sq + i) * sk + j);
          if (mask_kind == 3) acc = double(float(acc) + float(mask.get_f64((bi * sq + i) * sk + j)));
          if (causal && j > i + (sk - sq)) acc = -INFINITY;
          s[size_t(j)] = acc;
          mx = std::max(mx, acc);
        }
        double sum = 0;
        for (double& x : s) sum += (x = mx == -INFINITY ? 0.0 : std::exp(x - mx));  // fully masked: zeros
        const double inv = sum > 0 ? 1 / sum : 0.0;
        for (int64_t c = 0; c < d; ++c) {
          double o = 0;
          for (int64_t j = 0; j < sk; ++j) o += s[size_t(j)] * inv * v.get_f64(((bi * sk + j) * hk + hi / kv_group) * d + c);
          want[size_t(((bi * sq + i) * h + hi) * d + c)] = o;
        }
      }
  const int64_t hd = h * d;
  Tensor qkv(dt, packed ? std::vector<int64_t>{b, sq, 3, h, d} : std::vector<int64_t>{1});
  if (packed)
    for (int64_t r = 0; r < b * sq; ++r)
      for (int64_t c = 0; c < hd; ++c) {
        qkv.set_f64((r * 3 + 0) * hd + c, q.get_f64(r * hd + c));
        qkv.set_f64((r * 3 + 1) * hd + c, k.get_f64(r * hd + c));
        qkv.set_f64((r * 3 + 2) * hd + c, v.get_f64(r * hd + c));
      }
  const size_t out_bytes = size_t(b * sq * h * d) * ir::size_of(dt);
  Dev dq(q), dk(k), dv(v), dqkv(qkv), dm(mask), dout(out_bytes);
  native::AttentionArgs a;
  a.dtype = dt;
  a.q = dq.p, a.k = dk.p, a.v = dv.p, a.o = dout.p;
  if (packed) {
    uint8_t* base = static_cast<uint8_t*>(dqkv.p);
    a.q = base, a.k = base + hd * ir::size_of(dt), a.v = base + 2 * hd * ir::size_of(dt);
  }
  a.b = b, a.h = h, a.sq = sq, a.sk = sk, a.d = d, a.kv_group = kv_group;
  const int64_t qs[3] = {sq * hd, d, hd}, ks[3] = {sk * hk * d, d, hk * d}, qkvs[3] = {sq * 3 * hd, d, 3 * hd};
  for (int i = 0; i < 3; ++i) {
    a.o_stride[i] = qs[i];
    a.q_stride[i] = packed ? qkvs[i] : qs[i];
    a.k_stride[i] = a.v_stride[i] = packed ? qkvs[i] : ks[i];
  }
  a.scale = scale;
  a.causal = causal;
  if (mask_kind) {
    a.mask = dm.p;
    a.mask_dtype = mask_dt;
    a.mask_true = static_cast<float>(mask_true), a.mask_false = static_cast<float>(mask_false);
    if (mask_kind == 1) a.mask_stride[0] = sk;
    if (mask_kind >= 2) a.mask_stride[0] = sq * sk, a.mask_stride[2] = sk;
  }
  for (const auto& [kernel, kname] : kernels) {
    const std::string full = name + "_" + kname;
    if (!selected(full)) continue;
    CK(cudaMemset(dout.p, 0xFF, out_bytes));  // poison: unwritten elements read as NaN
    a.kernel = kernel;
    CK(native::attention(a, nullptr));
    const Tensor got = dout.get(dt, {b, sq, h, d});
    double num = 0, den = 0;
    bool finite = true;
    for (int64_t i = 0; i < got.numel(); ++i) {
      const double g = got.get_f64(i), w = want[size_t(i)];
      finite = finite && std::isfinite(g);
      num += (g - w) * (g - w);
      den += w * w;
    }
    const double err = std::sqrt(num / std::max(den, 1e-30)), tol = dt == DType::f16 ? 3e-3 : 2e-2;
    const bool ok = finite && err <= tol;
    std::printf("%s %-66s rel_l2=%.3g tol=%.0e%s\n", ok ? "PASS" : "FAIL", full.c_str(), err, tol,
                finite ? "" : " (non-finite output: unwritten?)");
    ok ? ++g_pass : ++g_fail;
  }
}

// Additive biases, long key sequences and padded head dims: Q, K, V and O as [b, s, h, d] (packed:
// one [b, s, 3, h, d] tensor), against a double reference on the rounded inputs, output poisoned
// first, the automatic kernel (every block shape forced too where d is 32 or 64 and the fast path
// runs). bias: 0 none; 1 a relative position bias [h, sq, sk] (strides {0, sq·sk, sk}); 2 a window
// shift mask [nW, sq, sk] of 0 and -100 wrapping over the batch (b % nW, mask_batch_inner = nW);
// 3 their sum [nW, h, sq, sk], wrapping, as fuse_attention folds Swin's two constants. The bias is in
// bias_dt (f32 or the dtype).
void attention_bias_case(DType dt, int64_t b, int64_t h, int64_t sq, int64_t sk, int64_t d, int bias, bool packed = false,
                         int64_t nw = 1, DType bias_dt = DType::f32, bool causal = false) {
  const std::string name = "AttentionBias_" + dts(dt) + "_b" + std::to_string(b) + "h" + std::to_string(h) + "_q" +
                           std::to_string(sq) + "k" + std::to_string(sk) + "d" + std::to_string(d) + "_bias" +
                           std::to_string(bias) + (bias ? dts(bias_dt) : "") + (nw > 1 ? "_nw" + std::to_string(nw) : "") +
                           (packed ? "_packedqkv" : "") + (causal ? "_causal" : "");
  const bool fast = d == 32 || d == 64;
  bool any = false;
  for (const auto& kn : native::kAttentionKernelNames) any = any || selected(name + "_" + kn.second);
  if (!any) return;
  const Tensor q = rnd(dt, {b, sq, h, d}), k = rnd(dt, {b, sk, h, d}), v = rnd(dt, {b, sk, h, d});
  const Tensor rel = rnd(bias_dt, {h, sq, sk}, -2, 2);
  Tensor shift(bias_dt, {nw, sq, sk});
  for (int64_t i = 0; i < shift.numel(); ++i) shift.set_f64(i, (i * 7919 + i / sk * 13) % 5 == 0 ? -100.0 : 0.0);
  Tensor sum(bias_dt, {nw, h, sq, sk});
  for (int64_t w = 0; w < nw; ++w)
    for (int64_t hi = 0; hi < h; ++hi)
      for (int64_t e = 0; e < sq * sk; ++e)
        sum.set_f64((w * h + hi) * sq * sk + e, rel.get_f64(hi * sq * sk + e) + shift.get_f64(w * sq * sk + e));
  const Tensor& mask = bias == 1 ? rel : bias == 2 ? shift : sum;
  auto addend = [&](int64_t bi, int64_t hi, int64_t i, int64_t j) -> double {
    const int64_t w = bi % nw;
    if (bias == 1) return rel.get_f64((hi * sq + i) * sk + j);
    if (bias == 2) return shift.get_f64((w * sq + i) * sk + j);
    if (bias == 3) return sum.get_f64(((w * h + hi) * sq + i) * sk + j);
    return 0.0;
  };
  const float scale = 1.f / std::sqrt(float(d));
  std::vector<double> want(static_cast<size_t>(b * sq * h * d));
  std::vector<double> s(static_cast<size_t>(sk));
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t hi = 0; hi < h; ++hi)
      for (int64_t i = 0; i < sq; ++i) {
        double mx = -INFINITY;
        for (int64_t j = 0; j < sk; ++j) {
          double acc = 0;
          for (int64_t c = 0; c < d; ++c)
            acc += q.get_f64(((bi * sq + i) * h + hi) * d + c) * k.get_f64(((bi * sk + j) * h + hi) * d + c);
          acc = acc * scale + addend(bi, hi, i, j);
          if (causal && j > i + (sk - sq)) acc = -INFINITY;
          s[size_t(j)] = acc;
          mx = std::max(mx, acc);
        }
        double total = 0;
        for (double& x : s) total += (x = mx == -INFINITY ? 0.0 : std::exp(x - mx));
        for (int64_t c = 0; c < d; ++c) {
          double o = 0;
          for (int64_t j = 0; j < sk; ++j) o += s[size_t(j)] * v.get_f64(((bi * sk + j) * h + hi) * d + c);
          want[size_t(((bi * sq + i) * h + hi) * d + c)] = total > 0 ? o / total : 0.0;
        }
      }
  const int64_t hd = h * d;
  Tensor qkv(dt, packed ? std::vector<int64_t>{b, sq, 3, h, d} : std::vector<int64_t>{1});
  if (packed)
    for (int64_t r = 0; r < b * sq; ++r)
      for (int64_t c = 0; c < hd; ++c) {
        qkv.set_f64((r * 3 + 0) * hd + c, q.get_f64(r * hd + c));
        qkv.set_f64((r * 3 + 1) * hd + c, k.get_f64(r * hd + c));
        qkv.set_f64((r * 3 + 2) * hd + c, v.get_f64(r * hd + c));
      }
  const size_t out_bytes = size_t(b * sq * h * d) * ir::size_of(dt);
  Dev dq(q), dk(k), dv(v), dqkv(qkv), dm(mask), dout(out_bytes);
  native::AttentionArgs a;
  a.dtype = dt;
  a.q = dq.p, a.k = dk.p, a.v = dv.p, a.o = dout.p;
  if (packed) {  // d·h elements apart: only 8-byte aligned where d is not a multiple of 8
    uint8_t* base = static_cast<uint8_t*>(dqkv.p);
    a.q = base, a.k = base + hd * ir::size_of(dt), a.v = base + 2 * hd * ir::size_of(dt);
  }
  a.b = b, a.h = h, a.sq = sq, a.sk = sk, a.d = d;
  for (int i = 0; i < 3; ++i) {
    const int64_t qs[3] = {sq * hd, d, hd}, ks[3] = {sk * hd, d, hd}, ps[3] = {sq * 3 * hd, d, 3 * hd};
    a.o_stride[i] = qs[i];
    a.q_stride[i] = packed ? ps[i] : qs[i];
    a.k_stride[i] = a.v_stride[i] = packed ? ps[i] : ks[i];
  }
  a.scale = scale;
  a.causal = causal;
  if (bias) {
    a.mask = dm.p;
    a.mask_dtype = bias_dt;
    if (bias == 1) a.mask_stride[0] = 0, a.mask_stride[1] = sq * sk, a.mask_stride[2] = sk;
    if (bias == 2) a.mask_stride[0] = sq * sk, a.mask_stride[1] = 0, a.mask_stride[2] = sk;
    if (bias == 3) a.mask_stride[0] = h * sq * sk, a.mask_stride[1] = sq * sk, a.mask_stride[2] = sk;
    if (bias >= 2) a.mask_batch_inner = nw;
  }
  for (const auto& [kernel, kname] : native::kAttentionKernelNames) {
    const std::string full = name + "_" + kname;
    if (!selected(full) || (!fast && kernel != native::AttentionKernel::automatic)) continue;
    CK(cudaMemset(dout.p, 0xFF, out_bytes));  // poison: unwritten elements read as NaN
    a.kernel = kernel;
    CK(native::attention(a, nullptr));
    const Tensor got = dout.get(dt, {b, sq, h, d});
    double num = 0, den = 0;
    bool finite = true;
    for (int64_t i = 0; i < got.numel(); ++i) {
      const double g = got.get_f64(i), w = want[size_t(i)];
      finite = finite && std::isfinite(g);
      num += (g - w) * (g - w);
      den += w * w;
    }
    const double err = std::sqrt(num / std::max(den, 1e-30)), tol = dt == DType::f16 ? 3e-3 : 2e-2;
    const bool ok = finite && err <= tol;
    std::printf("%s %-66s rel_l2=%.3g tol=%.0e%s\n", ok ? "PASS" : "FAIL", full.c_str(), err, tol,
                finite ? "" : " (non-finite output: unwritten?)");
    ok ? ++g_pass : ++g_fail;
  }
}

void attention_tests() {
  for (DType dt : {DType::f16, DType::bf16}) {
    // Whisper-tiny's encoder (1500 keys, 24 key tiles), ViT at 384 px (577), a relative bias on both.
    attention_bias_case(dt, 1, 2, 1500, 1500, 64, 0);
    attention_bias_case(dt, 1, 2, 577, 577, 64, 1);
    attention_bias_case(dt, 2, 3, 100, 1500, 32, 1, false, 1, dt, true);
    // MobileViT-S's head dims (36, 48, 60: padded in shared memory), packed Q/K/V only 8-byte aligned.
    for (int64_t d : {36, 48, 60}) {
      attention_bias_case(dt, 4, 4, 256, 256, d, 0, true);
      attention_bias_case(dt, 2, 4, 77, 77, d, 1, false, 1, dt);
    }
    // Other multiples of 4 up to 128; a 1500-key sequence with a padded head dim.
    for (int64_t d : {4, 40, 52, 80, 100, 128}) attention_bias_case(dt, 2, 3, 77, 100, d, 1);
    attention_bias_case(dt, 1, 2, 1500, 1500, 48, 0, false, 1, DType::f32, true);
    // Swin's shifted windows: 2 images x 4 windows of 49 tokens, 3 heads of 32; the shift mask alone
    // and summed with the relative position bias, wrapping every 4 windows; in f32 and the dtype.
    attention_bias_case(dt, 8, 3, 49, 49, 32, 2, false, 4);
    attention_bias_case(dt, 8, 3, 49, 49, 32, 3, false, 4);
    attention_bias_case(dt, 8, 3, 49, 49, 32, 3, true, 4, dt);
    attention_bias_case(dt, 8, 3, 49, 49, 36, 3, false, 4);
    attention_case(dt, 2, 12, 128, 128, 1, false);  // BERT-base, padding mask
    attention_case(dt, 1, 12, 77, 77, 0, true);     // GPT-2, causal, ragged tile
    attention_case(dt, 3, 2, 9, 300, 2, false);     // more keys than queries, [B,1,Q,K] mask
    attention_case(dt, 1, 2, 130, 512, 1, true);    // eight key tiles
    attention_case(dt, 2, 2, 16, 16, 1, false, 32);  // head dim 32 (the bundled bert_tiny)
    // Grids the automatic choice gives other block shapes (every case also runs each shape forced).
    attention_case(dt, 8, 12, 128, 128, 2, true);
    attention_case(dt, 24, 12, 100, 100, 1, false);
    // More 128-row blocks than two an SM: automatic takes four warps of 32 rows (no mask; below, the
    // i64 [B,1,1,K] mask at batch 32), here causal, ragged, head dim 32.
    attention_case(dt, 24, 12, 100, 100, 0, true, 32);
    // BERT-base as the fused plan runs it: packed Q/K/V, a [B,1,1,K] mask, and HF's expanded
    // [B,1,Q,K] one in f32 and in the tensor dtype.
    attention_case(dt, 1, 12, 128, 128, 1, false, 64, true);
    attention_case(dt, 2, 12, 128, 128, 2, false, 64, true);
    attention_case(dt, 2, 12, 128, 128, 2, false, 64, true, dt);
    // Split keys over four tiles with causal tile skipping, per-row mask, packed Q/K/V.
    attention_case(dt, 1, 4, 200, 200, 2, true, 64, true);
    // Causal with fewer keys than queries: the first 16 rows see no key and give zeros.
    attention_case(dt, 2, 3, 40, 24, 1, true);
    // Head dim 32 with ragged rows and keys; a per-row mask in the tensor dtype.
    attention_case(dt, 6, 12, 100, 100, 1, false, 32);
    attention_case(dt, 6, 12, 100, 100, 2, true, 64, false, dt);
    attention_case(dt, 24, 12, 100, 100, 2, true, 32);
    // One query and one key; 512 of each with a per-row mask (eight tiles, buffers reused).
    attention_case(dt, 4, 12, 1, 1, 1, false);
    attention_case(dt, 2, 3, 1, 1, 2, true, 32);
    attention_case(dt, 1, 2, 512, 512, 2, false);
    attention_case(dt, 1, 2, 512, 512, 2, true, 32, false, dt);
    // Odd mask strides (77 keys): one element a load on every step, not only the ragged one.
    attention_case(dt, 2, 3, 77, 77, 2, false);
    attention_case(dt, 2, 4, 64, 77, 1, false, 64, false, dt);
    // finfo(f32).min and -inf rows (HF's padding mask), with and without causal.
    attention_case(dt, 2, 3, 40, 100, 3, false);
    attention_case(dt, 2, 3, 100, 100, 3, true, 32);
    // The i64 attention_mask read as a select (BERT-base's fused plan at batch 1 and 32; its rows of
    // zeros are all finfo.min and average V), other select values, odd strides, causal, head dim 32.
    // [B,1,1,K] masks take the shared-row kernel unless SABRE_ATTN_BCAST=0 (run the test both ways).
    attention_case(dt, 1, 12, 128, 128, 1, false, 64, true, DType::i64);
    attention_case(dt, 32, 12, 128, 128, 1, false, 64, true, DType::i64);
    attention_case(dt, 2, 3, 40, 100, 2, false, 64, false, DType::i64);
    attention_case(dt, 2, 4, 64, 77, 1, false, 64, false, DType::i64, 0.5, -2);
    attention_case(dt, 3, 2, 77, 77, 2, true, 32, false, DType::i64, 1, -10000);
    // [B,1,1,K] i64 (one load shared by a thread's two rows) with causal rows that see no key.
    attention_case(dt, 2, 3, 40, 24, 1, true, 64, false, DType::i64);
    // Grouped-query attention (Llama's 16 query heads on 4 K/V heads: a causal [B,1,Q,K] f32 mask),
    // multi-query (one K/V head), and without a mask at ViT's 197 and CLIP's 50 keys, head dim 32.
    attention_case(dt, 2, 16, 100, 100, 2, true, 64, false, DType::f32, 0, -3.4028234663852886e38, 4);
    attention_case(dt, 3, 8, 77, 77, 0, true, 32, false, DType::f32, 0, -3.4028234663852886e38, 8);
    attention_case(dt, 24, 16, 128, 128, 0, false, 64, false, DType::f32, 0, -3.4028234663852886e38, 2);
    attention_case(dt, 2, 12, 197, 197, 0, false);
    attention_case(dt, 3, 12, 50, 50, 0, false, 32);
  }
  // Refusals: head dim 50 (not a multiple of 4), too many keys, a stride not a multiple of 4, an
  // unknown kernel, heads that are no multiple of the K/V group.
  native::AttentionArgs a;
  a.q = a.k = a.v = reinterpret_cast<void*>(256);
  a.sq = a.sk = 16;
  for (int i = 0; i < 3; ++i) a.q_stride[i] = a.k_stride[i] = a.v_stride[i] = 64;
  int refused = 0;
  a.d = 50;
  refused += native::attention(a, nullptr) == cudaErrorNotSupported;
  a.d = 64, a.sk = native::kMaxAttentionKeys + 1;
  refused += native::attention(a, nullptr) == cudaErrorNotSupported;
  a.sk = 16, a.q_stride[2] = 62;
  refused += native::attention(a, nullptr) == cudaErrorNotSupported;
  a.q_stride[2] = 64, a.kernel = static_cast<native::AttentionKernel>(99);
  refused += native::attention(a, nullptr) == cudaErrorInvalidValue;
  a.kernel = native::AttentionKernel::automatic, a.h = 6, a.kv_group = 4;
  refused += native::attention(a, nullptr) == cudaErrorNotSupported;
  std::printf("%s %-66s %d of 5 refused\n", refused == 5 ? "PASS" : "FAIL", "Attention_refusals", refused);
  refused == 5 ? ++g_pass : ++g_fail;
}

// ---- depthwise conv (NHWC) against the reference executor's grouped Conv --------------------
Tensor to_nhwc(const Tensor& t);
// clamp: a fused Relu (hi = +inf) or Clip, checked against the reference's Conv then Clip.
void depthwise_case(DType dt, int64_t n, int64_t c, int64_t hw, int64_t k, int64_t stride, int64_t pad,
                    bool clamp = false, float lo = 0.f, float hi = INFINITY) {
  std::string name = "Depthwise_" + dts(dt) + "_n" + std::to_string(n) + "c" + std::to_string(c) + "_" +
                     std::to_string(hw) + "x" + std::to_string(hw) + "_k" + std::to_string(k) + "s" +
                     std::to_string(stride) + "p" + std::to_string(pad);
  if (clamp) name += std::isinf(hi) ? "_relu" : "_clip0to" + std::to_string(int(hi * 10)) + "tenths";
  if (!selected(name)) return;
  const Tensor x = rnd(dt, {n, c, hw, hw}), w = rnd(dt, {c, 1, k, k}), b = rnd(dt, {c});
  const std::vector<int64_t> pads = {pad, pad, pad, pad}, strides = {stride, stride}, ks = {k, k};
  Tensor conv = ref_op("Conv", {x, w, b}, {{"group", c}, {"pads", pads}, {"strides", strides}, {"kernel_shape", ks}})[0];
  if (clamp)
    conv = std::isinf(hi) ? ref_op("Relu", {conv}, {})[0]
                          : ref_op("Clip", {conv, Tensor::from_f32({lo}, {}).cast(dt), Tensor::from_f32({hi}, {}).cast(dt)}, {})[0];
  const Tensor want = to_nhwc(conv);
  const Tensor xn = to_nhwc(x);
  Tensor rsc(dt, {k, k, c});
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t i = 0; i < k * k; ++i) rsc.set_f64(i * c + ch, w.get_f64(ch * k * k + i));
  Dev dx(xn), dw(rsc), db(b), dy(want.nbytes());
  native::DepthwiseArgs a;
  a.dtype = dt;
  a.x = dx.p, a.w = dw.p, a.bias = db.p, a.y = dy.p;
  a.n = n, a.h = hw, a.w_ = hw, a.c = c, a.r = k, a.s = k;
  a.p = want.dims()[1], a.q = want.dims()[2];
  a.pad_h = a.pad_w = pad, a.stride_h = a.stride_w = stride;
  a.clamp = clamp, a.clamp_min = lo, a.clamp_max = hi;
  CK(native::depthwise_conv2d(a, nullptr));
  check(name, dy.get(dt, want.dims()), want);
}

// A fused activation (native::ConvAct) after conv + bias, against the reference's ops in their ONNX
// spellings: SiLU as x·Sigmoid(x), Swish(1.5) as x·Sigmoid(1.5·x), Sigmoid, HardSwish, HardSigmoid(0.3, 0.4).
void depthwise_act_case(DType dt, int64_t c, native::ConvAct act, float alpha, float beta) {
  const int64_t n = 2, hw = 9, k = 3;
  const std::string name = "Depthwise_" + dts(dt) + "_c" + std::to_string(c) + "_" +
                           std::string(native::conv_act_name(act)) + (alpha == 1.5f ? "_alpha1p5" : "");
  if (!selected(name)) return;
  const Tensor x = rnd(dt, {n, c, hw, hw}), w = rnd(dt, {c, 1, k, k}), b = rnd(dt, {c});
  const std::vector<int64_t> pads = {1, 1, 1, 1}, ks = {k, k};
  const Tensor conv = ref_op("Conv", {x, w, b}, {{"group", c}, {"pads", pads}, {"kernel_shape", ks}})[0];
  Tensor y;
  switch (act) {
    case native::ConvAct::silu: {
      const Tensor scaled = ref_op("Mul", {conv, Tensor::scalar_f32(alpha).cast(dt)})[0];
      y = ref_op("Mul", {conv, ref_op("Sigmoid", {scaled})[0]})[0];
      break;
    }
    case native::ConvAct::sigmoid: y = ref_op("Sigmoid", {conv})[0]; break;
    case native::ConvAct::hard_swish: y = ref_op("HardSwish", {conv})[0]; break;
    default: y = ref_op("HardSigmoid", {conv}, {{"alpha", double(alpha)}, {"beta", double(beta)}})[0]; break;
  }
  const Tensor want = to_nhwc(y), xn = to_nhwc(x);
  Tensor rsc(dt, {k, k, c});
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t i = 0; i < k * k; ++i) rsc.set_f64(i * c + ch, w.get_f64(ch * k * k + i));
  Dev dx(xn), dw(rsc), db(b), dy(want.nbytes());
  native::DepthwiseArgs a;
  a.dtype = dt;
  a.x = dx.p, a.w = dw.p, a.bias = db.p, a.y = dy.p;
  a.n = n, a.h = hw, a.w_ = hw, a.c = c, a.r = k, a.s = k, a.p = hw, a.q = hw;
  a.pad_h = a.pad_w = 1;
  a.act = act, a.act_alpha = alpha, a.act_beta = beta;
  CK(native::depthwise_conv2d(a, nullptr));
  check(name, dy.get(dt, want.dims()), want);
}

void depthwise_tests() {
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (int64_t c : {32, 5}) {  // the vector kernel and the scalar one
      depthwise_act_case(dt, c, native::ConvAct::silu, 1.f, 0.f);
      depthwise_act_case(dt, c, native::ConvAct::silu, 1.5f, 0.f);
      depthwise_act_case(dt, c, native::ConvAct::sigmoid, 1.f, 0.f);
      depthwise_act_case(dt, c, native::ConvAct::hard_swish, 1.f / 6.f, 0.5f);
      depthwise_act_case(dt, c, native::ConvAct::hard_sigmoid, 0.3f, 0.4f);
    }
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    depthwise_case(dt, 2, 32, 28, 3, 1, 1);   // MobileNetV2 block
    depthwise_case(dt, 1, 96, 56, 3, 2, 1);   // the stride-2 ones
    depthwise_case(dt, 3, 5, 9, 5, 2, 2);     // odd channels, 5x5
    depthwise_case(dt, 2, 144, 14, 3, 1, 1);  // MobileNetV2's 144 channels: the vector kernel, 18 vectors
    depthwise_case(dt, 1, 40, 11, 3, 2, 0);   // 40 channels (5 half vectors), no padding, odd size
    // A fused activation (MobileNetV2's ReLU6 after each depthwise conv); the bound 0.5 is low enough
    // that both ends of the clamp engage on these random values. Vector and scalar kernels.
    depthwise_case(dt, 2, 144, 14, 3, 1, 1, true, 0.f, 0.5f);
    depthwise_case(dt, 3, 5, 9, 5, 2, 2, true, 0.f, 0.5f);
    depthwise_case(dt, 2, 32, 28, 3, 1, 1, true);
  }
}

// ---- grouped conv (NHWC, several channels per group) against the reference's grouped Conv ------
// The filter as the lowering packs it: ONNX's [K, C/G, R, S] as [R, S, C/G, K].
void grouped_case(DType dt, int64_t n, int64_t c, int64_t k, int64_t groups, int64_t hw, int64_t ks, int64_t stride,
                  int64_t pad, int64_t dil = 1, bool bias = true, bool clamp = false, float hi = INFINITY) {
  std::string name = "GroupedConv_" + dts(dt) + "_n" + std::to_string(n) + "c" + std::to_string(c) + "k" +
                     std::to_string(k) + "g" + std::to_string(groups) + "_" + std::to_string(hw) + "x" +
                     std::to_string(hw) + "_r" + std::to_string(ks) + "s" + std::to_string(stride) + "p" +
                     std::to_string(pad) + "d" + std::to_string(dil) + (bias ? "" : "_nobias");
  if (clamp) name += std::isinf(hi) ? "_relu" : "_clip0to" + std::to_string(int(hi * 10)) + "tenths";
  if (!selected(name)) return;
  const int64_t cg = c / groups;
  const Tensor x = rnd(dt, {n, c, hw, hw}), w = rnd(dt, {k, cg, ks, ks}), b = rnd(dt, {k});
  const std::vector<int64_t> pads = {pad, pad, pad, pad}, strides = {stride, stride}, dils = {dil, dil}, kk = {ks, ks};
  std::vector<Tensor> ins = {x, w};
  if (bias) ins.push_back(b);
  Tensor conv = ref_op("Conv", ins, {{"group", groups}, {"pads", pads}, {"strides", strides}, {"dilations", dils},
                                     {"kernel_shape", kk}})[0];
  if (clamp)
    conv = std::isinf(hi) ? ref_op("Relu", {conv}, {})[0]
                          : ref_op("Clip", {conv, Tensor::from_f32({0.f}, {}).cast(dt), Tensor::from_f32({hi}, {}).cast(dt)}, {})[0];
  const Tensor want = to_nhwc(conv);
  Tensor rsck(dt, {ks, ks, cg, k});
  for (int64_t o = 0; o < k; ++o)
    for (int64_t j = 0; j < cg; ++j)
      for (int64_t t = 0; t < ks * ks; ++t) rsck.set_f64((t * cg + j) * k + o, w.get_f64((o * cg + j) * ks * ks + t));
  Dev dx(to_nhwc(x)), dw(rsck), db(b), dy(want.nbytes());
  native::DepthwiseArgs a;
  a.dtype = dt;
  a.x = dx.p, a.w = dw.p, a.bias = bias ? db.p : nullptr, a.y = dy.p;
  a.n = n, a.h = hw, a.w_ = hw, a.c = c, a.r = ks, a.s = ks, a.k = k, a.groups = groups;
  a.p = want.dims()[1], a.q = want.dims()[2];
  a.pad_h = a.pad_w = pad, a.stride_h = a.stride_w = stride, a.dil_h = a.dil_w = dil;
  a.clamp = clamp, a.clamp_min = 0.f, a.clamp_max = hi;
  CK(native::depthwise_conv2d(a, nullptr));
  check(name, dy.get(dt, want.dims()), want);
}

void grouped_tests() {
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    grouped_case(dt, 2, 64, 64, 32, 14, 3, 1, 1);          // ResNeXt-50's 32x4d 3x3 (C/G = 2 here)
    grouped_case(dt, 1, 128, 128, 32, 28, 3, 2, 1);        // 4 channels a group, stride 2
    grouped_case(dt, 3, 12, 18, 3, 9, 5, 2, 2);            // 4 in and 6 out a group, 5x5, odd size
    grouped_case(dt, 2, 8, 16, 8, 7, 3, 1, 2, 2, false);   // depthwise with a multiplier of 2, dilation 2, no bias
    grouped_case(dt, 2, 16, 8, 2, 10, 1, 1, 0);            // 1x1 in 2 groups (ShuffleNet-like)
    grouped_case(dt, 2, 64, 64, 32, 14, 3, 1, 1, 1, true, true, 0.5f);  // a fused clamp
  }
  // Refusals: groups that do not divide the channels, a k without groups.
  native::DepthwiseArgs a;
  a.n = 1, a.h = a.w_ = 4, a.c = 6, a.r = a.s = 1, a.p = a.q = 4;
  a.x = a.w = a.y = reinterpret_cast<void*>(256);
  int refused = 0;
  a.k = 6, a.groups = 4;
  refused += native::depthwise_conv2d(a, nullptr) == cudaErrorInvalidValue;
  a.k = 6, a.groups = 0;
  refused += native::depthwise_conv2d(a, nullptr) == cudaErrorInvalidValue;
  a.k = 9, a.groups = 2;
  refused += native::depthwise_conv2d(a, nullptr) == cudaErrorInvalidValue;
  cudaGetLastError();
  const std::string name = "GroupedConv_refusals";
  if (selected(name)) {
    std::printf("%s %-66s %d of 3 refused\n", refused == 3 ? "PASS" : "FAIL", name.c_str(), refused);
    refused == 3 ? ++g_pass : ++g_fail;
  }
}

// ---- fill / iota (run-time values: Shape-as-data and Range) --------------------------------
void fill_iota_tests() {
  for (DType dt : {DType::i64, DType::i32}) {
    const std::string fname = "Fill_" + dts(dt) + "_4_values";
    if (selected(fname)) {
      const std::vector<int64_t> vals = {7, -1, 123456, 3};
      Tensor want(dt, {4});
      for (int64_t i = 0; i < 4; ++i) want.set_f64(i, double(vals[size_t(i)]));
      Dev dy(want.nbytes());
      CK(native::fill_values(dt, dy.p, 4, vals, nullptr));
      check(fname, dy.get(dt, {4}), want);
    }
    const std::string bname = "Fill_" + dts(dt) + "_broadcast_1000";
    if (selected(bname)) {
      Tensor want(dt, {1000});
      for (int64_t i = 0; i < 1000; ++i) want.set_f64(i, 77);
      Dev dy(want.nbytes());
      CK(native::fill_values(dt, dy.p, 1000, {77}, nullptr));
      check(bname, dy.get(dt, {1000}), want);
    }
  }
  for (DType dt : {DType::i64, DType::i32, DType::f32}) {
    const std::string name = "Iota_" + dts(dt) + "_Range_5_to_1000_by_3";
    if (!selected(name)) continue;
    // The reference: ONNX Range on the executor.
    Tensor start(dt, {}), limit(dt, {}), delta(dt, {});
    start.set_f64(0, 5), limit.set_f64(0, 1000), delta.set_f64(0, 3);
    const Tensor want = ref_op("Range", {start, limit, delta})[0];
    Dev dy(want.nbytes());
    CK(native::iota(dt, dy.p, want.numel(), 5, 3, nullptr));
    check(name, dy.get(dt, {want.numel()}), want);
  }
  // Refusals: too many values, a count that matches neither 1 nor n, float output.
  int refused = 0;
  Dev dy(64 * 8);
  refused += native::fill_values(DType::i64, dy.p, 20, std::vector<int64_t>(20, 1), nullptr) != cudaSuccess;
  refused += native::fill_values(DType::i64, dy.p, 5, {1, 2}, nullptr) != cudaSuccess;
  refused += native::fill_values(DType::f16, dy.p, 1, {1}, nullptr) != cudaSuccess;
  cudaGetLastError();
  std::printf("%s %-60s %d of 3 refused\n", refused == 3 ? "PASS" : "FAIL", "Fill_refusals", refused);
  refused == 3 ? ++g_pass : ++g_fail;
}

// ---- L2 prefetch (the runtime's weight prefetch) ------------------------------------------
// A hint: it must run without a fault over any length (a tail that is not a multiple of 16 bytes,
// lengths past one block's share), leave the bytes as they were, and refuse a misaligned or null
// address.
void prefetch_tests() {
  for (int64_t n : {int64_t(1000), int64_t(262147), int64_t(5000011)}) {  // f16 elements: 2 KB .. 10 MB
    const std::string name = "L2Prefetch_f16_" + std::to_string(n) + "_unchanged";
    if (!selected(name)) continue;
    const Tensor want = rnd(DType::f16, {n});
    Dev d(want);
    CK(native::l2_prefetch(d.p, static_cast<size_t>(want.nbytes()), nullptr));
    check(name, d.get(DType::f16, {n}), want);
  }
  const std::string name = "L2Prefetch_refusals";
  if (!selected(name)) return;
  Dev d(4096);
  int refused = 0;
  refused += native::l2_prefetch(static_cast<char*>(d.p) + 8, 1024, nullptr) == cudaErrorInvalidValue;
  refused += native::l2_prefetch(nullptr, 1024, nullptr) == cudaErrorInvalidValue;
  cudaGetLastError();
  std::printf("%s %-66s %d of 2 refused\n", refused == 2 ? "PASS" : "FAIL", name.c_str(), refused);
  refused == 2 ? ++g_pass : ++g_fail;
}

// ---- pooling -------------------------------------------------------------------------------
Tensor to_nhwc(const Tensor& t) { return ref_op("Transpose", {t}, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}})[0]; }

// C a multiple of 8 (f16/bf16) or 4 (f32) in NHWC takes the 16-byte vector kernel; misalign
// shifts x and y one element off 16-byte alignment, which must send it to the scalar kernel.
void pool_case(DType dt, bool max, int k, int s, int pad, int dil, bool include_pad, native::Layout layout,
               int64_t C = 3, int64_t H = 17, int64_t W = 19, bool misalign = false) {
  const bool nhwc = layout == native::Layout::nhwc;
  const std::string name = std::string(max ? "Pool_max_" : "Pool_avg_") + dts(dt) + "_k" + std::to_string(k) + "s" +
                           std::to_string(s) + "p" + std::to_string(pad) + "d" + std::to_string(dil) +
                           (include_pad ? "_incpad" : "") + (nhwc ? "_nhwc" : "_nchw") +
                           (C != 3 ? "_c" + std::to_string(C) + "_" + std::to_string(H) + "x" + std::to_string(W) : "") +
                           (misalign ? "_misaligned" : "");
  if (!selected(name)) return;
  const int64_t N = 2;
  const Tensor x = rnd(dt, {N, C, H, W});
  std::map<std::string, ir::AttrValue> at = {{"kernel_shape", std::vector<int64_t>{k, k}},
                                             {"strides", std::vector<int64_t>{s, s}},
                                             {"pads", std::vector<int64_t>{pad, pad, pad, pad}}};
  if (max) at["dilations"] = std::vector<int64_t>{dil, dil};
  else at["count_include_pad"] = int64_t{include_pad};
  Tensor want = ref_op(max ? "MaxPool" : "AveragePool", {x}, at)[0];
  native::PoolArgs a;
  a.kind = max ? native::PoolKind::max : native::PoolKind::average;
  a.layout = layout;
  a.dtype = dt;
  a.n = N, a.c = C, a.h = H, a.w = W;
  a.kernel[0] = a.kernel[1] = k;
  a.stride[0] = a.stride[1] = s;
  a.dilation[0] = a.dilation[1] = max ? dil : 1;
  a.pad_begin[0] = a.pad_begin[1] = a.pad_end[0] = a.pad_end[1] = pad;
  a.count_include_pad = include_pad;
  native::pool_output_dims(a, false);
  const Tensor xin = nhwc ? to_nhwc(x) : x;
  if (nhwc) want = to_nhwc(want);
  const size_t off = misalign ? ir::size_of(dt) : 0;
  Dev dx(xin.nbytes() + off), dy(want.nbytes() + off);
  CK(cudaMemcpy(static_cast<char*>(dx.p) + off, xin.bytes(), xin.nbytes(), cudaMemcpyHostToDevice));
  a.x = static_cast<char*>(dx.p) + off;
  a.y = static_cast<char*>(dy.p) + off;
  CK(native::pool2d(a, nullptr));
  CK(cudaDeviceSynchronize());
  Tensor got(dt, want.dims());
  CK(cudaMemcpy(got.mutable_bytes(), a.y, got.nbytes(), cudaMemcpyDeviceToHost));
  check(name, got, want);
}

void pool_tests() {
  // 16-byte vectors of bf16; f32's 4-wide vector where C = 4 but not 8; pointers off alignment.
  pool_case(DType::bf16, true, 3, 2, 1, 1, false, native::Layout::nhwc, 32, 15, 15);
  pool_case(DType::bf16, false, 3, 2, 1, 1, true, native::Layout::nhwc, 16, 9, 8);
  pool_case(DType::f32, true, 3, 2, 1, 1, false, native::Layout::nhwc, 4, 11, 13);
  pool_case(DType::f16, true, 3, 2, 1, 1, false, native::Layout::nhwc, 64, 23, 21, true);
  pool_case(DType::f32, false, 3, 2, 1, 1, false, native::Layout::nhwc, 8, 10, 9, true);
  // ResNet-50's stem pool (3x3/2, pad 1) at odd sizes: C = 64 (16-byte vectors, unrolled 3x3),
  // C = 12 (8-byte vectors of halves, 16-byte of floats), 6 (4-byte), 5 (one element); the tap
  // loop (2x2, 5x5) at the same channel counts; a 3x3 window with dilation 2.
  for (DType dt : {DType::f16, DType::bf16, DType::f32}) {
    for (int64_t c : {64, 12, 6, 5}) {
      pool_case(dt, true, 3, 2, 1, 1, false, native::Layout::nhwc, c, 23, 25);
      pool_case(dt, false, 3, 2, 1, 1, false, native::Layout::nhwc, c, 23, 25);
      pool_case(dt, false, 3, 2, 1, 1, true, native::Layout::nhwc, c, 15, 17);
      pool_case(dt, true, 2, 2, 0, 1, false, native::Layout::nhwc, c, 13, 11);
      pool_case(dt, false, 5, 3, 2, 1, false, native::Layout::nhwc, c, 13, 11);
    }
    pool_case(dt, true, 3, 1, 2, 2, false, native::Layout::nhwc, 64, 9, 11);
    pool_case(dt, true, 3, 2, 1, 1, false, native::Layout::nhwc, 64, 56, 56);
  }
  pool_case(DType::f16, true, 3, 2, 1, 1, false, native::Layout::nhwc, 12, 23, 21, true);  // 2-byte offset: one element
  for (DType dt : {DType::f32, DType::f16}) {
    for (auto lay : {native::Layout::nchw, native::Layout::nhwc}) {
      pool_case(dt, true, 3, 2, 1, 1, false, lay);
      pool_case(dt, true, 2, 1, 0, 2, false, lay);
      pool_case(dt, false, 3, 2, 1, 1, false, lay);
      pool_case(dt, false, 3, 2, 1, 1, true, lay);
      // Channel counts the NHWC vector kernel takes (and, in NCHW, the scalar one still does).
      pool_case(dt, true, 3, 2, 1, 1, false, lay, 64, 23, 21);  // ResNet's stem pool, small
      pool_case(dt, true, 2, 1, 0, 2, false, lay, 16, 9, 10);
      pool_case(dt, false, 3, 2, 1, 1, false, lay, 8, 17, 19);
      pool_case(dt, false, 3, 2, 1, 1, true, lay, 24, 7, 6);
      // [n, c, h, w]: odd channels (the general reduction), ResNet-50's head (the NHWC vector kernel:
      // 256 vectors, 8 blocks of 32 per image), a channel count that leaves a block partly idle, 1x1.
      for (auto [n, c, h, w] : std::vector<std::array<int64_t, 4>>{{2, 5, 7, 9}, {2, 2048, 7, 7}, {3, 264, 5, 3}, {2, 64, 1, 1}}) {
        const std::string name = "GlobalAveragePool_" + dts(dt) + (lay == native::Layout::nhwc ? "_nhwc" : "_nchw") +
                                 "_" + std::to_string(n) + "x" + std::to_string(c) + "x" + std::to_string(h) + "x" +
                                 std::to_string(w);
        if (!selected(name)) continue;
        const Tensor x = rnd(dt, {n, c, h, w});
        const Tensor want = ref_op("GlobalAveragePool", {x})[0];
        const Tensor xin = lay == native::Layout::nhwc ? to_nhwc(x) : x;
        Dev dx(xin), dy(want.nbytes());
        CK(native::global_average_pool(dt, lay, dx.p, n, c, h, w, dy.p, nullptr));
        check(name, dy.get(dt, want.dims()), want);
      }
    }
  }
}

// ---- im2col (the stem conv's GEMM operand) ------------------------------------------------------
// The reference: Cast to a's dtype on the reference executor (the rounding cast() does), then a host
// im2col: a[(n·P + p)·Q + q, (r·S + s)·C + c] = x[n, c, p·sh - ph + r·dh, q·sw - pw + s·dw], 0 in
// the padding and in the columns from R·S·C to cols. A gather and one rounding: the kernel must
// match it bit for bit (poisoned NaNs show unwritten elements). cols 0: R·S·C rounded up to 8
// (what the lowering asks); misalign shifts a one element off 16-byte alignment (scalar stores).
struct Im2colCase {
  std::vector<int64_t> x;  // [n, c, h, w]
  int64_t r, s, stride_h, stride_w, pad_h, pad_w, dil_h = 1, dil_w = 1, cols = 0;
  bool misalign = false;
};
void im2col_case(DType xt, DType at, const Im2colCase& k) {
  const int64_t N = k.x[0], C = k.x[1], H = k.x[2], W = k.x[3], rsc = k.r * k.s * C;
  const int64_t cols = k.cols ? k.cols : (rsc + 7) / 8 * 8;
  const int64_t P = (H + 2 * k.pad_h - k.dil_h * (k.r - 1) - 1) / k.stride_h + 1;
  const int64_t Q = (W + 2 * k.pad_w - k.dil_w * (k.s - 1) - 1) / k.stride_w + 1;
  const std::string name = "Im2col_" + dts(xt) + "_to_" + dts(at) + "_" + shp(k.x) + "_" + std::to_string(k.r) + "x" +
                           std::to_string(k.s) + "_s" + std::to_string(k.stride_h) + std::to_string(k.stride_w) + "_p" +
                           std::to_string(k.pad_h) + std::to_string(k.pad_w) + "_d" + std::to_string(k.dil_h) +
                           std::to_string(k.dil_w) + "_cols" + std::to_string(cols) + (k.misalign ? "_misaligned" : "");
  if (!selected(name)) return;
  const Tensor x = rnd(xt, k.x);
  const Tensor xc = xt == at ? x : ref_op("Cast", {x}, {{"to", dts(at)}})[0];
  Tensor want(at, {N * P * Q, cols});
  for (int64_t row = 0; row < N * P * Q; ++row)
    for (int64_t col = 0; col < cols; ++col) {
      double v = 0;
      if (col < rsc) {
        const int64_t c = col % C, sw = (col / C) % k.s, rh = col / C / k.s;
        const int64_t n = row / (P * Q), ih = (row / Q) % P * k.stride_h - k.pad_h + rh * k.dil_h,
                      iw = row % Q * k.stride_w - k.pad_w + sw * k.dil_w;
        if (ih >= 0 && ih < H && iw >= 0 && iw < W) v = xc.get_f64(((n * C + c) * H + ih) * W + iw);
      }
      want.set_f64(row * cols + col, v);
    }
  const size_t off = k.misalign ? ir::size_of(at) : 0;
  Dev dx(x), da(want.nbytes() + off);
  native::Im2colArgs a;
  a.x_dtype = xt, a.a_dtype = at, a.x = dx.p, a.a = static_cast<char*>(da.p) + off;
  a.n = N, a.c = C, a.h = H, a.w = W, a.r = k.r, a.s = k.s, a.p = P, a.q = Q, a.cols = cols;
  a.pad_h = k.pad_h, a.pad_w = k.pad_w, a.stride_h = k.stride_h, a.stride_w = k.stride_w, a.dil_h = k.dil_h, a.dil_w = k.dil_w;
  CK(native::im2col(a, nullptr));
  CK(cudaDeviceSynchronize());
  Tensor got(at, want.dims());
  CK(cudaMemcpy(got.mutable_bytes(), a.a, got.nbytes(), cudaMemcpyDeviceToHost));
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < got.numel(); ++i)
    if (!(got.get_f64(i) == want.get_f64(i))) {
      if (first < 0) first = i;
      ++bad;
    }
  if (bad) {
    std::printf("FAIL %-60s %lld of %lld elements differ (first at row %lld col %lld: got %g want %g)\n", name.c_str(),
                (long long)bad, (long long)got.numel(), (long long)(first / cols), (long long)(first % cols),
                got.get_f64(first), want.get_f64(first));
    ++g_fail;
  } else {
    std::printf("PASS %-60s exact\n", name.c_str());
    ++g_pass;
  }
}

void im2col_tests() {
  // The stem at toy size (7x7/2 pad 3, 147 -> 152 columns): f32 and f16 images, f16 and bf16 A.
  for (auto [xt, at] : std::vector<std::pair<DType, DType>>{
           {DType::f32, DType::f16}, {DType::f16, DType::f16}, {DType::f32, DType::bf16}, {DType::bf16, DType::bf16}})
    im2col_case(xt, at, {{2, 3, 37, 41}, 7, 7, 2, 2, 3, 3});
  im2col_case(DType::f32, DType::f16, {{4, 3, 224, 224}, 7, 7, 2, 2, 3, 3});          // ResNet-50's at batch 4
  im2col_case(DType::f32, DType::f16, {{2, 4, 19, 23}, 3, 3, 1, 1, 1, 1});            // C = 4: 36 -> 40 columns
  im2col_case(DType::f16, DType::f16, {{2, 3, 21, 17}, 3, 3, 1, 1, 2, 2, 2, 2});      // dilation 2
  im2col_case(DType::f32, DType::f16, {{3, 5, 13, 11}, 5, 3, 2, 1, 2, 1, 1, 2});      // R != S, stride 2x1, dilation 1x2
  im2col_case(DType::f32, DType::f16, {{1, 3, 9, 9}, 7, 7, 2, 2, 3, 3, 1, 1, 160});   // extra zero columns
  im2col_case(DType::f32, DType::f16, {{2, 3, 37, 41}, 7, 7, 2, 2, 3, 3, 1, 1, 147}); // cols not a multiple of 8: scalar
  im2col_case(DType::f32, DType::f16, {{2, 3, 17, 19}, 7, 7, 2, 2, 3, 3, 1, 1, 0, true});  // a off alignment: scalar
  im2col_case(DType::f32, DType::f32, {{2, 3, 10, 11}, 3, 3, 1, 1, 1, 1});            // f32 A: 4 columns per store
  im2col_case(DType::f32, DType::f16, {{1, 1, 1, 1}, 1, 1, 1, 1, 0, 0});              // one pixel, 1 -> 8 columns
}

// ---- stem_conv (the small-channel conv read from NCHW, one kernel) ------------------------------
// The reference executor's Conv on the images rounded to y's dtype (the cast the kernel folds in)
// with the filter and bias in that dtype, then Relu or Clip, transposed to NHWC. The kernel takes
// the filter packed [K, cols] (native::stem_conv_column, zeros elsewhere): packed here from the
// KCRS tensor the reference gets. cols 0: native::stem_conv_cols (what the lowering asks).
struct StemCase {
  std::vector<int64_t> x;  // [n, c, h, w]
  int64_t k, r, s, stride_h, stride_w, pad_h, pad_w, dil_h = 1, dil_w = 1, cols = 0;
  bool bias = true, clamp = false;
  float lo = 0.f, hi = INFINITY;
};
void stem_case(DType xt, DType dt, const StemCase& k) {
  const int64_t N = k.x[0], C = k.x[1], H = k.x[2], W = k.x[3];
  const int64_t cols = k.cols ? k.cols : native::stem_conv_cols(C, k.r, k.s);
  std::string name = "StemConv_" + dts(xt) + "_to_" + dts(dt) + "_" + shp(k.x) + "_k" + std::to_string(k.k) + "_" +
                     std::to_string(k.r) + "x" + std::to_string(k.s) + "_s" + std::to_string(k.stride_h) +
                     std::to_string(k.stride_w) + "_p" + std::to_string(k.pad_h) + std::to_string(k.pad_w) + "_d" +
                     std::to_string(k.dil_h) + std::to_string(k.dil_w) + "_cols" + std::to_string(cols) +
                     (k.bias ? "_bias" : "");
  if (k.clamp) name += std::isinf(k.hi) ? "_relu" : "_clip0to" + std::to_string(int(k.hi * 10)) + "tenths";
  if (!selected(name)) return;
  const Tensor x = rnd(xt, k.x);
  const Tensor xc = xt == dt ? x : ref_op("Cast", {x}, {{"to", dts(dt)}})[0];
  const Tensor w = rnd(dt, {k.k, C, k.r, k.s}, -0.5, 0.5), b = rnd(dt, {k.k});
  const std::vector<int64_t> pads = {k.pad_h, k.pad_w, k.pad_h, k.pad_w}, strides = {k.stride_h, k.stride_w},
                             dil = {k.dil_h, k.dil_w}, ks = {k.r, k.s};
  std::vector<Tensor> ins = {xc, w};
  if (k.bias) ins.push_back(b);
  Tensor conv = ref_op("Conv", ins, {{"pads", pads}, {"strides", strides}, {"dilations", dil}, {"kernel_shape", ks}})[0];
  if (k.clamp)
    conv = std::isinf(k.hi) ? ref_op("Relu", {conv}, {})[0]
                            : ref_op("Clip", {conv, Tensor::from_f32({k.lo}, {}).cast(dt), Tensor::from_f32({k.hi}, {}).cast(dt)}, {})[0];
  const Tensor want = to_nhwc(conv);
  Tensor packed(dt, {k.k, cols});
  for (int64_t i = 0; i < packed.numel(); ++i) packed.set_f64(i, 0);
  for (int64_t o = 0; o < k.k; ++o)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t r = 0; r < k.r; ++r)
        for (int64_t q = 0; q < k.s; ++q)
          packed.set_f64(o * cols + native::stem_conv_column(C, k.s, r, q, c), w.get_f64(((o * C + c) * k.r + r) * k.s + q));
  Dev dx(x), dw(packed), db(b), dy(want.nbytes());
  native::StemConvArgs a;
  a.x_dtype = xt, a.dtype = dt, a.x = dx.p, a.w = dw.p, a.bias = k.bias ? db.p : nullptr, a.y = dy.p;
  a.n = N, a.c = C, a.h = H, a.w_ = W, a.k = k.k, a.r = k.r, a.s = k.s, a.p = want.dims()[1], a.q = want.dims()[2];
  a.cols = cols, a.pad_h = k.pad_h, a.pad_w = k.pad_w, a.stride_h = k.stride_h, a.stride_w = k.stride_w;
  a.dil_h = k.dil_h, a.dil_w = k.dil_w, a.clamp = k.clamp, a.clamp_min = k.lo, a.clamp_max = k.hi;
  CK(native::stem_conv(a, nullptr));
  check(name, dy.get(dt, want.dims()), want);
}

void stem_conv_tests() {
  // ResNet's stem (7x7/2 pad 3, 64 channels, 147 -> 160 columns) at toy size: every x/y dtype pair.
  for (auto [xt, dt] : std::vector<std::pair<DType, DType>>{
           {DType::f32, DType::f16}, {DType::f16, DType::f16}, {DType::f32, DType::bf16}, {DType::bf16, DType::bf16}})
    stem_case(xt, dt, {{2, 3, 37, 41}, 64, 7, 7, 2, 2, 3, 3, 1, 1, 0, true, true});
  stem_case(DType::f32, DType::f16, {{2, 3, 224, 224}, 64, 7, 7, 2, 2, 3, 3, 1, 1, 0, true, true});  // ResNet-50's, batch 2
  // MobileNetV2's (3x3/2 pad 1, 32 channels: half a channel block, ReLU6 whose bound 0.5 engages).
  stem_case(DType::f32, DType::f16, {{2, 3, 67, 45}, 32, 3, 3, 2, 2, 1, 1, 1, 1, 0, true, true, 0.f, 0.5f});
  // A row longer than a tile (q = 300: three tiles, the last partial) and K = 200 (four channel
  // blocks, the last of 8 channels): the persistent loop reloads the filter.
  stem_case(DType::f16, DType::f16, {{1, 3, 5, 300}, 200, 3, 3, 1, 1, 1, 1});
  // More tiles than the persistent grid has blocks (64 images of 8 output rows; 40 x 5 rows x 3
  // tiles x 2 channel blocks): each block walks several, across rows, images and a filter reload.
  stem_case(DType::f32, DType::f16, {{64, 3, 16, 16}, 64, 7, 7, 2, 2, 3, 3, 1, 1, 0, true, true});
  stem_case(DType::f32, DType::bf16, {{40, 3, 5, 300}, 72, 3, 3, 1, 1, 1, 1});
  stem_case(DType::f32, DType::bf16, {{2, 4, 19, 23}, 16, 3, 3, 1, 1, 1, 1, 1, 1, 0, false});     // C = 4, no bias, linear
  stem_case(DType::f16, DType::f16, {{2, 3, 21, 17}, 24, 3, 3, 1, 1, 2, 2, 2, 2});                // dilation 2
  stem_case(DType::f32, DType::f16, {{3, 5, 13, 11}, 40, 5, 3, 2, 1, 2, 1, 1, 2});                // R != S, stride 2x1, dilation 1x2
  stem_case(DType::f32, DType::f16, {{1, 3, 9, 9}, 64, 7, 7, 2, 2, 3, 3, 1, 1, 224, true, true}); // extra zero columns
  stem_case(DType::f32, DType::f16, {{1, 1, 1, 1}, 8, 1, 1, 1, 1, 0, 0});                         // one pixel, 1 -> 16 columns
  stem_case(DType::f32, DType::f16, {{1, 7, 12, 12}, 8, 3, 3, 2, 2, 0, 0});                       // C = 7: 8 channels a tap
  stem_case(DType::f16, DType::f16, {{2, 5, 30, 31}, 16, 5, 5, 2, 2, 2, 2});                      // C = 5: 200 -> 208 columns

  // Refusals: C = 8 (the aligned kernels take it), K = 12, cols past 256 (9x9 taps of 4 channels),
  // input rows past the shared-memory limit (11 rows of 511 positions), and y off 16-byte alignment.
  int refused = 0;
  void* p16 = reinterpret_cast<void*>(256);
  native::StemConvArgs a;
  a.x = a.w = a.y = p16;
  a.n = 1, a.c = 3, a.h = a.w_ = 8, a.k = 64, a.r = a.s = 3, a.p = a.q = 8, a.cols = 48, a.pad_h = a.pad_w = 1;
  auto refuses = [&](native::StemConvArgs b, cudaError_t e, const char* what) {
    const bool ok = native::stem_conv(b, nullptr) == e && native::last_error_message().find(what) != std::string::npos;
    if (!ok) std::printf("     stem_conv did not refuse with '%s': %s\n", what, native::last_error_message().c_str());
    refused += ok;
  };
  native::StemConvArgs b = a;
  b.c = 8;
  refuses(b, cudaErrorNotSupported, "1..7 channels");
  b = a, b.k = 12;
  refuses(b, cudaErrorNotSupported, "multiples of 8");
  b = a, b.cols = 272, b.r = b.s = 9;
  refuses(b, cudaErrorNotSupported, "up to 256");
  b = a, b.r = 11, b.s = 3, b.cols = 144, b.stride_w = 4, b.dil_h = 2;
  refuses(b, cudaErrorNotSupported, "shared memory");
  b = a, b.y = static_cast<char*>(p16) + 2;
  refuses(b, cudaErrorInvalidValue, "16-byte aligned");
  if (selected("StemConv_refusals")) {
    std::printf("%s %-66s %d of 5 refused\n", refused == 5 ? "PASS" : "FAIL", "StemConv_refusals", refused);
    refused == 5 ? ++g_pass : ++g_fail;
  }
}

// ---- argument errors: clear messages, no launch --------------------------------------------
void error_tests() {
  if (!selected("Errors")) return;
  native::LayerNormArgs a;
  const cudaError_t e = native::layernorm(a, nullptr);
  const bool ok1 = e == cudaErrorInvalidValue && native::last_error_message().find("layernorm") != std::string::npos;
  native::SoftmaxArgs s;
  s.dtype = DType::f64;
  s.x = s.y = reinterpret_cast<void*>(16);
  s.cols = 4;
  const bool ok2 = native::softmax(s, nullptr) == cudaErrorNotSupported;
  const bool ok3 = native::permute(4, nullptr, {2, 3}, {0, 0}, nullptr, nullptr) == cudaErrorInvalidValue;
  // c_pad below c, and an integer dtype.
  void* p16 = reinterpret_cast<void*>(256);
  const bool ok4 = native::nchw_to_nhwc(DType::f32, DType::f16, p16, 1, 8, 2, 2, 3, p16, nullptr) == cudaErrorInvalidValue &&
                   native::last_error_message().find("c_pad") != std::string::npos;
  const bool ok5 = native::nchw_to_nhwc(DType::i64, DType::f16, p16, 1, 3, 2, 2, 8, p16, nullptr) == cudaErrorNotSupported;
  // im2col: fewer columns than r*s*c, and an integer x.
  native::Im2colArgs ia;
  ia.x = ia.a = p16;
  ia.n = 1, ia.c = 3, ia.h = ia.w = 8, ia.r = ia.s = 3, ia.p = ia.q = 6, ia.cols = 24;
  const bool ok6 = native::im2col(ia, nullptr) == cudaErrorInvalidValue &&
                   native::last_error_message().find("cols >= r*s*c") != std::string::npos;
  ia.cols = 32;
  ia.x_dtype = DType::i64;
  const bool ok7 = native::im2col(ia, nullptr) == cudaErrorNotSupported;
  const bool ok = ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7;
  std::printf("%s Errors_bad_arguments\n", ok ? "PASS" : "FAIL");
  (ok ? g_pass : g_fail)++;
}

}  // namespace

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("no CUDA device: skipping the native kernel tests\n");
    return 77;
  }
  if (argc > 1) g_filter = argv[1];
  cudaDeviceProp prop{};
  // make the runtime's primary context current for the driver API too (cudaFree(nullptr))
  if (cudaError_t e = cudaGetDeviceProperties(&prop, 0); e != cudaSuccess || (e = cudaFree(nullptr)) != cudaSuccess) {
    std::printf("FAIL setting up the device: %s\n", cudaGetErrorString(e));
    return 1;
  }
  g_cc = prop.major * 10 + prop.minor;
  std::printf("device: %s (sm_%d)\n", prop.name, g_cc);
  load_driver();
  if (const char* e = std::getenv("NVCC")) g_nvcc = e;
  else if (std::system("nvcc --version > /dev/null 2>&1") == 0) g_nvcc = "nvcc";
  else if (std::system("/usr/local/cuda/bin/nvcc --version > /dev/null 2>&1") == 0) g_nvcc = "/usr/local/cuda/bin/nvcc";
  const std::pair<const char*, void (*)()> groups[] = {
      {"errors", error_tests},     {"elementwise", elementwise_tests}, {"softmax", softmax_tests},
      {"layernorm", layernorm_tests}, {"embed_layernorm", embed_ln_tests}, {"reduce", reduce_tests},        {"movement", movement_tests},
      {"where_cast", where_cast_tests}, {"pool", pool_tests},  {"fill_iota", fill_iota_tests},
      {"attention", attention_tests},   {"depthwise", depthwise_tests}, {"grouped", grouped_tests}, {"im2col", im2col_tests},
      {"stem_conv", stem_conv_tests}, {"prefetch", prefetch_tests}, {"index_ops", index_ops_tests}};
  for (auto [name, fn] : groups) {
    try {
      fn();
    } catch (const std::exception& e) {
      std::printf("FAIL group %s aborted: %s\n", name, e.what());
      ++g_fail;
    }
  }
  std::printf("\n%d passed, %d failed\n", g_pass, g_fail);
  if (g_pass + g_fail == 0) {
    std::printf("FAIL: no case ran (the filter '%s' matches none)\n", g_filter.c_str());
    return 1;
  }
  return g_fail ? 1 : 0;
}
