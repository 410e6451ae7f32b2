// The small-channel conv at the NCHW boundary (the RGB stem) in one kernel, instead of an im2col
// step and a GEMM: the im2col writes a large matrix that the GEMM reads back, and a GEMM with
// N = 64 output channels uses the tensor cores poorly.
//
// A block is persistent: it loads the filter [64 output channels, cols] into shared memory once
// (again only where K > 64 moves it to another channel block) and walks tiles of kTile output
// pixels along one output row. Per tile it copies the input rows the tile reads ((R-1)·dil_h + 1
// rows of (kTile-1)·stride_w + (S-1)·dil_w + 1 positions, each position's channels contiguous and
// padded with zeros to CP = 4 or 8, taps outside x as zeros, converted to T on the way: the images'
// f32 -> f16 cast is folded in) into shared memory, every load of a thread in flight before its
// first store. Each warp then takes 32 pixels x 64 channels and, per 16 filter columns, gathers its
// A fragments straight from those rows (columns 2j, 2j + 1 are channels c, c + 1 of one position:
// one 4-byte load, and the 8 pixels x 4 column pairs of a fragment register fall on 32 banks at
// stride 2), reads the filter's B fragments with ldmatrix and issues 16 mma.sync m16n8k16 with f32
// accumulation: the im2col happens in registers, never in memory. Bias and clamp in f32; the tile
// is staged through shared memory (where its rows were) for 16-byte NHWC stores, so its 128 pixels
// x 64 channels go out as 16 KB of whole rows. Columns past R·S·CP read a zero slot (the filter is
// zero there too, and a non-finite input tap must not leak into them).
// The kernel is latency-bound: the input copy issues every load before its first store, so loads
// overlap; a variant copying the next tile's rows with cp.async during this tile's MMAs (a raw
// buffer converted when the tile starts, three blocks an SM) was slower (bench/results/stem_conv_*).
// Tests: tests/gpu/native_conv_test.cpp (StemConv_*) against the reference executor's Conv.
#include <algorithm>

#include "backends/native/attention.cuh"

namespace sabre::native {
namespace {

using namespace detail;

constexpr int kTile = static_cast<int>(kStemConvTile);  // output pixels a tile (along one output row)
constexpr int kNT = 64;                                  // output channels a block holds
constexpr int kWarps = 4;                                // 32 pixels x 64 channels each
constexpr int kThreads = 32 * kWarps;
constexpr int kLdY = kNT + 8;  // staged output row (elements): 16 bytes of padding spread the banks
static_assert(kTile == 32 * kWarps, "a warp takes 32 pixels of the tile");

struct StemP {
  const void *x, *w, *bias;
  void* y;
  int n, c, h, wd, k, p, q, cols;
  int r, s, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
  int rh, ww, row_pitch;  // stem_conv_layout
  DivMod by_ww;
  int rows, zero_len;     // the rows region (>= the staged output) and the zero slot after it
  int qblocks;            // tiles along an output row
  long long tiles;
  int clamp;
  float lo, hi;
};

template <class TX, class T>
__device__ __forceinline__ T convert(TX v) {
  if constexpr (std::is_same_v<TX, T>) return v;
  else return from_float<T>(to_float(v));
}

// Shared memory: the filter [kNT][cols + 8] (T), the column-pair table [cols / 2] (int), the tile's
// input rows (or, after its MMAs, its staged output [kTile][kLdY]) and the zero slot (T).
__host__ __device__ constexpr size_t filter_bytes(size_t elem, int cols) {
  return elem * static_cast<size_t>(kNT) * (cols + 8);
}
__host__ __device__ constexpr size_t table_bytes(int cols) { return sizeof(int) * static_cast<size_t>((cols / 2 + 3) / 4 * 4); }

// CP: channels a position takes in shared memory (4 or 8; stem_conv_channel_pitch).
template <class TX, class T, int CP>
__global__ void __launch_bounds__(kThreads, 4) stem_conv_kernel(const StemP p) {
  constexpr int kFill = 32 / CP;  // input positions a thread loads before it stores them (32 values)
  pdl_enter();
  extern __shared__ __align__(16) unsigned char smem[];
  const int wpitch = p.cols + 8;
  T* sW = reinterpret_cast<T*>(smem);
  int* sK = reinterpret_cast<int*>(smem + filter_bytes(sizeof(T), p.cols));
  T* sP = reinterpret_cast<T*>(smem + filter_bytes(sizeof(T), p.cols) + table_bytes(p.cols));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const T zero = from_float<T>(0.f);

  // Column pair j (columns 2j, 2j + 1: channels c, c + 1 of tap (r, s)) -> the offset of its first
  // element in the rows for pixel 0 of the tile (pixel m adds m·stride_w·CP); past R·S·CP -> the zero slot.
  for (int j = threadIdx.x; j < p.cols / 2; j += kThreads) {
    const int col = 2 * j, tap = col / CP;
    int off = p.rows;
    if (tap < p.r * p.s) off = tap / p.s * p.dil_h * p.row_pitch + tap % p.s * p.dil_w * CP + col % CP;
    sK[j] = off;
  }
  for (int i = threadIdx.x; i < p.zero_len; i += kThreads) sP[p.rows + i] = zero;

  const TX* __restrict__ x = static_cast<const TX*>(p.x);
  const T* __restrict__ wg = static_cast<const T*>(p.w);
  const T* __restrict__ bg = static_cast<const T*>(p.bias);
  T* __restrict__ y = static_cast<T*>(p.y);
  const long long per_kb = static_cast<long long>(p.n) * p.p * p.qblocks;
  const long long plane = static_cast<long long>(p.h) * p.wd;
  int loaded_kb = -1;
  float bias[8][2];

  // The warp's pixels: m = 32·warp + 16·mt + g + 8·hi, at m·stride_w·CP in the rows.
  int po[2][2];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) po[mt][hi] = (32 * warp + 16 * mt + g + 8 * hi) * p.stride_w * CP;
  // ldmatrix lanes for B: rows (channels) lane % 8 + 8·(lane / 16), columns 8·((lane / 8) % 2).
  const unsigned w_lane = smem_addr(sW) + sizeof(T) * ((lane % 8 + 8 * (lane / 16)) * wpitch + 8 * ((lane / 8) % 2));

