// The GPU side of the profiler: probing the device and timing one candidate in a child process.
// Built with the CUDA toolkit only (SABRE_TUNE_HAVE_CUDA); otherwise the stubs at the end say
// that this build cannot time. Never run by the CPU tests: it runs on a GPU host through
// `sabre tune` and bench/gemm_tune_bench.cpp.
#include "tune/profiler.h"
#include "tune/conv_tune.h"

#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "tune/gpu_pool.h"
#include "tune/watchdog.h"

#ifdef SABRE_TUNE_HAVE_CUDA
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
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
      return m;
    }
    std::getline(in, m.detail);  // "deploy NAME" for a cuBLASLt algorithm a kernel library can fix
    if (!m.detail.empty() && m.detail[0] == ' ') m.detail.erase(0, 1);
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

// How many operand sets the timed launches cycle through: enough to pass L2 twice, so each launch
// reads its operands from HBM as a model's GEMMs read their weights. SABRE_MEASURE_L2_HOT=1 (an
// experiment switch, gemm_lib_bench --l2-hot; the tuner never sets it) times one set, left in L2.
int operand_rotations(double set_bytes) {
  const char* hot = std::getenv("SABRE_MEASURE_L2_HOT");
  if (hot && std::string(hot) == "1") return 1;
  return int(std::clamp(std::ceil(2 * kL2Bytes / set_bytes), 1.0, 64.0));
}
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
    case Act::relu6: return std::min(std::max(x, 0.0), 6.0);
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

// The host operands of one workload. The child measures the candidates of one workload in a row
// (batched_in_children), so the last workload's operands are kept: generating them dominated the
// time of large-M points.
struct HostOperands {
  Elem e;
  int64_t m, n, k, batch;
  bool has_res;
  HostData a, b, bias, res;
};

const HostOperands& host_operands(Elem e, int64_t m, int64_t n, int64_t k, int64_t batch, bool has_res) {
  static std::unique_ptr<HostOperands> last;
  if (last && last->e == e && last->m == m && last->n == n && last->k == k && last->batch == batch &&
      last->has_res == has_res)
    return *last;
  last.reset();  // free the previous workload's operands before making the next
  auto h = std::make_unique<HostOperands>();
  h->e = e, h->m = m, h->n = n, h->k = k, h->batch = batch, h->has_res = has_res;
  h->a = make_data(e, size_t(m * k * batch), 1);
  h->b = make_data(e, size_t(n * k * batch), 2);
  h->bias = make_data(e, size_t(n), 3);
  if (has_res) h->res = make_data(e, size_t(m * n * batch), 4);
  last = std::move(h);
  return *last;
}

// The CUDA objects of one measurement, destroyed in reverse order of need.
struct CudaHandles {
  cudaStream_t stream = nullptr;
  cudaEvent_t t0 = nullptr, t1 = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  void drop_graph() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    exec = nullptr, graph = nullptr;
  }
  ~CudaHandles() {
    drop_graph();
    if (t1) cudaEventDestroy(t1);
    if (t0) cudaEventDestroy(t0);
    if (stream) cudaStreamDestroy(stream);
  }
};

