// The plan interpreter (plan_interp.h): each step op's semantics from docs/RUNTIME.md on host loops.
#include "plan_interp.h"

#include <gtest/gtest.h>

#include <deque>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "backends/cutlass/conv_spec.h"
#include "backends/cutlass/patterns.h"
#include "backends/native/stem_conv.h"
#include "codegen/compile.h"
#include "codegen/lower.h"
#include "frontend/onnx/importer.h"
#include "ir/infer.h"
#include "ir/printer.h"
#include "partition/partitioner.h"
#include "reference/reference.h"
#include "runtime/resolve.h"
#include "transform/canonicalize.h"
#include "tune/conv_tune.h"

namespace sabre::plan_interp {

const json::Value& pj(const runtime::Step& s) {
  static std::deque<sabre::json::Value> keep;
  keep.push_back(s.params_json());
  return keep.back();
}

namespace {
namespace fs = std::filesystem;
using runtime::DimExpr;

double round_to(ir::DType t, double x) {
  switch (t) {
    case ir::DType::f16: return ir::half_to_float(ir::float_to_half(static_cast<float>(x)));
    case ir::DType::bf16: return ir::bf16_to_float(ir::float_to_bf16(static_cast<float>(x)));
    case ir::DType::f32: return static_cast<float>(x);
    case ir::DType::boolean: return x != 0;
    default: return std::trunc(x);
  }
}

std::vector<int64_t> strides_of(const std::vector<int64_t>& d) {
  std::vector<int64_t> s(d.size(), 1);
  for (int i = static_cast<int>(d.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * d[i + 1];
  return s;
}
int64_t numel(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (auto x : d) n *= x;
  return n;
}
// Index into `in` (numpy-broadcast against out dims) of output element `i`.
int64_t bcast_index(int64_t i, const std::vector<int64_t>& out, const std::vector<int64_t>& in) {
  auto os = strides_of(out), is = strides_of(in);
  int64_t idx = 0;
  size_t off = out.size() - in.size();
  for (size_t d = 0; d < out.size(); ++d) {
    int64_t c = (i / os[d]) % out[d];
    if (d >= off && in[d - off] != 1) idx += c * is[d - off];
  }
  return idx;
}

// A chain node's alpha or beta as the plan writes it: a number, or "inf", "-inf", "nan" where it
// is not finite (JSON has no infinity), read as src/runtime/step_params.cpp reads it; absent: 0.
double chain_param(const json::Value& node, const char* k) {
  const json::Value* v = node.get(k);
  if (!v) return 0;
  if (!v->is_string()) return v->num();
  if (v->str() == "inf") return INFINITY;
  if (v->str() == "-inf") return -INFINITY;
  if (v->str() == "nan") return NAN;
  ADD_FAILURE() << "chain node param '" << k << "' is \"" << v->str() << "\", not a number, inf, -inf or nan";
  return NAN;
}

double gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
// The elementwise ops added for issue 29, with their ONNX formulas (EwOp docs in elementwise.h).
template <class FA, class FB>
bool issue29_op(const std::string& op, FA A, FB B, double alpha, double beta, double& v) {
  static const std::map<std::string, double (*)(double)> unary = {
      {"sin", [](double x) { return std::sin(x); }},     {"cos", [](double x) { return std::cos(x); }},
      {"tan", [](double x) { return std::tan(x); }},     {"asin", [](double x) { return std::asin(x); }},
      {"acos", [](double x) { return std::acos(x); }},   {"atan", [](double x) { return std::atan(x); }},
      {"sinh", [](double x) { return std::sinh(x); }},   {"cosh", [](double x) { return std::cosh(x); }},
      {"asinh", [](double x) { return std::asinh(x); }}, {"acosh", [](double x) { return std::acosh(x); }},
      {"atanh", [](double x) { return std::atanh(x); }}, {"ceil", [](double x) { return std::ceil(x); }},
      {"floor", [](double x) { return std::floor(x); }}, {"round", [](double x) { return std::nearbyint(x); }},
      {"softplus", [](double x) { return std::log1p(std::exp(x)); }},
      {"softsign", [](double x) { return x / (1 + std::fabs(x)); }},
      {"mish", [](double x) { return x * std::tanh(std::log1p(std::exp(x))); }},
      {"sign", [](double x) { return double((x > 0) - (x < 0)); }},
      {"isnan", [](double x) { return double(std::isnan(x)); }}};
  if (auto it = unary.find(op); it != unary.end()) v = it->second(A());
  else if (op == "elu") v = A() < 0 ? alpha * (std::exp(A()) - 1) : A();
  else if (op == "selu") v = beta * (A() <= 0 ? alpha * (std::exp(A()) - 1) : A());
  else if (op == "celu") v = std::max(0.0, A()) + std::min(0.0, alpha * (std::exp(A() / alpha) - 1));
  else if (op == "thresholded_relu") v = A() > alpha ? A() : 0;
  else if (op == "shrink") v = A() < -alpha ? A() + beta : A() > alpha ? A() - beta : 0;
  else if (op == "isinf") v = std::isinf(A()) && (A() < 0 ? alpha != 0 : beta != 0);
  else if (op == "fmod") v = std::fmod(A(), B());
  else if (op == "mod") v = A() - B() * std::floor(A() / B());
  else if (op == "prelu") v = A() < 0 ? A() * B() : A();
  else return false;
  return true;
}

double gelu_tanh(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
}  // namespace

std::vector<Buf> Interp::run(const std::vector<Buf>& inputs) {
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& b : inputs) shapes.push_back(b.dims);
  dims_ = p_.bind_dims(shapes);
  for (size_t i = 0; i < p_.tensors.size(); ++i) {
    const auto& t = p_.tensors[i];
    bufs_[i].dims.clear();
    for (const auto& d : t.shape) bufs_[i].dims.push_back(d.eval(dims_));
    bufs_[i].v.assign(numel(bufs_[i].dims), std::nan(""));  // poison
    if (t.kind == runtime::TensorKind::weight) {
      ir::Tensor c(t.dtype, bufs_[i].dims, nullptr, w_.data() + t.weight_offset);
      for (int64_t e = 0; e < c.numel(); ++e) bufs_[i].v[e] = c.get_f64(e);
    }
  }
  for (size_t i = 0; i < p_.inputs.size(); ++i) bufs_[p_.inputs[i]] = inputs[i];
  for (const auto& s : p_.steps) step(s);
  std::vector<Buf> out;
  for (int o : p_.outputs) out.push_back(bufs_[o]);
  return out;
}

int64_t Interp::dim(const json::Value* v) const {
  return v->is_number() ? static_cast<int64_t>(v->num()) : DimExpr::parse(v->str()).eval(dims_);
}

std::vector<int64_t> Interp::dims_list(const json::Value* v) const {
  std::vector<int64_t> out;
  for (const auto& x : v->arr()) out.push_back(dim(&x));
  return out;
}

void Interp::finish(const runtime::Step& s) {
  for (int o : s.outputs)
    for (double& x : bufs_[o].v) x = round_to(dt(o), x);
}

void Interp::step(const runtime::Step& s) {
  const std::string& op = s.op;
  const json::Value& P = pj(s);
  if (op == "attention") {
    Buf &q = in(s, 0), &k = in(s, 1), &v = in(s, 2), &o = out(s);
    const Buf* mask = s.inputs.size() > 3 ? &in(s, 3) : nullptr;
    int64_t B = dim(P.get("b")), H = dim(P.get("h")), SQ = dim(P.get("sq")), SK = dim(P.get("sk")), D = dim(P.get("d"));
    const int64_t G = P.get("kv_group") ? dim(P.get("kv_group")) : 1;  // query heads a K/V head serves
    auto qs = dims_list(P.get("q_stride")), ks = dims_list(P.get("k_stride")), vs = dims_list(P.get("v_stride")),
         os = dims_list(P.get("o_stride"));
    std::vector<int64_t> ms = mask ? dims_list(P.get("mask_stride")) : std::vector<int64_t>{0, 0, 0};
    // A window mask wrapping over the batch: [inner, outer stride] (fuse_attention_bias.cpp).
    std::vector<int64_t> mb = P.get("mask_batch") ? dims_list(P.get("mask_batch")) : std::vector<int64_t>{0, 0};
    auto mask_batch = [&](int64_t b) { return mb[0] ? b % mb[0] * ms[0] + b / mb[0] * mb[1] : b * ms[0]; };
    double scale = P.get("scale")->num();
    bool causal = P.get("causal")->boolean();
    // An i64 mask selects mask_true where nonzero, else mask_false (lower.cpp: select_masks).
    const bool select = mask && dt(s.inputs[3]) == ir::DType::i64;
    if (select) {
      EXPECT_TRUE(P.get("mask_true") && P.get("mask_false")) << s.name;
    }
    auto mask_at = [&](int64_t i) {
      const double m = mask->v[i];
      return select ? (m != 0 ? P.get("mask_true")->num() : P.get("mask_false")->num()) : m;
    };
    // Q, K and V at column offsets of one packed projection.
    std::vector<int64_t> off = P.get("offsets") ? dims_list(P.get("offsets")) : std::vector<int64_t>{0, 0, 0};
    EXPECT_EQ(off.size(), 3u);
    off.resize(3, 0);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < SQ; ++i) {
          std::vector<double> sc(SK);
          double mx = -INFINITY;
          for (int64_t j = 0; j < SK; ++j) {
            double acc = 0;
            for (int64_t c = 0; c < D; ++c)
              acc += q.v[off[0] + b * qs[0] + h * qs[1] + i * qs[2] + c] *
                     k.v[off[1] + b * ks[0] + h / G * ks[1] + j * ks[2] + c];
            acc = static_cast<float>(acc) * scale;
            if (mask) acc += mask_at(mask_batch(b) + h * ms[1] + i * ms[2] + j);
            if (causal && j > i + (SK - SQ)) acc = -INFINITY;
            sc[j] = acc;
            mx = std::max(mx, acc);
          }
          double sum = 0;
          for (double& x : sc) sum += (x = mx == -INFINITY ? 0 : std::exp(x - mx));
          for (double& x : sc) x = round_to(dt(s.outputs[0]), sum > 0 ? x / sum : 0);  // P is stored in the dtype
          for (int64_t c = 0; c < D; ++c) {
            double acc = 0;
            for (int64_t j = 0; j < SK; ++j) acc += sc[j] * v.v[off[2] + b * vs[0] + h / G * vs[1] + j * vs[2] + c];
            o.v[b * os[0] + h * os[1] + i * os[2] + c] = acc;
          }
        }
  } else if (op == "depthwise_conv" || op == "grouped_conv") {
    // NHWC x [n,h,w,c], filter [r,s,c/g,k] (depthwise: [r,s,c], g = k = c), y [n,p,q,k].
    Buf &x = in(s, 0), &w = in(s, 1), &y = out(s);
    const Buf* b = s.inputs.size() > 2 && s.inputs[2] >= 0 ? &in(s, 2) : nullptr;
    int64_t N = dim(P.get("n")), H = dim(P.get("h")), W = dim(P.get("w")), C = dim(P.get("c")), R = dim(P.get("r")),
            S = dim(P.get("s")), Pp = dim(P.get("p")), Q = dim(P.get("q"));
    const bool grouped = op == "grouped_conv";
    const int64_t K = grouped ? dim(P.get("k")) : C, G = grouped ? dim(P.get("groups")) : C;
    const int64_t CG = C / G, KG = K / G;
    auto pads = dims_list(P.get("pads")), st = dims_list(P.get("strides")), dl = dims_list(P.get("dilations"));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t p = 0; p < Pp; ++p)
        for (int64_t q = 0; q < Q; ++q)
          for (int64_t c = 0; c < K; ++c) {
            double acc = b ? b->v[c] : 0;
            for (int64_t r = 0; r < R; ++r)
              for (int64_t t = 0; t < S; ++t) {
                int64_t ih = p * st[0] - pads[0] + r * dl[0], iw = q * st[1] - pads[1] + t * dl[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                for (int64_t j = 0; j < CG; ++j)
                  acc += x.v[((n * H + ih) * W + iw) * C + (c / KG) * CG + j] * w.v[((r * S + t) * CG + j) * K + c];
              }
            if (const json::Value* ac = P.get("activation")) {  // a fused SiLU, sigmoid, hard swish or hard sigmoid
              const std::string f = ac->get("op")->str();
              const double al = ac->get("alpha")->num(), be = ac->get("beta")->num();
              const double hs = std::min(std::max(al * acc + be, 0.0), 1.0);
              acc = f == "silu" ? acc / (1 + std::exp(-al * acc)) : f == "sigmoid" ? 1 / (1 + std::exp(-acc))
                    : f == "hard_swish" ? acc * hs : f == "hard_sigmoid" ? hs : NAN;
            }
            if (const json::Value* cl = P.get("clamp")) {  // a fused Relu/Clip: [min, max], null unbounded
              if (!cl->arr()[0].is_null()) acc = std::max(acc, cl->arr()[0].num());
              if (!cl->arr()[1].is_null()) acc = std::min(acc, cl->arr()[1].num());
            }
            y.v[((n * Pp + p) * Q + q) * K + c] = acc;
          }
  } else if (op == "fill") {
    auto vals = dims_list(P.get("values"));
    Buf& y = out(s);
    for (size_t e = 0; e < y.v.size(); ++e) y.v[e] = double(vals.size() == 1 ? vals[0] : vals.at(e));
  } else if (op == "iota") {
    Buf& y = out(s);
    int64_t start = dim(P.get("start")), delta = dim(P.get("delta"));
    for (size_t e = 0; e < y.v.size(); ++e) y.v[e] = double(start + int64_t(e) * delta);
  } else if (op == "cast" || op == "copy" || op == "reshape") {
    out(s).v = in(s, 0).v;
  } else if (op == "elementwise") {
    elementwise(s);
  } else if (op == "gather") {
    Buf &x = in(s, 0), &idx = in(s, 1), &y = out(s);
    int64_t axis = dim(P.get("axis"));
    int64_t outer = numel({x.dims.begin(), x.dims.begin() + axis}), inner = numel({x.dims.begin() + axis + 1, x.dims.end()});
    int64_t n = static_cast<int64_t>(idx.v.size()), ax = x.dims[axis];
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < n; ++j) {
        int64_t k = static_cast<int64_t>(idx.v[j]);
        if (k < 0) k += ax;
        for (int64_t i = 0; i < inner; ++i) y.v[(o * n + j) * inner + i] = x.v[(o * ax + k) * inner + i];
      }
  } else if (op == "slice") {
    Buf &x = in(s, 0), &y = out(s);
    auto st = dims_list(P.get("starts")), ax = dims_list(P.get("axes")), sp = dims_list(P.get("steps"));
    std::vector<int64_t> start(x.dims.size(), 0), step(x.dims.size(), 1);
    for (size_t i = 0; i < ax.size(); ++i) {
      int64_t a = ax[i], b = st[i] < 0 ? st[i] + x.dims[a] : st[i];
      start[a] = std::clamp<int64_t>(b, 0, x.dims[a]);
      step[a] = sp[i];
    }
    auto xs = strides_of(x.dims), ys = strides_of(y.dims);
    for (int64_t e = 0; e < numel(y.dims); ++e) {
      int64_t src = 0;
      for (size_t d = 0; d < y.dims.size(); ++d) src += (start[d] + ((e / ys[d]) % y.dims[d]) * step[d]) * xs[d];
      y.v[e] = x.v[src];
    }
  } else if (op == "permute") {
    Buf &x = in(s, 0), &y = out(s);
    auto perm = dims_list(P.get("perm"));
    auto xs = strides_of(x.dims), ys = strides_of(y.dims);
    for (int64_t e = 0; e < numel(y.dims); ++e) {
      int64_t src = 0;
      for (size_t d = 0; d < y.dims.size(); ++d) src += ((e / ys[d]) % y.dims[d]) * xs[perm[d]];
      y.v[e] = x.v[src];
    }
  } else if (op == "nchw_to_nhwc") {
    // y [n,h,w,c_pad] from x [n,c,h,w], zeros in the padding channels; finish() rounds to y's dtype.
    Buf &x = in(s, 0), &y = out(s);
    const int64_t N = x.dims[0], C = x.dims[1], H = x.dims[2], W = x.dims[3], CP = y.dims.at(3);
    EXPECT_EQ(y.dims, (std::vector<int64_t>{N, H, W, CP})) << s.name;
    EXPECT_GE(CP, C) << s.name;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w)
          for (int64_t c = 0; c < CP; ++c)
            y.v[((n * H + h) * W + w) * CP + c] = c < C ? x.v[((n * C + c) * H + h) * W + w] : 0.0;
  } else if (op == "im2col") {
    // a [n·p·q, cols] from x [n,c,h,w]: column (r·S + s)·C + c, zeros in the padding and past r·s·c.
    Buf &x = in(s, 0), &a = out(s);
    const int64_t N = dim(P.get("n")), C = dim(P.get("c")), H = dim(P.get("h")), W = dim(P.get("w")),
                  R = dim(P.get("r")), S = dim(P.get("s")), Pp = dim(P.get("p")), Q = dim(P.get("q"));
    auto pads = dims_list(P.get("pads")), st = dims_list(P.get("strides")), dl = dims_list(P.get("dilations"));
    EXPECT_EQ(x.dims, (std::vector<int64_t>{N, C, H, W})) << s.name;
    ASSERT_EQ(a.dims.size(), 2u) << s.name;
    const int64_t cols = a.dims[1];
    EXPECT_EQ(a.dims[0], N * Pp * Q) << s.name;
    EXPECT_GE(cols, R * S * C) << s.name;
    for (int64_t row = 0; row < N * Pp * Q; ++row)
      for (int64_t col = 0; col < cols; ++col) {
        double v = 0;
        if (col < R * S * C) {
          const int64_t c = col % C, t = (col / C) % S, r = col / C / S;
          const int64_t n = row / (Pp * Q), ih = (row / Q) % Pp * st[0] - pads[0] + r * dl[0],
                        iw = row % Q * st[1] - pads[1] + t * dl[1];
          if (ih >= 0 && ih < H && iw >= 0 && iw < W) v = x.v[((n * C + c) * H + ih) * W + iw];
        }
        a.v[row * cols + col] = v;
      }
  } else if (op == "stem_conv") {
    stem_conv(s);
  } else if (op == "strided_copy") {
    Buf &x = in(s, 0), &y = out(s);
    auto str = dims_list(P.get("strides"));
    int64_t off = dim(P.get("offset"));
    auto ys = strides_of(y.dims);
    for (int64_t e = 0; e < numel(y.dims); ++e) {
      int64_t src = off;
      for (size_t d = 0; d < y.dims.size(); ++d) src += ((e / ys[d]) % y.dims[d]) * str[d];
      y.v[e] = x.v[src];
    }
  } else if (op == "split" || op == "concat") {
    // Both move blocks along one axis: outer index x (offset along axis + position) x inner.
    bool split = op == "split";
    int64_t axis = dim(P.get("axis"));
    const Buf& whole = split ? in(s, 0) : out(s);
    int64_t outer = numel({whole.dims.begin(), whole.dims.begin() + axis});
    int64_t inner = numel({whole.dims.begin() + axis + 1, whole.dims.end()});
    int64_t at = 0;
    size_t parts = split ? s.outputs.size() : s.inputs.size();
    for (size_t pi = 0; pi < parts; ++pi) {
      Buf& part = split ? out(s, pi) : in(s, pi);
      int64_t len = part.dims[axis];
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < len * inner; ++j) {
          double& w = const_cast<Buf&>(whole).v[(o * whole.dims[axis] + at) * inner + j];
          double& q = part.v[o * len * inner + j];
          if (split) q = w;
          else w = q;
        }
      at += len;
    }
  } else if (op == "softmax") {
    softmax(s);
  } else if (op == "layernorm") {
    layernorm(s);
  } else if (op == "embed_layernorm") {
    embed_layernorm(s);
  } else if (op == "gemm") {
    gemm(s);
  } else if (op == "conv") {
    conv(s);
  } else if (op == "pool2d") {
    pool2d(s);
  } else if (op == "global_average_pool") {
    Buf &x = in(s, 0), &y = out(s);
    bool nhwc = P.get("layout")->str() == "nhwc";
    int64_t N = x.dims[0], C = nhwc ? x.dims[3] : x.dims[1], H = nhwc ? x.dims[1] : x.dims[2], W = nhwc ? x.dims[2] : x.dims[3];
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c) {
        double sum = 0;
        for (int64_t h = 0; h < H; ++h)
          for (int64_t w = 0; w < W; ++w) sum += x.v[nhwc ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w];
        y.v[n * C + c] = sum / double(H * W);  // y is [N,C,1,1] or [N,1,1,C]: the same order
      }
  } else if (op == "reduce") {  // kind over axes (none: all), kept as size-1 axes or dropped, as y's rank says
    Buf &x = in(s, 0), &y = out(s);
    const std::string kind = P.get("kind")->str();
    std::vector<bool> red(x.dims.size(), P.get("axes")->arr().empty());
    for (int64_t a : dims_list(P.get("axes"))) red[size_t(a < 0 ? a + int64_t(x.dims.size()) : a)] = true;
    const bool arg = kind.rfind("arg", 0) == 0, arg_max = kind.rfind("argmax", 0) == 0;
    const bool arg_last = arg && kind.find("_last") != std::string::npos;
    const double init = kind == "max" || arg_max ? -INFINITY : kind == "min" || arg ? INFINITY : kind == "prod" ? 1 : 0;
    std::vector<double> acc(y.v.size(), init);
    std::vector<int64_t> count(y.v.size(), 0);
    const auto xs = strides_of(x.dims);
    for (int64_t i = 0; i < numel(x.dims); ++i) {
      int64_t o = 0, along = 0;  // along: the position on the (one) reduced axis, for argmax/argmin
      for (size_t a = 0; a < x.dims.size(); ++a) {
        const int64_t c = (i / xs[a]) % x.dims[a];
        if (!red[a]) o = o * x.dims[a] + c;  // a kept size-1 axis adds nothing to the index
        else along = c;
      }
      const double v = x.v[i];
      double& r = acc[size_t(o)];
      if (arg) {  // elements of one output come in axis order
        if ((arg_max ? v > r : v < r) || (arg_last && v == r)) {
          r = v;
          y.v[size_t(o)] = double(along);
        }
        continue;
      }
      r = kind == "max" ? std::max(r, v) : kind == "min" ? std::min(r, v) : kind == "prod" ? r * v
          : kind == "sum_square" || kind == "l2"                                        ? r + v * v
          : kind == "l1"                                                                ? r + std::fabs(v)
          : kind == "log_sum_exp"                                                       ? r + std::exp(v)
                                                                                         : r + v;
      ++count[size_t(o)];
    }
    for (size_t o = 0; o < acc.size() && !arg; ++o)
      y.v[o] = kind == "mean" ? acc[o] / double(count[o])
               : kind == "l2" ? std::sqrt(acc[o])
               : kind == "log_sum" || kind == "log_sum_exp" ? std::log(acc[o])
                                                            : acc[o];
  } else if (op == "gather_elements") {
    Buf &x = in(s, 0), &idx = in(s, 1), &y = out(s);
    const int64_t axis = dim(P.get("axis"));
    const auto ys = strides_of(y.dims), xs = strides_of(x.dims);
    for (int64_t e = 0; e < numel(y.dims); ++e) {
      int64_t a = int64_t(idx.v[e]), src = 0;
      if (a < 0) a += x.dims[axis];
      for (size_t d = 0; d < y.dims.size(); ++d) src += (int64_t(d) == axis ? a : (e / ys[d]) % y.dims[d]) * xs[d];
      y.v[e] = x.v[src];
    }
  } else if (op == "trilu") {
    Buf &x = in(s, 0), &y = out(s);
    const int64_t k = dim(P.get("k")), rows = x.dims[x.dims.size() - 2], cols = x.dims.back();
    const bool upper = P.get("upper")->boolean();
    for (int64_t e = 0; e < numel(x.dims); ++e) {
      const int64_t j = e % cols, i = (e / cols) % rows;
      y.v[e] = (upper ? j - i >= k : j - i <= k) ? x.v[e] : 0;
    }
  } else if (op == "cumsum") {
    Buf &x = in(s, 0), &y = out(s);
    const int64_t axis = dim(P.get("axis"));
    const bool excl = P.get("exclusive")->boolean(), rev = P.get("reverse")->boolean();
    const int64_t len = x.dims[axis], inner = strides_of(x.dims)[axis];
    for (int64_t line = 0; line < numel(x.dims) / len; ++line) {
      const int64_t base = line / inner * len * inner + line % inner;
      double acc = 0;
      for (int64_t t = 0; t < len; ++t) {
        const int64_t e = base + (rev ? len - 1 - t : t) * inner;
        if (excl) y.v[e] = acc;
        acc += x.v[e];
        if (!excl) y.v[e] = acc;
      }
    }
  } else {
    FAIL() << "the plan interpreter has no op " << op;
  }
  finish(s);
}

