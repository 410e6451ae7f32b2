// Fused attention: O = softmax(scale * Q·Kᵀ + mask [causal]) · V in one kernel per (batch, head,
// 16·kRowWarps query rows), reading Q, K, V and writing O through strides, so the [batch, seq, heads, 64]
// GEMM outputs (or one packed QKV projection) need no permutes. FlashAttention-2's scheme on mma.sync
// (m16n8k16, f32 accumulation): each warp owns 16 query rows, walks the keys in 64-key tiles that the
// block's warps share through shared memory, keeps its score fragments, online-softmax state and O
// accumulator in registers, and feeds P to the second MMA straight from the score registers.
//
// Blocks: kRowWarps groups of 16 rows x kSplit warps per group; split warps take kBK / kSplit keys of
// every tile with their own softmax state and merge through shared memory at the end (M = max m_i,
// l = sum 2^(m_i - M) l_i, O = sum 2^(m_i - M) O_i / l). By grid size, the largest block that still
// gives half the SMs a block: 128 rows x 8 warps (BERT-base at batch 8 and 32: 96 and 384 blocks,
// each head's K and V read once), 64 x 4, 32 rows x 2 warps x 2, else 16 rows x 4 warps on the keys
// (batch 1: 96 blocks, 384 warps instead of 96). Where 128-row blocks of 8 warps would be more than
// two an SM (BERT-base at batch 32: 384 blocks, 1.45 waves), 128 rows in 4 warps of 32 instead
// (kMT = 2 row tiles a warp, three blocks an SM at <= 168 registers: one wave), when the mask is
// none or a broadcast i64 select (with other masks that variant spills). Causal blocks skip the key
// tiles past their last row's keys; warps whose rows all lie past the end only copy and wait.
// Memory: cp.async copies Q with the first K/V tile and each K and V tile straight into shared
// memory (rows past the end zero-filled; 16 rows + 4 tiles of kD + 8 halves a row, <= 54 KiB, the
// 128-row block opting in above 48 KiB). K/V are double-buffered, a 128-key sequence requested whole
// before the first wait, and a barrier between tiles only where a third tile reuses a buffer. O is
// staged through the warp's Q rows for 16-byte stores.
// Per warp and 32-key step (the softmax runs in two steps a tile: S and the mask take 16 registers
// each instead of 32, which with Q's fragments re-read from shared memory each step keeps every
// variant at <= 128 registers without spills, i.e. 16 warps an SM): 4 + 8 ldmatrix and 16 MMAs for
// S, one FMA a score for scale and mask, 2 + 2 shuffles for the row maxima, p = 2^(x·log2 e - m·log2 e)
// as one FMA and one MUFU.EX2 (ex2.approx.ftz), 8 ldmatrix.trans and 16 MMAs for P·V. The mask is
// read where the fragments need it, two adjacent keys a load (8 bytes f32, 4 bytes f16/bf16) where
// its pointer and strides are even, requested right after the previous step used its registers;
// steps past a row's last key (the ragged end, the causal diagonal) take the per-key checks and
// element loads, the others none. sm_90 SASS of the 128-row kernel with an f32 mask: ~250
// instructions a 32-key step, 32 of them HMMA.
// Fully masked rows give zeros; a row whose scores so far are all huge finite mask values
// (finfo(f32).min) subtracts its maximum before the exponent instead of overflowing m·log2 e.
// Head dims other than 32 and 64, or Q/K/V only 8-byte aligned (MobileViT's 36, 48 and 60), take the
// same kernel with kPad: rows of p.d elements copied 8 bytes at a time into tiles of kD = 48, 64, 96
// or 128 columns, the rest zero-filled, so the MMAs run unchanged and only p.d columns are stored;
// one block shape (64 rows, four warps), whatever AttentionArgs::kernel asks.
// Keys have no limit but int indices: every block walks all its key tiles with the online softmax.
// AttentionArgs::kernel forces a block shape (bench/native_bench prints each). The earlier kernels
// this one replaced, and the timings that chose it, are in CHANGELOG.md and bench/results.
// Tests: tests/gpu/native_kernels_test.cpp (Attention_*, every variant) against a double-precision reference.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/native/attention.cuh"

