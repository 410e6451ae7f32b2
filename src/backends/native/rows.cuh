// Internal: the row-resident skeleton shared by softmax and layernorm. A row is handled by TPR
// threads (32: one warp, reductions by shuffles; 256: one block). Each thread keeps NCH chunks
// of VEC elements in registers, so the row is read once and written once; chunk j of thread t
// covers elements [(t + j*TPR)*VEC, +VEC).
#pragma once

#include "backends/native/common.cuh"

namespace sabre::native::detail {

// TPR <= 32: xor shuffles below TPR stay inside each row's lane group.
template <int TPR>
__device__ __forceinline__ float row_sum(float v, float* red) {
  if constexpr (TPR <= 32) {
#pragma unroll
    for (int o = TPR / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
  } else {
    return block_sum(v, red);
  }
}
template <int TPR>
__device__ __forceinline__ float row_max(float v, float* red) {
  if constexpr (TPR <= 32) {
#pragma unroll
    for (int o = TPR / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
  } else {
    return block_max(v, red);
  }
}

template <class T, int VEC>
__device__ __forceinline__ void load_chunk(const T* p, float* out) {
  if constexpr (VEC == 1) {
    out[0] = to_float(*p);
  } else {
    const Pack<T, VEC> v = *reinterpret_cast<const Pack<T, VEC>*>(p);
#pragma unroll
    for (int e = 0; e < VEC; ++e) out[e] = to_float(v.v[e]);
  }
}
template <class T, int VEC>
__device__ __forceinline__ void store_chunk(T* p, const float* in) {
  if constexpr (VEC == 1) {
    *p = from_float<T>(in[0]);
  } else {
    Pack<T, VEC> v;
#pragma unroll
    for (int e = 0; e < VEC; ++e) v.v[e] = from_float<T>(in[e]);
    *reinterpret_cast<Pack<T, VEC>*>(p) = v;
  }
}

// Warps per block (4, 2, 1) for kernels that give each row a warp or a lane group of one: as many
// as still leave two blocks per SM of a 132-SM GPU, so few rows spread over many SMs (BERT-base at
// batch 1, 128 rows: one warp a block). embed_layernorm uses it; layernorm has its own rule (8 to 1
// warps, 64+ blocks: layernorm.cu).
inline int warps_per_block(int64_t warps) {
  int wpb = 4;
  while (wpb > 1 && warps / wpb < 2 * 132) wpb /= 2;
  return wpb;
}

// The launch shape for a row kernel: picks TPR and NCH for `cols`; false when the row is too
// long to stay in registers (callers use their looping kernel then). Short rows (BERT's 128-wide
// attention rows are 16 chunks) get a lane group of 8 or 16 so no lane idles.
struct RowPlan {
  int tpr = 32;
  int nch = 1;
};
inline bool plan_rows(int64_t cols, int vec, RowPlan& plan) {
  const int64_t chunks = (cols + vec - 1) / vec;
  if (chunks <= 8) {
    plan = {8, 1};
    return true;
  }
  if (chunks <= 16) {
    plan = {16, 1};
    return true;
  }
  for (int tpr : {32, 256})
    for (int nch : {1, 2, 4, 8})
      if (chunks <= static_cast<int64_t>(tpr) * nch) {
        plan = {tpr, nch};
        return true;
      }
  return false;
}

}  // namespace sabre::native::detail
