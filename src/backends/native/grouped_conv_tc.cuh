// The tensor-core body of grouped_conv.cu's kernel (included by it only):
// groups of C/G and K/G both multiples of 8, f16/bf16, 16-byte aligned x and w. One block takes
// kTcWarps·M output pixels (flattened n, p, q) x bkc output channels of one group, an implicit GEMM
// over the reduction index kidx = (r·S + s)·cg + c: each 16-wide step gathers the A tile (two
// 16-byte channel vectors a pixel) and the B tile (the filter's rows kidx, which [R,S,cg,K] lays out
// contiguously along k) into shared memory, then each warp multiplies its M rows on WMMA fragments
// (m16n16k16 for kN = 16, m32n8k16 for kN = 8) accumulating in f32. The accumulators go through
// shared memory to the shared epilogue.
#pragma once

#include <mma.h>

#include "backends/native/grouped_conv.cuh"

namespace sabre::native {
namespace {

constexpr int kTcWarps = 4, kTcThreads = kTcWarps * 32, kTcLda = 24;  // A rows: 16 halves + 8 of padding

template <int kN>
struct TcShape {
  static constexpr int M = 256 / kN;        // fragment rows: 16 (kN 16) or 32 (kN 8)
  static constexpr int BM = kTcWarps * M;   // pixels a block
  static constexpr int kMaxFrags = 64 / kN; // bkc <= 64
};

// Shared memory, every part 32-byte aligned as WMMA wants: C [BM, bkc + 4] f32, A [BM, kTcLda],
// B [frags][16][kN] (one 16 x kN block a fragment, so each starts aligned), row info [3][BM] ints.
__host__ __device__ constexpr int tc_c_ld(int bkc) { return bkc + 4; }
template <int kN>
int64_t tc_smem_bytes(int bkc) {
  using S = TcShape<kN>;
  return int64_t(S::BM) * tc_c_ld(bkc) * 4 + int64_t(S::BM) * kTcLda * 2 + int64_t(bkc / kN) * 16 * kN * 2 +
         3 * S::BM * 4;
}

template <class T, int kN>
__device__ __forceinline__ void tensor_body(const GcParams& a, float* smem) {
  namespace wmma = nvcuda::wmma;
  using S = TcShape<kN>;
  using V = Pack<T, 8>;
  const int ldc = tc_c_ld(a.bkc), frags = a.bkc / kN;
  float* cs = smem;
  T* as = reinterpret_cast<T*>(cs + S::BM * ldc);
  T* bs = as + S::BM * kTcLda;
  int* rb = reinterpret_cast<int*>(bs + frags * 16 * kN);  // image of each row, -1 past the pixels
  int* rh = rb + S::BM;                                    // its first input row and column
  int* rw = rh + S::BM;
  const int tid = threadIdx.x, warp = tid / 32;
  const int kc = blockIdx.y % a.kchunks, g = blockIdx.y / a.kchunks, nb = kc * a.bkc;
  const long long m0 = static_cast<long long>(blockIdx.x) * S::BM, npq = static_cast<long long>(a.n) * a.p * a.q;
  for (int m = tid; m < S::BM; m += kTcThreads) {
    const long long pix = m0 + m;
    if (pix < npq) {
      const int oq = int(pix % a.q), op = int((pix / a.q) % a.p);
      rb[m] = int(pix / (static_cast<long long>(a.q) * a.p));
      rh[m] = op * a.stride_h - a.pad_h, rw[m] = oq * a.stride_w - a.pad_w;
    } else {
      rb[m] = -1;
    }
  }
  wmma::fragment<wmma::accumulator, S::M, kN, 16, float> acc[S::kMaxFrags];
#pragma unroll
  for (int f = 0; f < S::kMaxFrags; ++f) wmma::fill_fragment(acc[f], 0.f);
  const T* x = static_cast<const T*>(a.x);
  const T* w = static_cast<const T*>(a.w);
  const int ktot = a.r * a.s * a.cg, steps = (ktot + 15) / 16;
  for (int step = 0; step < steps; ++step) {
    __syncthreads();  // row info written; the previous step's tiles read
    // A: row m, columns 8h..8h+7 = reduction indices kidx .. kidx+7, one tap's channels c..c+7.
    for (int i = tid; i < 2 * S::BM; i += kTcThreads) {
      const int m = i >> 1, h = i & 1, kidx = step * 16 + h * 8;
      V v;
#pragma unroll
      for (int j = 0; j < 8; ++j) v.v[j] = from_float<T>(0.f);
      if (rb[m] >= 0 && kidx < ktot) {
        const int rs = kidx / a.cg, c = kidx - rs * a.cg, r = rs / a.s, s = rs - r * a.s;
        const int ih = rh[m] + r * a.dil_h, iw = rw[m] + s * a.dil_w;
        if (ih >= 0 && ih < a.h && iw >= 0 && iw < a.w_)
          v = *reinterpret_cast<const V*>(x + ((static_cast<long long>(rb[m]) * a.h + ih) * a.w_ + iw) * a.c +
                                          g * a.cg + c);
      }
      *reinterpret_cast<V*>(as + m * kTcLda + h * 8) = v;
    }
    // B: row kk = filter row kidx, columns n = output channels nb + n of group g, 8 at a time.
    for (int i = tid; i < 2 * a.bkc; i += kTcThreads) {
      const int kk = i / (a.bkc / 8), n = (i - kk * (a.bkc / 8)) * 8, kidx = step * 16 + kk;
      V v;
#pragma unroll
      for (int j = 0; j < 8; ++j) v.v[j] = from_float<T>(0.f);
      if (kidx < ktot && nb + n < a.kg)
        v = *reinterpret_cast<const V*>(w + static_cast<long long>(kidx) * a.k + g * a.kg + nb + n);
      *reinterpret_cast<V*>(bs + ((n / kN) * 16 + kk) * kN + n % kN) = v;
    }
    __syncthreads();
    wmma::fragment<wmma::matrix_a, S::M, kN, 16, T, wmma::row_major> fa;
    wmma::load_matrix_sync(fa, as + warp * S::M * kTcLda, kTcLda);
#pragma unroll
    for (int f = 0; f < S::kMaxFrags; ++f) {
      if (f >= frags) break;
      wmma::fragment<wmma::matrix_b, S::M, kN, 16, T, wmma::row_major> fb;
      wmma::load_matrix_sync(fb, bs + f * 16 * kN, kN);
      wmma::mma_sync(acc[f], fa, fb, acc[f]);
    }
  }
#pragma unroll
  for (int f = 0; f < S::kMaxFrags; ++f) {
    if (f >= frags) break;
    wmma::store_matrix_sync(cs + warp * S::M * ldc + f * kN, acc[f], ldc, wmma::mem_row_major);
  }
  __syncthreads();
  for (int i = tid; i < S::BM * a.bkc; i += kTcThreads) {
    const int m = i / a.bkc, n = i - m * a.bkc;
    if (rb[m] < 0 || nb + n >= a.kg) continue;
    const int k = g * a.kg + nb + n;
    const long long yi = (m0 + m) * a.k + k;
    const float v = cs[m * ldc + n] + (a.bias ? to_float(static_cast<const T*>(a.bias)[k]) : 0.f);
    const float res = a.res ? to_float(static_cast<const T*>(a.res)[yi]) : 0.f;
    static_cast<T*>(a.y)[yi] = from_float<T>(finish(v, res, a));
  }
}

}  // namespace
}  // namespace sabre::native
