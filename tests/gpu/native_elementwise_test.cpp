// Native kernel GPU test (native_kernels_test.cpp runs it): elementwise chains through the interpreter
// kernel and the generated one (nvcc at test time, loaded with the driver API), Where and Cast.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <type_traits>
#include <unistd.h>

#include "native_kernels_test.h"

namespace sabre::native_test {

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

}  // namespace sabre::native_test
