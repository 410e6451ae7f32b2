// Losses, quantization and the remaining nn kernels (LRN, MeanVarianceNormalization, Det). All
// compute in double and round once to the output dtype. Tests: tests/unit/reference_index_test.cpp
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "reference/kernels.h"

namespace sabre::reference::detail {
namespace {

// NegativeLogLikelihoodLoss on log-probabilities `lp` [N, C, d...] (flat, in double).
Tensor nll(const ir::Node& n, const std::vector<double>& lp, const Dims& dims, const Tensor& target, const Tensor* weight,
           DType out_dt) {
  if (dims.size() < 2) fail(n, "input must be [N, C, d...]");
  const int64_t N = dims[0], C = dims[1];
  int64_t D = 1;
  for (size_t i = 2; i < dims.size(); ++i) D *= dims[i];
  Dims tdims = {N};
  tdims.insert(tdims.end(), dims.begin() + 2, dims.end());
  if (target.dims() != tdims) fail(n, "target must have shape [N, d...] of the input");
  if (ir::is_float(target.dtype())) fail(n, "target must be integers");
  const std::vector<int64_t> t = to_i64(target);
  std::vector<double> w(static_cast<size_t>(C), 1.0);
  if (weight) {
    if (weight->numel() != C) fail(n, "weight must have C entries");
    w = to_f64(*weight);
  }
  const bool has_ignore = n.has_attr("ignore_index");
  const int64_t ignore = n.attr_int("ignore_index", 0);
  const std::string red = n.attr_string("reduction", "mean");
  if (red != "none" && red != "sum" && red != "mean") fail(n, "reduction must be none, sum or mean, got '" + red + "'");
  std::vector<double> loss(static_cast<size_t>(N * D));
  double wsum = 0, lsum = 0;
  for (int64_t b = 0; b < N; ++b)
    for (int64_t d = 0; d < D; ++d) {
      const int64_t c = t[b * D + d];
      if (has_ignore && c == ignore) continue;
      if (c < 0 || c >= C) fail(n, "target " + std::to_string(c) + " is out of range for " + std::to_string(C) + " classes");
      const double l = -lp[(b * C + c) * D + d] * w[c];
      loss[b * D + d] = l;
      lsum += l;
      wsum += w[c];
    }
  if (red == "none") return from_f64(loss, out_dt, tdims);
  return from_f64({red == "sum" ? lsum : lsum / wsum}, out_dt, {});
}

std::vector<Tensor> nll_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  return {nll(n, to_f64(x), x.dims(), in(n, xs, 1), opt_in(xs, 2), x.dtype())};
}

std::vector<Tensor> sce_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  if (x.rank() < 2) fail(n, "scores must be [N, C, d...]");
  const int64_t N = x.dims()[0], C = x.dims()[1];
  const int64_t D = C ? x.numel() / (N * C) : 0;
  std::vector<double> v = to_f64(x);
  for (int64_t b = 0; b < N; ++b)
    for (int64_t d = 0; d < D; ++d) {
      double m = -std::numeric_limits<double>::infinity(), s = 0;
      for (int64_t c = 0; c < C; ++c) m = std::max(m, v[(b * C + c) * D + d]);
      for (int64_t c = 0; c < C; ++c) s += std::exp(v[(b * C + c) * D + d] - m);
      for (int64_t c = 0; c < C; ++c) v[(b * C + c) * D + d] -= m + std::log(s);
    }
  Tensor loss = nll(n, v, x.dims(), in(n, xs, 1), opt_in(xs, 2), x.dtype());
  return {std::move(loss), from_f64(v, x.dtype(), x.dims())};
}

// Per-element quantization parameter index: scalar, per `axis` or per block along `axis`.
struct QuantParams {
  std::vector<double> scale;
  std::vector<int64_t> zero;
  int64_t axis = 0, block = 0, inner = 1, dim = 1;
  size_t at(int64_t e) const {
    if (scale.size() == 1) return 0;
    const int64_t c = (e / inner) % dim;
    if (block == 0) return static_cast<size_t>(c);
    const int64_t outer_i = e / (inner * dim), nb = (dim + block - 1) / block;
    return static_cast<size_t>((outer_i * nb + c / block) * inner + e % inner);
  }
};

