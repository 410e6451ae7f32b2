// Compute-heavy kernels: MatMul, Gemm, Conv, pooling, normalization, softmax, reductions, Resize.
//
// MatMul and Conv (through im2col) share one blocked row kernel, parallel over output rows, so a
// small BERT encoder runs in seconds. f16/bf16 compute in f32, f64 in f64, integers in int64.
#include <cmath>
#include <cstring>
#include <limits>

#include "reference/kernels.h"

namespace sabre::reference::detail {
namespace {

// C[m0:m1, :] += A[m0:m1, :] * B, all row-major and contiguous (A: MxK, B: KxN, C: MxN).
// The j-block keeps a C row segment in L1 and a B tile in L2; the inner loop vectorizes.
template <class T>
__attribute__((optimize("O3"))) void gemm_rows(const T* A, const T* B, T* C, int64_t m0, int64_t m1, int64_t N,
                                               int64_t K) {
  constexpr int64_t kJ = 256, kK = 128;
  for (int64_t jb = 0; jb < N; jb += kJ) {
    const int64_t je = std::min(N, jb + kJ);
    for (int64_t kb = 0; kb < K; kb += kK) {
      const int64_t ke = std::min(K, kb + kK);
      for (int64_t i = m0; i < m1; ++i) {
        T* __restrict c = C + i * N;
        for (int64_t k = kb; k < ke; ++k) {
          const T a = A[i * K + k];
          const T* __restrict b = B + k * N;
          for (int64_t j = jb; j < je; ++j) c[j] += a * b[j];
        }
      }
    }
  }
}

// Batched C[b] = A[a_off[b]] * B[b_off[b]], parallel over all (batch, row) pairs.
template <class T>
void gemm_batched(const T* A, const T* B, T* C, const std::vector<int64_t>& a_off, const std::vector<int64_t>& b_off,
                  int64_t M, int64_t N, int64_t K) {
  const int64_t batches = static_cast<int64_t>(a_off.size());
  const int64_t rows = batches * M;
  const int64_t min_rows = std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(1, N * K));
  parallel_for(rows, min_rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1;) {
      const int64_t b = r / M, m = r % M;
      const int64_t m_end = std::min(M, m + (r1 - r));
      gemm_rows(A + a_off[b] * M * K, B + b_off[b] * K * N, C + b * M * N, m, m_end, N, K);
      r += m_end - m;
    }
  });
}

template <class T>
std::vector<T> values_as(const Tensor& t);
template <>
std::vector<float> values_as<float>(const Tensor& t) { return to_f32(t); }
template <>
std::vector<double> values_as<double>(const Tensor& t) { return to_f64(t); }
template <>
std::vector<int64_t> values_as<int64_t>(const Tensor& t) { return to_i64(t); }

template <class T>
Tensor tensor_from(const std::vector<T>& v, DType dt, Dims dims);
template <>
Tensor tensor_from<float>(const std::vector<float>& v, DType dt, Dims dims) { return from_f32(v, dt, std::move(dims)); }
template <>
Tensor tensor_from<double>(const std::vector<double>& v, DType dt, Dims dims) { return from_f64(v, dt, std::move(dims)); }
template <>
Tensor tensor_from<int64_t>(const std::vector<int64_t>& v, DType dt, Dims dims) {
  return from_i64(v, dt, std::move(dims));
}

// Calls f.template operator()<T>() with the accumulation type of dtype dt.
template <class F>
auto dispatch_acc(DType dt, F&& f) {
  if (dt == DType::f64) return f.template operator()<double>();
  if (ir::is_float(dt)) return f.template operator()<float>();
  return f.template operator()<int64_t>();
}

std::vector<Tensor> matmul_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& a = in(n, xs, 0);
  const Tensor& b = in(n, xs, 1);
  if (a.dtype() != b.dtype()) fail(n, "input dtypes differ");
  if (a.rank() == 0 || b.rank() == 0) fail(n, "inputs must have rank >= 1");
  Dims ad = a.dims(), bd = b.dims();
  const bool a_vec = ad.size() == 1, b_vec = bd.size() == 1;
  if (a_vec) ad.insert(ad.begin(), 1);
  if (b_vec) bd.push_back(1);
  const int64_t M = ad[ad.size() - 2], K = ad.back(), N = bd.back();
  if (bd[bd.size() - 2] != K)
    fail(n, "inner dims differ: " + std::to_string(K) + " vs " + std::to_string(bd[bd.size() - 2]));
  Dims a_batch(ad.begin(), ad.end() - 2), b_batch(bd.begin(), bd.end() - 2);
  Dims batch = broadcast_dims(n, a_batch, b_batch);
  std::vector<int64_t> a_off = broadcast_index(a_batch, batch), b_off = broadcast_index(b_batch, batch);
  Dims out = batch;
  if (!a_vec) out.push_back(M);
  if (!b_vec) out.push_back(N);
  return {dispatch_acc(a.dtype(), [&]<class T>() {
    std::vector<T> va = values_as<T>(a), vb = values_as<T>(b), vc(static_cast<size_t>(numel(batch) * M * N), T(0));
    gemm_batched(va.data(), vb.data(), vc.data(), a_off, b_off, M, N, K);
    return tensor_from(vc, a.dtype(), out);
  })};
}

