// The previous fused attention kernel, kept only so that SABRE_ATTN_V1=1 (or AttentionKernel::v1)
// can run it against attention.cu's in the same build for an on-GPU A/B; to be deleted once the
// rework is measured. Its description as it was:
//
// Fused attention: O = softmax(scale * Q·Kᵀ + mask [causal]) · V in one kernel per (batch, head,
// 16·kRowWarps query rows), reading Q, K, V and writing O through strides, so the [batch, seq, heads, 64]
// GEMM outputs need no permutes. FlashAttention-2's scheme on mma.sync (m16n8k16, f32 accumulation):
// a warp keeps its Q fragments, score tile, online-softmax state and O accumulator in registers, walks
// the keys in tiles of kBK, and feeds P to the second MMA straight from the score registers; scores
// never touch shared memory.
// Loads: cp.async copies Q and each K and V tile straight into shared memory (rows past the end
// zero-filled), so all of a tile's loads are in flight at once without passing through registers. K/V
// are double-buffered: tile t+1 arrives while tile t is computed, and a 128-key sequence is requested
// whole before the first wait. A warp reads its mask values into registers before it waits for the
// tile (warps that split the keys: one tile ahead), so their latency overlaps the tile's.
// Blocks are four warps: kRowWarps groups of 16 query rows times kSplit warps per group, each of which
// takes kBK / kSplit keys of every tile with its own softmax state (m, l, O); at the end the split warps
// merge through shared memory (M = max m_i, l = sum exp(m_i - M) l_i, O = sum exp(m_i - M) O_i / l).
// 4 x 1 where 64-row blocks make two waves of the SMs (2 x 132), else 2 x 2 where 32-row blocks do, else 1 x 4
// (BERT-base at batch 1: 96 blocks of 16 rows, 384 warps instead of 96). Causal blocks skip the key
// tiles past their last row's keys. Shared memory: the Q tile (reused to stage O for 16-byte stores)
// and two stages of one K and one V tile (reused for the merge), at most 45 KiB whatever the key count.
// (The first version kept whole score rows in shared memory and ran 28 us for one BERT-base layer
// at batch 1 and 71 us at batch 32, back to back; bench/results/native_bench_h200_2026-12-02.txt. The
// next loaded tiles synchronously through registers with one warp per 16 rows on small grids: 14.6 /
// 11.6 / 23.6 us at batch 1 / 8 / 32, graph replay; bench/results/speed_h200_2026-12-02.txt.)
// Tests: tests/gpu/native_kernels_test.cpp (Attention_*) against a double-precision reference.
#include "backends/native/attention.cuh"