QuantParams quant_params(const ir::Node& n, const Tensor& x, const Tensor& scale, const Tensor* zp) {
  QuantParams q;
  q.scale = to_f64(scale);
  q.zero = zp ? to_i64(*zp) : std::vector<int64_t>(q.scale.size(), 0);
  if (zp && zp->dims() != scale.dims()) fail(n, "zero point and scale must have the same shape");
  q.block = n.attr_int("block_size", 0);
  if (q.scale.size() != 1 || scale.rank() > 0) {
    if (x.rank() == 0) fail(n, "a scalar input needs a scalar scale");
    q.axis = norm_axis(n, n.attr_int("axis", 1), x.rank());
    q.dim = x.dims()[q.axis];
    for (int64_t d = q.axis + 1; d < x.rank(); ++d) q.inner *= x.dims()[d];
    if (q.block == 0 && scale.rank() <= 1) {
      if (static_cast<int64_t>(q.scale.size()) != q.dim && q.scale.size() != 1)
        fail(n, "scale must have one entry per element of the quantized axis");
    } else if (q.block > 0) {
      if (scale.rank() != x.rank()) fail(n, "blocked scale must have the input's rank");
      for (int64_t d = 0; d < x.rank(); ++d) {
        int64_t want = d == q.axis ? (x.dims()[d] + q.block - 1) / q.block : x.dims()[d];
        if (scale.dims()[d] != want) fail(n, "blocked scale has the wrong shape");
      }
    } else {
      fail(n, "scale must be a scalar or 1-D (or blocked, with block_size)");
    }
  }
  return q;
}

std::pair<int64_t, int64_t> int_range(const ir::Node& n, DType d) {
  if (d == DType::u8) return {0, 255};
  if (d == DType::i8) return {-128, 127};
  if (d == DType::i32) return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
  fail(n, "quantized dtype " + std::string(ir::name(d)) + " is not supported (u8, i8, i32)");
}

std::vector<Tensor> quantize_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  const Tensor& s = in(n, xs, 1);
  const Tensor* zp = opt_in(xs, 2);
  DType od = zp ? zp->dtype() : DType::u8;
  if (n.has_attr("output_dtype") && !zp) {
    auto d = ir::parse_dtype(n.attr_string("output_dtype"));
    if (!d) fail(n, "unknown output_dtype");
    od = *d;
  }
  const auto [lo, hi] = int_range(n, od);
  const bool saturate = true;  // float8 is not supported, where saturate=0 would matter
  (void)saturate;
  QuantParams q = quant_params(n, x, s, zp);
  std::vector<double> v = to_f64(x);
  std::vector<int64_t> out(v.size());
  for (size_t e = 0; e < v.size(); ++e) {
    const size_t k = q.at(static_cast<int64_t>(e));
    // ONNX divides in the input's precision: a quotient near .5 rounds as f32 arithmetic says.
    const double r = x.dtype() == DType::f64 ? v[e] / q.scale[k]
                                             : static_cast<double>(static_cast<float>(v[e]) / static_cast<float>(q.scale[k]));
    const double y = std::nearbyint(r) + static_cast<double>(q.zero[k]);  // half to even
    out[e] = static_cast<int64_t>(std::clamp(y, static_cast<double>(lo), static_cast<double>(hi)));
  }
  return {from_i64(out, od, x.dims())};
}

std::vector<Tensor> dequantize_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  const Tensor& s = in(n, xs, 1);
  const Tensor* zp = opt_in(xs, 2);
  if (ir::is_float(x.dtype())) fail(n, "input must be a quantized integer tensor");
  if (zp && zp->dtype() != x.dtype()) fail(n, "zero point must have the input's dtype");
  QuantParams q = quant_params(n, x, s, zp);
  const std::vector<int64_t> v = to_i64(x);
  std::vector<double> out(v.size());
  for (size_t e = 0; e < v.size(); ++e) {
    const size_t k = q.at(static_cast<int64_t>(e));
    out[e] = static_cast<double>(v[e] - q.zero[k]) * q.scale[k];
  }
  return {from_f64(out, s.dtype(), x.dims())};
}