namespace sabre::native {
namespace {

using namespace detail;

constexpr int kBK = kAttnBK;  // keys per tile
constexpr float kLog2e = 1.4426950408889634f;
// kD: head dim (32 or 64); kLdT: padded row of a Q/K/V tile in elements (16 bytes of padding put the
// 8 rows one ldmatrix reads in different banks).

struct AttnParams {
  const void *q, *k, *v;
  void* o;
  int h;
  int kv_group;  // query heads sharing one K/V head (grouped-query attention; 1: one each)
  long long sq, sk;
  long long qs[3], ks[3], vs[3], os[3];  // batch, head, row strides (elements)
  float scale;
  const void* mask;  // float, T or long long (a select mask), as the kernel's M says; null without one
  long long ms[3];
  // mb_inner > 0: the mask's batch offset is (b % mb_inner)·ms[0] + (b / mb_inner)·mb_outer (a window
  // mask [nW, ...] repeating over the batch's images); 0: b·ms[0].
  long long mb_inner, mb_outer;
  int d;  // the head dim read and written; the padded kernels' kD is larger, their extra columns zero
  float mask_true, mask_false;  // a select mask's values where its element is nonzero / zero
  int mask_pairs;  // the mask pointer and strides are even: two adjacent keys' values are one load
  int causal;
};

// 2^x, flushing denormal results to zero: one MUFU.EX2, where __expf adds a multiply and, without
// -ftz, a range fix-up of three more instructions.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// kRows rows x kD elements into a tile of kLdT-element rows at shared address dst, one cp.async per
// 16 bytes: the thread copies one 16-byte column of every kThreads / (kD / 8)-th row, walking a
// pointer down them, so a chunk costs an add and a compare; rows at or past rows_left are zeros.
template <class T, int kD, int kRows, int kThreads, int kLdT>
__device__ __forceinline__ void copy_tile(unsigned dst, const T* src, long long rows_left, long long stride) {
  constexpr int kCpr = kD / 8, kStep = kThreads / kCpr;  // 16-byte chunks a row; rows a pass
  static_assert(kThreads % kCpr == 0, "whole rows a pass");
  const int r = threadIdx.x / kCpr, c = threadIdx.x % kCpr * 8;
  const T* s = src + r * stride + c;
  dst += sizeof(T) * (r * kLdT + c);
#pragma unroll
  for (int it = 0; it < (kRows + kStep - 1) / kStep; ++it, s += kStep * stride) {
    if (kRows % kStep == 0 || r + it * kStep < kRows) {
      const bool in = r + it * kStep < rows_left;
      cp_async16(dst + sizeof(T) * it * kStep * kLdT, in ? s : src, in ? 16 : 0);
    }
  }
}

// The padded-head-dim kernels' copy (kPad): rows of d elements (a multiple of 4, d <= kD) at 8-byte
// aligned addresses, 8 bytes a cp.async; columns d..kD-1 and rows at or past rows_left are zeros.
template <class T, int kD, int kRows, int kThreads, int kLdT>
__device__ __forceinline__ void copy_tile_pad(unsigned dst, const T* src, long long rows_left, long long stride, int d) {
  constexpr int kCpr = kD / 4, kChunks = kRows * kCpr;  // 8-byte chunks a padded row, a tile
#pragma unroll
  for (int it = 0; it < (kChunks + kThreads - 1) / kThreads; ++it) {
    const int i = static_cast<int>(threadIdx.x) + it * kThreads;
    if (kChunks % kThreads != 0 && i >= kChunks) break;
    const int r = i / kCpr, c = i % kCpr * 4;
    const bool in = r < rows_left && c < d;
    cp_async8(dst + sizeof(T) * (r * kLdT + c), in ? src + r * stride + c : src, in ? 8 : 0);
  }
}

// Shared memory of a block: its Q rows, then two buffers of one K and one V tile, rows padded to kLdT.
template <class T, int kD, int kBQ>
constexpr size_t smem_bytes() {
  return sizeof(T) * (kBQ + 4 * kBK) * (kD + 8);
}

// Fragment coordinates (PTX ISA, mma.m16n8k16): lane = 4g + t holds accumulator rows g and g + 8,
// columns 2t and 2t + 1 of each 8-column block.
// A mask element as the score's addend: its value, or for a select mask (long long, an i64 model
// input read as it is) mask_true where it is nonzero, else mask_false.
template <class Mv>
__device__ __forceinline__ float mask_addend(Mv m, const AttnParams& p) {
  if constexpr (std::is_same_v<Mv, long long>) return m != 0 ? p.mask_true : p.mask_false;
  else return to_float(m);
}
template <class Mv>
__device__ __forceinline__ Mv mask_zero() {
  if constexpr (std::is_same_v<Mv, long long>) return 0;
  else return from_float<Mv>(0.f);
}

// M: the mask's element type (float, T or long long), void without a mask. kQBcast: the mask does not
// vary along q (ms[2] = 0, a [B,1,1,K] mask): the thread's two rows share one load and one addend
// per key (instantiated for the i64 select mask, what BERT-base's fused plan reads).
// kMT: 16-row MMA tiles a warp owns (1, or 2 with kSplit 1): two share each K and V fragment, and
// their independent MMA and softmax chains hide each other's latency.
// 512 threads an SM's worth of blocks (four of 128 threads, two of 256): ptxas keeps to 128
// registers; with two row tiles a warp, 384 (three blocks of 128 threads), 168 registers.
// kPad: head dims other than 32 and 64, or Q/K/V only 8-byte aligned: p.d columns read 8 bytes a
// copy into rows of kD (48, 64, 96 or 128) whose other columns are zeros, and only p.d written; above
// 64, 256 threads an SM (up to 255 registers: the O accumulator alone is kD / 2 a thread).
template <class T, int kD, int kRowWarps, int kSplit, class M, bool kQBcast = false, int kMT = 1, bool kPad = false>
__global__ void __launch_bounds__(32 * kRowWarps * kSplit,
                                  (kPad && kD > 64 ? 256 : kMT == 1 ? 512 : 384) / (32 * kRowWarps * kSplit))
    attention_kernel(const AttnParams p) {
  detail::pdl_enter();
  static_assert(kMT == 1 || (kMT == 2 && kSplit == 1), "two row tiles a warp only without split warps");
  constexpr int kWarps = kRowWarps * kSplit, kThreads = 32 * kWarps;
  constexpr int kWR = 16 * kMT;  // query rows a warp
  constexpr int kR = 2 * kMT;    // query rows a thread (g and g + 8 of each row tile)
  constexpr int kBQ = kWR * kRowWarps, kLdT = kD + 8;
  constexpr int kKW = kBK / kSplit;           // keys of each tile that one warp takes
  constexpr int kStep = kKW < 32 ? kKW : 32;  // keys of one online-softmax step
  constexpr int kSteps = kKW / kStep;         // steps a tile
  constexpr int kKc = kD / 16;                // 16-wide chunks of the head dim (Q·Kᵀ's k steps)
  constexpr int kSn = kStep / 8;              // 8-key blocks of a step's scores
  constexpr int kOn = kD / 8;                 // 8-wide blocks of the output row
  constexpr bool kMasked = !std::is_void_v<M>;
  using Mv = std::conditional_t<kMasked, M, float>;
  using MaskPair = Pack<Mv, 2>;  // one row's mask at keys 2t, 2t + 1 of an 8-key block
  static_assert(kStep % 16 == 0, "a step's keys must fill whole k steps of P·V");
  constexpr unsigned kTileBytes = sizeof(T) * kBK * kLdT, kRowBytes = sizeof(T) * kLdT;
  extern __shared__ __align__(16) unsigned char smem[];
  T* sQ = reinterpret_cast<T*>(smem);
  T* sKV = sQ + kBQ * kLdT;  // [buffer][K, V][kBK * kLdT]; the split warps' merge scratch after the loop
  const unsigned s_q = smem_addr(sQ), s_kv = smem_addr(sKV);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int rw = warp / kSplit, sp = warp % kSplit;  // the warp's kWR query rows; its share of each tile
  const int bi = static_cast<int>(blockIdx.y) / p.h, hi = static_cast<int>(blockIdx.y) % p.h;  // b·h < 2^16
  const int kvh = hi / p.kv_group;  // the K/V head the query head reads
  const long long q0 = static_cast<long long>(blockIdx.x) * kBQ, r0 = q0 + rw * kWR;
  int tiles = static_cast<int>((p.sk + kBK - 1) / kBK);
  if (p.causal) {
    // Keys past the last key of the block's last row are masked for all its rows: skip their tiles
    // (keep one where every row is masked, so the block still writes its zeros).
    const long long last = (q0 + kBQ < p.sq ? q0 + kBQ : p.sq) - 1 + (p.sk - p.sq);
    if (last < 0) tiles = 1;
    else if (last / kBK + 1 < tiles) tiles = static_cast<int>(last / kBK + 1);
  }

  // Copy groups, in commit order: Q with tile 0, tile 1, then tile t + 2 after tile t is consumed (an
  // empty group where there is none), so tile t's group is complete when at most one is pending.
  // The strides pass through an empty asm so each call computes its own addresses: hoisted out of
  // the tile loop, every chunk's 64-bit address would stay live across it and spill.
  auto load_kv = [&](int tile, int buf) {
    const long long k0 = static_cast<long long>(tile) * kBK;
    long long ks = p.ks[2], vs = p.vs[2];
    asm volatile("" : "+l"(ks), "+l"(vs));
    const T* K = static_cast<const T*>(p.k) + bi * p.ks[0] + kvh * p.ks[1] + k0 * ks;
    const T* V = static_cast<const T*>(p.v) + bi * p.vs[0] + kvh * p.vs[1] + k0 * vs;
    if constexpr (kPad) {
      copy_tile_pad<T, kD, kBK, kThreads, kLdT>(s_kv + (2 * buf) * kTileBytes, K, p.sk - k0, ks, p.d);
      copy_tile_pad<T, kD, kBK, kThreads, kLdT>(s_kv + (2 * buf + 1) * kTileBytes, V, p.sk - k0, vs, p.d);
    } else {
      copy_tile<T, kD, kBK, kThreads, kLdT>(s_kv + (2 * buf) * kTileBytes, K, p.sk - k0, ks);
      copy_tile<T, kD, kBK, kThreads, kLdT>(s_kv + (2 * buf + 1) * kTileBytes, V, p.sk - k0, vs);
    }
  };
  {
    const T* Q = static_cast<const T*>(p.q) + bi * p.qs[0] + hi * p.qs[1] + q0 * p.qs[2];
    if constexpr (kPad) copy_tile_pad<T, kD, kBQ, kThreads, kLdT>(s_q, Q, p.sq - q0, p.qs[2], p.d);
    else copy_tile<T, kD, kBQ, kThreads, kLdT>(s_q, Q, p.sq - q0, p.qs[2]);
  }
  load_kv(0, 0);
  cp_async_commit();
  if (tiles > 1) load_kv(1, 1);
  cp_async_commit();

  // Warps whose rows all lie past the end (the last block of a ragged sequence) only take part in
  // the copies and barriers.
  const bool active = r0 < p.sq;
  // The thread's query rows (ri = 2·mt + i: row g + 8i of row tile mt); rows past the end read any
  // valid mask row and are not stored. Keys fit in int (at most kMaxAttentionKeys); last_key is -1
  // where a causal row sees none.
  const Mv* mrow[kR];
  int last_key[kR];  // keys past it are masked out
  const long long mb = p.mb_inner ? (bi % p.mb_inner) * p.ms[0] + (bi / p.mb_inner) * p.mb_outer : bi * p.ms[0];
#pragma unroll
  for (int i = 0; i < kR; ++i) {
    const long long qrow = r0 + 16 * (i / 2) + g + 8 * (i % 2), qm = qrow < p.sq ? qrow : p.sq - 1;
    if constexpr (kMasked) mrow[i] = static_cast<const Mv*>(p.mask) + mb + hi * p.ms[1] + qm * p.ms[2];
    const long long lk = p.causal ? qm + (p.sk - p.sq) : p.sk - 1;
    last_key[i] = static_cast<int>(lk < -1 ? -1 : lk);
  }
  // The warp's smallest last key (its first row's): a step whose keys all lie at or below it needs
  // no per-key checks, and its mask is read without bounds checks.
  int warp_last;
  {
    const long long rf = r0 < p.sq ? r0 : p.sq - 1, lk = p.causal ? rf + (p.sk - p.sq) : p.sk - 1;
    warp_last = static_cast<int>(lk < -1 ? -1 : lk);
  }
  auto is_edge = [&](int k0) { return k0 + kStep - 1 > warp_last; };
  auto step_key = [&](int tile, int j) { return tile * kBK + sp * kKW + j * kStep; };  // a step's first key
  // The lane's ldmatrix.x4 addresses: lanes 0-7 / 8-15 / 16-23 / 24-31 give the rows of its four 8x8
  // matrices. Q (A of Q·Kᵀ) and V (B of P·V, transposed): (rows 0-7, cols 0-7) / (8-15, 0-7) / (0-7,
  // 8-15) / (8-15, 8-15). K (B of Q·Kᵀ): (keys 0-7, dims 0-7) / (0-7, 8-15) / (8-15, 0-7) / (8-15,
  // 8-15), so b[0..1] and b[2..3] are the two 8-key blocks' fragments in adjacent registers, as
  // the MMA takes them (other pairings cost a move per register).
  const unsigned qv_off = kRowBytes * (lane % 8 + 8 * ((lane / 8) % 2)) + sizeof(T) * 8 * (lane / 16);
  const unsigned q_lane = s_q + qv_off + kRowBytes * kWR * rw;
  const unsigned v_lane = s_kv + kTileBytes + qv_off + kRowBytes * kKW * sp;
  const unsigned k_lane = s_kv + kRowBytes * (lane % 8 + 8 * (lane / 16) + kKW * sp) + sizeof(T) * 8 * ((lane / 8) % 2);

  // The mask at the thread's score positions of one step, as stored (converted where used): one 8-
  // or 4-byte load per row and 8-key block where the pointer and strides allow and no key is past the
  // row's last, else one element at a time with each key checked. It is requested one step ahead,
  // right after the previous step's values are used (the first before the first wait), so its
  // latency overlaps a step's work without a second set of registers.
  constexpr int kMaskRows = kQBcast ? 1 : kR;  // rows whose mask the thread loads
  MaskPair mk[kSn][kMaskRows];
  // Keys a shared row may read: past the latest of the rows' last keys nothing is used.
  int bcast_last = last_key[0];
#pragma unroll
  for (int i = 1; i < kR; ++i) bcast_last = last_key[i] > bcast_last ? last_key[i] : bcast_last;
  auto load_mask = [&](int k0) {
    if constexpr (kMasked) {
      if (!is_edge(k0) && p.mask_pairs) {
#pragma unroll
        for (int i = 0; i < kMaskRows; ++i) {
          const MaskPair* src = reinterpret_cast<const MaskPair*>(mrow[i] + k0 + 2 * t);
#pragma unroll
          for (int n = 0; n < kSn; ++n) mk[n][i] = src[4 * n];
        }
      } else {
#pragma unroll
        for (int n = 0; n < kSn; ++n)
#pragma unroll
          for (int i = 0; i < kMaskRows; ++i)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int key = k0 + 8 * n + 2 * t + e;
              mk[n][i].v[e] = key <= (kQBcast ? bcast_last : last_key[i]) ? mrow[i][key] : mask_zero<Mv>();
            }
      }
    }
  };
  if (active) load_mask(step_key(0, 0));