void Interp::elementwise(const runtime::Step& s) {
  const json::Value& ch = *pj(s).get("chain");
  const auto& nodes = ch.get("nodes")->arr();
  Buf& y = out(s);
  std::vector<double> r(nodes.size());
  for (int64_t e = 0; e < numel(y.dims); ++e) {
    for (size_t i = 0; i < nodes.size(); ++i) {
      const auto& nd = nodes[i];
      const std::string& op = nd.get("op")->str();
      auto A = [&] { return r[static_cast<size_t>(nd.get("a")->num())]; };
      auto B = [&] { return r[static_cast<size_t>(nd.get("b")->num())]; };
      auto C = [&] { return r[static_cast<size_t>(nd.get("c")->num())]; };
      double v;
      if (op == "input") {
        Buf& x = in(s, static_cast<size_t>(nd.get("a")->num()));
        v = x.v[bcast_index(e, y.dims, x.dims)];
      } else if (op == "constant") v = chain_param(nd, "alpha");
      else if (op == "add") v = A() + B();
      else if (op == "sub") v = A() - B();
      else if (op == "mul") v = A() * B();
      else if (op == "div") v = A() / B();
      else if (op == "pow") v = std::pow(A(), B());
      else if (op == "equal") v = A() == B();
      else if (op == "less") v = A() < B();
      else if (op == "greater") v = A() > B();
      else if (op == "less_equal") v = A() <= B();
      else if (op == "greater_equal") v = A() >= B();
      else if (op == "logical_and") v = A() != 0 && B() != 0;
      else if (op == "logical_or") v = A() != 0 || B() != 0;
      else if (op == "logical_not") v = A() == 0;
      else if (op == "clip") v = std::min(std::max(A(), chain_param(nd, "alpha")), chain_param(nd, "beta"));
      else if (op == "sigmoid") v = 1 / (1 + std::exp(-A()));
      else if (op == "neg") v = -A();
      else if (op == "exp") v = std::exp(A());
      else if (op == "log") v = std::log(A());
      else if (op == "sqrt") v = std::sqrt(A());
      else if (op == "erf") v = std::erf(A());
      else if (op == "tanh") v = std::tanh(A());
      else if (op == "relu") v = std::max(0.0, A());
      else if (op == "gelu_erf") v = gelu(A());
      else if (op == "gelu_tanh") v = gelu_tanh(A());
      else if (op == "where") v = A() != 0 ? B() : C();
      else if (op == "cast") v = round_to(*ir::parse_dtype(nd.get("dtype")->str()), A());
      else if (!issue29_op(op, A, B, chain_param(nd, "alpha"), chain_param(nd, "beta"), v)) {
        ADD_FAILURE() << "the plan interpreter has no elementwise op " << op;
        return;
      }
      r[i] = static_cast<float>(v);  // chains compute in f32
    }
    y.v[e] = r[static_cast<size_t>(ch.get("outputs")->arr()[0].num())];
  }
}

