// What the two conv kernel GPU tests (conv_gpu_test.cpp: sm80; conv_sm90_gpu_test.cpp: sm90) share:
// f16/bf16 bits, random tensors that are never zero, the activations, the double-precision
// reference conv with the fused epilogue, the check of Y against it (bounds from numerics.h), and a
// device buffer that frees itself.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "backends/cutlass/kernel_spec.h"
#include "ir/dtype.h"
#include "numerics.h"

namespace sabre::conv_test {

namespace cb = sabre::cutlass_backend;

constexpr float kAlpha = 0.75f, kBeta = 0.5f;
constexpr int64_t kGuard = 256;  // poisoned elements after Y that no kernel may write

inline uint16_t to_bits(cb::Elem e, float v) {
  return e == cb::Elem::f16 ? sabre::ir::float_to_half(v) : sabre::ir::float_to_bf16(v);
}
inline float from_bits(cb::Elem e, uint16_t b) {
  return e == cb::Elem::f16 ? sabre::ir::half_to_float(b) : sabre::ir::bf16_to_float(b);
}
inline uint16_t nan_bits(cb::Elem e) { return e == cb::Elem::f16 ? 0x7e00 : 0x7fc0; }

// Random values in [-1, -0.05] U [0.05, 1] (never zero), rounded to the dtype; host bits and the doubles.
inline void random_tensor(cb::Elem e, size_t count, std::mt19937& rng, std::vector<uint16_t>& bits, std::vector<double>& vals) {
  std::uniform_real_distribution<float> mag(0.05f, 1.0f);
  bits.resize(count);
  vals.resize(count);
  for (size_t i = 0; i < count; ++i) {
    float v = mag(rng) * (rng() & 1 ? 1.0f : -1.0f);
    bits[i] = to_bits(e, v);
    vals[i] = from_bits(e, bits[i]);
  }
}

inline double activate(cb::Act a, double x) {
  switch (a) {
    case cb::Act::none: return x;
    case cb::Act::relu: return x > 0 ? x : 0;
    case cb::Act::silu: return x / (1 + std::exp(-x));
    case cb::Act::sigmoid: return 1 / (1 + std::exp(-x));
    case cb::Act::hardswish: return x * std::min(std::max(x + 3, 0.0), 6.0) / 6;
    case cb::Act::relu6: return std::min(std::max(x, 0.0), 6.0);
    case cb::Act::gelu_erf: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case cb::Act::gelu_tanh:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case cb::Act::kCount: break;
  }
  return NAN;
}

// A test Problem's groups: its `groups` member where it has one, else 1.
template <class Problem>
int64_t groups_of(const Problem& pb) {
  if constexpr (requires { pb.groups; }) return pb.groups;
  else return 1;
}

// Y = act(alpha*conv + bias + beta*R) or act(alpha*conv + bias) + beta*R, in double; grouped convs
// read the filter as [k, r, s, c/groups], output channel k summing over its group's input channels.
template <class Problem>  // the tests' Problem: n..dil_w and p(), q(); groups optional
std::vector<double> reference(const Problem& pb, const cb::EpilogueSpec& epi, const std::vector<double>& x,
                              const std::vector<double>& w, const std::vector<double>& bias,
                              const std::vector<double>& res) {
  const int64_t P = pb.p(), Q = pb.q();
  std::vector<double> y(size_t(pb.n * P * Q * pb.k));
  for (int64_t n = 0; n < pb.n; ++n)
    for (int64_t p = 0; p < P; ++p)
      for (int64_t q = 0; q < Q; ++q)
        for (int64_t k = 0; k < pb.k; ++k) {
          double acc = 0;
          const int64_t cg = pb.c / groups_of(pb), g = k / (pb.k / groups_of(pb));
          for (int64_t r = 0; r < pb.r; ++r) {
            int64_t hi = p * pb.stride_h - pb.pad_h + r * pb.dil_h;
            if (hi < 0 || hi >= pb.h) continue;
            for (int64_t s = 0; s < pb.s; ++s) {
              int64_t wi = q * pb.stride_w - pb.pad_w + s * pb.dil_w;
              if (wi < 0 || wi >= pb.w) continue;
              const double* xp = &x[size_t(((n * pb.h + hi) * pb.w + wi) * pb.c + g * cg)];
              const double* wp = &w[size_t(((k * pb.r + r) * pb.s + s) * cg)];
              for (int64_t c = 0; c < cg; ++c) acc += xp[c] * wp[c];
            }
          }
          size_t o = size_t(((n * P + p) * Q + q) * pb.k + k);
          double v = kAlpha * acc;
          if (epi.bias) v += bias[size_t(k)];
          if (epi.residual == cb::Residual::before_act) v += kBeta * res[o];
          v = activate(epi.act, v);
          if (epi.residual == cb::Residual::after_act) v += kBeta * res[o];
          y[o] = v;
        }
  return y;
}

// Y's bits (ycount elements, then kGuard that must stay poisoned) against `ref`: every element within
// the bound numerics.h gives a sum of r·s·c products of dtype `e` stored as `e` (serial_splits: the
// slices of a serial split-K), the relative L2 error within its own, nothing unwritten, nothing past
// Y written. Prints one line; returns whether all holds.
template <class Problem>
bool check_y(const std::string& kernel, const Problem& pb, cb::Elem e, const cb::EpilogueSpec& epi, int serial_splits,
             const std::vector<uint16_t>& yb, size_t ycount, const std::vector<double>& ref,
             const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& bias,
             const std::vector<double>& res) {
  namespace sg = sabre::gpu_test;
  const sg::Num num = e == cb::Elem::f16 ? sg::Num::f16 : sg::Num::bf16;
  const int64_t k = pb.r * pb.s * (pb.c / groups_of(pb));
  const double scale = sg::dot_scale(kAlpha, k, sg::rms(x), sg::rms(w),
                                     (epi.bias ? sg::rms(bias) : 0) +
                                         (epi.residual != cb::Residual::none ? kBeta * sg::rms(res) : 0));
  const sg::Comparison c = sg::compare_with(
      int64_t(ycount), [&](int64_t i) { return double(from_bits(e, yb[size_t(i)])); },
      [&](int64_t i) { return ref[size_t(i)]; }, sg::gemm_bound(num, num, k, scale, serial_splits));
  int64_t guard_written = 0;
  for (size_t i = ycount; i < yb.size(); ++i) guard_written += yb[i] != nan_bits(e);
  const bool ok = c.ok() && guard_written == 0;
  std::printf("%s %s %s: %s%s\n", ok ? "ok  " : "FAIL", kernel.c_str(), pb.label, c.summary().c_str(),
              guard_written ? (", " + std::to_string(guard_written) + " elements past Y written").c_str() : "");
  return ok;
}

struct DeviceBuf {
  void* p = nullptr;
  DeviceBuf() = default;
  DeviceBuf(const DeviceBuf&) = delete;
  DeviceBuf& operator=(const DeviceBuf&) = delete;
  ~DeviceBuf() {
    if (p) cudaFree(p);
  }
};

}  // namespace sabre::conv_test