std::vector<Tensor> dynamic_quantize_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  const std::vector<float> v = to_f32(x);
  float mn = 0, mx = 0;  // the range always includes 0
  for (float f : v) {
    mn = std::min(mn, f);
    mx = std::max(mx, f);
  }
  const float scale = (mx - mn) / 255.0f;
  const float zp = scale == 0 ? 0.0f : std::clamp(std::nearbyint(0 - mn / scale), 0.0f, 255.0f);
  std::vector<int64_t> out(v.size());
  for (size_t e = 0; e < v.size(); ++e)
    out[e] = scale == 0 ? static_cast<int64_t>(zp)
                        : static_cast<int64_t>(std::clamp(std::nearbyint(v[e] / scale) + zp, 0.0f, 255.0f));
  return {from_i64(out, DType::u8, x.dims()), from_f32({scale}, DType::f32, {}),
          from_i64({static_cast<int64_t>(zp)}, DType::u8, {})};
}

std::vector<Tensor> lrn_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  if (x.rank() < 3) fail(n, "input must be [N, C, d...]");
  const int64_t size = n.attr_int("size");
  if (size < 1) fail(n, "size must be positive");
  const double alpha = n.attr_float("alpha", 1e-4), beta = n.attr_float("beta", 0.75), bias = n.attr_float("bias", 1.0);
  const int64_t N = x.dims()[0], C = x.dims()[1], D = x.numel() / std::max<int64_t>(1, N * C);
  const int64_t lo = (size - 1) / 2, hi = size / 2;  // floor and ceil of (size-1)/2
  const std::vector<double> v = to_f64(x);
  std::vector<double> out(v.size());
  for (int64_t b = 0; b < N; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t d = 0; d < D; ++d) {
        double sq = 0;
        for (int64_t k = std::max<int64_t>(0, c - lo); k <= std::min(C - 1, c + hi); ++k) {
          const double e = v[(b * C + k) * D + d];
          sq += e * e;
        }
        const int64_t i = (b * C + c) * D + d;
        out[i] = v[i] / std::pow(bias + alpha / static_cast<double>(size) * sq, beta);
      }
  return {from_f64(out, x.dtype(), x.dims())};
}

// (x - mean) / (std + 1e-9) over `axes`, as ONNX's function body defines it.
std::vector<Tensor> mvn_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  std::vector<bool> red(static_cast<size_t>(x.rank()), false);
  for (int64_t a : n.attr_ints("axes", {0, 2, 3})) red[norm_axis(n, a, x.rank())] = true;
  const std::vector<double> v = to_f64(x);
  const Dims st = strides_of(x.dims());
  // Group key: the element's index with the reduced axes zeroed.
  std::vector<int64_t> key(v.size());
  for (size_t e = 0; e < v.size(); ++e) {
    int64_t k = 0;
    for (int64_t d = 0; d < x.rank(); ++d)
      if (!red[d]) k += (static_cast<int64_t>(e) / st[d]) % x.dims()[d] * st[d];
    key[e] = k;
  }
  std::vector<double> sum(v.size(), 0), sq(v.size(), 0), cnt(v.size(), 0);
  for (size_t e = 0; e < v.size(); ++e) {
    sum[key[e]] += v[e];
    sq[key[e]] += v[e] * v[e];
    cnt[key[e]] += 1;
  }
  std::vector<double> out(v.size());
  for (size_t e = 0; e < v.size(); ++e) {
    const double m = sum[key[e]] / cnt[key[e]], var = sq[key[e]] / cnt[key[e]] - m * m;
    out[e] = (v[e] - m) / (std::sqrt(std::max(var, 0.0)) + 1e-9);
  }
  return {from_f64(out, x.dtype(), x.dims())};
}