void Interp::softmax(const runtime::Step& s) {
  const json::Value& P = pj(s);
  Buf &x = in(s, 0), &y = out(s);
  int64_t b = dim(P.get("b")), h = dim(P.get("h")), q = dim(P.get("q")), cols = dim(P.get("cols"));
  double scale = P.get("scale")->num();
  bool causal = P.get("causal")->boolean();
  const Buf* mask = s.inputs.size() > 1 ? &in(s, 1) : nullptr;
  std::vector<int64_t> ms = mask ? dims_list(P.get("mask_stride")) : std::vector<int64_t>{0, 0, 0};
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t hi = 0; hi < h; ++hi)
      for (int64_t qi = 0; qi < q; ++qi) {
        int64_t row = ((bi * h + hi) * q + qi) * cols;
        std::vector<double> t(cols);
        double mx = -INFINITY;
        for (int64_t k = 0; k < cols; ++k) {
          double v = scale * x.v[row + k];
          if (mask) v += mask->v[bi * ms[0] + hi * ms[1] + qi * ms[2] + k];
          if (causal && k > qi) v = -INFINITY;
          t[k] = v;
          mx = std::max(mx, v);
        }
        double sum = 0;
        for (double v : t) sum += std::exp(v - mx);
        const bool log = P.get("log") && P.get("log")->boolean();  // LogSoftmax
        for (int64_t k = 0; k < cols; ++k) y.v[row + k] = log ? t[k] - mx - std::log(sum) : std::exp(t[k] - mx) / sum;
      }
}