// Inside measure_in_child: the statement's CUDA status, or a `crashed` report naming the statement.
#define SABRE_MEASURE_CUDA(stmt)                                                                      \
  do {                                                                                              \
    if (cudaError_t err_ = (stmt); err_ != cudaSuccess)                                             \
      return fail(Status::crashed, std::string(#stmt " (" __FILE__ ":") + std::to_string(__LINE__) + \
                                       "): " + cudaGetErrorString(err_));                           \
  } while (0)

// Timing. Launching back to back from the host measures the host for small kernels (CUTLASS's run
// and cuBLASLt's per-call setup cost microseconds), so the timed launches, cycling the rotated
// operand sets (`run(i)` launches set i), are captured once into a CUDA graph that is replayed:
// the GPU runs them back to back. A candidate that cannot be captured is timed by stream launches
// instead. Per iteration: elapsed / iters between CUDA events, median of kRepeats.
bool time_launches(CudaHandles& h, int rotations, const std::function<int(int)>& run,
                   const std::function<bool(Status, const std::string&)>& fail, double& median_us) {
  std::string launch_error;
  auto launch = [&](int iters) {
    for (int i = 0; i < iters; ++i)
      if (int rc = run(i % rotations); rc != SABRE_OK) {
        launch_error = "run returned " + std::to_string(rc);
        return false;
      }
    return true;
  };
  std::vector<double> times;
  // Events around `body`; appends the time per iteration.
  auto timed = [&](int iters, const std::function<bool()>& body) {
    SABRE_MEASURE_CUDA(cudaEventRecord(h.t0, h.stream));
    if (!body()) return fail(Status::crashed, launch_error);
    SABRE_MEASURE_CUDA(cudaEventRecord(h.t1, h.stream));
    SABRE_MEASURE_CUDA(cudaEventSynchronize(h.t1));
    float ms = 0;
    SABRE_MEASURE_CUDA(cudaEventElapsedTime(&ms, h.t0, h.t1));
    times.push_back(double(ms) * 1000.0 / iters);
    return true;
  };
  const int few = std::max(3, rotations);
  // Warm-up (clocks, the instruction side's caches, lazy init), then an estimate for the count.
  if (!timed(few, [&] { return launch(few); }) || !timed(few, [&] { return launch(few); })) return false;
  const double one = times.back();
  times.clear();
  const int iters = int(std::clamp(std::ceil(2000.0 / std::max(one, 1.0)), double(few), 500.0));

  bool captured = false;
  if (cudaStreamBeginCapture(h.stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
    const bool launched = launch(iters);
    const bool ended = cudaStreamEndCapture(h.stream, &h.graph) == cudaSuccess && h.graph;
    cudaGraphExec_t exec = nullptr;
    captured = launched && ended && cudaGraphInstantiate(&exec, h.graph, 0) == cudaSuccess;
    if (captured) h.exec = exec;
  }
  if (!captured) {
    h.drop_graph();
    (void)cudaGetLastError();  // the capture's failure is not the candidate's: time by stream launches
    launch_error.clear();
  }
  auto replay = [&] {
    if (cudaError_t err = cudaGraphLaunch(h.exec, h.stream); err != cudaSuccess) {
      launch_error = std::string("cudaGraphLaunch: ") + cudaGetErrorString(err);
      return false;
    }
    return true;
  };
  if (captured && !timed(iters, replay)) return false;  // warm-up replay (uploads the graph)
  times.clear();
  for (int r = 0; r < kRepeats; ++r)
    if (!(captured ? timed(iters, replay) : timed(iters, [&] { return launch(iters); }))) return false;
  SABRE_MEASURE_CUDA(cudaStreamSynchronize(h.stream));
  SABRE_MEASURE_CUDA(cudaGetLastError());
  std::sort(times.begin(), times.end());
  median_us = times[times.size() / 2];
  return true;
}

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
  const int rotations = operand_rotations(set_bytes);

  const HostOperands& host = host_operands(e, m, n, k, batch, has_res);
  const HostData &a = host.a, &b = host.b, &bias = host.bias, &res = host.res;
  DeviceBuffers mem;
  void* dbias = mem.alloc(size_t(n) * eb);
  SABRE_MEASURE_CUDA(cudaMemcpy(dbias, bias.bytes.data(), bias.bytes.size(), cudaMemcpyHostToDevice));
  std::vector<sabre_gemm_args> sets;
  for (int r = 0; r < rotations; ++r) {
    sabre_gemm_args g{};
    g.m = m, g.n = n, g.k = k, g.batch = batch;
    void* da = mem.alloc(na * eb);
    void* db = mem.alloc(nb * eb);
    void* dd = mem.alloc(nd * eb);
    void* dr = has_res ? mem.alloc(nd * eb) : nullptr;
    SABRE_MEASURE_CUDA(cudaMemcpy(da, a.bytes.data(), a.bytes.size(), cudaMemcpyHostToDevice));
    SABRE_MEASURE_CUDA(cudaMemcpy(db, b.bytes.data(), b.bytes.size(), cudaMemcpyHostToDevice));
    if (dr) SABRE_MEASURE_CUDA(cudaMemcpy(dr, res.bytes.data(), res.bytes.size(), cudaMemcpyHostToDevice));
    SABRE_MEASURE_CUDA(cudaMemset(dd, 0xFF, nd * eb));  // poison: NaN in every float type
    g.a = da, g.b = db, g.d = dd, g.residual = dr, g.bias = epi.bias ? dbias : nullptr;
    g.lda = k;
    g.ldb = ops.layout == Layout::tn ? k : n;
    g.ldd = g.ldr = n;
    g.stride_a = m * k, g.stride_b = n * k, g.stride_d = g.stride_r = m * n;
    g.alpha = 1.0f;
    g.beta = has_res ? 1.0f : 0.0f;
    sets.push_back(g);
  }
  // The timing stream does not wait for the legacy stream: the poison must be written before any launch.
  SABRE_MEASURE_CUDA(cudaDeviceSynchronize());

  CudaHandles h;
  SABRE_MEASURE_CUDA(cudaStreamCreateWithFlags(&h.stream, cudaStreamNonBlocking));
  SABRE_MEASURE_CUDA(cudaEventCreate(&h.t0));
  SABRE_MEASURE_CUDA(cudaEventCreate(&h.t1));
  std::function<int(const sabre_gemm_args&)> run;
  std::unique_ptr<lt::LtGemm> ltg;
  // A cuBLASLt candidate's detail: "deploy NAME" (lt_spec.h) or why it cannot be deployed; never
  // empty, so the tuner does not take it for a row from before (profiler.cpp, tune_impl).
  std::string deploy;
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
    if (auto cfg = ltg->config(algo)) deploy = kDeployPrefix + lt::lt_kernel_name({*spec, *cfg});
    else deploy = "not deployable: cuBLASLt did not accept the algorithm rebuilt from its configuration";
    run = [&, algo](const sabre_gemm_args& g) { return ltg->run(g, h.stream, algo); };
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
    run = [ent, &h](const sabre_gemm_args& g) { return ent->run(&g, h.stream); };
  }

  // Correctness first: sampled rows against a double-precision host reference; every element
  // must have been written (the poison is NaN).
  if (int rc = run(sets[0]); rc != SABRE_OK) return fail(Status::crashed, "run returned " + std::to_string(rc));
  if (cudaError_t err = cudaStreamSynchronize(h.stream); err != cudaSuccess)
    return fail(Status::crashed, std::string("kernel failed: ") + cudaGetErrorString(err));
  std::vector<uint8_t> out(nd * eb);
  SABRE_MEASURE_CUDA(cudaMemcpy(out.data(), sets[0].d, out.size(), cudaMemcpyDeviceToHost));
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

  double median_us = 0;
  if (!time_launches(h, rotations, [&](int i) { return run(sets[size_t(i)]); }, fail, median_us)) return false;
  std::ostringstream s;
  s << "ok " << median_us << " " << rel;
  if (!deploy.empty()) s << " " << deploy;
  report(s.str());
  return true;
}

