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
  // The step's params, typed (read when the plan loaded), and an optional dim of them at this
  // call's dims or its default.
  template <class P>
  const P& params() const {
    return st.as<P>();
  }
  int64_t dim(const std::optional<ParamDim>& v, int64_t def) const { return v ? v->eval(d) : def; }

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
  const SoftmaxParams& p = params<SoftmaxParams>();
  const auto& xs = shin(0);
  int64_t cols_def = xs.empty() ? 1 : xs.back();
  a.cols = dim(p.cols, cols_def);
  a.b = dim(p.b, 1);
  a.h = dim(p.h, 1);
  a.q = dim(p.q, a.cols ? numel(xs) / a.cols / (a.b * a.h) : 0);
  a.scale = static_cast<float>(p.scale.value_or(1.0));
  a.causal = p.causal.value_or(false);
  a.log = p.log.value_or(false);
  a.mask = in(1);
  if (a.mask) {
    a.mask_dtype = tin(1).dtype;
    auto ms = eval_dims(p.mask_stride, d);
    if (ms.size() != 3) throw PlanError("plan: " + where + " has a mask but no 3-element mask_stride");
    std::copy(ms.begin(), ms.end(), a.mask_stride);
  }
  native_check(native::softmax(a, stream));
}

void StepLaunch::run_layernorm() const {
  native::LayerNormArgs a;
  a.dtype = tin(0).dtype;
  const LayerNormParams& p = params<LayerNormParams>();
  const auto& xs = shin(0);
  a.cols = dim(p.cols, xs.empty() ? 1 : xs.back());
  a.rows = dim(p.rows, a.cols ? numel(xs) / a.cols : 0);
  a.eps = static_cast<float>(p.eps.value_or(1e-5));
  a.x = in(0);
  a.gamma = in(1);
  a.beta = in(2);
  a.residual = in(3);
  a.y = out(0);
  if (p.f32_copy.value_or(false)) {
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
  const EmbedLayerNormParams& p = params<EmbedLayerNormParams>();
  const auto rows = eval_dims(p.row_dims, d), offsets = eval_dims(p.offsets, d), strides = eval_dims(p.strides, d);
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
  a.cols = p.cols.eval(d);
  a.eps = static_cast<float>(p.eps.value_or(1e-5));
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
  const auto& chain = params<ElementwiseParams>().chain;
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
  const ReduceParams& p = params<ReduceParams>();
  static_assert(static_cast<int>(ReduceKind::count) == static_cast<int>(native::ReduceOp::kCount) &&
                    static_cast<int>(ReduceKind::log_sum_exp) == static_cast<int>(native::ReduceOp::log_sum_exp) &&
                    static_cast<int>(ReduceKind::argmin_last) == static_cast<int>(native::ReduceOp::argmin_last),
                "ReduceKind names native::ReduceOp's reductions in its order");
  const auto kind = static_cast<native::ReduceOp>(p.kind.value_or(ReduceKind::sum));
  native_check(native::reduce(kind, tin(0).dtype, in(0), shin(0), eval_dims(p.axes, d), out(0), stream));
}

void StepLaunch::run_permute() const {
  native_check(native::permute(ir::size_of(tin(0).dtype), in(0), shin(0), eval_dims(params<PermuteParams>().perm, d), out(0), stream));
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
  const SliceParams& p = params<SliceParams>();
  auto starts = eval_dims(p.starts, d), ends = eval_dims(p.ends, d), axes = eval_dims(p.axes, d),
       steps = eval_dims(p.steps, d);
  native_check(native::slice(ir::size_of(tin(0).dtype), in(0), shin(0), starts, ends, axes, steps, out(0), stream));
}

void StepLaunch::run_strided_copy() const {
  const StridedCopyParams& p = params<StridedCopyParams>();
  native_check(native::strided_copy(ir::size_of(tin(0).dtype), in(0), dim(p.offset, 0), shout(0),
                                    eval_dims(p.strides, d), out(0), stream));
}

void StepLaunch::run_concat() const {
  std::vector<const void*> xs;
  std::vector<std::vector<int64_t>> dims;
  for (size_t k = 0; k < st.inputs.size(); ++k) {
    xs.push_back(in(k));
    dims.push_back(shin(k));
  }
  native_check(native::concat(ir::size_of(tin(0).dtype), xs, dims, axis_of(params<ConcatParams>().axis.eval(d), shout(0).size()),
                              out(0), stream));
}

void StepLaunch::run_split() const {
  int64_t axis = axis_of(params<SplitParams>().axis.eval(d), shin(0).size());
  std::vector<int64_t> sizes;
  std::vector<void*> ys;
  for (size_t k = 0; k < st.outputs.size(); ++k) {
    sizes.push_back(shout(k).at(static_cast<size_t>(axis)));
    ys.push_back(out(k));
  }
  native_check(native::split(ir::size_of(tin(0).dtype), in(0), shin(0), axis, sizes, ys, stream));
}

void StepLaunch::run_gather() const {
  native_check(native::gather(ir::size_of(tin(0).dtype), in(0), shin(0), axis_of(dim(params<GatherParams>().axis, 0), shin(0).size()),
                              in(1), tin(1).dtype, numel(shin(1)), out(0), stream));
}

void StepLaunch::run_gather_elements() const {
  const GatherElementsParams& p = params<GatherElementsParams>();
  native_check(native::gather_elements(ir::size_of(tin(0).dtype), in(0), shin(0), axis_of(dim(p.axis, 0), shin(0).size()),
                                       in(1), tin(1).dtype, shin(1), out(0), stream));
}

void StepLaunch::run_trilu() const {
  const TriluParams& p = params<TriluParams>();
  native_check(native::trilu(ir::size_of(tin(0).dtype), in(0), shin(0), dim(p.k, 0), p.upper.value_or(true), out(0), stream));
}

void StepLaunch::run_cumsum() const {
  const CumsumParams& p = params<CumsumParams>();
  native_check(native::cumsum(tin(0).dtype, in(0), shin(0), axis_of(dim(p.axis, 0), shin(0).size()),
                              p.exclusive.value_or(false), p.reverse.value_or(false), out(0), stream));
}

void StepLaunch::run_pool2d() const {
  const std::optional<TensorLayout>& layout_param = step_kind == StepKind::global_average_pool
                                                        ? params<GlobalAveragePoolParams>().layout
                                                        : params<Pool2dParams>().layout;
  const bool nhwc = layout_param.value_or(TensorLayout::nchw) == TensorLayout::nhwc;
  const auto& xs = shin(0);
  if (xs.size() != 4) throw PlanError("plan: " + where + " needs a 4-D input");
  int64_t n = xs[0], c = nhwc ? xs[3] : xs[1], h = nhwc ? xs[1] : xs[2], w = nhwc ? xs[2] : xs[3];
  native::Layout layout = nhwc ? native::Layout::nhwc : native::Layout::nchw;
  if (step_kind == StepKind::global_average_pool) {
    native_check(native::global_average_pool(tin(0).dtype, layout, in(0), n, c, h, w, out(0), stream));
  } else {
    const Pool2dParams& p = params<Pool2dParams>();
    native::PoolArgs a;
    a.kind = p.kind.value_or(PoolMode::max) == PoolMode::average ? native::PoolKind::average : native::PoolKind::max;
    a.layout = layout;
    a.dtype = tin(0).dtype;
    a.x = in(0);
    a.y = out(0);
    a.n = n, a.c = c, a.h = h, a.w = w;
    auto two = [&](const std::optional<ParamDims>& list, int64_t def, int64_t* dst) {
      auto v = eval_dims(list, d);
      dst[0] = v.size() > 0 ? v[0] : def;
      dst[1] = v.size() > 1 ? v[1] : def;
    };
    two(p.kernel, 1, a.kernel);
    two(p.stride, 1, a.stride);
    two(p.dilation, 1, a.dilation);
    auto pads = eval_dims(p.pads, d);
    pads.resize(4, 0);
    a.pad_begin[0] = pads[0], a.pad_begin[1] = pads[1], a.pad_end[0] = pads[2], a.pad_end[1] = pads[3];
    a.count_include_pad = p.count_include_pad.value_or(false);
    native::pool_output_dims(a, p.ceil_mode.value_or(false));
    native_check(native::pool2d(a, stream));
  }
}

void StepLaunch::run_attention() const {
  native::AttentionArgs a;
  a.dtype = tin(0).dtype;
  a.q = in(0), a.k = in(1), a.v = in(2), a.o = out(0);
  // Q, K and V at column offsets of one packed projection (lower.cpp: packed_split).
  const AttentionParams& p = params<AttentionParams>();
  if (auto off = eval_dims(p.offsets, d); !off.empty()) {
    if (off.size() != 3) throw PlanError("plan: " + where + " param 'offsets' needs 3 column offsets");
    const int64_t es = static_cast<int64_t>(ir::size_of(a.dtype));
    a.q = static_cast<const char*>(a.q) + off[0] * es;
    a.k = static_cast<const char*>(a.k) + off[1] * es;
    a.v = static_cast<const char*>(a.v) + off[2] * es;
  }
  a.b = p.b.eval(d), a.h = p.h.eval(d), a.sq = p.sq.eval(d);
  a.sk = p.sk.eval(d), a.d = p.d.eval(d);
  a.kv_group = dim(p.kv_group, 1);  // grouped-query attention
  auto three = [&](const char* key, const auto& list, int64_t* dst) {
    auto v = eval_dims(list, d);
    if (v.size() != 3) throw PlanError("plan: " + where + " param '" + key + "' needs 3 strides");
    for (int i = 0; i < 3; ++i) dst[i] = v[static_cast<size_t>(i)];
  };
  three("q_stride", p.q_stride, a.q_stride);
  three("k_stride", p.k_stride, a.k_stride);
  three("v_stride", p.v_stride, a.v_stride);
  three("o_stride", p.o_stride, a.o_stride);
  a.scale = static_cast<float>(p.scale.value_or(1.0));
  a.causal = p.causal.value_or(false);
  if (st.inputs.size() > 3 && st.inputs[3] >= 0) {
    a.mask = in(3);
    a.mask_dtype = tin(3).dtype;
    three("mask_stride", p.mask_stride, a.mask_stride);
    if (p.mask_batch) {  // a window mask wrapping over the batch
      const std::vector<int64_t> mb = eval_dims(*p.mask_batch, d);
      if (mb[0] < 1) throw PlanError("plan: " + where + " param 'mask_batch' needs [inner >= 1, outer stride]");
      a.mask_batch_inner = mb[0], a.mask_batch_outer = mb[1];
    }
    if (a.mask_dtype == DType::i64) {  // a select mask: its two values
      if (!p.mask_true || !p.mask_false)
        throw PlanError("plan: " + where + " has an i64 mask but not both params mask_true and mask_false");
      a.mask_true = static_cast<float>(*p.mask_true);
      a.mask_false = static_cast<float>(*p.mask_false);
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
  // grouped_conv's params are depthwise_conv's with k and groups (checked when the plan loaded).
  const DepthwiseConvParams& p = step_kind == StepKind::grouped_conv ? params<GroupedConvParams>()
                                                                     : params<DepthwiseConvParams>();
  a.n = p.n.eval(d), a.h = p.h.eval(d), a.w_ = p.w.eval(d);
  a.c = p.c.eval(d), a.r = p.r.eval(d), a.s = p.s.eval(d);
  a.p = p.p.eval(d), a.q = p.q.eval(d);
  if (step_kind == StepKind::grouped_conv) a.k = p.k->eval(d), a.groups = p.groups->eval(d);
  auto two = [&](const std::optional<ParamDims>& list, int64_t def) {
    auto v = eval_dims(list, d);
    v.resize(2, def);
    return v;
  };
  auto pads = two(p.pads, 0), strides = two(p.strides, 1), dils = two(p.dilations, 1);
  a.pad_h = pads[0], a.pad_w = pads[1], a.stride_h = strides[0], a.stride_w = strides[1];
  a.dil_h = dils[0], a.dil_w = dils[1];
  const Clamp cl = clamp_of(p.clamp);  // a fused Relu/Clip
  a.clamp = cl.on, a.clamp_min = cl.lo, a.clamp_max = cl.hi;
  if (p.activation) {  // a fused SiLU, sigmoid, hard swish or hard sigmoid
    a.act = p.activation->op;
    a.act_alpha = static_cast<float>(p.activation->alpha.value_or(1.0));
    a.act_beta = static_cast<float>(p.activation->beta.value_or(0.0));
  }
  native_check(native::depthwise_conv2d(a, stream));
}

void StepLaunch::run_fill() const {
  native_check(native::fill_values(plan().tensors[static_cast<size_t>(st.outputs[0])].dtype, out(0),
                                   numel(shout(0)), eval_dims(params<FillParams>().values, d), stream));
}

void StepLaunch::run_iota() const {
  native_check(native::iota(plan().tensors[static_cast<size_t>(st.outputs[0])].dtype, out(0), numel(shout(0)),
                            static_cast<double>(dim(params<IotaParams>().start, 0)),
                            static_cast<double>(dim(params<IotaParams>().delta, 1)), stream));
}

void StepLaunch::run_copy() const {
  void* y = out(0);
  if (y != in(0))  // an aliased reshape view needs no work
    cuda_check(cudaMemcpyAsync(y, in(0), bytes_out(0), cudaMemcpyDeviceToDevice, stream), where + ": cudaMemcpyAsync");
}

}  // namespace sabre

#endif  // SABRE_RUNTIME_HAVE_CUDA
