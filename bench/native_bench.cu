// Bandwidth of sabre's native kernels at BERT-base shapes (seq 128, hidden 768, 12 heads) and
// ResNet-50's stem (224x224 images into NHWC, the 3x3/2 max pool): prints GB/s (bytes read +
// written once / time) per kernel and batch, and a few fallback paths (layernorm hidden sizes off
// the 16-byte vector, a max pool over 12 channels); then fused attention per kernel variant
// (AttentionKernel: the A/B of the previous kernel against the block shapes). Not a test.
// Run: build-g/native_bench   (docs/NATIVE.md)
#include <cuda_runtime.h>

#include <cstdio>
#include <functional>
#include <string>
#include <utility>
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

// One launch's time in ms two ways: back to back on a stream (what a plan without CUDA graphs
// pays, host launch cost included when it exceeds the kernel's) and as CUDA graph replay of the
// same launches (the kernel's own time, as sabre's runtime replays plans).
struct Times {
  float stream_ms = 0, graph_ms = 0;
};
static Times time_ms(const std::function<cudaError_t(cudaStream_t)>& f) {
  const int iters = 200;
  Times t;
  cudaStream_t s;
  cudaEvent_t a, b;
  cudaGraph_t g = nullptr;
  cudaGraphExec_t ge = nullptr;
  if (cudaStreamCreate(&s) != cudaSuccess || cudaEventCreate(&a) != cudaSuccess || cudaEventCreate(&b) != cudaSuccess)
    return {-1, -1};
  for (int i = 0; i < 10; ++i) f(s);
  bool ok = cudaEventRecord(a, s) == cudaSuccess;
  for (int i = 0; i < iters; ++i) f(s);
  ok = ok && cudaEventRecord(b, s) == cudaSuccess && cudaEventSynchronize(b) == cudaSuccess &&
       cudaEventElapsedTime(&t.stream_ms, a, b) == cudaSuccess;
  t.stream_ms = ok ? t.stream_ms / iters : -1;  // -1: not measured (printed as such)
  t.graph_ms = -1;
  if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
    for (int i = 0; i < iters; ++i) f(s);
    if (cudaStreamEndCapture(s, &g) == cudaSuccess && cudaGraphInstantiate(&ge, g, 0) == cudaSuccess) {
      if (cudaGraphLaunch(ge, s) == cudaSuccess && cudaEventRecord(a, s) == cudaSuccess &&  // warm-up, then timed
          cudaGraphLaunch(ge, s) == cudaSuccess && cudaEventRecord(b, s) == cudaSuccess &&
          cudaEventSynchronize(b) == cudaSuccess && cudaEventElapsedTime(&t.graph_ms, a, b) == cudaSuccess)
        t.graph_ms /= iters;
      else
        t.graph_ms = -1;
    }
  }
  if (cudaGetLastError() != cudaSuccess) t.graph_ms = -1;  // a launch refused under capture
  bool released = (!ge || cudaGraphExecDestroy(ge) == cudaSuccess) & (!g || cudaGraphDestroy(g) == cudaSuccess) &
                  (cudaEventDestroy(a) == cudaSuccess) & (cudaEventDestroy(b) == cudaSuccess) &
                  (cudaStreamDestroy(s) == cudaSuccess);
  if (!released) std::fprintf(stderr, "native_bench: warning: releasing a timing stream failed\n");
  return t;
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
  // ResNet-50 at batch 32: the images [32,3,224,224] f32 are 19 MB, the pool's input 51 MB.
  const size_t cnn = size_t{128} << 20;  // and the stem's im2col output 122 MB
  void *cx, *cy;
  CK(cudaMalloc(&cx, cnn));
  CK(cudaMalloc(&cy, cnn));
  CK(cudaMemset(cx, 0x3c, cnn));
  std::printf("%-42s %6s %10s %10s %9s\n", "kernel (f16)", "batch", "stream_us", "graph_us", "GB/s");
  for (int64_t b : {1, 8, 32}) {
    const int64_t rows = b * 128, es = 2;
    // GB/s from the graph time (the kernel's own).
    auto row = [&](const char* name, double bytes, Times t) {
      std::printf("%-42s %6lld %10.2f %10.2f %9.0f\n", name, (long long)b, t.stream_ms * 1e3, t.graph_ms * 1e3,
                  bytes / (t.graph_ms * 1e-3) / 1e9);
    };
    {
      native::SoftmaxArgs a;
      a.x = x, a.y = y, a.b = b, a.h = 12, a.q = 128, a.cols = 128, a.scale = 0.125f;
      a.mask = r, a.mask_dtype = DType::f16, a.mask_stride[0] = 128;
      row("softmax [B,12,128,128] + mask", 2.0 * b * 12 * 128 * 128 * es,
          time_ms([&](cudaStream_t s) { return native::softmax(a, s); }));
    }
    {
      native::LayerNormArgs a;
      a.x = x, a.residual = r, a.gamma = g, a.beta = bt, a.y = y, a.rows = rows, a.cols = 768;
      row("layernorm(x + r) [B*128,768]", 3.0 * rows * 768 * es, time_ms([&](cudaStream_t s) { return native::layernorm(a, s); }));
      a.dtype = DType::bf16;
      row("layernorm(x + r) bf16 [B*128,768]", 3.0 * rows * 768 * es,
          time_ms([&](cudaStream_t s) { return native::layernorm(a, s); }));
      // The fallbacks: 8-byte vectors (1000 halves), one element at a time (770).
      a.dtype = DType::f16;
      for (int64_t cols : {1000, 770}) {
        a.cols = cols;
        const std::string name = "layernorm(x + r) [B*128," + std::to_string(cols) + "]";
        row(name.c_str(), 3.0 * rows * cols * es, time_ms([&](cudaStream_t s) { return native::layernorm(a, s); }));
      }
    }
    row("gather embeddings [B*128,768]", 2.0 * rows * 768 * es, time_ms([&](cudaStream_t s) {
          return native::gather(2, x, {30522, 768}, 0, idx, DType::i64, rows, y, s);
        }));
    {
      native::ElementwiseChain ch;
      ch.inputs = {DType::f16, DType::f16};
      ch.outputs = {ch.unary(native::EwOp::gelu_erf, ch.binary(native::EwOp::add, ch.input(0), ch.input(1)))};
      const SabreEwProgram prog = native::compile_program(ch);
      const SabreEwParams p = native::prepare_params(ch, {rows, 3072}, {{rows, 3072}, {3072}}, {x, g}, {y});
      row("bias+gelu interp [B*128,3072]", 2.0 * rows * 3072 * es,
          time_ms([&](cudaStream_t s) { return native::elementwise_run(prog, p, s); }));
    }
    row("permute heads [B,128,12,64]->[B,12,128,64]", 2.0 * rows * 768 * es, time_ms([&](cudaStream_t s) {
          return native::permute(2, x, {b, 128, 12, 64}, {0, 2, 1, 3}, y, s);
        }));
    {
      // Fused attention as BERT-base runs it: Q, K, V read in place from [B,128,12,64] GEMM outputs,
      // [B,1,1,128] mask. Bytes: Q, K, V and O once.
      native::AttentionArgs a;
      a.q = a.k = a.v = x, a.o = y;
      a.b = b, a.h = 12, a.sq = a.sk = 128, a.d = 64, a.scale = 0.125f;
      for (int64_t* st : {a.q_stride, a.k_stride, a.v_stride, a.o_stride}) st[0] = 128 * 768, st[1] = 64, st[2] = 768;
      a.mask = r, a.mask_dtype = DType::f16, a.mask_stride[0] = 128;
      row("attention [B,12,128,64] + mask", 4.0 * rows * 768 * es, time_ms([&](cudaStream_t s) { return native::attention(a, s); }));
      // As the fused plan runs it: Q, K, V in place in the joined QKV GEMM's [B,128,3*768] output
      // (row stride 2304), the [B,1,1,128] mask in f32.
      const char* base = static_cast<const char*>(x);
      a.q = base, a.k = base + 768 * es, a.v = base + 2 * 768 * es;
      for (int64_t* st : {a.q_stride, a.k_stride, a.v_stride}) st[0] = 128 * 2304, st[1] = 64, st[2] = 2304;
      a.mask_dtype = DType::f32;
      row("attention packed QKV [B,128,2304] f32 mask", 4.0 * rows * 768 * es,
          time_ms([&](cudaStream_t s) { return native::attention(a, s); }));
    }
    row("cast f16->f32 [B*128,768]", 6.0 * rows * 768, time_ms([&](cudaStream_t s) {
          return native::cast(DType::f16, DType::f32, x, y, rows * 768, s);
        }));
    const double px = double(b) * 224 * 224;
    row("images f32 [B,3,224,224]->f16 NHWC c8", px * (3 * 4 + 8 * 2), time_ms([&](cudaStream_t s) {
          return native::nchw_to_nhwc(DType::f32, DType::f16, cx, b, 3, 224, 224, 8, cy, s);
        }));
    row("permute f16 [B,3,224,224]->NHWC (before)", px * 3 * 2 * 2, time_ms([&](cudaStream_t s) {
          return native::permute(2, cx, {b, 3, 224, 224}, {0, 2, 3, 1}, cy, s);
        }));
    {
      // ResNet-50's stem as sabre compile lowers it: the A operand [B*112*112, 152] of its GEMM.
      native::Im2colArgs a;
      a.x_dtype = DType::f32, a.a_dtype = DType::f16, a.x = cx, a.a = cy;
      a.n = b, a.c = 3, a.h = a.w = 224, a.r = a.s = 7, a.p = a.q = 112, a.cols = 152;
      a.pad_h = a.pad_w = 3, a.stride_h = a.stride_w = 2;
      row("im2col f32 [B,3,224,224] 7x7/2 -> f16 [B*112*112,152]", px * 3 * 4 + double(b) * 112 * 112 * 152 * 2,
          time_ms([&](cudaStream_t s) { return native::im2col(a, s); }));
    }
    {
      // The same stem in one kernel (stem_conv): images in, y NHWC [B,112,112,64] out, bias + relu.
      native::StemConvArgs a;
      a.x_dtype = DType::f32, a.dtype = DType::f16, a.x = cx, a.w = g, a.bias = bt, a.y = cy;
      a.n = b, a.c = 3, a.h = a.w_ = 224, a.k = 64, a.r = a.s = 7, a.p = a.q = 112, a.cols = native::stem_conv_cols(3, 7, 7);
      a.pad_h = a.pad_w = 3, a.stride_h = a.stride_w = 2, a.clamp = true, a.clamp_max = INFINITY;
      row("stem_conv f32 [B,3,224,224] 7x7/2 -> f16 NHWC k64", px * 3 * 4 + double(b) * 112 * 112 * 64 * 2,
          time_ms([&](cudaStream_t s) { return native::stem_conv(a, s); }));
      CK(native::stem_conv(a, nullptr));  // a refusal would otherwise print as a time
    }
    {
      native::PoolArgs a;
      a.layout = native::Layout::nhwc;
      a.x = cx, a.y = cy, a.n = b, a.c = 64, a.h = 112, a.w = 112;
      a.kernel[0] = a.kernel[1] = 3;
      a.stride[0] = a.stride[1] = 2;
      a.pad_begin[0] = a.pad_begin[1] = a.pad_end[0] = a.pad_end[1] = 1;
      native::pool_output_dims(a, false);
      row("maxpool 3x3/2 NHWC [B,112,112,64]", double(b) * 64 * 2 * (112 * 112 + 56 * 56),
          time_ms([&](cudaStream_t s) { return native::pool2d(a, s); }));
      a.c = 12;  // the 8-byte-vector fallback
      row("maxpool 3x3/2 NHWC [B,112,112,12]", double(b) * 12 * 2 * (112 * 112 + 56 * 56),
          time_ms([&](cudaStream_t s) { return native::pool2d(a, s); }));
    }
  }
  // Fused attention at BERT-base shapes (12 heads, head dim 64, seq 128), graph replay in us, every
  // kernel: auto is what a plan runs, the rest a block shape forced (rows x split warps). Masks: [B,1,1,K] as the bench rows
  // above, [B,1,Q,K] as HF's eager BERT expands its padding mask.
  {
    const auto& kernels = native::kAttentionKernelNames;
    std::printf("\n%-44s %6s", "attention, graph_us (f16)", "batch");
    for (const auto& kn : kernels) std::printf(" %8s", kn.second);
    std::printf("\n");
    struct Case {
      const char* name;
      bool packed;
      int mask;  // 0 none, 1 [B,1,1,K], 2 [B,1,Q,K]
      DType mask_dtype;
      bool causal;
    };
    const Case cases[] = {{"packed QKV, [B,1,1,K] f32 mask", true, 1, DType::f32, false},
                          {"packed QKV, [B,1,Q,K] f32 mask", true, 2, DType::f32, false},
                          {"packed QKV, [B,1,1,K] f16 mask", true, 1, DType::f16, false},
                          {"packed QKV, [B,1,1,K] i64 select (BERT's)", true, 1, DType::i64, false},
                          {"packed QKV, [B,1,Q,K] f16 mask", true, 2, DType::f16, false},
                          {"[B,128,12,64] Q/K/V, [B,1,1,K] f16 mask", false, 1, DType::f16, false},
                          {"packed QKV, causal, no mask", true, 0, DType::f32, true}};
    for (int64_t b : {1, 8, 32})
      for (const Case& c : cases) {
        native::AttentionArgs a;
        a.b = b, a.h = 12, a.sq = a.sk = 128, a.d = 64, a.scale = 0.125f, a.o = y;
        const char* base = static_cast<const char*>(x);
        const int64_t row = c.packed ? 2304 : 768;
        a.q = base, a.k = base + (c.packed ? 768 * 2 : 0), a.v = base + (c.packed ? 2 * 768 * 2 : 0);
        for (int64_t* st : {a.q_stride, a.k_stride, a.v_stride}) st[0] = 128 * row, st[1] = 64, st[2] = row;
        a.o_stride[0] = 128 * 768, a.o_stride[1] = 64, a.o_stride[2] = 768;
        if (c.mask) {
          a.mask = r, a.mask_dtype = c.mask_dtype;
          a.mask_false = -3.4028234663852886e38f;  // an i64 select: HF's padding value where r is 0
          if (c.mask == 1) a.mask_stride[0] = 128;
          else a.mask_stride[0] = 128 * 128, a.mask_stride[2] = 128;
        }
        a.causal = c.causal;
        std::printf("%-44s %6lld", c.name, (long long)b);
        for (const auto& kn : kernels) {
          a.kernel = kn.first;
          std::printf(" %8.2f", time_ms([&](cudaStream_t s) { return native::attention(a, s); }).graph_ms * 1e3);
        }
        std::printf("\n");
      }
  }
  {
    const int64_t n = int64_t{1} << 28;  // 512 MiB of f16 each way: the copy ceiling
    void *a, *c;
    CK(cudaMalloc(&a, n * 2));
    CK(cudaMalloc(&c, n * 2));
    const Times t = time_ms([&](cudaStream_t s) { return cudaMemcpyAsync(c, a, n * 2, cudaMemcpyDeviceToDevice, s); });
    std::printf("%-42s %6s %10.2f %10.2f %9.0f\n", "cudaMemcpy D2D 512 MiB", "-", t.stream_ms * 1e3, t.graph_ms * 1e3,
                4.0 * n / (t.graph_ms * 1e-3) / 1e9);
  }
  return 0;
}
