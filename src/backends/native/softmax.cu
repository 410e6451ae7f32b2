// Softmax over the last axis with scale, additive broadcast mask and causal masking; with `log`,
// LogSoftmax (logit - max - log(sum), never the log of a rounded probability).
// Tests: tests/gpu/native_kernels_test.cpp (Softmax_*)
#include "backends/native/rows.cuh"

namespace sabre::native {
namespace {

using namespace detail;

struct SmParams {
  const void* x;
  void* y;
  const void* mask;
  long long rows, cols, h, q;
  long long ms0, ms1, ms2;
  float scale;
  int causal;
  int log;
};

// The logit of element k of row `row`, or -inf where masked.
template <class M>
__device__ __forceinline__ float logit(const SmParams& p, const M* mrow, long long qi, long long k, float x) {
  float v = x * p.scale;
  if (mrow) v += to_float(mrow[k]);
  if (p.causal && k > qi + (p.cols - p.q)) v = -INFINITY;
  return v;
}

template <class M>
__device__ __forceinline__ const M* mask_row(const SmParams& p, long long row, long long& qi) {
  qi = row % p.q;
  const long long bh = row / p.q;
  if (!p.mask) return nullptr;
  return static_cast<const M*>(p.mask) + (bh / p.h) * p.ms0 + (bh % p.h) * p.ms1 + qi * p.ms2;
}

template <class T, class M, int VEC, int NCH, int TPR>
__global__ void __launch_bounds__(256) softmax_rows(const SmParams p) {
  detail::pdl_enter();
  __shared__ float red[32];
  const int rpb = blockDim.x / TPR;
  long long row = static_cast<long long>(blockIdx.x) * rpb + threadIdx.x / TPR;
  const int t = threadIdx.x % TPR;
  // Lanes past the last row still join the shuffles (full-warp masks) but store nothing.
  const bool live = row < p.rows;
  if (!live) row = p.rows - 1;
  long long qi;
  const M* mrow = mask_row<M>(p, row, qi);
  const T* x = static_cast<const T*>(p.x) + row * p.cols;
  float v[NCH][VEC];
  float mx = -INFINITY;
#pragma unroll
  for (int j = 0; j < NCH; ++j) {
    const long long k0 = static_cast<long long>(t + j * TPR) * VEC;
    if (k0 < p.cols) {
      load_chunk<T, VEC>(x + k0, v[j]);
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        v[j][e] = logit(p, mrow, qi, k0 + e, v[j][e]);
        mx = fmaxf(mx, v[j][e]);
      }
    } else {
#pragma unroll
      for (int e = 0; e < VEC; ++e) v[j][e] = -INFINITY;
    }
  }
  mx = row_max<TPR>(mx, red);
  float sum = 0.f;
  const bool dead = mx == -INFINITY;  // every element masked: write zeros, not NaN
#pragma unroll
  for (int j = 0; j < NCH; ++j)
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const float ex = dead ? 0.f : __expf(v[j][e] - mx);
      sum += ex;
      if (!p.log) v[j][e] = ex;
    }
  sum = row_sum<TPR>(sum, red);
  const float inv = dead ? 0.f : 1.f / sum;
  const float lse = mx + logf(sum);  // log: y = logit - lse (-inf where masked)
  T* y = static_cast<T*>(p.y) + row * p.cols;
#pragma unroll
  for (int j = 0; j < NCH; ++j) {
    const long long k0 = static_cast<long long>(t + j * TPR) * VEC;
    if (k0 < p.cols && live) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) v[j][e] = p.log ? v[j][e] - lse : v[j][e] * inv;
      store_chunk<T, VEC>(y + k0, v[j]);
    }
  }
}

