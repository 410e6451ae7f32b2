// Reductions (sum, mean, max, min, prod, sum of squares, L1, L2, log-sum, log-sum-exp) over any set of axes, and global average
// pooling (NHWC with aligned channel vectors: its own kernel; otherwise a mean), via a view that
// splits x into kept and reduced dims. Reduced axes innermost and contiguous: a warp per output
// reading the run coalesced. Otherwise: a thread per output looping over the reduced dims, which
// is coalesced across threads when the innermost kept axis is contiguous (e.g. axis 0 of [N, C]).
// Tests: tests/gpu/native_kernels_test.cpp (Reduce_*)
#include <algorithm>

#include "backends/native/common.cuh"

namespace sabre::native {
namespace {

using namespace detail;

constexpr int kMaxDims = 8;

struct RedParams {
  const void* x;
  void* y;
  long long n_out, n_red;
  int kept_rank, red_rank;
  long long kept_dims[kMaxDims], kept_strides[kMaxDims];
  long long red_dims[kMaxDims], red_strides[kMaxDims];
  int op;
};

__device__ __forceinline__ float init_of(int op) {
  switch (static_cast<ReduceOp>(op)) {
    case ReduceOp::max: return -INFINITY;
    case ReduceOp::min: return INFINITY;
    case ReduceOp::prod: return 1.f;
    default: return 0.f;
  }
}
// log_sum_exp adds exp(v - shift), shift being the run's max (found in a first pass), so no exp overflows.
__device__ __forceinline__ float combine(int op, float acc, float v, float shift = 0.f) {
  switch (static_cast<ReduceOp>(op)) {
    case ReduceOp::max: return fmaxf(acc, v);
    case ReduceOp::min: return fminf(acc, v);
    case ReduceOp::prod: return acc * v;
    case ReduceOp::sum_square: case ReduceOp::l2: return acc + v * v;
    case ReduceOp::l1: return acc + fabsf(v);
    case ReduceOp::log_sum_exp: return acc + __expf(v - shift);
    default: return acc + v;
  }
}
// Combines two partial results (partials of sums of squares, absolutes and exps are already sums).
__device__ __forceinline__ float merge(int op, float a, float b) {
  switch (static_cast<ReduceOp>(op)) {
    case ReduceOp::max: case ReduceOp::min: case ReduceOp::prod: return combine(op, a, b);
    default: return a + b;
  }
}
__device__ __forceinline__ float finish(const RedParams& p, float acc, float shift) {
  switch (static_cast<ReduceOp>(p.op)) {
    case ReduceOp::mean: return acc / static_cast<float>(p.n_red);
    case ReduceOp::l2: return sqrtf(acc);
    case ReduceOp::log_sum: return logf(acc);
    case ReduceOp::log_sum_exp: return shift + logf(acc);
    default: return acc;
  }
}
// The shift of a run whose max is m: m itself where finite (an infinite max gives 0, and the sum of
// exps is then inf or 0 as the result must be).
__device__ __forceinline__ float lse_shift(float m) { return isfinite(m) ? m : 0.f; }

__device__ __forceinline__ long long kept_offset(const RedParams& p, long long o) {
  long long off = 0;
  for (int d = p.kept_rank - 1; d >= 0; --d) {
    off += (o % p.kept_dims[d]) * p.kept_strides[d];
    o /= p.kept_dims[d];
  }
  return off;
}

// Reduced run contiguous and innermost: a warp per output.
template <class T>
__global__ void __launch_bounds__(256) reduce_inner(const RedParams p) {
  detail::pdl_enter();
  const long long warp = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  const long long nwarps = static_cast<long long>(gridDim.x) * blockDim.x / 32;
  for (long long o = warp; o < p.n_out; o += nwarps) {
    const T* x = static_cast<const T*>(p.x) + kept_offset(p, o);
    float shift = 0.f;
    if (static_cast<ReduceOp>(p.op) == ReduceOp::log_sum_exp) {
      float m = -INFINITY;
      for (long long k = lane; k < p.n_red; k += 32) m = fmaxf(m, to_float(x[k]));
#pragma unroll
      for (int s = 16; s > 0; s >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, s));
      shift = lse_shift(m);
    }
    float acc = init_of(p.op);
    for (long long k = lane; k < p.n_red; k += 32) acc = combine(p.op, acc, to_float(x[k]), shift);
#pragma unroll
    for (int s = 16; s > 0; s >>= 1) acc = merge(p.op, acc, __shfl_xor_sync(0xffffffffu, acc, s));
    if (lane == 0) static_cast<T*>(p.y)[o] = from_float<T>(finish(p, acc, shift));
  }
}

// General: a thread per output.
template <class T>
__global__ void __launch_bounds__(256) reduce_outer(const RedParams p) {
  detail::pdl_enter();
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long o = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; o < p.n_out; o += step) {
    const T* x = static_cast<const T*>(p.x) + kept_offset(p, o);
    const bool lse = static_cast<ReduceOp>(p.op) == ReduceOp::log_sum_exp;
    float shift = 0.f, m = -INFINITY;
    for (int pass = lse ? 0 : 1; pass < 2; ++pass) {  // log_sum_exp: pass 0 finds the max
      float acc = init_of(p.op);
      for (long long k = 0; k < p.n_red; ++k) {
        long long off = 0, r = k;
        for (int d = p.red_rank - 1; d >= 0; --d) {
          off += (r % p.red_dims[d]) * p.red_strides[d];
          r /= p.red_dims[d];
        }
        if (pass == 0) m = fmaxf(m, to_float(x[off]));
        else acc = combine(p.op, acc, to_float(x[off]), shift);
      }
      if (pass == 0) shift = lse_shift(m);
      else static_cast<T*>(p.y)[o] = from_float<T>(finish(p, acc, shift));
    }
  }
}