void Interp::layernorm(const runtime::Step& s) {
  Buf& x = in(s, 0);
  Buf& g = in(s, 1);
  const Buf* beta = s.inputs[2] >= 0 ? &in(s, 2) : nullptr;
  const Buf* res = s.inputs[3] >= 0 ? &in(s, 3) : nullptr;
  Buf& y = out(s);
  int64_t rows = dim(pj(s).get("rows")), cols = dim(pj(s).get("cols"));
  double eps = pj(s).get("eps")->num();
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> v(cols);
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c) mean += (v[c] = x.v[r * cols + c] + (res ? res->v[r * cols + c] : 0));
    mean /= cols;
    for (double a : v) var += (a - mean) * (a - mean);
    var /= cols;
    for (int64_t c = 0; c < cols; ++c)
      y.v[r * cols + c] = (v[c] - mean) / std::sqrt(var + eps) * g.v[c] + (beta ? beta->v[c] : 0);
  }
  // f32_copy: the second output is y as stored (rounded to y's dtype), in f32.
  if (pj(s).get("f32_copy") && pj(s).get("f32_copy")->boolean()) {
    Buf& y32 = out(s, 1);
    for (size_t i = 0; i < y.v.size(); ++i) y32.v[i] = round_to(dt(s.outputs[0]), y.v[i]);
  }
}

