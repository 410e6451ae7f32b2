// Detection and sampling kernels: NonMaxSuppression and GridSample, following the ONNX spec's
// reference semantics (greedy suppression per batch and class; grid coordinates in [-1, 1]).
// Tests: tests/unit/reference_index_test.cpp
#include <algorithm>
#include <cmath>
#include <numeric>

#include "reference/kernels.h"

namespace sabre::reference::detail {
namespace {

double scalar_or(const Tensor* t, double def) { return t && t->numel() > 0 ? t->get_f64(0) : def; }

// True when the two boxes overlap by more than `thr` (intersection over union).
bool suppresses(const double* a, const double* b, bool center, double thr) {
  auto extent = [center](const double* p, int axis, double* lo, double* hi) {
    if (center) {  // [x_center, y_center, width, height]
      const double c = p[axis == 0 ? 0 : 1], half = p[axis == 0 ? 2 : 3] / 2;
      *lo = c - half;
      *hi = c + half;
    } else {  // [y1, x1, y2, x2], corners in either order
      const double u = p[axis == 0 ? 1 : 0], v = p[axis == 0 ? 3 : 2];
      *lo = std::min(u, v);
      *hi = std::max(u, v);
    }
  };
  double ax0, ax1, bx0, bx1, ay0, ay1, by0, by1;
  extent(a, 0, &ax0, &ax1);
  extent(b, 0, &bx0, &bx1);
  const double ix0 = std::max(ax0, bx0), ix1 = std::min(ax1, bx1);
  if (ix1 <= ix0) return false;
  extent(a, 1, &ay0, &ay1);
  extent(b, 1, &by0, &by1);
  const double iy0 = std::max(ay0, by0), iy1 = std::min(ay1, by1);
  if (iy1 <= iy0) return false;
  const double inter = (ix1 - ix0) * (iy1 - iy0);
  const double area_a = (ax1 - ax0) * (ay1 - ay0), area_b = (bx1 - bx0) * (by1 - by0), uni = area_a + area_b - inter;
  if (inter <= 0 || area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > thr;
}

std::vector<Tensor> nms_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& boxes = in(n, xs, 0);
  const Tensor& scores = in(n, xs, 1);
  if (boxes.rank() != 3 || boxes.dims()[2] != 4) fail(n, "boxes must be [batches, boxes, 4]");
  if (scores.rank() != 3 || scores.dims()[0] != boxes.dims()[0] || scores.dims()[2] != boxes.dims()[1])
    fail(n, "scores must be [batches, classes, boxes] matching boxes");
  const int64_t max_out = std::max<int64_t>(0, static_cast<int64_t>(scalar_or(opt_in(xs, 2), 0)));
  const double iou = scalar_or(opt_in(xs, 3), 0);
  const Tensor* st = opt_in(xs, 4);
  const bool has_score_thr = st && st->numel() > 0;
  const double score_thr = scalar_or(st, 0);
  const bool center = n.attr_int("center_point_box", 0) != 0;
  const int64_t B = boxes.dims()[0], N = boxes.dims()[1], C = scores.dims()[1];
  const std::vector<double> bv = to_f64(boxes), sv = to_f64(scores);
  std::vector<int64_t> out;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      const double* s = &sv[static_cast<size_t>((b * C + c) * N)];
      std::vector<int64_t> cand;
      for (int64_t i = 0; i < N; ++i)
        if (!has_score_thr || s[i] > score_thr) cand.push_back(i);
      // Highest score first; equal scores keep the lower box index first.
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t x, int64_t y) { return s[x] > s[y]; });
      std::vector<int64_t> kept;
      for (int64_t i : cand) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        const double* bi = &bv[static_cast<size_t>((b * N + i) * 4)];
        bool ok = std::none_of(kept.begin(), kept.end(),
                               [&](int64_t k) { return suppresses(bi, &bv[static_cast<size_t>((b * N + k) * 4)], center, iou); });
        if (!ok) continue;
        kept.push_back(i);
        out.insert(out.end(), {b, c, i});
      }
    }
  return {from_i64(out, DType::i64, {static_cast<int64_t>(out.size() / 3), 3})};
}

