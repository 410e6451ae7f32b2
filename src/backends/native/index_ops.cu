// GatherElements, Trilu and CumSum. index_ops.h says what each computes.
// Tests: tests/gpu/native_kernels_test.cpp (GatherElements_*, Trilu_*, CumSum_*)
#include "backends/native/common.cuh"
#include "backends/native/index_ops.h"

namespace sabre::native {
namespace {

using namespace detail;

constexpr int kMaxDims = 8;

struct Dims {
  int rank;
  long long d[kMaxDims];
};

Dims dims_of(const std::vector<int64_t>& v) {
  Dims o{};
  o.rank = static_cast<int>(v.size());
  for (size_t i = 0; i < v.size(); ++i) o.d[i] = v[i];
  return o;
}

long long count(const std::vector<int64_t>& v) {
  long long n = 1;
  for (int64_t x : v) n *= x;
  return n;
}

template <class U, class I>
__global__ void __launch_bounds__(256) gather_elements_kernel(const U* x, Dims xd, const I* idx, Dims id, int axis,
                                                              U* y, long long n) {
  detail::pdl_enter();
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    long long a = static_cast<long long>(idx[i]);
    if (a < 0) a += xd.d[axis];
    if (a < 0 || a >= xd.d[axis]) {
      y[i] = U{};
      continue;
    }
    // x's offset of i's coordinates, `axis` replaced by a.
    long long r = i, off = 0, xs = 1;
    for (int dd = id.rank - 1; dd >= 0; --dd) {
      const long long c = r % id.d[dd];
      r /= id.d[dd];
      off += (dd == axis ? a : c) * xs;
      xs *= xd.d[dd];
    }
    y[i] = x[off];
  }
}

template <class U>
__global__ void __launch_bounds__(256) trilu_kernel(const U* x, U* y, long long n, long long rows, long long cols,
                                                    long long k, bool upper) {
  detail::pdl_enter();
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long e = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    const long long j = e % cols, i = (e / cols) % rows;
    const bool keep = upper ? j - i >= k : j - i <= k;
    y[e] = keep ? x[e] : U{};
  }
}

// CumSum's accumulator: f32 for float types, int64 for integers.
__device__ __forceinline__ float as_acc(float v) { return v; }
__device__ __forceinline__ float as_acc(half v) { return __half2float(v); }
__device__ __forceinline__ float as_acc(bf16 v) { return __bfloat162float(v); }
__device__ __forceinline__ long long as_acc(int v) { return v; }
__device__ __forceinline__ long long as_acc(long long v) { return v; }
template <class T, class Acc> __device__ __forceinline__ T from_acc(Acc v) { return static_cast<T>(v); }
template <> __device__ __forceinline__ half from_acc<half, float>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ bf16 from_acc<bf16, float>(float v) { return __float2bfloat16_rn(v); }

// A thread per (outer, inner) line, walking its `len` elements along the axis.
template <class T, class Acc>
__global__ void __launch_bounds__(256) cumsum_kernel(const T* x, T* y, long long outer, long long len, long long inner,
                                                     bool exclusive, bool reverse) {
  detail::pdl_enter();
  const long long lines = outer * inner;
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long l = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; l < lines; l += step) {
    const long long base = (l / inner) * len * inner + l % inner;
    Acc acc = 0;
    for (long long t = 0; t < len; ++t) {
      const long long off = base + (reverse ? len - 1 - t : t) * inner;
      const Acc v = as_acc(x[off]);
      if (exclusive) {
        y[off] = from_acc<T, Acc>(acc);
        acc += v;
      } else {
        acc += v;
        y[off] = from_acc<T, Acc>(acc);
      }
    }
  }
}

template <class U>
cudaError_t launch_gather_elements(const void* x, const Dims& xd, const void* idx, ir::DType it, const Dims& id,
                                   int axis, void* y, long long n, cudaStream_t s) {
  const unsigned b = blocks_for(n, 256);
  if (it == ir::DType::i64)
    SABRE_CUDA_TRY(detail::launch(gather_elements_kernel<U, long long>, b, 256, 0, s, static_cast<const U*>(x), xd,
                                  static_cast<const long long*>(idx), id, axis, static_cast<U*>(y), n));
  else
    SABRE_CUDA_TRY(detail::launch(gather_elements_kernel<U, int>, b, 256, 0, s, static_cast<const U*>(x), xd,
                                  static_cast<const int*>(idx), id, axis, static_cast<U*>(y), n));
  SABRE_LAUNCH_CHECK();
  return cudaSuccess;
}

template <class U>
cudaError_t launch_trilu(const void* x, void* y, long long n, long long rows, long long cols, long long k, bool upper,
                         cudaStream_t s) {
  SABRE_CUDA_TRY(detail::launch(trilu_kernel<U>, blocks_for(n, 256), 256, 0, s, static_cast<const U*>(x),
                                static_cast<U*>(y), n, rows, cols, k, upper));
  SABRE_LAUNCH_CHECK();
  return cudaSuccess;
}

