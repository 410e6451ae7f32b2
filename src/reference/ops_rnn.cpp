// Recurrent kernels: RNN, GRU and LSTM as ONNX defines them (gate orders z,r,h and i,o,f,c;
// forward, reverse or bidirectional; per-batch sequence lengths; optional clip and peepholes).
// Tests: tests/unit/reference_index_test.cpp
#include <algorithm>
#include <cctype>
#include <cmath>

#include "reference/kernels.h"

namespace sabre::reference::detail {
namespace {

enum class Kind { rnn, gru, lstm };

struct Act {
  std::string name;
  double alpha = 0, beta = 0;
  double operator()(double x) const {
    if (name == "tanh") return std::tanh(x);
    if (name == "sigmoid") return 1 / (1 + std::exp(-x));
    if (name == "relu") return std::max(x, 0.0);
    if (name == "leakyrelu") return x >= 0 ? x : alpha * x;
    if (name == "thresholdedrelu") return x > alpha ? x : 0;
    if (name == "hardsigmoid") return std::clamp(alpha * x + beta, 0.0, 1.0);
    if (name == "elu") return x >= 0 ? x : alpha * (std::exp(x) - 1);
    if (name == "softsign") return x / (1 + std::abs(x));
    if (name == "softplus") return std::log1p(std::exp(x));
    if (name == "scaledtanh") return alpha * std::tanh(beta * x);
    return alpha * x + beta;  // affine
  }
};

// The activations per direction: the model's list, or the op's defaults.
std::vector<Act> activations(const ir::Node& n, Kind kind, int64_t dirs) {
  std::vector<std::string> names;
  if (n.has_attr("activations"))
    if (const auto* v = std::get_if<std::vector<std::string>>(&n.attrs().at("activations"))) names = *v;
  const size_t per = kind == Kind::rnn ? 1 : kind == Kind::gru ? 2 : 3;
  if (names.empty()) {
    for (int64_t d = 0; d < dirs; ++d) {
      if (kind == Kind::rnn) names.push_back("Tanh");
      else if (kind == Kind::gru) names.insert(names.end(), {"Sigmoid", "Tanh"});
      else names.insert(names.end(), {"Sigmoid", "Tanh", "Tanh"});
    }
  }
  if (names.size() != per * static_cast<size_t>(dirs)) fail(n, "activations must name " + std::to_string(per * dirs) + " functions");
  std::vector<double> alphas, betas;
  if (n.has_attr("activation_alpha")) alphas = n.attr_floats("activation_alpha");
  if (n.has_attr("activation_beta")) betas = n.attr_floats("activation_beta");
  std::vector<Act> out;
  size_t ia = 0, ib = 0;
  for (const std::string& s : names) {
    Act a;
    for (char c : s) a.name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    static const std::vector<std::string> known = {"tanh", "sigmoid", "relu", "leakyrelu", "thresholdedrelu", "hardsigmoid",
                                                   "elu", "softsign", "softplus", "scaledtanh", "affine"};
    if (std::find(known.begin(), known.end(), a.name) == known.end()) fail(n, "activation '" + s + "' is not supported");
    const bool uses_alpha = a.name == "leakyrelu" || a.name == "thresholdedrelu" || a.name == "hardsigmoid" ||
                            a.name == "elu" || a.name == "scaledtanh" || a.name == "affine";
    const bool uses_beta = a.name == "hardsigmoid" || a.name == "scaledtanh" || a.name == "affine";
    const double def_alpha = a.name == "leakyrelu" ? 0.01 : a.name == "hardsigmoid" ? 0.2 : 1.0;
    a.alpha = uses_alpha ? (ia < alphas.size() ? alphas[ia++] : def_alpha) : 0;
    a.beta = uses_beta ? (ib < betas.size() ? betas[ib++] : (a.name == "hardsigmoid" ? 0.5 : 0.0)) : 0;
    out.push_back(a);
  }
  return out;
}

Kernel recurrent(Kind kind) {
  return [kind](const ir::Node& n, const Inputs& xs) {
    const Tensor& xt = in(n, xs, 0);
    const Tensor& wt = in(n, xs, 1);
    const Tensor& rt = in(n, xs, 2);
    const int64_t G = kind == Kind::rnn ? 1 : kind == Kind::gru ? 3 : 4;
    const int64_t H = n.attr_int("hidden_size");
    const bool bf = n.attr_int("layout", 0) != 0;
    const std::string dir = n.attr_string("direction", "forward");
    const int64_t D = dir == "bidirectional" ? 2 : 1;
    if (dir != "forward" && dir != "reverse" && dir != "bidirectional") fail(n, "direction must be forward, reverse or bidirectional");
    if (xt.rank() != 3) fail(n, "X must be 3-D");
    const int64_t S = xt.dims()[bf ? 1 : 0], B = xt.dims()[bf ? 0 : 1], I = xt.dims()[2];
    if (wt.dims() != Dims{D, G * H, I} || rt.dims() != Dims{D, G * H, H}) fail(n, "W or R has the wrong shape for hidden_size and direction");
    if (kind == Kind::lstm && n.attr_int("input_forget", 0) != 0) fail(n, "input_forget=1 is not supported");
    const std::vector<double> x = to_f64(xt), w = to_f64(wt), r = to_f64(rt);
    std::vector<double> bias(static_cast<size_t>(D * 2 * G * H), 0.0);
    if (const Tensor* b = opt_in(xs, 3); b && b->numel()) {
      if (b->numel() != D * 2 * G * H) fail(n, "B has the wrong shape");
      bias = to_f64(*b);
    }
    std::vector<int64_t> lens(static_cast<size_t>(B), S);
    if (const Tensor* sl = opt_in(xs, 4); sl && sl->numel()) lens = to_i64(*sl);
    if (static_cast<int64_t>(lens.size()) != B) fail(n, "sequence_lens must have one entry per batch");
    for (int64_t l : lens)
      if (l < 0 || l > S) fail(n, "a sequence length is out of range");
    // Initial states in [D, B, H] order (layout 1 stores them [B, D, H]).
    auto state = [&](const Tensor* t) {
      std::vector<double> s(static_cast<size_t>(D * B * H), 0.0);
      if (!t || !t->numel()) return s;
      if (t->numel() != D * B * H) fail(n, "an initial state has the wrong shape");
      std::vector<double> v = to_f64(*t);
      for (int64_t d = 0; d < D; ++d)
        for (int64_t b = 0; b < B; ++b)
          for (int64_t h = 0; h < H; ++h) s[(d * B + b) * H + h] = v[bf ? (b * D + d) * H + h : (d * B + b) * H + h];
      return s;
    };
    std::vector<double> hs = state(opt_in(xs, 5));
    std::vector<double> cs = kind == Kind::lstm ? state(opt_in(xs, 6)) : std::vector<double>();
    std::vector<double> peep(static_cast<size_t>(D * 3 * H), 0.0);
    if (const Tensor* p = kind == Kind::lstm ? opt_in(xs, 7) : nullptr; p && p->numel()) {
      if (p->numel() != D * 3 * H) fail(n, "P has the wrong shape");
      peep = to_f64(*p);
    }
    const bool has_clip = n.has_attr("clip");
    const double clip = n.attr_float("clip", 0.0);
    const bool lbr = n.attr_int("linear_before_reset", 0) != 0;
    const std::vector<Act> acts = activations(n, kind, D);
    const size_t per = kind == Kind::rnn ? 1 : kind == Kind::gru ? 2 : 3;
    std::vector<double> y(static_cast<size_t>(S * D * B * H), 0.0);
    auto xat = [&](int64_t t, int64_t b, int64_t i) { return x[bf ? (b * S + t) * I + i : (t * B + b) * I + i]; };
    std::vector<double> gx(static_cast<size_t>(G * H)), gh(static_cast<size_t>(G * H));
    for (int64_t d = 0; d < D; ++d) {
      const bool rev = dir == "reverse" || d == 1;
      const Act* f = &acts[d * per];
      const double* W = &w[static_cast<size_t>(d * G * H * I)];
      const double* R = &r[static_cast<size_t>(d * G * H * H)];
      const double* Wb = &bias[static_cast<size_t>(d * 2 * G * H)];
      const double* Rb = Wb + G * H;
      for (int64_t b = 0; b < B; ++b) {
        double* h = &hs[static_cast<size_t>((d * B + b) * H)];
        double* c = kind == Kind::lstm ? &cs[static_cast<size_t>((d * B + b) * H)] : nullptr;
        for (int64_t step = 0; step < lens[b]; ++step) {
          const int64_t t = rev ? lens[b] - 1 - step : step;
          for (int64_t g = 0; g < G * H; ++g) {
            double ax = Wb[g], ah = Rb[g];
            for (int64_t i = 0; i < I; ++i) ax += W[g * I + i] * xat(t, b, i);
            for (int64_t k = 0; k < H; ++k) ah += R[g * H + k] * h[k];
            gx[g] = ax;
            gh[g] = ah;
          }
          auto clipped = [&](double v) { return has_clip ? std::clamp(v, -clip, clip) : v; };
          std::vector<double> nh(static_cast<size_t>(H));
          if (kind == Kind::rnn) {
            for (int64_t k = 0; k < H; ++k) nh[k] = f[0](clipped(gx[k] + gh[k]));
          } else if (kind == Kind::gru) {
            std::vector<double> z(static_cast<size_t>(H)), rr(static_cast<size_t>(H));
            for (int64_t k = 0; k < H; ++k) {
              z[k] = f[0](clipped(gx[k] + gh[k]));
              rr[k] = f[0](clipped(gx[H + k] + gh[H + k]));
            }
            for (int64_t k = 0; k < H; ++k) {
              double pre;
              if (lbr) {
                pre = gx[2 * H + k] + rr[k] * gh[2 * H + k];
              } else {  // (r ⊙ h) · Rh^T + Rbh
                pre = gx[2 * H + k] + Rb[2 * H + k];
                for (int64_t j = 0; j < H; ++j) pre += R[(2 * H + k) * H + j] * rr[j] * h[j];
              }
              const double hh = f[1](clipped(pre));
              nh[k] = (1 - z[k]) * hh + z[k] * h[k];
            }
          } else {
            const double* P = &peep[static_cast<size_t>(d * 3 * H)];
            for (int64_t k = 0; k < H; ++k) {
              const double ig = f[0](clipped(gx[k] + gh[k] + P[k] * c[k]));
              const double fg = f[0](clipped(gx[2 * H + k] + gh[2 * H + k] + P[2 * H + k] * c[k]));
              const double cg = f[1](clipped(gx[3 * H + k] + gh[3 * H + k]));
              const double nc = fg * c[k] + ig * cg;
              const double og = f[0](clipped(gx[H + k] + gh[H + k] + P[H + k] * nc));
              c[k] = nc;
              nh[k] = og * f[2](nc);
            }
          }
          std::copy(nh.begin(), nh.end(), h);
          for (int64_t k = 0; k < H; ++k)
            y[static_cast<size_t>(bf ? ((b * S + t) * D + d) * H + k : ((t * D + d) * B + b) * H + k)] = h[k];
        }
      }
    }
    const DType dt = xt.dtype();
    auto final_state = [&](const std::vector<double>& s) {
      if (!bf) return from_f64(s, dt, {D, B, H});
      std::vector<double> v(s.size());
      for (int64_t d = 0; d < D; ++d)
        for (int64_t b = 0; b < B; ++b)
          for (int64_t h = 0; h < H; ++h) v[(b * D + d) * H + h] = s[(d * B + b) * H + h];
      return from_f64(v, dt, {B, D, H});
    };
    std::vector<Tensor> outs = {from_f64(y, dt, bf ? Dims{B, S, D, H} : Dims{S, D, B, H}), final_state(hs)};
    if (kind == Kind::lstm) outs.push_back(final_state(cs));
    return outs;
  };
}

}  // namespace

void register_rnn_ops(Table& t) {
  t[{"", "RNN"}] = recurrent(Kind::rnn);
  t[{"", "GRU"}] = recurrent(Kind::gru);
  t[{"", "LSTM"}] = recurrent(Kind::lstm);
}

}  // namespace sabre::reference::detail