// Reflects x into [lo, hi] by folding at the borders.
double reflect(double x, double lo, double hi) {
  const double rng = hi - lo;
  if (rng <= 0) return lo;
  if (x < lo) {
    const double dx = lo - x;
    const int64_t k = static_cast<int64_t>(dx / rng);
    const double r = dx - static_cast<double>(k) * rng;
    return k % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double dx = x - hi;
    const int64_t k = static_cast<int64_t>(dx / rng);
    const double r = dx - static_cast<double>(k) * rng;
    return k % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

void cubic_coeffs(double t, double w[4]) {
  const double A = -0.75;
  auto near = [A](double s) { return ((A + 2) * s - (A + 3)) * s * s + 1; };
  auto far = [A](double s) { return ((A * s - 5 * A) * s + 8 * A) * s - 4 * A; };
  w[0] = far(t + 1);
  w[1] = near(t);
  w[2] = near(1 - t);
  w[3] = far(2 - t);
}

std::vector<Tensor> grid_sample_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  const Tensor& grid = in(n, xs, 1);
  const int64_t sp = x.rank() - 2;
  if (sp < 1 || grid.rank() != x.rank() || grid.dims()[0] != x.dims()[0] || grid.dims().back() != sp)
    fail(n, "X must be [N, C, d...] and grid [N, out..., " + std::to_string(std::max<int64_t>(sp, 0)) + "]");
  std::string mode = n.attr_string("mode", "linear");
  if (mode == "bilinear") mode = "linear";
  if (mode == "bicubic") mode = "cubic";
  const std::string pad = n.attr_string("padding_mode", "zeros");
  if (mode != "linear" && mode != "nearest" && mode != "cubic") fail(n, "mode must be linear, nearest or cubic");
  if (pad != "zeros" && pad != "border" && pad != "reflection") fail(n, "padding_mode must be zeros, border or reflection");
  const bool align = n.attr_int("align_corners", 0) != 0;
  const int64_t N = x.dims()[0], C = x.dims()[1];
  const Dims in_sp(x.dims().begin() + 2, x.dims().end()), out_sp(grid.dims().begin() + 1, grid.dims().end() - 1);
  const int64_t in_n = numel(in_sp), out_n = numel(out_sp);
  const Dims in_st = strides_of(in_sp);
  const std::vector<double> xv = to_f64(x), gv = to_f64(grid);
  Dims od = {N, C};
  od.insert(od.end(), out_sp.begin(), out_sp.end());
  std::vector<double> y(static_cast<size_t>(numel(od)));
  std::vector<double> lo(sp), hi(sp);
  for (int64_t d = 0; d < sp; ++d) {
    lo[d] = align ? 0.0 : -0.5;
    hi[d] = align ? static_cast<double>(in_sp[d] - 1) : static_cast<double>(in_sp[d]) - 0.5;
  }
  // The input index along axis d for tap i, or -1 for a zero (outside, zeros padding).
  auto tap_index = [&](int64_t d, int64_t i) -> int64_t {
    const int64_t len = in_sp[d];
    if (i >= 0 && i < len) return i;
    if (pad == "zeros") return -1;
    if (pad == "border") return std::clamp<int64_t>(i, 0, len - 1);
    return std::clamp<int64_t>(static_cast<int64_t>(reflect(static_cast<double>(i), lo[d], hi[d])), 0, len - 1);
  };
  const int per = mode == "nearest" ? 1 : mode == "linear" ? 2 : 4;
  std::vector<std::vector<int64_t>> idx(sp, std::vector<int64_t>(per));
  std::vector<std::vector<double>> wt(sp, std::vector<double>(per));
  for (int64_t b = 0; b < N; ++b)
    for (int64_t o = 0; o < out_n; ++o) {
      for (int64_t d = 0; d < sp; ++d) {
        // The grid's last axis lists coordinates innermost-axis first (x, then y, ...).
        const double g = gv[static_cast<size_t>((b * out_n + o) * sp + (sp - 1 - d))];
        const double len = static_cast<double>(in_sp[d]);
        double c = align ? (g + 1) / 2 * (len - 1) : ((g + 1) * len - 1) / 2;
        if (mode == "nearest") c = std::nearbyint(c);
        if (c < lo[d] || c > hi[d]) {
          if (pad == "border") c = std::clamp(c, 0.0, len - 1);
          else if (pad == "reflection") c = reflect(c, lo[d], hi[d]);
        }
        if (mode == "nearest") {
          idx[d][0] = tap_index(d, static_cast<int64_t>(c));  // truncation, as the spec's int cast
          wt[d][0] = 1;
        } else {
          const double f = std::floor(c), t = c - f;
          const int64_t i0 = static_cast<int64_t>(f);
          if (mode == "linear") {
            idx[d] = {tap_index(d, i0), tap_index(d, i0 + 1)};
            wt[d] = {1 - t, t};
          } else {
            double w[4];
            cubic_coeffs(t, w);
            for (int k = 0; k < 4; ++k) {
              idx[d][k] = tap_index(d, i0 - 1 + k);
              wt[d][k] = w[k];
            }
          }
        }
      }
      int64_t taps = 1;
      for (int64_t d = 0; d < sp; ++d) taps *= per;
      for (int64_t c = 0; c < C; ++c) {
        const double* xp = &xv[static_cast<size_t>((b * C + c) * in_n)];
        double acc = 0;
        for (int64_t t = 0; t < taps; ++t) {
          int64_t rem = t, off = 0;
          double w = 1;
          for (int64_t d = sp - 1; d >= 0 && off >= 0; --d) {
            const int64_t k = rem % per;
            rem /= per;
            if (idx[d][k] < 0) off = -1;
            else {
              off += idx[d][k] * in_st[d];
              w *= wt[d][k];
            }
          }
          if (off >= 0) acc += w * xp[off];
        }
        y[static_cast<size_t>((b * C + c) * out_n + o)] = acc;
      }
    }
  return {from_f64(y, x.dtype(), od)};
}

// Scatters X into a zero tensor at MaxPool's flat indices.
std::vector<Tensor> max_unpool_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  const Tensor& it = in(n, xs, 1);
  if (x.rank() < 3 || it.dims() != x.dims()) fail(n, "X must be [N, C, d...] and I of the same shape");
  const int64_t sp = x.rank() - 2;
  const Dims kernel = n.attr_ints("kernel_shape", {}), strides = n.attr_ints("strides", Dims(sp, 1)),
             pads = n.attr_ints("pads", Dims(2 * sp, 0));
  if (static_cast<int64_t>(kernel.size()) != sp || static_cast<int64_t>(strides.size()) != sp ||
      static_cast<int64_t>(pads.size()) != 2 * sp)
    fail(n, "kernel_shape and strides need one entry per spatial axis, pads two");
  Dims od = {x.dims()[0], x.dims()[1]};
  for (int64_t d = 0; d < sp; ++d) od.push_back((x.dims()[d + 2] - 1) * strides[d] + kernel[d] - pads[d] - pads[d + sp]);
  for (int64_t d : od)
    if (d < 0) fail(n, "the output shape is negative");
  // Indices address the shape the pooling saw (the default); an output_shape pads its ends.
  const Dims def = od, def_st = strides_of(def);
  if (const Tensor* os = opt_in(xs, 2); os && os->numel()) {
    od = to_i64(*os);
    if (static_cast<int64_t>(od.size()) != x.rank()) fail(n, "output_shape must have X's rank");
    for (size_t d = 0; d < od.size(); ++d)
      if (od[d] < def[d]) fail(n, "output_shape is smaller than the pooled input's shape");
  }
  std::vector<int64_t> idx = to_i64(it);
  const Dims out_st = strides_of(od);
  for (int64_t& i : idx) {
    if (i < 0 || i >= numel(def)) fail(n, "index " + std::to_string(i) + " is outside the pooled input");
    int64_t rem = i, o = 0;
    for (size_t d = 0; d < def.size(); ++d) {
      o += rem / def_st[d] * out_st[d];
      rem %= def_st[d];
    }
    i = o;
  }
  const int64_t total = numel(od);
  std::vector<double> y(static_cast<size_t>(total), 0.0);
  const std::vector<double> v = to_f64(x);
  for (size_t e = 0; e < idx.size(); ++e) {
    if (idx[e] < 0 || idx[e] >= total) fail(n, "index " + std::to_string(idx[e]) + " is outside the output");
    y[static_cast<size_t>(idx[e])] = v[e];
  }
  return {from_f64(y, x.dtype(), od)};
}