template <class T>
std::vector<T> transpose2d(const std::vector<T>& v, int64_t rows, int64_t cols) {
  std::vector<T> t(v.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) t[j * rows + i] = v[i * cols + j];
  return t;
}

std::vector<Tensor> gemm_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& a = in(n, xs, 0);
  const Tensor& b = in(n, xs, 1);
  const Tensor* c = opt_in(xs, 2);
  if (a.rank() != 2 || b.rank() != 2) fail(n, "A and B must be 2-D");
  const bool ta = n.attr_int("transA", 0) != 0, tb = n.attr_int("transB", 0) != 0;
  const double alpha = n.attr_float("alpha", 1.0), beta = n.attr_float("beta", 1.0);
  const int64_t M = ta ? a.dims()[1] : a.dims()[0], K = ta ? a.dims()[0] : a.dims()[1];
  const int64_t K2 = tb ? b.dims()[1] : b.dims()[0], N = tb ? b.dims()[0] : b.dims()[1];
  if (K != K2) fail(n, "inner dims differ: " + std::to_string(K) + " vs " + std::to_string(K2));
  return {dispatch_acc(a.dtype(), [&]<class T>() {
    std::vector<T> va = values_as<T>(a), vb = values_as<T>(b), vc(static_cast<size_t>(M * N), T(0));
    if (ta) va = transpose2d(va, K, M);
    if (tb) vb = transpose2d(vb, N, K);
    gemm_batched(va.data(), vb.data(), vc.data(), {0}, {0}, M, N, K);
    for (T& e : vc) e = static_cast<T>(alpha * e);
    if (c && beta != 0) {
      Dims out{M, N};
      Dims bc = broadcast_dims(n, c->dims(), out);
      if (bc != out) fail(n, "C does not broadcast to [M, N]");
      std::vector<int64_t> idx = broadcast_index(c->dims(), out);
      std::vector<T> cv = values_as<T>(*c);
      for (size_t i = 0; i < vc.size(); ++i) vc[i] = static_cast<T>(vc[i] + beta * cv[idx[i]]);
    }
    return tensor_from(vc, a.dtype(), {M, N});
  })};
}

// outer x axis x inner decomposition around one axis.
struct AxisSplit {
  int64_t outer = 1, dim = 1, inner = 1;
};
AxisSplit split_at(const Dims& d, int64_t axis) {
  AxisSplit s;
  for (int64_t i = 0; i < axis; ++i) s.outer *= d[i];
  s.dim = d[axis];
  for (size_t i = axis + 1; i < d.size(); ++i) s.inner *= d[i];
  return s;
}

Kernel softmax(bool log) {
  return [log](const ir::Node& n, const Inputs& xs) {
    const Tensor& x = in(n, xs, 0);
    if (!ir::is_float(x.dtype())) fail(n, "needs a float input");
    const int64_t axis = norm_axis(n, n.attr_int("axis", -1), x.rank());
    AxisSplit s = split_at(x.dims(), axis);
    std::vector<double> v = to_f64(x);
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t i = 0; i < s.inner; ++i) {
        double* p = v.data() + o * s.dim * s.inner + i;
        double mx = -INFINITY;
        for (int64_t k = 0; k < s.dim; ++k) mx = std::max(mx, p[k * s.inner]);
        double sum = 0;
        for (int64_t k = 0; k < s.dim; ++k) sum += std::exp(p[k * s.inner] - mx);
        for (int64_t k = 0; k < s.dim; ++k)
          p[k * s.inner] = log ? p[k * s.inner] - mx - std::log(sum) : std::exp(p[k * s.inner] - mx) / sum;
      }
    return std::vector<Tensor>{from_f64(v, x.dtype(), x.dims())};
  };
}

// Hardmax: 1 at the first maximum along the axis, 0 elsewhere.
std::vector<Tensor> hardmax_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  if (!ir::is_float(x.dtype())) fail(n, "needs a float input");
  const int64_t axis = norm_axis(n, n.attr_int("axis", -1), x.rank());
  AxisSplit s = split_at(x.dims(), axis);
  std::vector<double> v = to_f64(x), r(v.size(), 0.0);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      const int64_t base = o * s.dim * s.inner + i;
      int64_t best = 0;
      for (int64_t k = 1; k < s.dim; ++k)
        if (v[base + k * s.inner] > v[base + best * s.inner]) best = k;
      if (s.dim > 0) r[base + best * s.inner] = 1.0;
    }
  return {from_f64(r, x.dtype(), x.dims())};
}