// ArgMax / ArgMin over one axis: a thread per output, y the int64 index of the first (or, with
// `last`, the last) extreme element along the run; NaNs are skipped.
template <class T>
__global__ void __launch_bounds__(256) reduce_arg(const RedParams p, bool is_max, bool last) {
  detail::pdl_enter();
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  const long long stride = p.red_rank ? p.red_strides[0] : 1;
  for (long long o = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; o < p.n_out; o += step) {
    const T* x = static_cast<const T*>(p.x) + kept_offset(p, o);
    float best = is_max ? -INFINITY : INFINITY;
    long long at = 0;
    bool found = false;
    for (long long k = 0; k < p.n_red; ++k) {
      const float v = to_float(x[k * stride]);
      if (isnan(v)) continue;
      if (!found || (is_max ? v > best : v < best) || (last && v == best)) {
        best = v;
        at = k;
        found = true;
      }
    }
    static_cast<long long*>(p.y)[o] = at;
  }
}

// Appends a dim, merging with the previous one when contiguous with it.
void push_dim(long long* dims, long long* strides, int& rank, long long d, long long s) {
  if (d == 1) return;
  if (rank > 0 && strides[rank - 1] == s * d) {
    dims[rank - 1] *= d;
    strides[rank - 1] = s;
    return;
  }
  dims[rank] = d;
  strides[rank] = s;
  ++rank;
}

// NHWC global average pool with 16-byte channel vectors: a block of 32 x 8 threads takes 32 channel
// vectors of one image, its 8 rows of threads split the H·W pixels, and shared memory adds the 8
// partial sums. For C a multiple of the vector and aligned pointers (global_average_pool checks).
// The general reduction runs a thread per (n, c) over H·W with 64-bit index math per element, far
// from the bandwidth bound on such shapes.
template <class T, int kV>
__global__ void __launch_bounds__(256) gap_nhwc_kernel(const T* x, T* y, int hw, int c) {
  detail::pdl_enter();
  using V = Pack<T, kV>;
  __shared__ float part[8][32][kV + 1];  // +1: rows of threads write different banks
  const int cv = blockIdx.y * 32 + threadIdx.x, cvs = c / kV;
  float acc[kV];
#pragma unroll
  for (int j = 0; j < kV; ++j) acc[j] = 0.f;
  if (cv < cvs) {
    const T* img = x + static_cast<long long>(blockIdx.x) * hw * c + cv * kV;
    for (int i = threadIdx.y; i < hw; i += 8) {
      const V v = *reinterpret_cast<const V*>(img + static_cast<long long>(i) * c);
#pragma unroll
      for (int j = 0; j < kV; ++j) acc[j] += to_float(v.v[j]);
    }
  }
#pragma unroll
  for (int j = 0; j < kV; ++j) part[threadIdx.y][threadIdx.x][j] = acc[j];
  __syncthreads();
  if (threadIdx.y == 0 && cv < cvs) {
    V out;
#pragma unroll
    for (int j = 0; j < kV; ++j) {
      float t = 0.f;
#pragma unroll
      for (int r = 0; r < 8; ++r) t += part[r][threadIdx.x][j];
      out.v[j] = from_float<T>(t / static_cast<float>(hw));
    }
    *reinterpret_cast<V*>(y + static_cast<long long>(blockIdx.x) * c + cv * kV) = out;
  }
}

