// Grouped 2-D convolution on NHWC activations, depthwise (one channel a group) as its case: one
// entry (depthwise_conv2d), one parameter block and epilogue (grouped_conv.cuh) and one kernel
// template with three bodies. The tiled body runs every shape: a block computes a tile of output
// pixels x output channels of whole groups (or of one wide group's channel chunk), stages the input
// window and the groups' filter slice in shared memory in chunks of input channels, and each thread
// accumulates a register tile of kTpx output columns x kTkx output channels of one group in f32.
// The depthwise body is the specialisation for one channel a group where C is a multiple of a
// 16-byte vector: one thread per (output pixel, channel vector), no staging (each input is read by
// R·S threads of neighbouring pixels only, which L1 serves). The tensor-core body
// (grouped_conv_tc.cuh) runs groups of multiples of 8 channels as implicit GEMMs on WMMA fragments
// where asked for. Tests: tests/gpu/grouped_conv_test.cpp, tests/gpu/native_kernels_test.cpp
// (Depthwise_*, GroupedConv_*).
#include <cstdlib>

#include "backends/native/grouped_conv.cuh"
#include "backends/native/grouped_conv_tc.cuh"

namespace sabre::native {
namespace {

using namespace detail;

// Depthwise with 16-byte channel vectors and 32-bit index math (the host checks C % kV == 0, every
// pointer 16-byte aligned, fewer than 2^31 elements): taps unrolled for the common 3x3, the filter
// row of each tap one vector load. A scalar kernel with 64-bit index math spends its time in
// divisions, far from the bandwidth bound.
template <class T, int kV>
__device__ __forceinline__ void depthwise_vec_body(const GcParams& a) {
  using V = Pack<T, kV>;
  const int cv = a.c / kV, H = a.h, W = a.w_, P = a.p, Q = a.q, C = a.c, R = a.r, S = a.s;
  const int total = a.n * P * Q * cv;
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
    const int ih0 = op * a.stride_h - a.pad_h, iw0 = oq * a.stride_w - a.pad_w;
    for (int r = 0; r < R; ++r) {
      const int ih = ih0 + r * a.dil_h;
      if (ih < 0 || ih >= H) continue;
      for (int s = 0; s < S; ++s) {
        const int iw = iw0 + s * a.dil_w;
        if (iw < 0 || iw >= W) continue;
        const V xv = *reinterpret_cast<const V*>(x + static_cast<long long>((b * H + ih) * W + iw) * C + ch);
        const V wv = *reinterpret_cast<const V*>(w + (r * S + s) * C + ch);
#pragma unroll
        for (int j = 0; j < kV; ++j) acc[j] += to_float(xv.v[j]) * to_float(wv.v[j]);
      }
    }
    const long long yi = static_cast<long long>(i) * kV;
    float res[kV];
    if (a.res) {  // one vector load
      const V rv = *reinterpret_cast<const V*>(static_cast<const T*>(a.res) + yi);
#pragma unroll
      for (int j = 0; j < kV; ++j) res[j] = to_float(rv.v[j]);
    } else {
#pragma unroll
      for (int j = 0; j < kV; ++j) res[j] = 0.f;
    }
    V out;
#pragma unroll
    for (int j = 0; j < kV; ++j) out.v[j] = from_float<T>(finish(acc[j], res[j], a));
    *reinterpret_cast<V*>(static_cast<T*>(a.y) + yi) = out;
  }
}

constexpr int kTpx = 4;           // output columns a thread
constexpr int kMaxBlockK = 64;    // output channels a block at most
constexpr int kThreads = 256;     // threads a block at most
constexpr int kSmemBytes = 48 * 1024;

// The tiled body. Block (blockIdx.x: image and output tile, blockIdx.y: channel tile); thread
// (threadIdx.x: kTkx output channels of one group, threadIdx.y: kTpx consecutive output columns of
// one row of the tile). Shared memory: the input window [win_h, win_w, xs >= gpb·cch] (group lg's
// channel j at lg·cch + j) as f32, then the filter slice [R·S, cch, bkc] as f32.
template <class T, int kTkx>
__device__ __forceinline__ void tiled_body(const GcParams& a, float* smem) {
  float* sx = smem;
  float* sw = smem + a.win_h * a.win_w * a.xs;
  const T* x = static_cast<const T*>(a.x);
  const T* w = static_cast<const T*>(a.w);
  // Which tile.
  const int tq = blockIdx.x % a.tiles_q, tp = (blockIdx.x / a.tiles_q) % a.tiles_p;
  const int b = blockIdx.x / (a.tiles_q * a.tiles_p);
  const int kc = blockIdx.y % a.kchunks, g0 = (blockIdx.y / a.kchunks) * a.gpb;
  const int p0 = tp * a.th, q0 = tq * a.tw;
  const int ih0 = p0 * a.stride_h - a.pad_h, iw0 = q0 * a.stride_w - a.pad_w;
  const int nthreads = blockDim.x * blockDim.y, tid = threadIdx.y * blockDim.x + threadIdx.x;
  // This thread's channels: block-local lk..lk+kTkx-1 of local group lg, channel kin.. of group g.
  // kTkx divides kg and bkc, so the kTkx channels lie in one group.
  const int lk = threadIdx.x * kTkx, lg = lk / a.kg, kin = kc * a.bkc + lk % a.kg, g = g0 + lg;
  const bool kvalid = g < a.groups && kin < a.kg;
  const int twg = a.tw / kTpx, prow = threadIdx.y / twg, pcol = (threadIdx.y % twg) * kTpx;
  float acc[kTpx][kTkx];
#pragma unroll
  for (int u = 0; u < kTpx; ++u)
#pragma unroll
    for (int t = 0; t < kTkx; ++t) acc[u][t] = 0.f;
  const int RS = a.r * a.s, gc = a.gpb * a.cch;
  for (int c0 = 0; c0 < a.cg; c0 += a.cch) {
    const int cn = min(a.cch, a.cg - c0);
    __syncthreads();  // the previous chunk's reads are done
    // Input window: taps outside x, channels past the group's (cn <= j) and groups past G read 0.
    const int nx = a.win_h * a.win_w * gc;
    for (int i = tid; i < nx; i += nthreads) {
      const int rest = a.by_cch.div(i), j = i - rest * a.cch, pos = a.by_gpb.div(rest), lg2 = rest - pos * a.gpb;
      const int wy = a.by_win_w.div(pos), wx = pos - wy * a.win_w, ih = ih0 + wy, iw = iw0 + wx, gg = g0 + lg2;
      float v = 0.f;
      if (j < cn && gg < a.groups && ih >= 0 && ih < a.h && iw >= 0 && iw < a.w_)
        v = to_float(x[((static_cast<long long>(b) * a.h + ih) * a.w_ + iw) * a.c + gg * a.cg + c0 + j]);
      sx[pos * a.xs + lg2 * a.cch + j] = v;
    }
    // Filter slice: w[rs, c0 + j, gg·kg + kk] (the filter is [R, S, cg, K]).
    const int nw = RS * a.cch * a.bkc;
    for (int i = tid; i < nw; i += nthreads) {
      const int rest = a.by_bkc.div(i), l = i - rest * a.bkc, rs = a.by_cch.div(rest), j = rest - rs * a.cch;
      const int lq = a.by_kg.div(l), gg = g0 + lq, kk = kc * a.bkc + l - lq * a.kg;
      float v = 0.f;
      if (j < cn && gg < a.groups && kk < a.kg)
        v = to_float(w[(static_cast<long long>(rs) * a.cg + c0 + j) * a.k + gg * a.kg + kk]);
      sw[i] = v;
    }
    __syncthreads();
    for (int r = 0; r < a.r; ++r) {
      const int wy = prow * a.stride_h + r * a.dil_h;
      for (int s = 0; s < a.s; ++s) {
        const float* xr = sx + (wy * a.win_w + pcol * a.stride_w + s * a.dil_w) * a.xs + lg * a.cch;
        const float* wr = sw + (r * a.s + s) * a.cch * a.bkc + lk;
        for (int j = 0; j < cn; ++j) {
          float wv[kTkx];
#pragma unroll
          for (int t = 0; t < kTkx; ++t) wv[t] = wr[j * a.bkc + t];
#pragma unroll
          for (int u = 0; u < kTpx; ++u) {
            const float xv = xr[u * a.stride_w * a.xs + j];
#pragma unroll
            for (int t = 0; t < kTkx; ++t) acc[u][t] = fmaf(xv, wv[t], acc[u][t]);
          }
        }
      }
    }
  }
  const int op = p0 + prow;
  if (!kvalid || op >= a.p) return;
  const int kg0 = g * a.kg + kin;
  float bv[kTkx];
#pragma unroll
  for (int t = 0; t < kTkx; ++t) bv[t] = a.bias ? to_float(static_cast<const T*>(a.bias)[kg0 + t]) : 0.f;
#pragma unroll
  for (int u = 0; u < kTpx; ++u) {
    const int oq = q0 + pcol + u;
    if (oq >= a.q) break;
    const long long y0 = ((static_cast<long long>(b) * a.p + op) * a.q + oq) * a.k + kg0;
#pragma unroll
    for (int t = 0; t < kTkx; ++t) {
      const float res = a.res ? to_float(static_cast<const T*>(a.res)[y0 + t]) : 0.f;
      static_cast<T*>(a.y)[y0 + t] = from_float<T>(finish(acc[u][t] + bv[t], res, a));
    }
  }
}

enum : int { kBodyVec = 0, kBodyTiled = 1, kBodyTensor = 2 };

// The one kernel: the depthwise vector body, the tiled body with kArg channels a thread, or the
// tensor-core body with fragments kArg channels wide.
template <class T, int kBody, int kArg>
__global__ void __launch_bounds__(kThreads) grouped_conv_kernel(const GcParams a) {
  pdl_enter();
  extern __shared__ __align__(128) float smem[];  // WMMA wants 32-byte aligned tiles
  if constexpr (kBody == kBodyVec) depthwise_vec_body<T, 16 / sizeof(T)>(a);
  else if constexpr (kBody == kBodyTiled) tiled_body<T, kArg>(a, smem);
  else if constexpr (!std::is_same_v<T, float>) tensor_body<T, kArg>(a, smem);
}

int64_t tiled_smem_bytes(const GcParams& a) {
  return (int64_t(a.win_h) * a.win_w * a.xs + int64_t(a.r) * a.s * a.cch * a.bkc) * int64_t(sizeof(float));
}

// The tiled body's tile for `a` with kTkx = tkx: up to kMaxBlockK output channels of whole groups
// (or a chunk of one wider group), about kThreads threads, the widest output rows the columns
// fill; then, while the shared memory does not fit, fewer input channels a stage, fewer rows,
// fewer columns, fewer groups. Returns the block shape, or {0,0} where nothing fits.
dim3 choose_tile(GcParams& a, int tkx) {
  if (a.kg <= kMaxBlockK) {
    a.gpb = std::min(a.groups, std::max(1, kMaxBlockK / a.kg));
    a.bkc = a.gpb * a.kg, a.kchunks = 1;
  } else {
    a.gpb = 1, a.bkc = kMaxBlockK, a.kchunks = (a.kg + kMaxBlockK - 1) / kMaxBlockK;
  }
  a.cch = a.cg;
  int tc = a.bkc / tkx, npx = std::max(1, kThreads / tc), twg = 1;
  while (twg * 2 <= npx && twg * kTpx < a.q) twg *= 2;
  int th = npx / twg;
  while (th > 1 && (th / 2) >= a.p) th /= 2;
  auto fit = [&] {
    a.th = th, a.tw = twg * kTpx;
    a.win_h = (a.th - 1) * a.stride_h + (a.r - 1) * a.dil_h + 1;
    a.win_w = (a.tw - 1) * a.stride_w + (a.s - 1) * a.dil_w + 1;
    a.xs = (a.gpb * a.cch) | 1;
    return tiled_smem_bytes(a) <= kSmemBytes;
  };
  while (!fit()) {
    if (a.cch > 1) a.cch = (a.cch + 1) / 2;
    else if (th > 1) th /= 2;
    else if (twg > 1) twg /= 2;
    else if (a.gpb > 1) a.gpb /= 2, a.bkc = a.gpb * a.kg, tc = a.bkc / tkx;
    else return dim3(0, 0);
  }
  a.tiles_p = (a.p + a.th - 1) / a.th, a.tiles_q = (a.q + a.tw - 1) / a.tw;
  a.by_cch = DivMod(unsigned(a.cch)), a.by_gpb = DivMod(unsigned(a.gpb)), a.by_win_w = DivMod(unsigned(a.win_w));
  a.by_bkc = DivMod(unsigned(a.bkc)), a.by_kg = DivMod(unsigned(a.kg));
  return dim3(unsigned(tc), unsigned(th * twg));
}

template <class T, int kTkx>
cudaError_t launch_tiled(GcParams a, cudaStream_t stream) {
  const dim3 block = choose_tile(a, kTkx);
  if (block.x == 0)
    return fail(cudaErrorNotSupported, "depthwise_conv2d: the filter window (" + std::to_string(a.r) + "x" +
                                           std::to_string(a.s) + ", dilation " + std::to_string(a.dil_h) + "x" +
                                           std::to_string(a.dil_w) + ") does not fit the tiled kernel's shared memory");
  const int64_t tiles = int64_t(a.n) * a.tiles_p * a.tiles_q, ctiles = int64_t((a.groups + a.gpb - 1) / a.gpb) * a.kchunks;
  if (tiles >= (int64_t(1) << 31) || ctiles > 65535)
    return fail(cudaErrorInvalidValue, "depthwise_conv2d: too many tiles for one launch");
  const dim3 grid{static_cast<unsigned>(tiles), static_cast<unsigned>(ctiles)};
  SABRE_CUDA_TRY(launch(grouped_conv_kernel<T, kBodyTiled, kTkx>, grid, block, size_t(tiled_smem_bytes(a)), stream, a));
  SABRE_LAUNCH_CHECK();
  return cudaSuccess;
}

template <class T, int kN>
cudaError_t launch_tensor(GcParams a, cudaStream_t stream) {
  using S = TcShape<kN>;
  a.bkc = std::min(a.kg, kMaxBlockK), a.kchunks = (a.kg + a.bkc - 1) / a.bkc, a.gpb = 1;
  const int64_t tiles = (int64_t(a.n) * a.p * a.q + S::BM - 1) / S::BM, ctiles = int64_t(a.groups) * a.kchunks;
  if (tiles >= (int64_t(1) << 31) || ctiles > 65535)
    return fail(cudaErrorInvalidValue, "depthwise_conv2d: too many tiles for one launch");
  const dim3 grid{static_cast<unsigned>(tiles), static_cast<unsigned>(ctiles)};
  SABRE_CUDA_TRY(launch(grouped_conv_kernel<T, kBodyTensor, kN>, grid, kTcThreads, size_t(tc_smem_bytes<kN>(a.bkc)),
                        stream, a));
  SABRE_LAUNCH_CHECK();
  return cudaSuccess;
}

template <class T>
cudaError_t launch_any(const GcParams& a, GroupedConvKernel body, cudaStream_t stream) {
  if constexpr (!std::is_same_v<T, float>)
    if (body == GroupedConvKernel::tensor_core)
      return a.kg % 16 == 0 ? launch_tensor<T, 16>(a, stream) : launch_tensor<T, 8>(a, stream);
  if (body == GroupedConvKernel::depthwise_vec) {
    constexpr int kV = 16 / sizeof(T);
    const int64_t total = int64_t(a.n) * a.p * a.q * a.c;
    SABRE_CUDA_TRY(launch(grouped_conv_kernel<T, kBodyVec, 0>, blocks_for(total / kV, 256, 65535), 256, 0, stream, a));
    SABRE_LAUNCH_CHECK();
    return cudaSuccess;
  }
  // The widest register tile of channels that divides a group's outputs.
  if (a.kg % 8 == 0) return launch_tiled<T, 8>(a, stream);
  if (a.kg % 4 == 0) return launch_tiled<T, 4>(a, stream);
  if (a.kg % 2 == 0) return launch_tiled<T, 2>(a, stream);
  return launch_tiled<T, 1>(a, stream);
}

// SABRE_GROUPED_TC=1: automatic takes the tensor-core body where it applies (an A/B switch until
// that body is the default; read once).
bool tensor_core_by_default() {
  static const bool on = [] {
    const char* v = std::getenv("SABRE_GROUPED_TC");
    return v && v[0] == '1';
  }();
  return on;
}

}  // namespace

