// Fused attention: O = softmax(scale * Q·Kᵀ + mask [causal]) · V in one kernel per (16·kWarps query
// rows, batch, head), reading Q, K, V and writing O through strides, so the [batch, seq, heads, 64]
// GEMM outputs need no permutes. FlashAttention-2's scheme on mma.sync (m16n8k16, f32 accumulation):
// each warp owns 16 query rows, keeps its Q fragments, score tile, softmax state and O accumulator
// in registers, and walks the keys in tiles of kBK with an online softmax; scores never touch shared
// memory, and P feeds the second MMA straight from the score registers. Shared memory holds only the
// Q tile (staged once, then reused to stage O for 16-byte stores) and one K and one V tile, so its
// size does not depend on the key count.
// (The first version kept whole score rows in shared memory and ran 28 us for one BERT-base layer
// at batch 1 and 71 us at batch 32, back to back; bench/results/native_bench_h200_2026-12-02.txt.)
// Tests: tests/gpu/native_kernels_test.cpp (Attention_*) against a double-precision reference.
#include "backends/native/common.cuh"

namespace sabre::native {
namespace {

using namespace detail;

constexpr int kBK = 64;  // keys per tile
// kD: head dim (32 or 64); kLdT: padded row of a Q/K/V tile in elements (16 bytes of padding put
// the 8 rows one ldmatrix reads in different banks).

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
};

// kRows rows x kD elements as 16-byte vectors (rows past the end are zero, so padded keys give
// finite scores and zero values): every load issued before any store, one memory latency a tile.
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

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
// c += a·b for one m16n8k16 tile: a 16x16 (row-major fragment, 4 regs), b 16x8 (2 regs), c 16x8 f32.
template <class T>
__device__ __forceinline__ void mma16816(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  if constexpr (std::is_same_v<T, half>) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}
// Two floats as one register of two T (the low half first, as the MMA fragments expect).
template <class T>
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
  Pack<T, 2> p;
  p.v[0] = from_float<T>(lo), p.v[1] = from_float<T>(hi);
  return *reinterpret_cast<unsigned*>(&p);
}

template <class T>
__device__ __forceinline__ float mask_at(const AttnParams& p, long long i) {
  return p.mask_f32 ? static_cast<const float*>(p.mask)[i] : to_float(static_cast<const T*>(p.mask)[i]);
}

