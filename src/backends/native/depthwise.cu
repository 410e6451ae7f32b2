// Depthwise 2-D convolution (group = channels, one filter per channel: MobileNet's 3x3 convs) on
// NHWC activations, the layout conv regions run in; and grouped convolution in general (several
// channels per group, ResNeXt's 3x3s) by a plain kernel. Depthwise where C is a multiple of a 16-byte
// vector (and pointers aligned): one thread per (output pixel, channel vector), 32-bit index math;
// every other case on the grouped kernel: one thread per output element, channels fastest so a warp
// reads consecutive channels. Tests: tests/gpu/native_kernels_test.cpp
// (Depthwise_*) against the reference executor's grouped Conv.
#include "backends/native/common.cuh"

namespace sabre::native {
namespace {

using namespace detail;

struct DwParams {
  const void *x, *w, *bias;
  void* y;
  long long n, h, w_, c, r, s, p, q;
  long long pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
  int clamp;
  float lo, hi;
  ConvAct act;
  float alpha, beta;
};

// The fused activation (conv_act.h), then the clamp (Relu, Clip).
__device__ __forceinline__ float activate(float v, const DwParams& a) {
  switch (a.act) {
    case ConvAct::silu: v = v / (1.f + __expf(-a.alpha * v)); break;
    case ConvAct::sigmoid: v = 1.f / (1.f + __expf(-v)); break;
    case ConvAct::hard_swish: v = v * fminf(fmaxf(a.alpha * v + a.beta, 0.f), 1.f); break;
    case ConvAct::hard_sigmoid: v = fminf(fmaxf(a.alpha * v + a.beta, 0.f), 1.f); break;
    default: break;
  }
  return a.clamp ? fminf(fmaxf(v, a.lo), a.hi) : v;
}

// Depthwise with 16-byte channel vectors (8 halves or 4 floats) and 32-bit index math: one thread per
// (output pixel, channel vector), taps unrolled by the compiler for the common 3x3, the filter row of
// each tap one vector load. For C a multiple of the vector, 16-byte aligned pointers and fewer than
// 2^31 elements in X and Y (depthwise_conv2d checks); other depthwise convs run on grouped_kernel
// below with K = groups = C. A scalar kernel with 64-bit index math spends its time in divisions,
// far from the bandwidth bound.
template <class T, int kV>
__global__ void __launch_bounds__(256) depthwise_vec_kernel(const DwParams a) {
  detail::pdl_enter();
  using V = Pack<T, kV>;
  const int cv = static_cast<int>(a.c / kV), H = static_cast<int>(a.h), W = static_cast<int>(a.w_);
  const int P = static_cast<int>(a.p), Q = static_cast<int>(a.q), C = static_cast<int>(a.c);
  const int R = static_cast<int>(a.r), S = static_cast<int>(a.s);
  const int total = static_cast<int>(a.n) * P * Q * cv;
  const T* x = static_cast<const T*>(a.x);
  const T* w = static_cast<const T*>(a.w);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int v = i % cv, pix = i / cv, oq = pix % Q, op = (pix / Q) % P, b = pix / (Q * P);
    const int ch = v * kV;
    float acc[kV];
    if (a.bias) {
      const V bv = *reinterpret_cast<const V*>(static_cast<const T*>(a.bias) + ch);
#pragma unroll
      for (int j = 0; j < kV; ++j) acc[j] = to_float(bv.v[j]);
    } else {
#pragma unroll
      for (int j = 0; j < kV; ++j) acc[j] = 0.f;
    }
    const int ih0 = op * static_cast<int>(a.stride_h) - static_cast<int>(a.pad_h);
    const int iw0 = oq * static_cast<int>(a.stride_w) - static_cast<int>(a.pad_w);
    for (int r = 0; r < R; ++r) {
      const int ih = ih0 + r * static_cast<int>(a.dil_h);
      if (ih < 0 || ih >= H) continue;
      for (int s = 0; s < S; ++s) {
        const int iw = iw0 + s * static_cast<int>(a.dil_w);
        if (iw < 0 || iw >= W) continue;
        const V xv = *reinterpret_cast<const V*>(x + (static_cast<long long>((b * H + ih) * W + iw)) * C + ch);
        const V wv = *reinterpret_cast<const V*>(w + (r * S + s) * C + ch);
#pragma unroll
        for (int j = 0; j < kV; ++j) acc[j] += to_float(xv.v[j]) * to_float(wv.v[j]);
      }
    }
    V out;
#pragma unroll
    for (int j = 0; j < kV; ++j) out.v[j] = from_float<T>(activate(acc[j], a));
    *reinterpret_cast<V*>(static_cast<T*>(a.y) + static_cast<long long>(i) * kV) = out;
  }
}

// Grouped convolution with more than one channel per group (or per-group channel multipliers): one
// thread per output element (n, p, q, k), k fastest, so a warp reads consecutive filter entries
// (the filter is [R,S,C/G,K]) and, within a group, the same input pixel's channels. Plain and
// general rather than fast: grouped convs other than depthwise are rare in the models sabre serves.
struct GroupParams {
  DwParams a;
  long long k, groups;
};

template <class T>
__global__ void __launch_bounds__(256) grouped_kernel(const GroupParams gp) {
  detail::pdl_enter();
  const DwParams& a = gp.a;
  const long long K = gp.k, cg = a.c / gp.groups, kg = K / gp.groups;
  const long long total = a.n * a.p * a.q * K;
  const T* x = static_cast<const T*>(a.x);
  const T* w = static_cast<const T*>(a.w);
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long ko = i % K, oq = (i / K) % a.q, op = (i / (K * a.q)) % a.p, b = i / (K * a.q * a.p);
    const long long c0 = (ko / kg) * cg;
    float acc = a.bias ? to_float(static_cast<const T*>(a.bias)[ko]) : 0.f;
    for (long long r = 0; r < a.r; ++r) {
      const long long ih = op * a.stride_h - a.pad_h + r * a.dil_h;
      if (ih < 0 || ih >= a.h) continue;
      for (long long s = 0; s < a.s; ++s) {
        const long long iw = oq * a.stride_w - a.pad_w + s * a.dil_w;
        if (iw < 0 || iw >= a.w_) continue;
        const T* xp = x + ((b * a.h + ih) * a.w_ + iw) * a.c + c0;
        const T* wp = w + (r * a.s + s) * cg * K + ko;
        for (long long j = 0; j < cg; ++j) acc += to_float(xp[j]) * to_float(wp[j * K]);
      }
    }
    static_cast<T*>(a.y)[i] = from_float<T>(activate(acc, a));
  }
}