namespace sabre::native {
namespace {

using namespace detail;

constexpr int kBK = kAttnBK;  // keys per tile
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

// kRows rows x kD elements into a tile of kLdT-element rows, one cp.async per 16 bytes (rows_left >= 1;
// rows past it are zero, so padded keys give finite scores and zero values).
template <class T, int kD, int kRows, int kThreads, int kLdT = kD + 8>
__device__ __forceinline__ void load_tile_async(T* dst, const T* src, long long rows_left, long long row_stride) {
  constexpr int kVecs = kRows * (kD / 8);
#pragma unroll
  for (int it = 0; it < (kVecs + kThreads - 1) / kThreads; ++it) {
    const int i = threadIdx.x + it * kThreads, r = i / (kD / 8), c = (i % (kD / 8)) * 8;
    if (i < kVecs) {
      const bool in = r < rows_left;
      cp_async16(dst + r * kLdT + c, in ? src + r * row_stride + c : src, in ? 16 : 0);
    }
  }
}

template <class T>
__device__ __forceinline__ float mask_at(const AttnParams& p, long long i) {
  return p.mask_f32 ? static_cast<const float*>(p.mask)[i] : to_float(static_cast<const T*>(p.mask)[i]);
}

// Fragment coordinates (PTX ISA, mma.m16n8k16): lane = 4g + t holds accumulator rows g and g + 8,
// columns 2t and 2t + 1 of each 8-column block.
// Three blocks an SM: ptxas then keeps every variant at <= 168 registers without spills (four would
// spill the 64-row variant; unbounded, it takes 206 and two blocks).
template <class T, int kD, int kRowWarps, int kSplit>
__global__ void __launch_bounds__(32 * kRowWarps * kSplit, 3) attention_kernel(const AttnParams p) {
  detail::pdl_enter();
  constexpr int kWarps = kRowWarps * kSplit, kThreads = 32 * kWarps;
  constexpr int kBQ = 16 * kRowWarps, kLdT = kD + 8;
  constexpr int kKW = kBK / kSplit;  // keys of each tile that one warp takes
  constexpr int kKc = kD / 16;       // 16-wide chunks of the head dim (Q·Kᵀ's k steps)
  constexpr int kSn = kKW / 8;       // 8-key blocks of a warp's score tile
  constexpr int kOn = kD / 8;        // 8-wide blocks of the output row
  static_assert(kKW % 16 == 0, "a warp's keys must fill whole k steps of P·V");
  __shared__ __align__(16) T sQ[kBQ * kLdT];
  __shared__ __align__(16) T sKV[2][2][kBK * kLdT];  // [buffer][K, V]

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int rw = warp / kSplit, sp = warp % kSplit;  // the warp's 16 query rows; its share of each tile
  const long long bh = blockIdx.y, bi = bh / p.h, hi = bh % p.h;
  const long long q0 = static_cast<long long>(blockIdx.x) * kBQ;
  const T* Q = static_cast<const T*>(p.q) + bi * p.qs[0] + hi * p.qs[1] + q0 * p.qs[2];
  const T* K = static_cast<const T*>(p.k) + bi * p.ks[0] + hi * p.ks[1];
  const T* V = static_cast<const T*>(p.v) + bi * p.vs[0] + hi * p.vs[1];
  int tiles = static_cast<int>((p.sk + kBK - 1) / kBK);
  if (p.causal) {
    // Keys past the last key of the block's last row are masked for all its rows: skip their tiles
    // (keep one where every row is masked, so the block still writes its zeros).
    const long long last = (q0 + kBQ < p.sq ? q0 + kBQ : p.sq) - 1 + (p.sk - p.sq);
    if (last < 0) tiles = 1;
    else if (last / kBK + 1 < tiles) tiles = static_cast<int>(last / kBK + 1);
  }

  // The thread's two query rows; rows past the end read any valid mask row and are not stored.
  // Keys fit in int (at most kMaxAttentionKeys); last_key is -1 where a causal row sees none.
  long long mrow[2];
  int last_key[2];  // keys past it are masked out
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const long long qrow = q0 + rw * 16 + g + 8 * i, qm = qrow < p.sq ? qrow : p.sq - 1;
    mrow[i] = bi * p.ms[0] + hi * p.ms[1] + qm * p.ms[2];
    const long long lk = p.causal ? qm + (p.sk - p.sq) : p.sk - 1;
    last_key[i] = static_cast<int>(lk < -1 ? -1 : lk);
  }

  // Copy groups, in commit order: Q with tile 0, tile 1, then tile t + 2 after tile t is consumed
  // (an empty group where there is none), so tile t's group is complete when at most one is pending.
  auto load_kv = [&](int tile, int buf) {
    const long long k0 = static_cast<long long>(tile) * kBK;
    load_tile_async<T, kD, kBK, kThreads>(sKV[buf][0], K + k0 * p.ks[2], p.sk - k0, p.ks[2]);
    load_tile_async<T, kD, kBK, kThreads>(sKV[buf][1], V + k0 * p.vs[2], p.sk - k0, p.vs[2]);
  };
  load_tile_async<T, kD, kBQ, kThreads>(sQ, Q, p.sq - q0, p.qs[2]);
  load_kv(0, 0);
  cp_async_commit();
  if (tiles > 1) load_kv(1, 1);
  cp_async_commit();