// InstanceNormalization: per (n, c), normalise over the spatial dims, then scale[c] and bias[c].
std::vector<Tensor> instancenorm_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  const Tensor& scale = in(n, xs, 1);
  const Tensor& bias = in(n, xs, 2);
  if (!ir::is_float(x.dtype())) fail(n, "needs a float input");
  if (x.rank() < 3) fail(n, "input must have rank >= 3");
  const int64_t N = x.dims()[0], C = x.dims()[1], S = numel(x.dims()) / std::max<int64_t>(1, N * C);
  if (scale.numel() != C || bias.numel() != C) fail(n, "scale and B must have one value per channel");
  const double eps = n.attr_float("epsilon", 1e-5);
  std::vector<double> v = to_f64(x), sv = to_f64(scale), bv = to_f64(bias);
  for (int64_t i = 0; i < N * C; ++i) {
    double* p = v.data() + i * S;
    double mean = 0, var = 0;
    for (int64_t k = 0; k < S; ++k) mean += p[k];
    mean /= static_cast<double>(S);
    for (int64_t k = 0; k < S; ++k) var += (p[k] - mean) * (p[k] - mean);
    const double inv = 1.0 / std::sqrt(var / static_cast<double>(S) + eps);
    for (int64_t k = 0; k < S; ++k) p[k] = (p[k] - mean) * inv * sv[i % C] + bv[i % C];
  }
  return {from_f64(v, x.dtype(), x.dims())};
}

std::vector<Tensor> layernorm_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  const Tensor& scale = in(n, xs, 1);
  const Tensor* bias = opt_in(xs, 2);
  if (!ir::is_float(x.dtype())) fail(n, "needs a float input");
  const int64_t axis = norm_axis(n, n.attr_int("axis", -1), x.rank());
  const double eps = n.attr_float("epsilon", 1e-5);
  int64_t rows = 1;
  for (int64_t i = 0; i < axis; ++i) rows *= x.dims()[i];
  Dims norm_dims(x.dims().begin() + axis, x.dims().end());
  const int64_t cols = numel(norm_dims);
  if (broadcast_dims(n, scale.dims(), norm_dims) != norm_dims) fail(n, "Scale does not broadcast to the normalized dims");
  std::vector<int64_t> si = broadcast_index(scale.dims(), norm_dims), bi;
  std::vector<double> v = to_f64(x), sv = to_f64(scale), bv;
  if (bias) {
    if (broadcast_dims(n, bias->dims(), norm_dims) != norm_dims) fail(n, "B does not broadcast to the normalized dims");
    bi = broadcast_index(bias->dims(), norm_dims);
    bv = to_f64(*bias);
  }
  std::vector<double> mean(rows), inv(rows);
  for (int64_t r = 0; r < rows; ++r) {
    double* p = v.data() + r * cols;
    double mu = 0;
    for (int64_t j = 0; j < cols; ++j) mu += p[j];
    mu /= static_cast<double>(cols);
    double var = 0;
    for (int64_t j = 0; j < cols; ++j) var += (p[j] - mu) * (p[j] - mu);
    var /= static_cast<double>(cols);
    const double is = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < cols; ++j) p[j] = (p[j] - mu) * is * sv[si[j]] + (bias ? bv[bi[j]] : 0.0);
    mean[r] = mu;
    inv[r] = is;
  }
  Dims stat_dims(x.dims().begin(), x.dims().begin() + axis);
  stat_dims.resize(x.dims().size(), 1);
  // Mean and InvStdDev have the stash type, f32 unless stash_type says f64 (ONNX 11).
  DType stat_dt = n.attr_int("stash_type", 1) == 11 ? DType::f64 : DType::f32;
  return {from_f64(v, x.dtype(), x.dims()), from_f64(mean, stat_dt, stat_dims), from_f64(inv, stat_dt, stat_dims)};
}

enum class Reduce { sum, mean, max, min, prod, l1, l2, sum_square, log_sum_exp, log_sum };

Kernel reduce(Reduce kind) {
  return [kind](const ir::Node& n, const Inputs& xs) {
    const Tensor& x = in(n, xs, 0);
    const int64_t r = x.rank();
    const bool keep = n.attr_int("keepdims", 1) != 0;
    std::vector<int64_t> axes;
    if (const Tensor* a = opt_in(xs, 1)) axes = to_i64(*a);
    if (axes.empty()) {
      if (n.attr_int("noop_with_empty_axes", 0) != 0) return std::vector<Tensor>{x};
      for (int64_t i = 0; i < r; ++i) axes.push_back(i);
    }
    std::vector<bool> red(r, false);
    for (int64_t a : axes) red[norm_axis(n, a, r)] = true;
    Dims keep_dims = x.dims(), out;
    for (int64_t i = 0; i < r; ++i) {
      if (red[i]) keep_dims[i] = 1;
      if (!red[i] || keep) out.push_back(keep_dims[i]);
    }
    const int64_t total = numel(keep_dims);
    const int64_t count = total == 0 ? 0 : x.numel() / std::max<int64_t>(total, 1);
    std::vector<int64_t> dst = broadcast_index(keep_dims, x.dims());
    const bool ints = !ir::is_float(x.dtype());
    if (ints && (kind == Reduce::sum || kind == Reduce::max || kind == Reduce::min || kind == Reduce::prod)) {
      std::vector<int64_t> v = to_i64(x);
      int64_t init = kind == Reduce::max   ? std::numeric_limits<int64_t>::min()
                     : kind == Reduce::min ? std::numeric_limits<int64_t>::max()
                     : kind == Reduce::prod ? 1
                                            : 0;
      std::vector<int64_t> acc(static_cast<size_t>(total), init);
      for (size_t i = 0; i < v.size(); ++i) {
        int64_t& a = acc[dst[i]];
        a = kind == Reduce::max ? std::max(a, v[i]) : kind == Reduce::min ? std::min(a, v[i]) : kind == Reduce::prod ? a * v[i] : a + v[i];
      }
      return std::vector<Tensor>{from_i64(acc, x.dtype(), out)};
    }
    std::vector<double> v = to_f64(x);
    double init = kind == Reduce::max ? -INFINITY : kind == Reduce::min ? INFINITY : kind == Reduce::prod ? 1.0 : 0.0;
    std::vector<double> acc(static_cast<size_t>(total), init);
    for (size_t i = 0; i < v.size(); ++i) {
      double& a = acc[dst[i]];
      const double e = v[i];
      switch (kind) {
        case Reduce::max: a = (std::isnan(a) || std::isnan(e)) ? NAN : std::max(a, e); break;
        case Reduce::min: a = (std::isnan(a) || std::isnan(e)) ? NAN : std::min(a, e); break;
        case Reduce::prod: a *= e; break;
        case Reduce::l1: a += std::fabs(e); break;
        case Reduce::l2:
        case Reduce::sum_square: a += e * e; break;
        case Reduce::log_sum_exp: a += std::exp(e); break;
        default: a += e; break;
      }
    }
    for (double& a : acc) {
      if (kind == Reduce::mean) a /= static_cast<double>(count);
      if (kind == Reduce::l2) a = std::sqrt(a);
      if (kind == Reduce::log_sum_exp || kind == Reduce::log_sum) a = std::log(a);
    }
    return std::vector<Tensor>{from_f64(acc, x.dtype(), out)};
  };
}

