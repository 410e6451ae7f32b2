// The GPU side of the profiler: probing the device and timing one candidate in a child process.
// Built with the CUDA toolkit only (SABRE_TUNE_HAVE_CUDA); otherwise the stubs at the end say
// that this build cannot time. Never run by the CPU tests: the lead runs it through `sabre tune`
// and bench/gemm_tune_bench.cpp on the H200.
#include "tune/profiler.h"

#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "tune/watchdog.h"

#ifdef SABRE_TUNE_HAVE_CUDA
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "backends/cublaslt/cublaslt_gemm.h"
#include "ir/dtype.h"
#include "sabre/kernel_abi.h"
#include "tune/rank.h"
#endif

namespace sabre::tune {

namespace {

// Child -> parent payloads: "ok TIME_US REL_ERR" or "STATUS detail...".
Measurement parse_child(const ChildResult& r) {
  Measurement m;
  switch (r.outcome) {
    case ChildResult::Outcome::hung: m.status = Status::hung; m.detail = r.detail; return m;
    case ChildResult::Outcome::crashed: m.status = Status::crashed; m.detail = r.detail + " " + r.payload; return m;
    default: break;
  }
  std::istringstream in(r.payload);
  std::string word;
  in >> word;
  if (r.outcome == ChildResult::Outcome::ok && word == "ok") {
    in >> m.time_us >> m.rel_error;
    if (!in || !(m.time_us > 0)) {
      m.status = Status::crashed;
      m.detail = "unreadable child report: " + r.payload;
    }
    return m;
  }
  auto s = parse_status(word);
  m.status = s && *s != Status::ok ? *s : Status::crashed;
  std::getline(in, m.detail);
  if (!m.detail.empty() && m.detail[0] == ' ') m.detail.erase(0, 1);
  return m;
}

}  // namespace

#ifdef SABRE_TUNE_HAVE_CUDA

namespace {

using namespace cutlass_backend;
namespace lt = cublaslt_backend;

constexpr double kL2Bytes = 60e6;   // H200: 60 MB L2 (H100: 50); rotate operands past it
constexpr int kRepeats = 7;
constexpr int64_t kCheckedRows = 16;

double tolerance(Elem e) { return e == Elem::f16 ? 5e-3 : e == Elem::bf16 ? 2e-2 : 1e-2; }

double act_ref(Act a, double x) {
  switch (a) {
    case Act::none: return x;
    case Act::relu: return x > 0 ? x : 0;
    case Act::gelu_erf: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Act::gelu_tanh: return 0.5 * x * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case Act::silu: return x / (1 + std::exp(-x));
    case Act::sigmoid: return 1 / (1 + std::exp(-x));
    case Act::hardswish: return x * std::min(std::max(x + 3, 0.0), 6.0) / 6;
    case Act::kCount: break;
  }
  return NAN;
}

// Deterministic pseudo-random values in [-1, 1), rounded to the dtype; fast enough for 100M elements.
struct HostData {
  std::vector<float> v;
  std::vector<uint8_t> bytes;
};
HostData make_data(Elem e, size_t count, uint64_t seed) {
  HostData d;
  d.v.resize(count);
  const size_t eb = size_t(elem_bytes(e));
  d.bytes.resize(count * eb);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < count; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    float x = float(int64_t(s >> 40) - (int64_t(1) << 23)) / float(1 << 23);
    if (e == Elem::f32) {
      std::memcpy(&d.bytes[i * 4], &x, 4);
    } else {
      uint16_t h = e == Elem::f16 ? ir::float_to_half(x) : ir::float_to_bf16(x);
      x = e == Elem::f16 ? ir::half_to_float(h) : ir::bf16_to_float(h);
      std::memcpy(&d.bytes[i * 2], &h, 2);
    }
    d.v[i] = x;
  }
  return d;
}

float to_float(Elem e, const uint8_t* p) {
  if (e == Elem::f32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return e == Elem::f16 ? ir::half_to_float(h) : ir::bf16_to_float(h);
}

struct DeviceBuffers {
  std::vector<void*> ptrs;
  ~DeviceBuffers() {
    for (void* p : ptrs) cudaFree(p);
  }
  void* alloc(size_t bytes) {
    void* p = nullptr;
    if (cudaMalloc(&p, std::max<size_t>(bytes, 16)) != cudaSuccess) throw std::runtime_error("cudaMalloc failed");
    ptrs.push_back(p);
    return p;
  }
};

// Runs in the child: check, then time. Returns false (with a "STATUS detail" report) for a
// candidate that cannot run or computes wrong results.
bool measure_in_child(const GemmProblem& p, int64_t m, const std::string& kernel, const std::string& library,
                      const std::function<void(const std::string&)>& report) {
  auto fail = [&](Status s, const std::string& why) {
    report(std::string(to_string(s)) + " " + why);
    return false;
  };
  if (cudaSetDevice(0) != cudaSuccess) return fail(Status::crashed, "no CUDA device");
  const GemmOperands ops = problem_operands(p);
  const EpilogueSpec epi = problem_epilogue(p);
  const Elem e = ops.ab;
  const size_t eb = size_t(elem_bytes(e));
  const int64_t n = p.n, k = p.k, batch = p.batch;
  const size_t na = size_t(m * k * batch), nb = size_t(n * k * batch), nd = size_t(m * n * batch);
  const bool has_res = epi.residual != Residual::none;
  const double set_bytes = double(na + nb + nd + (has_res ? nd : 0)) * double(eb);
  const int rotations = int(std::clamp(std::ceil(2 * kL2Bytes / set_bytes), 1.0, 64.0));

  HostData a = make_data(e, na, 1), b = make_data(e, nb, 2), bias = make_data(e, size_t(n), 3);
  HostData res = has_res ? make_data(e, nd, 4) : HostData{};
  DeviceBuffers mem;
  void* dbias = mem.alloc(size_t(n) * eb);
  cudaMemcpy(dbias, bias.bytes.data(), bias.bytes.size(), cudaMemcpyHostToDevice);
  std::vector<sabre_gemm_args> sets;
  for (int r = 0; r < rotations; ++r) {
    sabre_gemm_args g{};
    g.m = m, g.n = n, g.k = k, g.batch = batch;
    void* da = mem.alloc(na * eb);
    void* db = mem.alloc(nb * eb);
    void* dd = mem.alloc(nd * eb);
    void* dr = has_res ? mem.alloc(nd * eb) : nullptr;
    cudaMemcpy(da, a.bytes.data(), a.bytes.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(db, b.bytes.data(), b.bytes.size(), cudaMemcpyHostToDevice);
    if (dr) cudaMemcpy(dr, res.bytes.data(), res.bytes.size(), cudaMemcpyHostToDevice);
    cudaMemset(dd, 0xFF, nd * eb);  // poison: NaN in every float type
    g.a = da, g.b = db, g.d = dd, g.residual = dr, g.bias = epi.bias ? dbias : nullptr;
    g.lda = k;
    g.ldb = ops.layout == Layout::tn ? k : n;
    g.ldd = g.ldr = n;
    g.stride_a = m * k, g.stride_b = n * k, g.stride_d = g.stride_r = m * n;
    g.alpha = 1.0f;
    g.beta = has_res ? 1.0f : 0.0f;
    sets.push_back(g);
  }
  if (cudaGetLastError() != cudaSuccess) return fail(Status::crashed, "setting up the operands failed");

  cudaStream_t stream;
  cudaStreamCreate(&stream);
  std::function<int(const sabre_gemm_args&)> run;
  std::unique_ptr<lt::LtGemm> ltg;
  void* lib = nullptr;
  if (auto ltc = parse_lt_candidate(kernel)) {
    auto spec = lt::parse_lt_name(ltc->first);
    if (!spec) return fail(Status::cannot_implement, "not a cuBLASLt spec name: " + ltc->first);
    ltg = std::make_unique<lt::LtGemm>(*spec);
    int found = ltg->heuristics(sets[0], ltc->second + 1);
    if (found <= ltc->second)
      return fail(Status::cannot_implement, "cuBLASLt's heuristic returned " + std::to_string(found) + " algorithms " +
                                                ltg->last_error());
    const int algo = ltc->second;
    run = [&, algo](const sabre_gemm_args& g) { return ltg->run(g, stream, algo); };
  } else {
    lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) return fail(Status::crashed, std::string("dlopen: ") + dlerror());
    auto reg = reinterpret_cast<sabre_kernel_registry_fn>(dlsym(lib, SABRE_KERNEL_REGISTRY_SYMBOL));
    int count = 0, abi = 0;
    const sabre_kernel_entry* ent = reg ? reg(&count, &abi) : nullptr;
    if (!ent || count < 1 || abi != SABRE_KERNEL_ABI_VERSION)
      return fail(Status::crashed, "library has no usable kernel registry: " + library);
    if (ent->can_implement(&sets[0]) != SABRE_OK) return fail(Status::cannot_implement, ent->last_error());
    size_t ws = ent->workspace_size(&sets[0]);
    void* dws = ws ? mem.alloc(ws) : nullptr;
    for (auto& g : sets) g.workspace = dws, g.workspace_size = ws;
    run = [ent, &stream](const sabre_gemm_args& g) { return ent->run(&g, stream); };
  }

  // Correctness first: sampled rows against a double-precision host reference; every element
  // must have been written (the poison is NaN).
  if (int rc = run(sets[0]); rc != SABRE_OK) return fail(Status::crashed, "run returned " + std::to_string(rc));
  if (cudaStreamSynchronize(stream) != cudaSuccess)
    return fail(Status::crashed, std::string("kernel failed: ") + cudaGetErrorString(cudaGetLastError()));
  std::vector<uint8_t> out(nd * eb);
  cudaMemcpy(out.data(), sets[0].d, out.size(), cudaMemcpyDeviceToHost);
  for (size_t i = 0; i < nd; ++i)
    if (!std::isfinite(to_float(e, &out[i * eb])))
      return fail(Status::wrong_result, "element " + std::to_string(i) + " not finite (unwritten or overflow)");
  double err2 = 0, ref2 = 0;
  // Fewer sampled rows for huge N·K keep the host reference near 0.2 s (8192^3: 3 rows of 8192).
  const int64_t rows = std::clamp<int64_t>(int64_t(2e8 / double(n * k)), 2, kCheckedRows);
  std::vector<int64_t> batches = {0};
  if (batch > 1) batches.push_back(batch - 1);
  for (int64_t l : batches) {
    for (int64_t ri = 0; ri < std::min(m, rows); ++ri) {
      const int64_t row = m <= rows ? ri : (ri * 7919) % m;
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t kk = 0; kk < k; ++kk) {
          float bv = ops.layout == Layout::tn ? b.v[size_t(l * n * k + j * k + kk)] : b.v[size_t(l * n * k + kk * n + j)];
          acc += double(a.v[size_t(l * m * k + row * k + kk)]) * bv;
        }
        if (epi.bias) acc += bias.v[size_t(j)];
        const double r = has_res ? res.v[size_t(l * m * n + row * n + j)] : 0;
        if (epi.residual == Residual::before_act) acc += r;
        acc = act_ref(epi.act, acc);
        if (epi.residual == Residual::after_act) acc += r;
        const double got = to_float(e, &out[size_t(l * m * n + row * n + j) * eb]);
        err2 += (got - acc) * (got - acc);
        ref2 += acc * acc;
      }
    }
  }
  const double rel = std::sqrt(err2 / std::max(ref2, 1e-30));
  if (!(rel <= tolerance(e))) {
    std::ostringstream s;
    s << "relative L2 error " << rel << " above " << tolerance(e);
    return fail(Status::wrong_result, s.str());
  }

