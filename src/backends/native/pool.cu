// MaxPool / AveragePool (2-D, NCHW or NHWC). NHWC (the layout conv regions run in), where sizes
// allow 32-bit offsets: a thread per (output pixel, channel vector of 16, 8 or 4 bytes, or one
// element), 3x3 windows unrolled (pool_nhwc_kernel). NCHW and huge tensors: a thread per output
// element with 64-bit index math (pool_kernel), far slower a channel at a time than the vector
// kernel on NHWC.
// GlobalAveragePool is a reduction (reduce.cu). Tests: tests/gpu/native_conv_test.cpp (Pool_*)
#include <type_traits>

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
  detail::pdl_enter();
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

// NHWC: a thread per (output pixel, VEC channels), VEC the widest of 16, 8, 4 bytes or one
// element that divides C and the alignment of x and y, so every tap is one load and the output one
// store, contiguous across a warp. 32-bit index math (the host checks sizes), the index split by
// multiply-shift divisions. K = 3: the 3x3 window unrolled, its 9 loads issued together (ptxas: in
// two batches of 4 and 5);
// K = 0: any window, a tap loop. Max compares packed halves (__hmax2) where VEC is even; averages
// add in f32. Window rules as pool_kernel's. The 3x3 window is unrolled because a tap loop with
// runtime bounds waits for each load before issuing the next.
struct PoolNhwc {
  const void* x;
  void* y;
  DivMod groups, ow, oh;  // channel vectors per pixel, output width and height
  unsigned total;         // outputs x channel vectors
  int h, w, kh, kw, sh, sw, dh, dw, ph, pw;
  int h_end, w_end;  // h + pad_end, w + pad_end: taps at or past these are not part of the window
  int include_pad;
};

template <class T, int VEC>
__device__ __forceinline__ void max_into(Pack<T, VEC>& acc, const Pack<T, VEC>& v) {
  if constexpr ((std::is_same_v<T, half> || std::is_same_v<T, bf16>) && VEC % 2 == 0) {
    using T2 = std::conditional_t<std::is_same_v<T, half>, __half2, __nv_bfloat162>;
#pragma unroll
    for (int k = 0; k < VEC; k += 2) {
      T2& a = *reinterpret_cast<T2*>(&acc.v[k]);
      a = __hmax2(a, *reinterpret_cast<const T2*>(&v.v[k]));
    }
  } else {
#pragma unroll
    for (int k = 0; k < VEC; ++k) acc.v[k] = from_float<T>(fmaxf(to_float(acc.v[k]), to_float(v.v[k])));
  }
}

template <class T, int VEC, int K, bool MAX>
__global__ void __launch_bounds__(256) pool_nhwc_kernel(const PoolNhwc p) {
  detail::pdl_enter();
  using V = Pack<T, VEC>;
  const unsigned i = blockIdx.x * 256u + threadIdx.x;
  if (i >= p.total) return;
  const unsigned pix = p.groups.div(i), row = p.ow.div(pix), n = p.oh.div(row);
  const int g = static_cast<int>(i - pix * p.groups.d), ox = static_cast<int>(pix - row * p.ow.d);
  const int oy = static_cast<int>(row - n * p.oh.d);
  const int y0 = oy * p.sh - p.ph, x0 = ox * p.sw - p.pw, gs = static_cast<int>(p.groups.d);
  const V* __restrict__ x = static_cast<const V*>(p.x) + static_cast<int>(n) * p.h * p.w * gs + g;
  V acc;
  float sum[VEC];
#pragma unroll
  for (int k = 0; k < VEC; ++k) {
    acc.v[k] = from_float<T>(-INFINITY);
    sum[k] = 0.f;
  }
  int count = 0, padded = 0;
  auto tap = [&](const V& v) {
    if constexpr (MAX) {
      max_into<T, VEC>(acc, v);
    } else {
#pragma unroll
      for (int k = 0; k < VEC; ++k) sum[k] += to_float(v.v[k]);
    }
  };
  if constexpr (K > 0) {
    // Every tap loaded first, then combined: K*K loads in flight. Taps outside the image load the
    // window's clamped neighbour (a valid address, no predicate to split the batch) and are skipped.
    V v[K][K];
    bool in[K][K];
#pragma unroll
    for (int ky = 0; ky < K; ++ky)
#pragma unroll
      for (int kx = 0; kx < K; ++kx) {
        const int yy = y0 + ky * p.dh, xx = x0 + kx * p.dw;
        in[ky][kx] = yy >= 0 && yy < p.h && xx >= 0 && xx < p.w;
        const int yc = min(max(yy, 0), p.h - 1), xc = min(max(xx, 0), p.w - 1);
        v[ky][kx] = x[(yc * p.w + xc) * gs];
        padded += yy < p.h_end && xx < p.w_end;
      }
#pragma unroll
    for (int ky = 0; ky < K; ++ky)
#pragma unroll
      for (int kx = 0; kx < K; ++kx)
        if (in[ky][kx]) {
          tap(v[ky][kx]);
          ++count;
        }
  } else {
    for (int ky = 0; ky < p.kh; ++ky) {
      const int yy = y0 + ky * p.dh;
      if (yy >= p.h_end) break;  // beyond the end padding: not part of the window
#pragma unroll 4
      for (int kx = 0; kx < p.kw; ++kx) {
        const int xx = x0 + kx * p.dw;
        if (xx >= p.w_end) break;
        ++padded;
        if (yy < 0 || yy >= p.h || xx < 0 || xx >= p.w) continue;
        tap(x[(yy * p.w + xx) * gs]);
        ++count;
      }
    }
  }
  if constexpr (!MAX) {
    const float inv = 1.f / static_cast<float>(p.include_pad ? padded : (count ? count : 1));
#pragma unroll
    for (int k = 0; k < VEC; ++k) acc.v[k] = from_float<T>(sum[k] * inv);
  }
  static_cast<V*>(p.y)[i] = acc;
}

