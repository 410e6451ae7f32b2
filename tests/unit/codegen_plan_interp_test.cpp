// A CPU interpreter of runtime plans (host loops with each step op's semantics from docs/RUNTIME.md,
// values rounded to each tensor's dtype), run on the plan lowered from bert_tiny and compared with
// the reference executor on the original model: the numerical check of the lowering without a GPU.
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

namespace sabre {
namespace {
// A step's params as the plan writes them; kept alive for the whole test run, so pointers into
// them stay valid.
[[maybe_unused]] const sabre::json::Value& pj(const sabre::runtime::Step& s) {
  static std::deque<sabre::json::Value> keep;
  keep.push_back(s.params_json());
  return keep.back();
}

namespace fs = std::filesystem;
using runtime::DimExpr;

struct Buf {
  std::vector<int64_t> dims;
  std::vector<double> v;
};

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

class Interp {
 public:
  Interp(const runtime::Plan& p, const std::vector<uint8_t>& w) : p_(p), w_(w), bufs_(p.tensors.size()) {}

  std::vector<Buf> run(const std::vector<Buf>& inputs) {
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

 private:
  int64_t dim(const json::Value* v) const {
    return v->is_number() ? static_cast<int64_t>(v->num()) : DimExpr::parse(v->str()).eval(dims_);
  }
  std::vector<int64_t> dims_list(const json::Value* v) const {
    std::vector<int64_t> out;
    for (const auto& x : v->arr()) out.push_back(dim(&x));
    return out;
  }
  Buf& in(const runtime::Step& s, size_t i) { return bufs_.at(s.inputs.at(i)); }
  Buf& out(const runtime::Step& s, size_t i = 0) { return bufs_.at(s.outputs.at(i)); }
  ir::DType dt(int t) const { return p_.tensors[t].dtype; }
  void finish(const runtime::Step& s) {
    for (int o : s.outputs)
      for (double& x : bufs_[o].v) x = round_to(dt(o), x);
  }

  void step(const runtime::Step& s) {
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

  void elementwise(const runtime::Step& s) {
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
        } else if (op == "constant") v = nd.get("alpha")->num();
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
        else if (op == "clip") v = std::min(std::max(A(), nd.get("alpha")->num()), nd.get("beta")->num());
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
        else if (!issue29_op(op, A, B, nd.get("alpha")->num(), nd.get("beta")->num(), v)) {
          ADD_FAILURE() << "the plan interpreter has no elementwise op " << op;
          return;
        }
        r[i] = static_cast<float>(v);  // chains compute in f32
      }
      y.v[e] = r[static_cast<size_t>(ch.get("outputs")->arr()[0].num())];
    }
  }

