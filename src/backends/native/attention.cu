// Fused attention for short sequences: O = softmax(scale * Q·Kᵀ + mask [causal]) · V in one kernel
// per (64 query rows, batch, head), reading Q, K, V and writing O through strides, so the
// [batch, seq, heads, 64] GEMM outputs need no permutes. Tensor cores through WMMA (16x16x16, f32
// accumulation); the whole score row block lives in shared memory (exact softmax, no rescaling),
// which bounds the key count at kMaxAttentionKeys. NOT YET RUN ON A GPU: tests/gpu/
// native_kernels_test.cpp (Attention_*) checks it against a double-precision reference; the
// compiler does not emit it yet.
#include <mma.h>

#include "backends/native/common.cuh"

namespace sabre::native {
namespace {

using namespace detail;
using namespace nvcuda;

constexpr int kBQ = 64;  // query rows per block (4 warps x 16)
constexpr int kBK = 64;  // keys per tile
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

template <class T, int kD, int kLdT = kD + 8>
__device__ void load_tile(T* dst, const T* src, long long rows_left, long long row_stride) {
  // 64 rows x 64 elements as 16-byte vectors; rows past the end are zero.
  for (int i = threadIdx.x; i < kBQ * (kD / 8); i += blockDim.x) {
    const int r = i / (kD / 8), c = (i % (kD / 8)) * 8;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (r < rows_left) val = *reinterpret_cast<const uint4*>(src + r * row_stride + c);
    *reinterpret_cast<uint4*>(dst + r * kLdT + c) = val;
  }
}

template <class T, int kD>
__global__ void __launch_bounds__(128) attention_kernel(const AttnParams p) {
  constexpr int kLdT = kD + 8;
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

  load_tile<T, kD>(sQ, Q, p.sq - q0, p.qs[2]);
  // 1. S = Q·Kᵀ, one 16-row stripe per warp.
  for (int t = 0; t < tiles; ++t) {
    __syncthreads();  // the previous tile is consumed
    load_tile<T, kD>(sKV, K + static_cast<long long>(t) * kBK * p.ks[2], p.sk - static_cast<long long>(t) * kBK, p.ks[2]);
    __syncthreads();
    for (int j = 0; j < kBK / 16; ++j) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.f);
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
  // 2. Exact softmax of each of the warp's rows; P in T, zero past the last key.
  const int keys_padded = tiles * kBK;
  for (int r = 0; r < 16; ++r) {
    const long long qi = q0 + warp * 16 + r;
    float* srow = sS + (warp * 16 + r) * p.skp;
    T* prow = sP + (warp * 16 + r) * p.ppl;
    const long long qm = qi < p.sq ? qi : p.sq - 1;  // rows past the end: any valid mask row
    float mx = -INFINITY;
    for (int c = lane; c < p.sk; c += 32) {
      float x = srow[c] * p.scale;
      if (p.mask) {
        const long long mi = bi * p.ms[0] + hi * p.ms[1] + qm * p.ms[2] + c;
        x += p.mask_f32 ? static_cast<const float*>(p.mask)[mi] : to_float(static_cast<const T*>(p.mask)[mi]);
      }
      if (p.causal && c > qm + (p.sk - p.sq)) x = -INFINITY;
      srow[c] = x;
      mx = fmaxf(mx, x);
    }
    for (int o = 16; o; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    float sum = 0.f;
    for (int c = lane; c < p.sk; c += 32) {
      const float e = mx == -INFINITY ? 0.f : __expf(srow[c] - mx);
      srow[c] = e;
      sum += e;
    }
    for (int o = 16; o; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    const float inv = sum > 0.f ? 1.f / sum : 0.f;  // a fully masked row gives zeros
    for (int c = lane; c < keys_padded; c += 32) prow[c] = from_float<T>(c < p.sk ? srow[c] * inv : 0.f);
  }
  // 3. O = P·V.
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> out[kD / 16];
  for (int j = 0; j < kD / 16; ++j) wmma::fill_fragment(out[j], 0.f);
  for (int t = 0; t < tiles; ++t) {
    __syncthreads();
    load_tile<T, kD>(sKV, V + static_cast<long long>(t) * kBK * p.vs[2], p.sk - static_cast<long long>(t) * kBK, p.vs[2]);
    __syncthreads();
    for (int kk = 0; kk < kBK / 16; ++kk) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
      wmma::load_matrix_sync(a, sP + warp * 16 * p.ppl + t * kBK + kk * 16, p.ppl);
      for (int j = 0; j < kD / 16; ++j) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b;
        wmma::load_matrix_sync(b, sKV + kk * 16 * kLdT + j * 16, kLdT);
        wmma::mma_sync(out[j], a, b, out[j]);
      }
    }
  }
  // 4. Through the warp's own score rows (no longer read) to O.
  float* stage = sS + warp * 16 * p.skp;
  for (int j = 0; j < kD / 16; ++j) wmma::store_matrix_sync(stage + j * 16, out[j], p.skp, wmma::mem_row_major);
  __syncwarp();
  T* O = static_cast<T*>(p.o) + bi * p.os[0] + hi * p.os[1];
  for (int i = lane; i < 16 * kD; i += 32) {
    const int r = i / kD, c = i % kD;
    const long long qi = q0 + warp * 16 + r;
    if (qi < p.sq) O[qi * p.os[2] + c] = from_float<T>(stage[r * p.skp + c]);
  }
}

template <class T, int kD>
cudaError_t launch(const AttentionArgs& a, cudaStream_t stream) {
  constexpr int kLdT = kD + 8;
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
  const size_t smem = sizeof(T) * (kBQ * kLdT + kBK * kLdT) + sizeof(float) * kBQ * p.skp + sizeof(T) * kBQ * p.ppl;
  SABRE_CUDA_TRY(cudaFuncSetAttribute(attention_kernel<T, kD>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  dim3 grid(static_cast<unsigned>((a.sq + kBQ - 1) / kBQ), static_cast<unsigned>(a.b * a.h));
  attention_kernel<T, kD><<<grid, 128, smem, stream>>>(p);
  SABRE_LAUNCH_CHECK();
  return cudaSuccess;
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
