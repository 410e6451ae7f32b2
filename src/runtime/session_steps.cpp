// Step launches: one function per step kind, each reading its step's parameters at a run's shapes
// and enqueuing its kernel (a native kernel, a kernel library's GEMM or conv, or a copy). The
// kind's function is chosen once at load (step_launch_fn); ExecutionContext::Impl::enqueue calls it.
// Parameters per kind: docs/RUNTIME.md section 3. Tests: tests/gpu/runtime_session_test.cpp,
// tests/gpu/e2e_models.py (every kind, GPU).
#if SABRE_RUNTIME_HAVE_CUDA

#include <algorithm>
#include <array>
#include <stdexcept>

#include "backends/native/index_ops.h"
#include "runtime/session_internal.h"

namespace sabre {

// A step of a context's run at one signature, with what its launch reads: the step's tensors'
// pointers, shapes and dtypes, its dims, and the context's stream and workspace.
struct StepLaunch {
  StepLaunch(ExecutionContext::Impl& ctx, size_t index, const ExecutionContext::Impl::Signature& signature,
             const std::vector<void*>& pointers)
      : c(ctx),
        s(ctx.s.get()),
        i(index),
        st(ctx.plan().steps[index]),
        sig(signature),
        ptr(pointers),
        step_kind(ctx.s->kinds[index]),
        d(signature.dims),
        stream(ctx.stream),
        workspace(ctx.workspace),
        workspace_size(ctx.workspace_size),
        where("step '" + st.name + "' (" + st.op + ")") {}

  ExecutionContext::Impl& c;
  const Session::Impl* s;
  size_t i;
  const Step& st;
  const ExecutionContext::Impl::Signature& sig;
  const std::vector<void*>& ptr;
  StepKind step_kind;
  const Dims& d;
  cudaStream_t stream;
  void* workspace;
  size_t workspace_size;
  std::string where;

  const Plan& plan() const { return c.plan(); }
  const void* in(size_t k) const {
    if (k >= st.inputs.size() || st.inputs[k] < 0) return nullptr;
    return ptr[static_cast<size_t>(st.inputs[k])];
  }
  void* out(size_t k) const {
    if (k >= st.outputs.size()) return nullptr;
    return ptr[static_cast<size_t>(st.outputs[k])];
  }
  const TensorInfo& tin(size_t k) const { return plan().tensors[static_cast<size_t>(st.inputs.at(k))]; }
  const std::vector<int64_t>& shin(size_t k) const { return sig.shapes[static_cast<size_t>(st.inputs.at(k))]; }
  const std::vector<int64_t>& shout(size_t k) const { return sig.shapes[static_cast<size_t>(st.outputs.at(k))]; }
  uint64_t bytes_out(size_t k) const { return sig.bytes[static_cast<size_t>(st.outputs.at(k))]; }
  void native_check(cudaError_t e) const {
    if (e == cudaSuccess) return;
    std::string msg = native::last_error_message();
    cudaGetLastError();
    throw Error(e == cudaErrorInvalidValue || e == cudaErrorNotSupported ? SABRE_ERR_INTERNAL : SABRE_ERR_CUDA,
                where + " failed: " + cudaGetErrorName(e) + (msg.empty() ? "" : ": " + msg));
  }
  static int64_t axis_of(int64_t axis, size_t rank) { return axis < 0 ? axis + static_cast<int64_t>(rank) : axis; }

  sabre_gemm_args gemm_args(const Step& step, const ExecutionContext::Impl::Signature& g, const std::vector<void*>& p) const {
    return c.gemm_args(step, g, p);
  }
  const sabre_kernel_entry& gemm_kernel(const Step& step, const sabre_gemm_args& a, std::string* name) const {
    return c.gemm_kernel(step, a, name);
  }
  sabre_conv_args conv_step_args(const Step& step, const ExecutionContext::Impl::Signature& g, const std::vector<void*>& p) const {
    return c.conv_step_args(step, g, p);
  }
  const sabre_conv_entry& conv_kernel(const Step& step, const sabre_conv_args& a, std::string* name) const {
    return c.conv_kernel(step, a, name);
  }