// Spatial geometry shared by Conv and the pools: kernel, strides, dilations, begin pads, output dims.
struct Window {
  Dims kernel, strides, dilations, pad_begin, pad_end, out;
};

Window window_for(const ir::Node& n, const Dims& in_spatial, Dims kernel, bool ceil_mode) {
  const size_t s = in_spatial.size();
  Window w;
  w.kernel = std::move(kernel);
  w.strides = n.attr_ints("strides", Dims(s, 1));
  w.dilations = n.attr_ints("dilations", Dims(s, 1));
  Dims pads = n.attr_ints("pads", Dims(2 * s, 0));
  if (w.kernel.size() != s || w.strides.size() != s || w.dilations.size() != s || pads.size() != 2 * s)
    fail(n, "kernel_shape, strides, dilations and pads must match the " + std::to_string(s) + " spatial dims");
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  w.pad_begin.assign(pads.begin(), pads.begin() + s);
  w.pad_end.assign(pads.begin() + s, pads.end());
  w.out.resize(s);
  for (size_t d = 0; d < s; ++d) {
    if (w.strides[d] <= 0 || w.dilations[d] <= 0) fail(n, "strides and dilations must be positive");
    const int64_t span = w.dilations[d] * (w.kernel[d] - 1) + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      w.out[d] = (in_spatial[d] + w.strides[d] - 1) / w.strides[d];
      int64_t total = std::max<int64_t>(0, (w.out[d] - 1) * w.strides[d] + span - in_spatial[d]);
      w.pad_begin[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.pad_end[d] = total - w.pad_begin[d];
      continue;
    }
    if (auto_pad == "VALID") {
      w.pad_begin[d] = w.pad_end[d] = 0;
    } else if (auto_pad != "NOTSET") {
      fail(n, "auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got '" + auto_pad + "'");
    }
    const int64_t room = in_spatial[d] + w.pad_begin[d] + w.pad_end[d] - span;
    if (room < 0) fail(n, "the kernel is larger than the padded input");
    if (ceil_mode) {
      w.out[d] = (room + w.strides[d] - 1) / w.strides[d] + 1;
      // The last window must start inside the input or its begin padding.
      if ((w.out[d] - 1) * w.strides[d] >= in_spatial[d] + w.pad_begin[d]) --w.out[d];
    } else {
      w.out[d] = room / w.strides[d] + 1;
    }
  }
  return w;
}

// For axis d: input coordinate of (kernel tap k, output position o), or -1 when in padding.
std::vector<std::vector<int64_t>> tap_table(const Window& w, const Dims& in_spatial) {
  std::vector<std::vector<int64_t>> t(in_spatial.size());
  for (size_t d = 0; d < in_spatial.size(); ++d)
    for (int64_t k = 0; k < w.kernel[d]; ++k)
      for (int64_t o = 0; o < w.out[d]; ++o) {
        int64_t i = o * w.strides[d] - w.pad_begin[d] + k * w.dilations[d];
        t[d].push_back(i >= 0 && i < in_spatial[d] ? i : -1);
      }
  return t;
}