// Rows too long for registers: three passes over global memory (the row stays in L1/L2).
template <class T, class M>
__global__ void __launch_bounds__(256) softmax_loop(const SmParams p) {
  detail::pdl_enter();
  __shared__ float red[32];
  const long long row = blockIdx.x;
  long long qi;
  const M* mrow = mask_row<M>(p, row, qi);
  const T* x = static_cast<const T*>(p.x) + row * p.cols;
  T* y = static_cast<T*>(p.y) + row * p.cols;
  float mx = -INFINITY;
  for (long long k = threadIdx.x; k < p.cols; k += blockDim.x) mx = fmaxf(mx, logit(p, mrow, qi, k, to_float(x[k])));
  mx = block_max(mx, red);
  const bool dead = mx == -INFINITY;
  float sum = 0.f;
  for (long long k = threadIdx.x; k < p.cols && !dead; k += blockDim.x)
    sum += __expf(logit(p, mrow, qi, k, to_float(x[k])) - mx);
  sum = block_sum(sum, red);
  const float inv = dead ? 0.f : 1.f / sum;
  const float lse = mx + logf(sum);
  for (long long k = threadIdx.x; k < p.cols; k += blockDim.x) {
    const float v = logit(p, mrow, qi, k, to_float(x[k]));
    y[k] = from_float<T>(p.log ? v - lse : dead ? 0.f : __expf(v - mx) * inv);
  }
}

template <class T, class M, int VEC>
cudaError_t launch_vec(const SmParams& p, cudaStream_t s) {
  RowPlan plan;
  if (!plan_rows(p.cols, VEC, plan)) {
    SABRE_CUDA_TRY(detail::launch(softmax_loop<T, M>, static_cast<unsigned>(p.rows), 256, 0, s, p));
    SABRE_LAUNCH_CHECK();
    return cudaSuccess;
  }
  const int threads = plan.tpr <= 32 ? 128 : 256;
  const unsigned blocks = static_cast<unsigned>((p.rows + threads / plan.tpr - 1) / (threads / plan.tpr));
#define SABRE_SM_CASE(TPR, NCH) \
  if (plan.tpr == TPR && plan.nch == NCH) SABRE_CUDA_TRY(detail::launch(softmax_rows<T, M, VEC, NCH, TPR>, blocks, threads, 0, s, p));
  SABRE_SM_CASE(8, 1) SABRE_SM_CASE(16, 1) SABRE_SM_CASE(32, 1) SABRE_SM_CASE(32, 2) SABRE_SM_CASE(32, 4) SABRE_SM_CASE(32, 8)
  SABRE_SM_CASE(256, 1) SABRE_SM_CASE(256, 2) SABRE_SM_CASE(256, 4) SABRE_SM_CASE(256, 8)
#undef SABRE_SM_CASE
  SABRE_LAUNCH_CHECK();
  return cudaSuccess;
}

template <class T, class M>
cudaError_t launch(const SoftmaxArgs& a, const SmParams& p, cudaStream_t s) {
  constexpr int V = 16 / sizeof(T);
  if (p.cols % V == 0 && aligned16(a.x) && aligned16(a.y)) return launch_vec<T, M, V>(p, s);
  return launch_vec<T, M, 1>(p, s);
}

}  // namespace

cudaError_t softmax(const SoftmaxArgs& a, cudaStream_t stream) {
  if (a.b < 1 || a.h < 1 || a.q < 1 || a.cols < 1 || !a.x || !a.y)
    return detail::fail(cudaErrorInvalidValue, "softmax: needs x, y and b, h, q, cols >= 1");
  if (a.mask && a.mask_dtype != a.dtype && a.mask_dtype != DType::f32)
    return detail::fail(cudaErrorNotSupported, "softmax: the mask must be f32 or the input's dtype");
  SmParams p{a.x, a.y, a.mask, a.b * a.h * a.q, a.cols, a.h, a.q,
             a.mask_stride[0], a.mask_stride[1], a.mask_stride[2], a.scale, a.causal ? 1 : 0, a.log ? 1 : 0};
  const bool mf32 = !a.mask || a.mask_dtype == DType::f32;
  SABRE_FLOAT_DISPATCH(a.dtype, T, return mf32 ? launch<T, float>(a, p, stream) : launch<T, T>(a, p, stream));
}

}  // namespace sabre::native