// Fragment coordinates (PTX ISA, mma.m16n8k16): lane = 4g + t holds accumulator rows g and g + 8,
// columns 2t and 2t + 1 of each 8-column block.
template <class T, int kD, int kWarps>
__global__ void __launch_bounds__(32 * kWarps) attention_kernel(const AttnParams p) {
  constexpr int kBQ = 16 * kWarps, kThreads = 32 * kWarps, kLdT = kD + 8;
  constexpr int kKc = kD / 16;   // 16-wide chunks of the head dim (Q·Kᵀ's k steps)
  constexpr int kSn = kBK / 8;   // 8-key blocks of a score tile
  constexpr int kOn = kD / 8;    // 8-wide blocks of the output row
  __shared__ __align__(16) T sQ[kBQ * kLdT];
  __shared__ __align__(16) T sK[kBK * kLdT];
  __shared__ __align__(16) T sV[kBK * kLdT];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const long long bh = blockIdx.y, bi = bh / p.h, hi = bh % p.h;
  const long long q0 = static_cast<long long>(blockIdx.x) * kBQ;
  const T* Q = static_cast<const T*>(p.q) + bi * p.qs[0] + hi * p.qs[1] + q0 * p.qs[2];
  const T* K = static_cast<const T*>(p.k) + bi * p.ks[0] + hi * p.ks[1];
  const T* V = static_cast<const T*>(p.v) + bi * p.vs[0] + hi * p.vs[1];
  const int tiles = static_cast<int>((p.sk + kBK - 1) / kBK);

  // The thread's two query rows; rows past the end read any valid mask row and are not stored.
  long long qrow[2], mrow[2], last_key[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    qrow[i] = q0 + warp * 16 + g + 8 * i;
    const long long qm = qrow[i] < p.sq ? qrow[i] : p.sq - 1;
    mrow[i] = bi * p.ms[0] + hi * p.ms[1] + qm * p.ms[2];
    last_key[i] = p.causal ? qm + (p.sk - p.sq) : p.sk - 1;  // keys past it are masked out
  }

  load_tile<T, kD, kBQ, kThreads>(sQ, Q, p.sq - q0, p.qs[2]);
  __syncthreads();
  // Q's A fragments for the warp's 16 rows, kept for every key tile.
  unsigned qa[kKc][4];
  {
    const T* base = sQ + (warp * 16 + (lane % 8) + 8 * ((lane / 8) % 2)) * kLdT + 8 * (lane / 16);
#pragma unroll
    for (int kc = 0; kc < kKc; ++kc) ldmatrix_x4(qa[kc], base + 16 * kc);
  }

  float o[kOn][4];
#pragma unroll
  for (int j = 0; j < kOn; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // running max and sum of the two rows

  for (int tile = 0; tile < tiles; ++tile) {
    const long long k0 = static_cast<long long>(tile) * kBK;
    __syncthreads();  // the previous tile is consumed
    load_tile<T, kD, kBK, kThreads>(sK, K + k0 * p.ks[2], p.sk - k0, p.ks[2]);
    load_tile<T, kD, kBK, kThreads>(sV, V + k0 * p.vs[2], p.sk - k0, p.vs[2]);
    __syncthreads();

    // S = Q·Kᵀ for 16 rows x kBK keys. One ldmatrix.x4 of K gives the B fragments of two 8-key blocks.
    float s[kSn][4];
#pragma unroll
    for (int n = 0; n < kSn; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
    for (int n = 0; n < kSn; n += 2) {
      const T* kb = sK + (8 * n + (lane % 8) + 8 * (lane / 16)) * kLdT + 8 * ((lane / 8) % 2);
#pragma unroll
      for (int kc = 0; kc < kKc; ++kc) {
        unsigned b[4];
        ldmatrix_x4(b, kb + 16 * kc);
        mma16816<T>(s[n], qa[kc], b[0], b[1]);
        mma16816<T>(s[n + 1], qa[kc], b[2], b[3]);
      }
    }

    // Scale, mask, causal and padding; the tile's row maxima.
    float tmax[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kSn; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = e / 2;
        const long long key = k0 + 8 * n + 2 * t + (e % 2);
        float v = s[n][e] * p.scale;
        if (key > last_key[i]) v = -INFINITY;  // past the end, or causal
        else if (p.mask) v += mask_at<T>(p, mrow[i] + key);
        s[n][e] = v;
        tmax[i] = fmaxf(tmax[i], v);
      }
    }
    // Online softmax: the row's four lanes agree on the new maximum; the old sum and O rescale.
    float corr[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      tmax[i] = fmaxf(tmax[i], __shfl_xor_sync(0xffffffffu, tmax[i], 1));
      tmax[i] = fmaxf(tmax[i], __shfl_xor_sync(0xffffffffu, tmax[i], 2));
      const float mnew = fmaxf(m[i], tmax[i]);
      corr[i] = mnew == -INFINITY ? 1.f : __expf(m[i] - mnew);  // exp(-inf) = 0 when m was -inf
      m[i] = mnew;
      l[i] *= corr[i];
    }
#pragma unroll
    for (int j = 0; j < kOn; ++j) o[j][0] *= corr[0], o[j][1] *= corr[0], o[j][2] *= corr[1], o[j][3] *= corr[1];

    // P = exp(S - m), summed in f32 and packed to T as the A fragments of P·V: 16 keys (two score
    // blocks) per k step.
#pragma unroll
    for (int kc = 0; kc < kBK / 16; ++kc) {
      float pv[2][4];
#pragma unroll
      for (int h2 = 0; h2 < 2; ++h2)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int i = e / 2;
          const float x = m[i] == -INFINITY ? 0.f : __expf(s[2 * kc + h2][e] - m[i]);
          pv[h2][e] = x;
          l[i] += x;
        }
      const unsigned a[4] = {pack2<T>(pv[0][0], pv[0][1]), pack2<T>(pv[0][2], pv[0][3]), pack2<T>(pv[1][0], pv[1][1]),
                             pack2<T>(pv[1][2], pv[1][3])};
      // V rows 16kc..16kc+15 as B (k = key, n = head dim), transposed by ldmatrix: one x4 gives two
      // 8-wide output blocks.
      const T* vb = sV + (16 * kc + (lane % 8) + 8 * ((lane / 8) % 2)) * kLdT + 8 * (lane / 16);
#pragma unroll
      for (int j = 0; j < kOn; j += 2) {
        unsigned b[4];
        ldmatrix_x4_trans(b, vb + 8 * j);
        mma16816<T>(o[j], a, b[0], b[1]);
        mma16816<T>(o[j + 1], a, b[2], b[3]);
      }
    }
  }

  // Normalize (a fully masked row has l = 0 and gives zeros), stage the warp's 16 rows in its own
  // rows of sQ (no longer read), then store O 16 bytes at a time where its rows allow it.
  float inv[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
    inv[i] = l[i] > 0.f ? 1.f / l[i] : 0.f;
  }
  T* stage = sQ + warp * 16 * kLdT;
  __syncwarp();
#pragma unroll
  for (int j = 0; j < kOn; ++j) {
    *reinterpret_cast<unsigned*>(stage + g * kLdT + 8 * j + 2 * t) = pack2<T>(o[j][0] * inv[0], o[j][1] * inv[0]);
    *reinterpret_cast<unsigned*>(stage + (g + 8) * kLdT + 8 * j + 2 * t) = pack2<T>(o[j][2] * inv[1], o[j][3] * inv[1]);
  }
  __syncwarp();
  T* O = static_cast<T*>(p.o) + bi * p.os[0] + hi * p.os[1];
  const long long row0 = q0 + warp * 16;
  if (p.os[2] % 8 == 0 && reinterpret_cast<uintptr_t>(O) % 16 == 0) {
#pragma unroll
    for (int i = lane; i < 16 * kD / 8; i += 32) {
      const int r = i / (kD / 8), c = (i % (kD / 8)) * 8;
      if (row0 + r < p.sq)
        *reinterpret_cast<uint4*>(O + (row0 + r) * p.os[2] + c) = *reinterpret_cast<const uint4*>(stage + r * kLdT + c);
    }
  } else {
    for (int i = lane; i < 16 * kD; i += 32) {
      const int r = i / kD, c = i % kD;
      if (row0 + r < p.sq) O[(row0 + r) * p.os[2] + c] = stage[r * kLdT + c];
    }
  }
}

template <class T, int kD, int kWarps>
cudaError_t launch_warps(const AttnParams& p, long long bh, cudaStream_t stream) {
  constexpr int kBQ = 16 * kWarps;
  dim3 grid(static_cast<unsigned>((p.sq + kBQ - 1) / kBQ), static_cast<unsigned>(bh));
  attention_kernel<T, kD, kWarps><<<grid, 32 * kWarps, 0, stream>>>(p);
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