  for (long long tile = blockIdx.x; tile < p.tiles; tile += gridDim.x) {
    const int kb = static_cast<int>(tile / per_kb);
    const long long rest = tile - kb * per_kb;
    const long long np = rest / p.qblocks;
    const int q0 = static_cast<int>(rest - np * p.qblocks) * kTile;
    const int ni = static_cast<int>(np / p.p), pi = static_cast<int>(np - static_cast<long long>(ni) * p.p);

    __syncthreads();  // the previous tile's staged output is stored (and the table and zero slot are written)
    if (kb != loaded_kb) {
      // The filter rows of channel block kb (zeros past K), 16 bytes at a time.
      const int chunks = p.cols / 8;
      for (int i = threadIdx.x; i < kNT * chunks; i += kThreads) {
        const int row = i / chunks, ch = i - row * chunks, kk = kb * kNT + row;
        Pack<T, 8> v;
        if (kk < p.k) {
          v = *reinterpret_cast<const Pack<T, 8>*>(wg + static_cast<size_t>(kk) * p.cols + 8 * ch);
        } else {
#pragma unroll
          for (int e = 0; e < 8; ++e) v.v[e] = zero;
        }
        *reinterpret_cast<Pack<T, 8>*>(sW + row * wpitch + 8 * ch) = v;
      }
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int kk = kb * kNT + 8 * j + 2 * t + e;
          bias[j][e] = bg && kk < p.k ? to_float(bg[kk]) : 0.f;
        }
      loaded_kb = kb;
    }
    // The tile's input rows: position i = rr·ww + j (row rr, column j) of the rh·ww, its C channels
    // loaded for kFill positions a thread before any is stored.
    {
      const int h0 = pi * p.stride_h - p.pad_h, w0 = q0 * p.stride_w - p.pad_w, total = p.rh * p.ww;
      const TX* xn = x + static_cast<size_t>(ni) * p.c * plane;
      for (int base = threadIdx.x; base < total; base += kThreads * kFill) {
        TX v[kFill][CP];
        int dst[kFill];
#pragma unroll
        for (int f = 0; f < kFill; ++f) {
          const int i = base + f * kThreads;
          const int rr = static_cast<int>(p.by_ww.div(static_cast<unsigned>(i))), j = i - rr * p.ww;
          const int hi = h0 + rr, wi = w0 + j;
          const bool in = i < total && static_cast<unsigned>(hi) < static_cast<unsigned>(p.h) &&
                          static_cast<unsigned>(wi) < static_cast<unsigned>(p.wd);
          const TX* src = xn + (in ? static_cast<long long>(hi) * p.wd + wi : 0);
#pragma unroll
          for (int ci = 0; ci < CP; ++ci) v[f][ci] = in && ci < p.c ? __ldg(src + ci * plane) : TX(0.f);
          dst[f] = i < total ? rr * p.row_pitch + j * CP : -1;
        }
#pragma unroll
        for (int f = 0; f < kFill; ++f) {
          Pack<T, CP> o;
#pragma unroll
          for (int ci = 0; ci < CP; ++ci) o.v[ci] = convert<TX, T>(v[f][ci]);
          if (dst[f] >= 0) *reinterpret_cast<Pack<T, CP>*>(sP + dst[f]) = o;
        }
      }
    }
    __syncthreads();  // the filter and the rows are in