template <class T, int VEC>
cudaError_t launch_nhwc(const PoolArgs& a, cudaStream_t stream) {
  PoolNhwc p{};
  p.x = a.x, p.y = a.y;
  p.groups = DivMod(static_cast<unsigned>(a.c / VEC));
  p.ow = DivMod(static_cast<unsigned>(a.out_w));
  p.oh = DivMod(static_cast<unsigned>(a.out_h));
  p.total = static_cast<unsigned>(a.n * a.out_h * a.out_w * (a.c / VEC));
  p.h = static_cast<int>(a.h), p.w = static_cast<int>(a.w);
  p.kh = static_cast<int>(a.kernel[0]), p.kw = static_cast<int>(a.kernel[1]);
  p.sh = static_cast<int>(a.stride[0]), p.sw = static_cast<int>(a.stride[1]);
  p.dh = static_cast<int>(a.dilation[0]), p.dw = static_cast<int>(a.dilation[1]);
  p.ph = static_cast<int>(a.pad_begin[0]), p.pw = static_cast<int>(a.pad_begin[1]);
  p.h_end = static_cast<int>(a.h + a.pad_end[0]), p.w_end = static_cast<int>(a.w + a.pad_end[1]);
  p.include_pad = a.count_include_pad;
  const unsigned blocks = (p.total + 255) / 256;
  const bool k3 = a.kernel[0] == 3 && a.kernel[1] == 3, max = a.kind == PoolKind::max;
  if (k3 && max) SABRE_CUDA_TRY(detail::launch(pool_nhwc_kernel<T, VEC, 3, true>, blocks, 256, 0, stream, p));
  else if (k3) SABRE_CUDA_TRY(detail::launch(pool_nhwc_kernel<T, VEC, 3, false>, blocks, 256, 0, stream, p));
  else if (max) SABRE_CUDA_TRY(detail::launch(pool_nhwc_kernel<T, VEC, 0, true>, blocks, 256, 0, stream, p));
  else SABRE_CUDA_TRY(detail::launch(pool_nhwc_kernel<T, VEC, 0, false>, blocks, 256, 0, stream, p));
  SABRE_LAUNCH_CHECK();
  return cudaSuccess;
}

template <class T>
cudaError_t launch_pool(const PoolArgs& a, const PoolP& p, cudaStream_t stream) {
  const int64_t outs = a.n * a.c * a.out_h * a.out_w, lim = int64_t{1} << 31;
  // 32-bit offsets: x and y below 2^31 elements, windows whose padded extent and taps fit an int.
  const bool small = a.n * a.h * a.w * a.c < lim && outs < lim && a.h + a.pad_begin[0] + a.pad_end[0] < (1 << 30) &&
                     a.w + a.pad_begin[1] + a.pad_end[1] < (1 << 30) &&
                     (a.kernel[0] - 1) * a.dilation[0] < (1 << 30) && (a.kernel[1] - 1) * a.dilation[1] < (1 << 30) &&
                     a.out_h * a.stride[0] < (1 << 30) && a.out_w * a.stride[1] < (1 << 30);
  if (a.layout == Layout::nhwc && small) {
    auto fits = [&](int vec) {
      const uintptr_t m = static_cast<uintptr_t>(vec * sizeof(T)) - 1;
      return a.c % vec == 0 && (reinterpret_cast<uintptr_t>(a.x) & m) == 0 && (reinterpret_cast<uintptr_t>(a.y) & m) == 0;
    };
    constexpr int kVec = static_cast<int>(16 / sizeof(T));
    if (fits(kVec)) return launch_nhwc<T, kVec>(a, stream);
    if (fits(kVec / 2)) return launch_nhwc<T, kVec / 2>(a, stream);
    if constexpr (kVec / 4 > 1)
      if (fits(kVec / 4)) return launch_nhwc<T, kVec / 4>(a, stream);
    return launch_nhwc<T, 1>(a, stream);
  }
  SABRE_CUDA_TRY(detail::launch(pool_kernel<T>, blocks_for(outs, 256), 256, 0, stream, p));
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
