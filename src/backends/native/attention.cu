// Fused attention for short sequences: O = softmax(scale * Q·Kᵀ + mask [causal]) · V in one kernel
// per (16·kWarps query rows, batch, head), reading Q, K, V and writing O through strides, so the
// [batch, seq, heads, 64] GEMM outputs need no permutes. Tensor cores through WMMA (16x16x16, f32
// accumulation); the whole score row block lives in shared memory (exact softmax, no rescaling),
// which bounds the key count at kMaxAttentionKeys. Each warp owns 16 query rows; its softmax holds
// a row in registers (one shared-memory read per element, the mask read once per warp when it does
// not vary by row). The launch picks 4, 2 or 1 warps per block so small batches still fill the GPU.
// Tests: tests/gpu/native_kernels_test.cpp (Attention_*) against a double-precision reference.
#include <mma.h>

#include "backends/native/common.cuh"

namespace sabre::native {
namespace {

using namespace detail;
using namespace nvcuda;

constexpr int kBK = 64;                                 // keys per tile
constexpr int kMaxCols = int(kMaxAttentionKeys) / 32;   // score elements per lane per row
// kD: head dim (32 or 64); kLdT: padded row of a Q/K/V tile (elements).

struct AttnParams {
  const void *q, *k, *v;
  void* o;
  long long h, sq, sk;
  long long qs[3], ks[3], vs[3], os[3];  // batch, head, row strides (elements)
  float scale;
  const void* mask;
  int mask_f32;  // else the tensor dtype
  long long ms[3];
  int causal;
  int skp;  // padded score row (floats) = keys rounded up to kBK, + 4
  int ppl;  // padded probability row (elements) = keys rounded up to kBK, + 8
};

// kRows rows x kD elements as 16-byte vectors (rows past the end are zero): every load issued
// before any store, so a tile costs one memory latency, not one per vector.
template <class T, int kD, int kRows, int kThreads, int kLdT = kD + 8>
__device__ __forceinline__ void load_tile(T* dst, const T* src, long long rows_left, long long row_stride) {
  constexpr int kVecs = kRows * (kD / 8);
  constexpr int kIters = (kVecs + kThreads - 1) / kThreads;
  uint4 val[kIters];
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int i = threadIdx.x + it * kThreads, r = i / (kD / 8), c = (i % (kD / 8)) * 8;
    val[it] = make_uint4(0, 0, 0, 0);
    if (i < kVecs && r < rows_left) val[it] = *reinterpret_cast<const uint4*>(src + r * row_stride + c);
  }
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int i = threadIdx.x + it * kThreads, r = i / (kD / 8), c = (i % (kD / 8)) * 8;
    if (i < kVecs) *reinterpret_cast<uint4*>(dst + r * kLdT + c) = val[it];
  }
}

template <class T>
__device__ __forceinline__ float mask_at(const AttnParams& p, long long i) {
  return p.mask_f32 ? static_cast<const float*>(p.mask)[i] : to_float(static_cast<const T*>(p.mask)[i]);
}

