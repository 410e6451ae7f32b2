// Emitting conv regions ("conv" steps on NHWC, or 1x1 convs as "gemm" steps) and grouped convs
// (native "depthwise_conv" / "grouped_conv").
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cutlass/conv_spec.h"
#include "backends/cutlass/patterns.h"
#include "codegen/passes/emit.h"

namespace sabre::codegen::passes {
namespace {

// Channels that break the 16-byte access (the RGB stem's C=3) would put the conv on alignment-1
// analytic kernels: ResNet-50's 7x7 stem took 2.0 of its 4.1 ms at batch 32 on the H200 so.
// Where X enters NHWC through a conversion (an NCHW activation: the model's images), that
// conversion writes C rounded up to the access width, zeros in the new channels, and the filter
// gets zero taps there: the same sums, on the aligned kernels. Returns that width, or 0 where
// X is already NHWC (a conv's or pool's output: padding would cost a pass), C and K are not
// both static, or K breaks the access too. Where this pads, a small conv (the stem) runs as
// im2col + GEMM (emit_im2col_gemm) or one stem_conv step (emit_stem_conv) instead when
// LowerOptions::stem says so.
int64_t channel_padding(LowerContext& cx, const Value* X, const Value* W) {
  if (cx.nhwc.count(X) || X->is_constant() || !W->is_constant()) return 0;
  const auto& xs = X->shape();
  const auto& ws = W->shape();
  if (!xs[1].is_static() || !ws[0].is_static() || !ws[1].is_static() || ws[1].value() != xs[1].value()) return 0;
  const int64_t c = xs[1].value();
  const int64_t full = cutlass_backend::max_alignment(cx.o.dtype);
  const int64_t cp = (c + full - 1) / full * full;
  if (cp == c || cutlass_backend::static_alignment(cx.o.dtype, {{"C", Dim(cp)}, {"K", ws[0]}}) != full) return 0;
  return cp;
}


// A 1x1 conv with stride 1, no padding, dilation 1 and one group (ResNet's bottleneck ends,
// MobileNetV2's expand and project convs) as a "gemm" step (LowerOptions::pointwise_gemm): X in
// NHWC is A [n·h·w, C] and Y in NHWC is D [n·h·w, K] as they lie, the KRSC filter is B [K, C]
// ("tn"), and the residual (NHWC) is R [n·h·w, K]; the conv's bias and epilogue carry over.
// The GEMM kernels are persistent (an SM90 pingpong CTA overlaps one tile's epilogue with the
// next tile's mainloop, which a reduction of 64 channels needs: ResNet-50's first-stage 64 -> 256
// residual convs ran 75-78 us each on the H200 as non-persistent implicit-GEMM convs at batch
// 32, three times their bytes' time), launch with PDL and are tuned over more tiles. Returns
// false (the conv step runs) where the shape does not qualify or, with a note, where no GEMM
// kernel takes the epilogue.
bool emit_pointwise_gemm(LowerContext& cx, const Node* n, const Node* conv, Value* X, Value* W, Value* bias, Value* res,
                         const std::string& epilogue) {
  const auto& xs = X->shape();
  const auto& ws = W->shape();
  const auto& ys = n->output(0)->shape();
  auto all = [](const std::vector<int64_t>& v, int64_t x) {
    return std::all_of(v.begin(), v.end(), [x](int64_t e) { return e == x; });
  };
  if (!(ws[2] == Dim(1)) || !(ws[3] == Dim(1)) || !all(conv->attr_ints("strides", {1, 1}), 1) ||
      !all(conv->attr_ints("pads", {0, 0, 0, 0}), 0) || !all(conv->attr_ints("dilations", {1, 1}), 1))
    return false;
  if (!(xs[2] == ys[2]) || !(xs[3] == ys[3])) return false;  // shape inference agrees: 1x1, stride 1
  std::optional<runtime::GemmParams> p = conv_gemm_params(cx, n, conv, xs[0] * xs[2] * xs[3], ws[0], xs[1], epilogue,
                                                          res != nullptr, "1x1, but not run as a GEMM",
                                                          "the conv kernels run it");
  if (!p) return false;
  cx.step(n->name() + " (" + conv->name() + ", 1x1 as a GEMM)",
          {cx.tensor_nhwc(X), cx.tensor_nhwc(W), cx.tensor(bias), cx.tensor_nhwc(res)}, {cx.define(n->output(0))},
          std::move(*p));
  ++cx.pointwise;
  return true;
}


}  // namespace

// A conv region -> one "conv" step: X and the residual NHWC, the filter KRSC (transposed here,
// once), Y NHWC; the kernel from LowerOptions::pick_conv.
void emit_conv(LowerContext& cx, Node* n) {
  const std::string pattern = n->attr_string("pattern", "");
  if (!cx.o.pick_conv)
    throw UnsupportedError(where(n) + " [" + pattern + "]: conv offload is not implemented yet (issue 7): no conv "
                           "kernel picker in this build");
  std::map<std::string, Value*> role = roles_of(n);
  Value* X = role["X"];
  Value* W = role["W"];
  Value* bias = role.count("bias") ? role["bias"] : nullptr;
  Value* res = role.count("residual") ? role["residual"] : nullptr;
  if (!X || !W) throw std::logic_error("lower: Composite " + n->name() + " lacks an X or W role (invariant: docs/IR.md)");
  const ir::Node* conv = nullptr;
  if (const auto& body = n->attr_graph("body"))
    for (const ir::Node* b : body->nodes())
      if (b->op() == "Conv") conv = b;
  if (!conv) throw std::logic_error("lower: conv Composite " + n->name() + " has no Conv in its body (invariant: docs/IR.md)");
  const auto& xs = X->shape();
  const auto& ws = W->shape();
  const Value* Y = n->output(0);
  const auto& ys = Y->shape();
  if (xs.size() != 4 || ws.size() != 4 || ys.size() != 4)
    throw std::logic_error("lower: conv Composite " + n->name() + " is not 2-D (invariant: check_conv)");
  auto pads = conv->attr_ints("pads", {0, 0, 0, 0});
  auto strides = conv->attr_ints("strides", {1, 1});
  auto dil = conv->attr_ints("dilations", {1, 1});
  const int64_t groups = conv->attr_int("group", 1);
  // The window as the runtime checks it (runtime::Window2d): the conv kernels pad symmetrically.
  const std::optional<runtime::Window2d> win = runtime::Window2d::from_lists(pads, strides, dil);
  if (!win || pads.size() != 4 || strides.size() != 2 || dil.size() != 2)
    throw UnsupportedError(where(n) + " [" + pattern + "]: pads/strides/dilations are not 2-D");
  if (!win->symmetric())
    throw UnsupportedError(where(n) + " [" + pattern + "]: asymmetric pads [" + std::to_string(pads[0]) + "," + std::to_string(pads[1]) + "," +
                           std::to_string(pads[2]) + "," + std::to_string(pads[3]) + "]" +
                           ": the conv kernels pad both sides of a dim alike");
  const std::string epilogue = n->attr_string("epilogue", "linear");
  const std::string dt(ir::name(cx.o.dtype));
  const int64_t c_pad = channel_padding(cx, X, W);
  if (c_pad && cx.o.stem == Stem::direct && emit_stem_conv(cx, n, conv, X, W, bias, res, groups, epilogue)) return;
  if (c_pad && cx.o.stem != Stem::conv && !res && groups == 1 && emit_im2col_gemm(cx, n, conv, X, W, bias, c_pad, epilogue))
    return;
  if (!c_pad && cx.o.pointwise_gemm && groups == 1 && emit_pointwise_gemm(cx, n, conv, X, W, bias, res, epilogue)) return;
  ConvProblem prob;
  prob.dtype = dt;
  prob.epilogue = epilogue;
  prob.n = cx.eval_hi(xs[0]);
  prob.c = c_pad ? c_pad : cx.eval_hi(xs[1]);
  prob.h = cx.eval_hi(xs[2]);
  prob.w = cx.eval_hi(xs[3]);
  prob.k = cx.eval_hi(ws[0]);
  prob.r = cx.eval_hi(ws[2]);
  prob.s = cx.eval_hi(ws[3]);
  prob.p = cx.eval_hi(ys[2]);
  prob.q = cx.eval_hi(ys[3]);
  prob.pad_h = win->pads[0];
  prob.pad_w = win->pads[1];
  prob.stride_h = win->strides[0];
  prob.stride_w = win->strides[1];
  prob.dil_h = win->dilations[0];
  prob.dil_w = win->dilations[1];
  prob.groups = groups;
  // A symbolic channel count can be anything, so it allows only 1.
  const Dim c_dim = c_pad ? Dim(c_pad) : xs[1];
  // A grouped conv's kernel reads each group's channels: their counts set the access width.
  prob.alignment = !c_dim.is_static() || !ws[0].is_static() ? 1
                   : groups > 1 ? cutlass_backend::static_alignment(cx.o.dtype, {{"C/group", Dim(c_dim.value() / groups)},
                                                                                {"K/group", Dim(ws[0].value() / groups)}})
                                : cutlass_backend::static_alignment(cx.o.dtype, {{"C", c_dim}, {"K", ws[0]}});
  for (int64_t v : {prob.n, prob.c, prob.h, prob.w, prob.k, prob.r, prob.s, prob.p, prob.q})
    if (v <= 0) throw UnsupportedError(where(n) + " [" + pattern + "]: conv dims do not evaluate over the symbol ranges");
  // One pick per batch bucket (powers of two over the batch range, as GEMM M buckets): a batch-1
  // layer leaves most SMs idle where batch 32 fills them, so they want other tiles and splits. The
  // runtime reads the table at M = n·p·q (resolve.h), so each entry ends at its batch times p·q.
  const int64_t n_lo = std::max<int64_t>(1, cx.eval_lo(xs[0]));
  runtime::DispatchTable dispatch;
  std::string last;
  for (int64_t nb : tune::m_buckets(std::min(n_lo, prob.n), prob.n)) {
    ConvProblem at = prob;
    at.n = nb;
    std::string kernel;
    try {
      kernel = cx.o.pick_conv(at);
    } catch (const std::invalid_argument& e) {
      throw UnsupportedError(where(n) + " [" + pattern + "]: no conv kernel: " + e.what());
    }
    if (kernel.empty()) throw UnsupportedError(where(n) + " [" + pattern + "]: the conv kernel picker returned no kernel");
    if (cx.conv_seen.insert(kernel).second) cx.out.conv_kernels.push_back(kernel);
    const int64_t max_m = nb * prob.p * prob.q;
    if (kernel == last)
      dispatch.back() = {max_m, kernel};
    else
      dispatch.push_back({max_m, kernel});
    last = kernel;
  }
  dispatch.back() = {-1, last};  // the last covers any m
  if (c_pad) {
    // Which path the stem took and on what: the kernels of the dispatch table, and whether they
    // walk K = R·S·C packed (few_channels) or pad C to the tile's K at every tap.
    std::string kernels;
    bool few = true;
    for (const auto& e : dispatch) {
      const std::string& k = e.kernel;
      kernels += (kernels.empty() ? "" : ", ") + k;
      auto spec = cutlass_backend::parse_conv_kernel_name(k);
      few = few && spec && spec->config.iter == cutlass_backend::ConvIter::few_channels;
    }
    cx.out.notes.push_back("conv " + n->name() + ": input channels padded " + xs[1].str() + " -> " + std::to_string(c_pad) +
                         " at the NHWC boundary (zero channels, zero filter taps): alignment-" +
                         std::to_string(prob.alignment) + " kernels instead of alignment-" +
                         std::to_string(cutlass_backend::static_alignment(cx.o.dtype, {{"C", xs[1]}, {"K", ws[0]}})) +
                         "; runs as a conv step (" +
                         (cx.o.stem == Stem::conv ? "--stem conv" : "im2col + GEMM does not take it") +
                         ") on " + kernels +
                         (few ? " (few_channels: GEMM K = R*S*C = " + std::to_string(prob.r * prob.s * c_pad) +
                                    ", no padding to the tile's K)"
                              : ""));
  }
  runtime::ConvParams p;
  p.n = pdim(xs[0]), p.h = pdim(xs[2]), p.w = pdim(xs[3]), p.c = pdim(c_dim), p.k = pdim(ws[0]);
  p.r = pdim(ws[2]), p.s = pdim(ws[3]), p.p = pdim(ys[2]), p.q = pdim(ys[3]);
  p.pads = param_numbers(pads), p.strides = param_numbers(strides), p.dilations = param_numbers(dil);
  p.groups = ParamDim(groups), p.alpha = 1, p.beta = res ? 1 : 0;
  p.dtype = dt, p.epilogue = epilogue, p.pattern = pattern, p.dispatch = std::move(dispatch);
  std::vector<int> ins{cx.tensor_nhwc(X, c_pad), cx.tensor_nhwc(W, c_pad), cx.tensor(bias), cx.tensor_nhwc(res)};
  if (!cx.nhwc.count(Y)) throw std::logic_error("lower: conv output '" + Y->name() + "' is not NHWC (invariant: assign_layouts)");
  cx.step(n->name(), ins, {cx.define(Y)}, std::move(p));
}

// The gemm step params of a conv region run as one unbatched "tn" GEMM (emit_im2col_gemm,
// emit_pointwise_gemm), its output Y already NHWC; nullopt, with a note saying `refused` and
// `instead`, where no GEMM kernel takes the problem.
std::optional<runtime::GemmParams> conv_gemm_params(LowerContext& cx, const Node* n, const Node* conv, const Dim& m,
                                                    const Dim& nn, const Dim& k, const std::string& epilogue,
                                                    bool residual, const std::string& refused,
                                                    const std::string& instead) {
  if (!cx.nhwc.count(n->output(0)))
    throw std::logic_error("lower: conv output '" + n->output(0)->name() + "' is not NHWC (invariant: assign_layouts)");
  runtime::GemmParams p;
  p.stride_a = p.stride_b = p.stride_d = p.stride_r = ParamDim::text("0");
  try {
    p = gemm_params(cx, n, std::move(p), m, nn, k, Dim(1), "tn", epilogue, residual);
  } catch (const UnsupportedError& e) {
    cx.out.notes.push_back("conv " + conv->name() + " (" + n->name() + "): " + refused + " (" + e.what() + "); " + instead);
    return std::nullopt;
  }
  p.pattern = n->attr_string("pattern", "");
  return p;
}

// Depthwise conv -> native "depthwise_conv": NHWC in and out, the filter [C,1,R,S] as [R,S,C].
// Other grouped convs -> native "grouped_conv", the same kernel entry with `k` and `groups`: the
// filter [K,C/G,R,S] as [R,S,C/G,K] (for depthwise the same bytes as [R,S,C]).
void emit_depthwise(LowerContext& cx, Node* n) {
  const Value* w = n->input(1);
  const ir::Tensor wc = w->constant().dtype() == cx.o.dtype || !ir::is_float(w->constant().dtype())
                            ? w->constant() : w->constant().cast(cx.o.dtype);
  const auto& wd = wc.dims();
  const int64_t K = wd[0], CG = wd[1], R = wd[2], S = wd[3];
  const bool depthwise = is_depthwise(n);
  const size_t es = ir::size_of(wc.dtype());
  ir::Tensor rsc(wc.dtype(), depthwise ? std::vector<int64_t>{R, S, K} : std::vector<int64_t>{R, S, CG, K});
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < CG; ++j)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t q = 0; q < S; ++q)
          std::memcpy(rsc.mutable_bytes() + static_cast<size_t>(((r * S + q) * CG + j) * K + k) * es,
                      wc.bytes() + static_cast<size_t>(((k * CG + j) * R + r) * S + q) * es, es);
  const int64_t C = CG * n->attr_int("group", 1);  // input channels
  runtime::TensorInfo ti;
  ti.name = w->name() + (depthwise ? ".rsc" : ".rsck");
  ti.kind = runtime::TensorKind::weight;
  for (int64_t d : rsc.dims()) ti.shape.push_back(runtime::DimExpr::parse(std::to_string(d)));
  int wt = cx.add_weight(std::move(rsc), std::move(ti));
  int x = cx.tensor_nhwc(n->input(0));
  int b = n->num_inputs() > 2 ? cx.tensor(n->input(2)) : -1;
  // A fused Relu/Clip (fuse_depthwise_activation) writes its output from this step.
  const auto act = cx.dw_act.find(n);
  const Value* y = act != cx.dw_act.end() ? act->second.node->output(0) : n->output(0);
  if (!cx.nhwc.count(y)) throw std::logic_error("lower: depthwise output not NHWC (invariant: assign_layouts)");
  const auto& xs = n->input(0)->shape();
  const auto& ys = n->output(0)->shape();
  auto pads = n->attr_ints("pads", {0, 0, 0, 0});
  runtime::DepthwiseConvParams p;
  p.n = pdim(xs[0]), p.h = pdim(xs[2]), p.w = pdim(xs[3]), p.c = ParamDim(C);
  p.r = ParamDim(R), p.s = ParamDim(S), p.p = pdim(ys[2]), p.q = pdim(ys[3]);
  p.pads = param_numbers({pads[0], pads[1]});
  p.strides = param_numbers(n->attr_ints("strides", {1, 1}));
  p.dilations = param_numbers(n->attr_ints("dilations", {1, 1}));
  if (!depthwise) p.k = ParamDim(K), p.groups = ParamDim(n->attr_int("group", 1));
  std::string name = n->name();
  if (act != cx.dw_act.end()) {
    const DwActivation& a = act->second;
    if (a.act == native::ConvAct::none || !std::isinf(a.lo) || !std::isinf(a.hi)) p.clamp = runtime::ClampParam{a.lo, a.hi};
    if (a.act != native::ConvAct::none) p.activation = runtime::ActivationParam{.op = a.act, .alpha = a.alpha, .beta = a.beta};
    name += " + " + (a.act == native::ConvAct::none ? a.node->op() : std::string(native::conv_act_name(a.act))) + " " +
            a.node->name();
  }
  cx.step(name, {x, wt, b}, {cx.define(y)},
          depthwise ? runtime::StepParams(std::move(p)) : runtime::StepParams(runtime::GroupedConvParams{std::move(p)}));
}

}  // namespace sabre::codegen::passes
