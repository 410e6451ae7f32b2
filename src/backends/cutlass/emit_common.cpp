#include "backends/cutlass/emit_common.h"

#include <charconv>
#include <stdexcept>

#include "backends/cutlass/kernel_template.h"
#include "backends/gelu_erf.inc"  // kGeluErfText: backends/gelu_erf.h, made by CMake
#include "backends/registry_text.h"

namespace sabre::cutlass_backend::detail {

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

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
  // nvcc's unused-declaration warning 177 is off over the pasted header (a kernel calls one of its
  // two gelu forms, and it sits in the source's anonymous namespace) and the functor.
  return fill_template("act_gelu_erf.cu.in",
                       {{"gelu_erf_header", kGeluErfText},
                        {"fn", out == Elem::f32 ? "gelu_erf" : "gelu_erf16"},
                        {"rounding_note", out == Elem::f32 ? "." : ", the form for results rounded to 16 bits."}});
}

}  // namespace

std::string act_functor_definitions(Act a, Elem out) {
  if (a == Act::gelu_erf) return gelu_erf_functor(out);
  if (a != Act::relu6) return "";
  // CUTLASS's Clamp takes its bounds as run-time Arguments, which LinearCombinationGeneric and the
  // sm90 fusion ops pass but LinearCombinationResidualBlock does not (it would clamp to the type's
  // whole range: the identity). Bounds fixed at compile time work in every epilogue form, and the
  // kernel name carries them. NaN propagates, as in the CPU reference's Clip.
  return fill_template("act_relu6.cu.in", {});
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
  return fill_template("conv_refuse_shape.cu.in",
                       {{"groups_check", kernel_template(grouped ? "conv_refuse_groups_grouped.cu.in"
                                                                 : "conv_refuse_groups_dense.cu.in")}});
}

std::string conv_refuse_pointer_checks() { return fill_template("conv_refuse_pointers.cu.in", {}); }

std::string pdl_switch() { return fill_template("pdl_switch.cu.in", {}); }

std::string sm90_fusion_op(const EpilogueSpec& e, const std::string& elem, const std::string& bias_note) {
  const std::string act = cutlass_act(e.act);
  if (e.residual == Residual::before_act)
    return fill_template(e.bias ? "sm90_fusion_lincomb_bias.cu.in" : "sm90_fusion_lincomb_nobias.cu.in",
                         {{"act", act}, {"elem", elem}});
  // Without a source term, an EVT tree: LinComb*'s beta*C would cost an FMA a value (0*beta, kept
  // for IEEE's sake), which shows where the epilogue is not hidden (bench/results/gelu_epilogue_*).
  const bool top_linear = e.residual == Residual::none && e.act == Act::none;
  const std::string lin_out = top_linear ? elem : "ElementCompute";
  const std::string linear =
      e.bias ? fill_template("sm90_evt_linear_bias.cu.in", {{"out", lin_out}, {"elem", elem}, {"bias_note", bias_note}})
             : fill_template("sm90_evt_linear_nobias.cu.in", {{"out", lin_out}});
  const std::string top = e.residual == Residual::after_act ? fill_template("sm90_evt_top_residual.cu.in", {{"act", act}, {"elem", elem}})
                          : top_linear ? fill_template("sm90_evt_top_linear.cu.in", {})
                                       : fill_template("sm90_evt_top_act.cu.in", {{"act", act}, {"elem", elem}});
  return fill_template(
      "sm90_fusion_evt.cu.in",
      {{"note", e.residual == Residual::after_act
                    ? "The residual comes after the activation, which no predefined fusion op does: an EVT tree."
                    : "No source term: an EVT tree of just the linear part and the activation."},
       {"linear", linear},
       {"top", top}});
}

std::string sm90_epilogue_arguments(const EpilogueSpec& e, const std::string& elem) {
  if (e.residual == Residual::before_act)
    return fill_template("sm90_args_lincomb.cu.in",
                         {{"bias", e.bias ? fill_template("sm90_args_lincomb_bias.cu.in", {{"elem", elem}}) : ""}});
  // The tree's arguments in its order: a node's children first, then the node's own op ({}).
  const std::string linear =
      e.bias ? "{{{p->alpha}, {nullptr}, {}}, {}, {static_cast<const " + elem + "*>(p->bias), " + elem + "(0), {}}, {}}"
             : "{{{p->alpha}, {nullptr}, {}}, {}, {}}";
  const char* tree = e.residual == Residual::after_act ? "sm90_args_evt_residual.cu.in"
                     : e.act == Act::none              ? "sm90_args_evt_linear.cu.in"
                                                       : "sm90_args_evt_act.cu.in";
  return fill_template("sm90_args_evt.cu.in", {{"tree", fill_template(tree, {{"linear", linear}})}});
}

std::string host_error_plumbing() { return fill_template("error_plumbing.cu.in", {}); }

std::string entry_points(const EntryPoints& e) {
  const bool status = e.make_args == MakeArgs::status;
  const std::string declare = "  typename " + e.op + "::Arguments args;\n";
  return fill_template(
      "shim.cu.in",
      {{"name", e.name},
       {"args_type", e.args_type},
       {"empty", e.empty},
       {"op", e.op},
       {"op_name", e.op_name},
       {"refusal_note", e.refusal_note},
       {"args", status ? "args" : "make_args(p)"},
       {"declare_args", status ? declare + "  if (int st = make_args(p, args)) return st;\n" : ""},
       {"declare_args_or_zero", status ? declare + "  if (make_args(p, args)) return 0;\n" : ""},
       {"run_args", status ? declare + "  if (int st = make_args(p, args)) return st;\n"
                           : "  typename " + e.op + "::Arguments args = make_args(p);\n"},
       {"launch", e.launch},
       {"signature", e.signature},
       {"registry", e.registry}});
}

std::string adapter_launch(const std::string& op, const std::string& var, bool pdl, const std::string& initialize_note) {
  return fill_template("adapter_launch.cu.in",
                       {{"op", op},
                        {"var", var},
                        {"initialize_note", initialize_note},
                        {"run_pdl", pdl ? ", /*cuda_adapter=*/nullptr, pdl_enabled()" : ""}});
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