// The sum of each term's table row (ids read at offset + sum_i c_i * strides[i]; negative ids
// count from the end, ids outside the table add zeros), then as layernorm.
void Interp::embed_layernorm(const runtime::Step& s) {
  Buf& g = in(s, 0);
  const Buf* beta = s.inputs[1] >= 0 ? &in(s, 1) : nullptr;
  Buf& y = out(s);
  const std::vector<int64_t> rd = dims_list(pj(s).get("row_dims")), off = dims_list(pj(s).get("offsets")),
                             st = dims_list(pj(s).get("strides"));
  const int64_t cols = dim(pj(s).get("cols")), rows = numel(rd);
  const size_t terms = (s.inputs.size() - 2) / 2;
  ASSERT_EQ(off.size(), terms);
  ASSERT_EQ(st.size(), terms * rd.size());
  double eps = pj(s).get("eps")->num();
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> v(cols, 0.0);
    for (size_t t = 0; t < terms; ++t) {
      const Buf& table = in(s, 2 + 2 * t);
      const Buf& ids = in(s, 3 + 2 * t);
      int64_t at = off[t], rem = r;
      for (size_t i = rd.size(); i-- > 0;) {
        at += (rem % rd[i]) * st[t * rd.size() + i];
        rem /= rd[i];
      }
      ASSERT_LT(at, static_cast<int64_t>(ids.v.size()));
      auto id = static_cast<int64_t>(ids.v[at]);
      const int64_t vocab = table.dims[0];
      if (id < 0) id += vocab;
      if (id < 0 || id >= vocab) continue;
      for (int64_t c = 0; c < cols; ++c) v[c] += table.v[id * cols + c];
    }
    double mean = 0, var = 0;
    for (double a : v) mean += a;
    mean /= cols;
    for (double a : v) var += (a - mean) * (a - mean);
    var /= cols;
    for (int64_t c = 0; c < cols; ++c)
      y.v[r * cols + c] = (v[c] - mean) / std::sqrt(var + eps) * g.v[c] + (beta ? beta->v[c] : 0);
  }
}

