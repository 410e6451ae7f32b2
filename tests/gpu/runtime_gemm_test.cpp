// A gemm step through a kernel library in kernels/ (dlopen, registry, dispatch by M, bias, batch)
// followed by a native softmax, against host loops, at m on both sides of the dispatch boundary.
// Then the stem as sabre compile lowers it (im2col step + gemm step on its output, an arena
// intermediate) against a host conv, at several batch sizes through captured graphs. Then the L2
// weight prefetch's side stream (check_prefetch). Exits 77 without a GPU.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <random>

#include "numerics.h"
#include "runtime/artifact.h"
#include "sabre/session.h"

using namespace sabre::runtime;
namespace fs = std::filesystem;

// The RGB stem as lower.cpp's emit_im2col_gemm writes it: f32 images [batch,3,9,11] -> im2col
// (7x7/2 pad 3: A [batch·30, 152], an activation in the arena) -> gemm "tn" with B [8, 152] and a
// bias -> y [batch,5,6,8] (NHWC). f32 throughout, the stand-in library's dtype. B's 5 columns past
// 147 hold 1000s (the lowering writes zeros there): only the zeros im2col writes in A's last 5
// columns keep them out of y. Batches 1, 3, 8 and 3 again (a replayed graph) against a host conv.
// A CUDA call the test itself makes: a failure ends the test as failed, saying which.
void cuda_ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::printf("FAIL %s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

int check_im2col_gemm(int sm) {
  const int64_t C = 3, H = 9, W = 11, R = 7, S = 7, K = 8, P = 5, Q = 6, rsc = R * S * C, cols = 152;
  Plan p;
  p.symbols = {{"batch", 1, 8}};
  auto b = DimExpr::parse("batch");
  const size_t b_bytes = K * cols * 4, bias_off = 5120;
  p.tensors = {{"images", DType::f32, {b, C, H, W}, TensorKind::input, 0, 0},
               {"w.im2col", DType::f32, {K, cols}, TensorKind::weight, 0, b_bytes},
               {"b", DType::f32, {K}, TensorKind::weight, bias_off, K * 4},
               {"stem.im2col", DType::f32, {DimExpr::parse("batch*30"), cols}, TensorKind::activation, 0, 0},
               {"y", DType::f32, {b, P, Q, K}, TensorKind::output, 0, 0}};
  p.inputs = {0};
  p.outputs = {4};
  p.steps = {make_step("im2col", "stem (im2col, 147 -> 152 columns)", {0}, {3},
                       sabre::json::parse(R"({"n":"batch","c":3,"h":9,"w":11,"r":7,"s":7,"p":5,"q":6,"pads":[3,3,3,3],)"
                                          R"("strides":[2,2],"dilations":[1,1]})")),
             make_step("gemm", "stem (on its im2col)", {3, 1, 2, -1}, {4},
                       sabre::json::parse(R"({"m":"batch*30","n":8,"k":152,"lda":152,"ldb":152,"ldd":8,"layout":"tn","dtype":"f32",)"
                                          R"("epilogue":"bias","dispatch":[{"max_m":-1,"kernel":"t_big"}]})"))};
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> wt(static_cast<size_t>(K * C * R * S)), bias(K);
  for (auto& v : wt) v = u(rng);
  for (auto& v : bias) v = u(rng);
  std::vector<float> bmat(static_cast<size_t>(K * cols), 1000.f);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t t = 0; t < S; ++t)
          bmat[static_cast<size_t>(k * cols + (r * S + t) * C + c)] = wt[static_cast<size_t>(((k * C + c) * R + r) * S + t)];
  std::vector<uint8_t> bytes(bias_off + K * 4);
  std::memcpy(bytes.data(), bmat.data(), b_bytes);
  std::memcpy(bytes.data() + bias_off, bias.data(), K * 4);
  ManifestInfo m;
  m.sm = sm;
  m.arch = "sm_" + std::to_string(sm);
  std::string dir = (fs::temp_directory_path() / ("sabre_rt_im2col_" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  write_artifact(dir, p, bytes, {SABRE_TEST_GEMM_LIB}, m);
  int failures = 0;
  sabre::Session session(dir);
  sabre::ExecutionContext ctx(session);
  for (int64_t batch : {1, 3, 8, 3}) {
    std::vector<float> x(static_cast<size_t>(batch * C * H * W));
    for (auto& v : x) v = u(rng);
    const size_t ny = static_cast<size_t>(batch * P * Q * K);
    void *dx = nullptr, *dy = nullptr;
    cuda_ok(cudaMalloc(&dx, x.size() * 4), "cudaMalloc");
    cuda_ok(cudaMalloc(&dy, ny * 4), "cudaMalloc");
    cuda_ok(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
    cuda_ok(cudaMemset(dy, 0xff, ny * 4), "cudaMemset");
    int64_t xs[4] = {batch, C, H, W}, ys[4] = {batch, P, Q, K};
    std::vector<sabre_tensor> outs = {{"y", dy, SABRE_DEVICE_CUDA, 0, {SABRE_DTYPE_FLOAT, 32, 1}, 4, ys, nullptr}};
    try {
      ctx.run({{"images", dx, SABRE_DEVICE_CUDA, 0, {SABRE_DTYPE_FLOAT, 32, 1}, 4, xs, nullptr}}, outs);
      std::vector<float> y(ny);
      cuda_ok(cudaMemcpy(y.data(), dy, ny * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
      double err = 0;
      for (int64_t n = 0; n < batch; ++n)
        for (int64_t op = 0; op < P; ++op)
          for (int64_t oq = 0; oq < Q; ++oq)
            for (int64_t k = 0; k < K; ++k) {
              double acc = bias[static_cast<size_t>(k)];
              for (int64_t c = 0; c < C; ++c)
                for (int64_t r = 0; r < R; ++r)
                  for (int64_t t = 0; t < S; ++t) {
                    const int64_t ih = op * 2 - 3 + r, iw = oq * 2 - 3 + t;
                    if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                    acc += double(x[static_cast<size_t>(((n * C + c) * H + ih) * W + iw)]) *
                           wt[static_cast<size_t>(((k * C + c) * R + r) * S + t)];
                  }
              const double got = y[static_cast<size_t>(((n * P + op) * Q + oq) * K + k)];
              err = std::isfinite(got) ? std::max(err, std::fabs(got - acc)) : 1e30;
            }
      std::printf("im2col + gemm, batch %lld: max abs error %.3g (%d columns of %lld carry data)\n", (long long)batch, err,
                  int(rsc), (long long)cols);
      if (err > 1e-4) ++failures;
    } catch (const sabre::Error& e) {
      std::printf("FAIL im2col + gemm, batch %lld: %s\n", (long long)batch, e.what());
      ++failures;
    }
    cuda_ok(cudaFree(dx), "cudaFree");
    cuda_ok(cudaFree(dy), "cudaFree");
  }
  fs::remove_all(dir);
  return failures;
}

// The L2 weight prefetch (docs/RUNTIME.md section 5): x [batch,256] -> softmax -> gemm with a 256 KiB
// weight and a bias -> y. With SABRE_PREFETCH unset the weight is fetched on the side stream while
// the softmax runs: the result must match the host (graph capture, replay, no graphs), a kernel failing
// mid-capture after the fork must leave the context usable, and SABRE_PREFETCH=0 must give the same
// bits with nothing fetched.
int check_prefetch(int sm) {
  const int64_t K = 256, N = 256;
  const uint64_t w_bytes = K * N * 4, bias_off = w_bytes;
  Plan p;
  p.symbols = {{"batch", 1, 64}};
  auto b = DimExpr::parse("batch");
  p.tensors = {{"x", DType::f32, {b, K}, TensorKind::input, 0, 0},
               {"w", DType::f32, {N, K}, TensorKind::weight, 0, w_bytes},
               {"bias", DType::f32, {N}, TensorKind::weight, bias_off, N * 4},
               {"s", DType::f32, {b, K}, TensorKind::activation, 0, 0},
               {"y", DType::f32, {b, N}, TensorKind::output, 0, 0}};
  p.inputs = {0};
  p.outputs = {4};
  p.steps = {make_step("softmax", "/sm", {0}, {3}),
             make_step("gemm", "/fc", {3, 1, 2, -1}, {4},
                       sabre::json::parse(R"({"m":"batch","n":256,"k":256,"lda":256,"ldb":256,"ldd":256,"layout":"tn","dtype":"f32",)"
                                          R"("epilogue":"bias","dispatch":[{"max_m":16,"kernel":"t_small"},{"max_m":-1,"kernel":"t_big"}]})"))};
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> wts(static_cast<size_t>(K * N + N));
  for (auto& v : wts) v = u(rng);
  std::vector<uint8_t> bytes(wts.size() * 4);
  std::memcpy(bytes.data(), wts.data(), bytes.size());
  ManifestInfo m;
  m.sm = sm;
  m.arch = "sm_" + std::to_string(sm);
  std::string dir = (fs::temp_directory_path() / ("sabre_rt_prefetch_" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  write_artifact(dir, p, bytes, {SABRE_TEST_GEMM_LIB}, m);
  int failures = 0;
  auto fail = [&](const std::string& what) {
    std::printf("FAIL prefetch: %s\n", what.c_str());
    ++failures;
  };
  // Runs ctx at `batch` on fresh random x; returns y (NaN-poisoned first) and checks it against the host.
  auto run = [&](sabre::ExecutionContext& ctx, int64_t batch, unsigned seed, const char* what) {
    std::mt19937 r(seed);
    std::vector<float> x(static_cast<size_t>(batch * K));
    for (auto& v : x) v = 4.f * u(r);
    std::vector<float> y(static_cast<size_t>(batch * N));
    void *dx = nullptr, *dy = nullptr;
    cuda_ok(cudaMalloc(&dx, x.size() * 4), "cudaMalloc");
    cuda_ok(cudaMalloc(&dy, y.size() * 4), "cudaMalloc");
    cuda_ok(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
    cuda_ok(cudaMemset(dy, 0xff, y.size() * 4), "cudaMemset");
    int64_t xs[2] = {batch, K}, ys[2] = {batch, N};
    std::vector<sabre_tensor> outs = {{"y", dy, SABRE_DEVICE_CUDA, 0, {SABRE_DTYPE_FLOAT, 32, 1}, 2, ys, nullptr}};
    try {
      ctx.run({{"x", dx, SABRE_DEVICE_CUDA, 0, {SABRE_DTYPE_FLOAT, 32, 1}, 2, xs, nullptr}}, outs);
      cuda_ok(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
      double err = 0;
      for (int64_t i = 0; i < batch; ++i) {
        double mx = -1e30, sum = 0;
        for (int64_t k = 0; k < K; ++k) mx = std::max(mx, double(x[static_cast<size_t>(i * K + k)]));
        for (int64_t k = 0; k < K; ++k) sum += std::exp(double(x[static_cast<size_t>(i * K + k)]) - mx);
        for (int64_t j = 0; j < N; ++j) {
          double acc = wts[static_cast<size_t>(K * N + j)];
          for (int64_t k = 0; k < K; ++k)
            acc += std::exp(double(x[static_cast<size_t>(i * K + k)]) - mx) / sum * wts[static_cast<size_t>(j * K + k)];
          const double got = y[static_cast<size_t>(i * N + j)];
          err = std::isfinite(got) ? std::max(err, std::fabs(got - acc)) : 1e30;
        }
      }
      std::printf("prefetch %s, batch %lld: max abs error %.3g\n", what, (long long)batch, err);
      if (err > 1e-5) fail(std::string(what) + ": error too large");
    } catch (const sabre::Error& e) {
      fail(std::string(what) + ": " + e.what());
    }
    cuda_ok(cudaFree(dx), "cudaFree");
    cuda_ok(cudaFree(dy), "cudaFree");
    return y;
  };
  {
    sabre::Session session(dir);
    sabre::ExecutionContext ctx(session);
    const sabre::RunStats& st = ctx.last_stats();
    if (st.prefetched_weights != 1 || st.prefetched_bytes != w_bytes || st.prefetch_lead != 1)
      fail("expected the 256 KiB weight fetched 1 step ahead, got " + std::to_string(st.prefetched_weights) + " weights, " +
           std::to_string(st.prefetched_bytes) + " bytes, lead " + std::to_string(st.prefetch_lead));
    const int64_t batches[] = {1, 5, 64, 5};  // the second 5 replays the graph captured by the first
    for (int r = 0; r < 4; ++r) run(ctx, batches[r], 100 + unsigned(r), r == 3 ? "replay" : "capture");
    // t_small fails at m=13 after the fork: the error names the step, and the context runs again.
    {
      void* dx = nullptr;
      cuda_ok(cudaMalloc(&dx, 13 * K * 4), "cudaMalloc");
      cuda_ok(cudaMemset(dx, 0, 13 * K * 4), "cudaMemset");
      int64_t xs[2] = {13, K};
      std::vector<sabre_tensor> outs;
      try {
        ctx.run({{"x", dx, SABRE_DEVICE_CUDA, 0, {SABRE_DTYPE_FLOAT, 32, 1}, 2, xs, nullptr}}, outs);
        fail("the simulated launch failure at m=13 was not reported");
      } catch (const sabre::Error& e) {
        if (std::string(e.what()).find("step '/fc' (gemm)") == std::string::npos) fail(std::string("wrong error: ") + e.what());
      }
      cuda_ok(cudaFree(dx), "cudaFree");
      cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
      if (cudaStreamIsCapturing(static_cast<cudaStream_t>(ctx.stream()), &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone)
        fail("the stream is still capturing after the failed capture");
    }
    run(ctx, 7, 7, "after a failed capture");
    sabre::ExecutionContext plain(session, nullptr, /*use_graphs=*/false);
    run(plain, 9, 9, "without graphs");
    // The same input through a context made with SABRE_PREFETCH=0: nothing fetched, the same bits.
    setenv("SABRE_PREFETCH", "0", 1);
    sabre::ExecutionContext off(session);
    unsetenv("SABRE_PREFETCH");
    if (off.last_stats().prefetched_weights != 0) fail("SABRE_PREFETCH=0 still prefetches");
    std::vector<float> again = run(ctx, 5, 105, "replay"), none = run(off, 5, 105, "SABRE_PREFETCH=0");
    if (std::memcmp(again.data(), none.data(), again.size() * 4) != 0) fail("SABRE_PREFETCH=0 changed the result");
  }
  fs::remove_all(dir);
  return failures;
}

int main() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("no GPU: skipped\n");
    return 77;
  }
  cudaDeviceProp prop{};
  cuda_ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  const int64_t K = 32, N = 48;
  Plan p;
  p.symbols = {{"batch", 1, 128}};
  auto b = DimExpr::parse("batch");
  p.tensors = {{"x", DType::f32, {b, K}, TensorKind::input, 0, 0},
               {"w", DType::f32, {N, K}, TensorKind::weight, 0, N * K * 4},
               {"bias", DType::f32, {N}, TensorKind::weight, 6144, N * 4},
               {"h", DType::f32, {b, N}, TensorKind::activation, 0, 0},
               {"y", DType::f32, {b, N}, TensorKind::output, 0, 0}};
  p.inputs = {0};
  p.outputs = {4};
  p.steps = {make_step("gemm", "/fc", {0, 1, 2, -1}, {3},
                       sabre::json::parse(R"({"m":"batch","n":48,"k":32,"lda":32,"ldb":32,"ldd":48,"layout":"tn","dtype":"f32",)"
                                          R"("epilogue":"bias","dispatch":[{"max_m":16,"kernel":"t_small"},{"max_m":-1,"kernel":"t_big"}]})")),
             make_step("softmax", "/sm", {3}, {4})};
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> wts(6144 / 4 + N);
  for (auto& v : wts) v = u(rng);
  std::vector<uint8_t> bytes(wts.size() * 4);
  std::memcpy(bytes.data(), wts.data(), bytes.size());
  ManifestInfo m;
  m.sm = prop.major * 10 + prop.minor;
  m.arch = "sm_" + std::to_string(m.sm);
  std::string dir = (fs::temp_directory_path() / ("sabre_rt_gemm_" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  write_artifact(dir, p, bytes, {SABRE_TEST_GEMM_LIB}, m);

  int failures = 0;
  sabre::Session session(dir);
  sabre::ExecutionContext ctx(session);
  // y = softmax(x·wᵀ + bias) on the host, in double.
  auto reference = [&](const std::vector<float>& x, int64_t batch) {
    std::vector<double> y(static_cast<size_t>(batch * N));
    for (int64_t i = 0; i < batch; ++i) {
      std::vector<double> h(N);
      double mx = -1e30, sum = 0;
      for (int64_t j = 0; j < N; ++j) {
        double acc = wts[static_cast<size_t>(6144 / 4 + j)];
        for (int64_t k = 0; k < K; ++k) acc += double(x[static_cast<size_t>(i * K + k)]) * wts[static_cast<size_t>(j * K + k)];
        h[static_cast<size_t>(j)] = acc;
        mx = std::max(mx, acc);
      }
      for (double v : h) sum += std::exp(v - mx);
      for (int64_t j = 0; j < N; ++j) y[static_cast<size_t>(i * N + j)] = std::exp(h[static_cast<size_t>(j)] - mx) / sum;
    }
    return y;
  };
  const sabre::gpu_test::Bound within_1e5{1e-5, 0, std::numeric_limits<double>::infinity()};
  for (int64_t batch : {1, 16, 17, 128}) {
    std::vector<float> x(static_cast<size_t>(batch * K));
    for (auto& v : x) v = u(rng);
    void *dx = nullptr, *dy = nullptr;
    cuda_ok(cudaMalloc(&dx, x.size() * 4), "cudaMalloc");
    cuda_ok(cudaMalloc(&dy, static_cast<size_t>(batch * N) * 4), "cudaMalloc");
    cuda_ok(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
    cuda_ok(cudaMemset(dy, 0xff, static_cast<size_t>(batch * N) * 4), "cudaMemset");
    int64_t xs[2] = {batch, K}, ys[2] = {batch, N};
    std::vector<sabre_tensor> outs = {{"y", dy, SABRE_DEVICE_CUDA, 0, {SABRE_DTYPE_FLOAT, 32, 1}, 2, ys, nullptr}};
    try {
      ctx.run({{"x", dx, SABRE_DEVICE_CUDA, 0, {SABRE_DTYPE_FLOAT, 32, 1}, 2, xs, nullptr}}, outs);
    } catch (const sabre::Error& e) {
      std::printf("FAIL batch %lld: %s\n", (long long)batch, e.what());
      ++failures;
      continue;
    }
    std::vector<float> y(static_cast<size_t>(batch * N));
    cuda_ok(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
    const sabre::gpu_test::Comparison c = sabre::gpu_test::compare(y, reference(x, batch), within_1e5);
    std::printf("%sbatch %lld: %s\n", c.ok() ? "" : "FAIL ", (long long)batch, c.summary().c_str());
    failures += !c.ok();
    cuda_ok(cudaFree(dx), "cudaFree");
    cuda_ok(cudaFree(dy), "cudaFree");
  }
  // A kernel failing while the graph is being captured: SABRE_ERR_CUDA naming the step, kernel and
  // message; then the same context runs again (the capture was abandoned cleanly).
  for (int rep = 0; rep < 2; ++rep) {
    void* dx = nullptr;
    cuda_ok(cudaMalloc(&dx, 13 * K * 4), "cudaMalloc");
    int64_t xs[2] = {13, K};
    std::vector<sabre_tensor> outs;
    try {
      ctx.run({{"x", dx, SABRE_DEVICE_CUDA, 0, {SABRE_DTYPE_FLOAT, 32, 1}, 2, xs, nullptr}}, outs);
      std::printf("FAIL: the simulated launch failure was not reported\n");
      ++failures;
    } catch (const sabre::Error& e) {
      std::string msg = e.what();
      std::printf("m=13: %s\n", msg.c_str());
      if (e.code != SABRE_ERR_CUDA || msg.find("step '/fc' (gemm): kernel t_small failed") == std::string::npos ||
          msg.find("simulated launch failure") == std::string::npos) {
        std::printf("FAIL: wrong error\n");
        ++failures;
      }
    }
    cuda_ok(cudaFree(dx), "cudaFree");
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    cudaError_t qe = cudaStreamIsCapturing(static_cast<cudaStream_t>(ctx.stream()), &cs);
    if (qe != cudaSuccess || cs != cudaStreamCaptureStatusNone) {
      std::printf("FAIL: the stream is still capturing\n");
      ++failures;
    }
  }
  {
    // After the error the same context computes the model again: every element against the host.
    void *dx = nullptr, *dy = nullptr;
    cuda_ok(cudaMalloc(&dx, 16 * K * 4), "cudaMalloc");
    cuda_ok(cudaMalloc(&dy, 16 * N * 4), "cudaMalloc");
    std::vector<float> x(static_cast<size_t>(16 * K));
    for (auto& v : x) v = u(rng);
    cuda_ok(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
    cuda_ok(cudaMemset(dy, 0xff, 16 * N * 4), "cudaMemset");
    int64_t xs[2] = {16, K}, ys[2] = {16, N};
    std::vector<sabre_tensor> outs = {{"y", dy, SABRE_DEVICE_CUDA, 0, {SABRE_DTYPE_FLOAT, 32, 1}, 2, ys, nullptr}};
    try {
      ctx.run({{"x", dx, SABRE_DEVICE_CUDA, 0, {SABRE_DTYPE_FLOAT, 32, 1}, 2, xs, nullptr}}, outs);
      std::vector<float> y(static_cast<size_t>(16 * N));
      cuda_ok(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
      const sabre::gpu_test::Comparison c = sabre::gpu_test::compare(y, reference(x, 16), within_1e5);
      if (!c.ok()) {
        std::printf("FAIL: after the error: %s\n", c.summary().c_str());
        ++failures;
      }
    } catch (const sabre::Error& e) {
      std::printf("FAIL: the context is not usable after a CUDA error: %s\n", e.what());
      ++failures;
    }
    cuda_ok(cudaFree(dx), "cudaFree");
    cuda_ok(cudaFree(dy), "cudaFree");
  }
  failures += check_im2col_gemm(m.sm);
  failures += check_prefetch(m.sm);
  std::printf("%s\n", failures ? "FAILED" : "PASSED");
  return failures ? 1 : 0;
}