  void softmax(const runtime::Step& s) {
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

  void layernorm(const runtime::Step& s) {
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
  void embed_layernorm(const runtime::Step& s) {
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

  void gemm(const runtime::Step& s) {
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
  static double epilogue(const std::string& epi, double v, double bias, double res) {
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
  void conv(const runtime::Step& s) {
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
  void stem_conv(const runtime::Step& s) {
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

  void pool2d(const runtime::Step& s) {
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

  const runtime::Plan& p_;
  const std::vector<uint8_t>& w_;
  std::vector<Buf> bufs_;
  std::map<std::string, int64_t> dims_;
};

std::string model_path(const std::string& name) {
  if (fs::path(name).is_absolute()) return fs::exists(name) ? name : "";
  for (const std::string& dir : {std::string(SABRE_SOURCE_DIR) + "/models", std::string(SABRE_BINARY_DIR) + "/models"}) {
    std::string p = dir + "/" + name + ".onnx";
    if (fs::exists(p)) return p;
  }
  return "";
}

// A stand-in for the conv kernel picker: the CUTLASS conv naming, one tile for every problem.
std::string test_pick_conv(const codegen::ConvProblem& p) {
  if (p.groups != 1) throw std::invalid_argument("groups=" + std::to_string(p.groups) + ": no grouped conv kernels");
  return "sm80_conv_fprop_nhwc_" + p.dtype + "_" + p.dtype + "_f32_128x128x32_w64x64x32_s3_a" +
         std::to_string(p.alignment) + (p.epilogue == "linear" ? "" : "_" + p.epilogue);
}

// The plan `original` lowers to (canonicalize, partition, lower), run by the interpreter at
// `dims`, against the reference executor on `original`: relative L2 error per output.
// pick_conv unset: test_pick_conv.
void check_graph(const std::string& name, const ir::Graph& original, ir::DType dtype, double tol,
                 codegen::Lowered* lowered_out = nullptr, bool fuse_attention = false,
                 codegen::Stem stem = codegen::Stem::im2col, bool pointwise_gemm = true,
                 const codegen::ConvKernelPicker& pick_conv = nullptr);

void check_model(const std::string& name, ir::DType dtype, double tol, bool fuse_attention = false,
                 codegen::Lowered* lowered_out = nullptr) {
  std::string path = model_path(name);
  ASSERT_FALSE(path.empty()) << name;
  check_graph(name, onnx_frontend::import_model(path), dtype, tol, lowered_out, fuse_attention);
}

void check_graph(const std::string& name, const ir::Graph& original, ir::DType dtype, double tol,
                 codegen::Lowered* lowered_out, bool fuse_attention, codegen::Stem stem, bool pointwise_gemm,
                 const codegen::ConvKernelPicker& pick_conv) {
  ir::Graph g = partition::partition(codegen::canonicalize_model(original.clone(), fuse_attention),
                                     cutlass_backend::pattern_table()).graph;
  codegen::LowerOptions o;
  o.dtype = dtype;
  for (const std::string& sym : g.symbols()) o.ranges[sym] = {1, sym == "batch" ? 4 : 16};
  o.pick = [](const tune::GemmProblem& p) { return tune::pick_kernels(p, tune::PickOptions{}); };
  o.pick_conv = pick_conv ? pick_conv : test_pick_conv;
  o.fuse_attention = fuse_attention;
  o.stem = stem;
  o.pointwise_gemm = pointwise_gemm;
  codegen::Lowered low = codegen::lower(g, o);

  std::mt19937 rng(7);
  std::map<std::string, int64_t> dims = {{"batch", 2}, {"seq", 7}};
  std::map<std::string, ir::Tensor> ref_in;
  std::vector<Buf> plan_in;
  for (const ir::Value* v : original.inputs()) {
    std::vector<int64_t> shape;
    for (const ir::Dim& d : v->shape()) shape.push_back(*d.evaluate(dims));
    ir::Tensor t(v->dtype(), shape);
    Buf b{shape, {}};
    for (int64_t i = 0; i < t.numel(); ++i) {
      double x = v->name().find("mask") != std::string::npos ? ((i % shape.back()) < 3 ? 1 : double(rng() % 2))
                 : v->name().find("token_type") != std::string::npos ? double(rng() % 2)
                 : shape.size() == 4 && ir::is_float(v->dtype())  // images
                     ? double(int64_t(rng() % 2001) - 1000) / 1000.0
                     : double(rng() % 60);
      t.set_f64(i, x);
      b.v.push_back(x);
    }
    ref_in[v->name()] = t;
    plan_in.push_back(b);
  }
  std::vector<ir::Tensor> want = reference::run(original, ref_in);
  std::vector<Buf> got = Interp(low.plan, low.weights).run(plan_in);
  ASSERT_FALSE(want.empty()) << name;
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(got[o].dims, want[o].dims()) << "output " << o;
    double num = 0, den = 0;
    for (int64_t i = 0; i < want[o].numel(); ++i) {
      ASSERT_FALSE(std::isnan(got[o].v[i])) << "output " << o << " element " << i << " never written";
      double d = got[o].v[i] - want[o].get_f64(i);
      num += d * d;
      den += want[o].get_f64(i) * want[o].get_f64(i);
    }
    double err = std::sqrt(num / std::max(den, 1e-30));
    std::printf("%s %s output %zu: relative L2 error %.2e (tolerance %.0e)\n", name.c_str(),
                std::string(ir::name(dtype)).c_str(), o, err, tol);
    EXPECT_LT(err, tol) << name << " output " << o;
  }
  if (lowered_out) *lowered_out = std::move(low);
}

// Models exported from HuggingFace transformers (bench/models/export_hf.py writes them; too big
// to ship): SABRE_HF_MODELS=DIR runs DIR/bert_base.onnx and DIR/gpt2.onnx through the same check.
TEST(CodegenPlanInterp, HuggingFaceExportsMatchReference) {
  const char* dir = std::getenv("SABRE_HF_MODELS");
  if (!dir) GTEST_SKIP() << "set SABRE_HF_MODELS to the folder export_hf.py wrote";
  for (const char* m : {"bert_base", "gpt2"}) {
    std::string p = std::string(dir) + "/" + m + ".onnx";
    ASSERT_TRUE(fs::exists(p)) << p << " is missing: SABRE_HF_MODELS must name the folder export_hf.py wrote";
    SCOPED_TRACE(p);
    check_model(fs::absolute(p).string(), ir::DType::f16, 1e-2);
    // With attention fused: 12 attention steps, no permutes left (GPT-2's causal mask and the
    // Cast of its probabilities included), Q, K and V read in place from one projection (BERT's
    // three joined by merge_qkv, GPT-2's c_attn as exported), so no split step either.
    codegen::Lowered low;
    check_model(fs::absolute(p).string(), ir::DType::f16, 1e-2, true, &low);
    int attention = 0, permutes = 0, splits = 0, packed = 0;
    for (const auto& st : low.plan.steps) {
      attention += st.op == "attention", permutes += st.op == "permute", splits += st.op == "split";
      packed += st.op == "attention" && pj(st).get("offsets");
    }
    EXPECT_EQ(attention, 12);
    EXPECT_EQ(permutes, 0);
    EXPECT_EQ(splits, 0);
    EXPECT_EQ(packed, 12);
  }
}

// ---- NHWC inside conv regions (issue 7) ------------------------------------------------------

int count_steps(const runtime::Plan& p, const std::string& op) {
  int n = 0;
  for (const auto& s : p.steps) n += s.op == op;
  return n;
}
std::vector<int64_t> perm_of(const runtime::Step& s) {
  std::vector<int64_t> v;
  for (const auto& x : pj(s).get("perm")->arr()) v.push_back(static_cast<int64_t>(x.num()));
  return v;
}

ir::Value* random_const(ir::Graph& g, const std::string& name, std::vector<int64_t> dims, double scale, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1, 1);
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<float>(scale) * u(rng);
  return g.add_constant(name, ir::Tensor::from_f32(v, dims));
}

// x -> relu(conv1(x)+b1) = h -> h * scale[C,1,1] -> conv2(.)+b2 + h -> y: two conv regions, an
// elementwise op with a per-channel constant between them and a residual read by the second.
ir::Graph two_conv_graph(int64_t group2 = 1, int64_t C = 8) {
  std::mt19937 rng(11);
  ir::Graph g;
  g.name = "two_conv";
  ir::Value* x = g.add_input("x", {ir::DType::f32, {ir::Dim::symbol("batch"), ir::Dim(C), ir::Dim(6), ir::Dim(6)}, true});
  std::map<std::string, ir::AttrValue> conv_attrs = {{"kernel_shape", std::vector<int64_t>{3, 3}},
                                                      {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                                                      {"strides", std::vector<int64_t>{1, 1}}};
  ir::Node* c1 = g.add_node("Conv", {x, random_const(g, "w1", {C, C, 3, 3}, 0.2, rng), random_const(g, "b1", {C}, 0.5, rng)},
                            1, conv_attrs, "conv1");
  ir::Node* r1 = g.add_node("Relu", {c1->output(0)}, 1, {}, "relu1");
  ir::Node* m = g.add_node("Mul", {r1->output(0), random_const(g, "scale", {C, 1, 1}, 1.0, rng)}, 1, {}, "scale");
  auto attrs2 = conv_attrs;
  attrs2["group"] = group2;
  ir::Node* c2 = g.add_node("Conv", {m->output(0), random_const(g, "w2", {C, C / group2, 3, 3}, 0.2, rng),
                                     random_const(g, "b2", {C}, 0.5, rng)},
                            1, attrs2, "conv2");
  ir::Node* a = g.add_node("Add", {c2->output(0), r1->output(0)}, 1, {}, "residual");
  g.add_output(a->output(0));
  ir::infer_types(g);
  return g;
}

// The one nchw_to_nhwc step of a plan (a failure when there is not exactly one).
const runtime::Step* only_nchw_to_nhwc(const runtime::Plan& p) {
  const runtime::Step* found = nullptr;
  for (const auto& s : p.steps) {
    if (s.op != "nchw_to_nhwc") continue;
    EXPECT_EQ(found, nullptr) << "a second nchw_to_nhwc step: " << s.name;
    found = &s;
  }
  EXPECT_NE(found, nullptr) << "no nchw_to_nhwc step";
  return found;
}

// Fires: the conv chain runs NHWC with one conversion in (x, cast from f32 on the way: no cast
// step) and one permute out (y); the per-channel constant of the Mul between the convs is
// transposed at compile time, and the filters are KRSC. C = 8 needs no padding.
TEST(CodegenLayoutNhwc, TwoConvChainPermutesOnlyAtTheEdges) {
  codegen::Lowered low;
  check_graph("two_conv", two_conv_graph(), ir::DType::f16, 4e-3, &low);
  if (HasFatalFailure()) return;
  const auto& p = low.plan;
  EXPECT_EQ(count_steps(p, "conv"), 2);
  EXPECT_EQ(count_steps(p, "elementwise"), 1);
  EXPECT_EQ(low.layout_permutes, 2);
  const runtime::Step* in = only_nchw_to_nhwc(p);
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(in->inputs.at(0), p.inputs.at(0)) << "x enters NHWC straight from the f32 input";
  EXPECT_EQ(p.tensors[static_cast<size_t>(in->outputs.at(0))].dtype, ir::DType::f16);
  EXPECT_EQ(p.tensors[static_cast<size_t>(in->outputs.at(0))].shape.at(3).str(), "8") << "no padding";
  EXPECT_EQ(count_steps(p, "cast"), 1) << "only the output's; the input's is fused";
  std::vector<std::vector<int64_t>> perms;
  for (const auto& s : p.steps)
    if (s.op == "permute") perms.push_back(perm_of(s));
  ASSERT_EQ(perms.size(), 1u);
  EXPECT_EQ(perms[0], (std::vector<int64_t>{0, 3, 1, 2})) << "y leaves NCHW";
  for (const auto& n : low.notes) EXPECT_EQ(n.find("padded"), std::string::npos) << n;
  for (const auto& s : p.steps) {
    if (s.op != "conv") continue;
    const auto& w = p.tensors[static_cast<size_t>(s.inputs[1])];
    EXPECT_EQ(w.kind, runtime::TensorKind::weight);
    ASSERT_EQ(w.shape.size(), 4u);
    EXPECT_EQ(w.shape[3].str(), "8") << "KRSC filter";
    EXPECT_EQ(w.shape[1].str(), "3") << "KRSC filter";
    EXPECT_EQ(pj(s).get("dispatch")->arr().at(0).get("kernel")->str().rfind("sm80_conv_fprop_nhwc_f16", 0), 0u);
  }
  EXPECT_EQ(low.conv_kernels.size(), 2u) << "bias_relu and bias_res";
  // The output keeps the model's name and NCHW shape.
  const auto& out = p.tensors[static_cast<size_t>(p.outputs[0])];
  EXPECT_EQ(out.shape[1].str(), "8");
  EXPECT_EQ(out.shape[3].str(), "6");
}

// A grouped second conv that no regrouping fits to a tensor-core kernel (6 channels: 3 groups of 2,
// 2 of 3; dense, 6 breaks the 16-byte access) stays out of the conv table and runs on the native
// grouped kernel, in NHWC with the rest: the same values as the reference, the filter [K,C/G,R,S]
// as [R,S,C/G,K], still one permute in and one out. With 8 channels (4 groups of 2, 2 of 4) the
// regrouped dense conv runs on the conv kernels instead.
TEST(CodegenLayoutNhwc, GroupedConvRunsNativeInNhwc) {
  for (int64_t groups : {3, 2}) {
    codegen::Lowered low;
    check_graph("two_conv_grouped" + std::to_string(groups), two_conv_graph(groups, 6), ir::DType::f16, 4e-3, &low);
    if (HasFatalFailure()) return;
    EXPECT_EQ(count_steps(low.plan, "grouped_conv"), 1);
    EXPECT_EQ(count_steps(low.plan, "depthwise_conv"), 0);
    EXPECT_EQ(count_steps(low.plan, "conv"), 1);
    for (const auto& st : low.plan.steps)
      if (st.op == "grouped_conv") {
        EXPECT_EQ(pj(st).get("groups")->num(), double(groups));
        EXPECT_EQ(pj(st).get("k")->num(), 6.0);
        const auto& w = low.plan.tensors[static_cast<size_t>(st.inputs.at(1))];
        ASSERT_EQ(w.shape.size(), 4u);
        EXPECT_EQ(w.shape[2].str(), std::to_string(6 / groups));  // [R,S,C/G,K]
        EXPECT_EQ(w.shape[3].str(), "6");
      }
    EXPECT_EQ(low.layout_permutes, 2);
  }
  for (int64_t groups : {4, 2}) {
    codegen::Lowered low;
    check_graph("two_conv_regrouped" + std::to_string(groups), two_conv_graph(groups), ir::DType::f16, 4e-3, &low);
    if (HasFatalFailure()) return;
    EXPECT_EQ(count_steps(low.plan, "grouped_conv"), 0);
    EXPECT_EQ(count_steps(low.plan, "conv"), 2);
    for (const auto& st : low.plan.steps)
      if (st.op == "conv") EXPECT_EQ(pj(st).get("groups")->num(), 1.0);
  }
}

// A ResNeXt bottleneck (1x1, grouped 3x3 of 32 groups of 4 channels, 1x1): sabre compile regroups
// the 3x3 into 4 groups of 32 (block-diagonal filter), which the CUTLASS grouped kernels take: a conv
// step with groups 4 and a [K,R,S,32] filter on a grouped kernel, the same values as the reference.
TEST(CodegenLayoutNhwc, ResnextGroupedConvRunsOnGroupedKernels) {
  auto graph = [](int64_t width, int64_t groups) {
    std::mt19937 rng(12);
    ir::Graph g;
    g.name = "resnext_block";
    ir::Value* x = g.add_input("x", {ir::DType::f32, {ir::Dim::symbol("batch"), ir::Dim(16), ir::Dim(6), ir::Dim(6)}, true});
    std::map<std::string, ir::AttrValue> a1 = {{"kernel_shape", std::vector<int64_t>{1, 1}}};
    std::map<std::string, ir::AttrValue> a3 = {{"kernel_shape", std::vector<int64_t>{3, 3}},
                                               {"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"group", groups}};
    ir::Node* c1 = g.add_node("Conv", {x, random_const(g, "w1", {width, 16, 1, 1}, 0.3, rng),
                                       random_const(g, "b1", {width}, 0.5, rng)}, 1, a1, "conv1");
    ir::Node* r1 = g.add_node("Relu", {c1->output(0)}, 1, {}, "relu1");
    ir::Node* c2 = g.add_node("Conv", {r1->output(0), random_const(g, "w2", {width, width / groups, 3, 3}, 0.3, rng),
                                       random_const(g, "b2", {width}, 0.5, rng)}, 1, a3, "conv2");
    ir::Node* r2 = g.add_node("Relu", {c2->output(0)}, 1, {}, "relu2");
    ir::Node* c3 = g.add_node("Conv", {r2->output(0), random_const(g, "w3", {16, width, 1, 1}, 0.3, rng),
                                       random_const(g, "b3", {16}, 0.5, rng)}, 1, a1, "conv3");
    g.add_output(c3->output(0));
    ir::infer_types(g);
    return g;
  };
  const codegen::ConvKernelPicker analytic = [](const codegen::ConvProblem& p) {
    return codegen::analytic_conv_kernel(p, 90, codegen::ConvKernels::sm80);
  };
  {
    codegen::Lowered low;
    check_graph("resnext_32x4", graph(128, 32), ir::DType::f16, 4e-3, &low, false, codegen::Stem::im2col, true, analytic);
    if (HasFatalFailure()) return;
    EXPECT_EQ(count_steps(low.plan, "grouped_conv"), 0);
    int grouped = 0;
    for (const auto& st : low.plan.steps)
      if (st.op == "conv" && pj(st).get("groups")->num() != 1) {
        ++grouped;
        EXPECT_EQ(pj(st).get("groups")->num(), 4.0);
        const auto& w = low.plan.tensors[static_cast<size_t>(st.inputs.at(1))];
        ASSERT_EQ(w.shape.size(), 4u);
        EXPECT_EQ(w.shape[0].str(), "128");
        EXPECT_EQ(w.shape[3].str(), "32");  // [K,R,S,C/G] after regrouping
        for (const auto& e : pj(st).get("dispatch")->arr()) {
          auto spec = cutlass_backend::parse_conv_kernel_name(e.get("kernel")->str());
          ASSERT_TRUE(spec) << e.get("kernel")->str();
          EXPECT_TRUE(spec->config.grouped) << e.get("kernel")->str();
        }
      }
    EXPECT_EQ(grouped, 1);
  }
  {
    // 2 groups of 4: no divisor makes groups of 32, so the conv becomes dense (2x the work).
    codegen::Lowered low;
    check_graph("grouped_2x4", graph(8, 2), ir::DType::f16, 4e-3, &low, false, codegen::Stem::im2col, true, analytic);
    if (HasFatalFailure()) return;
    EXPECT_EQ(count_steps(low.plan, "grouped_conv"), 0);
    for (const auto& st : low.plan.steps)
      if (st.op == "conv") EXPECT_EQ(pj(st).get("groups")->num(), 1.0);
  }
}

// Refuses: a grouped conv whose weights are not constant has no kernel; lowering names it and why,
// and nothing is half-converted (the error lists it, no plan).
TEST(CodegenLayoutNhwc, GroupedConvWithRuntimeFilterIsRefusedWithReason) {
  ir::Graph g = two_conv_graph(2);
  ir::Node* c2 = nullptr;
  for (ir::Node* n : g.nodes())
    if (n->name() == "conv2") c2 = n;
  ASSERT_NE(c2, nullptr);
  ir::Value* wv = g.add_input("w2_runtime", {ir::DType::f32, {ir::Dim(8), ir::Dim(4), ir::Dim(3), ir::Dim(3)}, true});
  c2->set_input(1, wv);
  ir::infer_types(g);
  g = partition::partition(transform::canonicalize(std::move(g)), cutlass_backend::pattern_table()).graph;
  codegen::LowerOptions o;
  o.ranges = codegen::parse_dynamic("batch=1..4");
  o.pick = [](const tune::GemmProblem& p) { return tune::pick_kernels(p, tune::PickOptions{}); };
  o.pick_conv = test_pick_conv;
  try {
    codegen::lower(g, o);
    FAIL() << "a grouped conv with a runtime filter lowered";
  } catch (const codegen::UnsupportedError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("conv2 (Conv)"), std::string::npos) << m;
    EXPECT_NE(m.find("constant filters"), std::string::npos) << m;
  }
}

// A depthwise conv (group = channels) in the chain runs on the native depthwise kernel, in NHWC
// with the rest: the same values, still one permute in and one out.
TEST(CodegenLayoutNhwc, DepthwiseConvRunsNativeInNhwc) {
  codegen::Lowered low;
  check_graph("two_conv_depthwise", two_conv_graph(8), ir::DType::f16, 4e-3, &low);
  if (HasFatalFailure()) return;
  int depthwise = 0, permutes = 0;
  for (const auto& st : low.plan.steps) {
    depthwise += st.op == "depthwise_conv";
    permutes += st.op == "permute";
  }
  EXPECT_EQ(depthwise, 1);
  EXPECT_LE(permutes, 2);
}

// Nothing to do: a model without convs gets no permute from the layout assignment.
TEST(CodegenLayoutNhwc, BertHasNoLayoutPermutes) {
  std::string path = model_path("bert_tiny");
  ASSERT_FALSE(path.empty());
  ir::Graph g = partition::partition(transform::canonicalize(onnx_frontend::import_model(path)),
                                     cutlass_backend::pattern_table()).graph;
  codegen::LowerOptions o;
  o.ranges = codegen::parse_dynamic("batch=1..4,seq=1..16");
  o.pick = [](const tune::GemmProblem& p) { return tune::pick_kernels(p, tune::PickOptions{}); };
  o.pick_conv = test_pick_conv;
  codegen::Lowered low = codegen::lower(g, o);
  EXPECT_EQ(low.layout_permutes, 0);
  for (const auto& t : low.plan.tensors) EXPECT_EQ(t.name.find(".nhwc"), std::string::npos) << t.name;
}

// The generated ResNet block (Conv+BN+Relu, Conv+BN + residual + Relu, MaxPool,
// GlobalAveragePool, Flatten, Gemm): BatchNorm folded, both convs NHWC, pooling NHWC, one
// permute (the input) and none at the head: the pooled [N,1,1,C] is the same bytes as [N,C,1,1].
// Its 10-class FC head (N=10, not a multiple of 8 halves) runs on alignment-2 fallback kernels.
TEST(CodegenLayoutNhwc, ResnetBlockF16MatchesReference) {
  codegen::Lowered low;
  check_model("resnet_block", ir::DType::f16, 4e-3, false, &low);
  if (HasFatalFailure()) return;
  const auto& p = low.plan;
  EXPECT_EQ(count_steps(p, "conv"), 2);
  EXPECT_EQ(count_steps(p, "gemm"), 1);
  EXPECT_EQ(low.layout_permutes, 1);
  EXPECT_EQ(count_steps(p, "nchw_to_nhwc"), 1);
  EXPECT_EQ(count_steps(p, "permute"), 0);
  for (const auto& s : p.steps) {
    if (s.op == "pool2d" || s.op == "global_average_pool") {
      EXPECT_EQ(pj(s).get("layout")->str(), "nhwc") << s.name;
    }
    if (s.op == "conv") {
      EXPECT_NE(pj(s).get("epilogue")->str().find("bias"), std::string::npos) << "BatchNorm folded";
    }
  }
  ASSERT_FALSE(low.gemm_kernels.empty());
  for (const auto& k : low.gemm_kernels) EXPECT_NE(k.find("_a2_"), std::string::npos) << k;
}

// x [batch, c_in, 16, 16] f32 -> relu(conv 7x7/2 pad 3 (K=k1) + b) -> MaxPool 3x3/2 -> conv 3x3
// (K=8) + b -> y: ResNet's stem at toy size. nchw_reader: sigmoid(x) as a second output, a
// reader of x outside the conv region.
ir::Graph stem_graph(int64_t c_in, int64_t k1, bool nchw_reader = false) {
  std::mt19937 rng(5);
  ir::Graph g;
  g.name = "stem";
  ir::Value* x = g.add_input("images", {ir::DType::f32, {ir::Dim::symbol("batch"), ir::Dim(c_in), ir::Dim(16), ir::Dim(16)}, true});
  ir::Node* c1 = g.add_node("Conv", {x, random_const(g, "w1", {k1, c_in, 7, 7}, 0.3, rng), random_const(g, "b1", {k1}, 0.5, rng)},
                            1, {{"kernel_shape", std::vector<int64_t>{7, 7}}, {"pads", std::vector<int64_t>{3, 3, 3, 3}},
                                {"strides", std::vector<int64_t>{2, 2}}},
                            "stem_conv");
  ir::Node* r1 = g.add_node("Relu", {c1->output(0)}, 1, {}, "stem_relu");
  ir::Node* mp = g.add_node("MaxPool", {r1->output(0)}, 1,
                            {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                             {"strides", std::vector<int64_t>{2, 2}}},
                            "stem_pool");
  ir::Node* c2 = g.add_node("Conv", {mp->output(0), random_const(g, "w2", {8, k1, 3, 3}, 0.3, rng), random_const(g, "b2", {8}, 0.5, rng)},
                            1, {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}},
                            "conv2");
  g.add_output(c2->output(0));
  if (nchw_reader) {
    g.add_output(g.add_node("Sigmoid", {x}, 1, {}, "gate")->output(0));
  }
  ir::infer_types(g);
  return g;
}

// The i-th conv (or other `op`) step of a plan (the stem's convs run in graph order: 0 the stem, 1 conv2).
const runtime::Step* conv_step(const runtime::Plan& p, int i, const std::string& op = "conv") {
  int seen = 0;
  for (const auto& s : p.steps)
    if (s.op == op && seen++ == i) return &s;
  ADD_FAILURE() << "no " << op << " step " << i;
  return nullptr;
}
std::string kernel_of(const runtime::Step& s) { return pj(s).get("dispatch")->arr().at(0).get("kernel")->str(); }
int64_t num_param(const runtime::Step& s, const char* k) {
  const json::Value* v = pj(s).get(k);
  return v->is_number() ? static_cast<int64_t>(v->num()) : std::stoll(v->str());
}

// MobileNetV2's inverted residual at toy size, after BatchNorm folding, ReLU6 as torch exports it
// (Clip with constant bounds 0 and 6): x [batch,8,6,6] -> clip(conv 1x1 to 16 + b) -> clip(depthwise
// 3x3 + b) -> conv 1x1 to 8 + b + x. Weights large enough that both clamps at 6 engage.
ir::Graph inverted_residual_graph() {
  std::mt19937 rng(13);
  ir::Graph g;
  g.name = "inverted_residual";
  ir::Value* x = g.add_input("x", {ir::DType::f32, {ir::Dim::symbol("batch"), ir::Dim(8), ir::Dim(6), ir::Dim(6)}, true});
  ir::Value* lo = g.add_constant("relu6_min", ir::Tensor::from_f32({0.0f}, {}));
  ir::Value* hi = g.add_constant("relu6_max", ir::Tensor::from_f32({6.0f}, {}));
  using Ints = std::vector<int64_t>;
  ir::Node* e = g.add_node("Conv", {x, random_const(g, "w_expand", {16, 8, 1, 1}, 3.0, rng), random_const(g, "b_expand", {16}, 0.5, rng)},
                           1, {{"kernel_shape", Ints{1, 1}}}, "expand");
  ir::Node* e6 = g.add_node("Clip", {e->output(0), lo, hi}, 1, {}, "expand_relu6");
  ir::Node* d = g.add_node("Conv", {e6->output(0), random_const(g, "w_dw", {16, 1, 3, 3}, 1.0, rng), random_const(g, "b_dw", {16}, 0.5, rng)},
                           1, {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}, {"group", int64_t{16}}}, "depthwise");
  ir::Node* d6 = g.add_node("Clip", {d->output(0), lo, hi}, 1, {}, "depthwise_relu6");
  ir::Node* p = g.add_node("Conv", {d6->output(0), random_const(g, "w_project", {8, 16, 1, 1}, 0.3, rng), random_const(g, "b_project", {8}, 0.5, rng)},
                           1, {{"kernel_shape", Ints{1, 1}}}, "project");
  ir::Node* y = g.add_node("Add", {p->output(0), x}, 1, {}, "residual");
  g.add_output(y->output(0));
  ir::infer_types(g);
  return g;
}

// Fires: the expanding conv and its Clip(0, 6) are one conv step with the bias_relu6 epilogue (the
// depthwise conv reads its output directly: no clip step between), the projection keeps bias_res,
// the depthwise conv's Clip runs in the native depthwise step (clamp [0, 6]; the projection reads
// its output directly), and the plan computes the block. Both 1x1 convs are "gemm" steps over their
// NHWC tensors by default (LowerOptions::pointwise_gemm) and "conv" steps without it.
TEST(CodegenLayoutNhwc, InvertedResidualFusesRelu6IntoTheConv) {
  for (bool pointwise : {true, false}) {
    SCOPED_TRACE(pointwise ? "1x1 convs as GEMMs" : "1x1 convs on the conv kernels");
    const std::string op = pointwise ? "gemm" : "conv";
    codegen::Lowered low;
    check_graph("inverted_residual", inverted_residual_graph(), ir::DType::f16, 4e-3, &low, false, codegen::Stem::im2col, pointwise);
    if (HasFatalFailure()) return;
    const auto& p = low.plan;
    ASSERT_EQ(count_steps(p, op), 2);
    EXPECT_EQ(count_steps(p, pointwise ? "conv" : "gemm"), 0);
    EXPECT_EQ(low.pointwise_convs, pointwise ? 2 : 0);
    EXPECT_EQ(count_steps(p, "depthwise_conv"), 1);
    const runtime::Step* expand = conv_step(p, 0, op);
    const runtime::Step* project = conv_step(p, 1, op);
    ASSERT_TRUE(expand && project);
    EXPECT_EQ(pj(*expand).get("epilogue")->str(), "bias_relu6");
    EXPECT_NE(kernel_of(*expand).find("_bias_relu6"), std::string::npos) << kernel_of(*expand);
    EXPECT_EQ(pj(*project).get("epilogue")->str(), "bias_res");
    EXPECT_NE(kernel_of(*project).find("_bias_res"), std::string::npos) << kernel_of(*project);
    EXPECT_EQ(count_steps(p, "elementwise"), 0) << "both Clips are fused";
    if (pointwise) {  // A = X [n·h·w, C], B = the filter [K, C], the residual as it lies (NHWC)
      EXPECT_EQ(pj(*expand).get("m")->str(), "36*batch");
      EXPECT_EQ(num_param(*expand, "n"), 16);
      EXPECT_EQ(num_param(*expand, "k"), 8);
      EXPECT_EQ(pj(*expand).get("layout")->str(), "tn");
      EXPECT_EQ(num_param(*project, "n"), 8);
      EXPECT_EQ(num_param(*project, "k"), 16);
      EXPECT_EQ(num_param(*project, "beta"), 1);
      ASSERT_EQ(project->inputs.size(), 4u);
      EXPECT_GE(project->inputs.at(3), 0) << "the residual is the GEMM's R";
    }
    for (const auto& s : p.steps) {
      if (s.op == "depthwise_conv") {
        EXPECT_EQ(s.inputs.at(0), expand->outputs.at(0)) << "a step between the conv and the depthwise conv";
        EXPECT_EQ(project->inputs.at(0), s.outputs.at(0)) << "a step between the depthwise conv and the projection";
        const json::Value* cl = pj(s).get("clamp");
        ASSERT_NE(cl, nullptr);
        EXPECT_EQ(cl->dump(), "[0,6]");
      }
    }
  }
}

// The depthwise conv's activation: a Relu fuses as clamp [0, none]; a Clip with min above max is
// refused and stays an elementwise step; a depthwise conv read by two nodes keeps its Relu apart
// (nothing to fuse into one store).
TEST(CodegenLayoutNhwc, DepthwiseActivationFusion) {
  auto graph = [](const std::string& act, bool second_reader) {
    std::mt19937 rng(11);
    using Ints = std::vector<int64_t>;
    ir::Graph g;
    g.name = "dw_act";
    ir::Value* x = g.add_input("x", {ir::DType::f32, {ir::Dim::symbol("batch"), ir::Dim(16), ir::Dim(9), ir::Dim(11)}, true});
    ir::Node* d = g.add_node("Conv", {x, random_const(g, "w_dw", {16, 1, 3, 3}, 1.0, rng), random_const(g, "b_dw", {16}, 0.5, rng)},
                             1, {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}, {"group", int64_t{16}}}, "depthwise");
    ir::Node* a = nullptr;
    if (act == "relu") {
      a = g.add_node("Relu", {d->output(0)}, 1, {}, "relu");
    } else {  // Clip(x, 6, 0): min above max, every output is max; left to the elementwise kernel
      a = g.add_node("Clip", {d->output(0), g.add_constant("lo", ir::Tensor::from_f32({6.0f}, {})),
                              g.add_constant("hi", ir::Tensor::from_f32({0.0f}, {}))}, 1, {}, "clip");
    }
    ir::Node* p = g.add_node("Conv", {a->output(0), random_const(g, "w_p", {8, 16, 1, 1}, 0.3, rng), random_const(g, "b_p", {8}, 0.5, rng)},
                             1, {{"kernel_shape", Ints{1, 1}}}, "project");
    g.add_output(p->output(0));
    if (second_reader) g.add_output(d->output(0));
    ir::infer_types(g);
    return g;
  };
  {
    codegen::Lowered low;
    check_graph("dw_relu", graph("relu", false), ir::DType::f16, 4e-3, &low);
    if (HasFatalFailure()) return;
    EXPECT_EQ(count_steps(low.plan, "elementwise"), 0);
    for (const auto& s : low.plan.steps)
      if (s.op == "depthwise_conv") {
        ASSERT_NE(pj(s).get("clamp"), nullptr);
        EXPECT_EQ(pj(s).get("clamp")->dump(), "[0,null]");
      }
  }
  for (bool second : {false, true}) {
    const std::string act = second ? "relu" : "inverted_clip";
    codegen::Lowered low;
    check_graph("dw_" + act, graph(second ? "relu" : "clip", second), ir::DType::f16, 4e-3, &low);
    if (HasFatalFailure()) return;
    EXPECT_EQ(count_steps(low.plan, "elementwise"), 1) << act;
    for (const auto& s : low.plan.steps)
      if (s.op == "depthwise_conv") {
        EXPECT_EQ(pj(s).get("clamp"), nullptr) << act;
      }
  }
}

// Fires with the stem on the conv path (sabre compile --stem conv): the stem's C = 3 would take
// alignment-1 kernels; the images' conversion to NHWC writes 8 channels (5 of zeros) and casts
// f32 -> f16 on the way, the filter gets zero taps, the conv runs on alignment-8 kernels, the same
// values come out, and a note says what happened. The conv after the pool (C = 8 already) is untouched.
TEST(CodegenLayoutNhwc, StemConvChannelsPaddedAtTheBoundary) {
  codegen::Lowered low;
  check_graph("stem", stem_graph(3, 8), ir::DType::f16, 4e-3, &low, false, codegen::Stem::conv);
  if (HasFatalFailure()) return;
  const auto& p = low.plan;
  const runtime::Step* in = only_nchw_to_nhwc(p);
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(in->inputs.at(0), p.inputs.at(0)) << "reads the f32 images: the cast is fused";
  const auto& xt = p.tensors[static_cast<size_t>(in->outputs.at(0))];
  EXPECT_EQ(xt.dtype, ir::DType::f16);
  ASSERT_EQ(xt.shape.size(), 4u);
  EXPECT_EQ(xt.shape[3].str(), "8");
  EXPECT_NE(in->name.find("channels padded 3 -> 8"), std::string::npos) << in->name;
  EXPECT_EQ(count_steps(p, "cast"), 1) << "only the output's";
  const runtime::Step* stem = conv_step(p, 0);
  ASSERT_NE(stem, nullptr);
  EXPECT_EQ(stem->inputs.at(0), in->outputs.at(0));
  EXPECT_EQ(num_param(*stem, "c"), 8);
  EXPECT_NE(kernel_of(*stem).find("_a8"), std::string::npos) << kernel_of(*stem);
  // The KRSC filter [8,7,7,8]: the padding taps are zeros, the others the model's (none zero).
  const auto& wt = p.tensors[static_cast<size_t>(stem->inputs.at(1))];
  ASSERT_EQ(wt.kind, runtime::TensorKind::weight);
  std::vector<std::string> wshape;
  for (const auto& d : wt.shape) wshape.push_back(d.str());
  EXPECT_EQ(wshape, (std::vector<std::string>{"8", "7", "7", "8"}));
  ASSERT_EQ(wt.weight_bytes, size_t{8 * 7 * 7 * 8 * 2});
  ir::Tensor w(wt.dtype, {8, 7, 7, 8}, nullptr, low.weights.data() + wt.weight_offset);
  int zeros_in_pad = 0, zeros_in_data = 0;
  for (int64_t i = 0; i < w.numel(); ++i) (i % 8 >= 3 ? zeros_in_pad : zeros_in_data) += w.get_f64(i) == 0;
  EXPECT_EQ(zeros_in_pad, 8 * 7 * 7 * 5);
  EXPECT_EQ(zeros_in_data, 0);
  const runtime::Step* c2 = conv_step(p, 1);
  ASSERT_NE(c2, nullptr);
  EXPECT_EQ(num_param(*c2, "c"), 8);
  EXPECT_NE(kernel_of(*c2).find("_a8"), std::string::npos) << kernel_of(*c2);
  int notes = 0;
  for (const auto& n : low.notes)
    if (n.find("padded") != std::string::npos) {
      ++notes;
      EXPECT_NE(n.find(stem->name), std::string::npos) << n;
      EXPECT_NE(n.find("input channels padded 3 -> 8 at the NHWC boundary"), std::string::npos) << n;
      EXPECT_NE(n.find("alignment-1"), std::string::npos) << n;
    }
  EXPECT_EQ(notes, 1);
}

// The images also read in NCHW (sigmoid(x) as a second output), --stem conv: that reader gets
// the one cast of the images (the conversion reads whichever copy exists first), the stem still
// pads; both outputs match.
TEST(CodegenLayoutNhwc, StemPaddingWithAnNchwReaderOfTheImages) {
  codegen::Lowered low;
  check_graph("stem_nchw_reader", stem_graph(3, 8, true), ir::DType::f16, 4e-3, &low, false, codegen::Stem::conv);
  if (HasFatalFailure()) return;
  const auto& p = low.plan;
  const runtime::Step* in = only_nchw_to_nhwc(p);
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(p.tensors[static_cast<size_t>(in->outputs.at(0))].shape.at(3).str(), "8");
  EXPECT_EQ(num_param(*conv_step(p, 0), "c"), 8);
  int input_casts = 0;
  for (const auto& s : p.steps) input_casts += s.op == "cast" && s.inputs.at(0) == p.inputs.at(0);
  EXPECT_EQ(input_casts, 1) << "the NCHW reader's copy in the compute dtype";
}

// Fires (--stem conv with the real analytic picker): the stem padded 3 -> 8 runs on a few_channels
// kernel (GEMM K = 7·7·8 = 392, not 7·7·32 for the optimized iterator's 32-wide channel tiles), at
// every batch bucket; conv2 (C = 64 after the pool) is an ordinary conv and takes the optimized
// iterator; no im2col step. Random images: the values match the reference in f16 and bf16, and the
// note says the stem took the conv path on few_channels.
TEST(CodegenLayoutNhwc, StemConvOnFewChannelsKernels) {
  const codegen::ConvKernelPicker analytic = [](const codegen::ConvProblem& p) {
    return codegen::analytic_conv_kernel(p, 90);
  };
  for (ir::DType dt : {ir::DType::f16, ir::DType::bf16}) {
    SCOPED_TRACE(std::string(ir::name(dt)));
    codegen::Lowered low;
    check_graph("stem_few_channels", stem_graph(3, 64), dt, dt == ir::DType::f16 ? 4e-3 : 2.5e-2, &low, false,
                codegen::Stem::conv, true, analytic);
    if (HasFatalFailure()) return;
    const auto& p = low.plan;
    EXPECT_EQ(count_steps(p, "im2col"), 0);
    EXPECT_EQ(low.im2col_convs, 0);
    const runtime::Step* stem = conv_step(p, 0);
    const runtime::Step* c2 = conv_step(p, 1);
    ASSERT_TRUE(stem && c2);
    EXPECT_EQ(num_param(*stem, "c"), 8);
    EXPECT_EQ(num_param(*stem, "r"), 7);
    for (const auto& e : pj(*stem).get("dispatch")->arr())
      EXPECT_NE(e.get("kernel")->str().find("sm80_conv_fprop_few_channels_nhwc_"), std::string::npos) << e.get("kernel")->str();
    EXPECT_EQ(num_param(*c2, "c"), 64);
    for (const auto& e : pj(*c2).get("dispatch")->arr())
      EXPECT_EQ(e.get("kernel")->str().find("few_channels"), std::string::npos) << e.get("kernel")->str();
    int said = 0;
    for (const auto& n : low.notes)
      said += n.find("input channels padded 3 -> 8") != std::string::npos &&
              n.find("runs as a conv step (--stem conv) on sm80_conv_fprop_few_channels_") != std::string::npos &&
              n.find("(few_channels: GEMM K = R*S*C = 392, no padding to the tile's K)") != std::string::npos;
    EXPECT_EQ(said, 1);
  }
}

// Refuses: a C = 3 conv whose input is already NHWC (another conv's output) keeps the alignment-1
// kernels (padding would cost a pass of its own), and so does one whose K (3) breaks the access
// too; the images enter unpadded, no note. The values still match.
TEST(CodegenLayoutNhwc, NoChannelPaddingWhereTheBoundaryIsNotTheInputOrKIsUnaligned) {
  codegen::Lowered low;
  check_graph("stem_k3", stem_graph(3, 3), ir::DType::f16, 4e-3, &low);
  if (HasFatalFailure()) return;
  const auto& p = low.plan;
  const runtime::Step* in = only_nchw_to_nhwc(p);
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(p.tensors[static_cast<size_t>(in->outputs.at(0))].shape.at(3).str(), "3") << "K=3: not padded";
  const runtime::Step* stem = conv_step(p, 0);
  const runtime::Step* c2 = conv_step(p, 1);
  ASSERT_TRUE(stem && c2);
  EXPECT_EQ(num_param(*stem, "c"), 3);
  EXPECT_EQ(num_param(*c2, "c"), 3) << "X is the pool's NHWC output";
  EXPECT_NE(kernel_of(*stem).find("_a1"), std::string::npos) << kernel_of(*stem);
  EXPECT_NE(kernel_of(*c2).find("_a1"), std::string::npos) << kernel_of(*c2);
  for (const auto& n : low.notes) EXPECT_EQ(n.find("padded"), std::string::npos) << n;
}

const runtime::Step* only_step(const runtime::Plan& p, const std::string& op) {
  const runtime::Step* found = nullptr;
  for (const auto& s : p.steps) {
    if (s.op != op) continue;
    EXPECT_EQ(found, nullptr) << "a second " << op << " step: " << s.name;
    found = &s;
  }
  EXPECT_NE(found, nullptr) << "no " << op << " step";
  return found;
}
std::string dims_text(const runtime::TensorInfo& t) {
  std::string s;
  for (const auto& d : t.shape) s += (s.empty() ? "" : ",") + d.str();
  return s;
}
// The steps of kind `op` whose first input is tensor `t`.
int first_input_readers(const runtime::Plan& p, const std::string& op, int t) {
  int n = 0;
  for (const auto& s : p.steps) n += s.op == op && s.inputs.at(0) == t;
  return n;
}
// Weight `t` is a stem filter packed for im2col or stem_conv: [k, cols], zeros exactly in the
// columns no tap takes (the model's taps are none zero): for im2col (cp 0) the columns from rsc;
// for stem_conv (cp = stem_conv_channel_pitch(c)) the channels from c to cp of each tap, then the
// columns from rsc / c · cp.
void expect_packed_filter(const codegen::Lowered& low, int t, int64_t k, int64_t rsc, int64_t cols, int64_t c = 0,
                          int64_t cp = 0) {
  const auto& wt = low.plan.tensors[static_cast<size_t>(t)];
  ASSERT_EQ(wt.kind, runtime::TensorKind::weight);
  EXPECT_EQ(dims_text(wt), std::to_string(k) + "," + std::to_string(cols));
  ir::Tensor w(wt.dtype, {k, cols}, nullptr, low.weights.data() + wt.weight_offset);
  auto data = [&](int64_t col) { return cp ? col < rsc / c * cp && col % cp < c : col < rsc; };
  int64_t zeros_past = 0, zeros_in_data = 0;
  for (int64_t i = 0; i < w.numel(); ++i) (data(i % cols) ? zeros_in_data : zeros_past) += w.get_f64(i) == 0;
  EXPECT_EQ(zeros_past, k * (cols - rsc));
  EXPECT_EQ(zeros_in_data, 0);
}

// Fires (LowerOptions::stem im2col, the default): the stem (C = 3, 7x7: 147 columns) becomes an
// im2col step that reads the f32 images as they are (NCHW, cast on the way) into A [batch·64, 152]
// and a gemm step A·Bᵀ with B [8, 152] (the filter repacked, zero columns past 147), the conv's bias
// and relu, whose D is the stem's NHWC value; conv2 (C = 8, after the NHWC pool) stays a conv. No
// nchw_to_nhwc and no input cast: one conversion left, the output's. The same values come out, and
// the notes say what happened.
TEST(CodegenLayoutNhwc, StemConvAsIm2colGemm) {
  codegen::Lowered low;
  check_graph("stem_im2col", stem_graph(3, 8), ir::DType::f16, 4e-3, &low);
  if (HasFatalFailure()) return;
  const auto& p = low.plan;
  EXPECT_EQ(count_steps(p, "nchw_to_nhwc"), 0);
  EXPECT_EQ(count_steps(p, "conv"), 1) << "conv2";
  EXPECT_EQ(count_steps(p, "cast"), 1) << "only the output's";
  EXPECT_EQ(low.layout_permutes, 1) << "the output's permute";
  EXPECT_EQ(low.im2col_convs, 1);
  const runtime::Step* im = only_step(p, "im2col");
  const runtime::Step* gm = only_step(p, "gemm");
  ASSERT_TRUE(im && gm);
  EXPECT_NE(im->name.find("stem_conv (im2col, 147 -> 152 columns)"), std::string::npos) << im->name;
  EXPECT_EQ(im->inputs.at(0), p.inputs.at(0)) << "reads the f32 images";
  const auto& a = p.tensors[static_cast<size_t>(im->outputs.at(0))];
  EXPECT_EQ(a.kind, runtime::TensorKind::activation) << "an intermediate the planner places";
  EXPECT_EQ(a.dtype, ir::DType::f16);
  ASSERT_EQ(a.shape.size(), 2u);
  EXPECT_EQ(a.shape[0].eval({{"batch", 3}}), 3 * 8 * 8);
  EXPECT_EQ(a.shape[1].str(), "152");
  for (const char* k : {"c", "r", "s", "p", "q", "h", "w"}) EXPECT_TRUE(pj(*im).get(k)) << k;
  EXPECT_EQ(num_param(*im, "c"), 3);
  EXPECT_EQ(num_param(*im, "r"), 7);
  EXPECT_EQ(pj(*im).get("n")->str(), "batch");
  // The gemm: M = batch·P·Q (symbolic), N = K = 8, K = 152, "tn", the conv's epilogue; D is the
  // NHWC tensor the pool reads.
  EXPECT_EQ(gm->inputs.at(0), im->outputs.at(0));
  EXPECT_EQ(gm->inputs.at(3), -1) << "no residual";
  EXPECT_EQ(runtime::DimExpr::parse(pj(*gm).get("m")->str()).eval({{"batch", 5}}), 5 * 64);
  EXPECT_EQ(num_param(*gm, "n"), 8);
  EXPECT_EQ(num_param(*gm, "k"), 152);
  EXPECT_EQ(num_param(*gm, "lda"), 152);
  EXPECT_EQ(pj(*gm).get("layout")->str(), "tn");
  EXPECT_EQ(pj(*gm).get("epilogue")->str(), "bias_relu");
  EXPECT_FALSE(pj(*gm).get("dispatch")->arr().empty());
  EXPECT_EQ(dims_text(p.tensors[static_cast<size_t>(gm->outputs.at(0))]), "batch,8,8,8") << "NHWC [N,P,Q,K]";
  EXPECT_EQ(first_input_readers(p, "pool2d", gm->outputs.at(0)), 1);
  expect_packed_filter(low, gm->inputs.at(1), 8, 147, 152);  // B [8, 152]
  EXPECT_EQ(low.gemm_kernels.size(), 1u);
  EXPECT_EQ(low.conv_kernels.size(), 1u) << "conv2's only";
  int said = 0;
  for (const auto& n : low.notes) {
    said += n.find("conv stem_conv (cutlass_region") != std::string::npos &&
            n.find("im2col (147 -> 152 columns) + GEMM instead of a C-padded (3 -> 8) implicit-GEMM conv") != std::string::npos;
    if (n.rfind("NHWC inside conv regions", 0) == 0) {
      EXPECT_NE(n.find("1 NCHW<->NHWC conversion at the region edges, 1 conv reading NCHW through im2col"), std::string::npos) << n;
    }
    EXPECT_EQ(n.find("input channels padded"), std::string::npos) << n;
  }
  EXPECT_EQ(said, 1);
}

// The same in bf16, and with the images also read in NCHW (sigmoid(x) as a second output): that
// reader gets the one cast of the images, the im2col reads whichever copy exists when it runs;
// both outputs match.
TEST(CodegenLayoutNhwc, StemIm2colWithAnNchwReaderOfTheImagesBf16) {
  codegen::Lowered low;
  check_graph("stem_im2col_nchw_reader", stem_graph(3, 8, true), ir::DType::bf16, 2.5e-2, &low);
  if (HasFatalFailure()) return;
  const auto& p = low.plan;
  EXPECT_EQ(count_steps(p, "im2col"), 1);
  EXPECT_EQ(count_steps(p, "nchw_to_nhwc"), 0);
  int input_casts = 0;
  for (const auto& s : p.steps) input_casts += s.op == "cast" && s.inputs.at(0) == p.inputs.at(0);
  EXPECT_EQ(input_casts, 1) << "the NCHW reader's copy in the compute dtype";
}

// Nothing to do: C = 64 needs no padding, so the stem stays a conv reading the images through one
// unpadded nchw_to_nhwc.
TEST(CodegenLayoutNhwc, Im2colNothingToDoWhereCIsAligned) {
  codegen::Lowered low;
  check_graph("stem_c64", stem_graph(64, 8), ir::DType::f16, 4e-3, &low);
  if (HasFatalFailure()) return;
  EXPECT_EQ(count_steps(low.plan, "im2col"), 0);
  EXPECT_EQ(count_steps(low.plan, "conv"), 2);
  EXPECT_EQ(low.im2col_convs, 0);
  const runtime::Step* in = only_nchw_to_nhwc(low.plan);
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(low.plan.tensors[static_cast<size_t>(in->outputs.at(0))].shape.at(3).str(), "64");
  EXPECT_EQ(num_param(*conv_step(low.plan, 0), "c"), 64);
}

// x [batch,3,12,12] -> one conv region read straight from the images: `kind` "residual" adds a
// second input [batch,8,12,12] (conv + bias + residual), "depthwise" is group = 3 (one 3x3 filter
// per channel), "wide" a 19x19 filter (3·19·19 = 1083 columns > 1024), "11x11" an 11x11 filter
// (363 columns: im2col takes it, stem_conv's 256 do not).
ir::Graph one_conv_graph(const std::string& kind) {
  std::mt19937 rng(13);
  ir::Graph g;
  g.name = "one_conv_" + kind;
  const ir::Shape xs = {ir::Dim::symbol("batch"), ir::Dim(3), ir::Dim(12), ir::Dim(12)};
  ir::Value* x = g.add_input("images", {ir::DType::f32, xs, true});
  const bool depthwise = kind == "depthwise", wide = kind == "wide";
  const int64_t k = depthwise ? 3 : 8, f = wide ? 19 : kind == "11x11" ? 11 : 3, pad = f / 2;
  std::map<std::string, ir::AttrValue> attrs = {{"kernel_shape", std::vector<int64_t>{f, f}},
                                                 {"pads", std::vector<int64_t>{pad, pad, pad, pad}}};
  if (depthwise) attrs["group"] = int64_t{3};
  ir::Node* c = g.add_node("Conv", {x, random_const(g, "w", {k, depthwise ? 1 : 3, f, f}, 0.3, rng), random_const(g, "b", {k}, 0.5, rng)},
                           1, attrs, "conv");
  ir::Value* y = c->output(0);
  if (kind == "residual") {
    ir::Value* r = g.add_input("skip", {ir::DType::f32, {ir::Dim::symbol("batch"), ir::Dim(8), ir::Dim(12), ir::Dim(12)}, true});
    y = g.add_node("Add", {y, r}, 1, {}, "add")->output(0);
  }
  g.add_output(g.add_node("Relu", {y}, 1, {}, "relu")->output(0));
  ir::infer_types(g);
  return g;
}

// Refuses: a conv with a residual (the GEMM path takes none), a grouped (depthwise) conv and one
// with more than 1024 columns are not lowered to im2col + GEMM; each runs as before (the padded
// conv, the native depthwise kernel) and matches the reference.
TEST(CodegenLayoutNhwc, Im2colRefusesResidualGroupedAndWideConvs) {
  for (const std::string kind : {"residual", "depthwise", "wide"}) {
    SCOPED_TRACE(kind);
    codegen::Lowered low;
    check_graph("one_conv_" + kind, one_conv_graph(kind), ir::DType::f16, 4e-3, &low);
    if (HasFatalFailure()) return;
    EXPECT_EQ(count_steps(low.plan, "im2col"), 0);
    EXPECT_EQ(count_steps(low.plan, "gemm"), 0);
    EXPECT_EQ(low.im2col_convs, 0);
    if (kind == "depthwise") {
      EXPECT_EQ(count_steps(low.plan, "depthwise_conv"), 1);
      continue;
    }
    const runtime::Step* conv = conv_step(low.plan, 0);
    ASSERT_NE(conv, nullptr);
    EXPECT_EQ(num_param(*conv, "c"), 8) << "padded 3 -> 8 as before";
    if (kind == "residual") {
      EXPECT_NE(pj(*conv).get("epilogue")->str().find("res"), std::string::npos);
    }
  }
}

// The generated cnn_stem model (scripts/make_models.py: ResNet's stem on [batch,3,32,32], BatchNorm
// folded): its stem runs as im2col + GEMM from the f32 images, and nothing in the plan converts
// between NCHW and NHWC (the pooled [N,1,1,C] head is a view); the plan matches the reference.
TEST(CodegenLayoutNhwc, CnnStemModelRunsItsStemAsIm2colGemm) {
  codegen::Lowered low;
  check_model("cnn_stem", ir::DType::f16, 4e-3, false, &low);
  if (HasFatalFailure()) return;
  const auto& p = low.plan;
  EXPECT_EQ(count_steps(p, "im2col"), 1);
  EXPECT_EQ(count_steps(p, "gemm"), 2) << "the stem and the head";
  EXPECT_EQ(count_steps(p, "conv"), 1);
  EXPECT_EQ(count_steps(p, "nchw_to_nhwc"), 0);
  EXPECT_EQ(count_steps(p, "permute"), 0);
  EXPECT_EQ(low.layout_permutes, 0);
  EXPECT_EQ(low.im2col_convs, 1);
  const runtime::Step* im = only_step(p, "im2col");
  ASSERT_NE(im, nullptr);
  EXPECT_EQ(im->inputs.at(0), p.inputs.at(0));
  EXPECT_NE(im->name.find("/conv1/Conv (im2col, 147 -> 152 columns)"), std::string::npos) << im->name;
}

// Layout propagation through Transposes and reductions (tests/golden/lower/assign_layouts/, every
// case): each plan computes what its graph does, in f16. ConvNeXt's block keeps the conv's NHWC
// bytes through its channels-last LayerNorm and Linear layers: no permute or conversion inside (one
// conversion in, one permute out at the graph's edges), the layer-scale's [C,1,1] constant stored
// [1,1,1,C]. A Transpose pair cancels (no step); a mean over H and W reads the NHWC tensor in place;
// a Transpose that is no NCHW/NHWC swap, or whose output is a model output, is one permute step
// reading the NHWC tensor.
TEST(CodegenLayoutNhwc, LayoutsPropagateThroughTransposesAndReductions) {
  transform::register_ops();
  const fs::path dir = fs::path(SABRE_SOURCE_DIR) / "tests" / "golden" / "lower" / "assign_layouts";
  std::map<std::string, codegen::Lowered> plans;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".ir") continue;
    std::ifstream f(e.path());
    std::stringstream text;
    text << f.rdbuf();
    ir::Graph g = ir::parse_graph(text.str());
    ir::infer_types(g);
    const std::string stem = e.path().stem().string();
    check_graph(stem, g, ir::DType::f16, 4e-3, &plans[stem]);
    if (HasFatalFailure()) return;
  }
  ASSERT_EQ(plans.count("fires_channels_last_block"), 1u);
  const runtime::Plan& block = plans["fires_channels_last_block"].plan;
  EXPECT_EQ(count_steps(block, "nchw_to_nhwc"), 1) << "x enters NHWC";
  EXPECT_EQ(count_steps(block, "permute"), 1) << "y leaves NHWC";
  EXPECT_EQ(plans["fires_channels_last_block"].layout_permutes, 2);
  EXPECT_EQ(count_steps(block, "layernorm"), 1);
  EXPECT_EQ(count_steps(block, "gemm"), 2);
  const runtime::Step* mul = only_step(block, "elementwise");
  ASSERT_NE(mul, nullptr);
  bool layer_scale = false;
  for (int t : mul->inputs) {
    const runtime::TensorInfo& ti = block.tensors[static_cast<size_t>(t)];
    if (ti.kind != runtime::TensorKind::weight) continue;
    layer_scale = true;
    ASSERT_EQ(ti.shape.size(), 4u) << ti.name;
    EXPECT_EQ(ti.shape[3].str(), "8") << ti.name << ": the per-channel constant broadcasts over NHWC's last dim";
    EXPECT_EQ(ti.shape[1].str(), "1") << ti.name;
  }
  EXPECT_TRUE(layer_scale) << "the Mul reads the layer scale";
  EXPECT_EQ(count_steps(plans["fires_transpose_pair_cancels"].plan, "permute"), 0);
  const runtime::Step* mean = only_step(plans["fires_reduce_mean_reads_nhwc"].plan, "reduce");
  ASSERT_NE(mean, nullptr);
  EXPECT_EQ(count_steps(plans["fires_reduce_mean_reads_nhwc"].plan, "permute"), 0);
  std::vector<int64_t> axes;
  for (const auto& a : pj(*mean).get("axes")->arr()) axes.push_back(static_cast<int64_t>(a.num()));
  EXPECT_EQ(axes, (std::vector<int64_t>{1, 2})) << "H and W of [N,H,W,C]";
  const runtime::Plan& swap = plans["refused_permute_not_a_swap"].plan;
  ASSERT_EQ(count_steps(swap, "permute"), 1) << "the Transpose reads the NHWC tensor, no conversion first";
  for (const auto& st : swap.steps)
    if (st.op == "permute") EXPECT_EQ(perm_of(st), (std::vector<int64_t>{0, 3, 2, 1})) << "[N,H,W,C] -> [N,C,W,H]";
  EXPECT_EQ(count_steps(plans["refused_transpose_is_a_model_output"].plan, "permute"), 1) << "no conversion first";
}

// ---- the stem as one stem_conv kernel (Stem::direct) ----------------------------------------------

// The shapes of a step's tensors at `dims`.
std::vector<int64_t> shape_at(const runtime::Plan& p, int t, const runtime::Dims& dims) {
  std::vector<int64_t> s;
  for (const auto& d : p.tensors[static_cast<size_t>(t)].shape) s.push_back(d.eval(dims));
  return s;
}
int notes_with(const codegen::Lowered& low, const std::string& text) {
  int n = 0;
  for (const auto& note : low.notes) n += note.find(text) != std::string::npos;
  return n;
}

// Fires (--stem direct): the stem (C = 3, 7x7/2: 147 columns) is one stem_conv step that reads the
// f32 images as they are (no cast, no nchw_to_nhwc), the filter packed with each tap's 3 channels
// padded to 4 (196 columns, rounded up to 208), the conv's bias, relu as clamp [0, null], and writes the
// NHWC tensor the pool reads: no im2col, no GEMM for it, nothing to pick. The runtime's
// stem_conv_geometry takes the step at batch 3, the values match the reference in f16 and bf16,
// and the notes say what happened.
TEST(CodegenLayoutNhwc, StemDirectIsOneStemConvStep) {
  for (ir::DType dt : {ir::DType::f16, ir::DType::bf16}) {
    SCOPED_TRACE(std::string(ir::name(dt)));
    codegen::Lowered low;
    check_graph("stem_direct", stem_graph(3, 8), dt, dt == ir::DType::f16 ? 4e-3 : 2.5e-2, &low, false,
                codegen::Stem::direct);
    if (HasFatalFailure()) return;
    const auto& p = low.plan;
    EXPECT_EQ(count_steps(p, "im2col"), 0);
    EXPECT_EQ(count_steps(p, "gemm"), 0);
    EXPECT_EQ(count_steps(p, "nchw_to_nhwc"), 0);
    EXPECT_EQ(count_steps(p, "conv"), 1) << "conv2";
    EXPECT_EQ(count_steps(p, "cast"), 1) << "only the output's";
    EXPECT_EQ(low.stem_convs, 1);
    EXPECT_EQ(low.im2col_convs, 0);
    EXPECT_TRUE(low.gemm_kernels.empty());
    const runtime::Step* sc = only_step(p, "stem_conv");
    ASSERT_NE(sc, nullptr);
    EXPECT_NE(sc->name.find("(stem_conv, one stem_conv kernel, R*S*C = 147 in 208 columns, 4 a tap)"), std::string::npos) << sc->name;
    ASSERT_EQ(sc->inputs.size(), 3u);
    EXPECT_EQ(sc->inputs[0], p.inputs.at(0)) << "reads the f32 images";
    EXPECT_EQ(p.tensors[static_cast<size_t>(sc->inputs[0])].dtype, ir::DType::f32);
    EXPECT_GE(sc->inputs[2], 0) << "the bias";
    EXPECT_EQ(num_param(*sc, "c"), 3);
    EXPECT_EQ(num_param(*sc, "r"), 7);
    EXPECT_EQ(num_param(*sc, "s"), 7);
    EXPECT_EQ(num_param(*sc, "k"), 8);
    EXPECT_EQ(pj(*sc).get("n")->str(), "batch");
    EXPECT_EQ(pj(*sc).get("dtype")->str(), ir::name(dt));
    EXPECT_EQ(pj(*sc).get("epilogue")->str(), "bias_relu");
    ASSERT_NE(pj(*sc).get("clamp"), nullptr);
    EXPECT_EQ(pj(*sc).get("clamp")->dump(), "[0,null]") << "relu: unbounded above";
    const auto& yt = p.tensors[static_cast<size_t>(sc->outputs.at(0))];
    EXPECT_EQ(dims_text(yt), "batch,8,8,8") << "NHWC [N,P,Q,K]";
    EXPECT_EQ(yt.dtype, dt);
    EXPECT_EQ(first_input_readers(p, "pool2d", sc->outputs.at(0)), 1);
    expect_packed_filter(low, sc->inputs[1], 8, 147, 208, 3, 4);  // w [8, 208]
    // The runtime takes the step as lowered (shapes, pads, relu as an upper-unbounded clamp).
    const runtime::Dims at3 = {{"batch", 3}};
    const runtime::StemConvGeometry g = runtime::stem_conv_geometry(
        *sc, at3, shape_at(p, sc->inputs[0], at3), shape_at(p, sc->inputs[1], at3), shape_at(p, sc->outputs[0], at3));
    EXPECT_EQ(g.n * g.cols, 3 * 208);
    EXPECT_TRUE(g.clamp.on && g.clamp.lo == 0.f && g.clamp.hi == INFINITY);
    EXPECT_EQ(notes_with(low, "conv stem_conv (cutlass_region"), 1);
    EXPECT_EQ(notes_with(low, "): one stem_conv kernel (im2col in shared memory + tensor-core MMA, R*S*C = 147 in 208 "
                              "columns, 4 a tap) reading images in NCHW (--stem im2col: im2col + GEMM; --stem conv: the padded conv)"),
              1);
    EXPECT_EQ(notes_with(low, "1 NCHW<->NHWC conversion at the region edges, 1 conv reading NCHW in one stem_conv kernel"), 1);
    EXPECT_EQ(notes_with(low, "input channels padded"), 0);
    EXPECT_EQ(notes_with(low, "not one stem_conv kernel"), 0);
  }
}

// The images also read in NCHW (sigmoid(x) as a second output), bf16: that reader gets the one
// cast of the images, the stem_conv reads whichever copy exists when it runs; both outputs match.
TEST(CodegenLayoutNhwc, StemDirectWithAnNchwReaderOfTheImagesBf16) {
  codegen::Lowered low;
  check_graph("stem_direct_nchw_reader", stem_graph(3, 8, true), ir::DType::bf16, 2.5e-2, &low, false,
              codegen::Stem::direct);
  if (HasFatalFailure()) return;
  const auto& p = low.plan;
  EXPECT_EQ(count_steps(p, "stem_conv"), 1);
  EXPECT_EQ(count_steps(p, "im2col"), 0);
  EXPECT_EQ(count_steps(p, "nchw_to_nhwc"), 0);
  int input_casts = 0;
  for (const auto& s : p.steps) input_casts += s.op == "cast" && s.inputs.at(0) == p.inputs.at(0);
  EXPECT_EQ(input_casts, 1) << "the NCHW reader's copy in the compute dtype";
}

// x [batch,3,16,16] f32 -> conv 3x3/2 pad 1 (K = 32) + b -> `act` -> y: MobileNetV2's stem at toy
// size. act "relu6" (Clip(0, 6) as torch exports it), "sigmoid", "silu" (x·sigmoid(x)) or ""
// (none). Weights large enough that the clamp at 6 engages.
ir::Graph mobile_stem_graph(const std::string& act) {
  std::mt19937 rng(17);
  ir::Graph g;
  g.name = "mobile_stem_" + act;
  ir::Value* x = g.add_input("images", {ir::DType::f32, {ir::Dim::symbol("batch"), ir::Dim(3), ir::Dim(16), ir::Dim(16)}, true});
  using Ints = std::vector<int64_t>;
  ir::Node* c = g.add_node("Conv", {x, random_const(g, "w", {32, 3, 3, 3}, 2.0, rng), random_const(g, "b", {32}, 0.5, rng)}, 1,
                           {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}, "stem_conv");
  ir::Value* y = c->output(0);
  if (act == "relu6") {
    y = g.add_node("Clip", {y, g.add_constant("relu6_min", ir::Tensor::from_f32({0.0f}, {})),
                            g.add_constant("relu6_max", ir::Tensor::from_f32({6.0f}, {}))},
                   1, {}, "relu6")->output(0);
  } else if (act == "sigmoid") {
    y = g.add_node("Sigmoid", {y}, 1, {}, "sigmoid")->output(0);
  } else if (act == "silu") {
    y = g.add_node("Mul", {y, g.add_node("Sigmoid", {y}, 1, {}, "sigmoid")->output(0)}, 1, {}, "silu")->output(0);
  }
  g.add_output(y);
  ir::infer_types(g);
  return g;
}

// Fires on MobileNetV2's stem (3x3/2, C = 3, K = 32: 27 taps in 48 columns) with its ReLU6 as
// clamp [0, 6], and without an activation (epilogue "bias", no clamp); the values match.
TEST(CodegenLayoutNhwc, StemDirectRelu6AndNoActivation) {
  for (const std::string act : {"relu6", ""}) {
    SCOPED_TRACE(act);
    codegen::Lowered low;
    check_graph("mobile_stem_direct_" + act, mobile_stem_graph(act), ir::DType::f16, 4e-3, &low, false,
                codegen::Stem::direct);
    if (HasFatalFailure()) return;
    const runtime::Step* sc = only_step(low.plan, "stem_conv");
    ASSERT_NE(sc, nullptr);
    EXPECT_EQ(count_steps(low.plan, "im2col") + count_steps(low.plan, "gemm") + count_steps(low.plan, "conv"), 0);
    EXPECT_EQ(num_param(*sc, "k"), 32);
    expect_packed_filter(low, sc->inputs.at(1), 32, 27, 48, 3, 4);
    EXPECT_EQ(pj(*sc).get("epilogue")->str(), act.empty() ? "bias" : "bias_relu6");
    if (act.empty()) {
      EXPECT_EQ(pj(*sc).get("clamp"), nullptr);
    } else {
      ASSERT_NE(pj(*sc).get("clamp"), nullptr);
      EXPECT_EQ(pj(*sc).get("clamp")->dump(), "[0,6]");
    }
    EXPECT_EQ(notes_with(low, "): one stem_conv kernel (im2col in shared memory + tensor-core MMA, R*S*C = 27 in 48 columns, 4 a tap)"), 1);
  }
}

// Refuses (--stem direct), each with a note saying why, and runs as --stem im2col has it: an
// epilogue the kernel does not apply (sigmoid, silu: im2col + GEMM with that epilogue), an 11x11
// filter (484 columns > 256: im2col + GEMM), a residual (neither takes it: the padded conv). The
// values match.
TEST(CodegenLayoutNhwc, StemDirectFallsBackToIm2col) {
  struct Case {
    std::string name;
    ir::Graph graph;
    std::string why;
    bool im2col;
  };
  std::vector<Case> cases;
  cases.push_back({"sigmoid", mobile_stem_graph("sigmoid"), "(epilogue bias_sigmoid: the kernel applies a bias and relu or relu6 only)", true});
  cases.push_back({"silu", mobile_stem_graph("silu"), "(epilogue bias_silu: the kernel applies a bias and relu or relu6 only)", true});
  cases.push_back({"11x11", one_conv_graph("11x11"),
                   "(stem_conv: 496 filter columns for R*S*CP = 484, it takes a multiple of 16 up to 256)", true});
  cases.push_back({"residual", one_conv_graph("residual"), "(a residual, which the kernel does not add)", false});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    codegen::Lowered low;
    check_graph("stem_direct_refused_" + c.name, c.graph, ir::DType::f16, 4e-3, &low, false, codegen::Stem::direct);
    if (HasFatalFailure()) return;
    EXPECT_EQ(count_steps(low.plan, "stem_conv"), 0);
    EXPECT_EQ(low.stem_convs, 0);
    EXPECT_EQ(count_steps(low.plan, "im2col"), c.im2col ? 1 : 0);
    EXPECT_EQ(low.im2col_convs, c.im2col ? 1 : 0);
    EXPECT_EQ(count_steps(low.plan, "conv"), c.im2col ? 0 : 1);
    EXPECT_EQ(notes_with(low, "): not one stem_conv kernel " + c.why + "; it runs as with --stem im2col"), 1);
  }
}

// sabre compile --tune collects its GEMM problems through lower (tuned_gemm_problems): with --stem
// im2col the stem's GEMM is among them, as every other GEMM is, and its conv problems are gone from
// the conv list; with --stem direct (the default: one native stem_conv step) the stem is in neither
// list; with the stem on the
// conv path (--stem conv) it is the other way round from im2col, and the stem's conv
// problem (C padded to 8) has few_channels kernels among its candidates, first.
TEST(CodegenLayoutNhwc, Im2colGemmIsTunedLikeTheOthers) {
  const ir::Graph g = partition::partition(codegen::canonicalize_model(stem_graph(3, 8), false),
                                           cutlass_backend::pattern_table()).graph;
  codegen::LowerOptions o;
  o.ranges = codegen::parse_dynamic("batch=1..8");
  o.pick_conv = [](const codegen::ConvProblem& p) { return codegen::analytic_conv_kernel(p, 90); };
  o.stem = codegen::Stem::im2col;
  std::vector<tune::GemmProblem> gemms = codegen::tuned_gemm_problems(g, o, 90);
  ASSERT_EQ(gemms.size(), 1u);
  EXPECT_EQ(gemms[0].layout, "tn");
  EXPECT_EQ(gemms[0].epilogue, "bias_relu");
  EXPECT_EQ(gemms[0].n, 8);
  EXPECT_EQ(gemms[0].k, 152);
  EXPECT_EQ(gemms[0].alignment, 8);
  EXPECT_EQ(gemms[0].m_min, 64);
  EXPECT_EQ(gemms[0].m_max, 8 * 64);
  std::set<int64_t> filters;
  for (const auto& c : codegen::tuned_conv_problems(g, o, 90)) filters.insert(c.r);
  EXPECT_EQ(filters, (std::set<int64_t>{3})) << "conv2 only, not the 7x7 stem";
  o.stem = codegen::LowerOptions{}.stem;  // the default, direct: nothing to tune for the stem
  EXPECT_EQ(o.stem, codegen::Stem::direct);
  EXPECT_TRUE(codegen::tuned_gemm_problems(g, o, 90).empty());
  filters.clear();
  for (const auto& c : codegen::tuned_conv_problems(g, o, 90)) filters.insert(c.r);
  EXPECT_EQ(filters, (std::set<int64_t>{3})) << "conv2 only, not the 7x7 stem";
  o.stem = codegen::Stem::conv;
  EXPECT_TRUE(codegen::tuned_gemm_problems(g, o, 90).empty());
  const std::vector<codegen::ConvProblem> convs = codegen::tuned_conv_problems(g, o, 90);
  EXPECT_EQ(convs.size(), 2u * 4) << "both convs at batch 1, 2, 4, 8";
  int stems = 0;
  for (const auto& c : convs) {
    if (c.r != 7) continue;
    ++stems;
    EXPECT_EQ(c.c, 8) << "padded 3 -> 8";
    EXPECT_EQ(c.alignment, 8);
    tune::ProfileOptions po;
    po.target_sm = 90;
    const std::vector<tune::ConvCandidate> cands = tune::conv_candidates(c, po, tune::ConvKernels::automatic);
    ASSERT_FALSE(cands.empty());
    EXPECT_NE(cands.front().name.find("_few_channels_"), std::string::npos) << "batch " << c.n << ": " << cands.front().name;
  }
  EXPECT_EQ(stems, 4);
}

// The 1x1 convs run as GEMMs are tuned as GEMMs: sabre tune and compile --tune collect them
// among the GEMM problems (M = batch·h·w over the batch range) and not among the conv problems;
// with pointwise_gemm off they are conv problems again, one per batch bucket.
TEST(CodegenLayoutNhwc, PointwiseGemmsAreTunedAsGemms) {
  const ir::Graph g = partition::partition(codegen::canonicalize_model(inverted_residual_graph(), false),
                                           cutlass_backend::pattern_table()).graph;
  codegen::LowerOptions o;
  o.ranges = codegen::parse_dynamic("batch=1..8");
  o.pick_conv = [](const codegen::ConvProblem& p) { return codegen::analytic_conv_kernel(p, 90); };
  std::vector<tune::GemmProblem> gemms = codegen::tuned_gemm_problems(g, o, 90);
  ASSERT_EQ(gemms.size(), 2u);
  std::set<std::string> seen;
  for (const auto& p : gemms) {
    seen.insert(p.epilogue + " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k));
    EXPECT_EQ(p.layout, "tn");
    EXPECT_EQ(p.alignment, 8);
    EXPECT_EQ(p.m_min, 36);
    EXPECT_EQ(p.m_max, 8 * 36);
  }
  EXPECT_EQ(seen, (std::set<std::string>{"bias_relu6 n=16 k=8", "bias_res n=8 k=16"}));
  EXPECT_TRUE(codegen::tuned_conv_problems(g, o, 90).empty());
  o.pointwise_gemm = false;
  EXPECT_TRUE(codegen::tuned_gemm_problems(g, o, 90).empty());
  EXPECT_EQ(codegen::tuned_conv_problems(g, o, 90).size(), 2u * 4) << "both 1x1 convs at batch 1, 2, 4, 8";
}

// torchvision exports (bench/models/export_tv.py writes them): SABRE_TV_MODELS=DIR runs
// DIR/resnet50.onnx and DIR/mobilenet_v2.onnx (NHWC conv regions, depthwise convs) through the
// check, with the stem as im2col + GEMM (the default) and as one stem_conv step (--stem direct:
// ResNet-50's 7x7/2 with relu, MobileNetV2's 3x3/2 with relu6).
TEST(CodegenPlanInterp, TorchvisionExportsMatchReference) {
  const char* dir = std::getenv("SABRE_TV_MODELS");
  if (!dir) GTEST_SKIP() << "set SABRE_TV_MODELS to the folder export_tv.py wrote";
  // Both in f16: export_tv.py calibrates the BatchNorm variances, without which MobileNetV2's
  // activations underflow f16 (its docstring has the numbers).
  for (auto [m, dt, tol] : {std::tuple<const char*, ir::DType, double>{"resnet50", ir::DType::f16, 1e-2},
                            {"mobilenet_v2", ir::DType::f16, 1e-2}}) {
    std::string p = std::string(dir) + "/" + m + ".onnx";
    ASSERT_TRUE(fs::exists(p)) << p << " is missing: SABRE_TV_MODELS must name the folder export_tv.py wrote";
    const ir::Graph g = onnx_frontend::import_model(fs::absolute(p).string());
    for (codegen::Stem stem : {codegen::Stem::im2col, codegen::Stem::direct}) {
      const std::string name = p + " --stem " + std::string(codegen::stem_name(stem));
      SCOPED_TRACE(name);
      codegen::Lowered low;
      check_graph(name, g, dt, tol, &low, false, stem);
      EXPECT_EQ(count_steps(low.plan, "stem_conv"), stem == codegen::Stem::direct ? 1 : 0);
      EXPECT_EQ(count_steps(low.plan, "im2col"), stem == codegen::Stem::direct ? 0 : 1);
    }
  }
}

// The zoo's attention forms on the real exports (bench/zoo.py export writes them; too big to ship):
// SABRE_ZOO_MODELS=DIR runs DIR/onnx/NAME.onnx with attention fused against the reference, NAME from
// SABRE_ZOO_ATTENTION (comma-separated; default llama_gqa,clip_vit_b32,vit_b16), each attention
// layer one step (Llama's grouped-query heads after rotary and its causal mask included). Prints the
// plan's step count beside each output's error.
TEST(CodegenPlanInterp, ZooAttentionMatchesReference) {
  const char* dir = std::getenv("SABRE_ZOO_MODELS");
  if (!dir) GTEST_SKIP() << "set SABRE_ZOO_MODELS to the folder bench/zoo.py export wrote into";
  const char* names = std::getenv("SABRE_ZOO_ATTENTION");
  std::stringstream list(names ? names : "llama_gqa,clip_vit_b32,vit_b16");
  // Swin-T's 12 include its 5 shifted windows (bias + shift mask folded), Whisper's 1500 keys,
  // MobileViT-S's head dims 36/48/60.
  const std::map<std::string, int> layers = {{"llama_gqa", 4},        {"clip_vit_b32", 12}, {"vit_b16", 12},
                                             {"swin_t", 12},          {"bert_base", 12},    {"whisper_tiny_enc", 4},
                                             {"mobilevit_s", 9}};
  for (std::string m; std::getline(list, m, ',');) {
    const std::string p = std::string(dir) + "/onnx/" + m + ".onnx";
    ASSERT_TRUE(fs::exists(p)) << p << " is missing";
    SCOPED_TRACE(p);
    codegen::Lowered low;
    check_model(fs::absolute(p).string(), ir::DType::f16, 1e-2, true, &low);
    int attention = 0;
    for (const auto& st : low.plan.steps) attention += st.op == "attention";
    std::printf("%s: %zu steps, %d attention\n", m.c_str(), low.plan.steps.size(), attention);
    if (layers.count(m)) EXPECT_EQ(attention, layers.at(m)) << m;
  }
}

// --fuse-attention: bert_tiny's attention (head dim 32) becomes one step per layer, without the
// head permutes, reading Q, K and V in place from one joined projection GEMM (merge_qkv: one GEMM
// instead of three, no split step), and the plan still computes the model.
TEST(CodegenPlanInterp, BertTinyFusedAttentionMatchesReference) {
  codegen::Lowered plain, low;
  check_model("bert_tiny", ir::DType::f16, 4e-3, false, &plain);
  check_model("bert_tiny", ir::DType::f16, 4e-3, true, &low);
  int attention = 0, permutes = 0, softmax = 0, split = 0, gemms = 0, plain_gemms = 0;
  for (const auto& st : low.plan.steps) {
    attention += st.op == "attention";
    permutes += st.op == "permute";
    softmax += st.op == "softmax";
    split += st.op == "split";
    gemms += st.op == "gemm";
    if (st.op != "attention") continue;
    ASSERT_NE(pj(st).get("offsets"), nullptr) << st.name;
    EXPECT_EQ(st.inputs[0], st.inputs[1]) << "Q and K from one tensor";
    EXPECT_EQ(st.inputs[0], st.inputs[2]) << "Q and V from one tensor";
  }
  for (const auto& st : plain.plan.steps) plain_gemms += st.op == "gemm";
  EXPECT_EQ(attention, 2);
  EXPECT_EQ(permutes, 0);
  EXPECT_EQ(softmax, 0);
  EXPECT_EQ(split, 0);
  EXPECT_EQ(gemms, plain_gemms - 2 * 2 - 2 * 2) << "per layer: 3 projections joined, 2 batched GEMMs fused";
}

// transformers 5's mask, Where(Cast<bool>(attention_mask), 0, finfo(f32).min): the attention steps
// read the i64 mask (views of the input) and select the two values, so no step computes it; the
// plan still computes the model (random 0/1 masks: masking matters). bert_tiny's (1 - m) * -10000
// is not a select and keeps its step.
TEST(CodegenPlanInterp, BertTinyWhereMaskIsReadByTheAttention) {
  codegen::Lowered low, old_style;
  check_model("bert_tiny_where", ir::DType::f16, 4e-3, true, &low);
  int attention = 0, mask_steps = 0;
  for (const auto& st : low.plan.steps) {
    if (st.op == "elementwise")  // the pooler's Tanh is one; none reads the i64 mask
      for (int t : st.inputs) mask_steps += t >= 0 && low.plan.tensors[static_cast<size_t>(t)].dtype == ir::DType::i64;
    if (st.op != "attention") continue;
    ++attention;
    ASSERT_EQ(st.inputs.size(), 4u) << st.name;
    EXPECT_EQ(low.plan.tensors[static_cast<size_t>(st.inputs[3])].dtype, ir::DType::i64) << st.name;
    ASSERT_TRUE(pj(st).get("mask_true") && pj(st).get("mask_false")) << st.name;
    EXPECT_EQ(pj(st).get("mask_true")->num(), 0.0);
    EXPECT_EQ(pj(st).get("mask_false")->num(), double(std::numeric_limits<float>::lowest()));
  }
  EXPECT_EQ(attention, 2);
  EXPECT_EQ(mask_steps, 0) << "the mask's Where and casts ran as a step";
  check_model("bert_tiny", ir::DType::f16, 4e-3, true, &old_style);
  for (const auto& st : old_style.plan.steps) {
    if (st.op == "attention") {
      EXPECT_FALSE(pj(st).get("mask_true")) << st.name;
    }
  }
  // bf16 too (the select is the same; the plan's dtypes are not).
  check_model("bert_tiny_where", ir::DType::bf16, 2.5e-2, true);
}

// The fires_*.ir cases of a lowering pass's golden folder, parsed and typed, with their stems.
std::vector<std::pair<std::string, ir::Graph>> golden_fires_cases(const fs::path& dir) {
  std::vector<std::pair<std::string, ir::Graph>> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string stem = e.path().stem().string();
    if (e.path().extension() != ".ir" || stem.rfind("fires_", 0) != 0) continue;
    std::ifstream f(e.path());
    std::stringstream text;
    text << f.rdbuf();
    ir::Graph g = ir::parse_graph(text.str());
    ir::infer_types(g);
    out.emplace_back(stem, std::move(g));
  }
  return out;
}

// Attention as each exporter writes it (the fires cases of tests/golden/lower/fuse_attention: ViT/
// CLIP's double cast, Llama's grouped-query heads with rotary, SDPA's scale on Q and K, timm's
// gathered QKV, multi-query broadcast): one attention step each, and the plan computes what the
// graph does (the reference runs it unfused) at 7 queries and keys, in f16 and bf16.
TEST(CodegenPlanInterp, FusedAttentionFormsMatchReference) {
  transform::register_ops();
  const fs::path dir = fs::path(SABRE_SOURCE_DIR) / "tests" / "golden" / "lower" / "fuse_attention";
  int cases = 0;
  for (auto& [stem, g] : golden_fires_cases(dir)) {
    for (auto [dt, tol] : {std::pair{ir::DType::f16, 4e-3}, {ir::DType::bf16, 2.5e-2}}) {
      codegen::Lowered low;
      check_graph(stem, g, dt, tol, &low, true);
      int attention = 0;
      for (const auto& st : low.plan.steps) attention += st.op == "attention";
      EXPECT_EQ(attention, 1) << stem;
    }
    ++cases;
  }
  EXPECT_GE(cases, 6);
}

TEST(CodegenPlanInterp, BertTinyF16MatchesReference) { check_model("bert_tiny", ir::DType::f16, 4e-3); }
TEST(CodegenPlanInterp, BertTinyBf16MatchesReference) { check_model("bert_tiny", ir::DType::bf16, 2.5e-2); }
TEST(CodegenPlanInterp, Gpt2BlockF16MatchesReference) { check_model("gpt2_block", ir::DType::f16, 4e-3); }
// Its head dim is 16: fused since the kernel pads head dims (one attention step, causal).
TEST(CodegenPlanInterp, Gpt2BlockFusedHeadDim16MatchesReference) {
  codegen::Lowered low;
  check_model("gpt2_block", ir::DType::f16, 4e-3, true, &low);
  int attention = 0;
  for (const auto& st : low.plan.steps) attention += st.op == "attention";
  EXPECT_EQ(attention, 1);
}

// The elementwise ops issue 29 added (rotary Sin/Cos, Swin's Mod, MobileViT's Ceil, the rest of the
// math and activation ops) lower to fused elementwise chains, no other step, and compute what the
// reference does.
TEST(CodegenPlanInterp, Issue29ElementwiseOpsLowerToChains) {
  ir::Graph g;
  ir::Value* x = g.add_input("x", {ir::DType::f32, {ir::Dim::symbol("batch"), ir::Dim(4), ir::Dim(3), ir::Dim(5)}, true});
  auto c = [&](float v) { return g.add_constant("", ir::Tensor::scalar_f32(v)); };
  auto op = [&](const std::string& o, std::vector<ir::Value*> in, std::map<std::string, ir::AttrValue> a = {}) {
    return g.add_node(o, std::move(in), 1, std::move(a))->output(0);
  };
  auto sum = [&](std::vector<ir::Value*> v) {
    ir::Value* s = v[0];
    for (size_t i = 1; i < v.size(); ++i) s = op("Add", {s, v[i]});
    return s;
  };
  ir::Value* x3 = op("Mul", {x, c(3.f)});
  g.add_output(sum({op("Mul", {x, op("Cos", {x})}), op("Mul", {x3, op("Sin", {x})})}));
  g.add_output(sum({op("Mod", {op("Mul", {x, c(7.f)}), c(2.5f)}, {{"fmod", int64_t{1}}}),
                    op("Mod", {op("Mul", {x, c(7.f)}), c(-1.5f)}, {{"fmod", int64_t{1}}})}));
  g.add_output(sum({op("Ceil", {x3}), op("Floor", {x3}), op("Round", {x3}), op("Sign", {x})}));
  g.add_output(sum({op("Elu", {x3}, {{"alpha", 0.7}}), op("Selu", {x3}), op("Celu", {x3}, {{"alpha", 1.3}}),
                    op("Softplus", {x3}), op("Softsign", {x3}), op("Mish", {x3}),
                    op("ThresholdedRelu", {x}, {{"alpha", 0.2}}), op("Shrink", {x}, {{"lambd", 0.3}, {"bias", 0.1}})}));
  ir::Value* h = op("Mul", {x, c(0.5f)});
  g.add_output(sum({op("Tan", {x}), op("Asin", {h}), op("Acos", {h}), op("Atan", {x3}), op("Sinh", {x}),
                    op("Cosh", {x}), op("Asinh", {x3}), op("Acosh", {op("Add", {x, c(2.f)})}), op("Atanh", {h})}));
  // IsNaN of Log(x < 0), IsInf of 1/0 where Ceil(x) is 0: bool results selected by Where.
  ir::Value* nan_mask = op("IsNaN", {op("Log", {x})});
  ir::Value* inf_mask = op("IsInf", {op("Div", {c(1.f), op("Ceil", {x})})}, {{"detect_negative", int64_t{0}}});
  g.add_output(op("Add", {op("Where", {nan_mask, c(2.f), c(0.f)}), op("Where", {inf_mask, c(1.f), c(0.f)})}));
  std::vector<float> slope = {0.1f, -0.2f, 0.3f, 0.5f};
  g.add_output(op("PRelu", {x, g.add_constant("slope", ir::Tensor::from_f32(slope, {4, 1, 1}))}));
  ir::infer_types(g);
  codegen::Lowered low;
  check_graph("issue29_elementwise", g, ir::DType::f16, 5e-3, &low);
  for (const auto& s : low.plan.steps)
    EXPECT_TRUE(s.op == "elementwise" || s.op == "reshape" || s.name == "x.cast") << s.op << " step " << s.name;
}

// Each exporter's spelling of the activation after a depthwise conv (the fires cases of
// tests/golden/lower/fuse_depthwise_activation: SiLU in both operand orders, Swish with a scale,
// sigmoid, HardSwish, x·HardSigmoid(x), HardSigmoid, ReLU6) runs in the depthwise step (no
// elementwise step is left), and the plan computes what the graph does, in f16 and bf16.
TEST(CodegenPlanInterp, DepthwiseActivationFormsMatchReference) {
  transform::register_ops();
  const fs::path dir = fs::path(SABRE_SOURCE_DIR) / "tests" / "golden" / "lower" / "fuse_depthwise_activation";
  int cases = 0;
  for (auto& [stem, g] : golden_fires_cases(dir)) {
    for (auto [dt, tol] : {std::pair{ir::DType::f16, 4e-3}, {ir::DType::bf16, 2.5e-2}}) {
      codegen::Lowered low;
      check_graph(stem, g, dt, tol, &low);
      EXPECT_EQ(count_steps(low.plan, "depthwise_conv"), 1) << stem;
      EXPECT_EQ(count_steps(low.plan, "elementwise"), 0) << stem << ": the activation ran as a step";
    }
    ++cases;
  }
  EXPECT_GE(cases, 8);
}

// EfficientNet's MBConv block at toy size: expand 1x1 + SiLU, depthwise 3x3 + SiLU (in the step),
// squeeze-excite (pool, 1x1 + SiLU, 1x1 + sigmoid: GEMM epilogues), the scale, project 1x1 + x.
// The scale is the one elementwise step (fuse_se_scale: no GEMM kernel takes it as a prologue).
TEST(CodegenPlanInterp, SqueezeExciteBlockMatchesReference) {
  transform::register_ops();
  ir::Graph g = ir::parse_graph(R"(graph mbconv(%x: f32[batch,16,6,6]) -> (%y) {
    %we = const f32[32,16,1,1] @0101010101010101
    %be = const f32[32] @0202020202020202
    %wd = const f32[32,1,3,3] @0303030303030303
    %bd = const f32[32] @0404040404040404
    %w1 = const f32[8,32,1,1] @0505050505050505
    %b1 = const f32[8] @0606060606060606
    %w2 = const f32[32,8,1,1] @0707070707070707
    %b2 = const f32[32] @0808080808080808
    %wp = const f32[16,32,1,1] @0909090909090909
    %bp = const f32[16] @0a0a0a0a0a0a0a0a
    %e = Conv(%x, %we, %be) {kernel_shape=[1, 1]}
    %es = Sigmoid(%e)
    %ea = Mul(%e, %es)
    %d = Conv(%ea, %wd, %bd) {group=32, kernel_shape=[3, 3], pads=[1, 1, 1, 1]}
    %ds = Sigmoid(%d)
    %da = Mul(%ds, %d)
    %p = GlobalAveragePool(%da)
    %f1 = Conv(%p, %w1, %b1) {kernel_shape=[1, 1]}
    %f1s = Sigmoid(%f1)
    %f1a = Mul(%f1, %f1s)
    %f2 = Conv(%f1a, %w2, %b2) {kernel_shape=[1, 1]}
    %gate = Sigmoid(%f2)
    %m = Mul(%da, %gate)
    %pr = Conv(%m, %wp, %bp) {kernel_shape=[1, 1]}
    %y = Add(%pr, %x)
  })");
  ir::infer_types(g);
  codegen::Lowered low;
  check_graph("mbconv", g, ir::DType::f16, 4e-3, &low);
  EXPECT_EQ(count_steps(low.plan, "depthwise_conv"), 1);
  EXPECT_EQ(count_steps(low.plan, "elementwise"), 1) << "only the squeeze-excite scale";
  EXPECT_EQ(count_steps(low.plan, "gemm"), 4);
  for (const auto& st : low.plan.steps)
    if (st.op == "depthwise_conv") {
      const auto& p = st.as<runtime::DepthwiseConvParams>();
      ASSERT_TRUE(p.activation);
      EXPECT_EQ(p.activation->op, native::ConvAct::silu);
      EXPECT_FALSE(p.clamp);
    }
}

// The zoo's CNNs on the real exports (bench/zoo.py export writes them): SABRE_ZOO_MODELS=DIR runs
// DIR/onnx/NAME.onnx against the reference, NAME from SABRE_ZOO_CNN (comma-separated; default
// efficientnet_b0,regnet_y_400mf,mobilenet_v2): depthwise activations fused, squeeze-excite scales.
// RegNetY-400MF with random weights is ill-conditioned in f16 (bench/models/zoo_models.py: PyTorch's
// own fp16 output is far from its fp32), so it gets a wider tolerance than the others.
TEST(CodegenPlanInterp, ZooConvNetsMatchReference) {
  const char* dir = std::getenv("SABRE_ZOO_MODELS");
  if (!dir) GTEST_SKIP() << "set SABRE_ZOO_MODELS to the folder bench/zoo.py export wrote into";
  const char* names = std::getenv("SABRE_ZOO_CNN");
  std::stringstream list(names ? names : "efficientnet_b0,regnet_y_400mf,mobilenet_v2");
  for (std::string m; std::getline(list, m, ',');) {
    const std::string p = std::string(dir) + "/onnx/" + m + ".onnx";
    ASSERT_TRUE(fs::exists(p)) << p << " is missing";
    SCOPED_TRACE(p);
    codegen::Lowered low;
    check_model(fs::absolute(p).string(), ir::DType::f16, m == "regnet_y_400mf" ? 5e-2 : 1e-2, false, &low);
    std::printf("%s: %zu steps, %d elementwise, %d depthwise_conv\n", m.c_str(), low.plan.steps.size(),
                count_steps(low.plan, "elementwise"), count_steps(low.plan, "depthwise_conv"));
  }
}

// The data movement, reduction and normalization ops issue 29 lowers onto existing step kinds:
// DepthToSpace (both modes), SpaceToDepth and Tile as one strided_copy each, GlobalMaxPool and
// the L1/L2/LogSum/LogSumExp reductions and ArgMax/ArgMin as reduce steps, LogSoftmax as a softmax step, and Xor,
// Mean and CastLike inside elementwise chains, GatherElements, Trilu and CumSum on their own native
// steps. Each computes what the reference does.
TEST(CodegenPlanInterp, Issue29MovementAndReductionOpsLowerOntoExistingSteps) {
  ir::Graph g;
  ir::Value* x = g.add_input("x", {ir::DType::f32, {ir::Dim::symbol("batch"), ir::Dim(8), ir::Dim(4), ir::Dim(6)}, true});
  auto op = [&](const std::string& o, std::vector<ir::Value*> in, std::map<std::string, ir::AttrValue> a = {}) {
    return g.add_node(o, std::move(in), 1, std::move(a))->output(0);
  };
  auto ints = [&](std::vector<int64_t> v) {
    return g.add_constant("", ir::Tensor::from_i64(v, {static_cast<int64_t>(v.size())}));
  };
  g.add_output(op("DepthToSpace", {x}, {{"blocksize", int64_t{2}}}));
  g.add_output(op("DepthToSpace", {x}, {{"blocksize", int64_t{2}}, {"mode", std::string("CRD")}}));
  g.add_output(op("SpaceToDepth", {x}, {{"blocksize", int64_t{2}}}));
  g.add_output(op("Tile", {x, ints({1, 2, 1, 3})}));
  g.add_output(op("GlobalMaxPool", {x}));
  g.add_output(op("ReduceL1", {x, ints({1, 3})}, {{"keepdims", int64_t{0}}}));
  g.add_output(op("ReduceL2", {x, ints({2})}));
  ir::Value* pos = op("Add", {op("Mul", {x, x}), g.add_constant("", ir::Tensor::scalar_f32(0.5f))});
  g.add_output(op("ReduceLogSum", {pos, ints({3})}));
  g.add_output(op("ReduceLogSumExp", {x, ints({1, 2})}, {{"keepdims", int64_t{0}}}));
  g.add_output(op("LogSoftmax", {x}, {{"axis", int64_t{-1}}}));
  g.add_output(op("LogSoftmax", {x}, {{"axis", int64_t{0}}}));  // other axes: permuted around the step
  g.add_output(op("Softmax", {x}, {{"axis", int64_t{1}}}));
  // Ties: x's values are multiples of 1e-3, so an axis of 8 often repeats one.
  ir::Value* xr = op("Round", {op("Mul", {x, g.add_constant("", ir::Tensor::scalar_f32(3.f))})});
  g.add_output(op("ArgMax", {xr}, {{"axis", int64_t{1}}}));
  g.add_output(op("ArgMin", {xr}, {{"axis", int64_t{-1}}, {"keepdims", int64_t{0}}, {"select_last_index", int64_t{1}}}));
  ir::Value* zero = g.add_constant("", ir::Tensor::scalar_f32(0.f));
  ir::Value* y = op("Sin", {x});
  g.add_output(op("Where", {op("Xor", {op("Greater", {x, zero}), op("Greater", {y, zero})}), x, y}));
  g.add_output(op("Mean", {x, y, op("Cos", {x})}));
  // GatherElements with indices computed in the graph (negative ones too), Trilu both ways, CumSum.
  ir::Value* idx = op("Cast", {xr}, {{"to", std::string("i64")}});  // in [-3, 3] on an axis of 4
  g.add_output(op("GatherElements", {x, idx}, {{"axis", int64_t{2}}}));
  g.add_output(op("Trilu", {x, g.add_constant("", ir::Tensor::from_i64({-1}, {}))}, {{"upper", int64_t{0}}}));
  g.add_output(op("Trilu", {x, g.add_constant("", ir::Tensor::from_i64({2}, {}))}));
  g.add_output(op("CumSum", {x, g.add_constant("", ir::Tensor::from_i64({-1}, {}))}));
  g.add_output(op("CumSum", {x, g.add_constant("", ir::Tensor::from_i64({1}, {}))},
                  {{"exclusive", int64_t{1}}, {"reverse", int64_t{1}}}));
  g.add_output(op("CastLike", {op("Mul", {x, g.add_constant("", ir::Tensor::scalar_f32(3.f))}),
                               g.add_constant("", ir::Tensor::from_i64({0}, {1}))}));
  ir::infer_types(g);
  codegen::Lowered low;
  check_graph("issue29_movement_reductions", g, ir::DType::f16, 5e-3, &low);
  std::map<std::string, int> kinds;
  for (const auto& s : low.plan.steps) ++kinds[s.op];
  EXPECT_EQ(kinds["strided_copy"], 4);
  EXPECT_EQ(kinds["reduce"], 7);
  EXPECT_EQ(kinds["softmax"], 3);
  EXPECT_EQ(kinds["gather_elements"], 1);
  EXPECT_EQ(kinds["trilu"], 2);
  EXPECT_EQ(kinds["cumsum"], 2);
}

}  // namespace
}  // namespace sabre