void Interp::gemm(const runtime::Step& s) {
  const json::Value& P = pj(s);
  Buf &a = in(s, 0), &b = in(s, 1), &d = out(s);
  const Buf* bias = s.inputs[2] >= 0 ? &in(s, 2) : nullptr;
  const Buf* res = s.inputs[3] >= 0 ? &in(s, 3) : nullptr;
  int64_t M = dim(P.get("m")), N = dim(P.get("n")), K = dim(P.get("k")), batch = dim(P.get("batch"));
  int64_t lda = dim(P.get("lda")), ldb = dim(P.get("ldb")), ldd = dim(P.get("ldd")), ldr = dim(P.get("ldr"));
  int64_t sa = dim(P.get("stride_a")), sb = dim(P.get("stride_b")), sd = dim(P.get("stride_d")), sr = dim(P.get("stride_r"));
  bool tn = P.get("layout")->str() == "tn";
  double alpha = P.get("alpha")->num(), beta = P.get("beta")->num();
  std::string epi = P.get("epilogue")->str();
  auto offset = [&](const char* key) { return P.get(key) ? dim(P.get(key)) : int64_t{0}; };
  const int64_t oa = offset("a_offset"), ob = offset("b_offset"), od = offset("d_offset"), orr = offset("r_offset");
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k)
          acc += a.v[oa + bi * sa + i * lda + k] *
                 (tn ? b.v[ob + bi * sb + j * ldb + k] : b.v[ob + bi * sb + k * ldb + j]);
        d.v[od + bi * sd + i * ldd + j] = epilogue(epi, alpha * static_cast<float>(acc), bias ? bias->v[j] : 0,
                                                   res ? beta * res->v[orr + bi * sr + i * ldr + j] : 0);
      }
}