template <class T>
std::vector<Tensor> conv_typed(const ir::Node& n, const Tensor& x, const Tensor& wt, const Tensor* bias) {
  const int64_t N = x.dims()[0], C = x.dims()[1], M = wt.dims()[0];
  const int64_t group = n.attr_int("group", 1);
  Dims in_sp(x.dims().begin() + 2, x.dims().end());
  Dims k_sp(wt.dims().begin() + 2, wt.dims().end());
  if (n.has_attr("kernel_shape") && n.attr_ints("kernel_shape") != k_sp) fail(n, "kernel_shape differs from W's dims");
  if (group <= 0 || C % group != 0 || M % group != 0) fail(n, "group must divide the input and output channels");
  const int64_t Cg = C / group, Mg = M / group;
  if (wt.dims()[1] != Cg) fail(n, "W has " + std::to_string(wt.dims()[1]) + " input channels per group, expected " + std::to_string(Cg));
  Window w = window_for(n, in_sp, k_sp, false);
  const int64_t S = numel(in_sp), O = numel(w.out), KK = numel(k_sp);
  const auto taps = tap_table(w, in_sp);
  const size_t sd = in_sp.size();
  Dims in_str = strides_of(in_sp);
  // Input offset for every (kernel tap, output position) pair, -1 for padding.
  std::vector<int64_t> col_src(static_cast<size_t>(KK * O));
  {
    Dims kc(sd, 0), oc(sd, 0);
    for (int64_t kk = 0; kk < KK; ++kk) {
      std::fill(oc.begin(), oc.end(), 0);
      for (int64_t o = 0; o < O; ++o) {
        int64_t off = 0;
        for (size_t d = 0; d < sd && off >= 0; ++d) {
          int64_t i = taps[d][kc[d] * w.out[d] + oc[d]];
          off = i < 0 ? -1 : off + i * in_str[d];
        }
        col_src[kk * O + o] = off;
        for (int64_t d = static_cast<int64_t>(sd) - 1; d >= 0; --d) {
          if (++oc[d] < w.out[d]) break;
          oc[d] = 0;
        }
      }
      for (int64_t d = static_cast<int64_t>(sd) - 1; d >= 0; --d) {
        if (++kc[d] < k_sp[d]) break;
        kc[d] = 0;
      }
    }
  }
  std::vector<T> xv = values_as<T>(x), wv = values_as<T>(wt), yv(static_cast<size_t>(N * M * O), T(0));
  std::vector<T> col(static_cast<size_t>(Cg * KK * O));
  for (int64_t b = 0; b < N; ++b)
    for (int64_t g = 0; g < group; ++g) {
      const T* xs = xv.data() + (b * C + g * Cg) * S;
      for (int64_t c = 0; c < Cg; ++c)
        for (int64_t j = 0; j < KK * O; ++j) {
          int64_t s = col_src[j];
          col[c * KK * O + j] = s < 0 ? T(0) : xs[c * S + s];
        }
      gemm_batched(wv.data() + g * Mg * Cg * KK, col.data(), yv.data() + (b * M + g * Mg) * O, {0}, {0}, Mg, O, Cg * KK);
    }
  if (bias) {
    std::vector<T> bv = values_as<T>(*bias);
    if (static_cast<int64_t>(bv.size()) != M) fail(n, "B must have one value per output channel");
    for (int64_t b = 0; b < N; ++b)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t o = 0; o < O; ++o) yv[(b * M + m) * O + o] += bv[m];
  }
  Dims out{N, M};
  out.insert(out.end(), w.out.begin(), w.out.end());
  return {tensor_from(yv, x.dtype(), out)};
}

std::vector<Tensor> conv_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  const Tensor& wt = in(n, xs, 1);
  if (!ir::is_float(x.dtype())) fail(n, "needs a float input");
  if (x.rank() < 3 || wt.rank() != x.rank()) fail(n, "X and W must have the same rank >= 3");
  if (x.dtype() == DType::f64) return conv_typed<double>(n, x, wt, opt_in(xs, 2));
  return conv_typed<float>(n, x, wt, opt_in(xs, 2));
}

