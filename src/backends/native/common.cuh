// Internal to the native kernels: numeric helpers, warp reductions, dtype dispatch, status.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "backends/native/native.h"

namespace sabre::native::detail {

// Records `what` as this thread's last error message and returns `code`.
cudaError_t fail(cudaError_t code, const std::string& what);
cudaError_t fail_cuda(cudaError_t code, const char* stmt, const char* file, int line);

// Every CUDA status checked where it is returned: on failure record statement, file and line,
// and return the code from the enclosing function.
#define SABRE_CUDA_TRY(stmt)                                                                   \
  do {                                                                                         \
    const cudaError_t sabre_e_ = (stmt);                                                       \
    if (sabre_e_ != cudaSuccess) return ::sabre::native::detail::fail_cuda(sabre_e_, #stmt, __FILE__, __LINE__); \
  } while (0)
// After a <<<>>> launch.
#define SABRE_LAUNCH_CHECK() SABRE_CUDA_TRY(cudaGetLastError())

using half = __half;
using bf16 = __nv_bfloat16;

template <class T> __device__ __forceinline__ float to_float(T v) { return static_cast<float>(v); }
template <> __device__ __forceinline__ float to_float<half>(half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_float<bf16>(bf16 v) { return __bfloat162float(v); }
template <class T> __device__ __forceinline__ T from_float(float v) { return static_cast<T>(v); }
template <> __device__ __forceinline__ half from_float<half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ bf16 from_float<bf16>(float v) { return __float2bfloat16_rn(v); }

// N elements moved as one aligned access (16 bytes for 8 halves or 4 floats).
template <class T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide sum/max for blockDim.x a multiple of 32 (<= 1024); `red` holds 32 floats.
__device__ __forceinline__ float block_sum(float v, float* red) {
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // `red` may still be read by a previous reduction
  if (lane == 0) red[wid] = v;
  __syncthreads();
  v = lane < nw ? red[lane] : 0.f;
  return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v, float* red) {
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) red[wid] = v;
  __syncthreads();
  v = lane < nw ? red[lane] : -INFINITY;
  return warp_max(v);
}

// n / d for 0 <= n < 2^31 with d fixed at launch (1 <= d <= 2^31), as a multiply-high, an add and
// a shift where a 32-bit division takes ~20 instructions (Granlund-Montgomery; PyTorch's IntDivider).
// Made on the host, passed in kernel parameters.
struct DivMod {
  unsigned d = 1, m = 1, s = 0;
  DivMod() = default;
  explicit DivMod(unsigned div) : d(div) {
    while (s < 31 && (1ull << s) < d) ++s;
    m = static_cast<unsigned>((uint64_t{1} << 32) * ((uint64_t{1} << s) - d) / d + 1);
  }
  __host__ __device__ __forceinline__ unsigned div(unsigned n) const {
#ifdef __CUDA_ARCH__
    return (__umulhi(n, m) + n) >> s;
#else
    return static_cast<unsigned>(((static_cast<uint64_t>(n) * m >> 32) + n) >> s);
#endif
  }
};

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

inline unsigned blocks_for(int64_t work, int64_t per_block, int64_t cap = 132 * 32) {
  int64_t b = (work + per_block - 1) / per_block;
  if (b < 1) b = 1;
  return static_cast<unsigned>(b < cap ? b : cap);
}

// Programmatic dependent launch (PDL, sm_90): a kernel launched with `launch` may start while the
// kernel before it on the stream is still running, so before it touches global memory it must
// wait for that kernel to finish and flush (griddepcontrol.wait), and every kernel launched that
// way calls pdl_enter() first, in every thread, before any early return: then each kernel's
// completion still implies its predecessors', and buffers the planner reuses stay safe. After the
// wait it lets its own successor launch (a hint; the successor waits for our completion anyway).
// A no-op below sm_90 and when the launch had no PDL attribute.
__device__ __forceinline__ void pdl_enter() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether launches ask for PDL: on unless SABRE_PDL=0 (an A/B switch and an escape hatch); read once.
bool pdl_enabled();

// kernel<<<grid, block, smem, stream>>>(args...) with the PDL attribute when pdl_enabled(); the
// kernel must begin with pdl_enter(). Returns the launch's status.
template <class... P, class... A>
cudaError_t launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, A&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = stream;
  cfg.attrs = attr, cfg.numAttrs = pdl_enabled() ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, static_cast<A&&>(args)...);
}

}  // namespace sabre::native::detail

// Calls F.template operator()<T>() with T the storage type of float dtype `dt`.
#define SABRE_FLOAT_DISPATCH(dt, T, ...)                                                               \
  switch (dt) {                                                                                      \
    case ::sabre::ir::DType::f32: { using T = float; __VA_ARGS__; }                                  \
    case ::sabre::ir::DType::f16: { using T = __half; __VA_ARGS__; }                                 \
    case ::sabre::ir::DType::bf16: { using T = __nv_bfloat16; __VA_ARGS__; }                         \
    default:                                                                                         \
      return ::sabre::native::detail::fail(cudaErrorNotSupported,                                   \
                                           std::string("dtype ") + std::string(::sabre::ir::name(dt)) + \
                                               " is not supported here (f32, f16, bf16)");           \
  }
