// GELU with the exact erf, gelu(x) = 0.5*x*(1 + erf(x/sqrt(2))) = x*Phi(x), in f32 with one exp2
// and no division: the math of the CUTLASS epilogue functor SabreGeluErf (emit_common.cpp pastes
// this text into every gelu_erf kernel) and of the native elementwise f_gelu_erf (ew_device.cuh,
// which the interpreter includes and the generated kernels paste). Plain C++ or CUDA: the host
// form, for tests, uses exp2f; the device form ex2.approx.ftz. Generated sources paste this text,
// so it stays ASCII. Tests: tests/unit/gelu_erf_test.cpp
//
// Phi(x) for x < 0 and 1 - Phi(x) for x >= 0 are both the tail q = Phi(-|x|), so
//   gelu(x) = max(x, 0) - |x|*q,   q = 2^P(|x|),
// P of degree 8 fitted to log2 Phi(-a) on [0, 4.25] (weighted minimax: |dPhi| <= 1e-7 where q is
// large, relative error of q about 1e-5 in the tail), P(0) = -1 so q(0) = 1/2. That is 14 PTX
// arithmetic instructions with one ex2; 0.5*x*(1 + erff(x/sqrt(2))) is 28 and a branch (CUDA 13:
// nine selects between two polynomials) and cancels for negative x, where this form keeps q's
// relative accuracy. Abramowitz-Stegun 7.1.26 needs a reciprocal as well as the exp: two MUFU ops.
// Error, as erf's: |d erf| = 2|dPhi| <= 1.5e-7 on the host; ex2.approx (<= 2 ulp) adds <= 2.4e-7 on
// the device. Beyond 4.25 P's negative leading term keeps q falling: exactly 0 from |x| ~ 11.2.
// Special values: NaN -> NaN, +inf -> +inf, -inf -> +0 (the min() keeps inf*0 out), +-0 -> +0.
//
// gelu_erf16: the same form with P of degree 5 (minimax on [0, 4], |dP| <= 7.9e-5, so q's relative
// error <= 5.5e-5 and |d gelu| <= 2.4e-5*|x|), for results rounded to f16 or bf16 (half an ulp: >=
// 2.4e-4 and 2e-3 relative): three FMAs fewer. Where an epilogue's ALU work is not hidden under the
// other warpgroup's mainloop it sets the GEMM's time (bench/results/gelu_epilogue_*).
// Its f16 outputs are the correctly rounded reference's or one ulp off it, as are its bf16 outputs
// down to -4.5 (below, |d gelu| <= 1e-7). Same special values; q falls to 0 by |x| ~ 12.7.
#pragma once

#if !defined(__CUDACC__)
#include <cmath>
#endif

#if defined(__CUDACC__)
#define SABRE_GELU_FN __host__ __device__ __forceinline__
#else
#define SABRE_GELU_FN inline
#endif

namespace sabre_gelu {

// 2^r: ex2.approx.ftz on the device (one MUFU op, <= 2 ulp), exp2f on the host.
SABRE_GELU_FN float exp2_fast(float r) {
#if defined(__CUDA_ARCH__)
  float q;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(q) : "f"(r));
  return q;
#else
  return exp2f(r);
#endif
}

// q = Phi(-a) = 0.5*erfc(a/sqrt(2)) for a >= 0, as 2^P(a).
SABRE_GELU_FN float normal_tail(float a) {
  float r = -1.4374834e-06f;
  r = fmaf(r, a, 2.2655893e-05f);
  r = fmaf(r, a, -1.08016764e-04f);
  r = fmaf(r, a, -3.186128e-04f);
  r = fmaf(r, a, 7.2849193e-03f);
  r = fmaf(r, a, -5.2633405e-02f);
  r = fmaf(r, a, -4.5917004e-01f);
  r = fmaf(r, a, -1.1511086e+00f);
  return exp2_fast(fmaf(r, a, -1.0f));
}

// q = Phi(-a) to 5.5e-5 relative, for 16-bit results (see the top).
SABRE_GELU_FN float normal_tail16(float a) {
  float r = -3.66840948e-04f;
  r = fmaf(r, a, 6.27377629e-03f);
  r = fmaf(r, a, -4.97443080e-02f);
  r = fmaf(r, a, -4.62021470e-01f);
  r = fmaf(r, a, -1.15025210e+00f);
  return exp2_fast(fmaf(r, a, -1.0f));
}

// max(x, 0) - |x|*q with q = Phi(-|x|). q is exactly 0 well before 32, so the clamp changes only
// +-inf's inf*0 into 0.
SABRE_GELU_FN float gelu_from_tail(float x, float q) { return fmaf(-fminf(fabsf(x), 32.0f), q, fmaxf(x, 0.0f)); }

// x*Phi(x).
SABRE_GELU_FN float gelu_erf(float x) { return gelu_from_tail(x, normal_tail(fabsf(x))); }

// x*Phi(x) for results rounded to f16 or bf16.
SABRE_GELU_FN float gelu_erf16(float x) { return gelu_from_tail(x, normal_tail16(fabsf(x))); }

}  // namespace sabre_gelu

#undef SABRE_GELU_FN