  float o[kMT][kOn][4];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int j = 0; j < kOn; ++j) o[mt][j][0] = o[mt][j][1] = o[mt][j][2] = o[mt][j][3] = 0.f;
  float m[kR], l[kR];  // running max and sum of the thread's rows
#pragma unroll
  for (int i = 0; i < kR; ++i) m[i] = -INFINITY, l[i] = 0.f;

  for (int tile = 0; tile < tiles; ++tile) {
    cp_async_wait<1>();
    __syncthreads();  // the tile (and Q) landed for every thread
    if (active) {
      // Not unrolled: interleaving a tile's two steps, ptxas needs more than 128 registers.
#pragma unroll 1
      for (int j = 0; j < kSteps; ++j) {
        const int k0 = step_key(tile, j);
        const bool edge = is_edge(k0);
        const unsigned step_off = (tile % 2) * 2 * kTileBytes + j * kStep * kRowBytes;  // the step's keys
        const unsigned sK = k_lane + step_off, sV = v_lane + step_off;

        // S = Q·Kᵀ for 16 rows x kStep keys; Q's fragments come again from shared memory each step
        // (kept in registers, they pushed ptxas past 128).
        float s[kMT][kSn][4];
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int n = 0; n < kSn; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;
#pragma unroll
        for (int kc = 0; kc < kKc; ++kc) {
          unsigned qa[kMT][4];
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) ldmatrix_x4(qa[mt], q_lane + kRowBytes * 16 * mt + sizeof(T) * 16 * kc);
#pragma unroll
          for (int n = 0; n < kSn; n += 2) {
            unsigned b[4];
            ldmatrix_x4(b, sK + kRowBytes * 8 * n + sizeof(T) * 16 * kc);
#pragma unroll
            for (int mt = 0; mt < kMT; ++mt) {
              mma16816<T>(s[mt][n], qa[mt], b[0], b[1]);
              mma16816<T>(s[mt][n + 1], qa[mt], b[2], b[3]);
            }
          }
        }

        // x = scale·s + mask, one FMA; -inf past a row's last key, checked only in edge steps.
        auto scores = [&](auto edge_tag) {
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
            for (int n = 0; n < kSn; ++n)
#pragma unroll
              for (int e = 0; e < 4; ++e) {
                const int i = 2 * mt + e / 2;
                float x;
                if constexpr (kMasked) x = fmaf(s[mt][n][e], p.scale, mask_addend(mk[n][kQBcast ? 0 : i].v[e % 2], p));
                else x = s[mt][n][e] * p.scale;
                if constexpr (decltype(edge_tag)::value)
                  if (k0 + 8 * n + 2 * t + (e % 2) > last_key[i]) x = -INFINITY;
                s[mt][n][e] = x;
              }
        };
        if (edge) scores(std::true_type{});
        else scores(std::false_type{});
        // The next step's mask, into the registers just read.
        if (j + 1 < kSteps) load_mask(step_key(tile, j + 1));
        else if (tile + 1 < tiles) load_mask(step_key(tile + 1, 0));

        // Online softmax in base 2: the row's four lanes agree on the new maximum; the old sum and O
        // rescale by 2^((m_old - m_new)·log2 e), and p = 2^(x·log2 e - m_new·log2 e) is one FMA and
        // one MUFU.EX2 a score.
        float tmax[kR];
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          tmax[2 * mt] = fmaxf(s[mt][0][0], s[mt][0][1]), tmax[2 * mt + 1] = fmaxf(s[mt][0][2], s[mt][0][3]);
#pragma unroll
          for (int n = 1; n < kSn; ++n)
            tmax[2 * mt] = fmaxf(tmax[2 * mt], fmaxf(s[mt][n][0], s[mt][n][1])),
            tmax[2 * mt + 1] = fmaxf(tmax[2 * mt + 1], fmaxf(s[mt][n][2], s[mt][n][3]));
        }
        float corr[kR], ml2[kR];
        bool huge[kR], any_huge = false;
#pragma unroll
        for (int i = 0; i < kR; ++i) {
          tmax[i] = fmaxf(tmax[i], __shfl_xor_sync(0xffffffffu, tmax[i], 1));
          tmax[i] = fmaxf(tmax[i], __shfl_xor_sync(0xffffffffu, tmax[i], 2));
          const float mnew = fmaxf(m[i], tmax[i]);
          corr[i] = m[i] == -INFINITY ? 0.f : exp2_approx((m[i] - mnew) * kLog2e);  // O and l are 0 then
          ml2[i] = mnew == -INFINITY ? 0.f : mnew * kLog2e;  // a row without keys yet: 2^(-inf - 0) = 0
          huge[i] = mnew != -INFINITY && fabsf(mnew) > 2e38f;
          m[i] = mnew;
          l[i] *= corr[i];
          any_huge = any_huge || huge[i];
        }
        if (__any_sync(0xffffffffu, any_huge)) {
          // A row ruled by huge finite scores (every key so far masked with finfo(f32).min): m·log2 e
          // would overflow, so subtract m from its scores first (exact where the FMA's form is not).
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
            for (int n = 0; n < kSn; ++n)
#pragma unroll
              for (int e = 0; e < 4; ++e)
                if (huge[2 * mt + e / 2]) s[mt][n][e] -= m[2 * mt + e / 2];
#pragma unroll
          for (int i = 0; i < kR; ++i)
            if (huge[i]) ml2[i] = 0.f;
        }
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int jo = 0; jo < kOn; ++jo)
            o[mt][jo][0] *= corr[2 * mt], o[mt][jo][1] *= corr[2 * mt], o[mt][jo][2] *= corr[2 * mt + 1],
                o[mt][jo][3] *= corr[2 * mt + 1];

