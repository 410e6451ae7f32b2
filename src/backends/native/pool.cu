// MaxPool / AveragePool (2-D, NCHW or NHWC): a thread per output element; NHWC keeps channels
// innermost so neighbouring threads read neighbouring channels, and where C is a multiple of the
// 16-byte access (and x, y lie on 16-byte boundaries) a thread takes 8 halves (4 floats) at once:
// ResNet-50's 3x3/2 max pool over [32,112,112,64] f16 took 176 us on the H200 a channel at a time,
// about 10x what its 64 MB need at HBM bandwidth (per-element 64-bit index divisions, 2-byte loads).
// GlobalAveragePool is a reduction (reduce.cu). Tests: tests/gpu/native_kernels_test.cpp (Pool_*)
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

// NHWC, C % VEC == 0, x and y 16-byte aligned: a thread per VEC channels of one output pixel, one
// 16-byte load per window tap and one store. Window rules as pool_kernel's. I: the index type,
// 32-bit where every offset fits (the host checks), which halves the cost of the divisions.
template <class T, int VEC, class I>
__global__ void __launch_bounds__(256) pool_nhwc_vec_kernel(const PoolP p) {
  using V = Pack<T, VEC>;
  const I c = static_cast<I>(p.c), h = static_cast<I>(p.h), w = static_cast<I>(p.w);
  const I oh = static_cast<I>(p.oh), ow = static_cast<I>(p.ow), groups = c / VEC;
  const I total = static_cast<I>(p.n) * oh * ow * groups;
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  const V* __restrict__ x = static_cast<const V*>(p.x);
  V* __restrict__ y = static_cast<V*>(p.y);
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    I r = i;
    const I g = r % groups;
    r /= groups;
    const I ox = r % ow;
    r /= ow;
    const I oy = r % oh;
    const I n = r / oh;
    const I y0 = oy * p.sh - p.ph, x0 = ox * p.sw - p.pw;
    float acc[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) acc[k] = p.max ? -INFINITY : 0.f;
    int count = 0, padded = 0;
    for (int ky = 0; ky < p.kh; ++ky) {
      const I yy = y0 + static_cast<I>(ky) * p.dh;
      if (yy >= h + p.peh) break;  // beyond the end padding: not part of the window
      for (int kx = 0; kx < p.kw; ++kx) {
        const I xx = x0 + static_cast<I>(kx) * p.dw;
        if (xx >= w + p.pew) break;
        ++padded;
        if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
        const V v = x[((n * h + yy) * w + xx) * groups + g];
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
          const float f = to_float(v.v[k]);
          acc[k] = p.max ? fmaxf(acc[k], f) : acc[k] + f;
        }
        ++count;
      }
    }
    const float div = static_cast<float>(p.include_pad ? padded : (count ? count : 1));
    V o;
#pragma unroll
    for (int k = 0; k < VEC; ++k) o.v[k] = from_float<T>(p.max ? acc[k] : acc[k] / div);
    y[i] = o;
  }
}

template <class T>
cudaError_t launch_pool(const PoolArgs& a, const PoolP& p, cudaStream_t stream) {
  constexpr int kVec = static_cast<int>(16 / sizeof(T));
  const int64_t outs = a.n * a.c * a.out_h * a.out_w;
  if (a.layout == Layout::nhwc && a.c % kVec == 0 && aligned16(a.x) && aligned16(a.y)) {
    const unsigned blocks = blocks_for(outs / kVec, 256);
    // 32-bit offsets when x and y are below 2^30 elements, so i + step cannot overflow either.
    if (a.n * a.h * a.w * a.c < (int64_t{1} << 30) && outs < (int64_t{1} << 30))
      pool_nhwc_vec_kernel<T, kVec, int><<<blocks, 256, 0, stream>>>(p);
    else
      pool_nhwc_vec_kernel<T, kVec, long long><<<blocks, 256, 0, stream>>>(p);
  } else {
    pool_kernel<T><<<blocks_for(outs, 256), 256, 0, stream>>>(p);
  }
  SABRE_LAUNCH_CHECK();
  return cudaSuccess;
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
  SABRE_FLOAT_DISPATCH(a.dtype, T, return launch_pool<T>(a, p, stream));
}

}  // namespace sabre::native
