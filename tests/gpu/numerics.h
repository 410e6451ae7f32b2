// How close a GPU GEMM or conv result must be to the double-precision CPU reference, and the one
// comparison the GPU tests share. The bounds follow from the dtypes and the reduction length, not
// from the errors a run happened to show, and every element is held to its own bound, so a single
// wrong element fails where a relative L2 error over thousands of elements would hide it.
// Host code only: tests/unit/gpu_numerics_test.cpp checks it with planted errors.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

namespace sabre::gpu_test {

// The number formats a kernel rounds to: storage dtypes, and TF32, the tensor cores' multiply format
// for f32 operands.
enum class Num { f32, tf32, f16, bf16 };

// Unit roundoff (half an ulp at 1) under round-to-nearest.
constexpr double unit_roundoff(Num n) {
  switch (n) {
    case Num::f32: return 0x1p-24;
    case Num::tf32: return 0x1p-11;
    case Num::f16: return 0x1p-11;
    case Num::bf16: return 0x1p-8;
  }
  return 1;
}

// What a result may differ by: each element |got - ref| <= atol + rtol * |ref|, and the relative L2
// error ||got - ref|| / ||ref|| <= rel_l2.
struct Bound {
  double atol = 0, rtol = 0, rel_l2 = 0;
};

// The typical size of a sum of k products before the epilogue: |alpha| * sqrt(k) * rms(a) * rms(b)
// for operands of mean zero, plus the RMS of the epilogue's other terms (bias, beta * residual).
inline double dot_scale(double alpha, int64_t k, double rms_a, double rms_b, double rms_other = 0) {
  return std::fabs(alpha) * std::sqrt(double(k)) * rms_a * rms_b + rms_other;
}

template <class T>
double rms(const std::vector<T>& v) {
  double s = 0;
  for (const T& x : v) s += double(x) * double(x);
  return v.empty() ? 0 : std::sqrt(s / double(v.size()));
}

// One output element of a GEMM or conv: y = epilogue(alpha * sum of k products). The products are of
// `mul` operands (f16 and bf16 products are exact in f32; f32 operands are rounded to TF32) and are
// accumulated in f32; the epilogue runs in f32 with approximate transcendental functions (tanh.approx
// is within 2^-11 relative); y is stored as `out`. `scale` is dot_scale().
//  - Storing y rounds it by at most u(out) * |y|: the relative part.
//  - Rounding the operands (u(tf32) each), the f32 accumulation (a random walk of k roundings, about
//    u(f32) * sqrt(k) of the sum's scale) and the activation's approximation are errors on the scale
//    of the sum, not of y (y may cancel to near zero): the absolute part, 4 times their sum so a
//    Gaussian-like tail over 10^5 elements stays inside.
//  - Over a whole output the errors average: the relative L2 bound is 1.5 times the RMS-like sum of
//    the output rounding, one operand rounding and the accumulation.
//  - Serial split-K hands each slice's partial sum to the next through Y, rounded to `out`: `splits`
//    slices add splits - 1 roundings of partial sums (of RMS sqrt(i / splits) of the whole's, i < splits).
inline Bound gemm_bound(Num mul, Num out, int64_t k, double scale, int serial_splits = 1) {
  const double u_out = unit_roundoff(out);
  const double u_mul = mul == Num::tf32 ? unit_roundoff(Num::tf32) : 0;
  const double u_acc = unit_roundoff(Num::f32) * std::sqrt(double(std::max<int64_t>(k, 1)));
  const double u_act = 0x1p-11;
  const double u_split = u_out * std::sqrt(std::max(serial_splits - 1, 0) / 2.0);
  Bound b;
  b.rtol = u_out;
  b.atol = 4 * (2 * u_mul + u_acc + u_act + u_split) * scale;
  b.rel_l2 = 1.5 * (u_out + u_mul + u_acc + u_split);
  return b;
}

// The outcome of comparing n elements.
struct Comparison {
  int64_t n = 0;
  int64_t nonfinite = 0;     // got NaN or Inf where the reference is finite (unwritten: poisoned)
  int64_t over = 0;          // finite elements past their bound
  int64_t worst = -1;        // the element furthest past (or nearest to) its bound
  double worst_got = 0, worst_ref = 0, worst_ratio = 0;  // |got - ref| / bound there
  double max_abs = 0;        // largest |got - ref| over finite elements
  double rel_l2 = 0;
  Bound bound;
  bool ok() const { return n > 0 && nonfinite == 0 && over == 0 && rel_l2 <= bound.rel_l2; }
  // One line: the errors, the bound, and where the worst element is.
  std::string summary() const {
    char buf[384];
    std::snprintf(buf, sizeof buf,
                  "rel L2 %.2e (bound %.1e), max |err| %.2e; %lld of %lld elements past |err| <= %.1e + %.1e*|ref|, "
                  "%lld non-finite; worst at %lld: got %.6g want %.6g (%.2f of its bound)",
                  rel_l2, bound.rel_l2, max_abs, (long long)over, (long long)n, bound.atol, bound.rtol,
                  (long long)nonfinite, (long long)worst, worst_got, worst_ref, worst_ratio);
    return buf;
  }
};

// got(i) and ref(i) for i in [0, n): callables, so a test compares strided or sampled outputs in place.
template <class Got, class Ref>
Comparison compare_with(int64_t n, Got got, Ref ref, const Bound& b) {
  Comparison c;
  c.n = n;
  c.bound = b;
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double g = got(i), r = ref(i);
    if (!std::isfinite(r)) {  // a reference Inf or NaN must be matched exactly
      if (!(g == r || (std::isnan(g) && std::isnan(r)))) ++c.over;
      continue;
    }
    if (!std::isfinite(g)) {
      ++c.nonfinite;
      if (c.worst_ratio != std::numeric_limits<double>::infinity())
        c.worst = i, c.worst_got = g, c.worst_ref = r, c.worst_ratio = std::numeric_limits<double>::infinity();
      continue;
    }
    const double err = std::fabs(g - r), lim = b.atol + b.rtol * std::fabs(r);
    const double ratio = lim > 0 ? err / lim : (err > 0 ? std::numeric_limits<double>::infinity() : 0);
    c.over += !(err <= lim);
    if (ratio > c.worst_ratio || c.worst < 0) c.worst = i, c.worst_got = g, c.worst_ref = r, c.worst_ratio = ratio;
    c.max_abs = std::max(c.max_abs, err);
    num += (g - r) * (g - r);
    den += r * r;
  }
  c.rel_l2 = den > 0 ? std::sqrt(num / den) : (num > 0 ? std::numeric_limits<double>::infinity() : 0);
  return c;
}

template <class G, class R>
Comparison compare(const std::vector<G>& got, const std::vector<R>& ref, const Bound& b) {
  if (got.size() != ref.size()) {
    Comparison c;
    c.bound = b;
    c.over = 1;
    c.n = int64_t(std::max(got.size(), ref.size()));
    return c;
  }
  return compare_with(int64_t(got.size()), [&](int64_t i) { return double(got[size_t(i)]); },
                      [&](int64_t i) { return double(ref[size_t(i)]); }, b);
}

}  // namespace sabre::gpu_test