  unsigned qa[kKc][4];  // Q's A fragments for the warp's 16 rows, kept for every key tile
  float o[kOn][4];
#pragma unroll
  for (int j = 0; j < kOn; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // running max and sum of the two rows

  // The mask at the thread's score positions, requested before the wait for the tile so the latencies
  // overlap; where a warp's share of a tile is small (split keys), one tile ahead, so they overlap its
  // computation too (for whole tiles that would cost 32 more registers and spill).
  constexpr bool kMaskAhead = kSplit > 1;
  auto load_mask = [&](float (&mv)[kSn][4], int tile) {
    const int k0 = tile * kBK + sp * kKW;
#pragma unroll
    for (int n = 0; n < kSn; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = k0 + 8 * n + 2 * t + (e % 2);
        mv[n][e] = p.mask && key <= last_key[e / 2] ? mask_at<T>(p, mrow[e / 2] + key) : 0.f;
      }
  };
  float mkn[kSn][4];  // the mask of the next tile to compute
  if constexpr (kMaskAhead) load_mask(mkn, 0);

  for (int tile = 0; tile < tiles; ++tile) {
    const int buf = tile % 2;
    const int k0 = tile * kBK + sp * kKW;  // the warp's first key
    if constexpr (!kMaskAhead) load_mask(mkn, tile);
    float mk[kSn][4];
#pragma unroll
    for (int n = 0; n < kSn; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) mk[n][e] = mkn[n][e];
    if constexpr (kMaskAhead)
      if (tile + 1 < tiles) load_mask(mkn, tile + 1);
    cp_async_wait<1>();
    __syncthreads();  // the tile (and Q) landed for every thread
    if (tile == 0) {
      const T* base = sQ + (rw * 16 + (lane % 8) + 8 * ((lane / 8) % 2)) * kLdT + 8 * (lane / 16);
#pragma unroll
      for (int kc = 0; kc < kKc; ++kc) ldmatrix_x4(qa[kc], base + 16 * kc);
    }
    const T* sK = sKV[buf][0] + sp * kKW * kLdT;  // the warp's keys of the tile
    const T* sV = sKV[buf][1] + sp * kKW * kLdT;

    // S = Q·Kᵀ for 16 rows x kKW keys. One ldmatrix.x4 of K gives the B fragments of two 8-key blocks.
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
        const int key = k0 + 8 * n + 2 * t + (e % 2);
        const float v = key > last_key[i] ? -INFINITY : s[n][e] * p.scale + mk[n][e];  // past the end, or causal
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
    for (int kc = 0; kc < kKW / 16; ++kc) {
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

    __syncthreads();  // every warp is done with this buffer
    if (tile + 2 < tiles) load_kv(tile + 2, buf);
    cp_async_commit();
  }
  cp_async_wait<0>();  // only empty groups are left; the K/V buffers are free from here on

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
  }
  // Normalize (a fully masked row has l = 0 and gives zeros) into the row group's 16 rows of sQ (no
  // longer read); the group's threads then store O 16 bytes at a time where its rows allow it.
  T* stage = sQ + rw * 16 * kLdT;
  if constexpr (kSplit == 1) {
    float inv[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) inv[i] = l[i] > 0.f ? 1.f / l[i] : 0.f;
    __syncwarp();
#pragma unroll
    for (int j = 0; j < kOn; ++j) {
      *reinterpret_cast<unsigned*>(stage + g * kLdT + 8 * j + 2 * t) = pack2<T>(o[j][0] * inv[0], o[j][1] * inv[0]);
      *reinterpret_cast<unsigned*>(stage + (g + 8) * kLdT + 8 * j + 2 * t) =
          pack2<T>(o[j][2] * inv[1], o[j][3] * inv[1]);
    }
    __syncwarp();
  } else {
    // Merge the group's kSplit partial results through the K/V buffers: each warp's unnormalized O
    // (f32, rows padded by 8 floats against bank conflicts), row maxima and sums.
    constexpr int kLdO = kD + 8;
    static_assert(sizeof(float) * kWarps * 16 * (kLdO + 2) <= sizeof(sKV), "merge scratch exceeds the K/V buffers");
    float* so = reinterpret_cast<float*>(&sKV[0][0][0]);
    float* sm = so + kWarps * 16 * kLdO;
    float* sl = sm + kWarps * 16;
    float* mine = so + warp * 16 * kLdO;
#pragma unroll
    for (int j = 0; j < kOn; ++j) {
      *reinterpret_cast<float2*>(mine + g * kLdO + 8 * j + 2 * t) = make_float2(o[j][0], o[j][1]);
      *reinterpret_cast<float2*>(mine + (g + 8) * kLdO + 8 * j + 2 * t) = make_float2(o[j][2], o[j][3]);
    }
    if (t == 0) {
      sm[warp * 16 + g] = m[0], sm[warp * 16 + g + 8] = m[1];
      sl[warp * 16 + g] = l[0], sl[warp * 16 + g + 8] = l[1];
    }
    __syncthreads();
    const int w0 = rw * kSplit;  // the group's first warp
    for (int i = sp * 32 + lane; i < 16 * kD / 2; i += 32 * kSplit) {
      const int r = i / (kD / 2), c = 2 * (i % (kD / 2));
      float mx = -INFINITY;
#pragma unroll
      for (int w = 0; w < kSplit; ++w) mx = fmaxf(mx, sm[(w0 + w) * 16 + r]);
      float sum = 0.f, a0 = 0.f, a1 = 0.f;
#pragma unroll
      for (int w = 0; w < kSplit; ++w) {
        const float f = mx == -INFINITY ? 0.f : __expf(sm[(w0 + w) * 16 + r] - mx);  // 0 for a warp that saw no key
        const float2 ow = *reinterpret_cast<const float2*>(so + ((w0 + w) * 16 + r) * kLdO + c);
        sum += f * sl[(w0 + w) * 16 + r];
        a0 += f * ow.x, a1 += f * ow.y;
      }
      const float inv = sum > 0.f ? 1.f / sum : 0.f;
      *reinterpret_cast<unsigned*>(stage + r * kLdT + c) = pack2<T>(a0 * inv, a1 * inv);
    }
    __syncthreads();
  }
  T* O = static_cast<T*>(p.o) + bi * p.os[0] + hi * p.os[1];
  const long long row0 = q0 + rw * 16;
  const int gt = sp * 32 + lane;  // the thread in its row group
  if (p.os[2] % 8 == 0 && reinterpret_cast<uintptr_t>(O) % 16 == 0) {
#pragma unroll
    for (int i = gt; i < 16 * kD / 8; i += 32 * kSplit) {
      const int r = i / (kD / 8), c = (i % (kD / 8)) * 8;
      if (row0 + r < p.sq)
        *reinterpret_cast<uint4*>(O + (row0 + r) * p.os[2] + c) = *reinterpret_cast<const uint4*>(stage + r * kLdT + c);
    }
  } else {
    for (int i = gt; i < 16 * kD; i += 32 * kSplit) {
      const int r = i / kD, c = i % kD;
      if (row0 + r < p.sq) O[(row0 + r) * p.os[2] + c] = stage[r * kLdT + c];
    }
  }
}

template <class T, int kD, int kRowWarps, int kSplit>
cudaError_t launch_blocks(const AttnParams& p, long long bh, cudaStream_t stream) {
  constexpr int kBQ = 16 * kRowWarps;
  dim3 grid(static_cast<unsigned>((p.sq + kBQ - 1) / kBQ), static_cast<unsigned>(bh));
  SABRE_CUDA_TRY(detail::launch(attention_kernel<T, kD, kRowWarps, kSplit>, grid, 32 * kRowWarps * kSplit, 0, stream, p));
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
  // Four warps a block. Blocks of 64 query rows, a warp per 16 rows, where that gives two waves of
  // the GPU's SMs; else 32 rows with two warps splitting each group's keys where that does; else 16
  // rows and four warps on the keys, as many warps in flight as the grid can have.
  const long long bh = a.b * a.h, sms = 132;
  if (bh * ((a.sq + 63) / 64) >= 2 * sms) return launch_blocks<T, kD, 4, 1>(p, bh, stream);
  if (bh * ((a.sq + 31) / 32) >= 2 * sms) return launch_blocks<T, kD, 2, 2>(p, bh, stream);
  return launch_blocks<T, kD, 1, 4>(p, bh, stream);
}

}  // namespace

// Arguments already checked by attention().
cudaError_t attention_v1(const AttentionArgs& a, cudaStream_t stream) {
  if (a.d == 32) return a.dtype == DType::f16 ? launch<half, 32>(a, stream) : launch<bf16, 32>(a, stream);
  return a.dtype == DType::f16 ? launch<half, 64>(a, stream) : launch<bf16, 64>(a, stream);
}

}  // namespace sabre::native