template <class T, int kD, int kWarps>
__global__ void __launch_bounds__(32 * kWarps) attention_kernel(const AttnParams p) {
  constexpr int kBQ = 16 * kWarps, kThreads = 32 * kWarps, kLdT = kD + 8;
  extern __shared__ __align__(16) unsigned char smem[];
  T* sQ = reinterpret_cast<T*>(smem);
  T* sKV = sQ + kBQ * kLdT;
  float* sS = reinterpret_cast<float*>(sKV + kBK * kLdT);
  T* sP = reinterpret_cast<T*>(sS + kBQ * p.skp);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const long long bh = blockIdx.y, bi = bh / p.h, hi = bh % p.h;
  const long long q0 = static_cast<long long>(blockIdx.x) * kBQ;
  const T* Q = static_cast<const T*>(p.q) + bi * p.qs[0] + hi * p.qs[1] + q0 * p.qs[2];
  const T* K = static_cast<const T*>(p.k) + bi * p.ks[0] + hi * p.ks[1];
  const T* V = static_cast<const T*>(p.v) + bi * p.vs[0] + hi * p.vs[1];
  const int tiles = static_cast<int>((p.sk + kBK - 1) / kBK);
  const int sk = static_cast<int>(p.sk);

  // A mask that does not vary by query row (BERT's [b, 1, 1, keys]) is read once, into registers,
  // while the tiles load.
  const bool row_mask = p.mask && p.ms[2] != 0;
  float mcol[kMaxCols];
  if (p.mask && !row_mask) {
    const long long base = bi * p.ms[0] + hi * p.ms[1];
#pragma unroll
    for (int j = 0; j < kMaxCols; ++j) {
      const int c = lane + 32 * j;
      mcol[j] = c < sk ? mask_at<T>(p, base + c) : 0.f;
    }
  }

  load_tile<T, kD, kBQ, kThreads>(sQ, Q, p.sq - q0, p.qs[2]);
  // 1. S = Q·Kᵀ, one 16-row stripe per warp.
  for (int t = 0; t < tiles; ++t) {
    __syncthreads();  // the previous tile is consumed
    load_tile<T, kD, kBK, kThreads>(sKV, K + static_cast<long long>(t) * kBK * p.ks[2], p.sk - static_cast<long long>(t) * kBK,
                                    p.ks[2]);
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kBK / 16; ++j) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.f);
#pragma unroll
      for (int kk = 0; kk < kD / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> b;
        wmma::load_matrix_sync(a, sQ + warp * 16 * kLdT + kk * 16, kLdT);
        wmma::load_matrix_sync(b, sKV + j * 16 * kLdT + kk * 16, kLdT);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync(sS + warp * 16 * p.skp + t * kBK + j * 16, acc, p.skp, wmma::mem_row_major);
    }
  }
  __syncwarp();
  // 2. Exact softmax of each of the warp's rows, the row in registers; P in T, zero past the last key.
  const int keys_padded = tiles * kBK;
  for (int r = 0; r < 16; ++r) {
    const long long qi = q0 + warp * 16 + r;
    const float* srow = sS + (warp * 16 + r) * p.skp;
    T* prow = sP + (warp * 16 + r) * p.ppl;
    const long long qm = qi < p.sq ? qi : p.sq - 1;  // rows past the end: any valid mask row
    const long long mbase = bi * p.ms[0] + hi * p.ms[1] + qm * p.ms[2];
    const long long last_key = p.causal ? qm + (p.sk - p.sq) : p.sk;  // keys past it are masked out
    float x[kMaxCols];
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < kMaxCols; ++j) {
      const int c = lane + 32 * j;
      x[j] = -INFINITY;
      if (c < sk) {
        float v = srow[c] * p.scale;
        if (p.mask) v += row_mask ? mask_at<T>(p, mbase + c) : mcol[j];
        if (p.causal && c > last_key) v = -INFINITY;
        x[j] = v;
      }
      mx = fmaxf(mx, x[j]);
    }
    mx = warp_max(mx);
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < kMaxCols; ++j) {
      x[j] = mx == -INFINITY ? 0.f : __expf(x[j] - mx);
      sum += x[j];
    }
    sum = warp_sum(sum);
    const float inv = sum > 0.f ? 1.f / sum : 0.f;  // a fully masked row gives zeros
#pragma unroll
    for (int j = 0; j < kMaxCols; ++j) {
      const int c = lane + 32 * j;
      if (c < keys_padded) prow[c] = from_float<T>(c < sk ? x[j] * inv : 0.f);
    }
  }
  // 3. O = P·V.
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> out[kD / 16];
#pragma unroll
  for (int j = 0; j < kD / 16; ++j) wmma::fill_fragment(out[j], 0.f);
  for (int t = 0; t < tiles; ++t) {
    __syncthreads();
    load_tile<T, kD, kBK, kThreads>(sKV, V + static_cast<long long>(t) * kBK * p.vs[2], p.sk - static_cast<long long>(t) * kBK,
                                    p.vs[2]);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
      wmma::load_matrix_sync(a, sP + warp * 16 * p.ppl + t * kBK + kk * 16, p.ppl);
#pragma unroll
      for (int j = 0; j < kD / 16; ++j) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b;
        wmma::load_matrix_sync(b, sKV + kk * 16 * kLdT + j * 16, kLdT);
        wmma::mma_sync(out[j], a, b, out[j]);
      }
    }
  }
  // 4. Through the warp's own score rows (no longer read) to O, 16 bytes per store where O's rows
  // allow it.
  float* stage = sS + warp * 16 * p.skp;
