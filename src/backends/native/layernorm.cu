// LayerNormalization over the last axis, optionally of x + residual (BERT's Add -> LayerNorm).
// Two-pass statistics from registers (mean, then squared deviations) in f32.
// Tests: tests/gpu/native_kernels_test.cpp (LayerNorm_*)
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
  long long rows, cols;
  float eps;
};

template <class T, int VEC, int NCH, int TPR>
__global__ void __launch_bounds__(256) layernorm_rows(const LnParams p) {
  __shared__ float red[32];
  const int rpb = blockDim.x / TPR;
  long long row = static_cast<long long>(blockIdx.x) * rpb + threadIdx.x / TPR;
  const int t = threadIdx.x % TPR;
  // Lanes past the last row still join the shuffles (full-warp masks) but store nothing.
  const bool live = row < p.rows;
  if (!live) row = p.rows - 1;
  const T* x = static_cast<const T*>(p.x) + row * p.cols;
  const T* r = p.r ? static_cast<const T*>(p.r) + row * p.cols : nullptr;
  float v[NCH][VEC];
  float sum = 0.f;
#pragma unroll
  for (int j = 0; j < NCH; ++j) {
    const long long k0 = static_cast<long long>(t + j * TPR) * VEC;
    if (k0 < p.cols) {
      load_chunk<T, VEC>(x + k0, v[j]);
      if (r) {
        float rv[VEC];
        load_chunk<T, VEC>(r + k0, rv);
        // Round the sum to T: the unfused Add would have stored it, and sum_out holds it.
#pragma unroll
        for (int e = 0; e < VEC; ++e) v[j][e] = to_float(from_float<T>(v[j][e] + rv[e]));
        if (p.sum_out && live) store_chunk<T, VEC>(static_cast<T*>(p.sum_out) + row * p.cols + k0, v[j]);
      }
#pragma unroll
      for (int e = 0; e < VEC; ++e) sum += v[j][e];
    }
  }
  const float mean = row_sum<TPR>(sum, red) / static_cast<float>(p.cols);
  float sq = 0.f;
#pragma unroll
  for (int j = 0; j < NCH; ++j) {
    const long long k0 = static_cast<long long>(t + j * TPR) * VEC;
    if (k0 < p.cols)
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float d = v[j][e] - mean;
        sq += d * d;
      }
  }
  const float rstd = rsqrtf(row_sum<TPR>(sq, red) / static_cast<float>(p.cols) + p.eps);
  T* y = static_cast<T*>(p.y) + row * p.cols;
#pragma unroll
  for (int j = 0; j < NCH; ++j) {
    const long long k0 = static_cast<long long>(t + j * TPR) * VEC;
    if (k0 < p.cols && live) {
      float g[VEC], b[VEC];
      load_chunk<T, VEC>(static_cast<const T*>(p.gamma) + k0, g);
      if (p.beta) load_chunk<T, VEC>(static_cast<const T*>(p.beta) + k0, b);
#pragma unroll
      for (int e = 0; e < VEC; ++e) v[j][e] = (v[j][e] - mean) * rstd * g[e] + (p.beta ? b[e] : 0.f);
      store_chunk<T, VEC>(y + k0, v[j]);
    }
  }
}

// Rows too long for registers: passes over global memory, one block per row.
template <class T>
__global__ void __launch_bounds__(256) layernorm_loop(const LnParams p) {
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
    y[k] = from_float<T>((s - mean) * rstd * to_float(g[k]) + (b ? to_float(b[k]) : 0.f));
  }
}

template <class T, int VEC>
cudaError_t launch_vec(const LnParams& p, cudaStream_t s) {
  RowPlan plan;
  if (!plan_rows(p.cols, VEC, plan)) {
    layernorm_loop<T><<<static_cast<unsigned>(p.rows), 256, 0, s>>>(p);
    SABRE_LAUNCH_CHECK();
    return cudaSuccess;
  }
  const int threads = plan.tpr <= 32 ? 128 : 256;
  const unsigned blocks = static_cast<unsigned>((p.rows + threads / plan.tpr - 1) / (threads / plan.tpr));
#define SABRE_LN_CASE(TPR, NCH) \
  if (plan.tpr == TPR && plan.nch == NCH) layernorm_rows<T, VEC, NCH, TPR><<<blocks, threads, 0, s>>>(p);
  SABRE_LN_CASE(8, 1) SABRE_LN_CASE(16, 1) SABRE_LN_CASE(32, 1) SABRE_LN_CASE(32, 2) SABRE_LN_CASE(32, 4) SABRE_LN_CASE(32, 8)
  SABRE_LN_CASE(256, 1) SABRE_LN_CASE(256, 2) SABRE_LN_CASE(256, 4) SABRE_LN_CASE(256, 8)
#undef SABRE_LN_CASE
  SABRE_LAUNCH_CHECK();
  return cudaSuccess;
}

template <class T>
cudaError_t launch(const LayerNormArgs& a, const LnParams& p, cudaStream_t s) {
  constexpr int V = 16 / sizeof(T);
  const bool al = aligned16(a.x) && aligned16(a.y) && aligned16(a.gamma) && (!a.beta || aligned16(a.beta)) &&
                  (!a.residual || aligned16(a.residual)) && (!a.sum_out || aligned16(a.sum_out));
  if (p.cols % V == 0 && al) return launch_vec<T, V>(p, s);
  return launch_vec<T, 1>(p, s);
}

}  // namespace

cudaError_t layernorm(const LayerNormArgs& a, cudaStream_t stream) {
  if (a.rows < 1 || a.cols < 1 || !a.x || !a.y || !a.gamma)
    return detail::fail(cudaErrorInvalidValue, "layernorm: needs x, y, gamma and rows, cols >= 1");
  if (a.sum_out && !a.residual)
    return detail::fail(cudaErrorInvalidValue, "layernorm: sum_out needs a residual (it receives x + residual)");
  LnParams p{a.x, a.residual, a.gamma, a.beta, a.y, a.sum_out, a.rows, a.cols, a.eps};
  SABRE_FLOAT_DISPATCH(a.dtype, T, return launch<T>(a, p, stream));
}

}  // namespace sabre::native