// The host operands of one conv workload, kept across its candidates (one child measures a
// workload's candidates in a row).
struct HostConvOperands {
  ConvProblem p;
  HostData x, w, bias, res;
};

const HostConvOperands& host_conv_operands(Elem e, const ConvProblem& p, bool has_res) {
  static std::unique_ptr<HostConvOperands> last;
  if (last && last->p == p) return *last;
  last.reset();
  auto h = std::make_unique<HostConvOperands>();
  h->p = p;
  h->x = make_data(e, size_t(p.n * p.h * p.w * p.c), 11);
  h->w = make_data(e, size_t(p.k * p.r * p.s * p.c), 12);
  h->bias = make_data(e, size_t(p.k), 13);
  if (has_res) h->res = make_data(e, size_t(p.n * p.p * p.q * p.k), 14);
  last = std::move(h);
  return *last;
}

// Runs in the child: a conv candidate checked at sampled output pixels (every channel) against a
// double-precision host reference, then timed as the GEMM candidates are. False (with a
// "STATUS detail" report) for a candidate that cannot run or computes wrong results.
bool measure_conv_in_child(const ConvProblem& p, const std::string& kernel, const std::string& library,
                           const std::function<void(const std::string&)>& report) {
  auto fail = [&](Status s, const std::string& why) {
    report(std::string(to_string(s)) + " " + why);
    return false;
  };
  if (cudaSetDevice(0) != cudaSuccess) return fail(Status::crashed, "no CUDA device");
  const auto elem = parse_elem(p.dtype);
  const auto epi = parse_epilogue(p.epilogue);
  if (!elem || !epi) return fail(Status::cannot_implement, "dtype or epilogue of " + conv_workload_key(p));
  const Elem e = *elem;
  const size_t eb = size_t(elem_bytes(e));
  const bool has_res = epi->residual != Residual::none;
  const size_t nx = size_t(p.n * p.h * p.w * p.c), nw = size_t(p.k * p.r * p.s * p.c), ny = size_t(p.n * p.p * p.q * p.k);
  const double set_bytes = double(nx + nw + ny + (has_res ? ny : 0)) * double(eb);
  const int rotations = operand_rotations(set_bytes);
  const HostConvOperands& host = host_conv_operands(e, p, has_res);

  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) return fail(Status::crashed, std::string("dlopen: ") + dlerror());
  auto reg = reinterpret_cast<sabre_conv_registry_fn>(dlsym(lib, SABRE_CONV_REGISTRY_SYMBOL));
  int count = 0, abi = 0;
  const sabre_conv_entry* ent = reg ? reg(&count, &abi) : nullptr;
  if (!ent || count < 1 || abi != SABRE_KERNEL_ABI_VERSION)
    return fail(Status::crashed, "library has no usable conv registry: " + library);

  DeviceBuffers mem;
  void* dw = mem.alloc(nw * eb);
  void* dbias = mem.alloc(size_t(p.k) * eb);
  SABRE_MEASURE_CUDA(cudaMemcpy(dw, host.w.bytes.data(), host.w.bytes.size(), cudaMemcpyHostToDevice));
  SABRE_MEASURE_CUDA(cudaMemcpy(dbias, host.bias.bytes.data(), host.bias.bytes.size(), cudaMemcpyHostToDevice));
  std::vector<sabre_conv_args> sets;
  for (int r = 0; r < rotations; ++r) {
    sabre_conv_args a{};
    a.n = p.n, a.h = p.h, a.w = p.w, a.c = p.c, a.k = p.k, a.r = p.r, a.s = p.s, a.p = p.p, a.q = p.q;
    a.pad_h = p.pad_h, a.pad_w = p.pad_w, a.stride_h = p.stride_h, a.stride_w = p.stride_w;
    a.dil_h = p.dil_h, a.dil_w = p.dil_w, a.groups = p.groups;
    void* dx = mem.alloc(nx * eb);
    void* dy = mem.alloc(ny * eb);
    void* dr = has_res ? mem.alloc(ny * eb) : nullptr;
    SABRE_MEASURE_CUDA(cudaMemcpy(dx, host.x.bytes.data(), host.x.bytes.size(), cudaMemcpyHostToDevice));
    if (dr) SABRE_MEASURE_CUDA(cudaMemcpy(dr, host.res.bytes.data(), host.res.bytes.size(), cudaMemcpyHostToDevice));
    SABRE_MEASURE_CUDA(cudaMemset(dy, 0xFF, ny * eb));  // poison: NaN in every float type
    a.x = dx, a.filter = dw, a.y = dy, a.residual = dr, a.bias = epi->bias ? dbias : nullptr;
    a.alpha = 1.0f;
    a.beta = has_res ? 1.0f : 0.0f;
    sets.push_back(a);
  }
  SABRE_MEASURE_CUDA(cudaDeviceSynchronize());
  if (ent->can_implement(&sets[0]) != SABRE_OK) return fail(Status::cannot_implement, ent->last_error());
  const size_t ws = ent->workspace_size(&sets[0]);
  void* dws = ws ? mem.alloc(ws) : nullptr;
  for (auto& a : sets) a.workspace = dws, a.workspace_size = ws;

  CudaHandles h;
  SABRE_MEASURE_CUDA(cudaStreamCreateWithFlags(&h.stream, cudaStreamNonBlocking));
  SABRE_MEASURE_CUDA(cudaEventCreate(&h.t0));
  SABRE_MEASURE_CUDA(cudaEventCreate(&h.t1));
  auto run = [&](int i) { return ent->run(&sets[size_t(i)], h.stream); };
  if (int rc = run(0); rc != SABRE_OK) return fail(Status::crashed, "run returned " + std::to_string(rc) + ": " + ent->last_error());
  if (cudaError_t err = cudaStreamSynchronize(h.stream); err != cudaSuccess)
    return fail(Status::crashed, std::string("kernel failed: ") + cudaGetErrorString(err));
  std::vector<uint8_t> out(ny * eb);
  SABRE_MEASURE_CUDA(cudaMemcpy(out.data(), sets[0].y, out.size(), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < ny; ++i)
    if (!std::isfinite(to_float(e, &out[i * eb])))
      return fail(Status::wrong_result, "element " + std::to_string(i) + " not finite (unwritten or overflow)");
  // Sampled output pixels (n, p, q), every output channel: up to ~1e8 multiply-adds.
  const int64_t pixels = p.n * p.p * p.q, per_pixel = p.k * p.r * p.s * p.c;
  const int64_t samples = std::clamp<int64_t>(int64_t(1e8 / double(std::max<int64_t>(per_pixel, 1))), 2, 64);
  double err2 = 0, ref2 = 0;
  for (int64_t si = 0; si < std::min(pixels, samples); ++si) {
    const int64_t pix = pixels <= samples ? si : si + 1 == samples ? pixels - 1 : (si * 7919) % pixels;
    const int64_t ni = pix / (p.p * p.q), pi = (pix / p.q) % p.p, qi = pix % p.q;
    for (int64_t ki = 0; ki < p.k; ++ki) {
      double acc = 0;
      for (int64_t ri = 0; ri < p.r; ++ri) {
        const int64_t hi = pi * p.stride_h - p.pad_h + ri * p.dil_h;
        if (hi < 0 || hi >= p.h) continue;
        for (int64_t sj = 0; sj < p.s; ++sj) {
          const int64_t wi = qi * p.stride_w - p.pad_w + sj * p.dil_w;
          if (wi < 0 || wi >= p.w) continue;
          const float* xv = &host.x.v[size_t(((ni * p.h + hi) * p.w + wi) * p.c)];
          const float* wv = &host.w.v[size_t(((ki * p.r + ri) * p.s + sj) * p.c)];
          for (int64_t ci = 0; ci < p.c; ++ci) acc += double(xv[ci]) * wv[ci];
        }
      }
      if (epi->bias) acc += host.bias.v[size_t(ki)];
      const size_t yi = size_t(pix * p.k + ki);
      const double r = has_res ? host.res.v[yi] : 0;
      if (epi->residual == Residual::before_act) acc += r;
      acc = act_ref(epi->act, acc);
      if (epi->residual == Residual::after_act) acc += r;
      const double got = to_float(e, &out[yi * eb]);
      err2 += (got - acc) * (got - acc);
      ref2 += acc * acc;
    }
  }
  const double rel = std::sqrt(err2 / std::max(ref2, 1e-30));
  if (!(rel <= tolerance(e))) {
    std::ostringstream s;
    s << "relative L2 error " << rel << " above " << tolerance(e) << " (" << kernel << ")";
    return fail(Status::wrong_result, s.str());
  }
  double median_us = 0;
  if (!time_launches(h, rotations, run, fail, median_us)) return false;
  std::ostringstream s;
  s << "ok " << median_us << " " << rel;
  report(s.str());
  return true;
}