// Determinants of [..., M, M] by LU with partial pivoting.
std::vector<Tensor> det_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  if (x.rank() < 2 || x.dims()[x.rank() - 1] != x.dims()[x.rank() - 2]) fail(n, "input must be [..., M, M]");
  const int64_t M = x.dims().back();
  const int64_t B = M ? x.numel() / (M * M) : numel(Dims(x.dims().begin(), x.dims().end() - 2));
  const std::vector<double> v = to_f64(x);
  std::vector<double> out(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    std::vector<double> a(v.begin() + b * M * M, v.begin() + (b + 1) * M * M);
    double det = 1;
    for (int64_t c = 0; c < M; ++c) {
      int64_t p = c;
      for (int64_t r = c + 1; r < M; ++r)
        if (std::abs(a[r * M + c]) > std::abs(a[p * M + c])) p = r;
      if (a[p * M + c] == 0) {
        det = 0;
        break;
      }
      if (p != c) {
        for (int64_t k = 0; k < M; ++k) std::swap(a[p * M + k], a[c * M + k]);
        det = -det;
      }
      det *= a[c * M + c];
      for (int64_t r = c + 1; r < M; ++r) {
        const double f = a[r * M + c] / a[c * M + c];
        for (int64_t k = c; k < M; ++k) a[r * M + k] -= f * a[c * M + k];
      }
    }
    out[b] = det;
  }
  return {from_f64(out, x.dtype(), Dims(x.dims().begin(), x.dims().end() - 2))};
}

// Labels of one Einsum term: letters as 0..51, the dims under "..." as 52 + their position from the
// right end of the broadcast ellipsis (so ellipses of different ranks align like numpy broadcasting).
std::vector<int> einsum_labels(const ir::Node& n, const std::string& term, int64_t rank, int64_t* ell_rank) {
  std::vector<int> out;
  const size_t dots = term.find("...");
  int64_t letters = 0;
  for (char c : term)
    if (std::isalpha(static_cast<unsigned char>(c))) ++letters;
    else if (c != '.') fail(n, "equation term '" + term + "' has a character that is not a letter");
  const int64_t ell = dots == std::string::npos ? 0 : rank - letters;
  if (ell < 0 || (dots == std::string::npos && letters != rank))
    fail(n, "equation term '" + term + "' does not match its input of rank " + std::to_string(rank));
  if (ell > 11) fail(n, "the ellipsis covers more than 11 dims");
  if (ell_rank) *ell_rank = ell;
  for (size_t i = 0; i < term.size(); ++i) {
    if (i == dots) {
      for (int64_t e = ell; e > 0; --e) out.push_back(52 + static_cast<int>(e - 1));
      i += 2;
      continue;
    }
    const char c = term[i];
    if (!std::isalpha(static_cast<unsigned char>(c))) fail(n, "equation term '" + term + "' has a '.' outside one '...'");
    out.push_back(std::islower(static_cast<unsigned char>(c)) ? c - 'a' : 26 + (c - 'A'));
  }
  return out;
}

