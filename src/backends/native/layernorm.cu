// LayerNormalization over the last axis, optionally of x + residual (BERT's Add -> LayerNorm).
// Rows up to 16K elements (f16; 8K f32) stay in registers: every load (x, residual, gamma, beta)
// is issued before the first reduction, statistics are two-pass (mean, then squared deviations)
// in f32 from registers, y is written once; 32-bit offsets inside a row. Longer rows: passes over
// global memory, a block per row. Tests: tests/gpu/native_norm_test.cpp (LayerNorm_*)
#include <cstdio>
#include <cstdlib>

#include "backends/native/rows.cuh"

namespace sabre::native {
namespace {

using namespace detail;

struct LnParams {
  const void* x;
  const void* r;
  const void* gamma;
  const void* beta;
  void* y;
  void* sum_out;
  float* y_f32;
  long long rows, cols;
  float eps, inv_cols;
};

// TPR threads per row (8, 16, 32: lane groups of one warp, shuffle reductions; 256: the block),
// blockDim.x / TPR rows per block, NCH chunks of VEC elements per thread; chunk j of thread t is
// elements [(t + j*TPR)*VEC, +VEC). The row is kept as T (x + residual rounded to T is exactly
// what the unfused Add stores), so f16/bf16 rows take half the registers of floats.
// Why this shape: gamma and beta are read with the row, not after both reductions (a second memory
// round trip per row); small row counts spread over many blocks rather than leave most SMs idle;
// offsets are 32-bit.
template <class T, int VEC, int NCH, int TPR>
__global__ void __launch_bounds__(256) layernorm_rows(const LnParams p) {
  detail::pdl_enter();
  using V = Pack<T, VEC>;
  __shared__ float red[32];
  const int rpb = blockDim.x / TPR;
  long long row = static_cast<long long>(blockIdx.x) * rpb + threadIdx.x / TPR;
  const int t = threadIdx.x % TPR, cols = static_cast<int>(p.cols);
  // Lanes past the last row still join the shuffles (full-warp masks) but store nothing.
  const bool live = row < p.rows;
  if (!live) row = p.rows - 1;
  const size_t base = static_cast<size_t>(row) * static_cast<size_t>(cols);
  const T* x = static_cast<const T*>(p.x) + base;
  const T* r = p.r ? static_cast<const T*>(p.r) + base : nullptr;
  const T* gamma = static_cast<const T*>(p.gamma);
  const T* beta = static_cast<const T*>(p.beta);
  V v[NCH], rv[NCH], g[NCH], b[NCH];
  // Every load first where registers allow (up to 4 chunks): the sum_out stores below could alias
  // gamma/beta for all the compiler knows, so it would not move their loads above them by itself.
  // Longer rows read gamma/beta after the statistics: 8 chunks of each would spill.
  constexpr bool kEarly = NCH <= 4;
  auto load_affine = [&] {
#pragma unroll
    for (int j = 0; j < NCH; ++j) {
      const int k0 = (t + j * TPR) * VEC;
      if (k0 < cols) {
        g[j] = *reinterpret_cast<const V*>(gamma + k0);
        if (beta) b[j] = *reinterpret_cast<const V*>(beta + k0);
      }
    }
  };
#pragma unroll
  for (int j = 0; j < NCH; ++j) {
    const int k0 = (t + j * TPR) * VEC;
    if (k0 < cols) {
      v[j] = *reinterpret_cast<const V*>(x + k0);
      if (r) rv[j] = *reinterpret_cast<const V*>(r + k0);
    }
  }
  if constexpr (kEarly) load_affine();
  // Partial sums per vector lane: a dependency chain of NCH adds, not NCH * VEC.
  float part[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) part[e] = 0.f;
#pragma unroll
  for (int j = 0; j < NCH; ++j) {
    const int k0 = (t + j * TPR) * VEC;
    if (k0 < cols) {
      if (r) {
        // Round the sum to T: the unfused Add would have stored it, and sum_out holds it.
#pragma unroll
        for (int e = 0; e < VEC; ++e) v[j].v[e] = from_float<T>(to_float(v[j].v[e]) + to_float(rv[j].v[e]));
        if (p.sum_out && live) *reinterpret_cast<V*>(static_cast<T*>(p.sum_out) + base + k0) = v[j];
      }
#pragma unroll
      for (int e = 0; e < VEC; ++e) part[e] += to_float(v[j].v[e]);
    }
  }
  float sum = 0.f;
#pragma unroll
  for (int e = 0; e < VEC; ++e) sum += part[e];
  const float mean = row_sum<TPR>(sum, red) * p.inv_cols;
#pragma unroll
  for (int e = 0; e < VEC; ++e) part[e] = 0.f;
#pragma unroll
  for (int j = 0; j < NCH; ++j) {
    const int k0 = (t + j * TPR) * VEC;
    if (k0 < cols)
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float d = to_float(v[j].v[e]) - mean;
        part[e] += d * d;
      }
  }
  float sq = 0.f;
#pragma unroll
  for (int e = 0; e < VEC; ++e) sq += part[e];
  const float rstd = rsqrtf(row_sum<TPR>(sq, red) * p.inv_cols + p.eps);
  if constexpr (!kEarly) load_affine();
  T* y = static_cast<T*>(p.y) + base;
#pragma unroll
  for (int j = 0; j < NCH; ++j) {
    const int k0 = (t + j * TPR) * VEC;
    if (k0 < cols && live) {
      V o;
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        o.v[e] = from_float<T>((to_float(v[j].v[e]) - mean) * rstd * to_float(g[j].v[e]) +
                               (beta ? to_float(b[j].v[e]) : 0.f));
      *reinterpret_cast<V*>(y + k0) = o;
      if (p.y_f32) {
        // The model's f32 output: y as stored (rounded to T), as the cast step it replaces wrote.
        float* f = p.y_f32 + base + k0;
#pragma unroll
        for (int e = 0; e < VEC; ++e) f[e] = to_float(o.v[e]);
      }
    }
  }
}

// Rows too long for registers: passes over global memory, one block per row.
template <class T>
__global__ void __launch_bounds__(256) layernorm_loop(const LnParams p) {
  detail::pdl_enter();
  __shared__ float red[32];
  const long long row = blockIdx.x;
  const T* x = static_cast<const T*>(p.x) + row * p.cols;
  const T* r = p.r ? static_cast<const T*>(p.r) + row * p.cols : nullptr;
  auto val = [&](long long k) {
    return r ? to_float(from_float<T>(to_float(x[k]) + to_float(r[k]))) : to_float(x[k]);
  };
  float sum = 0.f;
  for (long long k = threadIdx.x; k < p.cols; k += blockDim.x) sum += val(k);
  const float mean = block_sum(sum, red) / static_cast<float>(p.cols);
  float sq = 0.f;
  for (long long k = threadIdx.x; k < p.cols; k += blockDim.x) {
    const float d = val(k) - mean;
    sq += d * d;
  }
  const float rstd = rsqrtf(block_sum(sq, red) / static_cast<float>(p.cols) + p.eps);
  T* y = static_cast<T*>(p.y) + row * p.cols;
  const T* g = static_cast<const T*>(p.gamma);
  const T* b = static_cast<const T*>(p.beta);
  for (long long k = threadIdx.x; k < p.cols; k += blockDim.x) {
    const float s = val(k);
    if (r && p.sum_out) static_cast<T*>(p.sum_out)[row * p.cols + k] = from_float<T>(s);
    const T o = from_float<T>((s - mean) * rstd * to_float(g[k]) + (b ? to_float(b[k]) : 0.f));
    y[k] = o;
    if (p.y_f32) p.y_f32[row * p.cols + k] = to_float(o);
  }
}

// The register plan for layernorm_rows: a lane group of 8 or 16 for rows of <= 16 chunks, a warp
// for <= 8 chunks per lane (BERT-base's 768 halves: 3), else a 256-thread block for <= 8 per
// thread. NCH is the exact count per thread, so no registers go to chunks no lane has.
struct LnPlan {
  int tpr = 32, nch = 1;
};
bool plan_layernorm(int64_t cols, int vec, LnPlan& plan) {
  const int64_t chunks = (cols + vec - 1) / vec;
  if (chunks <= 8) plan = {8, 1};
  else if (chunks <= 16) plan = {16, 1};
  else if (chunks <= 32 * 8) plan = {32, static_cast<int>((chunks + 31) / 32)};
  else if (chunks <= 256 * 8) plan = {256, static_cast<int>((chunks + 255) / 256)};
  else return false;
  // The compiled NCH values: 5 and 7 round up to 6 and 8 (their last chunk is partly idle).
  if (plan.nch == 5) plan.nch = 6;
  if (plan.nch == 7) plan.nch = 8;
  if (plan.tpr == 256 && plan.nch == 3) plan.nch = 4;
  if (plan.tpr == 256 && plan.nch == 6) plan.nch = 8;
  return true;
}

template <class T, int VEC>
cudaError_t launch_vec(const LnParams& p, cudaStream_t s) {
  LnPlan plan;
  if (!plan_layernorm(p.cols, VEC, plan)) {
    SABRE_CUDA_TRY(detail::launch(layernorm_loop<T>, static_cast<unsigned>(p.rows), 256, 0, s, p));
    SABRE_LAUNCH_CHECK();
    return cudaSuccess;
  }
  // Rows per block for lane groups of one warp: as many warps a block (8, 4, 2, 1) as still give 64
  // blocks or more (about half of a 132-SM GPU), SABRE_LN_WPB=1|2|4|8 forcing a count (an A/B
  // switch, read once). BERT-base: 8 warps a block at batch 32 (512 blocks) and 8 (128), 2 at batch 1
  // (64). Fewer, larger blocks start sooner than two blocks an SM (bench/results/layernorm_blocks_*).
  int threads = 256;
  if (plan.tpr <= 32) {
    const int64_t warps = (p.rows + 32 / plan.tpr - 1) / (32 / plan.tpr);
    static const int forced = [] {
      const char* v = std::getenv("SABRE_LN_WPB");
      if (!v || !*v) return 0;
      const int n = std::atoi(v);
      if (n == 1 || n == 2 || n == 4 || n == 8) return n;
      std::fprintf(stderr, "sabre: SABRE_LN_WPB=%s is not one of 1 2 4 8; ignored\n", v);
      return 0;
    }();
    int wpb = 8;
    while (wpb > 1 && (warps + wpb - 1) / wpb < 64) wpb /= 2;
    threads = 32 * (forced ? forced : wpb);
  }
  const int64_t rpb = threads / plan.tpr;
  const unsigned blocks = static_cast<unsigned>((p.rows + rpb - 1) / rpb);
#define SABRE_LN_CASE(TPR, NCH) \
  if (plan.tpr == TPR && plan.nch == NCH) SABRE_CUDA_TRY(detail::launch(layernorm_rows<T, VEC, NCH, TPR>, blocks, threads, 0, s, p));
  SABRE_LN_CASE(8, 1) SABRE_LN_CASE(16, 1)
  SABRE_LN_CASE(32, 1) SABRE_LN_CASE(32, 2) SABRE_LN_CASE(32, 3) SABRE_LN_CASE(32, 4) SABRE_LN_CASE(32, 6) SABRE_LN_CASE(32, 8)
  SABRE_LN_CASE(256, 2) SABRE_LN_CASE(256, 4) SABRE_LN_CASE(256, 8)
#undef SABRE_LN_CASE
  SABRE_LAUNCH_CHECK();
  return cudaSuccess;
}

// The widest vector that divides cols and that every pointer's alignment allows: 16 bytes, then
// 8 (hidden sizes that are multiples of 4 halves but not 8), then one element.
template <class T>
cudaError_t launch(const LayerNormArgs& a, const LnParams& p, cudaStream_t s) {
  constexpr int V = 16 / sizeof(T);
  auto fits = [&](int vec) {
    const uintptr_t m = static_cast<uintptr_t>(vec * sizeof(T)) - 1;
    auto al = [&](const void* q) { return !q || (reinterpret_cast<uintptr_t>(q) & m) == 0; };
    return p.cols % vec == 0 && al(a.x) && al(a.y) && al(a.gamma) && al(a.beta) && al(a.residual) && al(a.sum_out);
  };
  if (fits(V)) return launch_vec<T, V>(p, s);
  if (fits(V / 2)) return launch_vec<T, V / 2>(p, s);
  return launch_vec<T, 1>(p, s);
}

}  // namespace

cudaError_t layernorm(const LayerNormArgs& a, cudaStream_t stream) {
  if (a.rows < 1 || a.cols < 1 || !a.x || !a.y || !a.gamma)
    return detail::fail(cudaErrorInvalidValue, "layernorm: needs x, y, gamma and rows, cols >= 1");
  if (a.sum_out && !a.residual)
    return detail::fail(cudaErrorInvalidValue, "layernorm: sum_out needs a residual (it receives x + residual)");
  if (a.rows > 0x7fffffff)
    return detail::fail(cudaErrorInvalidValue, "layernorm: at most 2^31 - 1 rows (got " + std::to_string(a.rows) + ")");
  if (a.y_f32 && (reinterpret_cast<uintptr_t>(a.y_f32) & 3))
    return detail::fail(cudaErrorInvalidValue, "layernorm: y_f32 must be 4-byte aligned");
  LnParams p{a.x, a.residual, a.gamma, a.beta, a.y, a.sum_out, a.y_f32, a.rows, a.cols, a.eps,
             1.f / static_cast<float>(a.cols)};
  SABRE_FLOAT_DISPATCH(a.dtype, T, return launch<T>(a, p, stream));
}

}  // namespace sabre::native