    float acc[2][8][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[mt][j][0] = acc[mt][j][1] = acc[mt][j][2] = acc[mt][j][3] = 0.f;
    const bool active = q0 + 32 * warp < p.q;  // the last tile of a row may leave whole warps idle
    if (active) {
#pragma unroll 2
      for (int k0 = 0; k0 < p.cols; k0 += 16) {
        const int klo = sK[k0 / 2 + t], khi = sK[k0 / 2 + 4 + t];
        unsigned a[2][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          a[mt][0] = *reinterpret_cast<const unsigned*>(sP + klo + po[mt][0]);
          a[mt][1] = *reinterpret_cast<const unsigned*>(sP + klo + po[mt][1]);
          a[mt][2] = *reinterpret_cast<const unsigned*>(sP + khi + po[mt][0]);
          a[mt][3] = *reinterpret_cast<const unsigned*>(sP + khi + po[mt][1]);
        }
#pragma unroll
        for (int jn = 0; jn < 4; ++jn) {
          unsigned b[4];
          ldmatrix_x4(b, w_lane + sizeof(T) * (16 * jn * wpitch + k0));
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            mma16816<T>(acc[mt][2 * jn], a[mt], b[0], b[1]);
            mma16816<T>(acc[mt][2 * jn + 1], a[mt], b[2], b[3]);
          }
        }
      }
    }
    __syncthreads();  // every warp is done with the rows: the staged output takes their place

    T* stage = sP;
    if (active) {
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
          for (int hi = 0; hi < 2; ++hi) {
            float v0 = acc[mt][j][2 * hi] + bias[j][0], v1 = acc[mt][j][2 * hi + 1] + bias[j][1];
            if (p.clamp) v0 = fminf(fmaxf(v0, p.lo), p.hi), v1 = fminf(fmaxf(v1, p.lo), p.hi);
            const int m = 32 * warp + 16 * mt + g + 8 * hi;
            *reinterpret_cast<unsigned*>(stage + m * kLdY + 8 * j + 2 * t) = pack2<T>(v0, v1);
          }
    }
    __syncthreads();
    // Pixel m of the tile is y row ((n·P + p)·Q + q0 + m); its channels kb·64 .. as 16-byte chunks.
    const int rows = min(kTile, p.q - q0), chunks = min(kNT, p.k - kb * kNT) / 8;
    T* yrow = y + (static_cast<size_t>(np) * p.q + q0) * p.k + kb * kNT;
    for (int i = threadIdx.x; i < rows * 8; i += kThreads) {
      const int m = i / 8, ch = i % 8;
      if (ch < chunks)
        *reinterpret_cast<Pack<T, 8>*>(yrow + static_cast<size_t>(m) * p.k + 8 * ch) =
            *reinterpret_cast<const Pack<T, 8>*>(stage + m * kLdY + 8 * ch);
    }
  }
}

template <class TX, class T, int CP>
cudaError_t launch(const StemP& p, size_t smem, cudaStream_t stream) {
  auto kernel = stem_conv_kernel<TX, T, CP>;
  // Above 48 KB a kernel must opt in (on the current device: a host call, no stream work). The
  // carveout asks for all of the SM's shared memory so the occupancy below (and the persistent grid)
  // can reach four blocks an SM (the carveout is not what limits this kernel's speed).
  if (smem > 48 * 1024)
    SABRE_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  SABRE_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  int dev = 0, sms = 0, per_sm = 0;
  SABRE_CUDA_TRY(cudaGetDevice(&dev));
  SABRE_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  SABRE_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem));
  if (per_sm < 1) return fail(cudaErrorNotSupported, "stem_conv: " + std::to_string(smem) + " bytes of shared memory do not fit an SM");
  const long long slots = static_cast<long long>(sms) * per_sm;
  const unsigned grid = static_cast<unsigned>(p.tiles < slots ? p.tiles : slots);
  SABRE_CUDA_TRY(detail::launch(kernel, grid, kThreads, smem, stream, p));
  SABRE_LAUNCH_CHECK();
  return cudaSuccess;
}

