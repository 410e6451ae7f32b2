// Emitting the small-channel conv at the NCHW boundary (the RGB stem) as im2col + GEMM or as one
// native stem_conv step (LowerOptions::stem).
#include <cmath>
#include <cstring>
#include <functional>

#include "backends/cutlass/conv_spec.h"
#include "backends/cutlass/patterns.h"
#include "backends/native/stem_conv.h"
#include "codegen/passes/emit.h"

namespace sabre::codegen::passes {
namespace {

// X as a step that reads NCHW takes it (im2col, stem_conv): a float model input nothing has cast
// yet is read itself (the step casts on the way), anything else through cx.tensor().
int nchw_source(LowerContext& cx, const Value* X) {
  auto raw = cx.pending_cast.find(X);
  const int x = raw != cx.pending_cast.end() ? raw->second : cx.tensor(X);
  if (x < 0) throw AfterRefusal{};
  return x;
}

// The filter W [K, C, R, S] as the matrix [K, cols] the stem's steps read (im2col's B,
// stem_conv's w): [k, column(r, s, c)] = W[k, c, r, s], zeros in every other column. im2col's
// columns are (r·S + s)·C + c (the default); stem_conv pads each tap's channels (stem_conv_column).
// A weight named <W>.<suffix>.
int packed_filter(LowerContext& cx, const Value* W, int64_t cols, const std::string& suffix,
                  const std::function<int64_t(int64_t, int64_t, int64_t)>& column = {}) {
  const ir::Tensor& wc = W->constant();
  const int64_t K = wc.dims()[0], C = wc.dims()[1], R = wc.dims()[2], S = wc.dims()[3];
  const size_t es = ir::size_of(wc.dtype());
  ir::Tensor b(wc.dtype(), {K, cols});
  std::memset(b.mutable_bytes(), 0, b.nbytes());
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t q = 0; q < S; ++q)
          std::memcpy(b.mutable_bytes() + static_cast<size_t>(k * cols + (column ? column(r, q, c) : (r * S + q) * C + c)) * es,
                      wc.bytes() + static_cast<size_t>(((k * C + c) * R + r) * S + q) * es, es);
  runtime::TensorInfo bt;
  bt.name = W->name() + "." + suffix;
  bt.kind = runtime::TensorKind::weight;
  bt.shape = {runtime::DimExpr::parse(std::to_string(K)), runtime::DimExpr::parse(std::to_string(cols))};
  return cx.add_weight(std::move(b), std::move(bt));
}

// The params of a step that slides the conv's window over X in NCHW (im2col, stem_conv): x's
// n, c, h, w, the filter's r and s, Y's p and q, and the conv's pads, strides and dilations.
runtime::Im2colParams nchw_window_params(const Node* n, const Node* conv, const Value* X, int64_t C, int64_t R,
                                         int64_t S) {
  const auto& xs = X->shape();
  const auto& ys = n->output(0)->shape();
  return runtime::Im2colParams{.n = pdim(xs[0]), .c = ParamDim(C), .h = pdim(xs[2]), .w = pdim(xs[3]), .r = ParamDim(R),
                               .s = ParamDim(S), .p = pdim(ys[2]), .q = pdim(ys[3]),
                               .pads = param_numbers(conv->attr_ints("pads", {0, 0, 0, 0})),
                               .strides = param_numbers(conv->attr_ints("strides", {1, 1})),
                               .dilations = param_numbers(conv->attr_ints("dilations", {1, 1}))};
}


}  // namespace

// The small-channel conv at the NCHW boundary (the RGB stem; emit_conv calls this where
// channel_padding pads X) as im2col + GEMM (LowerOptions::stem): an "im2col" step reads X
// as the graph has it (NCHW; a float model input itself, cast on the way) and writes
// A [n·p·q, kp], column (r·S + s)·C + c, kp = R·S·C rounded up to the 16-byte access; the filter
// [K,C,R,S] is repacked once to B [K, kp] with the same columns (zeros past R·S·C); a gemm step
// ("tn", the conv's bias and epilogue) writes D [n·p·q, K], which is Y in NHWC. Padding C instead
// reduces over R·S·8 (392 for ResNet's 147) with one tap per 16-byte load: the stem took 268 of
// ResNet-50's 1665 us at batch 32 on the H200 so, and its NHWC conversion 49 more. Returns false
// (the padded conv runs then) where the shape does not qualify (im2col_shape) or, with a note,
// where no GEMM kernel fits.
bool emit_im2col_gemm(LowerContext& cx, const Node* n, const Node* conv, Value* X, Value* W, Value* bias, int64_t c_pad,
                      const std::string& epilogue) {
  const auto& xs = X->shape();
  const auto& ys = n->output(0)->shape();
  const ir::Tensor& wc = W->constant();  // [K, C, R, S]
  const int64_t K = wc.dims()[0], C = wc.dims()[1], R = wc.dims()[2], S = wc.dims()[3];
  const int64_t rsc = R * S * C;
  if (!cutlass_backend::im2col_shape(C, R, S)) return false;
  const int64_t vec = cutlass_backend::max_alignment(cx.o.dtype);
  const int64_t kp = (rsc + vec - 1) / vec * vec;
  const Dim m = xs[0] * ys[2] * ys[3];
  std::optional<runtime::GemmParams> p = conv_gemm_params(cx, n, conv, m, Dim(K), Dim(kp), epilogue, false, "not run as im2col + GEMM",
                                              "its channels are padded instead");
  if (!p) return false;
  const int x = nchw_source(cx, X);
  const int wt = packed_filter(cx, W, kp, "im2col");
  runtime::TensorInfo at;
  at.name = conv->name() + ".im2col";
  at.dtype = cx.o.dtype;
  at.kind = runtime::TensorKind::activation;
  at.shape = {runtime::DimExpr::parse(m.str()), runtime::DimExpr::parse(std::to_string(kp))};
  const int a = cx.add_tensor(std::move(at));
  const std::string cols = std::to_string(rsc) + " -> " + std::to_string(kp) + " columns";
  cx.step(conv->name() + " (im2col, " + cols + ")", {x}, {a}, nchw_window_params(n, conv, X, C, R, S));
  cx.step(n->name() + " (" + conv->name() + " on its im2col)", {a, wt, cx.tensor(bias), -1}, {cx.define(n->output(0))},
          std::move(*p));
  ++cx.im2col;
  cx.out.notes.push_back("conv " + conv->name() + " (" + n->name() + "): im2col (" + cols +
                       ") + GEMM instead of a C-padded (" + std::to_string(C) + " -> " + std::to_string(c_pad) +
                       ") implicit-GEMM conv, reading " + X->name() + " in NCHW (--stem conv: the padded conv)");
  return true;
}