template <class T>
cudaError_t launch_grouped(const GroupParams& p, int64_t total, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>(std::min<long long>((total + 255) / 256, 65535));
  SABRE_CUDA_TRY(detail::launch(grouped_kernel<T>, blocks, 256, 0, stream, p));
  SABRE_LAUNCH_CHECK();
  return cudaSuccess;
}

template <class T>
cudaError_t launch_vec(const DwParams& p, int64_t total, cudaStream_t stream) {
  constexpr int kV = 16 / sizeof(T);
  SABRE_CUDA_TRY(detail::launch(depthwise_vec_kernel<T, kV>, blocks_for(total / kV, 256, 65535), 256, 0, stream, p));
  SABRE_LAUNCH_CHECK();
  return cudaSuccess;
}

}  // namespace

cudaError_t depthwise_conv2d(const DepthwiseArgs& a, cudaStream_t stream) {
  if (a.n < 0 || a.c < 1 || a.r < 1 || a.s < 1 || a.stride_h < 1 || a.stride_w < 1 || a.dil_h < 1 || a.dil_w < 1)
    return fail(cudaErrorInvalidValue, "depthwise_conv2d: bad dims");
  if (a.clamp && !(a.clamp_min <= a.clamp_max))
    return fail(cudaErrorInvalidValue, "depthwise_conv2d: clamp_min must be <= clamp_max");
  if (a.act >= ConvAct::kCount) return fail(cudaErrorInvalidValue, "depthwise_conv2d: unknown activation");
  DwParams p{a.x, a.w, a.bias, a.y, a.n, a.h, a.w_, a.c, a.r, a.s, a.p, a.q,
             a.pad_h, a.pad_w, a.stride_h, a.stride_w, a.dil_h, a.dil_w, a.clamp ? 1 : 0, a.clamp_min, a.clamp_max,
             a.act, a.act_alpha, a.act_beta};
  const bool grouped = a.k != 0 || a.groups != 0;
  if (grouped && !(a.k > 0 && a.groups > 0 && a.c % a.groups == 0 && a.k % a.groups == 0))
    return fail(cudaErrorInvalidValue, "depthwise_conv2d: grouped needs k and groups >= 1 dividing c and k");
  const long long k = grouped ? a.k : a.c, groups = grouped ? a.groups : a.c;
  const long long total = a.n * a.p * a.q * k;
  if (total == 0) return cudaSuccess;
  // Depthwise (K = groups = C) on the vector kernel where C is a multiple of the 16-byte vector, the
  // pointers are aligned and element counts fit 32 bits; everything else on the general grouped kernel.
  const int64_t elem = a.dtype == DType::f32 ? 4 : 2, vlen = 16 / elem;
  const bool vec = k == a.c && groups == a.c && a.c % vlen == 0 && aligned16(a.x) && aligned16(a.w) &&
                   aligned16(a.y) && (!a.bias || aligned16(a.bias)) && total < (int64_t(1) << 31) &&
                   a.n * a.h * a.w_ * a.c < (int64_t(1) << 31) && a.r * a.s * a.c < (int64_t(1) << 31);
  const GroupParams gp{p, k, groups};
  switch (a.dtype) {
    case DType::f16: return vec ? launch_vec<half>(p, total, stream) : launch_grouped<half>(gp, total, stream);
    case DType::bf16: return vec ? launch_vec<bf16>(p, total, stream) : launch_grouped<bf16>(gp, total, stream);
    case DType::f32: return vec ? launch_vec<float>(p, total, stream) : launch_grouped<float>(gp, total, stream);
    default: return fail(cudaErrorInvalidValue, "depthwise_conv2d: f16, bf16 or f32 only");
  }
}

}  // namespace sabre::native
