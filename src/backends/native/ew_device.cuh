// Device helpers of elementwise-chain kernels: loads/stores with f32 math, the op formulas, and
// the index math of SabreEwParams. Shared by the interpreter (elementwise.cu) and pasted, with
// ew_abi.h and backends/gelu_erf.h, into every generated kernel source, so both paths compute with
// the same formulas. Needs those two ahead of it, else only CUDA toolkit headers, on purpose.
// Tests: tests/gpu/native_elementwise_test.cpp
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace sabre_ew {

// Storage types by sabre::ir::DType number (f32, f16, bf16, f64, i64, i32, i8, u8, bool).
enum : int { kF32 = 0, kF16 = 1, kBF16 = 2, kF64 = 3, kI64 = 4, kI32 = 5, kI8 = 6, kU8 = 7, kBool = 8 };

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f(long long v) { return static_cast<float>(v); }
__device__ __forceinline__ float to_f(int v) { return static_cast<float>(v); }
__device__ __forceinline__ float to_f(signed char v) { return static_cast<float>(v); }
__device__ __forceinline__ float to_f(unsigned char v) { return static_cast<float>(v); }
__device__ __forceinline__ float to_f(bool v) { return v ? 1.f : 0.f; }

template <class T> __device__ __forceinline__ T from_f(float v) { return static_cast<T>(v); }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ bool from_f<bool>(float v) { return v != 0.f; }
// Float -> integer truncates toward zero (C and the reference executor agree).
template <> __device__ __forceinline__ long long from_f<long long>(float v) { return static_cast<long long>(v); }

// Integer view of any storage type (bool 0/1).
template <class T> __device__ __forceinline__ long long to_i(T v) { return static_cast<long long>(v); }
template <> __device__ __forceinline__ long long to_i<__half>(__half v) { return static_cast<long long>(__half2float(v)); }
template <> __device__ __forceinline__ long long to_i<__nv_bfloat16>(__nv_bfloat16 v) {
  return static_cast<long long>(__bfloat162float(v));
}
template <class T> __device__ __forceinline__ T from_i(long long v) { return static_cast<T>(v); }
template <> __device__ __forceinline__ __half from_i<__half>(long long v) { return __float2half_rn(static_cast<float>(v)); }
template <> __device__ __forceinline__ __nv_bfloat16 from_i<__nv_bfloat16>(long long v) {
  return __float2bfloat16_rn(static_cast<float>(v));
}
template <> __device__ __forceinline__ bool from_i<bool>(long long v) { return v != 0; }

// Rounds a float through a storage dtype: what a Cast to f16/bf16 inside a chain means.
__device__ __forceinline__ float round_to(float v, int dt) {
  if (dt == kF16) return __half2float(__float2half_rn(v));
  if (dt == kBF16) return __bfloat162float(__float2bfloat16_rn(v));
  return v;
}

// The op formulas (f32 math). Names match sabre::native::EwOp.
__device__ __forceinline__ float f_relu(float x) { return x > 0.f ? x : 0.f; }
__device__ __forceinline__ float f_sigmoid(float x) { return 1.f / (1.f + __expf(-x)); }
// x*Phi(x) in one ex2, the CUTLASS gelu_erf epilogues' math (gelu_erf.h: |d erf| <= 4e-7).
__device__ __forceinline__ float f_gelu_erf(float x) { return sabre_gelu::gelu_erf(x); }
__device__ __forceinline__ float f_gelu_tanh(float x) {
  return 0.5f * x * (1.f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}
__device__ __forceinline__ float f_silu(float x) { return x / (1.f + __expf(-x)); }
__device__ __forceinline__ float f_leaky_relu(float x, float a) { return x < 0.f ? a * x : x; }
__device__ __forceinline__ float f_hard_sigmoid(float x, float a, float b) { return fminf(1.f, fmaxf(0.f, a * x + b)); }
__device__ __forceinline__ float f_hardswish(float x) { return x * fminf(1.f, fmaxf(0.f, x * (1.f / 6.f) + 0.5f)); }
__device__ __forceinline__ float f_clip(float x, float lo, float hi) { return fminf(hi, fmaxf(lo, x)); }
// min/max propagate NaN like the ONNX reference (fminf would drop it).
__device__ __forceinline__ float f_min(float a, float b) { return (a != a || b != b) ? __int_as_float(0x7fc00000) : fminf(a, b); }
__device__ __forceinline__ float f_max(float a, float b) { return (a != a || b != b) ? __int_as_float(0x7fc00000) : fmaxf(a, b); }
__device__ __forceinline__ long long i_div(long long a, long long b) { return b == 0 ? 0 : a / b; }
__device__ __forceinline__ long long i_min(long long a, long long b) { return a < b ? a : b; }
__device__ __forceinline__ long long i_max(long long a, long long b) { return a > b ? a : b; }
__device__ __forceinline__ long long i_abs(long long a) { return a < 0 ? -a : a; }
// Softplus without overflow: log(1 + e^x) = max(x, 0) + log1p(e^-|x|).
__device__ __forceinline__ float f_softplus(float x) { return fmaxf(x, 0.f) + log1pf(expf(-fabsf(x))); }
__device__ __forceinline__ float f_softsign(float x) { return x / (1.f + fabsf(x)); }
__device__ __forceinline__ float f_mish(float x) { return x * tanhf(f_softplus(x)); }
__device__ __forceinline__ float f_elu(float x, float a) { return x < 0.f ? a * expm1f(x) : x; }
__device__ __forceinline__ float f_selu(float x, float a, float g) { return x <= 0.f ? g * (a * expm1f(x)) : g * x; }
__device__ __forceinline__ float f_celu(float x, float a) { return fmaxf(0.f, x) + fminf(0.f, a * expm1f(x / a)); }
__device__ __forceinline__ float f_thresholded_relu(float x, float a) { return x > a ? x : 0.f; }
__device__ __forceinline__ float f_shrink(float x, float l, float b) { return x < -l ? x + b : x > l ? x - b : 0.f; }
// NaN stays NaN, +-0 gives 0.
__device__ __forceinline__ float f_sign(float x) { return x > 0.f ? 1.f : x < 0.f ? -1.f : x == 0.f ? 0.f : x; }
__device__ __forceinline__ long long i_sign(long long a) { return (a > 0) - (a < 0); }
__device__ __forceinline__ bool f_isinf(float x, float neg, float pos) {
  return isinf(x) && ((x < 0.f && neg != 0.f) || (x > 0.f && pos != 0.f));
}
// mod: the result takes the divisor's sign (numpy's mod); fmod: the dividend's (C's fmod).
__device__ __forceinline__ float f_mod(float a, float b) {
  float r = fmodf(a, b);
  return (r != 0.f && ((r < 0.f) != (b < 0.f))) ? r + b : r;
}
// Integer divisors 0 and -1 give 0: no trap on x % 0 or INT64_MIN % -1 (sabre::native::EwOp::mod).
__device__ __forceinline__ long long i_fmod(long long a, long long b) { return (b == 0 || b == -1) ? 0 : a % b; }
__device__ __forceinline__ long long i_mod(long long a, long long b) {
  const long long r = i_fmod(a, b);
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
__device__ __forceinline__ long long i_shl(long long a, long long b) {
  return (b < 0 || b > 63) ? 0 : static_cast<long long>(static_cast<unsigned long long>(a) << b);
}
__device__ __forceinline__ long long i_shr(long long a, long long b) {
  return (b < 0 || b > 63) ? 0 : static_cast<long long>(static_cast<unsigned long long>(a) >> b);
}
__device__ __forceinline__ float f_prelu(float x, float s) { return x < 0.f ? s * x : x; }

// Element offsets of output element `i` in each of `k` inputs.
__device__ __forceinline__ void offsets(const SabreEwParams& p, long long i, int k, long long* off) {
  for (int j = 0; j < k; ++j) off[j] = 0;
  for (int d = p.rank - 1; d >= 0; --d) {
    const long long n = p.dims[d];
    const long long c = i % n;
    i /= n;
    for (int j = 0; j < k; ++j) off[j] += c * p.in_strides[j][d];
  }
}

// VEC elements of one input starting at `off`: a vector load, or one value repeated when the
// input is broadcast along the innermost dim.
template <class T, int V>
struct alignas(sizeof(T) * V > 16 ? 16 : sizeof(T) * V) Vec {
  T v[V];
};
template <class T, int V>
__device__ __forceinline__ Vec<T, V> load_vec(const void* base, long long off, bool bcast) {
  const T* p = static_cast<const T*>(base) + off;
  Vec<T, V> r;
  if (bcast) {
    const T x = *p;
#pragma unroll
    for (int e = 0; e < V; ++e) r.v[e] = x;
  } else {
    r = *reinterpret_cast<const Vec<T, V>*>(p);
  }
  return r;
}

}  // namespace sabre_ew
