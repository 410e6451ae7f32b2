// Depthwise 2-D convolution (group = channels, one filter per channel: MobileNet's 3x3 convs) on
// NHWC activations, the layout conv regions run in. One thread per output element, channels
// fastest so a warp reads consecutive channels. Tests: tests/gpu/native_kernels_test.cpp
// (Depthwise_*) against the reference executor's grouped Conv; passed on the H200, 2026-12-02.
#include "backends/native/common.cuh"

namespace sabre::native {
namespace {

using namespace detail;

struct DwParams {
  const void *x, *w, *bias;
  void* y;
  long long n, h, w_, c, r, s, p, q;
  long long pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
};

template <class T>
__global__ void __launch_bounds__(256) depthwise_kernel(const DwParams a) {
  const long long total = a.n * a.p * a.q * a.c;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long ch = i % a.c, oq = (i / a.c) % a.q, op = (i / (a.c * a.q)) % a.p, b = i / (a.c * a.q * a.p);
    const T* x = static_cast<const T*>(a.x);
    const T* w = static_cast<const T*>(a.w);
    float acc = a.bias ? to_float(static_cast<const T*>(a.bias)[ch]) : 0.f;
    for (long long r = 0; r < a.r; ++r) {
      const long long ih = op * a.stride_h - a.pad_h + r * a.dil_h;
      if (ih < 0 || ih >= a.h) continue;
      for (long long s = 0; s < a.s; ++s) {
        const long long iw = oq * a.stride_w - a.pad_w + s * a.dil_w;
        if (iw < 0 || iw >= a.w_) continue;
        acc += to_float(x[((b * a.h + ih) * a.w_ + iw) * a.c + ch]) * to_float(w[(r * a.s + s) * a.c + ch]);
      }
    }
    static_cast<T*>(a.y)[i] = from_float<T>(acc);
  }
}

}  // namespace

cudaError_t depthwise_conv2d(const DepthwiseArgs& a, cudaStream_t stream) {
  if (a.n < 0 || a.c < 1 || a.r < 1 || a.s < 1 || a.stride_h < 1 || a.stride_w < 1 || a.dil_h < 1 || a.dil_w < 1)
    return fail(cudaErrorInvalidValue, "depthwise_conv2d: bad dims");
  DwParams p{a.x, a.w, a.bias, a.y, a.n, a.h, a.w_, a.c, a.r, a.s, a.p, a.q,
             a.pad_h, a.pad_w, a.stride_h, a.stride_w, a.dil_h, a.dil_w};
  const long long total = a.n * a.p * a.q * a.c;
  if (total == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>(std::min<long long>((total + 255) / 256, 65535));
  switch (a.dtype) {
    case DType::f16: depthwise_kernel<half><<<blocks, 256, 0, stream>>>(p); break;
    case DType::bf16: depthwise_kernel<bf16><<<blocks, 256, 0, stream>>>(p); break;
    case DType::f32: depthwise_kernel<float><<<blocks, 256, 0, stream>>>(p); break;
    default: return fail(cudaErrorInvalidValue, "depthwise_conv2d: f16, bf16 or f32 only");
  }
  SABRE_LAUNCH_CHECK();
  return cudaSuccess;
}

}  // namespace sabre::native