// The epilogue after the accumulation, tokens in order (kernel_spec.h spelling, as gemm steps).
double Interp::epilogue(const std::string& epi, double v, double bias, double res) {
  std::stringstream ss(epi);
  std::string tok;
  while (std::getline(ss, tok, '_')) {
    if (tok == "bias") v += bias;
    else if (tok == "res") v += res;
    else if (tok == "gelu") v = gelu(v);
    else if (tok == "gelutanh") v = gelu_tanh(v);
    else if (tok == "relu") v = std::max(0.0, v);
    else if (tok == "relu6") v = std::min(std::max(0.0, v), 6.0);
    else if (tok == "sigmoid") v = 1 / (1 + std::exp(-v));
    else if (tok == "silu") v = v / (1 + std::exp(-v));
    else if (tok != "linear") ADD_FAILURE() << "the plan interpreter has no epilogue token " << tok;
  }
  return v;
}

// kernel_abi.h sabre_conv_args: X [n,h,w,c], filter [k,r,s,c/groups], Y and R [n,p,q,k].
void Interp::conv(const runtime::Step& s) {
  const json::Value& P = pj(s);
  Buf &x = in(s, 0), &f = in(s, 1), &y = out(s);
  const Buf* bias = s.inputs[2] >= 0 ? &in(s, 2) : nullptr;
  const Buf* res = s.inputs[3] >= 0 ? &in(s, 3) : nullptr;
  int64_t N = dim(P.get("n")), H = dim(P.get("h")), W = dim(P.get("w")), C = dim(P.get("c")), K = dim(P.get("k")),
          R = dim(P.get("r")), S = dim(P.get("s")), Pp = dim(P.get("p")), Q = dim(P.get("q"));
  auto pads = dims_list(P.get("pads")), st = dims_list(P.get("strides")), dl = dims_list(P.get("dilations"));
  int64_t G = dim(P.get("groups"));
  double alpha = P.get("alpha")->num(), beta = P.get("beta")->num();
  std::string epi = P.get("epilogue")->str();
  EXPECT_EQ(x.dims, (std::vector<int64_t>{N, H, W, C})) << s.name;
  EXPECT_EQ(f.dims, (std::vector<int64_t>{K, R, S, C / G})) << s.name;
  EXPECT_EQ(y.dims, (std::vector<int64_t>{N, Pp, Q, K})) << s.name;
  EXPECT_EQ(pads[0], pads[2]) << s.name;
  EXPECT_EQ(pads[1], pads[3]) << s.name;
  const int64_t cg = C / G, kg = K / G;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t p = 0; p < Pp; ++p)
      for (int64_t q = 0; q < Q; ++q)
        for (int64_t k = 0; k < K; ++k) {
          double acc = 0;
          const int64_t g = k / kg;
          for (int64_t r = 0; r < R; ++r) {
            int64_t ih = p * st[0] - pads[0] + r * dl[0];
            if (ih < 0 || ih >= H) continue;
            for (int64_t t = 0; t < S; ++t) {
              int64_t iw = q * st[1] - pads[1] + t * dl[1];
              if (iw < 0 || iw >= W) continue;
              for (int64_t c = 0; c < cg; ++c)
                acc += x.v[((n * H + ih) * W + iw) * C + g * cg + c] * f.v[((k * R + r) * S + t) * cg + c];
            }
          }
          int64_t o = ((n * Pp + p) * Q + q) * K + k;
          y.v[o] = epilogue(epi, alpha * static_cast<float>(acc), bias ? bias->v[k] : 0, res ? beta * res->v[o] : 0);
        }
}