std::vector<Tensor> einsum_kernel(const ir::Node& n, const Inputs& xs) {
  std::string eq;
  for (char c : n.attr_string("equation"))
    if (c != ' ') eq += c;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t b = 0;;) {
    size_t e = lhs.find(',', b);
    terms.push_back(lhs.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  if (terms.size() != xs.size()) fail(n, "the equation has " + std::to_string(terms.size()) + " terms for " + std::to_string(xs.size()) + " inputs");
  std::vector<std::vector<int>> labels;
  std::vector<int64_t> size(64, -1);
  int64_t max_ell = 0;
  for (size_t k = 0; k < terms.size(); ++k) {
    const Tensor& t = in(n, xs, k);
    int64_t ell;
    labels.push_back(einsum_labels(n, terms[k], t.rank(), &ell));
    max_ell = std::max(max_ell, ell);
    for (size_t d = 0; d < labels[k].size(); ++d) {
      int64_t& s = size[labels[k][d]];
      const int64_t got = t.dims()[d];
      if (s == -1 || s == 1) s = got;
      else if (got != s && got != 1) fail(n, "a label has sizes " + std::to_string(s) + " and " + std::to_string(got));
    }
  }
  std::vector<int> out_labels;
  if (arrow != std::string::npos) {
    const std::string rhs = eq.substr(arrow + 2);
    for (size_t i = 0; i < rhs.size(); ++i) {
      if (rhs.compare(i, 3, "...") == 0) {
        for (int64_t e = max_ell; e > 0; --e) out_labels.push_back(52 + static_cast<int>(e - 1));
        i += 2;
      } else {
        const char c = rhs[i];
        const int l = std::islower(static_cast<unsigned char>(c)) ? c - 'a' : 26 + (c - 'A');
        if (!std::isalpha(static_cast<unsigned char>(c)) || size[l] < 0)
          fail(n, std::string("output label '") + c + "' is not in any input");
        if (std::find(out_labels.begin(), out_labels.end(), l) != out_labels.end())
          fail(n, std::string("output label '") + c + "' repeats");
        out_labels.push_back(l);
      }
    }
  } else {  // implicit: the ellipsis, then the labels used once, in alphabetical order
    for (int64_t e = max_ell; e > 0; --e) out_labels.push_back(52 + static_cast<int>(e - 1));
    std::vector<int> count(64, 0);
    for (const auto& ls : labels)
      for (int l : ls) ++count[l];
    for (int l = 26; l < 52; ++l)
      if (count[l] == 1) out_labels.push_back(l);
    for (int l = 0; l < 26; ++l)
      if (count[l] == 1) out_labels.push_back(l);
  }
  std::vector<int> all = out_labels;
  for (int l = 0; l < 64; ++l)
    if (size[l] >= 0 && std::find(all.begin(), all.end(), l) == all.end()) all.push_back(l);
  Dims od;
  for (int l : out_labels) od.push_back(size[l]);
  std::vector<std::vector<double>> vals;
  std::vector<std::vector<int64_t>> strides(xs.size(), std::vector<int64_t>(all.size(), 0));
  for (size_t k = 0; k < xs.size(); ++k) {
    vals.push_back(to_f64(*xs[k]));
    const Dims st = strides_of(xs[k]->dims());
    for (size_t d = 0; d < labels[k].size(); ++d) {
      if (xs[k]->dims()[d] == 1) continue;  // broadcast
      const size_t a = std::find(all.begin(), all.end(), labels[k][d]) - all.begin();
      strides[k][a] += st[d];  // a repeated label walks the diagonal
    }
  }
  std::vector<double> y(static_cast<size_t>(numel(od)), 0.0);
  Dims full;
  for (int l : all) full.push_back(size[l]);
  const int64_t total = numel(full), per_out = numel(Dims(full.begin() + out_labels.size(), full.end()));
  std::vector<int64_t> ctr(all.size(), 0);
  for (int64_t it = 0; it < total; ++it) {
    int64_t rem = it;
    for (int64_t d = static_cast<int64_t>(all.size()) - 1; d >= 0; --d) {
      ctr[d] = rem % full[d];
      rem /= full[d];
    }
    double p = 1;
    for (size_t k = 0; k < xs.size(); ++k) {
      int64_t off = 0;
      for (size_t d = 0; d < all.size(); ++d) off += ctr[d] * strides[k][d];
      p *= vals[k][off];
    }
    y[it / std::max<int64_t>(per_out, 1)] += p;
  }
  return {from_f64(y, xs[0]->dtype(), od)};
}

Kernel window(int kind) {  // 0 Hann, 1 Hamming, 2 Blackman
  return [kind](const ir::Node& n, const Inputs& xs) {
    const Tensor& s = in(n, xs, 0);
    if (s.numel() != 1) fail(n, "size must be a scalar");
    const int64_t size = s.get_i64(0);
    if (size < 0) fail(n, "size must not be negative");
    const bool periodic = n.attr_int("periodic", 1) != 0;
    const double N = static_cast<double>(periodic ? size : size - 1), pi = 3.14159265358979323846;
    std::vector<double> v(static_cast<size_t>(size));
    for (int64_t i = 0; i < size; ++i) {
      const double c = std::cos(2 * pi * static_cast<double>(i) / N), c2 = std::cos(4 * pi * static_cast<double>(i) / N);
      v[i] = kind == 0 ? 0.5 - 0.5 * c : kind == 1 ? 25.0 / 46 - (1 - 25.0 / 46) * c : 0.42 - 0.5 * c + 0.08 * c2;
    }
    auto dt = ir::parse_dtype(n.attr_string("output_datatype", "f32"));
    if (!dt) fail(n, "unknown output_datatype");
    return std::vector<Tensor>{from_f64(v, *dt, {size})};
  };
}

// One triangular filter per mel band over the bins of a one-sided DFT (ONNX opset 17): the
// num_mel_bins + 2 band edges are spaced evenly on the mel scale, 2595·log10(1 + f/700), by
// (high - low) / (num_mel_bins + 2) as the ONNX reference spaces them, and fall on bin
// floor((dft_length + 1)·f / sample_rate); band i rises from edge i to edge i+1 and falls to edge i+2.
std::vector<Tensor> mel_weight_matrix_kernel(const ir::Node& n, const Inputs& xs) {
  auto scalar = [&](size_t i) -> const Tensor& {
    const Tensor& t = in(n, xs, i);
    if (t.numel() != 1) fail(n, "input " + std::to_string(i) + " must be a scalar");
    return t;
  };
  const int64_t mels = scalar(0).get_i64(0), dft = scalar(1).get_i64(0), rate = scalar(2).get_i64(0);
  const double low = scalar(3).get_f64(0), high = scalar(4).get_f64(0);
  if (mels < 1 || dft < 1 || rate < 1) fail(n, "num_mel_bins, dft_length and sample_rate must be positive");
  const int64_t bins = dft / 2 + 1;
  constexpr int64_t kMaxElements = int64_t{1} << 28;
  if (mels > kMaxElements / bins) fail(n, "num_mel_bins x (dft_length / 2 + 1) is too large");
  auto to_mel = [](double f) { return 2595.0 * std::log10(1.0 + f / 700.0); };
  const double mel_low = to_mel(low), step = (to_mel(high) - mel_low) / static_cast<double>(mels + 2);
  std::vector<int64_t> edge(static_cast<size_t>(mels + 2));
  for (int64_t i = 0; i < mels + 2; ++i) {
    const double hz = 700.0 * (std::pow(10.0, (mel_low + static_cast<double>(i) * step) / 2595.0) - 1.0);
    const double bin = std::floor(static_cast<double>(dft + 1) * hz / static_cast<double>(rate));
    if (!(bin >= 0 && bin < static_cast<double>(bins)))
      fail(n, "band edges fall outside the DFT's bins: give 0 <= lower_edge_hertz <= upper_edge_hertz <= sample_rate / 2");
    edge[i] = static_cast<int64_t>(bin);
  }
  std::vector<double> w(static_cast<size_t>(bins * mels), 0.0);
  for (int64_t i = 0; i < mels; ++i) {
    const int64_t l = edge[i], c = edge[i + 1], r = edge[i + 2];
    if (c == l) w[c * mels + i] = 1;
    for (int64_t j = l; c != l && j <= c; ++j) w[j * mels + i] = static_cast<double>(j - l) / static_cast<double>(c - l);
    for (int64_t j = c; j < r; ++j) w[j * mels + i] = static_cast<double>(r - j) / static_cast<double>(r - c);
  }
  auto dt = ir::parse_dtype(n.attr_string("output_datatype", "f32"));
  if (!dt) fail(n, "unknown output_datatype");
  return {from_f64(w, *dt, {bins, mels})};
}

}  // namespace