template <class T, class Acc>
cudaError_t launch_cumsum(const void* x, void* y, long long outer, long long len, long long inner, bool exclusive,
                          bool reverse, cudaStream_t s) {
  SABRE_CUDA_TRY(detail::launch(cumsum_kernel<T, Acc>, blocks_for(outer * inner, 256), 256, 0, s,
                                static_cast<const T*>(x), static_cast<T*>(y), outer, len, inner, exclusive, reverse));
  SABRE_LAUNCH_CHECK();
  return cudaSuccess;
}

}  // namespace

cudaError_t gather_elements(size_t elem_size, const void* x, const std::vector<int64_t>& xdims, int64_t axis,
                            const void* idx, ir::DType idx_dtype, const std::vector<int64_t>& idims, void* y,
                            cudaStream_t stream) {
  const int64_t r = static_cast<int64_t>(xdims.size());
  if (r > kMaxDims || idims.size() != xdims.size())
    return fail(cudaErrorInvalidValue, "gather_elements: x and indices must have one rank, at most 8");
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return fail(cudaErrorInvalidValue, "gather_elements: axis out of range");
  if (idx_dtype != ir::DType::i64 && idx_dtype != ir::DType::i32)
    return fail(cudaErrorNotSupported, "gather_elements: indices must be i64 or i32");
  const long long n = count(idims);
  if (n == 0) return cudaSuccess;
  const Dims xd = dims_of(xdims), id = dims_of(idims);
  switch (elem_size) {
    case 1: return launch_gather_elements<uint8_t>(x, xd, idx, idx_dtype, id, static_cast<int>(axis), y, n, stream);
    case 2: return launch_gather_elements<uint16_t>(x, xd, idx, idx_dtype, id, static_cast<int>(axis), y, n, stream);
    case 4: return launch_gather_elements<uint32_t>(x, xd, idx, idx_dtype, id, static_cast<int>(axis), y, n, stream);
    case 8: return launch_gather_elements<uint64_t>(x, xd, idx, idx_dtype, id, static_cast<int>(axis), y, n, stream);
    default: return fail(cudaErrorNotSupported, "gather_elements: element size must be 1, 2, 4 or 8 bytes");
  }
}

cudaError_t trilu(size_t elem_size, const void* x, const std::vector<int64_t>& dims, int64_t k, bool upper, void* y,
                  cudaStream_t stream) {
  if (dims.size() < 2) return fail(cudaErrorInvalidValue, "trilu: the input needs at least 2 dims");
  const long long n = count(dims), rows = dims[dims.size() - 2], cols = dims.back();
  if (n == 0) return cudaSuccess;
  switch (elem_size) {
    case 1: return launch_trilu<uint8_t>(x, y, n, rows, cols, k, upper, stream);
    case 2: return launch_trilu<uint16_t>(x, y, n, rows, cols, k, upper, stream);
    case 4: return launch_trilu<uint32_t>(x, y, n, rows, cols, k, upper, stream);
    case 8: return launch_trilu<uint64_t>(x, y, n, rows, cols, k, upper, stream);
    default: return fail(cudaErrorNotSupported, "trilu: element size must be 1, 2, 4 or 8 bytes");
  }
}

cudaError_t cumsum(ir::DType dt, const void* x, const std::vector<int64_t>& dims, int64_t axis, bool exclusive,
                   bool reverse, void* y, cudaStream_t stream) {
  const int64_t r = static_cast<int64_t>(dims.size());
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return fail(cudaErrorInvalidValue, "cumsum: axis out of range");
  long long outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= dims[d];
  for (int64_t d = axis + 1; d < r; ++d) inner *= dims[d];
  const long long len = dims[axis];
  if (outer * inner * len == 0) return cudaSuccess;
  switch (dt) {
    case ir::DType::f32: return launch_cumsum<float, float>(x, y, outer, len, inner, exclusive, reverse, stream);
    case ir::DType::f16: return launch_cumsum<half, float>(x, y, outer, len, inner, exclusive, reverse, stream);
    case ir::DType::bf16: return launch_cumsum<bf16, float>(x, y, outer, len, inner, exclusive, reverse, stream);
    case ir::DType::i32: return launch_cumsum<int, long long>(x, y, outer, len, inner, exclusive, reverse, stream);
    case ir::DType::i64: return launch_cumsum<long long, long long>(x, y, outer, len, inner, exclusive, reverse, stream);
    default: return fail(cudaErrorNotSupported, "cumsum: dtype must be f32, f16, bf16, i32 or i64");
  }
}

}  // namespace sabre::native
