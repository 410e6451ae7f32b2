// Bandwidth of sabre's native kernels at BERT-base shapes (seq 128, hidden 768, 12 heads):
// prints GB/s (bytes read + written once / time) per kernel and batch. Not a test.
// Run: build-g/native_bench   (docs/NATIVE.md)
#include <cuda_runtime.h>

#include <cstdio>
#include <functional>
#include <vector>

#include "backends/native/native.h"

using namespace sabre;
using ir::DType;

#define CK(x)                                                                                          \
  do {                                                                                                 \
    cudaError_t e = (x);                                                                               \
    if (e != cudaSuccess) {                                                                            \
      std::printf("%s: %s %s\n", #x, cudaGetErrorString(e), native::last_error_message().c_str());      \
      return 1;                                                                                        \
    }                                                                                                  \
  } while (0)

static float time_ms(const std::function<cudaError_t()>& f) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int i = 0; i < 10; ++i) f();
  const int iters = 200;
  cudaEventRecord(a);
  for (int i = 0; i < iters; ++i) f();
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  return ms / iters;
}

int main() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("no CUDA device\n");
    return 77;
  }
  const size_t big = size_t{32} * 12 * 128 * 128 * 4 + 4096;
  void *x, *y, *r, *s, *g, *bt, *idx;
  CK(cudaMalloc(&x, big));
  CK(cudaMalloc(&y, big));
  CK(cudaMalloc(&r, big));
  CK(cudaMalloc(&s, big));
  CK(cudaMalloc(&g, 1 << 20));
  CK(cudaMalloc(&bt, 1 << 20));
  CK(cudaMalloc(&idx, 1 << 20));
  CK(cudaMemset(x, 0x3c, big));  // f16 ~1.0
  CK(cudaMemset(r, 0x3c, big));
  CK(cudaMemset(g, 0x3c, 1 << 20));
  CK(cudaMemset(bt, 0, 1 << 20));
  CK(cudaMemset(idx, 0, 1 << 20));
  std::printf("%-34s %6s %10s %9s\n", "kernel (f16)", "batch", "time_us", "GB/s");
  for (int64_t b : {1, 8, 32}) {
    const int64_t rows = b * 128, es = 2;
    auto row = [&](const char* name, double bytes, float ms) {
      std::printf("%-34s %6lld %10.2f %9.0f\n", name, (long long)b, ms * 1e3, bytes / (ms * 1e-3) / 1e9);
    };
    {
      native::SoftmaxArgs a;
      a.x = x, a.y = y, a.b = b, a.h = 12, a.q = 128, a.cols = 128, a.scale = 0.125f;
      a.mask = r, a.mask_dtype = DType::f16, a.mask_stride[0] = 128;
      row("softmax [B,12,128,128] + mask", 2.0 * b * 12 * 128 * 128 * es,
          time_ms([&] { return native::softmax(a, nullptr); }));
    }
    {
      native::LayerNormArgs a;
      a.x = x, a.residual = r, a.gamma = g, a.beta = bt, a.y = y, a.rows = rows, a.cols = 768;
      row("layernorm(x + r) [B*128,768]", 3.0 * rows * 768 * es, time_ms([&] { return native::layernorm(a, nullptr); }));
    }
    row("gather embeddings [B*128,768]", 2.0 * rows * 768 * es, time_ms([&] {
          return native::gather(2, x, {30522, 768}, 0, idx, DType::i64, rows, y, nullptr);
        }));
    {
      native::ElementwiseChain ch;
      ch.inputs = {DType::f16, DType::f16};
      ch.outputs = {ch.unary(native::EwOp::gelu_erf, ch.binary(native::EwOp::add, ch.input(0), ch.input(1)))};
      const SabreEwProgram prog = native::compile_program(ch);
      const SabreEwParams p = native::prepare_params(ch, {rows, 3072}, {{rows, 3072}, {3072}}, {x, g}, {y});
      row("bias+gelu interp [B*128,3072]", 2.0 * rows * 3072 * es,
          time_ms([&] { return native::elementwise_run(prog, p, nullptr); }));
    }
    row("permute heads [B,128,12,64]->[B,12,128,64]", 2.0 * rows * 768 * es, time_ms([&] {
          return native::permute(2, x, {b, 128, 12, 64}, {0, 2, 1, 3}, y, nullptr);
        }));
    {
      // Fused attention as BERT-base runs it: Q, K, V read in place from [B,128,12,64] GEMM outputs,
      // [B,1,1,128] mask. Bytes: Q, K, V and O once. (41 us per layer at batch 1 inside the model.)
      native::AttentionArgs a;
      a.q = a.k = a.v = x, a.o = y;
      a.b = b, a.h = 12, a.sq = a.sk = 128, a.d = 64, a.scale = 0.125f;
      for (int64_t* st : {a.q_stride, a.k_stride, a.v_stride, a.o_stride}) st[0] = 128 * 768, st[1] = 64, st[2] = 768;
      a.mask = r, a.mask_dtype = DType::f16, a.mask_stride[0] = 128;
      row("attention [B,12,128,64] + mask", 4.0 * rows * 768 * es, time_ms([&] { return native::attention(a, nullptr); }));
    }
    row("cast f16->f32 [B*128,768]", 6.0 * rows * 768, time_ms([&] {
          return native::cast(DType::f16, DType::f32, x, y, rows * 768, nullptr);
        }));
  }
  {
    const int64_t n = int64_t{1} << 28;  // 512 MiB of f16 each way: the copy ceiling
    void *a, *c;
    CK(cudaMalloc(&a, n * 2));
    CK(cudaMalloc(&c, n * 2));
    std::printf("%-34s %6s %10.2f %9.0f\n", "cudaMemcpy D2D 512 MiB", "-",
                time_ms([&] { return cudaMemcpyAsync(c, a, n * 2, cudaMemcpyDeviceToDevice); }) * 1e3,
                4.0 * n / (time_ms([&] { return cudaMemcpyAsync(c, a, n * 2, cudaMemcpyDeviceToDevice); }) * 1e-3) / 1e9);
  }
  return 0;
}