template <class T, int CP>
cudaError_t launch_x(DType x_dtype, const StemP& p, size_t smem, cudaStream_t stream) {
  switch (x_dtype) {
    case DType::f32: return launch<float, T, CP>(p, smem, stream);
    case DType::f16: return launch<half, T, CP>(p, smem, stream);
    case DType::bf16: return launch<bf16, T, CP>(p, smem, stream);
    default: return fail(cudaErrorNotSupported, "stem_conv: x must be f32, f16 or bf16");
  }
}

}  // namespace

cudaError_t stem_conv(const StemConvArgs& a, cudaStream_t stream) {
  if (std::string why = stem_conv_unsupported(a.x_dtype, a.dtype, a.c, a.r, a.s, a.k, a.cols, a.stride_h, a.stride_w,
                                              a.dil_h, a.dil_w);
      !why.empty())
    return fail(cudaErrorNotSupported, why);
  if (!a.x || !a.w || !a.y) return fail(cudaErrorInvalidValue, "stem_conv: needs x, w and y");
  if (a.n < 1 || a.h < 1 || a.w_ < 1 || a.p < 1 || a.q < 1 || a.pad_h < 0 || a.pad_w < 0)
    return fail(cudaErrorInvalidValue, "stem_conv: empty dims or negative padding");
  constexpr int64_t kMax = 0x7fffffff;
  if (a.n * a.p * a.q > kMax || a.n * a.p > kMax / 2 || a.h + a.pad_h > kMax / 8 || a.w_ + a.pad_w > kMax / 8)
    return fail(cudaErrorInvalidValue, "stem_conv: more than 2^31 - 1 output pixels");
  if (!aligned16(a.w) || !aligned16(a.y)) return fail(cudaErrorInvalidValue, "stem_conv: w and y must be 16-byte aligned");
  const StemConvLayout l = stem_conv_layout(a.c, a.r, a.s, a.stride_w, a.dil_h, a.dil_w);
  StemP p{};
  p.x = a.x, p.w = a.w, p.bias = a.bias, p.y = a.y;
  p.n = static_cast<int>(a.n), p.c = static_cast<int>(a.c), p.h = static_cast<int>(a.h), p.wd = static_cast<int>(a.w_);
  p.k = static_cast<int>(a.k), p.p = static_cast<int>(a.p), p.q = static_cast<int>(a.q);
  p.cols = static_cast<int>(a.cols), p.r = static_cast<int>(a.r), p.s = static_cast<int>(a.s);
  p.pad_h = static_cast<int>(a.pad_h), p.pad_w = static_cast<int>(a.pad_w);
  p.stride_h = static_cast<int>(a.stride_h), p.stride_w = static_cast<int>(a.stride_w);
  p.dil_h = static_cast<int>(a.dil_h), p.dil_w = static_cast<int>(a.dil_w);
  p.rh = static_cast<int>(l.rh), p.ww = static_cast<int>(l.ww), p.row_pitch = static_cast<int>(l.row_pitch);
  p.by_ww = DivMod(static_cast<unsigned>(l.ww));
  // The rows region also holds the staged output; a multiple of 8 elements keeps the zero slot aligned.
  p.rows = static_cast<int>(std::max<int64_t>(l.rows, int64_t{kTile} * kLdY) + 7) / 8 * 8;
  p.zero_len = static_cast<int>(l.zero_len);
  p.qblocks = static_cast<int>((a.q + kTile - 1) / kTile);
  p.tiles = static_cast<long long>((a.k + kNT - 1) / kNT) * p.n * p.p * p.qblocks;
  p.clamp = a.clamp ? 1 : 0, p.lo = a.clamp_min, p.hi = a.clamp_max;
  const size_t elem = ir::size_of(a.dtype);
  const size_t smem = filter_bytes(elem, p.cols) + table_bytes(p.cols) + elem * (static_cast<size_t>(p.rows) + p.zero_len);
  const bool f16 = a.dtype == DType::f16;
  if (l.cp == 4) return f16 ? launch_x<half, 4>(a.x_dtype, p, smem, stream) : launch_x<bf16, 4>(a.x_dtype, p, smem, stream);
  return f16 ? launch_x<half, 8>(a.x_dtype, p, smem, stream) : launch_x<bf16, 8>(a.x_dtype, p, smem, stream);
}

}  // namespace sabre::native
