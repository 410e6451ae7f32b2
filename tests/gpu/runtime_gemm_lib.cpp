// A kernel library with the sabre GEMM ABI (include/sabre/kernel_abi.h) for the runtime's GPU test:
// naive f32 "tn" GEMMs with bias. "t_small" refuses m > 16, so a wrong dispatch fails the run, and
// fails like a launch at m = 13, so the test sees a CUDA error in the middle of a graph capture.
// Compiled as CUDA (tests/gpu/CMakeLists.txt).
#include <cuda_runtime.h>

#include "sabre/kernel_abi.h"

namespace {

__global__ void gemm_tn_bias(sabre_gemm_args a) {
  long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  long long i = blockIdx.y;
  long long l = blockIdx.z;
  if (j >= a.n || i >= a.m) return;
  const float* A = static_cast<const float*>(a.a) + l * a.stride_a + i * a.lda;
  const float* B = static_cast<const float*>(a.b) + l * a.stride_b + j * a.ldb;
  float acc = 0.f;
  for (long long k = 0; k < a.k; ++k) acc += A[k] * B[k];
  float v = a.alpha * acc + (a.bias ? static_cast<const float*>(a.bias)[j] : 0.f);
  static_cast<float*>(a.d)[l * a.stride_d + i * a.ldd + j] = v;
}

thread_local const char* g_error = "";

int can_small(const sabre_gemm_args* a) { return a->m <= 16 ? SABRE_OK : SABRE_NOT_SUPPORTED; }
int can_big(const sabre_gemm_args*) { return SABRE_OK; }
size_t ws(const sabre_gemm_args*) { return 0; }
int launch(const sabre_gemm_args* a, sabre_stream_t s) {
  if (!a->a || !a->b || !a->d) {
    g_error = "null pointer";
    return SABRE_BAD_ARGS;
  }
  dim3 grid(static_cast<unsigned>((a->n + 127) / 128), static_cast<unsigned>(a->m), static_cast<unsigned>(a->batch));
  gemm_tn_bias<<<grid, 128, 0, reinterpret_cast<cudaStream_t>(s)>>>(*a);
  if (cudaGetLastError() != cudaSuccess) {
    g_error = "launch failed";
    return SABRE_CUDA_ERROR;
  }
  return SABRE_OK;
}
int run_small(const sabre_gemm_args* a, sabre_stream_t s) {
  if (a->m == 13) {  // the test's stand-in for a failed launch
    g_error = "simulated launch failure at m=13";
    return SABRE_CUDA_ERROR;
  }
  if (can_small(a) != SABRE_OK) {
    g_error = "t_small takes m <= 16";
    return SABRE_NOT_SUPPORTED;
  }
  return launch(a, s);
}
const char* last_error() { return g_error; }

const sabre_kernel_entry kEntries[] = {{"t_small", can_small, ws, run_small, last_error},
                                       {"t_big", can_big, ws, launch, last_error}};

}  // namespace

// What both kernels compute, checked by the runtime against the plan's gemm steps (f32 "tn" with bias).
#define STAND_IN_SIGNATURE "sabre-kernel-signature/1 op=gemm dtype=f32 out=f32 layout=tn epilogue=bias alignment=1 arch=any"
extern "C" const char* t_small_signature(void) { return STAND_IN_SIGNATURE; }
extern "C" const char* t_big_signature(void) { return STAND_IN_SIGNATURE; }

extern "C" const sabre_kernel_entry* sabre_kernel_registry(int* count, int* abi_version) {
  *count = 2;
  *abi_version = SABRE_KERNEL_ABI_VERSION;
  return kEntries;
}