Kernel pool(bool is_max) {
  return [is_max](const ir::Node& n, const Inputs& xs) {
    const Tensor& x = in(n, xs, 0);
    if (!ir::is_float(x.dtype()) && !is_max) fail(n, "needs a float input");
    if (x.rank() < 3) fail(n, "needs rank >= 3 (N, C, spatial...)");
    if (n.attr_int("storage_order", 0) != 0) fail(n, "storage_order=1 is not supported");
    Dims in_sp(x.dims().begin() + 2, x.dims().end());
    Window w = window_for(n, in_sp, n.attr_ints("kernel_shape"), n.attr_int("ceil_mode", 0) != 0);
    const bool include_pad = n.attr_int("count_include_pad", 0) != 0;
    const int64_t NC = x.dims()[0] * x.dims()[1], S = numel(in_sp), O = numel(w.out);
    const size_t sd = in_sp.size();
    Dims in_str = strides_of(in_sp);
    std::vector<double> v = to_f64(x), y(static_cast<size_t>(NC * O));
    std::vector<int64_t> arg(static_cast<size_t>(NC * O));
    Dims oc(sd, 0), kc(sd, 0);
    for (int64_t o = 0; o < O; ++o) {
      // Walk the window of output position oc: offsets into one (n, c) plane.
      double acc_init = is_max ? -INFINITY : 0.0;
      std::vector<double> acc(NC, acc_init);
      std::vector<int64_t> best(NC, -1);
      int64_t counted = 0;
      std::fill(kc.begin(), kc.end(), 0);
      const int64_t KK = numel(w.kernel);
      for (int64_t kk = 0; kk < KK; ++kk) {
        int64_t off = 0;
        bool inside = true, in_padded = true;
        for (size_t d = 0; d < sd; ++d) {
          int64_t i = oc[d] * w.strides[d] - w.pad_begin[d] + kc[d] * w.dilations[d];
          if (i < 0 || i >= in_sp[d]) inside = false;
          if (i >= in_sp[d] + w.pad_end[d]) in_padded = false;  // past the padding: ceil_mode overhang
          off += i * in_str[d];
        }
        if (inside) {
          ++counted;
          for (int64_t p = 0; p < NC; ++p) {
            double e = v[p * S + off];
            if (is_max) {
              if (e > acc[p] || best[p] < 0) {
                acc[p] = e;
                best[p] = p * S + off;
              }
            } else {
              acc[p] += e;
            }
          }
        } else if (include_pad && in_padded) {
          ++counted;
        }
        for (int64_t d = static_cast<int64_t>(sd) - 1; d >= 0; --d) {
          if (++kc[d] < w.kernel[d]) break;
          kc[d] = 0;
        }
      }
      for (int64_t p = 0; p < NC; ++p) {
        y[p * O + o] = is_max ? acc[p] : (counted ? acc[p] / static_cast<double>(counted) : NAN);
        arg[p * O + o] = best[p];
      }
      for (int64_t d = static_cast<int64_t>(sd) - 1; d >= 0; --d) {
        if (++oc[d] < w.out[d]) break;
        oc[d] = 0;
      }
    }
    Dims out{x.dims()[0], x.dims()[1]};
    out.insert(out.end(), w.out.begin(), w.out.end());
    std::vector<Tensor> res{from_f64(y, x.dtype(), out)};
    if (is_max && n.num_outputs() > 1) res.push_back(Tensor::from_i64(arg, out));
    return res;
  };
}

Kernel global_pool(bool is_max) {
  return [is_max](const ir::Node& n, const Inputs& xs) {
    const Tensor& x = in(n, xs, 0);
    if (!ir::is_float(x.dtype())) fail(n, "needs a float input");
    if (x.rank() < 3) fail(n, "needs rank >= 3 (N, C, spatial...)");
    const int64_t NC = x.dims()[0] * x.dims()[1], S = x.numel() / std::max<int64_t>(NC, 1);
    std::vector<double> v = to_f64(x), y(NC);
    for (int64_t p = 0; p < NC; ++p) {
      double acc = is_max ? -INFINITY : 0.0;
      for (int64_t s = 0; s < S; ++s) acc = is_max ? std::max(acc, v[p * S + s]) : acc + v[p * S + s];
      y[p] = is_max ? acc : acc / static_cast<double>(S);
    }
    Dims out(x.dims().size(), 1);
    out[0] = x.dims()[0];
    out[1] = x.dims()[1];
    return std::vector<Tensor>{from_f64(y, x.dtype(), out)};
  };
}

std::vector<Tensor> batchnorm_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  if (!ir::is_float(x.dtype())) fail(n, "needs a float input");
  if (n.attr_int("training_mode", 0) != 0) fail(n, "training_mode=1 is not supported: sabre runs inference only");
  const double eps = n.attr_float("epsilon", 1e-5);
  std::vector<double> v = to_f64(x), sc = to_f64(in(n, xs, 1)), b = to_f64(in(n, xs, 2)), mean = to_f64(in(n, xs, 3)),
                      var = to_f64(in(n, xs, 4));
  const int64_t N = x.dims()[0], C = x.rank() > 1 ? x.dims()[1] : 1;
  const int64_t S = x.numel() / std::max<int64_t>(N * C, 1);
  for (auto* p : {&sc, &b, &mean, &var})
    if (static_cast<int64_t>(p->size()) != C) fail(n, "scale, B, mean and var must have one value per channel");
  for (int64_t i = 0; i < N; ++i)
    for (int64_t c = 0; c < C; ++c) {
      const double k = sc[c] / std::sqrt(var[c] + eps);
      double* p = v.data() + (i * C + c) * S;
      for (int64_t s = 0; s < S; ++s) p[s] = (p[s] - mean[c]) * k + b[c];
    }
  return {from_f64(v, x.dtype(), x.dims())};
}

// Resize along one axis: each output coordinate reads up to two (or four) taps with weights.
struct Taps {
  std::vector<int64_t> idx;  // per output: `per` source indices (-1: extrapolation value)
  std::vector<double> wt;
  int64_t per = 1;
};

