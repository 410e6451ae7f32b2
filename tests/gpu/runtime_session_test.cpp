// Runs a hand-built artifact (layernorm -> reshape view -> softmax -> reshape -> elementwise
// chain) through sabre::Session on the GPU and compares against host loops; then every run-time
// error case (unknown input, wrong dtype, wrong shape, dim outside its range, host memory), each
// followed by a good run that must still be right; graph replay per shape signature; four
// contexts on four threads at once; the C API; an nchw_to_nhwc step (fused cast, padded channels).
// With --every-device: the artifact on every GPU at once (every_device below). Exits 77 without a GPU.
#include <cuda.h>
#include <dlfcn.h>
#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>

#include "numerics.h"
#include "runtime/artifact.h"
#include "runtime/resolve.h"
#include "runtime/session_profile_report.h"
#include "sabre/sabre.h"
#include "sabre/session.h"

using namespace sabre::runtime;
namespace fs = std::filesystem;

namespace {

int g_failures = 0;
#define CHECK(cond, ...)                                              \
  do {                                                                \
    if (!(cond)) {                                                    \
      ++g_failures;                                                   \
      std::printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);     \
      std::printf(__VA_ARGS__);                                       \
      std::printf("\n");                                              \
    }                                                                 \
  } while (0)

constexpr int64_t kCols = 256, kGroups = 4, kGroupCols = 64;
constexpr float kEps = 1e-5f, kScale = 0.5f;

