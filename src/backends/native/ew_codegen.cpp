// CUDA C++ for one fused elementwise-chain kernel. Tests: tests/unit/native_codegen_test.cpp
#include <cstdio>
#include <cstring>
#include <sstream>

#include "backends/native/elementwise.h"
#include "backends/native/ew_internal.h"
#include "backends/native/ew_prelude.inc"  // kEwPrelude: ew_abi.h + gelu_erf.h + ew_device.cuh, made by CMake

namespace sabre::native {
namespace {

using detail::Kind;
using detail::kind_of;

const char* storage_type(DType d) {
  switch (d) {
    case DType::f32: return "float";
    case DType::f16: return "__half";
    case DType::bf16: return "__nv_bfloat16";
    case DType::i64: return "long long";
    case DType::i32: return "int";
    case DType::i8: return "signed char";
    case DType::u8: return "unsigned char";
    case DType::boolean: return "bool";
    default: throw std::invalid_argument("elementwise codegen: no storage type for " + std::string(ir::name(d)));
  }
}

const char* compute_type(DType d) {
  switch (kind_of(d)) {
    case Kind::f: return "float";
    case Kind::i: return "long long";
    case Kind::b: return "bool";
  }
  return "float";
}

// A float literal that round-trips exactly.
std::string flit(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  char buf[48];
  std::snprintf(buf, sizeof buf, "__int_as_float(0x%08x)", bits);
  return buf;
}

// Storage value `x` of dtype `d` widened to its compute type.
std::string widen(const std::string& x, DType d) {
  switch (kind_of(d)) {
    case Kind::f: return "sabre_ew::to_f(" + x + ")";
    case Kind::i: return "sabre_ew::to_i(" + x + ")";
    case Kind::b: return x;
  }
  return x;
}

// Compute-type value `v` of dtype `d` narrowed to storage.
std::string narrow(const std::string& v, DType d) {
  const std::string t = storage_type(d);
  switch (kind_of(d)) {
    case Kind::f: return "sabre_ew::from_f<" + t + ">(" + v + ")";
    case Kind::i: return "sabre_ew::from_i<" + t + ">(" + v + ")";
    case Kind::b: return v;
  }
  return v;
}

std::string expr(const ElementwiseChain& ch, size_t i) {
  const EwNode& n = ch.nodes[i];
  auto v = [](int k) { return "v" + std::to_string(k); };
  const std::string a = n.a >= 0 ? v(n.a) : "", b = n.b >= 0 ? v(n.b) : "", c = n.c >= 0 ? v(n.c) : "";
  const bool fl = kind_of(n.dtype) == Kind::f;
  const Kind ak = n.a >= 0 && n.op != EwOp::input ? kind_of(ch.nodes[n.a].dtype) : Kind::f;
  switch (n.op) {
    case EwOp::input: return "x" + std::to_string(n.a);
    case EwOp::constant:
      return kind_of(n.dtype) == Kind::f   ? flit(n.alpha)
             : kind_of(n.dtype) == Kind::i ? "(long long)" + std::to_string(static_cast<long long>(n.alpha))
                                           : (n.alpha != 0.f ? "true" : "false");
    case EwOp::neg: return "-" + a;
    case EwOp::abs: return fl ? "fabsf(" + a + ")" : "sabre_ew::i_abs(" + a + ")";
    case EwOp::exp: return "expf(" + a + ")";
    case EwOp::log: return "logf(" + a + ")";
    case EwOp::sqrt: return "sqrtf(" + a + ")";
    case EwOp::reciprocal: return "1.f / " + a;
    case EwOp::erf: return "erff(" + a + ")";
    case EwOp::tanh: return "tanhf(" + a + ")";
    case EwOp::relu: return "sabre_ew::f_relu(" + a + ")";
    case EwOp::sigmoid: return "sabre_ew::f_sigmoid(" + a + ")";
    case EwOp::gelu_erf: return "sabre_ew::f_gelu_erf(" + a + ")";
    case EwOp::gelu_tanh: return "sabre_ew::f_gelu_tanh(" + a + ")";
    case EwOp::silu: return "sabre_ew::f_silu(" + a + ")";
    case EwOp::leaky_relu: return "sabre_ew::f_leaky_relu(" + a + ", " + flit(n.alpha) + ")";
    case EwOp::hard_sigmoid: return "sabre_ew::f_hard_sigmoid(" + a + ", " + flit(n.alpha) + ", " + flit(n.beta) + ")";
    case EwOp::hardswish: return "sabre_ew::f_hardswish(" + a + ")";
    case EwOp::clip: return "sabre_ew::f_clip(" + a + ", " + flit(n.alpha) + ", " + flit(n.beta) + ")";
    case EwOp::logical_not: return "!" + a;
    case EwOp::cast: {
      switch (kind_of(n.dtype)) {
        case Kind::f: {
          const std::string x = ak == Kind::f ? a : ak == Kind::i ? "(float)" + a : "(" + a + " ? 1.f : 0.f)";
          return "sabre_ew::round_to(" + x + ", " + std::to_string(static_cast<int>(n.dtype)) + ")";
        }
        case Kind::i: {
          const std::string x = ak == Kind::f ? "(long long)" + a : "(long long)" + a;
          // Narrow integer dtypes wrap like a store would.
          return "(long long)(" + std::string(storage_type(n.dtype)) + ")" + x;
        }
        case Kind::b: return ak == Kind::f ? "(" + a + " != 0.f)" : ak == Kind::i ? "(" + a + " != 0)" : a;
      }
      return a;
    }
    case EwOp::add: return a + " + " + b;
    case EwOp::sub: return a + " - " + b;
    case EwOp::mul: return a + " * " + b;
    case EwOp::div: return fl ? a + " / " + b : "sabre_ew::i_div(" + a + ", " + b + ")";
    case EwOp::pow: return "powf(" + a + ", " + b + ")";
    case EwOp::min: return fl ? "sabre_ew::f_min(" + a + ", " + b + ")" : "sabre_ew::i_min(" + a + ", " + b + ")";
    case EwOp::max: return fl ? "sabre_ew::f_max(" + a + ", " + b + ")" : "sabre_ew::i_max(" + a + ", " + b + ")";
    case EwOp::equal: return a + " == " + b;
    case EwOp::less: return a + " < " + b;
    case EwOp::greater: return a + " > " + b;
    case EwOp::less_equal: return a + " <= " + b;
    case EwOp::greater_equal: return a + " >= " + b;
    case EwOp::logical_and: return a + " && " + b;
    case EwOp::logical_or: return a + " || " + b;
    case EwOp::where: return a + " ? " + b + " : " + c;
    case EwOp::sin: return "sinf(" + a + ")";
    case EwOp::cos: return "cosf(" + a + ")";
    case EwOp::tan: return "tanf(" + a + ")";
    case EwOp::asin: return "asinf(" + a + ")";
    case EwOp::acos: return "acosf(" + a + ")";
    case EwOp::atan: return "atanf(" + a + ")";
    case EwOp::sinh: return "sinhf(" + a + ")";
    case EwOp::cosh: return "coshf(" + a + ")";
    case EwOp::asinh: return "asinhf(" + a + ")";
    case EwOp::acosh: return "acoshf(" + a + ")";
    case EwOp::atanh: return "atanhf(" + a + ")";
    case EwOp::ceil: return "ceilf(" + a + ")";
    case EwOp::floor: return "floorf(" + a + ")";
    case EwOp::round: return "rintf(" + a + ")";
    case EwOp::softplus: return "sabre_ew::f_softplus(" + a + ")";
    case EwOp::softsign: return "sabre_ew::f_softsign(" + a + ")";
    case EwOp::mish: return "sabre_ew::f_mish(" + a + ")";
    case EwOp::elu: return "sabre_ew::f_elu(" + a + ", " + flit(n.alpha) + ")";
    case EwOp::selu: return "sabre_ew::f_selu(" + a + ", " + flit(n.alpha) + ", " + flit(n.beta) + ")";
    case EwOp::celu: return "sabre_ew::f_celu(" + a + ", " + flit(n.alpha) + ")";
    case EwOp::thresholded_relu: return "sabre_ew::f_thresholded_relu(" + a + ", " + flit(n.alpha) + ")";
    case EwOp::shrink: return "sabre_ew::f_shrink(" + a + ", " + flit(n.alpha) + ", " + flit(n.beta) + ")";
    case EwOp::sign: return fl ? "sabre_ew::f_sign(" + a + ")" : "sabre_ew::i_sign(" + a + ")";
    case EwOp::isnan: return "(" + a + " != " + a + ")";
    case EwOp::isinf: return "sabre_ew::f_isinf(" + a + ", " + flit(n.alpha) + ", " + flit(n.beta) + ")";
    case EwOp::mod: return fl ? "sabre_ew::f_mod(" + a + ", " + b + ")" : "sabre_ew::i_mod(" + a + ", " + b + ")";
    case EwOp::fmod: return fl ? "fmodf(" + a + ", " + b + ")" : "sabre_ew::i_fmod(" + a + ", " + b + ")";
    // A left shift wraps to its dtype at once, as the reference's does (a later shr must see the wrap).
    case EwOp::shl: return "(long long)(" + std::string(storage_type(n.dtype)) + ")sabre_ew::i_shl(" + a + ", " + b + ")";
    case EwOp::shr: return "sabre_ew::i_shr(" + a + ", " + b + ")";
    case EwOp::prelu: return "sabre_ew::f_prelu(" + a + ", " + b + ")";
    case EwOp::kCount: break;
  }
  throw std::logic_error("elementwise codegen: op without an expression (invariant: every EwOp has one)");
}

}  // namespace

std::string generate_elementwise_kernel(const ElementwiseChain& ch) {
  validate(ch);
  const std::string name = kernel_name(ch);
  const size_t nin = ch.inputs.size(), nout = ch.outputs.size();
  std::ostringstream s;
  s << "// Generated by sabre (" << kEwTemplateVersion << "): one fused elementwise chain.\n";
  s << "// Nodes:";
  for (size_t i = 0; i < ch.nodes.size(); ++i) s << " " << i << "=" << info(ch.nodes[i].op).name;
  s << "\n" << kEwPrelude << "\n";

  // The body: chain inputs (compute types) -> outputs (compute types).
  s << "static __device__ __forceinline__ void " << name << "_body(";
  for (size_t k = 0; k < nin; ++k) s << (k ? ", " : "") << compute_type(ch.inputs[k]) << " x" << k;
  for (size_t k = 0; k < nout; ++k)
    s << (k || nin ? ", " : "") << compute_type(ch.nodes[ch.outputs[k]].dtype) << "& y" << k;
  s << ") {\n";
  for (size_t i = 0; i < ch.nodes.size(); ++i)
    s << "  const " << compute_type(ch.nodes[i].dtype) << " v" << i << " = " << expr(ch, i) << ";\n";
  for (size_t k = 0; k < nout; ++k) s << "  y" << k << " = v" << ch.outputs[k] << ";\n";
  s << "}\n\n";

  const size_t noff = nin ? nin : 1;
  auto call_body = [&](const std::string& xin) {
    std::string r = name + "_body(";
    for (size_t k = 0; k < nin; ++k) {
      std::string x = xin;
      for (size_t p; (p = x.find('#')) != std::string::npos;) x.replace(p, 1, std::to_string(k));
      r += (k ? ", " : "") + widen(x, ch.inputs[k]);
    }
    for (size_t k = 0; k < nout; ++k) r += std::string(k || nin ? ", " : "") + "y" + std::to_string(k);
    return r + ");";
  };
  s << "extern \"C\" __global__ void __launch_bounds__(256) " << name << "(const SabreEwParams p) {\n";
  // Launched with programmatic dependent launch (compile.cpp): wait for the previous kernel before
  // touching memory, then let the next one launch (backends/native/common.cuh, pdl_enter).
  s << "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900\n";
  s << "  asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n";
  s << "  asm volatile(\"griddepcontrol.launch_dependents;\" ::: \"memory\");\n";
  s << "#endif\n";
  s << "  const long long step = (long long)gridDim.x * blockDim.x;\n";
  s << "  long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n";
  s << "  long long off[" << noff << "];\n";
  s << "  if (p.vec == SABRE_EW_VEC) {\n";
  s << "    for (; t < p.n / SABRE_EW_VEC; t += step) {\n";
  s << "      const long long i = t * SABRE_EW_VEC;\n";
  s << "      sabre_ew::offsets(p, i, " << nin << ", off);\n";
  for (size_t k = 0; k < nin; ++k)
    s << "      const auto in" << k << " = sabre_ew::load_vec<" << storage_type(ch.inputs[k])
      << ", SABRE_EW_VEC>(p.in[" << k << "], off[" << k << "], p.in_strides[" << k << "][p.rank - 1] == 0);\n";
  for (size_t k = 0; k < nout; ++k)
    s << "      sabre_ew::Vec<" << storage_type(ch.nodes[ch.outputs[k]].dtype) << ", SABRE_EW_VEC> out" << k << ";\n";
  s << "#pragma unroll\n      for (int e = 0; e < SABRE_EW_VEC; ++e) {\n";
  for (size_t k = 0; k < nout; ++k) s << "        " << compute_type(ch.nodes[ch.outputs[k]].dtype) << " y" << k << ";\n";
  s << "        " << call_body("in#.v[e]") << "\n";
  for (size_t k = 0; k < nout; ++k)
    s << "        out" << k << ".v[e] = " << narrow("y" + std::to_string(k), ch.nodes[ch.outputs[k]].dtype) << ";\n";
  s << "      }\n";
  for (size_t k = 0; k < nout; ++k) {
    const std::string t = storage_type(ch.nodes[ch.outputs[k]].dtype);
    s << "      *reinterpret_cast<sabre_ew::Vec<" << t << ", SABRE_EW_VEC>*>(static_cast<" << t << "*>(p.out[" << k
      << "]) + i) = out" << k << ";\n";
  }
  s << "    }\n  } else {\n";
  s << "    for (long long i = t; i < p.n; i += step) {\n";
  s << "      sabre_ew::offsets(p, i, " << nin << ", off);\n";
  for (size_t k = 0; k < nout; ++k) s << "      " << compute_type(ch.nodes[ch.outputs[k]].dtype) << " y" << k << ";\n";
  {
    // Scalar loads: static_cast<const T*>(p.in[k])[off[k]].
    std::string r = name + "_body(";
    for (size_t k = 0; k < nin; ++k) {
      const std::string x = "static_cast<const " + std::string(storage_type(ch.inputs[k])) + "*>(p.in[" +
                            std::to_string(k) + "])[off[" + std::to_string(k) + "]]";
      r += (k ? ", " : "") + widen(x, ch.inputs[k]);
    }
    for (size_t k = 0; k < nout; ++k) r += std::string(k || nin ? ", " : "") + "y" + std::to_string(k);
    s << "      " << r << ");\n";
  }
  for (size_t k = 0; k < nout; ++k) {
    const DType d = ch.nodes[ch.outputs[k]].dtype;
    s << "      static_cast<" << storage_type(d) << "*>(p.out[" << k << "])[i] = " << narrow("y" + std::to_string(k), d)
      << ";\n";
  }
  s << "    }\n  }\n}\n";
  return s.str();
}

}  // namespace sabre::native