  // Timing: warm-up, then CUDA events around back-to-back launches over the rotated sets.
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  auto timed = [&](int iters) {
    cudaEventRecord(t0, stream);
    for (int i = 0; i < iters; ++i) run(sets[size_t(i % rotations)]);
    cudaEventRecord(t1, stream);
    cudaEventSynchronize(t1);
    float ms = 0;
    cudaEventElapsedTime(&ms, t0, t1);
    return double(ms) * 1000.0 / iters;
  };
  timed(std::max(3, rotations));  // warm-up: clocks, caches of the instruction side, lazy init
  const double one = timed(std::max(3, rotations));
  const int iters = int(std::clamp(std::ceil(2000.0 / std::max(one, 1.0)), double(std::max(3, rotations)), 500.0));
  std::vector<double> times;
  for (int r = 0; r < kRepeats; ++r) times.push_back(timed(iters));
  if (cudaStreamSynchronize(stream) != cudaSuccess || cudaGetLastError() != cudaSuccess)
    return fail(Status::crashed, "a timed launch failed");
  std::sort(times.begin(), times.end());
  std::ostringstream s;
  s << "ok " << times[times.size() / 2] << " " << rel;
  report(s.str());
  return true;
}

}  // namespace

bool have_gpu_support() { return true; }

bool probe_gpu(Environment& env, std::string& why) {
  ChildResult r = run_in_child(
      [](const std::function<void(const std::string&)>& report) {
        int count = 0;
        cudaError_t err = cudaGetDeviceCount(&count);
        if (err != cudaSuccess || count == 0) {
          report(err != cudaSuccess ? cudaGetErrorString(err) : "no CUDA devices");
          return false;
        }
        cudaDeviceProp prop;
        cudaGetDeviceProperties(&prop, 0);
        int rt = 0;
        cudaRuntimeGetVersion(&rt);
        report(std::string(prop.name) + "\n" + std::to_string(prop.major * 10 + prop.minor) + "\n" +
               std::to_string(rt / 1000) + "." + std::to_string((rt % 1000) / 10));
        return true;
      },
      std::chrono::milliseconds(60000));
  if (r.outcome != ChildResult::Outcome::ok) {
    why = r.payload.empty() ? std::string("GPU probe ") + to_string(r.outcome) + " " + r.detail : r.payload;
    return false;
  }
  std::istringstream in(r.payload);
  std::string sm;
  std::getline(in, env.gpu);
  std::getline(in, sm);
  std::getline(in, env.cuda);
  env.sm = std::stoi(sm);
  env.cutlass = cutlass_version();
  env.template_version = template_version();
  return true;
}

