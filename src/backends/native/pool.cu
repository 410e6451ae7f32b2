// MaxPool / AveragePool (2-D, NCHW or NHWC): a thread per output element; NHWC keeps channels
// innermost so neighbouring threads read neighbouring channels. GlobalAveragePool is a reduction
// (reduce.cu). Tests: tests/gpu/native_kernels_test.cpp (Pool_*)
#include "backends/native/common.cuh"

namespace sabre::native {
namespace {

using namespace detail;

struct PoolP {
  const void* x;
  void* y;
  long long n, c, h, w, oh, ow;
  int kh, kw, sh, sw, dh, dw, ph, pw, peh, pew;
  int max, nhwc, include_pad;
};

template <class T>
__global__ void __launch_bounds__(256) pool_kernel(const PoolP p) {
  const long long total = p.n * p.c * p.oh * p.ow;
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    long long r = i, n, c, oy, ox;
    if (p.nhwc) {
      c = r % p.c; r /= p.c;
      ox = r % p.ow; r /= p.ow;
      oy = r % p.oh; n = r / p.oh;
    } else {
      ox = r % p.ow; r /= p.ow;
      oy = r % p.oh; r /= p.oh;
      c = r % p.c; n = r / p.c;
    }
    const long long y0 = oy * p.sh - p.ph, x0 = ox * p.sw - p.pw;
    float acc = p.max ? -INFINITY : 0.f;
    int count = 0, padded = 0;
    for (int ky = 0; ky < p.kh; ++ky) {
      const long long yy = y0 + static_cast<long long>(ky) * p.dh;
      if (yy >= p.h + p.peh) break;  // beyond the end padding: not part of the window
      for (int kx = 0; kx < p.kw; ++kx) {
        const long long xx = x0 + static_cast<long long>(kx) * p.dw;
        if (xx >= p.w + p.pew) break;
        ++padded;
        if (yy < 0 || yy >= p.h || xx < 0 || xx >= p.w) continue;
        const long long off = p.nhwc ? ((n * p.h + yy) * p.w + xx) * p.c + c : ((n * p.c + c) * p.h + yy) * p.w + xx;
        const float v = to_float(static_cast<const T*>(p.x)[off]);
        acc = p.max ? fmaxf(acc, v) : acc + v;
        ++count;
      }
    }
    if (!p.max) acc = acc / static_cast<float>(p.include_pad ? padded : (count ? count : 1));
    static_cast<T*>(p.y)[i] = from_float<T>(acc);
  }
}

}  // namespace

void pool_output_dims(PoolArgs& a, bool ceil_mode) {
  auto out = [&](int64_t in, int d) {
    const int64_t eff = (a.kernel[d] - 1) * a.dilation[d] + 1;
    const int64_t span = in + a.pad_begin[d] + a.pad_end[d] - eff;
    int64_t o = (ceil_mode ? (span + a.stride[d] - 1) / a.stride[d] : span / a.stride[d]) + 1;
    // ONNX: with ceil mode, a window that would start in the end padding is dropped.
    if (ceil_mode && (o - 1) * a.stride[d] >= in + a.pad_begin[d]) --o;
    return o;
  };
  a.out_h = out(a.h, 0);
  a.out_w = out(a.w, 1);
}

cudaError_t pool2d(const PoolArgs& a, cudaStream_t stream) {
  if (!a.x || !a.y || a.n < 1 || a.c < 1 || a.h < 1 || a.w < 1 || a.out_h < 1 || a.out_w < 1)
    return fail(cudaErrorInvalidValue, "pool2d: needs x, y and positive sizes (call pool_output_dims first)");
  for (int d = 0; d < 2; ++d)
    if (a.kernel[d] < 1 || a.stride[d] < 1 || a.dilation[d] < 1 || a.pad_begin[d] < 0 || a.pad_end[d] < 0)
      return fail(cudaErrorInvalidValue, "pool2d: kernel, stride and dilation must be >= 1, pads >= 0");
  PoolP p{a.x, a.y, a.n, a.c, a.h, a.w, a.out_h, a.out_w,
          static_cast<int>(a.kernel[0]), static_cast<int>(a.kernel[1]), static_cast<int>(a.stride[0]),
          static_cast<int>(a.stride[1]), static_cast<int>(a.dilation[0]), static_cast<int>(a.dilation[1]),
          static_cast<int>(a.pad_begin[0]), static_cast<int>(a.pad_begin[1]), static_cast<int>(a.pad_end[0]),
          static_cast<int>(a.pad_end[1]), a.kind == PoolKind::max, a.layout == Layout::nhwc, a.count_include_pad};
  SABRE_FLOAT_DISPATCH(a.dtype, T, {
    pool_kernel<T><<<blocks_for(a.n * a.c * a.out_h * a.out_w, 256), 256, 0, stream>>>(p);
    SABRE_LAUNCH_CHECK();
    return cudaSuccess;
  });
}

}  // namespace sabre::native