#undef SABRE_MEASURE_CUDA

}  // namespace

bool have_gpu_support() { return true; }

bool probe_gpus(const std::vector<int>& ids, std::vector<int>& resolved, Environment& env, std::string& why) {
  ChildResult r = run_in_child(
      [](const std::function<void(const std::string&)>& report) {
        int count = 0;
        cudaError_t err = cudaGetDeviceCount(&count);
        if (err != cudaSuccess || count == 0) {
          // The same words as the runtime's: "insufficient driver" alone reads as an upgrade to make
          // on a machine that simply has no GPU.
          report(std::string("no CUDA device: ") + (err != cudaSuccess ? cudaGetErrorString(err) : "the driver reports 0 GPUs"));
          return false;
        }
        int rt = 0;
        if ((err = cudaRuntimeGetVersion(&rt)) != cudaSuccess) {
          report(cudaGetErrorString(err));
          return false;
        }
        // The CUDA version, then each GPU's name and SM, in device order.
        std::string out = std::to_string(rt / 1000) + "." + std::to_string((rt % 1000) / 10);
        for (int d = 0; d < count; ++d) {
          cudaDeviceProp prop;
          if ((err = cudaGetDeviceProperties(&prop, d)) != cudaSuccess) {
            report("GPU " + std::to_string(d) + ": " + cudaGetErrorString(err));
            return false;
          }
          out += "\n" + std::string(prop.name) + "\n" + std::to_string(prop.major * 10 + prop.minor);
        }
        report(out);
        return true;
      },
      std::chrono::milliseconds(60000));
  if (r.outcome != ChildResult::Outcome::ok) {
    why = r.payload.empty() ? std::string("GPU probe ") + to_string(r.outcome) + " " + r.detail : r.payload;
    return false;
  }
  std::istringstream in(r.payload);
  std::string cuda, name, sm;
  std::getline(in, cuda);
  std::vector<std::string> names, sms;
  while (std::getline(in, name) && std::getline(in, sm)) names.push_back(name), sms.push_back(sm);
  resolved = resolve_gpus(ids, names);  // std::invalid_argument: an id past the count, a mixed list
  env.gpu = names[size_t(resolved[0])];
  env.sm = std::stoi(sms[size_t(resolved[0])]);
  env.cuda = cuda;
  env.cutlass = cutlass_version();
  env.template_version = template_version();
  return true;
}