        // P = 2^(x·log2 e - m·log2 e), summed in f32 and packed to T as the A fragments of P·V: 16
        // keys (two score blocks) per k step.
#pragma unroll
        for (int kc = 0; kc < kStep / 16; ++kc) {
          unsigned a[kMT][4];
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            float pv[2][4];
#pragma unroll
            for (int h2 = 0; h2 < 2; ++h2)
#pragma unroll
              for (int e = 0; e < 4; ++e) {
                const int i = 2 * mt + e / 2;
                const float x = exp2_approx(fmaf(s[mt][2 * kc + h2][e], kLog2e, -ml2[i]));
                pv[h2][e] = x;
                l[i] += x;
              }
            a[mt][0] = pack2<T>(pv[0][0], pv[0][1]), a[mt][1] = pack2<T>(pv[0][2], pv[0][3]);
            a[mt][2] = pack2<T>(pv[1][0], pv[1][1]), a[mt][3] = pack2<T>(pv[1][2], pv[1][3]);
          }
          // V rows 16kc..16kc+15 of the step as B (k = key, n = head dim), transposed by ldmatrix:
          // one x4 gives two 8-wide output blocks.
#pragma unroll
          for (int jo = 0; jo < kOn; jo += 2) {
            unsigned b[4];
            ldmatrix_x4_trans(b, sV + kRowBytes * 16 * kc + sizeof(T) * 8 * jo);
#pragma unroll
            for (int mt = 0; mt < kMT; ++mt) {
              mma16816<T>(o[mt][jo], a[mt], b[0], b[1]);
              mma16816<T>(o[mt][jo + 1], a[mt], b[2], b[3]);
            }
          }
        }
      }
    }

    if (tile + 2 < tiles) {
      __syncthreads();  // every warp is done with this buffer
      load_kv(tile + 2, tile % 2);
    }
    cp_async_commit();
  }
  cp_async_wait<0>();  // only empty groups are left