std::vector<Tensor> resize_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  const int64_t r = x.rank();
  const Tensor* roi_t = opt_in(xs, 1);
  const Tensor* scales_t = opt_in(xs, 2);
  const Tensor* sizes_t = opt_in(xs, 3);
  if (scales_t && scales_t->numel() == 0) scales_t = nullptr;
  if (sizes_t && sizes_t->numel() == 0) sizes_t = nullptr;
  if (!!scales_t == !!sizes_t) fail(n, "exactly one of scales and sizes must be given");
  const std::string mode = n.attr_string("mode", "nearest");
  const std::string ctm = n.attr_string("coordinate_transformation_mode", "half_pixel");
  const std::string nearest_mode = n.attr_string("nearest_mode", "round_prefer_floor");
  const std::string policy = n.attr_string("keep_aspect_ratio_policy", "stretch");
  const double extrapolation = n.attr_float("extrapolation_value", 0.0);
  const double cubic_a = n.attr_float("cubic_coeff_a", -0.75);
  const bool exclude_outside = n.attr_int("exclude_outside", 0) != 0;
  if (n.attr_int("antialias", 0) != 0) fail(n, "antialias=1 is not supported");
  if (mode != "nearest" && mode != "linear" && mode != "cubic") fail(n, "mode must be nearest, linear or cubic");
  std::vector<int64_t> axes = n.attr_ints("axes", {});
  if (axes.empty())
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  for (int64_t& a : axes) a = norm_axis(n, a, r);

  std::vector<double> scale(r, 1.0);
  Dims out = x.dims();
  if (scales_t) {
    std::vector<double> s = to_f64(*scales_t);
    if (s.size() != axes.size()) fail(n, "scales must have one entry per resized axis");
    for (size_t i = 0; i < axes.size(); ++i) {
      if (s[i] <= 0) fail(n, "scales must be positive");
      scale[axes[i]] = s[i];
      out[axes[i]] = static_cast<int64_t>(s[i] * static_cast<double>(x.dims()[axes[i]]));
    }
  } else {
    std::vector<int64_t> s = to_i64(*sizes_t);
    if (s.size() != axes.size()) fail(n, "sizes must have one entry per resized axis");
    for (size_t i = 0; i < axes.size(); ++i)
      scale[axes[i]] = static_cast<double>(s[i]) / static_cast<double>(x.dims()[axes[i]]);
    if (policy != "stretch") {
      if (policy != "not_larger" && policy != "not_smaller") fail(n, "keep_aspect_ratio_policy must be stretch, not_larger or not_smaller");
      double common = scale[axes[0]];
      for (int64_t a : axes) common = policy == "not_larger" ? std::min(common, scale[a]) : std::max(common, scale[a]);
      for (int64_t a : axes) {
        scale[a] = common;
        out[a] = static_cast<int64_t>(common * static_cast<double>(x.dims()[a]) + 0.5);  // round half up
      }
    } else {
      for (size_t i = 0; i < axes.size(); ++i) out[axes[i]] = s[i];
    }
  }
  std::vector<double> roi_start(r, 0.0), roi_end(r, 1.0);
  if (roi_t && roi_t->numel() > 0 && ctm == "tf_crop_and_resize") {
    std::vector<double> rv = to_f64(*roi_t);
    if (rv.size() != 2 * axes.size()) fail(n, "roi must have 2 entries per resized axis");
    for (size_t i = 0; i < axes.size(); ++i) {
      roi_start[axes[i]] = rv[i];
      roi_end[axes[i]] = rv[axes.size() + i];
    }
  }

  auto original_coord = [&](int64_t d, int64_t o) -> double {
    const double xo = static_cast<double>(o), len_in = static_cast<double>(x.dims()[d]);
    // ONNX measures the output length as scale * input length, unrounded: it differs from out[d]
    // when the scale does not divide evenly (align_corners at scale 0.6 maps by 3/1.4, not 3/1).
    const double s = scale[d], len_out = s * len_in;
    if (ctm == "half_pixel") return (xo + 0.5) / s - 0.5;
    if (ctm == "half_pixel_symmetric") {
      const double adj = static_cast<double>(out[d]) / len_out;
      const double center = len_in / 2;
      return center * (1 - adj) + (xo + 0.5) / s - 0.5;
    }
    if (ctm == "pytorch_half_pixel") return len_out != 1 ? (xo + 0.5) / s - 0.5 : -0.5;
    if (ctm == "align_corners") return len_out == 1 ? 0.0 : xo * (len_in - 1) / (len_out - 1);
    if (ctm == "asymmetric") return xo / s;
    if (ctm == "tf_half_pixel_for_nn") return (xo + 0.5) / s;  // opset 11-12 only; older models keep it
    if (ctm == "tf_crop_and_resize")
      return len_out != 1 ? roi_start[d] * (len_in - 1) + xo * (roi_end[d] - roi_start[d]) * (len_in - 1) / (len_out - 1)
                         : 0.5 * (roi_start[d] + roi_end[d]) * (len_in - 1);
    fail(n, "unknown coordinate_transformation_mode '" + ctm + "'");
  };

  std::vector<Taps> taps(r);
  for (int64_t d = 0; d < r; ++d) {
    Taps& t = taps[d];
    const int64_t len = x.dims()[d];
    t.per = mode == "nearest" ? 1 : mode == "linear" ? 2 : 4;
    for (int64_t o = 0; o < out[d]; ++o) {
      double c = original_coord(d, o);
      if (ctm == "tf_crop_and_resize" && (c < 0 || c > static_cast<double>(len - 1))) {
        for (int64_t k = 0; k < t.per; ++k) {
          t.idx.push_back(-1);
          t.wt.push_back(k == 0 ? 1.0 : 0.0);
        }
        continue;
      }
      auto clampi = [&](int64_t i) { return std::clamp<int64_t>(i, 0, len - 1); };
      if (mode == "nearest") {
        double f = std::floor(c);
        double frac = c - f;
        int64_t i;
        if (frac == 0) i = static_cast<int64_t>(f);
        else if (nearest_mode == "round_prefer_floor") i = static_cast<int64_t>(frac <= 0.5 ? f : f + 1);
        else if (nearest_mode == "round_prefer_ceil") i = static_cast<int64_t>(frac < 0.5 ? f : f + 1);
        else if (nearest_mode == "floor") i = static_cast<int64_t>(f);
        else if (nearest_mode == "ceil") i = static_cast<int64_t>(f + 1);
        else fail(n, "unknown nearest_mode '" + nearest_mode + "'");
        t.idx.push_back(clampi(i));
        t.wt.push_back(1.0);
      } else if (mode == "linear") {
        c = std::clamp(c, 0.0, static_cast<double>(len - 1));
        int64_t i0 = static_cast<int64_t>(std::floor(c));
        double frac = c - static_cast<double>(i0);
        t.idx.push_back(clampi(i0));
        t.idx.push_back(clampi(i0 + 1));
        t.wt.push_back(1 - frac);
        t.wt.push_back(frac);
      } else {
        int64_t i0 = static_cast<int64_t>(std::floor(c));
        double f = c - static_cast<double>(i0);
        const double A = cubic_a;
        auto w_near = [A](double s) { return ((A + 2) * s - (A + 3)) * s * s + 1; };
        auto w_far = [A](double s) { return ((A * s - 5 * A) * s + 8 * A) * s - 4 * A; };
        double w[4] = {w_far(f + 1), w_near(f), w_near(1 - f), w_far(2 - f)};
        int64_t ids[4] = {i0 - 1, i0, i0 + 1, i0 + 2};
        double wsum = 0;
        for (int k = 0; k < 4; ++k) {
          if (exclude_outside && (ids[k] < 0 || ids[k] >= len)) w[k] = 0;
          wsum += w[k];
        }
        for (int k = 0; k < 4; ++k) {
          t.idx.push_back(clampi(ids[k]));
          t.wt.push_back(exclude_outside && wsum != 0 ? w[k] / wsum : w[k]);
        }
      }
    }
  }

  // Separable: resize one axis at a time, in double.
  std::vector<double> cur = to_f64(x);
  Dims cur_dims = x.dims();
  for (int64_t d = 0; d < r; ++d) {
    if (out[d] == cur_dims[d] && mode == "nearest" && ctm != "tf_crop_and_resize") {
      bool identity = true;
      for (int64_t o = 0; o < out[d] && identity; ++o) identity = taps[d].idx[o] == o;
      if (identity) continue;
    }
    AxisSplit s = split_at(cur_dims, d);
    const Taps& t = taps[d];
    std::vector<double> nxt(static_cast<size_t>(s.outer * out[d] * s.inner));
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t j = 0; j < out[d]; ++j)
        for (int64_t i = 0; i < s.inner; ++i) {
          double acc = 0;
          for (int64_t k = 0; k < t.per; ++k) {
            int64_t src = t.idx[j * t.per + k];
            double w = t.wt[j * t.per + k];
            if (src < 0) {
              acc = extrapolation;
              break;
            }
            if (w != 0) acc += w * cur[(o * s.dim + src) * s.inner + i];
          }
          nxt[(o * out[d] + j) * s.inner + i] = acc;
        }
    cur = std::move(nxt);
    cur_dims[d] = out[d];
  }
  if (!ir::is_float(x.dtype()))
    for (double& e : cur) e = std::nearbyint(e);
  return {from_f64(cur, x.dtype(), out)};
}

}  // namespace