// native::stem_conv (stem_conv.h): x [n,c,h,w] NCHW, w [k, cols] column stem_conv_column(r, s, c), y
// [n,p,q,k] NHWC; bias, then the clamp ([min, max], null unbounded, as depthwise_conv's).
void Interp::stem_conv(const runtime::Step& s) {
  const json::Value& P = pj(s);
  Buf &x = in(s, 0), &f = in(s, 1), &y = out(s);
  const Buf* bias = s.inputs.at(2) >= 0 ? &in(s, 2) : nullptr;
  const int64_t N = dim(P.get("n")), C = dim(P.get("c")), H = dim(P.get("h")), W = dim(P.get("w")),
                K = dim(P.get("k")), R = dim(P.get("r")), S = dim(P.get("s")), Pp = dim(P.get("p")), Q = dim(P.get("q"));
  auto pads = dims_list(P.get("pads")), st = dims_list(P.get("strides")), dl = dims_list(P.get("dilations"));
  const json::Value* cl = P.get("clamp");
  const double lo = cl && !cl->arr()[0].is_null() ? cl->arr()[0].num() : -INFINITY;
  const double hi = cl && !cl->arr()[1].is_null() ? cl->arr()[1].num() : INFINITY;
  EXPECT_EQ(x.dims, (std::vector<int64_t>{N, C, H, W})) << s.name;
  ASSERT_EQ(f.dims.size(), 2u) << s.name;
  const int64_t cols = f.dims[1];
  EXPECT_EQ(f.dims[0], K) << s.name;
  EXPECT_EQ(cols, native::stem_conv_cols(C, R, S)) << s.name;
  EXPECT_EQ(y.dims, (std::vector<int64_t>{N, Pp, Q, K})) << s.name;
  EXPECT_EQ(pads[0], pads[2]) << s.name;
  EXPECT_EQ(pads[1], pads[3]) << s.name;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t p = 0; p < Pp; ++p)
      for (int64_t q = 0; q < Q; ++q)
        for (int64_t k = 0; k < K; ++k) {
          double acc = 0;
          for (int64_t r = 0; r < R; ++r)
            for (int64_t t = 0; t < S; ++t) {
              const int64_t ih = p * st[0] - pads[0] + r * dl[0], iw = q * st[1] - pads[1] + t * dl[1];
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              for (int64_t c = 0; c < C; ++c)  // x rounded to y's dtype on the way in, as the kernel reads it
                acc += round_to(dt(s.outputs[0]), x.v[((n * C + c) * H + ih) * W + iw]) * f.v[k * cols + native::stem_conv_column(C, S, r, t, c)];
            }
          const double v = static_cast<float>(acc) + (bias ? bias->v[k] : 0);
          y.v[((n * Pp + p) * Q + q) * K + k] = std::min(std::max(v, lo), hi);
        }
}

void Interp::pool2d(const runtime::Step& s) {
  const json::Value& P = pj(s);
  Buf &x = in(s, 0), &y = out(s);
  bool nhwc = P.get("layout")->str() == "nhwc", mx = P.get("kind")->str() == "max";
  bool include_pad = P.get("count_include_pad")->boolean();
  auto ks = dims_list(P.get("kernel")), st = dims_list(P.get("stride")), dl = dims_list(P.get("dilation")),
       pads = dims_list(P.get("pads"));
  auto nchw = [&](const std::vector<int64_t>& d) {
    return nhwc ? std::vector<int64_t>{d[0], d[3], d[1], d[2]} : d;
  };
  auto xd = nchw(x.dims), yd = nchw(y.dims);
  auto at = [&](const std::vector<int64_t>& d, int64_t n, int64_t c, int64_t h, int64_t w) {
    return nhwc ? ((n * d[2] + h) * d[3] + w) * d[1] + c : ((n * d[1] + c) * d[2] + h) * d[3] + w;
  };
  for (int64_t n = 0; n < yd[0]; ++n)
    for (int64_t c = 0; c < yd[1]; ++c)
      for (int64_t p = 0; p < yd[2]; ++p)
        for (int64_t q = 0; q < yd[3]; ++q) {
          double acc = mx ? -INFINITY : 0;
          int64_t count = 0;
          for (int64_t r = 0; r < ks[0]; ++r)
            for (int64_t t = 0; t < ks[1]; ++t) {
              int64_t ih = p * st[0] - pads[0] + r * dl[0], iw = q * st[1] - pads[1] + t * dl[1];
              bool inside = ih >= 0 && ih < xd[2] && iw >= 0 && iw < xd[3];
              if (inside || include_pad) ++count;
              if (!inside) continue;
              double v = x.v[at(xd, n, c, ih, iw)];
              acc = mx ? std::max(acc, v) : acc + v;
            }
          y.v[at(yd, n, c, p, q)] = mx ? acc : acc / double(count);
        }
}

}  // namespace sabre::plan_interp