#pragma unroll
  for (int j = 0; j < kD / 16; ++j) wmma::store_matrix_sync(stage + j * 16, out[j], p.skp, wmma::mem_row_major);
  __syncwarp();
  T* O = static_cast<T*>(p.o) + bi * p.os[0] + hi * p.os[1];
  const bool vec = p.os[2] % 8 == 0 && reinterpret_cast<uintptr_t>(O) % 16 == 0;
  if (vec) {
#pragma unroll
    for (int i = lane; i < 16 * kD / 8; i += 32) {
      const int r = i / (kD / 8), c = (i % (kD / 8)) * 8;
      const long long qi = q0 + warp * 16 + r;
      Pack<T, 8> pk;
#pragma unroll
      for (int e = 0; e < 8; ++e) pk.v[e] = from_float<T>(stage[r * p.skp + c + e]);
      if (qi < p.sq) *reinterpret_cast<Pack<T, 8>*>(O + qi * p.os[2] + c) = pk;
    }
  } else {
    for (int i = lane; i < 16 * kD; i += 32) {
      const int r = i / kD, c = i % kD;
      const long long qi = q0 + warp * 16 + r;
      if (qi < p.sq) O[qi * p.os[2] + c] = from_float<T>(stage[r * p.skp + c]);
    }
  }
}

template <class T, int kD, int kWarps>
cudaError_t launch_warps(const AttnParams& p, long long bh, cudaStream_t stream) {
  constexpr int kBQ = 16 * kWarps, kLdT = kD + 8;
  const size_t smem = sizeof(T) * (kBQ * kLdT + kBK * kLdT) + sizeof(float) * kBQ * p.skp + sizeof(T) * kBQ * p.ppl;
  SABRE_CUDA_TRY(cudaFuncSetAttribute(attention_kernel<T, kD, kWarps>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  dim3 grid(static_cast<unsigned>((p.sq + kBQ - 1) / kBQ), static_cast<unsigned>(bh));
  attention_kernel<T, kD, kWarps><<<grid, 32 * kWarps, smem, stream>>>(p);
  SABRE_LAUNCH_CHECK();
  return cudaSuccess;
}

template <class T, int kD>
cudaError_t launch(const AttentionArgs& a, cudaStream_t stream) {
  AttnParams p{};
  p.q = a.q, p.k = a.k, p.v = a.v, p.o = a.o;
  p.h = a.h, p.sq = a.sq, p.sk = a.sk;
  for (int i = 0; i < 3; ++i) {
    p.qs[i] = a.q_stride[i], p.ks[i] = a.k_stride[i], p.vs[i] = a.v_stride[i], p.os[i] = a.o_stride[i];
    p.ms[i] = a.mask_stride[i];
  }
  p.scale = a.scale;
  p.mask = a.mask;
  p.mask_f32 = a.mask_dtype == DType::f32;
  p.causal = a.causal;
  const int keys = static_cast<int>((a.sk + kBK - 1) / kBK) * kBK;
  p.skp = keys + 4;
  p.ppl = keys + 8;
  // Blocks of 64 query rows where that gives two waves of the GPU's SMs, else 32 or 16 rows.
  const long long bh = a.b * a.h, sms = 132;
  if (bh * ((a.sq + 63) / 64) >= 2 * sms) return launch_warps<T, kD, 4>(p, bh, stream);
  if (bh * ((a.sq + 31) / 32) >= sms) return launch_warps<T, kD, 2>(p, bh, stream);
  return launch_warps<T, kD, 1>(p, bh, stream);
}

}  // namespace

std::string attention_unsupported(const AttentionArgs& a) {
  if (a.dtype != DType::f16 && a.dtype != DType::bf16) return "attention: f16 or bf16 only";
  if (a.d != 32 && a.d != 64) return "attention: head dim " + std::to_string(a.d) + ", the kernel has 32 and 64";
  if (a.sk < 1 || a.sk > kMaxAttentionKeys) return "attention: " + std::to_string(a.sk) + " keys, at most " +
                                                   std::to_string(kMaxAttentionKeys);
  if (a.sq < 1 || a.b < 1 || a.h < 1 || a.b * a.h > 65535) return "attention: empty or too many (batch x heads)";
  if (a.mask && a.mask_dtype != DType::f32 && a.mask_dtype != a.dtype) return "attention: mask must be f32 or the dtype";
  for (const int64_t* s : {a.q_stride, a.k_stride, a.v_stride})
    for (int i = 0; i < 3; ++i)
      if (s[i] % 8) return "attention: Q/K/V strides must be multiples of 8 elements";
  for (const void* ptr : {a.q, a.k, a.v})
    if (reinterpret_cast<uintptr_t>(ptr) % 16) return "attention: Q/K/V must be 16-byte aligned";
  return "";
}

cudaError_t attention(const AttentionArgs& a, cudaStream_t stream) {
  if (std::string why = attention_unsupported(a); !why.empty()) return fail(cudaErrorNotSupported, why);
  if (a.d == 32) return a.dtype == DType::f16 ? launch<half, 32>(a, stream) : launch<bf16, 32>(a, stream);
  return a.dtype == DType::f16 ? launch<half, 64>(a, stream) : launch<bf16, 64>(a, stream);
}

}  // namespace sabre::native