const char* grouped_conv_kernel_name(GroupedConvKernel k) {
  switch (k) {
    case GroupedConvKernel::automatic: return "auto";
    case GroupedConvKernel::depthwise_vec: return "depthwise_vec";
    case GroupedConvKernel::tiled: return "tiled";
    case GroupedConvKernel::tensor_core: return "tensor_core";
  }
  return "?";
}

cudaError_t depthwise_conv2d(const DepthwiseArgs& a, cudaStream_t stream) {
  if (a.n < 0 || a.c < 1 || a.r < 1 || a.s < 1 || a.stride_h < 1 || a.stride_w < 1 || a.dil_h < 1 || a.dil_w < 1 ||
      a.p < 0 || a.q < 0 || a.h < 1 || a.w_ < 1)
    return fail(cudaErrorInvalidValue, "depthwise_conv2d: bad dims");
  if (a.clamp && !(a.clamp_min <= a.clamp_max))
    return fail(cudaErrorInvalidValue, "depthwise_conv2d: clamp_min must be <= clamp_max");
  if (a.act >= ConvAct::kCount) return fail(cudaErrorInvalidValue, "depthwise_conv2d: unknown activation");
  const bool grouped = a.k != 0 || a.groups != 0;
  if (grouped && !(a.k > 0 && a.groups > 0 && a.c % a.groups == 0 && a.k % a.groups == 0))
    return fail(cudaErrorInvalidValue, "depthwise_conv2d: grouped needs k and groups >= 1 dividing c and k");
  const int64_t k = grouped ? a.k : a.c, groups = grouped ? a.groups : a.c;
  const int64_t total = a.n * a.p * a.q * k;
  if (total == 0) return cudaSuccess;
  constexpr int64_t kMax = (int64_t(1) << 31) - 1;
  for (int64_t v : {a.n, a.h, a.w_, a.c, a.r, a.s, a.p, a.q, k, std::abs(a.pad_h), std::abs(a.pad_w), a.stride_h, a.stride_w, a.dil_h, a.dil_w,
                    a.n * a.p * a.q, (a.p - 1) * a.stride_h + (a.r - 1) * a.dil_h + 1,
                    (a.q - 1) * a.stride_w + (a.s - 1) * a.dil_w + 1})
    if (v > kMax) return fail(cudaErrorInvalidValue, "depthwise_conv2d: a dim past 2^31");
  GcParams p{};
  p.x = a.x, p.w = a.w, p.bias = a.bias, p.res = a.residual, p.y = a.y;
  p.n = int(a.n), p.h = int(a.h), p.w_ = int(a.w_), p.c = int(a.c), p.r = int(a.r), p.s = int(a.s);
  p.p = int(a.p), p.q = int(a.q), p.k = int(k), p.groups = int(groups), p.cg = int(a.c / groups), p.kg = int(k / groups);
  p.pad_h = int(a.pad_h), p.pad_w = int(a.pad_w), p.stride_h = int(a.stride_h), p.stride_w = int(a.stride_w);
  p.dil_h = int(a.dil_h), p.dil_w = int(a.dil_w);
  p.act = a.act, p.alpha = a.act_alpha, p.beta = a.act_beta;
  p.clamp = a.clamp ? 1 : 0, p.lo = a.clamp_min, p.hi = a.clamp_max;
  p.res_after = a.residual_after_act ? 1 : 0;
  // The depthwise vector body where C is a multiple of the 16-byte vector, every pointer is aligned
  // and element counts fit 32 bits; the tiled body for everything else.
  const int64_t elem = a.dtype == DType::f32 ? 4 : 2, vlen = 16 / elem;
  const bool vec_ok = k == a.c && groups == a.c && a.c % vlen == 0 && aligned16(a.x) && aligned16(a.w) &&
                      aligned16(a.y) && (!a.bias || aligned16(a.bias)) && (!a.residual || aligned16(a.residual)) &&
                      total < (int64_t(1) << 31) && a.n * a.h * a.w_ * a.c < (int64_t(1) << 31) &&
                      a.r * a.s * a.c < (int64_t(1) << 31);
  if (a.kernel == GroupedConvKernel::depthwise_vec && !vec_ok)
    return fail(cudaErrorInvalidValue, "depthwise_conv2d: the depthwise vector kernel needs one channel a group, C a "
                                       "multiple of 16 bytes and 16-byte aligned pointers");
  // The tensor-core body: 16-bit types, groups of multiples of 8 channels in and out, x and w
  // 16-byte aligned (its loads are channel vectors). Only where asked for (the kernel field or
  // SABRE_GROUPED_TC=1) until it has passed its GPU tests (grouped_conv_test's *_tensor_core cases).
  const bool tc_ok = a.dtype != DType::f32 && p.cg % 8 == 0 && p.kg % 8 == 0 && aligned16(a.x) && aligned16(a.w);
  if (a.kernel == GroupedConvKernel::tensor_core && !tc_ok)
    return fail(cudaErrorInvalidValue, "depthwise_conv2d: the tensor-core body needs f16 or bf16, multiples of 8 "
                                       "channels a group in and out and 16-byte aligned x and w");
  const GroupedConvKernel body = a.kernel != GroupedConvKernel::automatic    ? a.kernel
                                 : vec_ok                                      ? GroupedConvKernel::depthwise_vec
                                 : tc_ok && tensor_core_by_default()           ? GroupedConvKernel::tensor_core
                                                                               : GroupedConvKernel::tiled;
  switch (a.dtype) {
    case DType::f16: return launch_any<half>(p, body, stream);
    case DType::bf16: return launch_any<bf16>(p, body, stream);
    case DType::f32: return launch_any<float>(p, body, stream);
    default: return fail(cudaErrorInvalidValue, "depthwise_conv2d: f16, bf16 or f32 only");
  }
}

}  // namespace sabre::native
