#include "runtime/resolve.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "backends/native/stem_conv.h"
#include "runtime/step_kind.h"

namespace sabre::runtime {

namespace {

std::string where(const Step& s) { return "step '" + s.name + "' (" + s.op + ")"; }

int64_t eval_dim_value(const Step& s, const char* key, const json::Value& v, const Dims& dims) {
  if (v.is_number()) return static_cast<int64_t>(v.num());
  if (v.is_string()) return DimExpr::parse(v.str()).eval(dims);
  throw PlanError("plan: " + where(s) + " param '" + key + "' is neither a dim string nor a number");
}

}  // namespace

int64_t param_dim(const Step& s, const char* key, const Dims& dims, std::optional<int64_t> def) {
  const json::Value* v = s.params.get(key);
  if (!v || v->is_null()) {
    if (def) return *def;
    throw PlanError("plan: " + where(s) + " has no param '" + key + "'");
  }
  return eval_dim_value(s, key, *v, dims);
}

std::vector<int64_t> param_dims(const Step& s, const char* key, const Dims& dims) {
  std::vector<int64_t> out;
  const json::Value* v = s.params.get(key);
  if (!v || v->is_null()) return out;
  if (!v->is_array()) throw PlanError("plan: " + where(s) + " param '" + key + "' must be a list");
  for (const auto& x : v->arr()) out.push_back(eval_dim_value(s, key, x, dims));
  return out;
}

double param_num(const Step& s, const char* key, double def) {
  const json::Value* v = s.params.get(key);
  if (!v || v->is_null()) return def;
  if (!v->is_number()) throw PlanError("plan: " + where(s) + " param '" + key + "' must be a number");
  return v->num();
}

bool param_bool(const Step& s, const char* key, bool def) {
  const json::Value* v = s.params.get(key);
  if (!v || v->is_null()) return def;
  if (v->is_number()) return v->num() != 0;
  return v->boolean();
}

std::string param_str(const Step& s, const char* key, const std::string& def) {
  const json::Value* v = s.params.get(key);
  if (!v || v->is_null()) return def;
  if (!v->is_string()) throw PlanError("plan: " + where(s) + " param '" + key + "' must be a string");
  return v->str();
}

namespace {
std::string pick_from(const Step& s, const json::Value* d, const char* key, int64_t m) {
  if (!d || !d->is_array() || d->arr().empty())
    throw PlanError("plan: " + where(s) + " has no '" + key + "' table of kernels");
  for (const auto& e : d->arr()) {
    const json::Value* mm = e.get("max_m");
    const json::Value* k = e.get("kernel");
    if (!mm || !k) throw PlanError("plan: " + where(s) + " has a " + key + " entry without max_m or kernel");
    int64_t max_m = static_cast<int64_t>(mm->num());
    if (max_m < 0 || m <= max_m) return k->str();
  }
  throw PlanError(where(s) + ": no kernel in its " + key + " table covers m=" + std::to_string(m) +
                  "; recompile with a --dynamic range that includes this shape");
}
}  // namespace

std::string select_gemm_kernel(const Step& s, int64_t m, int alignment) {
  // Extents the compiler could not prove aligned (symbolic N or K) get a second table of kernels
  // for when the run-time extents, strides and pointers are aligned after all.
  const json::Value* to = s.params.get("aligned_to");
  if (to && to->is_number() && alignment >= static_cast<int>(to->num()))
    return pick_from(s, s.params.get("dispatch_aligned"), "dispatch_aligned", m);
  return pick_from(s, s.params.get("dispatch"), "dispatch", m);
}

std::vector<std::string> gemm_step_kernels(const Step& s) {
  std::vector<std::string> out;
  for (const char* key : {"dispatch", "dispatch_aligned"}) {
    const json::Value* d = s.params.get(key);
    if (!d || !d->is_array()) continue;
    for (const auto& e : d->arr()) {
      const json::Value* k = e.get("kernel");
      out.push_back(k && k->is_string() ? k->str() : "?");
    }
  }
  return out;
}

namespace {
// ONNX's output size of a conv or pool along one dim; pads = begin + end.
int64_t out_extent(int64_t in, int64_t pads, int64_t stride, int64_t dil, int64_t f) {
  return stride > 0 ? (in + pads - dil * (f - 1) - 1) / stride + 1 : -1;
}
// A 2-D window's pads [4] (default zeros), strides [2] and dilations [2] (default ones), checked.
struct Window {
  std::vector<int64_t> pads, strides, dilations;
};
Window window_params(const Step& s, const Dims& dims) {
  Window w{param_dims(s, "pads", dims), param_dims(s, "strides", dims), param_dims(s, "dilations", dims)};
  if (w.pads.empty()) w.pads = {0, 0, 0, 0};
  if (w.strides.empty()) w.strides = {1, 1};
  if (w.dilations.empty()) w.dilations = {1, 1};
  if (w.pads.size() != 4 || w.strides.size() != 2 || w.dilations.size() != 2)
    throw PlanError("plan: " + where(s) + " needs pads [4], strides [2] and dilations [2]");
  return w;
}
}  // namespace

sabre_conv_args conv_args(const Step& s, const Dims& dims) {
  sabre_conv_args a{};
  a.n = param_dim(s, "n", dims);
  a.h = param_dim(s, "h", dims);
  a.w = param_dim(s, "w", dims);
  a.c = param_dim(s, "c", dims);
  a.k = param_dim(s, "k", dims);
  a.r = param_dim(s, "r", dims);
  a.s = param_dim(s, "s", dims);
  a.p = param_dim(s, "p", dims);
  a.q = param_dim(s, "q", dims);
  const auto [pads, st, dil] = window_params(s, dims);
  if (pads[0] != pads[2] || pads[1] != pads[3])
    throw PlanError("plan: " + where(s) + " has asymmetric pads; conv kernels pad both sides of a dim alike");
  a.pad_h = pads[0];
  a.pad_w = pads[1];
  a.stride_h = st[0];
  a.stride_w = st[1];
  a.dil_h = dil[0];
  a.dil_w = dil[1];
  a.groups = param_dim(s, "groups", dims, 1);
  a.alpha = static_cast<float>(param_num(s, "alpha", 1.0));
  a.beta = static_cast<float>(param_num(s, "beta", 0.0));
  if (a.groups < 1 || a.c % a.groups || a.k % a.groups || a.p != out_extent(a.h, 2 * a.pad_h, a.stride_h, a.dil_h, a.r) ||
      a.q != out_extent(a.w, 2 * a.pad_w, a.stride_w, a.dil_w, a.s))
    throw PlanError("plan: " + where(s) + ": dims disagree (n,h,w,c=" + std::to_string(a.n) + "," + std::to_string(a.h) +
                    "," + std::to_string(a.w) + "," + std::to_string(a.c) + " k,r,s=" + std::to_string(a.k) + "," +
                    std::to_string(a.r) + "," + std::to_string(a.s) + " p,q=" + std::to_string(a.p) + "," +
                    std::to_string(a.q) + " groups=" + std::to_string(a.groups) + ")");
  return a;
}

namespace {
// "n,c,h,w=3,3,224,224 r,s=7,7 p,q=112,112", for messages.
std::string geometry_text(const Im2colGeometry& g) {
  return "n,c,h,w=" + std::to_string(g.n) + "," + std::to_string(g.c) + "," + std::to_string(g.h) + "," +
         std::to_string(g.w) + " r,s=" + std::to_string(g.r) + "," + std::to_string(g.s) + " p,q=" + std::to_string(g.p) +
         "," + std::to_string(g.q);
}

// The params of a step that slides a conv window over an NCHW x (im2col, stem_conv): n, c, h, w,
// r, s, p, q, pads, strides and dilations, p and q checked against the output size the others
// give; `symmetric`: pads must be alike on both sides of a dim. `tensors` ends the messages.
Im2colGeometry nchw_window(const Step& s, const Dims& dims, bool symmetric, const std::string& tensors) {
  Im2colGeometry g;
  g.n = param_dim(s, "n", dims);
  g.c = param_dim(s, "c", dims);
  g.h = param_dim(s, "h", dims);
  g.w = param_dim(s, "w", dims);
  g.r = param_dim(s, "r", dims);
  g.s = param_dim(s, "s", dims);
  g.p = param_dim(s, "p", dims);
  g.q = param_dim(s, "q", dims);
  const auto [pads, st, dil] = window_params(s, dims);
  g.pad_h = pads[0], g.pad_w = pads[1], g.stride_h = st[0], g.stride_w = st[1], g.dil_h = dil[0], g.dil_w = dil[1];
  if (symmetric && (pads[0] != pads[2] || pads[1] != pads[3]))
    throw PlanError("plan: " + where(s) + " has asymmetric pads " + shape_str(pads) +
                    "; the kernel pads both sides of a dim alike");
  if (g.c < 1 || g.r < 1 || g.s < 1 || g.p != out_extent(g.h, pads[0] + pads[2], g.stride_h, g.dil_h, g.r) ||
      g.q != out_extent(g.w, pads[1] + pads[3], g.stride_w, g.dil_w, g.s))
    throw PlanError("plan: " + where(s) + ": dims disagree (" + geometry_text(g) + ", " + tensors + ")");
  return g;
}
}  // namespace

Im2colGeometry im2col_geometry(const Step& s, const Dims& dims, const std::vector<int64_t>& a_shape) {
  Im2colGeometry g = nchw_window(s, dims, false, "a " + shape_str(a_shape));
  g.cols = a_shape.size() == 2 ? a_shape[1] : -1;
  if (a_shape.size() != 2 || a_shape[0] != g.n * g.p * g.q || g.cols < g.r * g.s * g.c)
    throw PlanError("plan: " + where(s) + ": a must be [n*p*q, cols] with cols >= r*s*c (" + geometry_text(g) + ", a " +
                    shape_str(a_shape) + ")");
  return g;
}

Clamp clamp_param(const Step& s) {
  Clamp c;
  const json::Value* v = s.params.get("clamp");
  if (!v) return c;
  if (!v->is_array() || v->arr().size() != 2)
    throw PlanError("plan: " + where(s) + ": param 'clamp' must be [min, max] (a number or null each)");
  auto bound = [&](const json::Value& b, float unbounded) {
    if (b.is_null()) return unbounded;
    if (!b.is_number()) throw PlanError("plan: " + where(s) + ": param 'clamp' must hold numbers or null");
    return static_cast<float>(b.num());
  };
  c.on = true;
  c.lo = bound(v->arr()[0], -INFINITY);
  c.hi = bound(v->arr()[1], INFINITY);
  if (!(c.lo <= c.hi))
    throw PlanError("plan: " + where(s) + ": param 'clamp' [" + std::to_string(c.lo) + ", " + std::to_string(c.hi) +
                    "] has its min above its max");
  return c;
}

ConvActivation activation_param(const Step& s) {
  ConvActivation a;
  const json::Value* v = s.params.get("activation");
  if (!v) return a;
  const std::string form = ": param 'activation' must be {\"op\": silu|sigmoid|hard_swish|hard_sigmoid, \"alpha\": number, "
                           "\"beta\": number}";
  if (!v->is_object()) throw PlanError("plan: " + where(s) + form);
  const json::Value* op = v->get("op");
  const std::optional<native::ConvAct> act = op && op->is_string() ? native::parse_conv_act(op->str()) : std::nullopt;
  if (!act) throw PlanError("plan: " + where(s) + form);
  a.act = *act;
  for (auto [key, out] : {std::pair<const char*, float*>{"alpha", &a.alpha}, {"beta", &a.beta}})
    if (const json::Value* x = v->get(key)) {
      if (!x->is_number()) throw PlanError("plan: " + where(s) + form);
      *out = static_cast<float>(x->num());
    }
  return a;
}

StemConvGeometry stem_conv_geometry(const Step& s, const Dims& dims, const std::vector<int64_t>& x_shape,
                                    const std::vector<int64_t>& w_shape, const std::vector<int64_t>& y_shape) {
  const std::string tensors = "x " + shape_str(x_shape) + ", w " + shape_str(w_shape) + ", y " + shape_str(y_shape);
  StemConvGeometry g;
  static_cast<Im2colGeometry&>(g) = nchw_window(s, dims, true, tensors);
  g.k = param_dim(s, "k", dims);
  g.cols = w_shape.size() == 2 ? w_shape[1] : -1;
  const std::string text = geometry_text(g) + " k=" + std::to_string(g.k) + ", " + tensors;
  if (x_shape != std::vector<int64_t>{g.n, g.c, g.h, g.w})
    throw PlanError("plan: " + where(s) + ": x must be [n,c,h,w] (" + text + ")");
  // Each tap's channels padded to stem_conv_channel_pitch(c) (stem_conv.h).
  if (w_shape.size() != 2 || w_shape[0] != g.k || g.cols < g.r * g.s * native::stem_conv_channel_pitch(g.c))
    throw PlanError("plan: " + where(s) + ": w must be [k, cols] with cols >= r*s*" +
                    std::to_string(native::stem_conv_channel_pitch(g.c)) + " (" + text + ")");
  if (y_shape != std::vector<int64_t>{g.n, g.p, g.q, g.k})
    throw PlanError("plan: " + where(s) + ": y must be [n,p,q,k] (" + text + ")");
  g.clamp = clamp_param(s);
  return g;
}

int gemm_alignment(const sabre_gemm_args& a, size_t elem_bytes) {
  for (int al : {8, 4, 2}) {
    const int64_t al64 = al;
    bool ok = a.n % al64 == 0 && a.k % al64 == 0 && a.lda % al64 == 0 && a.ldb % al64 == 0 && a.ldd % al64 == 0 &&
              a.stride_a % al64 == 0 && a.stride_b % al64 == 0 && a.stride_d % al64 == 0;
    if (a.residual) ok = ok && a.ldr % al64 == 0 && a.stride_r % al64 == 0;
    const uintptr_t bytes = static_cast<uintptr_t>(al) * elem_bytes;
    for (const void* p : {a.a, a.b, static_cast<const void*>(a.d), a.residual})
      if (p && reinterpret_cast<uintptr_t>(p) % bytes) ok = false;
    if (ok) return al;
  }
  return 1;
}

native::ElementwiseChain parse_chain(const Step& s) {
  const json::Value* c = s.params.get("chain");
  if (!c) throw PlanError("plan: " + where(s) + " has no 'chain'");
  native::ElementwiseChain ch;
  try {
    for (const auto& d : c->get("inputs")->arr()) {
      auto dt = ir::parse_dtype(d.str());
      if (!dt) throw PlanError("unknown dtype '" + d.str() + "'");
      ch.inputs.push_back(*dt);
    }
    for (const auto& n : c->get("nodes")->arr()) {
      native::EwNode node;
      const std::string& op = n.get("op")->str();
      size_t i = 0;
      while (i < native::kEwOpCount && native::kEwOpInfo[i].name != op) ++i;
      if (i == native::kEwOpCount) throw PlanError("unknown elementwise op '" + op + "'");
      node.op = static_cast<native::EwOp>(i);
      auto dt = ir::parse_dtype(n.get("dtype")->str());
      if (!dt) throw PlanError("unknown dtype '" + n.get("dtype")->str() + "'");
      node.dtype = *dt;
      auto geti = [&](const char* k) { const json::Value* v = n.get(k); return v ? static_cast<int>(v->num()) : -1; };
      auto getf = [&](const char* k) { const json::Value* v = n.get(k); return v ? static_cast<float>(v->num()) : 0.f; };
      node.a = geti("a");
      node.b = geti("b");
      node.c = geti("c");
      node.alpha = getf("alpha");
      node.beta = getf("beta");
      ch.nodes.push_back(node);
    }
    for (const auto& o : c->get("outputs")->arr()) ch.outputs.push_back(static_cast<int>(o.num()));
    native::validate(ch);
  } catch (const PlanError& e) {
    throw PlanError("plan: " + where(s) + " chain: " + e.what());
  } catch (const std::exception& e) {
    throw PlanError("plan: " + where(s) + " has a malformed chain: " + e.what());
  }
  return ch;
}

json::Value chain_to_json(const native::ElementwiseChain& c) {
  json::Array ins, nodes, outs;
  for (DType d : c.inputs) ins.push_back(json::Value(std::string(ir::name(d))));
  for (const auto& n : c.nodes)
    nodes.push_back(json::Value(json::Object{{"op", json::Value(std::string(native::info(n.op).name))},
                                             {"dtype", json::Value(std::string(ir::name(n.dtype)))},
                                             {"a", json::Value(static_cast<double>(n.a))},
                                             {"b", json::Value(static_cast<double>(n.b))},
                                             {"c", json::Value(static_cast<double>(n.c))},
                                             {"alpha", json::Value(static_cast<double>(n.alpha))},
                                             {"beta", json::Value(static_cast<double>(n.beta))}}));
  for (int o : c.outputs) outs.push_back(json::Value(static_cast<double>(o)));
  return json::Value(json::Object{{"inputs", json::Value(std::move(ins))},
                                  {"nodes", json::Value(std::move(nodes))},
                                  {"outputs", json::Value(std::move(outs))}});
}

sabre_dtype to_dlpack(DType t) {
  switch (t) {
    case DType::f32: return {SABRE_DTYPE_FLOAT, 32, 1};
    case DType::f16: return {SABRE_DTYPE_FLOAT, 16, 1};
    case DType::bf16: return {SABRE_DTYPE_BFLOAT, 16, 1};
    case DType::f64: return {SABRE_DTYPE_FLOAT, 64, 1};
    case DType::i64: return {SABRE_DTYPE_INT, 64, 1};
    case DType::i32: return {SABRE_DTYPE_INT, 32, 1};
    case DType::i8: return {SABRE_DTYPE_INT, 8, 1};
    case DType::u8: return {SABRE_DTYPE_UINT, 8, 1};
    case DType::boolean: return {SABRE_DTYPE_BOOL, 8, 1};
    case DType::str:  // CPU reference only: no DLPack spelling, never in a plan
    case DType::kCount: break;
  }
  return {255, 0, 0};
}

std::optional<DType> from_dlpack(sabre_dtype d) {
  for (size_t i = 0; i < ir::kDTypeCount; ++i) {
    sabre_dtype x = to_dlpack(static_cast<DType>(i));
    if (x.code == d.code && x.bits == d.bits && d.lanes == 1) return static_cast<DType>(i);
  }
  return std::nullopt;
}

std::string dlpack_name(sabre_dtype d) {
  std::string base;
  switch (d.code) {
    case SABRE_DTYPE_INT: base = "int"; break;
    case SABRE_DTYPE_UINT: base = "uint"; break;
    case SABRE_DTYPE_FLOAT: base = "float"; break;
    case SABRE_DTYPE_BFLOAT: base = "bfloat"; break;
    case SABRE_DTYPE_BOOL: return "bool";
    default: base = "code" + std::to_string(d.code) + "_"; break;
  }
  std::string out = base + std::to_string(d.bits);
  if (d.lanes != 1) out += "x" + std::to_string(d.lanes);
  return out;
}

const std::vector<std::string>& known_ops() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> v;
    for (size_t k = 0; k < kStepKindCount; ++k) v.emplace_back(to_string(static_cast<StepKind>(k)));
    return v;
  }();
  return ops;
}

bool is_known_op(const std::string& op) { return step_kind(op).has_value(); }

std::string shape_str(const std::vector<int64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? "," : "") + std::to_string(s[i]);
  return o + "]";
}

}  // namespace sabre::runtime
