#include "runtime/resolve.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "backends/native/stem_conv.h"
#include "runtime/step_kind.h"

namespace sabre::runtime {

namespace {

std::string where(const Step& s) { return "step '" + s.name + "' (" + s.op + ")"; }

}  // namespace

// The dispatch tables of a gemm or conv step (the two kinds that run a kernel library's kernels).
namespace {
struct Tables {
  const DispatchTable& dispatch;
  const std::optional<DispatchTable>& aligned;
  const std::optional<int64_t>& aligned_to;
};
Tables tables_of(const Step& s) {
  if (const auto* g = std::get_if<GemmParams>(&s.params)) return {g->dispatch, g->dispatch_aligned, g->aligned_to};
  if (const auto* c = std::get_if<ConvParams>(&s.params)) return {c->dispatch, c->dispatch_aligned, c->aligned_to};
  throw std::logic_error("plan: " + where(s) + " has no kernel table (invariant: only gemm and conv steps dispatch)");
}
}  // namespace

std::string select_gemm_kernel(const Step& s, int64_t m, int alignment) {
  // Extents the compiler could not prove aligned (symbolic N or K) get a second table of kernels
  // for when the run-time extents, strides and pointers are aligned after all.
  const Tables t = tables_of(s);
  if (t.aligned_to && alignment >= *t.aligned_to) {
    if (!t.aligned) throw PlanError("plan: " + where(s) + " has no 'dispatch_aligned' table of kernels");
    return pick_kernel(*t.aligned, m, where(s), "dispatch_aligned");
  }
  return pick_kernel(t.dispatch, m, where(s));
}

std::vector<std::string> gemm_step_kernels(const Step& s) {
  std::vector<std::string> out;
  const Tables t = tables_of(s);
  for (const auto& e : t.dispatch) out.push_back(e.kernel);
  if (t.aligned)
    for (const auto& e : *t.aligned) out.push_back(e.kernel);
  return out;
}

namespace {
// A step's 2-D window from its pads [4], strides [2] and dilations [2] lists (absent: the
// defaults), at these dims; PlanError where a list is not 2-D.
Window2d window_of(const Step& s, const std::optional<ParamDims>& pads, const std::optional<ParamDims>& strides,
                   const std::optional<ParamDims>& dilations, const Dims& dims) {
  auto w = Window2d::from_lists(eval_dims(pads, dims), eval_dims(strides, dims), eval_dims(dilations, dims));
  if (!w) throw PlanError("plan: " + where(s) + " needs pads [4], strides [2] and dilations [2]");
  return *w;
}
}  // namespace

sabre_conv_args conv_args(const Step& s, const Dims& dims) {
  const ConvParams& c = s.as<ConvParams>();
  sabre_conv_args a{};
  a.n = c.n.eval(dims);
  a.h = c.h.eval(dims);
  a.w = c.w.eval(dims);
  a.c = c.c.eval(dims);
  a.k = c.k.eval(dims);
  a.r = c.r.eval(dims);
  a.s = c.s.eval(dims);
  a.p = c.p.eval(dims);
  a.q = c.q.eval(dims);
  const Window2d win = window_of(s, c.pads, c.strides, c.dilations, dims);
  if (!win.symmetric())
    throw PlanError("plan: " + where(s) + " has asymmetric pads; conv kernels pad both sides of a dim alike");
  a.pad_h = win.pads[0];
  a.pad_w = win.pads[1];
  a.stride_h = win.strides[0];
  a.stride_w = win.strides[1];
  a.dil_h = win.dilations[0];
  a.dil_w = win.dilations[1];
  a.groups = c.groups ? c.groups->eval(dims) : 1;
  a.alpha = static_cast<float>(c.alpha.value_or(1.0));
  a.beta = static_cast<float>(c.beta.value_or(0.0));
  if (a.groups < 1 || a.c % a.groups || a.k % a.groups || a.p != win.out_extent(0, a.h, a.r) ||
      a.q != win.out_extent(1, a.w, a.s))
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
Im2colGeometry nchw_window(const Step& s, const Im2colParams& ip, const Dims& dims, bool symmetric,
                           const std::string& tensors) {
  Im2colGeometry g;
  g.n = ip.n.eval(dims);
  g.c = ip.c.eval(dims);
  g.h = ip.h.eval(dims);
  g.w = ip.w.eval(dims);
  g.r = ip.r.eval(dims);
  g.s = ip.s.eval(dims);
  g.p = ip.p.eval(dims);
  g.q = ip.q.eval(dims);
  const Window2d win = window_of(s, ip.pads, ip.strides, ip.dilations, dims);
  const auto& pads = win.pads;
  g.pad_h = pads[0], g.pad_w = pads[1], g.stride_h = win.strides[0], g.stride_w = win.strides[1];
  g.dil_h = win.dilations[0], g.dil_w = win.dilations[1];
  if (symmetric && !win.symmetric())
    throw PlanError("plan: " + where(s) + " has asymmetric pads " + shape_str({pads[0], pads[1], pads[2], pads[3]}) +
                    "; the kernel pads both sides of a dim alike");
  if (g.c < 1 || g.r < 1 || g.s < 1 || g.p != win.out_extent(0, g.h, g.r) || g.q != win.out_extent(1, g.w, g.s))
    throw PlanError("plan: " + where(s) + ": dims disagree (" + geometry_text(g) + ", " + tensors + ")");
  return g;
}
}  // namespace

Im2colGeometry im2col_geometry(const Step& s, const Dims& dims, const std::vector<int64_t>& a_shape) {
  Im2colGeometry g = nchw_window(s, s.as<Im2colParams>(), dims, false, "a " + shape_str(a_shape));
  g.cols = a_shape.size() == 2 ? a_shape[1] : -1;
  if (a_shape.size() != 2 || a_shape[0] != g.n * g.p * g.q || g.cols < g.r * g.s * g.c)
    throw PlanError("plan: " + where(s) + ": a must be [n*p*q, cols] with cols >= r*s*c (" + geometry_text(g) + ", a " +
                    shape_str(a_shape) + ")");
  return g;
}

Clamp clamp_of(const std::optional<ClampParam>& c) {
  if (!c) return {};
  return {true, static_cast<float>(c->lo), static_cast<float>(c->hi)};
}

StemConvGeometry stem_conv_geometry(const Step& s, const Dims& dims, const std::vector<int64_t>& x_shape,
                                    const std::vector<int64_t>& w_shape, const std::vector<int64_t>& y_shape) {
  const std::string tensors = "x " + shape_str(x_shape) + ", w " + shape_str(w_shape) + ", y " + shape_str(y_shape);
  StemConvGeometry g;
  const StemConvParams& sp = s.as<StemConvParams>();
  static_cast<Im2colGeometry&>(g) = nchw_window(s, sp, dims, true, tensors);
  g.k = sp.k.eval(dims);
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
  g.clamp = clamp_of(sp.clamp);
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