bool probe_gpu(Environment& env, std::string& why) {
  std::vector<int> resolved;
  return probe_gpus({}, resolved, env, why);
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

ConvMeasureFn gpu_conv_in_process_measure_fn() {
  return [](const ConvProblem& p, const std::string& kernel, const std::string& library) {
    ChildResult r;
    bool ok = false;
    try {
      ok = measure_conv_in_child(p, kernel, library, [&](const std::string& s) { r.payload = s; });
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

bool probe_gpus(const std::vector<int>&, std::vector<int>&, Environment& env, std::string& why) {
  return probe_gpu(env, why);
}

MeasureFn gpu_in_process_measure_fn() {
  throw std::runtime_error("this build of sabre cannot time kernels: reconfigure with the CUDA toolkit");
}

MeasureFn gpu_measure_fn(const ProfileOptions&) {
  throw std::runtime_error("this build of sabre cannot time kernels: reconfigure with the CUDA toolkit");
}

ConvMeasureFn gpu_conv_in_process_measure_fn() {
  throw std::runtime_error("this build of sabre cannot time kernels: reconfigure with the CUDA toolkit");
}

#endif

// Exposed for the watchdog-outcome mapping test.
Measurement measurement_from_child(const ChildResult& r) { return parse_child(r); }

}  // namespace sabre::tune
