// L2 prefetch: the runtime asks the L2 to fetch a GEMM's weights from HBM while the kernel before
// that GEMM runs (docs/RUNTIME.md section 5), on a side stream, so the GEMM finds them in L2.
// A GEMM runs faster with its operands in L2 than fetching them from HBM (bench/results/swizzle_l2_*).
// Tests: tests/gpu/native_kernels_test.cpp (L2Prefetch_*), tests/gpu/runtime_gemm_test.cpp (check_prefetch).
#include "backends/native/common.cuh"

namespace sabre::native {
namespace {

// Each thread asks for one chunk: spread over blocks, since one SM's TMA unit issues the line
// requests of its bulk prefetches one after another.
constexpr size_t kChunk = 8 << 10;
constexpr unsigned kThreads = 32;

__global__ void l2_prefetch_kernel(const char* p, size_t bytes) {
  const size_t stride = static_cast<size_t>(gridDim.x) * kThreads * kChunk;
  for (size_t off = (static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x) * kChunk; off < bytes; off += stride) {
    const size_t n = bytes - off < kChunk ? bytes - off : kChunk;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    // Size a multiple of 16 bytes; the caller's pointer is 16-byte aligned, so every chunk is.
    const unsigned n16 = static_cast<unsigned>(n & ~size_t(15));
    if (n16) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + off), "r"(n16) : "memory");
#else
    for (size_t o = 0; o < n; o += 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + off + o));
#endif
  }
}

}  // namespace

cudaError_t l2_prefetch(const void* p, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  if (!p || reinterpret_cast<uintptr_t>(p) % 16 != 0)
    return detail::fail(cudaErrorInvalidValue, "l2_prefetch: the address must be 16-byte aligned and not null");
  const size_t per_block = kThreads * kChunk;
  const unsigned blocks = static_cast<unsigned>(std::min<size_t>((bytes + per_block - 1) / per_block, 132));
  l2_prefetch_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const char*>(p), bytes);
  SABRE_LAUNCH_CHECK();
  return cudaSuccess;
}

}  // namespace sabre::native
