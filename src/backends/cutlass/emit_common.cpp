#include "backends/cutlass/emit_common.h"

#include <charconv>
#include <stdexcept>

#include "backends/gelu_erf.inc"  // kGeluErfText: backends/gelu_erf.h, made by CMake
#include "backends/registry_text.h"

namespace sabre::cutlass_backend::detail {

std::string cutlass_elem(Elem e) {
  switch (e) {
    case Elem::f16: return "cutlass::half_t";
    case Elem::bf16: return "cutlass::bfloat16_t";
    case Elem::f32: return "float";
    case Elem::kCount: break;
  }
  throw std::logic_error("invariant: Elem is one of f16, bf16, f32");
}

std::string cutlass_act(Act a) {
  switch (a) {
    case Act::none: return "cutlass::epilogue::thread::Identity";
    case Act::relu: return "cutlass::epilogue::thread::ReLu";
    case Act::gelu_erf: return "SabreGeluErf";  // act_functor_definitions
    case Act::gelu_tanh: return "cutlass::epilogue::thread::GELU_taylor";
    case Act::silu: return "cutlass::epilogue::thread::SiLu";
    case Act::sigmoid: return "cutlass::epilogue::thread::Sigmoid";
    case Act::hardswish: return "cutlass::epilogue::thread::HardSwish";
    case Act::relu6: return "SabreReLu6";  // act_functor_definitions
    case Act::kCount: break;
  }
  throw std::logic_error("invariant: Act is a valid activation");
}

namespace {

// CUTLASS's GELU calls erff: about twice the instructions of gelu_erf.h's form, enough to make a
// bias+gelu epilogue ALU-bound where it is not hidden under the mainloop.
// Kernels whose results are f16 or bf16 call gelu_erf16, three FMAs fewer, accurate to their rounding.
std::string gelu_erf_functor(Elem out) {
  const std::string fn = out == Elem::f32 ? "gelu_erf" : "gelu_erf16";
  // nvcc's unused-declaration warning 177 is off over the pasted header (a kernel calls one of its
  // two gelu forms, and it sits in the source's anonymous namespace) and the functor.
  std::string o = "#pragma nv_diag_suppress 177\n";
  o += kGeluErfText;
  o += "// gelu(x) = x*Phi(x): ONNX Gelu(approximate=\"none\"), through sabre_gelu::" + fn + " above in f32 (the\n"
       "// epilogues' ElementCompute; half and bfloat16 convert)" +
       (out == Elem::f32 ? std::string(".") : std::string(", the form for results rounded to 16 bits.")) +
       " kIsHeavy as CUTLASS's GELU has it, though no\n"
       "// epilogue sabre emits reads it (sm80's LinearCombinationGeneric takes IsHeavy as a template argument,\n"
       "// the residual block is always heavy, sm90's fusion ops ignore it), so nvcc's unused-member warning\n"
       "// 177 is off around the two.\n";
  o += "template <typename T>\n"
       "struct SabreGeluErf {\n"
       "  static constexpr bool kIsHeavy = true;\n"
       "  CUTLASS_HOST_DEVICE T operator()(T const& x) const { return T(sabre_gelu::" + fn + "(float(x))); }\n"
       "};\n"
       "template <typename T, int N>\n"
       "struct SabreGeluErf<cutlass::Array<T, N>> {\n"
       "  static constexpr bool kIsHeavy = true;\n"
       "  CUTLASS_HOST_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& x) const {\n"
       "    cutlass::Array<T, N> y;\n"
       "    CUTLASS_PRAGMA_UNROLL\n"
       "    for (int i = 0; i < N; ++i) y[i] = T(sabre_gelu::" + fn + "(float(x[i])));\n"
       "    return y;\n"
       "  }\n"
       "};\n"
       "#pragma nv_diag_default 177\n\n";
  return o;
}

}  // namespace

std::string act_functor_definitions(Act a, Elem out) {
  if (a == Act::gelu_erf) return gelu_erf_functor(out);
  if (a != Act::relu6) return "";
  // CUTLASS's Clamp takes its bounds as run-time Arguments, which LinearCombinationGeneric and the
  // sm90 fusion ops pass but LinearCombinationResidualBlock does not (it would clamp to the type's
  // whole range: the identity). Bounds fixed at compile time work in every epilogue form, and the
  // kernel name carries them. NaN propagates, as in the CPU reference's Clip.
  std::string o;
  o += "// relu6(x) = min(max(x, 0), 6): ONNX Clip(x, 0, 6). The epilogues call the Array<> form and look in the\n"
       "// scalar one for run-time Arguments (it has none); without kIsHeavy CUTLASS takes it as light.\n";
  o += "template <typename T>\n"
       "struct SabreReLu6 {\n"
       "  CUTLASS_HOST_DEVICE T operator()(T const& x) const {\n"
       "    cutlass::maximum<T, /*PropagateNaN=*/true> mx;\n"
       "    cutlass::minimum<T, /*PropagateNaN=*/true> mn;\n"
       "    return mn(mx(x, T(0)), T(6));\n"
       "  }\n"
       "};\n"
       "template <typename T, int N>\n"
       "struct SabreReLu6<cutlass::Array<T, N>> {\n"
       "  CUTLASS_HOST_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& x) const {\n"
       "    cutlass::maximum<cutlass::Array<T, N>, /*PropagateNaN=*/true> mx;\n"
       "    cutlass::minimum<cutlass::Array<T, N>, /*PropagateNaN=*/true> mn;\n"
       "    return mn(mx(x, T(0)), T(6));\n"
       "  }\n"
       "};\n\n";
  return o;
}

std::string conv_algebra(const EpilogueSpec& e) {
  std::string inner = "alpha*conv(X,W)";
  if (e.bias) inner += " + bias[k]";
  if (e.residual == Residual::before_act) inner += " + beta*R";
  std::string out = e.act == Act::none ? inner : std::string(act_name(e.act)) + "(" + inner + ")";
  if (e.residual == Residual::after_act) out += " + beta*R";
  return "Y = " + out;
}

std::string conv_refuse_shape_checks(bool grouped) {
  std::string o;
  o += "  if (!p) return \"args is NULL\";\n";
  if (grouped)
    o += "  if (p->groups < 1 || p->c % p->groups || p->k % p->groups) return \"groups must divide c and k\";\n"
         "  if (p->groups == 1) return \"groups = 1: a dense conv runs on the plain conv kernels\";\n";
  else
    o += "  if (p->groups != 1) return \"groups != 1 (grouped or depthwise convolution) is not supported by this kernel\";\n";
  o += "  if (p->n < 0 || p->h < 1 || p->w < 1 || p->c < 1 || p->k < 1 || p->r < 1 || p->s < 1 || p->p < 1 || p->q < 1)\n"
       "    return \"need n >= 0 and h, w, c, k, r, s, p, q >= 1\";\n";
  o += "  if (p->pad_h < 0 || p->pad_w < 0 || p->stride_h < 1 || p->stride_w < 1 || p->dil_h < 1 || p->dil_w < 1)\n"
       "    return \"need pads >= 0, strides and dilations >= 1\";\n";
  o += "  if (!fits(p->n) || !fits(p->h) || !fits(p->w) || !fits(p->c) || !fits(p->k) || !fits(p->r) || !fits(p->s) ||\n"
       "      !fits(p->p) || !fits(p->q) || !fits(p->pad_h) || !fits(p->pad_w) || !fits(p->stride_h) ||\n"
       "      !fits(p->stride_w) || !fits(p->dil_h) || !fits(p->dil_w))\n"
       "    return \"a dimension exceeds int32\";\n";
  return o;
}

std::string conv_refuse_pointer_checks() {
  std::string o;
  o += "  if (!p->x || !p->filter || !p->y) return \"x, filter and y must be non-NULL\";\n";
  o += "  if (kHasBias && !p->bias) return \"this kernel adds a bias: bias must be non-NULL\";\n";
  o += "  if (kHasResidual && !p->residual) return \"this kernel adds a residual: residual must be non-NULL\";\n";
  return o;
}

std::string pdl_switch() {
  return "// Programmatic dependent launch: the kernel (built with CUTLASS_ENABLE_GDC_FOR_SM90) waits for the\n"
         "// previous kernel on the stream before its first global load, so it may launch while that one\n"
         "// drains. SABRE_PDL=0 turns it off.\n"
         "bool pdl_enabled() {\n"
         "  static const bool on = [] { const char* v = std::getenv(\"SABRE_PDL\"); return !(v && v[0] == '0'); }();\n"
         "  return on;\n}\n\n";
}

std::string sm90_fusion_op(const EpilogueSpec& e, const std::string& elem, const std::string& bias_note) {
  const std::string act = cutlass_act(e.act);
  std::string o;
  if (e.residual == Residual::before_act) {
    o += "// The residual before the activation is the fusion op's source term: C = R, scaled by beta.\n";
    if (e.bias)
      o += "using FusionOp = cutlass::epilogue::fusion::LinCombPerColBiasEltAct<\n    " + act + ", " + elem +
           ", ElementCompute, " + elem + ", " + elem + ", ElementCompute, kAlign, kRound>;\n\n";
    else
      o += "using FusionOp = cutlass::epilogue::fusion::LinCombEltAct<\n    " + act + ", " + elem + ", ElementCompute, " +
           elem + ", ElementCompute, kRound>;\n\n";
    return o;
  }
  // Without a source term, an EVT tree: LinComb*'s beta*C would cost an FMA a value (0*beta, kept
  // for IEEE's sake), which shows where the epilogue is not hidden (bench/results/gelu_epilogue_*).
  const bool top_linear = e.residual == Residual::none && e.act == Act::none;
  const std::string lin_out = top_linear ? elem : "ElementCompute";
  o += std::string(e.residual == Residual::after_act
                       ? "// The residual comes after the activation, which no predefined fusion op does: an EVT tree.\n"
                       : "// No source term: an EVT tree of just the linear part and the activation.\n");
  o += "using namespace cutlass::epilogue::fusion;\n";
  o += "using ScalarArg = Sm90ScalarBroadcast<ElementCompute, Stride<_0, _0, int64_t>>;\n";
  if (e.bias)
    o += "using Linear = Sm90EVT<Sm90Compute<cutlass::homogeneous_multiply_add, " + lin_out + ", ElementCompute, kRound>,\n"
         "                       ScalarArg, Sm90AccFetch,\n"
         "                       Sm90RowBroadcast<0, TileShape, " + elem + ", ElementCompute, Stride<_0, _1, int64_t>, kAlign>>;  // alpha*acc + " + bias_note + "\n";
  else
    o += "using Linear = Sm90EVT<Sm90Compute<cutlass::multiplies, " + lin_out + ", ElementCompute, kRound>,\n"
         "                       ScalarArg, Sm90AccFetch>;  // alpha*acc\n";
  if (e.residual == Residual::after_act) {
    o += "using Activated = Sm90EVT<Sm90Compute<" + act + ", ElementCompute, ElementCompute, kRound>, Linear>;\n";
    o += "using FusionOp = Sm90EVT<Sm90Compute<cutlass::homogeneous_multiply_add, " + elem + ", ElementCompute, kRound>,\n"
         "                         ScalarArg, Sm90SrcFetch<" + elem + ">, Activated>;  // beta*R + act(...)\n\n";
  } else if (top_linear) {
    o += "using FusionOp = Linear;\n\n";
  } else {
    o += "using FusionOp = Sm90EVT<Sm90Compute<" + act + ", " + elem + ", ElementCompute, kRound>, Linear>;\n\n";
  }
  return o;
}

std::string sm90_epilogue_arguments(const EpilogueSpec& e, const std::string& elem) {
  std::string o;
  if (e.residual == Residual::before_act) {
    o += "  args.epilogue.thread.alpha = p->alpha;\n";
    o += "  args.epilogue.thread.beta = p->beta;\n";
    if (e.bias) o += "  args.epilogue.thread.bias_ptr = static_cast<const " + elem + "*>(p->bias);\n";
    return o;
  }
  // The tree's arguments in its order: a node's children first, then the node's own op ({}).
  const std::string linear =
      e.bias ? "{{{p->alpha}, {nullptr}, {}}, {}, {static_cast<const " + elem + "*>(p->bias), " + elem + "(0), {}}, {}}"
             : "{{{p->alpha}, {nullptr}, {}}, {}, {}}";
  o += "  // Tree arguments in the tree's order: children first, then the node's op.\n";
  if (e.residual == Residual::after_act) {
    o += "  args.epilogue.thread = {\n";
    o += "      {{p->beta}, {nullptr}, {}},  // beta\n";
    o += "      {},                          // R\n";
    o += "      {" + linear + ", {}},  // act(alpha*acc ...)\n";
    o += "      {}};\n";
  } else if (e.act == Act::none) {
    o += "  args.epilogue.thread = " + linear + ";  // alpha*acc ...\n";
  } else {
    o += "  args.epilogue.thread = {" + linear + ", {}};  // act(alpha*acc ...)\n";
  }
  return o;
}

std::string host_error_plumbing() {
  std::string o;
  o += "thread_local std::string g_last_error;\n\n";
  o += "int fail(int status, std::string msg) {\n  g_last_error = std::move(msg);\n  return status;\n}\n\n";
  o += "#define SABRE_CHECK_CUTLASS(stmt)                                                             \\\n"
       "  do {                                                                                    \\\n"
       "    cutlass::Status st_ = (stmt);                                                         \\\n"
       "    if (st_ != cutlass::Status::kSuccess)                                                 \\\n"
       "      return fail(SABRE_CUTLASS_ERROR, std::string(#stmt \" failed: \") +                   \\\n"
       "                  cutlassGetStatusString(st_) + \" at \" __FILE__ \":\" + std::to_string(__LINE__)); \\\n"
       "  } while (0)\n"
       "#define SABRE_CHECK_CUDA(stmt)                                                                \\\n"
       "  do {                                                                                    \\\n"
       "    cudaError_t e_ = (stmt);                                                              \\\n"
       "    if (e_ != cudaSuccess)                                                                \\\n"
       "      return fail(SABRE_CUDA_ERROR, std::string(#stmt \" failed: \") + cudaGetErrorString(e_) + \\\n"
       "                  \" at \" __FILE__ \":\" + std::to_string(__LINE__));                       \\\n"
       "  } while (0)\n\n";
  return o;
}

std::string workspace_check() {
  return "  if (need > 0 && (!p->workspace || p->workspace_size < need))\n"
         "    return fail(SABRE_BAD_ARGS, \"workspace of \" + std::to_string(need) + \" bytes needed, \" +\n"
         "                                    std::to_string(p->workspace ? p->workspace_size : 0) + \" given\");\n";
}

std::string conv_registry(const std::string& n) {
  return backends::one_kernel_registry("sabre_conv_entry", "sabre_conv_registry", n, /*guarded=*/true);
}

std::optional<std::string_view> take_token(std::string_view& s) {
  size_t p = s.find('_');
  std::string_view t = s.substr(0, p);
  if (t.empty()) return std::nullopt;
  s = p == std::string_view::npos ? std::string_view() : s.substr(p + 1);
  return t;
}

std::optional<int> positive_int(std::string_view s) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size() || v <= 0) return std::nullopt;
  return v;
}

std::optional<Elem> take_operand_types(std::string_view& s) {
  auto x = take_token(s), y = take_token(s), acc = take_token(s);
  if (!x || !y || x != y || acc != "f32") return std::nullopt;
  return parse_elem(*x);
}

std::optional<std::array<int, 3>> positive_dims(std::string_view s, size_t parts) {
  std::array<int, 3> out{};
  for (size_t i = 0; i < parts; ++i) {
    const size_t x = s.find('x');
    if ((x == std::string_view::npos) != (i + 1 == parts)) return std::nullopt;  // exactly parts - 1 'x'
    auto v = positive_int(s.substr(0, x));
    if (!v) return std::nullopt;
    out[i] = *v;
    s = x == std::string_view::npos ? std::string_view() : s.substr(x + 1);
  }
  return out;
}

}  // namespace sabre::cutlass_backend::detail
