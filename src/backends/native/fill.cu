// Values a plan knows only at run time, written into small tensors: fill (a list of dims the
// runtime evaluated, e.g. Shape(x) used as data) and iota (Range(start, limit, delta)).
// Both take their values as kernel parameters, so a captured CUDA graph replays them exactly for
// the shape signature it was captured at. Tests: tests/gpu/native_kernels_test.cpp (Fill_*, Iota_*)
#include "backends/native/common.cuh"

namespace sabre::native {
namespace {

using namespace detail;

struct FillParams {
  void* y;
  long long n;
  int count;
  long long values[kMaxFillValues];
};

template <class T>
__global__ void fill_kernel(const FillParams p) {
  detail::pdl_enter();
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    static_cast<T*>(p.y)[i] = static_cast<T>(p.values[p.count == 1 ? 0 : i]);
}

template <class T>
__global__ void iota_kernel(T* y, long long n, double start, double delta) {
  detail::pdl_enter();
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    y[i] = static_cast<T>(start + static_cast<double>(i) * delta);
}

unsigned blocks_for(long long n) { return static_cast<unsigned>(std::min<long long>((n + 255) / 256, 4096)); }

}  // namespace

cudaError_t fill_values(DType dt, void* y, int64_t n, const std::vector<int64_t>& values, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (values.empty() || values.size() > static_cast<size_t>(kMaxFillValues) ||
      (values.size() != 1 && static_cast<int64_t>(values.size()) != n))
    return fail(cudaErrorInvalidValue, "fill: " + std::to_string(values.size()) + " values for " + std::to_string(n) +
                                           " elements (1, or one per element, at most " +
                                           std::to_string(kMaxFillValues) + ")");
  FillParams p{};
  p.y = y;
  p.n = n;
  p.count = static_cast<int>(values.size());
  for (size_t i = 0; i < values.size(); ++i) p.values[i] = values[i];
  switch (dt) {
    case DType::i64: SABRE_CUDA_TRY(detail::launch(fill_kernel<long long>, blocks_for(n), 256, 0, stream, p)); break;
    case DType::i32: SABRE_CUDA_TRY(detail::launch(fill_kernel<int>, blocks_for(n), 256, 0, stream, p)); break;
    case DType::boolean: SABRE_CUDA_TRY(detail::launch(fill_kernel<bool>, blocks_for(n), 256, 0, stream, p)); break;
    default: return fail(cudaErrorInvalidValue, "fill: integer or bool tensors only");
  }
  SABRE_LAUNCH_CHECK();
  return cudaSuccess;
}

cudaError_t iota(DType dt, void* y, int64_t n, double start, double delta, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (dt) {
    case DType::i64: SABRE_CUDA_TRY(detail::launch(iota_kernel<long long>, blocks_for(n), 256, 0, stream, static_cast<long long*>(y), n, start, delta)); break;
    case DType::i32: SABRE_CUDA_TRY(detail::launch(iota_kernel<int>, blocks_for(n), 256, 0, stream, static_cast<int*>(y), n, start, delta)); break;
    case DType::f32: SABRE_CUDA_TRY(detail::launch(iota_kernel<float>, blocks_for(n), 256, 0, stream, static_cast<float*>(y), n, start, delta)); break;
    default: return fail(cudaErrorInvalidValue, "iota: i64, i32 or f32 only");
  }
  SABRE_LAUNCH_CHECK();
  return cudaSuccess;
}

}  // namespace sabre::native