// DFT along one axis of [..., N, 1 or 2] (real or complex), to [..., K, 2].
std::vector<Tensor> dft_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  const int64_t r = x.rank();
  if (r < 2 || (x.dims().back() != 1 && x.dims().back() != 2)) fail(n, "input must be [..., signal, 1 or 2]");
  int64_t axis = n.attr_int("axis", n.has_attr("axis") ? 1 : -2);
  if (const Tensor* a = opt_in(xs, 2); a && a->numel()) axis = a->get_i64(0);
  axis = norm_axis(n, axis, r);
  if (axis == r - 1) fail(n, "axis must not be the last (real/imaginary) axis");
  const bool inverse = n.attr_int("inverse", 0) != 0, onesided = n.attr_int("onesided", 0) != 0;
  const int64_t len_in = x.dims()[axis];
  int64_t N = len_in;
  if (const Tensor* l = opt_in(xs, 1); l && l->numel()) N = l->get_i64(0);
  if (N < 1) fail(n, "dft_length must be positive");
  const int64_t K = onesided ? N / 2 + 1 : N, comp = x.dims().back();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dims()[d];
  for (int64_t d = axis + 1; d < r - 1; ++d) inner *= x.dims()[d];
  const std::vector<double> v = to_f64(x);
  Dims od = x.dims();
  od[axis] = K;
  od.back() = 2;
  std::vector<double> y(static_cast<size_t>(numel(od)));
  const double pi = 3.14159265358979323846, sign = inverse ? 1 : -1;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i)
      for (int64_t k = 0; k < K; ++k) {
        double re = 0, im = 0;
        for (int64_t t = 0; t < std::min(N, len_in); ++t) {
          const size_t at = static_cast<size_t>(((o * len_in + t) * inner + i) * comp);
          const double xr = v[at], xi = comp == 2 ? v[at + 1] : 0;
          const double ang = sign * 2 * pi * static_cast<double>((k * t) % N) / static_cast<double>(N);
          re += xr * std::cos(ang) - xi * std::sin(ang);
          im += xr * std::sin(ang) + xi * std::cos(ang);
        }
        if (inverse) {
          re /= static_cast<double>(N);
          im /= static_cast<double>(N);
        }
        const size_t out = static_cast<size_t>(((o * K + k) * inner + i) * 2);
        y[out] = re;
        y[out + 1] = im;
      }
  return {from_f64(y, x.dtype(), od)};
}

}  // namespace

void register_vision_ops(Table& t) {
  t[{"", "MaxUnpool"}] = max_unpool_kernel;
  t[{"", "DFT"}] = dft_kernel;
  t[{"", "NonMaxSuppression"}] = nms_kernel;
  t[{"", "GridSample"}] = grid_sample_kernel;
}

}  // namespace sabre::reference::detail