  // The launch functions; several kinds share one (pool2d and global_average_pool, copy and reshape,
  // depthwise_conv and grouped_conv), which reads step_kind where they differ.
  void run_gemm() const;
  void run_conv() const;
  void run_softmax() const;
  void run_layernorm() const;
  void run_embed_layernorm() const;
  void run_elementwise() const;
  void run_where() const;
  void run_cast() const;
  void run_reduce() const;
  void run_permute() const;
  void run_nchw_to_nhwc() const;
  void run_im2col() const;
  void run_stem_conv() const;
  void run_slice() const;
  void run_strided_copy() const;
  void run_concat() const;
  void run_split() const;
  void run_gather() const;
  void run_pool2d() const;
  void run_attention() const;
  void run_depthwise_conv() const;
  void run_fill() const;
  void run_iota() const;
  void run_copy() const;
  void run_gather_elements() const;
  void run_trilu() const;
  void run_cumsum() const;
};

namespace {

// StepKind -> launch function; every kind must have one (the static_assert below).
constexpr std::array<StepLaunchFn, kStepKindCount> kLaunch = [] {
  std::array<StepLaunchFn, kStepKindCount> t{};
  auto k = [](StepKind kind) { return static_cast<size_t>(kind); };
  t[k(StepKind::gemm)] = &StepLaunch::run_gemm;
  t[k(StepKind::conv)] = &StepLaunch::run_conv;
  t[k(StepKind::softmax)] = &StepLaunch::run_softmax;
  t[k(StepKind::layernorm)] = &StepLaunch::run_layernorm;
  t[k(StepKind::embed_layernorm)] = &StepLaunch::run_embed_layernorm;
  t[k(StepKind::elementwise)] = &StepLaunch::run_elementwise;
  t[k(StepKind::where)] = &StepLaunch::run_where;
  t[k(StepKind::cast)] = &StepLaunch::run_cast;
  t[k(StepKind::reduce)] = &StepLaunch::run_reduce;
  t[k(StepKind::permute)] = &StepLaunch::run_permute;
  t[k(StepKind::slice)] = &StepLaunch::run_slice;
  t[k(StepKind::strided_copy)] = &StepLaunch::run_strided_copy;
  t[k(StepKind::concat)] = &StepLaunch::run_concat;
  t[k(StepKind::split)] = &StepLaunch::run_split;
  t[k(StepKind::gather)] = &StepLaunch::run_gather;
  t[k(StepKind::pool2d)] = &StepLaunch::run_pool2d;
  t[k(StepKind::global_average_pool)] = &StepLaunch::run_pool2d;
  t[k(StepKind::copy)] = &StepLaunch::run_copy;
  t[k(StepKind::reshape)] = &StepLaunch::run_copy;
  t[k(StepKind::fill)] = &StepLaunch::run_fill;
  t[k(StepKind::iota)] = &StepLaunch::run_iota;
  t[k(StepKind::depthwise_conv)] = &StepLaunch::run_depthwise_conv;
  t[k(StepKind::attention)] = &StepLaunch::run_attention;
  t[k(StepKind::nchw_to_nhwc)] = &StepLaunch::run_nchw_to_nhwc;
  t[k(StepKind::im2col)] = &StepLaunch::run_im2col;
  t[k(StepKind::stem_conv)] = &StepLaunch::run_stem_conv;
  t[k(StepKind::grouped_conv)] = &StepLaunch::run_depthwise_conv;
  t[k(StepKind::gather_elements)] = &StepLaunch::run_gather_elements;
  t[k(StepKind::trilu)] = &StepLaunch::run_trilu;
  t[k(StepKind::cumsum)] = &StepLaunch::run_cumsum;
  return t;
}();
static_assert(std::ranges::none_of(kLaunch, [](StepLaunchFn f) { return f == nullptr; }),
              "a StepKind without a launch function in kLaunch");

}  // namespace

StepLaunchFn step_launch_fn(StepKind k) { return kLaunch.at(static_cast<size_t>(k)); }

void ExecutionContext::Impl::enqueue(size_t i, const Signature& sig, const std::vector<void*>& ptr) {
  const StepLaunch step(*this, i, sig, ptr);
  bool any = false;
  for (size_t k = 0; k < step.st.outputs.size(); ++k) any |= step.bytes_out(k) > 0;
  if (!any) return;  // nothing to compute at these shapes
  try {
    (step.*(s->launch[i]))();
  } catch (const PlanError& e) {
    throw Error(SABRE_ERR_INTERNAL, e.what());
  } catch (const std::invalid_argument& e) {
    throw Error(SABRE_ERR_INTERNAL, step.where + ": " + e.what());
  }
}

void StepLaunch::run_gemm() const {
  sabre_gemm_args a = gemm_args(st, sig, ptr);
  a.workspace = workspace;
  a.workspace_size = workspace_size;
  std::string kname;
  const sabre_kernel_entry& k = gemm_kernel(st, a, &kname);
  int rc = k.run(&a, reinterpret_cast<sabre_stream_t>(stream));
  if (rc != SABRE_OK)
    throw Error(rc == SABRE_CUDA_ERROR ? SABRE_ERR_CUDA : SABRE_ERR_INTERNAL,
                where + ": kernel " + kname + " failed (status " + std::to_string(rc) + ") at m=" + std::to_string(a.m) +
                    " n=" + std::to_string(a.n) + " k=" + std::to_string(a.k) + ": " + (k.last_error ? k.last_error() : ""));
}

void StepLaunch::run_conv() const {
  sabre_conv_args a = conv_step_args(st, sig, ptr);
  a.workspace = workspace;
  a.workspace_size = workspace_size;
  std::string kname;
  const sabre_conv_entry& k = conv_kernel(st, a, &kname);
  int rc = k.run(&a, reinterpret_cast<sabre_stream_t>(stream));
  if (rc != SABRE_OK)
    throw Error(rc == SABRE_CUDA_ERROR ? SABRE_ERR_CUDA : SABRE_ERR_INTERNAL,
                where + ": conv kernel " + kname + " failed (status " + std::to_string(rc) + ") at n,h,w,c=" +
                    std::to_string(a.n) + "," + std::to_string(a.h) + "," + std::to_string(a.w) + "," +
                    std::to_string(a.c) + " k,r,s=" + std::to_string(a.k) + "," + std::to_string(a.r) + "," +
                    std::to_string(a.s) + ": " + (k.last_error ? k.last_error() : ""));
}

void StepLaunch::run_softmax() const {
  native::SoftmaxArgs a;
  a.dtype = tin(0).dtype;
  a.x = in(0);
  a.y = out(0);
  const auto& xs = shin(0);
  int64_t cols_def = xs.empty() ? 1 : xs.back();
  a.cols = param_dim(st, "cols", d, cols_def);
  a.b = param_dim(st, "b", d, 1);
  a.h = param_dim(st, "h", d, 1);
  a.q = param_dim(st, "q", d, a.cols ? numel(xs) / a.cols / (a.b * a.h) : 0);
  a.scale = static_cast<float>(param_num(st, "scale", 1.0));
  a.causal = param_bool(st, "causal", false);
  a.log = param_bool(st, "log", false);
  a.mask = in(1);
  if (a.mask) {
    a.mask_dtype = tin(1).dtype;
    auto ms = param_dims(st, "mask_stride", d);
    if (ms.size() != 3) throw PlanError("plan: " + where + " has a mask but no 3-element mask_stride");
    std::copy(ms.begin(), ms.end(), a.mask_stride);
  }
  native_check(native::softmax(a, stream));
}

void StepLaunch::run_layernorm() const {
  native::LayerNormArgs a;
  a.dtype = tin(0).dtype;
  const auto& xs = shin(0);
  a.cols = param_dim(st, "cols", d, xs.empty() ? 1 : xs.back());
  a.rows = param_dim(st, "rows", d, a.cols ? numel(xs) / a.cols : 0);
  a.eps = static_cast<float>(param_num(st, "eps", 1e-5));
  a.x = in(0);
  a.gamma = in(1);
  a.beta = in(2);
  a.residual = in(3);
  a.y = out(0);
  if (param_bool(st, "f32_copy", false)) {
    if (st.outputs.size() != 2 || plan().tensors[static_cast<size_t>(st.outputs[1])].dtype != DType::f32)
      throw PlanError("plan: " + where + " has f32_copy but no f32 second output");
    a.y_f32 = static_cast<float*>(out(1));
  } else {
    a.sum_out = out(1);
  }
  native_check(native::layernorm(a, stream));
}

void StepLaunch::run_embed_layernorm() const {
  // inputs: gamma, beta (-1: none), then (table, ids) per term; docs/RUNTIME.md.
  native::EmbedLayerNormArgs a;
  a.dtype = plan().tensors[static_cast<size_t>(st.outputs.at(0))].dtype;
  const auto rows = param_dims(st, "row_dims", d), offsets = param_dims(st, "offsets", d),
             strides = param_dims(st, "strides", d);
  const size_t terms = st.inputs.size() >= 2 ? (st.inputs.size() - 2) / 2 : 0;
  if (rows.empty() || rows.size() > static_cast<size_t>(native::kMaxEmbedRank) || terms < 1 ||
      terms > static_cast<size_t>(native::kMaxEmbedTerms) || st.inputs.size() != 2 + 2 * terms ||
      offsets.size() != terms || strides.size() != terms * rows.size())
    throw PlanError("plan: " + where + " needs 1-" + std::to_string(native::kMaxEmbedRank) + " row_dims, 1-" +
                    std::to_string(native::kMaxEmbedTerms) + " (table, ids) input pairs after gamma and beta, " +
                    "an offset per term and a stride per term and row dim");
  a.rank = static_cast<int>(rows.size());
  std::copy(rows.begin(), rows.end(), a.row_dims);
  a.num_terms = static_cast<int>(terms);
  for (size_t t = 0; t < terms; ++t) {
    native::EmbedTerm& m = a.terms[t];
    if (shin(2 + 2 * t).size() != 2) throw PlanError("plan: " + where + ": embedding tables must be [vocab, cols]");
    m.table = in(2 + 2 * t);
    m.vocab = shin(2 + 2 * t)[0];
    m.ids = in(3 + 2 * t);
    m.ids_dtype = tin(3 + 2 * t).dtype;
    m.offset = offsets[t];
    std::copy(strides.begin() + static_cast<std::ptrdiff_t>(t * rows.size()),
              strides.begin() + static_cast<std::ptrdiff_t>((t + 1) * rows.size()), m.strides);
  }
  a.cols = param_dim(st, "cols", d);
  a.eps = static_cast<float>(param_num(st, "eps", 1e-5));
  a.gamma = in(0);
  a.beta = in(1);
  a.y = out(0);
  native_check(native::embed_layernorm(a, stream));
}

void StepLaunch::run_elementwise() const {
  std::vector<std::vector<int64_t>> in_dims;
  std::vector<const void*> ins;
  std::vector<void*> outs;
  for (size_t k = 0; k < st.inputs.size(); ++k) {
    in_dims.push_back(shin(k));
    ins.push_back(in(k));
  }
  for (size_t k = 0; k < st.outputs.size(); ++k) outs.push_back(out(k));
  const auto& chain = s->chains.at(i);
  SabreEwParams prm = native::prepare_params(chain, shout(0), in_dims, ins, outs);
  auto l = s->launchers.find(i);
  if (l != s->launchers.end()) {
    int rc = l->second(&prm, native::ew_grid_size(prm), stream);
    native_check(static_cast<cudaError_t>(rc));
  } else {
    native_check(native::elementwise_run(s->programs.at(i), prm, stream));
  }
}

void StepLaunch::run_where() const {
  native_check(native::where(tin(1).dtype, in(0), shin(0), in(1), shin(1), in(2), shin(2), out(0), shout(0), stream));
}

void StepLaunch::run_cast() const {
  native_check(native::cast(tin(0).dtype, plan().tensors[static_cast<size_t>(st.outputs[0])].dtype, in(0), out(0),
                            numel(shin(0)), stream));
}

void StepLaunch::run_reduce() const {
  static const std::map<std::string, native::ReduceOp> kinds = {
      {"sum", native::ReduceOp::sum}, {"mean", native::ReduceOp::mean}, {"max", native::ReduceOp::max},
      {"min", native::ReduceOp::min}, {"prod", native::ReduceOp::prod}, {"sum_square", native::ReduceOp::sum_square},
      {"l1", native::ReduceOp::l1}, {"l2", native::ReduceOp::l2}, {"log_sum", native::ReduceOp::log_sum},
      {"log_sum_exp", native::ReduceOp::log_sum_exp}, {"argmax", native::ReduceOp::argmax},
      {"argmin", native::ReduceOp::argmin}, {"argmax_last", native::ReduceOp::argmax_last},
      {"argmin_last", native::ReduceOp::argmin_last}};
  auto kind = kinds.find(param_str(st, "kind", "sum"));
  if (kind == kinds.end()) throw PlanError("plan: " + where + " has unknown reduce kind");
  native_check(native::reduce(kind->second, tin(0).dtype, in(0), shin(0), param_dims(st, "axes", d), out(0), stream));
}

void StepLaunch::run_permute() const {
  native_check(native::permute(ir::size_of(tin(0).dtype), in(0), shin(0), param_dims(st, "perm", d), out(0), stream));
}

void StepLaunch::run_nchw_to_nhwc() const {
  // Dims from the tensors: x [n,c,h,w], y [n,h,w,c_pad]; the dtypes may differ (a fused input cast).
  const auto& xs = shin(0);
  const auto& ys = shout(0);
  if (xs.size() != 4 || ys.size() != 4 || ys[0] != xs[0] || ys[1] != xs[2] || ys[2] != xs[3] || ys[3] < xs[1])
    throw PlanError("plan: " + where + " needs x [n,c,h,w] and y [n,h,w,c_pad] with c_pad >= c");
  native_check(native::nchw_to_nhwc(tin(0).dtype, plan().tensors[static_cast<size_t>(st.outputs[0])].dtype, in(0),
                                    xs[0], xs[1], xs[2], xs[3], ys[3], out(0), stream));
}

void StepLaunch::run_im2col() const {
  // x [n,c,h,w] as the plan gives it (a model input read in place, its dtype cast on the way).
  const Im2colGeometry g = im2col_geometry(st, d, shout(0));
  if (shin(0) != std::vector<int64_t>{g.n, g.c, g.h, g.w})
    throw PlanError("plan: " + where + " reads x " + shape_str(shin(0)) + " but its params say [n,c,h,w] = " +
                    shape_str({g.n, g.c, g.h, g.w}));
  native::Im2colArgs a;
  a.x_dtype = tin(0).dtype;
  a.a_dtype = plan().tensors[static_cast<size_t>(st.outputs[0])].dtype;
  a.x = in(0);
  a.a = out(0);
  a.n = g.n, a.c = g.c, a.h = g.h, a.w = g.w, a.r = g.r, a.s = g.s, a.p = g.p, a.q = g.q, a.cols = g.cols;
  a.pad_h = g.pad_h, a.pad_w = g.pad_w, a.stride_h = g.stride_h, a.stride_w = g.stride_w;
  a.dil_h = g.dil_h, a.dil_w = g.dil_w;
  native_check(native::im2col(a, stream));
}

void StepLaunch::run_stem_conv() const {
  // x [n,c,h,w] as the plan gives it (a model input read in place, its dtype cast on the way).
  const StemConvGeometry g = stem_conv_geometry(st, d, shin(0), shin(1), shout(0));
  native::StemConvArgs a;
  a.x_dtype = tin(0).dtype;
  a.dtype = plan().tensors[static_cast<size_t>(st.outputs[0])].dtype;
  a.x = in(0);
  a.w = in(1);
  a.bias = in(2);
  a.y = out(0);
  a.n = g.n, a.c = g.c, a.h = g.h, a.w_ = g.w, a.k = g.k, a.r = g.r, a.s = g.s, a.p = g.p, a.q = g.q, a.cols = g.cols;
  a.pad_h = g.pad_h, a.pad_w = g.pad_w, a.stride_h = g.stride_h, a.stride_w = g.stride_w;
  a.dil_h = g.dil_h, a.dil_w = g.dil_w;
  a.clamp = g.clamp.on, a.clamp_min = g.clamp.lo, a.clamp_max = g.clamp.hi;
  native_check(native::stem_conv(a, stream));
}

void StepLaunch::run_slice() const {
  auto starts = param_dims(st, "starts", d), ends = param_dims(st, "ends", d), axes = param_dims(st, "axes", d),
       steps = param_dims(st, "steps", d);
  native_check(native::slice(ir::size_of(tin(0).dtype), in(0), shin(0), starts, ends, axes, steps, out(0), stream));
}

void StepLaunch::run_strided_copy() const {
  native_check(native::strided_copy(ir::size_of(tin(0).dtype), in(0), param_dim(st, "offset", d, 0), shout(0),
                                    param_dims(st, "strides", d), out(0), stream));
}

void StepLaunch::run_concat() const {
  std::vector<const void*> xs;
  std::vector<std::vector<int64_t>> dims;
  for (size_t k = 0; k < st.inputs.size(); ++k) {
    xs.push_back(in(k));
    dims.push_back(shin(k));
  }
  native_check(native::concat(ir::size_of(tin(0).dtype), xs, dims, axis_of(param_dim(st, "axis", d), shout(0).size()),
                              out(0), stream));
}

void StepLaunch::run_split() const {
  int64_t axis = axis_of(param_dim(st, "axis", d), shin(0).size());
  std::vector<int64_t> sizes;
  std::vector<void*> ys;
  for (size_t k = 0; k < st.outputs.size(); ++k) {
    sizes.push_back(shout(k).at(static_cast<size_t>(axis)));
    ys.push_back(out(k));
  }
  native_check(native::split(ir::size_of(tin(0).dtype), in(0), shin(0), axis, sizes, ys, stream));
}

void StepLaunch::run_gather() const {
  native_check(native::gather(ir::size_of(tin(0).dtype), in(0), shin(0), axis_of(param_dim(st, "axis", d, 0), shin(0).size()),
                              in(1), tin(1).dtype, numel(shin(1)), out(0), stream));
}

void StepLaunch::run_gather_elements() const {
  native_check(native::gather_elements(ir::size_of(tin(0).dtype), in(0), shin(0),
                                       axis_of(param_dim(st, "axis", d, 0), shin(0).size()), in(1), tin(1).dtype,
                                       shin(1), out(0), stream));
}

void StepLaunch::run_trilu() const {
  native_check(native::trilu(ir::size_of(tin(0).dtype), in(0), shin(0), param_dim(st, "k", d, 0),
                             param_bool(st, "upper", true), out(0), stream));
}

void StepLaunch::run_cumsum() const {
  native_check(native::cumsum(tin(0).dtype, in(0), shin(0), axis_of(param_dim(st, "axis", d, 0), shin(0).size()),
                              param_bool(st, "exclusive", false), param_bool(st, "reverse", false), out(0), stream));
}

void StepLaunch::run_pool2d() const {
  bool nhwc = param_str(st, "layout", "nchw") == "nhwc";
  const auto& xs = shin(0);
  if (xs.size() != 4) throw PlanError("plan: " + where + " needs a 4-D input");
  int64_t n = xs[0], c = nhwc ? xs[3] : xs[1], h = nhwc ? xs[1] : xs[2], w = nhwc ? xs[2] : xs[3];
  native::Layout layout = nhwc ? native::Layout::nhwc : native::Layout::nchw;
  if (step_kind == StepKind::global_average_pool) {
    native_check(native::global_average_pool(tin(0).dtype, layout, in(0), n, c, h, w, out(0), stream));
  } else {
    native::PoolArgs a;
    a.kind = param_str(st, "kind", "max") == "average" ? native::PoolKind::average : native::PoolKind::max;
    a.layout = layout;
    a.dtype = tin(0).dtype;
    a.x = in(0);
    a.y = out(0);
    a.n = n, a.c = c, a.h = h, a.w = w;
    auto two = [&](const char* key, int64_t def, int64_t* dst) {
      auto v = param_dims(st, key, d);
      dst[0] = v.size() > 0 ? v[0] : def;
      dst[1] = v.size() > 1 ? v[1] : def;
    };
    two("kernel", 1, a.kernel);
    two("stride", 1, a.stride);
    two("dilation", 1, a.dilation);
    auto pads = param_dims(st, "pads", d);
    pads.resize(4, 0);
    a.pad_begin[0] = pads[0], a.pad_begin[1] = pads[1], a.pad_end[0] = pads[2], a.pad_end[1] = pads[3];
    a.count_include_pad = param_bool(st, "count_include_pad", false);
    native::pool_output_dims(a, param_bool(st, "ceil_mode", false));
    native_check(native::pool2d(a, stream));
  }
}

void StepLaunch::run_attention() const {
  native::AttentionArgs a;
  a.dtype = tin(0).dtype;
  a.q = in(0), a.k = in(1), a.v = in(2), a.o = out(0);
  // Q, K and V at column offsets of one packed projection (lower.cpp: packed_split).
  if (auto off = param_dims(st, "offsets", d); !off.empty()) {
    if (off.size() != 3) throw PlanError("plan: " + where + " param 'offsets' needs 3 column offsets");
    const int64_t es = static_cast<int64_t>(ir::size_of(a.dtype));
    a.q = static_cast<const char*>(a.q) + off[0] * es;
    a.k = static_cast<const char*>(a.k) + off[1] * es;
    a.v = static_cast<const char*>(a.v) + off[2] * es;
  }
  a.b = param_dim(st, "b", d), a.h = param_dim(st, "h", d), a.sq = param_dim(st, "sq", d);
  a.sk = param_dim(st, "sk", d), a.d = param_dim(st, "d", d);
  a.kv_group = param_dim(st, "kv_group", d, 1);  // grouped-query attention
  auto three = [&](const char* key, int64_t* dst) {
    auto v = param_dims(st, key, d);
    if (v.size() != 3) throw PlanError("plan: " + where + " param '" + key + "' needs 3 strides");
    for (int i = 0; i < 3; ++i) dst[i] = v[static_cast<size_t>(i)];
  };
  three("q_stride", a.q_stride);
  three("k_stride", a.k_stride);
  three("v_stride", a.v_stride);
  three("o_stride", a.o_stride);
  a.scale = static_cast<float>(param_num(st, "scale", 1.0));
  a.causal = param_bool(st, "causal", false);
  if (st.inputs.size() > 3 && st.inputs[3] >= 0) {
    a.mask = in(3);
    a.mask_dtype = tin(3).dtype;
    three("mask_stride", a.mask_stride);
    if (auto mb = param_dims(st, "mask_batch", d); !mb.empty()) {  // a window mask wrapping over the batch
      if (mb.size() != 2 || mb[0] < 1) throw PlanError("plan: " + where + " param 'mask_batch' needs [inner >= 1, outer stride]");
      a.mask_batch_inner = mb[0], a.mask_batch_outer = mb[1];
    }
    if (a.mask_dtype == DType::i64) {  // a select mask: its two values
      if (!st.params.get("mask_true") || !st.params.get("mask_false"))
        throw PlanError("plan: " + where + " has an i64 mask but not both params mask_true and mask_false");
      a.mask_true = static_cast<float>(param_num(st, "mask_true", 0.0));
      a.mask_false = static_cast<float>(param_num(st, "mask_false", 0.0));
    }
  }
  native_check(native::attention(a, stream));
}

void StepLaunch::run_depthwise_conv() const {
  native::DepthwiseArgs a;
  a.dtype = tin(0).dtype;
  a.x = in(0);
  a.w = in(1);
  a.bias = st.inputs.size() > 2 && st.inputs[2] >= 0 ? in(2) : nullptr;
  a.y = out(0);
  a.n = param_dim(st, "n", d), a.h = param_dim(st, "h", d), a.w_ = param_dim(st, "w", d);
  a.c = param_dim(st, "c", d), a.r = param_dim(st, "r", d), a.s = param_dim(st, "s", d);
  a.p = param_dim(st, "p", d), a.q = param_dim(st, "q", d);
  if (step_kind == StepKind::grouped_conv) a.k = param_dim(st, "k", d), a.groups = param_dim(st, "groups", d);
  auto two = [&](const char* key, int64_t def) {
    auto v = param_dims(st, key, d);
    v.resize(2, def);
    return v;
  };
  auto pads = two("pads", 0), strides = two("strides", 1), dils = two("dilations", 1);
  a.pad_h = pads[0], a.pad_w = pads[1], a.stride_h = strides[0], a.stride_w = strides[1];
  a.dil_h = dils[0], a.dil_w = dils[1];
  const Clamp cl = clamp_param(st);  // a fused Relu/Clip
  a.clamp = cl.on, a.clamp_min = cl.lo, a.clamp_max = cl.hi;
  const ConvActivation act = activation_param(st);  // a fused SiLU, sigmoid, hard swish or hard sigmoid
  a.act = act.act, a.act_alpha = act.alpha, a.act_beta = act.beta;
  native_check(native::depthwise_conv2d(a, stream));
}

void StepLaunch::run_fill() const {
  native_check(native::fill_values(plan().tensors[static_cast<size_t>(st.outputs[0])].dtype, out(0),
                                   numel(shout(0)), param_dims(st, "values", d), stream));
}

void StepLaunch::run_iota() const {
  native_check(native::iota(plan().tensors[static_cast<size_t>(st.outputs[0])].dtype, out(0), numel(shout(0)),
                            static_cast<double>(param_dim(st, "start", d, 0)),
                            static_cast<double>(param_dim(st, "delta", d, 1)), stream));
}

void StepLaunch::run_copy() const {
  void* y = out(0);
  if (y != in(0))  // an aliased reshape view needs no work
    cuda_check(cudaMemcpyAsync(y, in(0), bytes_out(0), cudaMemcpyDeviceToDevice, stream), where + ": cudaMemcpyAsync");
}

}  // namespace sabre

#endif  // SABRE_RUNTIME_HAVE_CUDA