void register_nn_ops(Table& t) {
  auto add = [&](const char* op, Kernel k) { t[{"", op}] = std::move(k); };
  add("MatMul", matmul_kernel);
  add("Gemm", gemm_kernel);
  add("Softmax", softmax(false));
  add("LogSoftmax", softmax(true));
  add("Hardmax", hardmax_kernel);
  add("InstanceNormalization", instancenorm_kernel);
  add("LayerNormalization", layernorm_kernel);
  add("ReduceSum", reduce(Reduce::sum));
  add("ReduceMean", reduce(Reduce::mean));
  add("ReduceMax", reduce(Reduce::max));
  add("ReduceMin", reduce(Reduce::min));
  add("ReduceProd", reduce(Reduce::prod));
  add("ReduceL1", reduce(Reduce::l1));
  add("ReduceL2", reduce(Reduce::l2));
  add("ReduceSumSquare", reduce(Reduce::sum_square));
  add("ReduceLogSumExp", reduce(Reduce::log_sum_exp));
  add("ReduceLogSum", reduce(Reduce::log_sum));
  add("Conv", conv_kernel);
  add("MaxPool", pool(true));
  add("AveragePool", pool(false));
  add("GlobalAveragePool", global_pool(false));
  add("GlobalMaxPool", global_pool(true));
  add("BatchNormalization", batchnorm_kernel);
  add("Resize", resize_kernel);
}

}  // namespace sabre::reference::detail
