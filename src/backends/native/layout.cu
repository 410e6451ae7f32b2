// NCHW -> NHWC at the edge of a conv region, with the compute-dtype cast and zero channel padding
// folded in: the model's f32 images become the conv kernels' f16 NHWC input in one pass, their 3
// channels written as 8 so the stem conv runs on the 16-byte-access kernels.
// Few channels (c_pad one or two 16-byte vectors of y, y aligned, 32-bit offsets inside an image):
// a thread per pixel reads its c values from the c planes (coalesced: consecutive threads,
// consecutive pixels) and writes the pixel's c_pad channels as 16-byte stores (contiguous across
// threads); no shared memory, no division. Otherwise a tile of (channels x pixels of one row) is
// staged through shared memory: reads walk W (coalesced), writes walk the channels of consecutive
// pixels (contiguous in y), 16 bytes per thread where c_pad and y allow. The generic permute()
// tiles 32x32, which leaves most of a tile idle when C is 3.
// Tests: tests/gpu/native_movement_test.cpp (NchwToNhwc_*)
#include "backends/native/common.cuh"

namespace sabre::native {
namespace {

using namespace detail;

// Elements one tile stages (channels x pixels): 8 KB of floats, so several blocks fit an SM.
constexpr int kTileElems = 2048;
constexpr int kMaxTileC = 32;

struct LayoutP {
  const void* x;
  void* y;
  long long n, c, h, w, cp;  // x [n,c,h,w], y [n,h,w,cp]
  int tc, tw;                // tile: channels, pixels
  long long tiles_c, tiles_w, n_tiles;
};

// VEC output elements per store: 16 bytes, or 1 (the scalar path).
template <class TX, class TY, int VEC>
__global__ void __launch_bounds__(256) nchw_to_nhwc_kernel(const LayoutP p) {
  detail::pdl_enter();
  __shared__ float tile[kTileElems + kMaxTileC];  // [tc][tw + 1]: the +1 staggers banks for the column reads
  const TX* x = static_cast<const TX*>(p.x);
  TY* y = static_cast<TY*>(p.y);
  const int ld = p.tw + 1;
  for (long long t = blockIdx.x; t < p.n_tiles; t += gridDim.x) {
    long long r = t;
    const long long ct = r % p.tiles_c;
    r /= p.tiles_c;
    const long long wt = r % p.tiles_w;
    const long long row = r / p.tiles_w;  // n * h + h
    const long long nn = row / p.h, hh = row % p.h;
    const long long c0 = ct * p.tc, w0 = wt * p.tw;
    const int tcw = static_cast<int>(c0 + p.tc <= p.cp ? p.tc : p.cp - c0);  // channels in this tile
    const int tww = static_cast<int>(w0 + p.tw <= p.w ? p.tw : p.w - w0);    // pixels in this tile
    // Read: consecutive threads take consecutive pixels of one channel's row; padding channels are zeros.
    const int items = tcw * p.tw;
#pragma unroll 4
    for (int i = threadIdx.x; i < items; i += blockDim.x) {
      const int c = i / p.tw, wi = i % p.tw;
      if (wi >= tww) continue;
      const long long cc = c0 + c;
      tile[c * ld + wi] = cc < p.c ? to_float(x[((nn * p.c + cc) * p.h + hh) * p.w + w0 + wi]) : 0.f;
    }
    __syncthreads();
    // Write: consecutive threads take consecutive VEC-channel groups of consecutive pixels.
    const int groups = tcw / VEC;
    const int outs = groups * tww;
    for (int j = threadIdx.x; j < outs; j += blockDim.x) {
      const int wi = j / groups, g = j % groups;
      const long long off = (row * p.w + w0 + wi) * p.cp + c0 + static_cast<long long>(g) * VEC;
      if constexpr (VEC == 1) {
        y[off] = from_float<TY>(tile[g * ld + wi]);
      } else {
        Pack<TY, VEC> v;
#pragma unroll
        for (int k = 0; k < VEC; ++k) v.v[k] = from_float<TY>(tile[(g * VEC + k) * ld + wi]);
        *reinterpret_cast<Pack<TY, VEC>*>(y + off) = v;
      }
    }
    __syncthreads();  // the next tile overwrites `tile`
  }
}

// Few channels: kPix pixels per thread, 256 apart so each load and store instruction of a warp
// stays contiguous; NG 16-byte vectors (VEC elements of TY) per pixel, c <= NG * VEC. Grid: x over
// the pixels of one image, y over images. All loads of a thread are issued before its stores.
// The tiled kernel below is slow for so few channels: two barriers per row of pixels, and most of
// its tile slots padding zeros.
constexpr int kPix = 4;
template <class TX, class TY, int VEC, int NG>
__global__ void __launch_bounds__(256) nchw_to_nhwc_few_kernel(const LayoutP p) {
  detail::pdl_enter();
  using V = Pack<TY, VEC>;
  constexpr int kC = NG * VEC;
  const int hw = static_cast<int>(p.h * p.w), c = static_cast<int>(p.c);
  const int q0 = blockIdx.x * (256 * kPix) + threadIdx.x;
  for (long long nn = blockIdx.y; nn < p.n; nn += gridDim.y) {
    const TX* x = static_cast<const TX*>(p.x) + nn * p.c * hw;
    V* y = reinterpret_cast<V*>(static_cast<TY*>(p.y) + nn * hw * kC);
    float v[kPix][kC];
#pragma unroll
    for (int k = 0; k < kPix; ++k) {
      const int q = q0 + k * 256;
#pragma unroll
      for (int ch = 0; ch < kC; ++ch) v[k][ch] = q < hw && ch < c ? to_float(x[ch * hw + q]) : 0.f;
    }
#pragma unroll
    for (int k = 0; k < kPix; ++k) {
      const int q = q0 + k * 256;
      if (q >= hw) break;
#pragma unroll
      for (int g = 0; g < NG; ++g) {
        V o;
#pragma unroll
        for (int e = 0; e < VEC; ++e) o.v[e] = from_float<TY>(v[k][g * VEC + e]);
        y[q * NG + g] = o;
      }
    }
  }
}

template <class TX, class TY>
cudaError_t launch(LayoutP p, cudaStream_t stream) {
  constexpr int kVec = static_cast<int>(16 / sizeof(TY));
  const long long hw = p.h * p.w;
  if (p.cp % kVec == 0 && p.cp <= 2 * kVec && aligned16(p.y) && p.c * hw < (1ll << 31) && p.cp * hw < (1ll << 31)) {
    const dim3 grid(static_cast<unsigned>((hw + 256 * kPix - 1) / (256 * kPix)),
                    static_cast<unsigned>(p.n < 65535 ? p.n : 65535));
    if (p.cp == kVec) SABRE_CUDA_TRY(detail::launch(nchw_to_nhwc_few_kernel<TX, TY, kVec, 1>, grid, 256, 0, stream, p));
    else SABRE_CUDA_TRY(detail::launch(nchw_to_nhwc_few_kernel<TX, TY, kVec, 2>, grid, 256, 0, stream, p));
    SABRE_LAUNCH_CHECK();
    return cudaSuccess;
  }
  // 16-byte stores need every pixel's channel run, and y itself, on 16-byte boundaries.
  const bool vec = p.cp % kVec == 0 && aligned16(p.y);
  p.tc = static_cast<int>(p.cp < kMaxTileC ? p.cp : kMaxTileC);
  // As many pixels as fill the tile, in whole warps, but no more than the row holds.
  int tw = kTileElems / p.tc / 32 * 32;
  if (tw < 32) tw = 32;
  const long long w_warps = (p.w + 31) / 32 * 32;
  p.tw = static_cast<int>(w_warps < tw ? w_warps : tw);
  p.tiles_c = (p.cp + p.tc - 1) / p.tc;
  p.tiles_w = (p.w + p.tw - 1) / p.tw;
  p.n_tiles = p.n * p.h * p.tiles_w * p.tiles_c;
  const unsigned blocks = blocks_for(p.n_tiles, 1, 132 * 16);
  if (vec) SABRE_CUDA_TRY(detail::launch(nchw_to_nhwc_kernel<TX, TY, kVec>, blocks, 256, 0, stream, p));
  else SABRE_CUDA_TRY(detail::launch(nchw_to_nhwc_kernel<TX, TY, 1>, blocks, 256, 0, stream, p));
  SABRE_LAUNCH_CHECK();
  return cudaSuccess;
}

template <class TX>
cudaError_t launch_to(DType y_dtype, const LayoutP& p, cudaStream_t stream) {
  SABRE_FLOAT_DISPATCH(y_dtype, TY, return launch<TX, TY>(p, stream));
}

}  // namespace

cudaError_t nchw_to_nhwc(DType x_dtype, DType y_dtype, const void* x, int64_t n, int64_t c, int64_t h, int64_t w,
                         int64_t c_pad, void* y, cudaStream_t stream) {
  if (n < 0 || c < 1 || h < 0 || w < 0 || c_pad < c)
    return fail(cudaErrorInvalidValue, "nchw_to_nhwc: needs c >= 1, c_pad >= c and non-negative n, h, w (got n=" +
                                           std::to_string(n) + " c=" + std::to_string(c) + " h=" + std::to_string(h) +
                                           " w=" + std::to_string(w) + " c_pad=" + std::to_string(c_pad) + ")");
  if (n == 0 || h == 0 || w == 0) return cudaSuccess;
  if (!x || !y) return fail(cudaErrorInvalidValue, "nchw_to_nhwc: needs x and y");
  LayoutP p{};
  p.x = x;
  p.y = y;
  p.n = n, p.c = c, p.h = h, p.w = w, p.cp = c_pad;
  SABRE_FLOAT_DISPATCH(x_dtype, TX, return launch_to<TX>(y_dtype, p, stream));
}

}  // namespace sabre::native