// The small-channel conv at the NCHW boundary as one native kernel (Stem::direct; emit_conv calls
// this where channel_padding pads X): a "stem_conv" step reads X as the graph has it (NCHW; a
// float model input itself, cast on the way) and the filter packed as im2col's B with the columns
// rounded up to the kernel's 16-column steps, and writes Y in NHWC, bias and clamp (relu, relu6)
// applied to the f32 sums: no A [n·p·q, cols] through memory and no GEMM, so nothing to tune.
// Returns false, with a note saying why (it then runs as Stem::im2col has it), where the conv does
// not qualify as for im2col, the epilogue is not one the kernel applies, or
// native::stem_conv_unsupported refuses the shape.
bool emit_stem_conv(LowerContext& cx, const Node* n, const Node* conv, Value* X, Value* W, Value* bias, const Value* res,
                    int64_t groups, const std::string& epilogue) {
  const ir::Tensor& wc = W->constant();  // [K, C, R, S]
  const int64_t K = wc.dims()[0], C = wc.dims()[1], R = wc.dims()[2], S = wc.dims()[3];
  const int64_t rsc = R * S * C;
  // Each tap's channels padded to 4 (C = 3) or 8, the columns rounded up to the kernel's 16-column steps.
  const int64_t cols = native::stem_conv_cols(C, R, S);
  const auto strides = conv->attr_ints("strides", {1, 1});
  const auto dil = conv->attr_ints("dilations", {1, 1});
  // What the step will read: the model's float input itself while nothing has cast it (nchw_source).
  const DType x_dtype = cx.pending_cast.count(X) ? X->dtype() : cx.storage(X->dtype());
  using cutlass_backend::Act;
  const std::optional<cutlass_backend::EpilogueSpec> epi = cutlass_backend::parse_epilogue(epilogue);
  std::string why;
  if (res) why = "a residual, which the kernel does not add";
  else if (groups != 1) why = "groups = " + std::to_string(groups);
  else if (!cutlass_backend::im2col_shape(C, R, S))
    why = "C = " + std::to_string(C) + ", R*S*C = " + std::to_string(rsc) + ": im2col_shape refuses it";
  else if (!epi || epi->residual != cutlass_backend::Residual::none ||
           (epi->act != Act::none && epi->act != Act::relu && epi->act != Act::relu6))
    why = "epilogue " + epilogue + ": the kernel applies a bias and relu or relu6 only";
  else why = native::stem_conv_unsupported(x_dtype, cx.o.dtype, C, R, S, K, cols, strides[0], strides[1], dil[0], dil[1]);
  if (!why.empty()) {
    cx.out.notes.push_back("conv " + conv->name() + " (" + n->name() + "): not one stem_conv kernel (" + why +
                         "); it runs as with --stem im2col");
    return false;
  }
  if (!cx.nhwc.count(n->output(0)))
    throw std::logic_error("lower: conv output '" + n->output(0)->name() + "' is not NHWC (invariant: assign_layouts)");
  runtime::StemConvParams p;
  static_cast<runtime::Im2colParams&>(p) = nchw_window_params(n, conv, X, C, R, S);
  p.k = ParamDim(K);
  p.dtype = std::string(ir::name(cx.o.dtype));
  p.epilogue = epilogue;
  if (epi->act != Act::none) p.clamp = runtime::ClampParam{0, epi->act == Act::relu6 ? 6 : INFINITY};
  const int x = nchw_source(cx, X);
  const int wt = packed_filter(cx, W, cols, "stem_conv", [&](int64_t r, int64_t s, int64_t c) {
    return native::stem_conv_column(C, S, r, s, c);
  });
  const int b = cx.tensor(bias);
  const std::string cols_text = "R*S*C = " + std::to_string(rsc) + " in " + std::to_string(cols) + " columns, " +
                                std::to_string(native::stem_conv_channel_pitch(C)) + " a tap";
  cx.step(n->name() + " (" + conv->name() + ", one stem_conv kernel, " + cols_text + ")", {x, wt, b},
          {cx.define(n->output(0))}, std::move(p));
  ++cx.stem_conv;
  cx.out.notes.push_back("conv " + conv->name() + " (" + n->name() +
                       "): one stem_conv kernel (im2col in shared memory + tensor-core MMA, " + cols_text +
                       ") reading " + X->name() + " in NCHW (--stem im2col: im2col + GEMM; --stem conv: the padded conv)");
  return true;
}

}  // namespace sabre::codegen::passes
