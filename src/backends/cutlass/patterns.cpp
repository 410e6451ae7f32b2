#include "backends/cutlass/patterns.h"

#include <algorithm>
#include <sstream>

#include "ir/printer.h"

namespace sabre::cutlass_backend {

using namespace partition;
using ir::DType;
using ir::Dim;

int max_alignment(DType t) { return static_cast<int>(16 / ir::size_of(t)); }

int fallback_alignment(DType t, int64_t extent) {
  int a = max_alignment(t);
  while (a > 1 && extent % a != 0) a /= 2;
  return a;
}

bool im2col_shape(int64_t c, int64_t r, int64_t s) {
  return c >= 1 && c < 8 && r >= 1 && s >= 1 && r * s * c <= kIm2colMaxColumns;
}

int static_alignment(DType t, std::initializer_list<std::pair<const char*, Dim>> extents, std::string* note) {
  int align = max_alignment(t);
  for (const auto& [what, d] : extents) {
    if (!d.is_static()) continue;
    const int a = fallback_alignment(t, d.value());
    if (a < max_alignment(t) && note)
      *note += std::string(note->empty() ? "" : "; ") + what + "=" + std::to_string(d.value()) + " not a multiple of " +
               std::to_string(max_alignment(t)) + ": alignment-" + std::to_string(a) + " fallback kernels";
    align = std::min(align, a);
  }
  return align;
}

namespace {

// ---------------------------------------------------------------- checks (no structure here)

std::string shape_text(const ir::Value* v) { return ir::str(v->shape()); }

std::optional<std::string> dtype_problem(const ir::Value* a, const ir::Value* b) {
  DType t = a->dtype();
  if (t != DType::f16 && t != DType::bf16 && t != DType::f32)
    return "dtype " + std::string(ir::name(t)) + ": CUTLASS kernels here take f16, bf16 or f32";
  if (b->dtype() != t)
    return "operands differ in dtype (" + std::string(ir::name(t)) + " and " + std::string(ir::name(b->dtype())) +
           "): mixed-input kernels are not in the catalog";
  return std::nullopt;
}

// A contiguous extent must be static. One that is not a multiple of the 16-byte access (a 10-class
// head's N=10, K=3) takes the catalog's narrower-access fallback kernels, as convs do: the region
// records the alignment they allow and `alignment_note` says why it is below the widest.
std::optional<std::string> extent_problem(const char* what, const Dim& d) {
  if (!d.is_static()) return std::string("dynamic ") + what + " (" + what + "=" + d.str() + ")";
  return std::nullopt;
}


// A Clip fuses as relu6 only with bounds that are exactly 0 and 6 (the kernel's are compile-time
// constants); any other Clip stays a native elementwise step after the GEMM or conv.
std::optional<std::string> clip_problem(const Match& m) {
  if (!m.has("clip_min") && !m.has("clip_max")) return std::nullopt;
  bool relu6 = true;
  // A bound's value, or its type when it is not a float scalar.
  auto bound = [&relu6](const ir::Value* v, double want) {
    const ir::Tensor& t = v->constant();
    if (t.numel() != 1 || !ir::is_float(t.dtype())) {
      relu6 = false;
      return ir::print_type(v->type());
    }
    relu6 = relu6 && t.get_f64(0) == want;
    std::ostringstream s;
    s << t.get_f64(0);
    return s.str();
  };
  const std::string lo = bound(m.value("clip_min"), 0.0), hi = bound(m.value("clip_max"), 6.0);
  if (relu6) return std::nullopt;
  return "Clip bounds [" + lo + ", " + hi + "] are not relu6's [0, 6]: only relu6 is fused, the Clip runs natively";
}

// The epilogue's extra operands: bias a vector over N, residual exactly the output's type, Clip
// bounds those of relu6.
std::optional<std::string> epilogue_problem(const Match& m, const Dim& n_dim) {
  if (auto why = clip_problem(m)) return why;
  if (m.has("bias")) {
    const ir::Value* b = m.value("bias");
    const ir::Shape& s = b->shape();
    bool vector = !s.empty() && s.back() == n_dim;
    for (size_t i = 0; vector && i + 1 < s.size(); ++i) vector = s[i] == Dim(1);
    if (!vector) return "bias " + shape_text(b) + " is not a vector over N=" + n_dim.str();
    if (b->dtype() != m.root->output(0)->dtype()) return "bias dtype differs from the output's";
  }
  if (m.has("residual")) {
    const ir::Value* r = m.value("residual");
    const ir::Value* out = m.root->output(0);
    if (r->producer() && std::find(m.region.begin(), m.region.end(), r->producer()) != m.region.end())
      return "residual is computed inside the region";
    if (r->shape() != out->shape() || r->dtype() != out->dtype())
      return "residual " + ir::print_type(r->type()) + " is not the output's type " + ir::print_type(out->type()) +
             ": broadcast residuals are not fused";
  }
  return std::nullopt;
}

Dim product(const ir::Shape& s, size_t begin, size_t end) {
  Dim p(1);
  for (size_t i = begin; i < end; ++i) p = p * s[i];
  return p;
}

CheckResult check_gemm(const Match& m, const std::string& epilogue) {
  const ir::Value* a = m.value("A");
  const ir::Value* b = m.value("B");
  const ir::Node* g = m.nodes.at("gemm");
  if (auto why = dtype_problem(a, b)) return CheckResult::refuse(*why);
  const ir::Shape& as = a->shape();
  const ir::Shape& bs = b->shape();
  if (as.size() < 2) return CheckResult::refuse("A " + shape_text(a) + " has rank < 2");
  if (bs.size() != 2)
    return CheckResult::refuse("B " + shape_text(b) + " is not a 2-D weight: batched products go to batched_gemm");
  bool tn = false;
  if (g->op() == "MatMulTransB") {
    tn = true;
  } else if (g->op() == "Gemm") {
    if (g->attr_int("transA", 0)) return CheckResult::refuse("A transposed (transA=1): needs a column-major A kernel");
    if (as.size() != 2) return CheckResult::refuse("Gemm A " + shape_text(a) + " is not 2-D");
    tn = g->attr_int("transB", 0) != 0;
  }
  Dim k = as.back();
  Dim n = tn ? bs[0] : bs[1];
  DType t = a->dtype();
  if (auto why = extent_problem("K", k)) return CheckResult::refuse(*why);
  if (auto why = extent_problem("N", n)) return CheckResult::refuse(*why);
  if (auto why = epilogue_problem(m, n)) return CheckResult::refuse(*why);
  std::string note;
  const int align = static_alignment(t, {{"K", k}, {"N", n}}, &note);
  CheckResult r;
  r.attrs["kind"] = std::string("gemm");
  r.attrs["dtype"] = std::string(ir::name(t));
  r.attrs["layout"] = std::string(tn ? "tn" : "tt");
  r.attrs["alignment"] = int64_t{align};
  if (!note.empty()) r.attrs["alignment_note"] = note;
  r.attrs["epilogue"] = epilogue;
  r.attrs["m"] = product(as, 0, as.size() - 1).str();
  r.attrs["n"] = n.value();
  r.attrs["k"] = k.value();
  return r;
}

// Two activations: K or N may be symbolic (seq), and then the runtime dispatch picks an alignment
// that divides the actual extent (alignment-1 kernels are the fallback); unaligned static ones take
// the fallback kernels.
CheckResult check_batched(const Match& m, const std::string& epilogue) {
  const ir::Value* a = m.value("A");
  const ir::Value* b = m.value("B");
  if (auto why = dtype_problem(a, b)) return CheckResult::refuse(*why);
  const ir::Shape& as = a->shape();
  const ir::Shape& bs = b->shape();
  if (as.size() < 3 || as.size() > 4)
    return CheckResult::refuse("A " + shape_text(a) + ": batched gemm takes 3-D or 4-D operands");
  if (bs.size() != as.size())
    return CheckResult::refuse("A " + shape_text(a) + " and B " + shape_text(b) + " differ in rank");
  size_t r = as.size();
  for (size_t i = 0; i + 2 < r; ++i)
    if (as[i] != bs[i])
      return CheckResult::refuse("batch dims differ (" + shape_text(a) + " vs " + shape_text(b) +
                                 "): broadcast batches are not supported");
  bool tn = m.nodes.count("transB") != 0;  // B is read through a swap of its last two axes
  Dim k = as[r - 1];
  Dim n = tn ? bs[r - 2] : bs[r - 1];
  DType t = a->dtype();
  std::vector<std::string> runtime;
  for (auto [what, d] : {std::pair<const char*, Dim>{"K", k}, {"N", n}})
    if (!d.is_static()) runtime.push_back(std::string(what) + "=" + d.str());
  std::string note;
  const int align = static_alignment(t, {{"K", k}, {"N", n}}, &note);
  CheckResult res;
  res.attrs["kind"] = std::string("batched_gemm");
  res.attrs["dtype"] = std::string(ir::name(t));
  res.attrs["layout"] = std::string(tn ? "tn" : "tt");
  res.attrs["alignment"] = int64_t{align};
  if (!note.empty()) res.attrs["alignment_note"] = note;
  res.attrs["epilogue"] = epilogue;
  res.attrs["batch"] = product(as, 0, r - 2).str();
  res.attrs["m"] = as[r - 2].str();
  res.attrs["n"] = n.str();
  res.attrs["k"] = k.str();
  if (!runtime.empty()) res.attrs["runtime_alignment"] = runtime;
  return res;
}

CheckResult check_conv(const Match& m, const std::string& epilogue) {
  const ir::Value* x = m.value("X");
  const ir::Value* w = m.value("W");
  const ir::Node* c = m.nodes.at("conv");
  if (auto why = dtype_problem(x, w)) return CheckResult::refuse(*why);
  if (x->shape().size() != 4)
    return CheckResult::refuse("input " + shape_text(x) + ": only 2-D convolutions (NCHW) are offloaded");
  const int64_t groups = c->attr_int("group", 1);
  if (c->attr_string("auto_pad", "NOTSET") != "NOTSET")
    return CheckResult::refuse("auto_pad=" + c->attr_string("auto_pad") + ": needs explicit pads");
  if (!w->is_constant())
    return CheckResult::refuse("filter is not a constant: the KRSC filter layout is made at compile time");
  DType t = x->dtype();
  Dim ci = x->shape()[1];
  Dim k = w->shape()[0];
  // Channel counts that break the 16-byte access (the RGB stem's C=3) take the catalog's
  // narrower-access fallback kernels (conv_spec.h): the region records the alignment they allow.
  for (auto [what, d] : {std::pair<const char*, Dim>{"C", ci}, {"K", k}})
    if (!d.is_static()) return CheckResult::refuse(std::string("dynamic ") + what + " (" + what + "=" + d.str() + ")");
  if (auto why = epilogue_problem(m, k)) return CheckResult::refuse(*why);
  if (groups != 1) {
    if (auto why = grouped_conv_problem(t, groups, ci.value(), k.value(), epilogue)) return CheckResult::refuse(*why);
    std::string note;
    CheckResult r;
    r.attrs["kind"] = std::string("conv2d_fprop");
    r.attrs["dtype"] = std::string(ir::name(t));
    r.attrs["layout"] = std::string("nchw");
    r.attrs["alignment"] = int64_t{static_alignment(t, {{"C/group", Dim(ci.value() / groups)}, {"K/group", Dim(k.value() / groups)}}, &note)};
    r.attrs["epilogue"] = epilogue;
    r.attrs["groups"] = groups;
    return r;
  }
  std::string note;
  const int align = static_alignment(t, {{"C", ci}, {"K", k}}, &note);
  // The region cannot know where X comes from; the lowering lifts an unaligned C (K aligned) where
  // X enters NHWC from an NCHW value (codegen/lower.cpp, channel_padding), or runs a small conv
  // there as im2col + GEMM (no residual), so the report says so.
  if (fallback_alignment(t, ci.value()) < max_alignment(t) && fallback_alignment(t, k.value()) == max_alignment(t)) {
    const auto& ws = w->shape();
    const int64_t r = ws[2].is_static() ? ws[2].value() : 0, s = ws[3].is_static() ? ws[3].value() : 0;
    if (epilogue.find("res") == std::string::npos && im2col_shape(ci.value(), r, s))
      note += "; where X is an NCHW value (the model's images) sabre compile runs it as im2col (R*S*C = " +
              std::to_string(r * s * ci.value()) + " columns, rounded up to 8) + GEMM, or with --stem conv "
              "zero-pads C to the 16-byte access, which takes the aligned conv kernels (few_channels: K = R*S*C padded)";
    else
      note += "; sabre compile zero-pads C to the 16-byte access where X enters NHWC from an NCHW value (the model's "
              "images), which takes the aligned kernels";
  }
  CheckResult r;
  if (!note.empty()) r.attrs["alignment_note"] = note;
  r.attrs["kind"] = std::string("conv2d_fprop");
  r.attrs["dtype"] = std::string(ir::name(t));
  // The graph is NCHW; the kernel runs NHWC/KRSC: the emitter converts activations at the region's edge.
  r.attrs["layout"] = std::string("nchw");
  r.attrs["alignment"] = int64_t{align};
  r.attrs["epilogue"] = epilogue;
  return r;
}

// ---------------------------------------------------------------- structure (no checks here)

Pat A() { return wildcard("A"); }
Pat B() { return wildcard("B"); }

// A·Bᵀ in the forms canonicalization leaves: sabre.MatMulTransB with a constant [N,K] weight (tn),
// MatMul with B [K,N] (tt), Gemm without C (transB picks the layout).
Pat gemm_core(Pat a, Pat b) {
  return alt({op("MatMulTransB", {a, b}, {}, "sabre").as("gemm"), op("MatMul", {a, b}).as("gemm"),
              op("Gemm", {a, b}, {attr_near("alpha", 1.0, 1.0)}).as("gemm")});
}
// ... + bias, or Gemm's own C operand.
Pat gemm_bias(Pat a, Pat b) {
  return alt({gemm_core(a, b) + constant("bias"),
              op("Gemm", {a, b, constant("bias")}, {attr_near("alpha", 1.0, 1.0), attr_near("beta", 1.0, 1.0)})
                  .as("gemm")});
}
// The two-activation product, B optionally read through a Transpose that swaps its last two axes.
Pat batched_core() {
  auto swap_last_two = attr_test("perm swaps the last two axes", [](const ir::Node& n) {
    if (!n.has_attr("perm")) return false;
    const auto& p = n.attr_ints("perm");
    size_t r = p.size();
    if (r < 3) return false;
    for (size_t i = 0; i + 2 < r; ++i)
      if (p[i] != static_cast<int64_t>(i)) return false;
    return p[r - 2] == static_cast<int64_t>(r - 1) && p[r - 1] == static_cast<int64_t>(r - 2);
  });
  Pat b = B();
  return op("MatMul", {A(), alt({op("Transpose", {b}, {swap_last_two}).as("transB"), b})}).as("gemm");
}
Pat conv(bool bias) {
  if (bias) return op("Conv", {wildcard("X"), wildcard("W"), constant("bias")}).as("conv");
  return op("Conv", {wildcard("X"), wildcard("W")}).as("conv");
}

Pat relu(Pat x) { return op("Relu", {x}); }
Pat gelu(Pat x) { return op("Gelu", {x}, {attr_eq("approximate", std::string("none"), std::string("none"))}); }
Pat gelutanh(Pat x) { return op("Gelu", {x}, {attr_eq("approximate", std::string("tanh"), std::string("none"))}); }
Pat silu(Pat x) { return x * op("Sigmoid", {x}); }
Pat sigmoid(Pat x) { return op("Sigmoid", {x}); }
Pat hardswish(Pat x) {
  return alt({op("HardSwish", {x}),
              x * op("HardSigmoid", {x}, {attr_near("alpha", 1.0 / 6.0, 0.2), attr_near("beta", 0.5, 0.5)})});
}
// ReLU6 as torch exports it (opset 11+): Clip with constant min and max inputs. The structure takes
// any constant bounds; the check (clip_problem) accepts only 0 and 6, and says so when it refuses.
Pat relu6(Pat x) { return op("Clip", {x, constant("clip_min"), constant("clip_max")}); }
Pat res(Pat x) { return x + wildcard("residual"); }

using Check = CheckResult (*)(const Match&, const std::string&);

PatternEntry entry(const std::string& epi_name, const std::string& family, const char* algebra, Pat p,
                   Check check, const std::string& epilogue) {
  // clip_min and clip_max (relu6's bounds) are not kernel operands: named so the report says what they are.
  std::vector<std::string> roles = family == "conv2d_fprop"
                                       ? std::vector<std::string>{"X", "W", "bias", "residual", "clip_min", "clip_max"}
                                       : std::vector<std::string>{"A", "B", "bias", "residual", "clip_min", "clip_max"};
  std::string name = "cutlass." + family + (epi_name.empty() ? "" : "_" + epi_name);
  return {name, algebra, std::move(p),
          [check, epilogue](const Match& m) { return check(m, epilogue.empty() ? "linear" : epilogue); },
          std::move(roles)};
}

PatternTable build() {
  PatternTable t;
  t.backend = "cutlass";
  auto& e = t.entries;
  const std::string G = "gemm", C = "conv2d_fprop";
  // Longest epilogues first, so a node joins the most fused region that fits.
  e.push_back(entry("bias_res_relu", G, "D = relu(A·Bᵀ + bias + R)", relu(res(gemm_bias(A(), B()))), check_gemm, "bias_res_relu"));
  e.push_back(entry("bias_res", G, "D = A·Bᵀ + bias + R", res(gemm_bias(A(), B())), check_gemm, "bias_res"));
  e.push_back(entry("bias_relu", G, "D = relu(A·Bᵀ + bias)", relu(gemm_bias(A(), B())), check_gemm, "bias_relu"));
  e.push_back(entry("bias_gelu", G, "D = gelu_erf(A·Bᵀ + bias)", gelu(gemm_bias(A(), B())), check_gemm, "bias_gelu"));
  e.push_back(entry("bias_gelutanh", G, "D = gelu_tanh(A·Bᵀ + bias)", gelutanh(gemm_bias(A(), B())), check_gemm, "bias_gelutanh"));
  e.push_back(entry("bias_silu", G, "D = (A·Bᵀ + bias) · sigmoid(A·Bᵀ + bias)", silu(gemm_bias(A(), B())), check_gemm, "bias_silu"));
  e.push_back(entry("bias_sigmoid", G, "D = sigmoid(A·Bᵀ + bias)", sigmoid(gemm_bias(A(), B())), check_gemm, "bias_sigmoid"));
  e.push_back(entry("bias_hardswish", G, "D = hardswish(A·Bᵀ + bias)", hardswish(gemm_bias(A(), B())), check_gemm, "bias_hardswish"));
  e.push_back(entry("bias_relu6", G, "D = min(max(A·Bᵀ + bias, 0), 6)", relu6(gemm_bias(A(), B())), check_gemm, "bias_relu6"));
  e.push_back(entry("res_relu", G, "D = relu(A·Bᵀ + R)", relu(res(gemm_core(A(), B()))), check_gemm, "res_relu"));
  e.push_back(entry("relu", G, "D = relu(A·Bᵀ)", relu(gemm_core(A(), B())), check_gemm, "relu"));
  e.push_back(entry("gelu", G, "D = gelu_erf(A·Bᵀ)", gelu(gemm_core(A(), B())), check_gemm, "gelu"));
  e.push_back(entry("gelutanh", G, "D = gelu_tanh(A·Bᵀ)", gelutanh(gemm_core(A(), B())), check_gemm, "gelutanh"));
  e.push_back(entry("silu", G, "D = A·Bᵀ · sigmoid(A·Bᵀ)", silu(gemm_core(A(), B())), check_gemm, "silu"));
  e.push_back(entry("sigmoid", G, "D = sigmoid(A·Bᵀ)", sigmoid(gemm_core(A(), B())), check_gemm, "sigmoid"));
  e.push_back(entry("hardswish", G, "D = hardswish(A·Bᵀ)", hardswish(gemm_core(A(), B())), check_gemm, "hardswish"));
  e.push_back(entry("relu6", G, "D = min(max(A·Bᵀ, 0), 6)", relu6(gemm_core(A(), B())), check_gemm, "relu6"));
  e.push_back(entry("bias", G, "D = A·Bᵀ + bias", gemm_bias(A(), B()), check_gemm, "bias"));
  e.push_back(entry("res", G, "D = A·Bᵀ + R", res(gemm_core(A(), B())), check_gemm, "res"));
  e.push_back(entry("", G, "D = A·Bᵀ", gemm_core(A(), B()), check_gemm, ""));
  // D[b] = A[b]·B[b] (B as stored, or read through its last-two-axes Transpose: Q·Kᵀ, P·V)
  e.push_back(entry("", "batched_gemm", "D[b] = A[b]·B[b], B optionally Kᵀ as exported", batched_core(), check_batched, ""));
  e.push_back(entry("bias_res_relu", C, "Y = relu(conv(X, W) + bias + R)", relu(res(conv(true))), check_conv, "bias_res_relu"));
  e.push_back(entry("bias_res", C, "Y = conv(X, W) + bias + R", res(conv(true)), check_conv, "bias_res"));
  e.push_back(entry("bias_relu", C, "Y = relu(conv(X, W) + bias)", relu(conv(true)), check_conv, "bias_relu"));
  e.push_back(entry("bias_gelu", C, "Y = gelu_erf(conv(X, W) + bias)", gelu(conv(true)), check_conv, "bias_gelu"));
  e.push_back(entry("bias_gelutanh", C, "Y = gelu_tanh(conv(X, W) + bias)", gelutanh(conv(true)), check_conv, "bias_gelutanh"));
  e.push_back(entry("bias_silu", C, "Y = silu(conv(X, W) + bias)", silu(conv(true)), check_conv, "bias_silu"));
  e.push_back(entry("bias_sigmoid", C, "Y = sigmoid(conv(X, W) + bias)", sigmoid(conv(true)), check_conv, "bias_sigmoid"));
  e.push_back(entry("bias_hardswish", C, "Y = hardswish(conv(X, W) + bias)", hardswish(conv(true)), check_conv, "bias_hardswish"));
  e.push_back(entry("bias_relu6", C, "Y = min(max(conv(X, W) + bias, 0), 6)", relu6(conv(true)), check_conv, "bias_relu6"));
  e.push_back(entry("bias", C, "Y = conv(X, W) + bias", conv(true), check_conv, "bias"));
  e.push_back(entry("relu", C, "Y = relu(conv(X, W))", relu(conv(false)), check_conv, "relu"));
  e.push_back(entry("silu", C, "Y = silu(conv(X, W))", silu(conv(false)), check_conv, "silu"));
  e.push_back(entry("sigmoid", C, "Y = sigmoid(conv(X, W))", sigmoid(conv(false)), check_conv, "sigmoid"));
  e.push_back(entry("hardswish", C, "Y = hardswish(conv(X, W))", hardswish(conv(false)), check_conv, "hardswish"));
  e.push_back(entry("relu6", C, "Y = min(max(conv(X, W), 0), 6)", relu6(conv(false)), check_conv, "relu6"));
  e.push_back(entry("", C, "Y = conv(X, W)", conv(false), check_conv, ""));
  return t;
}

}  // namespace

std::optional<std::string> grouped_conv_problem(DType t, int64_t groups, int64_t c, int64_t k, const std::string& epilogue) {
  const std::string what = "group=" + std::to_string(groups);
  if (groups < 1 || c % groups || k % groups) return what + ": the groups do not divide the channels";
  const int64_t cg = c / groups, kg = k / groups;
  if (cg == 1) return what + ": depthwise (one input channel a group) runs on sabre's native depthwise kernel";
  (void)t;  // the kernels run in the 16-bit compute dtype whatever the model's
  if (cg % kGroupedConvInMultiple || kg % kGroupedConvOutMultiple)
    return what + " with " + std::to_string(cg) + " input and " + std::to_string(kg) +
           " output channels a group: the grouped kernels need multiples of " + std::to_string(kGroupedConvInMultiple) +
           " and " + std::to_string(kGroupedConvOutMultiple) + " (no divisor of the group count widens them so); "
           "runs on sabre's native grouped kernel";
  if (epilogue.find("res") != std::string::npos) return what + ": the grouped kernels have no residual epilogue";
  return std::nullopt;
}

const PatternTable& pattern_table() {
  static const PatternTable table = build();
  return table;
}

}  // namespace sabre::cutlass_backend