void register_extra_ops(Table& t) {
  auto add = [&](const char* op, Kernel k) { t[{"", op}] = std::move(k); };
  add("NegativeLogLikelihoodLoss", nll_kernel);
  add("SoftmaxCrossEntropyLoss", sce_kernel);
  add("QuantizeLinear", quantize_kernel);
  add("DequantizeLinear", dequantize_kernel);
  add("DynamicQuantizeLinear", dynamic_quantize_kernel);
  add("LRN", lrn_kernel);
  add("MeanVarianceNormalization", mvn_kernel);
  add("Det", det_kernel);
  add("Einsum", einsum_kernel);
  add("MelWeightMatrix", mel_weight_matrix_kernel);
  add("HannWindow", window(0));
  add("HammingWindow", window(1));
  add("BlackmanWindow", window(2));
  add("Dropout", [](const ir::Node& n, const Inputs& xs) {  // inference mode: the mask keeps everything
    const Tensor& x = in(n, xs, 0);
    return std::vector<Tensor>{x, from_i64(std::vector<int64_t>(static_cast<size_t>(x.numel()), 1), DType::boolean, x.dims())};
  });
  register_conv_transpose(t);
  register_vision_ops(t);
  register_rnn_ops(t);
  register_qlinear_ops(t);
}

}  // namespace sabre::reference::detail