template <class T>
cudaError_t launch_gap_nhwc(const void* x, void* y, int64_t n, int64_t c, int64_t hw, cudaStream_t stream) {
  constexpr int kV = 16 / sizeof(T);
  const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>((c / kV + 31) / 32));
  SABRE_CUDA_TRY(detail::launch(gap_nhwc_kernel<T, kV>, grid, dim3(32, 8), 0, stream, static_cast<const T*>(x), static_cast<T*>(y), static_cast<int>(hw), static_cast<int>(c)));
  SABRE_LAUNCH_CHECK();
  return cudaSuccess;
}

}  // namespace

cudaError_t reduce(ReduceOp op, DType dt, const void* x, const std::vector<int64_t>& dims,
                   const std::vector<int64_t>& axes, void* y, cudaStream_t stream) {
  const int r = static_cast<int>(dims.size());
  if (r > kMaxDims) return detail::fail(cudaErrorNotSupported, "reduce: rank above 8");
  if (static_cast<size_t>(op) >= static_cast<size_t>(ReduceOp::kCount))
    return detail::fail(cudaErrorInvalidValue, "reduce: unknown op");
  std::vector<bool> red(r, axes.empty());
  for (int64_t a : axes) {
    const int64_t k = a < 0 ? a + r : a;
    if (k < 0 || k >= r) return detail::fail(cudaErrorInvalidValue, "reduce: axis " + std::to_string(a) + " out of range");
    red[k] = true;
  }
  RedParams p{};
  p.x = x;
  p.y = y;
  p.op = static_cast<int>(op);
  p.n_out = 1;
  p.n_red = 1;
  std::vector<long long> st(r);
  long long s = 1;
  for (int d = r - 1; d >= 0; --d) {
    st[d] = s;
    s *= dims[d];
  }
  for (int d = 0; d < r; ++d) {
    if (red[d]) {
      p.n_red *= dims[d];
      push_dim(p.red_dims, p.red_strides, p.red_rank, dims[d], st[d]);
    } else {
      p.n_out *= dims[d];
      push_dim(p.kept_dims, p.kept_strides, p.kept_rank, dims[d], st[d]);
    }
  }
  if (p.n_out == 0) return cudaSuccess;
  if (p.kept_rank == 0) p.kept_dims[p.kept_rank++] = 1;
  const bool inner = p.red_rank == 1 && p.red_strides[0] == 1;
  if (op == ReduceOp::argmax || op == ReduceOp::argmin || op == ReduceOp::argmax_last || op == ReduceOp::argmin_last) {
    // One axis only: its run is one dim (or none, a size-1 axis), so the run position is the index.
    if (axes.size() != 1) return detail::fail(cudaErrorInvalidValue, "reduce: argmax/argmin take exactly one axis");
    const bool is_max = op == ReduceOp::argmax || op == ReduceOp::argmax_last;
    const bool last = op == ReduceOp::argmax_last || op == ReduceOp::argmin_last;
    SABRE_FLOAT_DISPATCH(dt, T, {
      SABRE_CUDA_TRY(detail::launch(reduce_arg<T>, blocks_for(p.n_out, 256), 256, 0, stream, p, is_max, last));
      SABRE_LAUNCH_CHECK();
      return cudaSuccess;
    });
  }
  SABRE_FLOAT_DISPATCH(dt, T, {
    if (inner && p.n_red >= 16) {
      SABRE_CUDA_TRY(detail::launch(reduce_inner<T>, blocks_for(p.n_out, 8), 256, 0, stream, p));
    } else {
      SABRE_CUDA_TRY(detail::launch(reduce_outer<T>, blocks_for(p.n_out, 256), 256, 0, stream, p));
    }
    SABRE_LAUNCH_CHECK();
    return cudaSuccess;
  });
}

cudaError_t global_average_pool(DType dt, Layout layout, const void* x, int64_t n, int64_t c, int64_t h, int64_t w,
                                void* y, cudaStream_t stream) {
  if (layout == Layout::nchw) return reduce(ReduceOp::mean, dt, x, {n, c, h, w}, {2, 3}, y, stream);
  const int64_t vlen = dt == DType::f32 ? 4 : 8;
  const bool vec = (dt == DType::f32 || dt == DType::f16 || dt == DType::bf16) && c % vlen == 0 && aligned16(x) &&
                   aligned16(y) && n >= 1 && n < (int64_t(1) << 31) && h * w >= 1 && h * w * c < (int64_t(1) << 31);
  if (vec) {
    if (dt == DType::f32) return launch_gap_nhwc<float>(x, y, n, c, h * w, stream);
    if (dt == DType::f16) return launch_gap_nhwc<half>(x, y, n, c, h * w, stream);
    return launch_gap_nhwc<bf16>(x, y, n, c, h * w, stream);
  }
  return reduce(ReduceOp::mean, dt, x, {n, h, w, c}, {1, 2}, y, stream);
}

}  // namespace sabre::native