std::vector<float> random_floats(size_t n, unsigned seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// Tensors: 0 x [batch,256] in; 1 gamma, 2 beta, 3 bias [256] weights; 4 ln [batch,256];
// 5 v [batch,4,64] (view of 4); 6 sm [batch,4,64]; 7 flat [batch,256] (view of 6); 8 y out.
std::string build_artifact(std::vector<float>& w_host, int sm) {
  Plan p;
  p.symbols = {{"batch", 1, 64}};
  auto b = DimExpr::parse("batch");
  p.tensors = {{"x", DType::f32, {b, kCols}, TensorKind::input, 0, 0},
               {"gamma", DType::f32, {kCols}, TensorKind::weight, 0, kCols * 4},
               {"beta", DType::f32, {kCols}, TensorKind::weight, 1024, kCols * 4},
               {"bias", DType::f32, {kCols}, TensorKind::weight, 2048, kCols * 4},
               {"ln", DType::f32, {b, kCols}, TensorKind::activation, 0, 0},
               {"v", DType::f32, {b, kGroups, kGroupCols}, TensorKind::activation, 0, 0},
               {"sm", DType::f32, {b, kGroups, kGroupCols}, TensorKind::activation, 0, 0},
               {"flat", DType::f32, {b, kCols}, TensorKind::activation, 0, 0},
               {"y", DType::f32, {b, kCols}, TensorKind::output, 0, 0}};
  p.inputs = {0};
  p.outputs = {8};
  using sabre::json::Object;
  using sabre::json::Value;
  sabre::native::ElementwiseChain c;
  c.inputs = {DType::f32, DType::f32, DType::f32};
  int s0 = c.binary(sabre::native::EwOp::mul, c.input(0), c.constant(3.f));
  int s1 = c.binary(sabre::native::EwOp::add, s0, c.input(1));
  c.outputs = {c.binary(sabre::native::EwOp::sub, s1, c.input(2))};  // y = 3*softmax + bias - x
  p.steps = {make_step("layernorm", "/ln", {0, 1, 2}, {4}, Value(Object{{"eps", Value(static_cast<double>(kEps))}})),
             make_step("reshape", "/to_groups", {4}, {5}),
             make_step("softmax", "/softmax", {5}, {6}, Value(Object{{"scale", Value(static_cast<double>(kScale))}})),
             make_step("reshape", "/flatten", {6}, {7}),
             make_step("elementwise", "/tail", {7, 3, 0}, {8}, Value(Object{{"chain", chain_to_json(c)}}))};
  w_host = random_floats(3 * 256, 11, -1.f, 1.f);
  std::vector<uint8_t> weights(3 * 1024);
  std::memcpy(weights.data(), w_host.data(), weights.size());
  ManifestInfo m;
  m.sm = sm;
  m.arch = "sm_" + std::to_string(sm);
  std::string dir = (fs::temp_directory_path() / ("sabre_rt_gpu_" + std::to_string(::getpid()) + "_" + std::to_string(sm))).string();
  fs::remove_all(dir);
  write_artifact(dir, p, weights, {}, m);
  return dir;
}

std::vector<float> host_reference(const std::vector<float>& x, const std::vector<float>& w, int64_t batch) {
  const float* gamma = w.data();
  const float* beta = w.data() + 256;
  const float* bias = w.data() + 512;
  std::vector<float> y(x.size());
  for (int64_t r = 0; r < batch; ++r) {
    const float* xr = &x[static_cast<size_t>(r * kCols)];
    double mean = 0, var = 0;
    for (int64_t i = 0; i < kCols; ++i) mean += xr[i];
    mean /= kCols;
    for (int64_t i = 0; i < kCols; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= kCols;
    std::vector<double> ln(kCols);
    for (int64_t i = 0; i < kCols; ++i) ln[i] = (xr[i] - mean) / std::sqrt(var + kEps) * gamma[i] + beta[i];
    for (int64_t g = 0; g < kGroups; ++g) {
      double mx = -1e30, sum = 0;
      for (int64_t i = 0; i < kGroupCols; ++i) mx = std::max(mx, kScale * ln[g * kGroupCols + i]);
      for (int64_t i = 0; i < kGroupCols; ++i) sum += std::exp(kScale * ln[g * kGroupCols + i] - mx);
      for (int64_t i = 0; i < kGroupCols; ++i) {
        int64_t j = g * kGroupCols + i;
        double smv = std::exp(kScale * ln[j] - mx) / sum;
        y[static_cast<size_t>(r * kCols + j)] = static_cast<float>(3 * smv + bias[j] - xr[j]);
      }
    }
  }
  return y;
}

// A CUDA call the test makes itself (not the runtime under test): a failure counts and is said.
#define CUDA_OK(call) CHECK((call) == cudaSuccess, "%s", cudaGetErrorString(cudaGetLastError()))

struct DeviceBuf {
  void* p = nullptr;
  explicit DeviceBuf(size_t n) { CUDA_OK(cudaMalloc(&p, n)); }
  ~DeviceBuf() { CUDA_OK(cudaFree(p)); }
};

// One run at `batch`: random x, poisoned y, compare. Returns max abs error.
double run_once(sabre::ExecutionContext& ctx, const std::vector<float>& w, int64_t batch, unsigned seed, bool* replayed = nullptr) {
  auto x = random_floats(static_cast<size_t>(batch * kCols), seed, -2.f, 2.f);
  DeviceBuf dx(x.size() * 4), dy(x.size() * 4);
  CUDA_OK(cudaMemcpy(dx.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dy.p, 0xff, x.size() * 4));  // NaN poison
  int64_t shape[2] = {batch, kCols};
  sabre_tensor in{"x", dx.p, SABRE_DEVICE_CUDA, 0, {SABRE_DTYPE_FLOAT, 32, 1}, 2, shape, nullptr};
  sabre_tensor out{"y", dy.p, SABRE_DEVICE_CUDA, 0, {SABRE_DTYPE_FLOAT, 32, 1}, 2, shape, nullptr};
  std::vector<sabre_tensor> outs = {out};
  ctx.run({in}, outs);
  if (replayed) *replayed = ctx.last_stats().graph_replayed;
  std::vector<float> y(x.size());
  CUDA_OK(cudaMemcpy(y.data(), dy.p, y.size() * 4, cudaMemcpyDeviceToHost));
  auto ref = host_reference(x, w, batch);
  double err = 0;
  for (size_t i = 0; i < y.size(); ++i) err = std::isfinite(y[i]) ? std::max(err, std::fabs(double(y[i]) - ref[i])) : 1e30;
  return err;
}

// Inputs written on the legacy default stream are complete when a run on the context's own stream
// reads them: the copy waits behind a host function that sleeps, so a run that did not wait for the
// legacy stream would read the NaN poison left in the input buffer. Capture, then replay.
void sleep_ms(void* ms) { std::this_thread::sleep_for(std::chrono::milliseconds(reinterpret_cast<intptr_t>(ms))); }

void check_inputs_from_legacy_stream(sabre::ExecutionContext& ctx, const std::vector<float>& w) {
  const int64_t batch = 5;
  const size_t n = static_cast<size_t>(batch * kCols);
  DeviceBuf dx(n * 4), dy(n * 4);
  float* pinned = nullptr;
  CUDA_OK(cudaMallocHost(reinterpret_cast<void**>(&pinned), n * 4));
  int64_t shape[2] = {batch, kCols};
  for (int rep = 0; rep < 2; ++rep) {
    auto x = random_floats(n, 700 + static_cast<unsigned>(rep), -2.f, 2.f);
    std::memcpy(pinned, x.data(), n * 4);
    CUDA_OK(cudaMemset(dx.p, 0xff, n * 4));  // NaN poison in the input and the output
    CUDA_OK(cudaMemset(dy.p, 0xff, n * 4));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaLaunchHostFunc(cudaStreamLegacy, sleep_ms, reinterpret_cast<void*>(intptr_t{200})));
    CUDA_OK(cudaMemcpyAsync(dx.p, pinned, n * 4, cudaMemcpyHostToDevice, cudaStreamLegacy));
    std::vector<sabre_tensor> outs = {{"y", dy.p, SABRE_DEVICE_CUDA, 0, {SABRE_DTYPE_FLOAT, 32, 1}, 2, shape, nullptr}};
    ctx.run({{"x", dx.p, SABRE_DEVICE_CUDA, 0, {SABRE_DTYPE_FLOAT, 32, 1}, 2, shape, nullptr}}, outs);
    std::vector<float> y(n);
    CUDA_OK(cudaMemcpy(y.data(), dy.p, n * 4, cudaMemcpyDeviceToHost));
    const auto ref = host_reference(x, w, batch);
    double e = 0;
    for (size_t i = 0; i < n; ++i) e = std::isfinite(y[i]) ? std::max(e, std::fabs(double(y[i]) - ref[i])) : 1e30;
    CHECK(e < 2e-4, "input copied on the legacy stream, run %d (replayed=%d): max abs error %g", rep,
          ctx.last_stats().graph_replayed, e);
  }
  CUDA_OK(cudaFreeHost(pinned));
}

double half_bits_to_double(uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double v = e == 0 ? std::ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(1024 + m, e - 25);
  return h & 0x8000 ? -v : v;
}

// The step that starts a conv region (nchw_to_nhwc): f32 images [batch,3,5,7] in, f16 NHWC with
// 8 channels out (the cast fused, 5 zero channels), at two batch sizes through a captured graph.
void check_nchw_to_nhwc_step(int sm) {
  Plan p;
  p.symbols = {{"batch", 1, 8}};
  auto b = DimExpr::parse("batch");
  p.tensors = {{"images", DType::f32, {b, 3, 5, 7}, TensorKind::input, 0, 0},
               {"images.nhwc_c8", DType::f16, {b, 5, 7, 8}, TensorKind::output, 0, 0}};
  p.inputs = {0};
  p.outputs = {1};
  p.steps = {make_step("nchw_to_nhwc", "images (to NHWC, cast f32 -> f16, channels padded 3 -> 8)", {0}, {1})};
  ManifestInfo m;
  m.sm = sm;
  m.arch = "sm_" + std::to_string(sm);
  std::string dir = (fs::temp_directory_path() / ("sabre_rt_gpu_nhwc_" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  write_artifact(dir, p, {}, {}, m);
  sabre::Session session(dir);
  sabre::ExecutionContext ctx(session);
  for (int64_t batch : {3, 8}) {
    const size_t pixels = static_cast<size_t>(batch * 5 * 7);
    auto x = random_floats(pixels * 3, 40 + static_cast<unsigned>(batch), -2.f, 2.f);
    DeviceBuf dx(x.size() * 4), dy(pixels * 8 * 2);
    CUDA_OK(cudaMemcpy(dx.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(dy.p, 0xff, pixels * 8 * 2));  // NaN poison
    int64_t xs[4] = {batch, 3, 5, 7}, ys[4] = {batch, 5, 7, 8};
    std::vector<sabre_tensor> outs = {{"images.nhwc_c8", dy.p, SABRE_DEVICE_CUDA, 0, {SABRE_DTYPE_FLOAT, 16, 1}, 4, ys, nullptr}};
    ctx.run({{"images", dx.p, SABRE_DEVICE_CUDA, 0, {SABRE_DTYPE_FLOAT, 32, 1}, 4, xs, nullptr}}, outs);
    std::vector<uint16_t> y(pixels * 8);
    CUDA_OK(cudaMemcpy(y.data(), dy.p, y.size() * 2, cudaMemcpyDeviceToHost));
    // Rounding to f16 moves a value by at most half a unit in the last place (2^-11 relative, 2^-25
    // among subnormals); the padding channels must be +0 exactly.
    int bad = 0;
    for (size_t px = 0; px < pixels; ++px)
      for (size_t c = 0; c < 8; ++c) {
        const uint16_t got = y[px * 8 + c];
        if (c >= 3) {
          bad += got != 0;
          continue;
        }
        const double want = x[(px / 35 * 3 + c) * 35 + px % 35];
        bad += !(std::fabs(half_bits_to_double(got) - want) <= std::max(std::fabs(want) * 0x1p-11, 0x1p-25));
      }
    CHECK(bad == 0, "nchw_to_nhwc step at batch %lld: %d of %zu elements differ from cast-then-transpose", (long long)batch,
          bad, y.size());
  }
}

std::string error_of(sabre::ExecutionContext& ctx, std::vector<sabre_tensor> ins, sabre_rt_status* code) {
  std::vector<sabre_tensor> outs;
  try {
    ctx.run(ins, outs);
  } catch (const sabre::Error& e) {
    *code = e.code;
    return e.what();
  }
  *code = SABRE_SUCCESS;
  return "no error";
}


// ---- --every-device: one artifact on every GPU at once (issue 35) ----------------------------
// The same artifact loaded on devices 0..N-1 from one process (a thread per device) and from one
// process per device, all at once: each runs several random inputs through captured and replayed
// CUDA graphs into poisoned outputs, and through the C API with host tensors (the staging path),
// and compares with host_reference. A process whose sessions are on device d > 0 must never have
// touched device 0: its primary context there stays inactive. Returns failures as text lines.
std::string run_on_device(const std::string& dir, const std::vector<float>& w, int device, int reps, unsigned seed0) {
  std::string fails;
  auto fail = [&](const std::string& what) { fails += "device " + std::to_string(device) + ": " + what + "\n"; };
  const sabre::gpu_test::Bound tol{2e-4, 0, std::numeric_limits<double>::infinity()};
  try {
    sabre::Session session(dir, device);
    sabre::ExecutionContext ctx(session);
    if (cudaSetDevice(device) != cudaSuccess) return fail("cudaSetDevice"), fails;  // the test's own buffers
    for (int64_t batch : {4, 16}) {
      const size_t n = size_t(batch * kCols);
      void *dx = nullptr, *dy = nullptr;
      if (cudaMalloc(&dx, n * 4) != cudaSuccess || cudaMalloc(&dy, n * 4) != cudaSuccess) return fail("cudaMalloc"), fails;
      int64_t shape[2] = {batch, kCols};
      for (int rep = 0; rep < reps; ++rep) {
        auto x = random_floats(n, seed0 + unsigned(rep * 31 + batch), -2.f, 2.f);
        std::vector<float> y(n);
        if (cudaMemcpy(dx, x.data(), n * 4, cudaMemcpyHostToDevice) != cudaSuccess ||
            cudaMemset(dy, 0xff, n * 4) != cudaSuccess)  // NaN poison
          return fail("copying the input"), fails;
        std::vector<sabre_tensor> outs = {{"y", dy, SABRE_DEVICE_CUDA, device, {SABRE_DTYPE_FLOAT, 32, 1}, 2, shape, nullptr}};
        ctx.run({{"x", dx, SABRE_DEVICE_CUDA, device, {SABRE_DTYPE_FLOAT, 32, 1}, 2, shape, nullptr}}, outs);
        if (ctx.last_stats().graph_replayed != (rep > 0))
          fail("batch " + std::to_string(batch) + " run " + std::to_string(rep) + ": graph_replayed " +
               std::to_string(ctx.last_stats().graph_replayed));
        if (cudaMemcpy(y.data(), dy, n * 4, cudaMemcpyDeviceToHost) != cudaSuccess) return fail("copying the output"), fails;
        const auto c = sabre::gpu_test::compare(y, host_reference(x, w, batch), tol);
        if (!c.ok()) fail("batch " + std::to_string(batch) + " run " + std::to_string(rep) + ": " + c.summary());
      }
      if (cudaFree(dx) != cudaSuccess || cudaFree(dy) != cudaSuccess) fail("cudaFree");
    }
  } catch (const std::exception& e) {
    fail(std::string("C++ API: ") + e.what());
  }
  sabre_session* cs = nullptr;
  sabre_context* cc = nullptr;
  if (sabre_session_load(dir.c_str(), device, &cs) != SABRE_SUCCESS || sabre_context_create(cs, nullptr, &cc) != SABRE_SUCCESS) {
    fail(std::string("C API: ") + sabre_last_error());
  } else {
    int64_t shape[2] = {4, kCols};
    for (int rep = 0; rep < reps; ++rep) {
      auto x = random_floats(4 * kCols, seed0 + 1000 + unsigned(rep), -1.f, 1.f);
      std::vector<float> y(x.size(), std::numeric_limits<float>::quiet_NaN());
      DLTensor hx{}, hy{};
      hx.data = x.data();
      hx.device = {kDLCPU, 0};
      hx.ndim = 2;
      hx.dtype = {kDLFloat, 32, 1};
      hx.shape = shape;
      hy = hx;
      hy.data = y.data();
      if (sabre_run(cc, &hx, 1, &hy, 1, 0) != SABRE_SUCCESS) {
        fail(std::string("C API run: ") + sabre_last_error());
        break;
      }
      const auto c = sabre::gpu_test::compare(y, host_reference(x, w, 4), tol);
      if (!c.ok()) fail("C API, host tensors, run " + std::to_string(rep) + ": " + c.summary());
    }
  }
  sabre_context_free(cc);
  sabre_session_free(cs);
  return fails;
}

// Whether this process has a primary context on device 0 (the driver's view: cudart cannot ask).
// The driver library is opened here rather than linked, so the binary still starts (and skips) on a
// machine without a GPU driver.
bool touched_device0() {
  using GetFn = CUresult (*)(CUdevice*, int);
  using StateFn = CUresult (*)(CUdevice, unsigned*, int*);
  static void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  auto get = lib ? reinterpret_cast<GetFn>(dlsym(lib, "cuDeviceGet")) : nullptr;
  auto state = lib ? reinterpret_cast<StateFn>(dlsym(lib, "cuDevicePrimaryCtxGetState")) : nullptr;
  if (!get || !state) return true;
  CUdevice d0 = 0;
  unsigned flags = 0;
  int active = 0;
  if (get(&d0, 0) != CUDA_SUCCESS || state(d0, &flags, &active) != CUDA_SUCCESS) return true;
  return active != 0;
}

// A child process: sessions on one device; exit 0 when every output matched and, for d > 0,
// device 0 was never touched.
int every_device_child(int device, const std::string& dir, unsigned seed0) {
  std::vector<float> w = random_floats(3 * 256, 11, -1.f, 1.f);  // build_artifact's weights
  std::string fails = run_on_device(dir, w, device, 4, seed0);
  if (device > 0 && touched_device0()) fails += "device " + std::to_string(device) + ": a context was made on device 0\n";
  std::fputs(fails.c_str(), stdout);
  return fails.empty() ? 0 : 1;
}

int every_device(const char* self) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("no GPU: skipped\n");
    return 77;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return std::printf("FAIL cudaGetDeviceProperties\n"), 1;
  const int sm = prop.major * 10 + prop.minor;
  std::vector<float> w;
  const std::string dir = build_artifact(w, sm);
  std::vector<int> devices;
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, d) == cudaSuccess && p.major * 10 + p.minor == sm) devices.push_back(d);
    else std::printf("GPU %d is not sm%d like GPU 0: left out\n", d, sm);
  }
  // One process per device, started first so they run beside the threads below.
  std::vector<std::pair<int, pid_t>> children;
  for (int d : devices) {
    pid_t pid = fork();
    if (pid == 0) {  // exec at once: no CUDA state crosses the fork
      const std::string dev = std::to_string(d), seed = std::to_string(7000 + 100 * d);
      execl(self, self, "--device-child", dev.c_str(), dir.c_str(), seed.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    children.push_back({d, pid});
  }
  std::vector<std::string> fails(devices.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < devices.size(); ++i)
    threads.emplace_back([&, i] { fails[i] = run_on_device(dir, w, devices[i], 4, 3000 + 100 * unsigned(devices[i])); });
  for (auto& t : threads) t.join();
  int failures = 0;
  for (const std::string& f : fails)
    if (!f.empty()) ++failures, std::printf("FAIL (threads) %s", f.c_str());
  // One thread serving every device in turn (a thread pool in front of several GPUs): whatever the
  // runtime keeps per thread must follow the device.
  for (int round = 0; round < 2; ++round)
    for (int d : devices)
      if (std::string f = run_on_device(dir, w, d, 2, 9000 + 100 * unsigned(d) + unsigned(round)); !f.empty())
        ++failures, std::printf("FAIL (one thread, every device) %s", f.c_str());
  for (const auto& [d, pid] : children) {
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
      ++failures, std::printf("FAIL (process on device %d): exit %d\n", d, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  }
  std::printf("%s: one artifact on %zu device(s) (%s), a thread and a process each, at once: %d failure(s)\n",
              failures ? "FAILED" : "PASSED", devices.size(), prop.name, failures);
  fs::remove_all(dir);
  if (failures) return 1;
  if (devices.size() < 2) {
    std::printf("skipped: this machine has %zu GPU(s) of one model; sessions on devices 1..N need at least 2 "
                "(the one-device case above passed)\n", devices.size());
    return 77;
  }
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--every-device") return every_device("/proc/self/exe");
  if (argc == 5 && std::string(argv[1]) == "--device-child")
    return every_device_child(std::atoi(argv[2]), argv[3], unsigned(std::atoi(argv[4])));
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("no GPU: skipped\n");
    return 77;
  }
  cudaDeviceProp prop{};
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  int sm = prop.major * 10 + prop.minor;
  std::vector<float> w;
  std::string dir = build_artifact(w, sm);
  const double tol = 2e-4;

  sabre::Session session(dir);
  CHECK(session.inputs().size() == 1 && session.inputs()[0].name == "x", "inputs");
  sabre::ExecutionContext ctx(session);
  bool replayed = true;
  double e1 = run_once(ctx, w, 8, 1, &replayed);
  CHECK(e1 < tol, "batch 8 max abs error %g", e1);
  CHECK(!replayed, "first run at a shape must capture");
  double e2 = run_once(ctx, w, 8, 2, &replayed);
  CHECK(e2 < tol, "batch 8 replay max abs error %g", e2);
  std::printf("batch 8: error %.3g (capture), %.3g (second run, replayed=%d); peak activations %llu bytes (%llu without reuse)\n",
              e1, e2, replayed, (unsigned long long)ctx.last_stats().peak_activation_bytes,
              (unsigned long long)ctx.last_stats().activation_bytes_without_reuse);
  {
    // Same shape and the same buffers: the second run must replay the captured graph and still
    // read the new input values (a graph captures pointers, not data).
    const int64_t batch = 6;
    DeviceBuf dx(batch * kCols * 4), dy(batch * kCols * 4);
    int64_t shape[2] = {batch, kCols};
    for (int rep = 0; rep < 3; ++rep) {
      auto x = random_floats(static_cast<size_t>(batch * kCols), 500 + rep, -2.f, 2.f);
      CUDA_OK(cudaMemcpy(dx.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemset(dy.p, 0xff, x.size() * 4));
      std::vector<sabre_tensor> outs = {{"y", dy.p, SABRE_DEVICE_CUDA, 0, {SABRE_DTYPE_FLOAT, 32, 1}, 2, shape, nullptr}};
      ctx.run({{"x", dx.p, SABRE_DEVICE_CUDA, 0, {SABRE_DTYPE_FLOAT, 32, 1}, 2, shape, nullptr}}, outs);
      CHECK(ctx.last_stats().graph_replayed == (rep > 0), "rep %d replayed=%d", rep, ctx.last_stats().graph_replayed);
      std::vector<float> y(x.size());
      CUDA_OK(cudaMemcpy(y.data(), dy.p, y.size() * 4, cudaMemcpyDeviceToHost));
      auto ref = host_reference(x, w, batch);
      double e = 0;
      for (size_t i = 0; i < y.size(); ++i) e = std::isfinite(y[i]) ? std::max(e, std::fabs(double(y[i]) - ref[i])) : 1e30;
      CHECK(e < tol, "replay rep %d error %g", rep, e);
    }
  }
  check_inputs_from_legacy_stream(ctx, w);
  for (int64_t batch : {1, 3, 64}) {
    double e = run_once(ctx, w, batch, 10 + static_cast<unsigned>(batch));
    CHECK(e < tol, "batch %lld max abs error %g", (long long)batch, e);
  }
  // Four activations, two of them reshape views: two buffers of batch*256 floats (batch 64 last).
  CHECK(ctx.last_stats().activation_bytes_without_reuse == 2u * 64 * 256 * 4, "sum %llu",
        (unsigned long long)ctx.last_stats().activation_bytes_without_reuse);
  CHECK(ctx.last_stats().peak_activation_bytes == 2u * 64 * 256 * 4, "peak %llu",
        (unsigned long long)ctx.last_stats().peak_activation_bytes);
  sabre::ExecutionContext plain(session, nullptr, /*use_graphs=*/false);
  CHECK(run_once(plain, w, 5, 5) < tol, "without graphs");
  {
    // ExecutionContext::profile (sabre bench --profile): one positive time per plan step, in plan
    // order, and the profiled runs compute the model (poisoned output checked afterwards).
    const int64_t batch = 16;
    auto x = random_floats(static_cast<size_t>(batch * kCols), 900, -2.f, 2.f);
    DeviceBuf dx(x.size() * 4), dy(x.size() * 4);
    CUDA_OK(cudaMemcpy(dx.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(dy.p, 0xff, x.size() * 4));
    int64_t shape[2] = {batch, kCols};
    std::vector<sabre_tensor> outs = {{"y", dy.p, SABRE_DEVICE_CUDA, 0, {SABRE_DTYPE_FLOAT, 32, 1}, 2, shape, nullptr}};
    std::vector<sabre::StepTime> prof =
        ctx.profile({{"x", dx.p, SABRE_DEVICE_CUDA, 0, {SABRE_DTYPE_FLOAT, 32, 1}, 2, shape, nullptr}}, outs, 5);
    CHECK(prof.size() == 5, "profile: %zu steps, the plan has 5", prof.size());
    for (size_t i = 0; i < prof.size(); ++i) {
      CHECK(prof[i].index == i && !prof[i].op.empty(), "profile step %zu: index %zu op '%s'", i, prof[i].index, prof[i].op.c_str());
      // A reshape is a view: nothing runs between its events, so it may read 0.
      const bool runs = prof[i].op != "reshape";
      CHECK((runs ? prof[i].us > 0 : prof[i].us >= 0) && prof[i].us < 1e5, "profile step %zu (%s): %g us", i,
            prof[i].op.c_str(), prof[i].us);
    }
    // What the trace shows (sabre bench --profile): each repeat's time, the shapes and bytes at batch 16.
    for (const auto& t : prof)
      CHECK(t.runs_us.size() == 5 && t.flops == 0, "profile step %zu: %zu run times, %g flops", t.index, t.runs_us.size(),
            t.flops);
    CHECK(prof[0].input_shapes.size() == 3 && prof[0].input_shapes[0] == std::vector<int64_t>({batch, kCols}) &&
              prof[0].output_shapes.size() == 1 && prof[0].bytes == uint64_t(2 * batch * kCols * 4 + 2 * kCols * 4),
          "layernorm step: %zu inputs, %llu bytes", prof[0].input_shapes.size(), (unsigned long long)prof[0].bytes);
    CHECK(prof[2].input_shapes[0] == std::vector<int64_t>({batch, kGroups, kGroupCols}), "softmax input shape");
    sabre::runtime::ProfileRecord rec{"runtime_session", "", {{"b", batch}}, prof};
    size_t events = 0;
    // Held in a variable: a range-for over a member of the returned temporary would read it after its end.
    const auto trace = sabre::runtime::chrome_trace(rec);
    for (const auto& e : trace["traceEvents"]) events += e["ph"] == "X" && e["cat"] != "run";
    CHECK(events == 25, "trace: %zu step events, expected 5 steps x 5 runs", events);
    std::vector<float> y(x.size());
    CUDA_OK(cudaMemcpy(y.data(), dy.p, y.size() * 4, cudaMemcpyDeviceToHost));
    auto ref = host_reference(x, w, batch);
    double e = 0;
    for (size_t i = 0; i < y.size(); ++i) e = std::isfinite(y[i]) ? std::max(e, std::fabs(double(y[i]) - ref[i])) : 1e30;
    CHECK(e < tol, "after profile: error %g", e);
    std::printf("profile: %zu steps,", prof.size());
    for (const auto& t : prof) std::printf(" %s %.1f us", t.op.c_str(), t.us);
    std::printf("\n");
  }

  // Error cases: each leaves the context usable.
  DeviceBuf dx(64 * 256 * 4);
  int64_t good[2] = {4, kCols}, wrong_cols[2] = {4, 100}, too_big[2] = {65, kCols};
  int64_t rank3[3] = {4, kCols, 1};
  sabre_tensor base{"x", dx.p, SABRE_DEVICE_CUDA, 0, {SABRE_DTYPE_FLOAT, 32, 1}, 2, good, nullptr};
  struct Case {
    const char* what;
    sabre_tensor t;
    const char* expect;
  };
  std::vector<Case> cases;
  sabre_tensor t = base;
  t.name = "input_ids";
  cases.push_back({"unknown name", t, "unknown input 'input_ids'; the model's inputs are: x"});
  t = base;
  t.dtype = {SABRE_DTYPE_FLOAT, 16, 1};
  cases.push_back({"wrong dtype", t, "input 'x' is float16 but the model expects float32"});
  t = base;
  t.shape = wrong_cols;
  cases.push_back({"wrong shape", t, "must be 256"});
  t = base;
  t.ndim = 3;
  t.shape = rank3;
  cases.push_back({"wrong rank", t, "has rank 3"});
  t = base;
  t.shape = too_big;
  cases.push_back({"dim out of range", t, "batch=65 is outside the compiled range 1..64"});
  t = base;
  t.device_type = SABRE_DEVICE_CPU;
  cases.push_back({"host memory", t, "is not in CUDA device memory"});
  for (const auto& c : cases) {
    sabre_rt_status code;
    std::string msg = error_of(ctx, {c.t}, &code);
    CHECK(code == SABRE_ERR_INVALID_ARGUMENT, "%s: code %d (%s)", c.what, code, msg.c_str());
    CHECK(msg.find(c.expect) != std::string::npos, "%s: message '%s'", c.what, msg.c_str());
    double e = run_once(ctx, w, 8, 100);
    CHECK(e < tol, "after %s the context gives error %g", c.what, e);
  }
  {
    sabre_rt_status code;
    std::string msg = error_of(ctx, {}, &code);
    CHECK(msg.find("missing input 'x'") != std::string::npos, "missing: %s", msg.c_str());
  }

  // Many contexts on many threads.
  std::vector<std::thread> threads;
  std::vector<double> errs(4, 1e30);
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      sabre::ExecutionContext c(session);
      double worst = 0;
      for (int it = 0; it < 20; ++it) worst = std::max(worst, run_once(c, w, 1 + (it * 7 + i) % 64, 1000 + i * 100 + it));
      errs[static_cast<size_t>(i)] = worst;
    });
  for (auto& th : threads) th.join();
  for (int i = 0; i < 4; ++i) CHECK(errs[static_cast<size_t>(i)] < tol, "thread %d error %g", i, errs[static_cast<size_t>(i)]);

  // The C API (DLTensor in model order), with a context-owned output. The first run makes the
  // buffer; it is poisoned, and a second run at the same shape (the context keeps its buffer) must
  // write every element of it.
  sabre_session* cs = nullptr;
  CHECK(sabre_session_load(dir.c_str(), 0, &cs) == SABRE_SUCCESS, "%s", sabre_last_error());
  CHECK(sabre_session_num_inputs(cs) == 1 && std::string(sabre_session_input_name(cs, 0)) == "x", "C API input list");
  CHECK(sabre_session_input_index(cs, "x") == 0 && sabre_session_input_index(cs, "nope") == -1, "C API input index");
  CHECK(sabre_session_input_ndim(cs, 0) == 2 && sabre_session_input_dtype(cs, 0).code == kDLFloat &&
            sabre_session_input_dtype(cs, 0).bits == 32,
        "C API input dtype and rank");
  sabre_context* cc = nullptr;
  CHECK(sabre_context_create(cs, nullptr, &cc) == SABRE_SUCCESS, "%s", sabre_last_error());
  const sabre::gpu_test::Bound within_tol{tol, 0, std::numeric_limits<double>::infinity()};
  DLTensor dl_x{};
  dl_x.data = dx.p;
  dl_x.device = {kDLCUDA, 0};
  dl_x.ndim = 2;
  dl_x.dtype = {kDLFloat, 32, 1};
  dl_x.shape = good;
  void* owned = nullptr;
  for (unsigned seed : {77u, 78u}) {
    auto x = random_floats(4 * kCols, seed, -1.f, 1.f);
    CUDA_OK(cudaMemcpy(dx.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
    if (owned) CUDA_OK(cudaMemset(owned, 0xff, x.size() * 4));  // NaN poison
    DLTensor out{};
    out.device = {kDLCUDA, 0};
    CHECK(sabre_run(cc, &dl_x, 1, &out, 1, 1) == SABRE_SUCCESS, "%s", sabre_last_error());
    CHECK(out.data && out.ndim == 2 && out.shape[0] == 4 && out.shape[1] == kCols, "owned output descriptor");
    if (!out.data) break;
    CHECK(!owned || out.data == owned, "the owned output moved between two runs of one shape: the poison check needs it kept");
    owned = out.data;
    std::vector<float> y(x.size());
    CUDA_OK(cudaMemcpy(y.data(), out.data, y.size() * 4, cudaMemcpyDeviceToHost));
    const sabre::gpu_test::Comparison c = sabre::gpu_test::compare(y, host_reference(x, w, 4), within_tol);
    CHECK(c.ok(), "C API, owned output, seed %u: %s", seed, c.summary().c_str());
  }
  // Host tensors: the input staged to the device, the output into a poisoned host buffer.
  {
    auto x = random_floats(4 * kCols, 79, -1.f, 1.f);
    std::vector<float> y(x.size(), std::numeric_limits<float>::quiet_NaN());
    DLTensor hx = dl_x, hy{};
    hx.data = x.data();
    hx.device = {kDLCPU, 0};
    hy.data = y.data();
    hy.device = {kDLCPU, 0};
    hy.ndim = 2;
    hy.dtype = {kDLFloat, 32, 1};
    hy.shape = good;
    CHECK(sabre_run(cc, &hx, 1, &hy, 1, 0) == SABRE_SUCCESS, "host tensors: %s", sabre_last_error());
    const sabre::gpu_test::Comparison c = sabre::gpu_test::compare(y, host_reference(x, w, 4), within_tol);
    CHECK(c.ok(), "C API, host input and output: %s", c.summary().c_str());
    DLTensor hz{};
    hz.device = {kDLCPU, 0};  // a host buffer the context supplies
    CHECK(sabre_run(cc, &hx, 1, &hz, 1, 1) == SABRE_SUCCESS, "host output: %s", sabre_last_error());
    CHECK(hz.data && hz.ndim == 2 && hz.shape[1] == kCols &&
              std::memcmp(hz.data, y.data(), y.size() * 4) == 0,
          "C API, context-owned host output");
  }
  CHECK(sabre_run(cc, &dl_x, 2, nullptr, 0, 1) == SABRE_ERR_INVALID_ARGUMENT, "C API wrong input count");
  CHECK(std::string(sabre_last_error()).find("got 2 inputs but the model takes 1") != std::string::npos, "%s",
        sabre_last_error());
  DLTensor bad = dl_x;
  bad.dtype = {kDLFloat, 16, 1};
  CHECK(sabre_run(cc, &bad, 1, nullptr, 0, 1) == SABRE_ERR_INVALID_ARGUMENT, "C API wrong dtype");
  CHECK(std::string(sabre_last_error()).find("input 'x' is float16") != std::string::npos, "%s", sabre_last_error());
  sabre_context_free(cc);
  sabre_session_free(cs);

  check_nchw_to_nhwc_step(sm);

  // The wrong arch: an artifact for another sm.
  std::vector<float> w2;
  std::string other = build_artifact(w2, sm == 80 ? 90 : 80);
  try {
    sabre::Session s2(other);
    CHECK(false, "loaded an artifact for another arch");
  } catch (const sabre::Error& e) {
    CHECK(e.code == SABRE_ERR_WRONG_ARCH, "wrong arch code %d: %s", e.code, e.what());
  }

  std::printf("%s: %d failure(s)\n", g_failures ? "FAILED" : "PASSED", g_failures);
  return g_failures ? 1 : 0;
}