#pragma unroll
  for (int i = 0; i < kR; ++i) {
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
  }
  // Normalize (a fully masked row has l = 0 and gives zeros) into the row group's kWR rows of sQ (no
  // longer read); the group's threads then store O 16 bytes at a time where its rows allow it.
  T* stage = sQ + rw * kWR * kLdT;
  if constexpr (kSplit == 1) {
    float inv[kR];
#pragma unroll
    for (int i = 0; i < kR; ++i) inv[i] = l[i] > 0.f ? 1.f / l[i] : 0.f;
    __syncwarp();  // only this warp reads these Q rows: its last ldmatrix is done
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int j = 0; j < kOn; ++j) {
        const float i0 = inv[2 * mt], i1 = inv[2 * mt + 1];
        *reinterpret_cast<unsigned*>(stage + (16 * mt + g) * kLdT + 8 * j + 2 * t) =
            pack2<T>(o[mt][j][0] * i0, o[mt][j][1] * i0);
        *reinterpret_cast<unsigned*>(stage + (16 * mt + g + 8) * kLdT + 8 * j + 2 * t) =
            pack2<T>(o[mt][j][2] * i1, o[mt][j][3] * i1);
      }
    __syncwarp();
  } else {
    // Merge the group's kSplit partial results through the K/V buffers: each warp's unnormalized O
    // (f32, rows padded by 8 floats against bank conflicts), row maxima and sums.
    constexpr int kLdO = kD + 8, kScratch = kWarps * 16 * (kLdO + 2);
    static_assert(sizeof(float) * kScratch <= 4 * kTileBytes, "merge scratch exceeds the K/V buffers");
    __syncthreads();  // every warp is done with the K/V buffers
    float* so = reinterpret_cast<float*>(sKV);
    float* sm = so + kWarps * 16 * kLdO;
    float* sl = sm + kWarps * 16;
    float* mine = so + warp * 16 * kLdO;
#pragma unroll
    for (int j = 0; j < kOn; ++j) {
      *reinterpret_cast<float2*>(mine + g * kLdO + 8 * j + 2 * t) = make_float2(o[0][j][0], o[0][j][1]);
      *reinterpret_cast<float2*>(mine + (g + 8) * kLdO + 8 * j + 2 * t) = make_float2(o[0][j][2], o[0][j][3]);
    }
    if (t == 0) {
      sm[warp * 16 + g] = m[0], sm[warp * 16 + g + 8] = m[1];
      sl[warp * 16 + g] = l[0], sl[warp * 16 + g + 8] = l[1];
    }
    __syncthreads();  // (and every warp of the group is done with its Q rows)
    const int w0 = rw * kSplit;  // the group's first warp
    for (int i = sp * 32 + lane; i < 16 * kD / 2; i += 32 * kSplit) {
      const int r = i / (kD / 2), c = 2 * (i % (kD / 2));
      float mx = -INFINITY;
#pragma unroll
      for (int w = 0; w < kSplit; ++w) mx = fmaxf(mx, sm[(w0 + w) * 16 + r]);
      float sum = 0.f, a0 = 0.f, a1 = 0.f;
#pragma unroll
      for (int w = 0; w < kSplit; ++w) {
        const float mw = sm[(w0 + w) * 16 + r];
        const float f = mw == -INFINITY ? 0.f : exp2_approx((mw - mx) * kLog2e);  // 0 for a warp that saw no key
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
  const int gt = sp * 32 + lane;  // the thread in its row group
  if constexpr (kPad) {
    // The first p.d columns, 8 bytes a store where O's rows allow it.
    if (p.os[2] % 4 == 0 && reinterpret_cast<uintptr_t>(O) % 8 == 0) {
      for (int i = gt; i < kWR * kD / 4; i += 32 * kSplit) {
        const int r = i / (kD / 4), c = (i % (kD / 4)) * 4;
        if (r0 + r < p.sq && c < p.d)
          *reinterpret_cast<uint2*>(O + (r0 + r) * p.os[2] + c) = *reinterpret_cast<const uint2*>(stage + r * kLdT + c);
      }
    } else {
      for (int i = gt; i < kWR * kD; i += 32 * kSplit) {
        const int r = i / kD, c = i % kD;
        if (r0 + r < p.sq && c < p.d) O[(r0 + r) * p.os[2] + c] = stage[r * kLdT + c];
      }
    }
  } else if (p.os[2] % 8 == 0 && reinterpret_cast<uintptr_t>(O) % 16 == 0) {
#pragma unroll
    for (int i = gt; i < kWR * kD / 8; i += 32 * kSplit) {
      const int r = i / (kD / 8), c = (i % (kD / 8)) * 8;
      if (r0 + r < p.sq)
        *reinterpret_cast<uint4*>(O + (r0 + r) * p.os[2] + c) = *reinterpret_cast<const uint4*>(stage + r * kLdT + c);
    }
  } else {
    for (int i = gt; i < kWR * kD; i += 32 * kSplit) {
      const int r = i / kD, c = i % kD;
      if (r0 + r < p.sq) O[(r0 + r) * p.os[2] + c] = stage[r * kLdT + c];
    }
  }
}

// Above 48 KiB of dynamic shared memory a kernel must opt in, once per device (done: a bit per device).
template <class Kernel>
cudaError_t opt_in_smem(Kernel kernel, size_t bytes, std::atomic<unsigned long long>& done) {
  int dev = 0;
  SABRE_CUDA_TRY(cudaGetDevice(&dev));
  const unsigned long long bit = dev < 64 ? 1ull << dev : 0;
  if (bit && (done.load(std::memory_order_relaxed) & bit)) return cudaSuccess;
  SABRE_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  done.fetch_or(bit, std::memory_order_relaxed);
  return cudaSuccess;
}

template <class T, int kD, int kRowWarps, int kSplit, int kMT, class M, bool kQBcast = false, bool kPad = false>
cudaError_t launch_kernel(const AttnParams& p, long long bh, cudaStream_t stream) {
  constexpr int kBQ = 16 * kMT * kRowWarps, kThreads = 32 * kRowWarps * kSplit;
  constexpr size_t kSmem = smem_bytes<T, kD, kBQ>();
  const dim3 grid(static_cast<unsigned>((p.sq + kBQ - 1) / kBQ), static_cast<unsigned>(bh));
  auto* kernel = attention_kernel<T, kD, kRowWarps, kSplit, M, kQBcast, kMT, kPad>;
  if constexpr (kSmem > 48 * 1024) {
    static std::atomic<unsigned long long> opted{0};
    SABRE_CUDA_TRY(opt_in_smem(kernel, kSmem, opted));
  }
  SABRE_CUDA_TRY(detail::launch(kernel, grid, kThreads, kSmem, stream, p));
  SABRE_LAUNCH_CHECK();
  return cudaSuccess;
}

// SABRE_ATTN_BCAST=0 in the environment: a [B,1,1,K] i64 mask loaded per row as any other (an A/B
// switch for whole models; read once).
bool attention_no_bcast() {
  static const bool off = [] {
    const char* v = std::getenv("SABRE_ATTN_BCAST");
    return v && std::strcmp(v, "0") == 0;
  }();
  return off;
}

template <class T, int kD, int kRowWarps, int kSplit, int kMT = 1>
cudaError_t launch_shape(const AttnParams& p, DType mask_dtype, long long bh, cudaStream_t stream) {
  if (!p.mask) return launch_kernel<T, kD, kRowWarps, kSplit, kMT, void>(p, bh, stream);
  if (mask_dtype == DType::f32) return launch_kernel<T, kD, kRowWarps, kSplit, kMT, float>(p, bh, stream);
  if (mask_dtype == DType::i64)
    return p.ms[2] == 0 && !attention_no_bcast() ? launch_kernel<T, kD, kRowWarps, kSplit, kMT, long long, true>(p, bh, stream)
                                                 : launch_kernel<T, kD, kRowWarps, kSplit, kMT, long long>(p, bh, stream);
  return launch_kernel<T, kD, kRowWarps, kSplit, kMT, T>(p, bh, stream);
}

// The block shape SABRE_ATTN names (kAttentionKernelNames), automatic where it is unset; a name it
// does not know is said once on stderr and ignored.
AttentionKernel forced_kernel() {
  static const AttentionKernel k = [] {
    const char* v = std::getenv("SABRE_ATTN");
    if (!v || !*v) return AttentionKernel::automatic;
    std::string shapes;
    for (const auto& [kernel, name] : kAttentionKernelNames) {
      if (kernel == AttentionKernel::automatic) continue;
      if (std::strcmp(v, name) == 0) return kernel;
      shapes += std::string(shapes.empty() ? "" : " ") + name;
    }
    std::fprintf(stderr, "sabre: SABRE_ATTN=%s is not one of %s; ignored\n", v, shapes.c_str());
    return AttentionKernel::automatic;
  }();
  return k;
}

AttnParams params_of(const AttentionArgs& a) {
  AttnParams p{};
  p.q = a.q, p.k = a.k, p.v = a.v, p.o = a.o;
  p.h = static_cast<int>(a.h), p.kv_group = static_cast<int>(a.kv_group), p.sq = a.sq, p.sk = a.sk;
  for (int i = 0; i < 3; ++i) {
    p.qs[i] = a.q_stride[i], p.ks[i] = a.k_stride[i], p.vs[i] = a.v_stride[i], p.os[i] = a.o_stride[i];
    p.ms[i] = a.mask_stride[i];
  }
  p.mb_inner = a.mask_batch_inner, p.mb_outer = a.mask_batch_outer;
  p.d = static_cast<int>(a.d);
  p.scale = a.scale;
  p.mask = a.mask;
  p.mask_true = a.mask_true, p.mask_false = a.mask_false;
  const size_t pair_bytes = 2 * ir::size_of(a.mask_dtype);  // f32, T's dtype or i64 (attention_unsupported)
  p.mask_pairs = a.mask && reinterpret_cast<uintptr_t>(a.mask) % pair_bytes == 0 && a.mask_stride[0] % 2 == 0 &&
                 a.mask_stride[1] % 2 == 0 && a.mask_stride[2] % 2 == 0;
  p.causal = a.causal;
  return p;
}

// Head dims other than 32 and 64 (or Q/K/V only 8-byte aligned): 64-row blocks of four warps, the
// head dim padded to kD in shared memory (attention_kernel's kPad).
template <class T, int kD>
cudaError_t launch_padded(const AttentionArgs& a, cudaStream_t stream) {
  const AttnParams p = params_of(a);
  const long long bh = a.b * a.h;
  if (!p.mask) return launch_kernel<T, kD, 4, 1, 1, void, false, true>(p, bh, stream);
  if (a.mask_dtype == DType::f32) return launch_kernel<T, kD, 4, 1, 1, float, false, true>(p, bh, stream);
  if (a.mask_dtype == DType::i64) return launch_kernel<T, kD, 4, 1, 1, long long, false, true>(p, bh, stream);
  return launch_kernel<T, kD, 4, 1, 1, T, false, true>(p, bh, stream);
}

template <class T, int kD>
cudaError_t launch(const AttentionArgs& a, AttentionKernel kernel, cudaStream_t stream) {
  const AttnParams p = params_of(a);
  // The largest block whose grid still gives half the SMs a block (132 SMs: the H200's), as many
  // warps sharing each K/V tile as the grid allows; small grids (BERT-base at batch 1: 96 blocks of
  // 16 rows) split each tile's keys between warps to have more of them in flight. This beat a
  // two-blocks-an-SM rule at every BERT-base batch; blocks splitting each tile's keys two ways at
  // 64 and 128 rows were slower everywhere and were taken out (bench/results/bert_speed_*).
  // More 128-row blocks than two an SM (BERT-base at batch 32: 384, 1.45 waves) take 128 rows in
  // four warps of 32 instead, three blocks an SM, where ptxas keeps the variant to 168 registers with
  // (almost) no spills: without a mask or with a select mask broadcast along q.
  const long long bh = a.b * a.h, sms = 132;
  const bool w4_fits = !a.mask || (a.mask_dtype == DType::i64 && a.mask_stride[2] == 0 && !attention_no_bcast());
  if (kernel == AttentionKernel::automatic) kernel = forced_kernel();
  if (kernel == AttentionKernel::automatic) {
    if (bh * ((a.sq + 127) / 128) > 2 * sms && w4_fits) kernel = AttentionKernel::rows128_w4;
    else if (bh * ((a.sq + 127) / 128) >= sms / 2) kernel = AttentionKernel::rows128;
    else if (bh * ((a.sq + 63) / 64) >= sms / 2) kernel = AttentionKernel::rows64;
    else if (bh * ((a.sq + 31) / 32) >= sms / 2) kernel = AttentionKernel::rows32_split2;
    else kernel = AttentionKernel::rows16_split4;
  }
  switch (kernel) {
    case AttentionKernel::rows128: return launch_shape<T, kD, 8, 1>(p, a.mask_dtype, bh, stream);
    case AttentionKernel::rows128_w4: return launch_shape<T, kD, 4, 1, 2>(p, a.mask_dtype, bh, stream);
    case AttentionKernel::rows64: return launch_shape<T, kD, 4, 1>(p, a.mask_dtype, bh, stream);
    case AttentionKernel::rows32_split2: return launch_shape<T, kD, 2, 2>(p, a.mask_dtype, bh, stream);
    case AttentionKernel::rows16_split4: return launch_shape<T, kD, 1, 4>(p, a.mask_dtype, bh, stream);
    default: return fail(cudaErrorInvalidValue, "attention: unknown AttentionKernel");
  }
}

}  // namespace

namespace {
// The unpadded kernels' contract: head dim 32 or 64, Q/K/V 16-byte aligned with strides in multiples of 8.
bool fast_path(const AttentionArgs& a) {
  if (a.d != 32 && a.d != 64) return false;
  for (const int64_t* s : {a.q_stride, a.k_stride, a.v_stride})
    for (int i = 0; i < 3; ++i)
      if (s[i] % 8) return false;
  for (const void* ptr : {a.q, a.k, a.v})
    if (reinterpret_cast<uintptr_t>(ptr) % 16) return false;
  return true;
}
}  // namespace

std::string attention_unsupported(const AttentionArgs& a) {
  if (a.dtype != DType::f16 && a.dtype != DType::bf16) return "attention: f16 or bf16 only";
  if (a.d < 4 || a.d > kMaxAttentionHeadDim || a.d % 4)
    return "attention: head dim " + std::to_string(a.d) + ", the kernel takes multiples of 4 up to " +
           std::to_string(kMaxAttentionHeadDim);
  if (a.sk < 1 || a.sk > kMaxAttentionKeys) return "attention: " + std::to_string(a.sk) + " keys, at most " +
                                                   std::to_string(kMaxAttentionKeys);
  if (a.sq < 1 || a.b < 1 || a.h < 1 || a.b * a.h > 65535) return "attention: empty or too many (batch x heads)";
  if (a.kv_group < 1 || a.h % a.kv_group)
    return "attention: " + std::to_string(a.h) + " query heads do not share K/V heads in groups of " +
           std::to_string(a.kv_group);
  if (a.mask && a.mask_dtype != DType::f32 && a.mask_dtype != a.dtype && a.mask_dtype != DType::i64)
    return "attention: mask must be f32, the dtype or i64 (a select mask)";
  if (a.mask && (a.mask_batch_inner < 0 || (a.mask_batch_inner == 0 && a.mask_batch_outer != 0)))
    return "attention: mask_batch_outer without mask_batch_inner";
  for (const int64_t* s : {a.q_stride, a.k_stride, a.v_stride})
    for (int i = 0; i < 3; ++i)
      if (s[i] % 4) return "attention: Q/K/V strides must be multiples of 4 elements";
  for (const void* ptr : {a.q, a.k, a.v})
    if (reinterpret_cast<uintptr_t>(ptr) % 8) return "attention: Q/K/V must be 8-byte aligned";
  return "";
}

cudaError_t attention(const AttentionArgs& a, cudaStream_t stream) {
  if (std::string why = attention_unsupported(a); !why.empty()) return fail(cudaErrorNotSupported, why);
  if (!fast_path(a)) {
    const bool f16 = a.dtype == DType::f16;
    if (a.d <= 48) return f16 ? launch_padded<half, 48>(a, stream) : launch_padded<bf16, 48>(a, stream);
    if (a.d <= 64) return f16 ? launch_padded<half, 64>(a, stream) : launch_padded<bf16, 64>(a, stream);
    if (a.d <= 96) return f16 ? launch_padded<half, 96>(a, stream) : launch_padded<bf16, 96>(a, stream);
    return f16 ? launch_padded<half, 128>(a, stream) : launch_padded<bf16, 128>(a, stream);
  }
  if (a.d == 32) return a.dtype == DType::f16 ? launch<half, 32>(a, a.kernel, stream) : launch<bf16, 32>(a, a.kernel, stream);
  return a.dtype == DType::f16 ? launch<half, 64>(a, a.kernel, stream) : launch<bf16, 64>(a, a.kernel, stream);
}

}  // namespace sabre::native