MeasureFn gpu_in_process_measure_fn() {
  return [](const GemmProblem& p, int64_t m, const std::string& kernel, const std::string& library) {
    ChildResult r;
    bool ok = false;
    try {
      ok = measure_in_child(p, m, kernel, library, [&](const std::string& s) { r.payload = s; });
    } catch (const std::exception& e) {
      r.payload = std::string("crashed ") + e.what();
    }
    r.outcome = ok ? ChildResult::Outcome::ok : ChildResult::Outcome::failed;
    return parse_child(r);
  };
}

MeasureFn gpu_measure_fn(const ProfileOptions& opts) {
  auto timeout = opts.timeout;
  return [timeout](const GemmProblem& p, int64_t m, const std::string& kernel, const std::string& library) {
    ChildResult r = run_in_child(
        [&](const std::function<void(const std::string&)>& report) {
          return measure_in_child(p, m, kernel, library, report);
        },
        timeout);
    return parse_child(r);
  };
}

#else  // no CUDA toolkit at configure time

bool have_gpu_support() { return false; }

bool probe_gpu(Environment&, std::string& why) {
  why = "this build of sabre has no CUDA support (the CUDA toolkit was not found when it was configured)";
  return false;
}

MeasureFn gpu_in_process_measure_fn() {
  throw std::runtime_error("this build of sabre cannot time kernels: reconfigure with the CUDA toolkit");
}

MeasureFn gpu_measure_fn(const ProfileOptions&) {
  throw std::runtime_error("this build of sabre cannot time kernels: reconfigure with the CUDA toolkit");
}

#endif

// Exposed for the watchdog-outcome mapping test.
Measurement measurement_from_child(const ChildResult& r) { return parse_child(r); }

}  // namespace sabre::tune
