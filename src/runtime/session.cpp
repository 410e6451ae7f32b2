// The executor behind include/sabre/session.h: loads an artifact onto a GPU and runs its plan's
// steps through the native kernels and the artifact's kernel libraries, one CUDA graph per
// input-shape signature. Tests: tests/gpu/runtime_session_test.cpp (GPU), tests/unit/runtime_capi_test.cpp
#include "sabre/session.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "runtime/artifact.h"
#include "runtime/kernels.h"
#include "runtime/planner.h"
#include "runtime/resolve.h"

#if SABRE_RUNTIME_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "backends/native/native.h"
#include "sabre/kernel_abi.h"
#endif

namespace sabre {

using namespace runtime;

namespace {

std::vector<TensorSpec> specs_of(const Plan& p, const std::vector<int>& ids) {
  std::vector<TensorSpec> out;
  for (int id : ids) {
    const TensorInfo& t = p.tensors[static_cast<size_t>(id)];
    TensorSpec s{t.name, to_dlpack(t.dtype), {}};
    for (const auto& d : t.shape) s.shape.push_back(d.str());
    out.push_back(std::move(s));
  }
  return out;
}



}  // namespace

#if SABRE_RUNTIME_HAVE_CUDA

namespace {

using EwLaunchFn = int (*)(const SabreEwParams*, unsigned, cudaStream_t);

void cuda_check(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so the next call starts clean
  throw Error(SABRE_ERR_CUDA, what + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

// Where nothing may throw (destructors, unwinding after another error): a failed release is said
// on stderr, once per call, and the cleanup goes on.
void cuda_warn(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();
  std::fprintf(stderr, "sabre runtime: warning: %s failed: %s (%s)\n", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

}  // namespace

struct Session::Impl {
  LoadedArtifact art;
  int device = 0;
  std::vector<TensorSpec> in_specs, out_specs;
  void* weights_dev = nullptr;
  std::unique_ptr<KernelLibraries> kernels;  // dlopened after load_artifact verified every file
  std::map<std::string, sabre_kernel_entry> gemm;
  std::map<std::string, sabre_conv_entry> conv;
  // Per step index: the parsed chain and program (elementwise), the generated launcher or null.
  std::map<size_t, native::ElementwiseChain> chains;
  std::map<size_t, SabreEwProgram> programs;
  std::map<size_t, EwLaunchFn> launchers;

  ~Impl() {
    if (weights_dev) {
      cuda_warn(cudaSetDevice(device), "cudaSetDevice (releasing the weights)");
      cuda_warn(cudaFree(weights_dev), "freeing the weights");
    }
  }

  void* find_symbol(const std::string& sym, const std::string& library) const {
    for (size_t i = 0; i < kernels->handles.size(); ++i) {
      if (!library.empty() && library != art.kernel_files[i]) continue;
      if (void* p = dlsym(kernels->handles[i], sym.c_str())) return p;
    }
    return nullptr;
  }
};

Session::Session(const std::string& dir, int device_id) : impl_(std::make_shared<Impl>()) {
  Impl& s = *impl_;
  try {
    s.art = load_artifact(dir);
  } catch (const PlanError& e) {
    throw Error(SABRE_ERR_ARTIFACT, e.what());
  }
  // What can be checked without a GPU first, so a broken artifact says so on any machine.
  for (const Step& st : s.art.plan.steps)
    if (!is_known_op(st.op))
      throw Error(SABRE_ERR_ARTIFACT, "plan: step '" + st.name + "' (" + st.op +
                                          ") is an op this runtime does not know; run it with the sabre that compiled it");
  // Kernel libraries: loaded only now that every file matched the manifest, and every GEMM and
  // conv kernel a step dispatches to checked against the step by its signature, before any CUDA call.
  try {
    s.kernels = open_kernel_libraries(s.art);
  } catch (const PlanError& err) {
    throw Error(SABRE_ERR_ARTIFACT, err.what());
  }
  s.gemm = s.kernels->gemm;
  s.conv = s.kernels->conv;
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    cudaGetLastError();
    throw Error(SABRE_ERR_NO_DEVICE, std::string("no CUDA device: ") +
                                         (e != cudaSuccess ? cudaGetErrorString(e) : "the driver reports 0 GPUs") +
                                         "; sabre runs artifacts on an NVIDIA GPU with its driver installed");
  }
  if (device_id < 0 || device_id >= count)
    throw Error(SABRE_ERR_NO_DEVICE, "no CUDA device " + std::to_string(device_id) + ": this machine has " +
                                         std::to_string(count) + " (ids 0.." + std::to_string(count - 1) + ")");
  s.device = device_id;
  cuda_check(cudaSetDevice(device_id), "cudaSetDevice(" + std::to_string(device_id) + ")");
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, device_id), "cudaGetDeviceProperties");
  try {
    check_device(s.art.manifest, prop.major * 10 + prop.minor, prop.name);
  } catch (const PlanError& err) {
    throw Error(SABRE_ERR_WRONG_ARCH, err.what());
  }
  const Plan& plan = s.art.plan;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& st = plan.steps[i];
    std::string where = "step '" + st.name + "' (" + st.op + ")";
    if (!is_known_op(st.op))
      throw Error(SABRE_ERR_ARTIFACT, "plan: " + where + " is an op this runtime does not know; use the sabre that compiled it");
    try {
      // gemm and conv steps: dispatch tables and kernels checked by open_kernel_libraries.
      if (st.op == "elementwise") {
        s.chains[i] = parse_chain(st);
        s.programs[i] = native::compile_program(s.chains[i]);
        std::string k = param_str(st, "kernel", "");
        if (!k.empty()) {
          void* fn = s.find_symbol(k + "_launch", param_str(st, "library", ""));
          if (!fn) throw PlanError("plan: " + where + " names kernel '" + k + "' but no kernels/*.so exports " + k + "_launch");
          s.launchers[i] = reinterpret_cast<EwLaunchFn>(fn);
        }
      }
    } catch (const PlanError& err) {
      throw Error(SABRE_ERR_ARTIFACT, err.what());
    } catch (const std::exception& err) {
      throw Error(SABRE_ERR_ARTIFACT, "plan: " + where + ": " + err.what());
    }
  }
  s.in_specs = specs_of(plan, plan.inputs);
  s.out_specs = specs_of(plan, plan.outputs);
  if (s.art.weights->size() > 0) {
    cuda_check(cudaMalloc(&s.weights_dev, s.art.weights->size()),
               "allocating " + std::to_string(s.art.weights->size()) + " bytes of weights on the GPU");
    cuda_check(cudaMemcpy(s.weights_dev, s.art.weights->data(), s.art.weights->size(), cudaMemcpyHostToDevice),
               "copying the weights to the GPU");
  }
}

#else  // no CUDA in this build

struct Session::Impl {
  LoadedArtifact art;
  std::vector<TensorSpec> in_specs, out_specs;
};

Session::Session(const std::string& dir, int) : impl_(std::make_shared<Impl>()) {
  try {
    impl_->art = load_artifact(dir);
    open_kernel_libraries(impl_->art);  // the same checks as with CUDA, so a bad artifact says so here too
  } catch (const PlanError& e) {
    throw Error(SABRE_ERR_ARTIFACT, e.what());
  }
  throw Error(SABRE_ERR_NO_DEVICE, "no CUDA device: this sabre was built without the CUDA toolkit; rebuild it with CUDA to run artifacts");
}

#endif

Session::~Session() = default;
const std::vector<TensorSpec>& Session::inputs() const { return impl_->in_specs; }
const std::vector<TensorSpec>& Session::outputs() const { return impl_->out_specs; }
const std::string& Session::source_model() const { return impl_->art.manifest.source_model; }

std::vector<std::vector<int64_t>> Session::output_shapes(const std::vector<std::vector<int64_t>>& input_shapes) const {
  const Plan& p = impl_->art.plan;
  try {
    auto dims = p.bind_dims(input_shapes);
    std::vector<std::vector<int64_t>> out;
    for (int id : p.outputs) {
      std::vector<int64_t> s;
      for (const auto& d : p.tensors[static_cast<size_t>(id)].shape) s.push_back(d.eval(dims));
      out.push_back(std::move(s));
    }
    return out;
  } catch (const PlanError& e) {
    throw Error(SABRE_ERR_INVALID_ARGUMENT, e.what());
  }
}

#if SABRE_RUNTIME_HAVE_CUDA

struct ExecutionContext::Impl {
  std::shared_ptr<Session::Impl> s;
  cudaStream_t stream = nullptr;
  bool own_stream = false;
  bool use_graphs = true;
  void* arena = nullptr;
  uint64_t arena_size = 0;
  uint64_t arena_epoch = 0;
  void* workspace = nullptr;
  size_t workspace_size = 0;
  std::vector<void*> out_buf;
  std::vector<uint64_t> out_cap;
  std::vector<std::vector<int64_t>> out_shapes;  // what returned descriptors point at
  RunStats stats;

  struct Signature {
    Dims dims;
    std::vector<std::vector<int64_t>> shapes;  // every tensor
    std::vector<uint64_t> bytes;
    MemoryPlan mp;
    // The prefetch schedule at these shapes (prefetch_at_shapes) and what it fetches a run.
    std::vector<std::vector<int>> prefetch;
    uint64_t prefetched_weights = 0, prefetched_bytes = 0;
    cudaGraphExec_t exec = nullptr;
    std::vector<void*> io;  // the input/output pointers the graph was captured with
    uint64_t epoch = 0;     // arena_epoch at capture
  };
  std::map<std::string, Signature> cache;

  // L2 weight prefetch (docs/RUNTIME.md section 5): before step i, the weights prefetch[i] names
  // (less, at a signature's shapes, those of GEMMs and convs doing at least prefetch_max_flops) are
  // fetched into L2 on `side`, forked from `stream` there and joined back after the last step, so a
  // captured graph holds each prefetch as a branch beside the kernel it overlaps.
  std::vector<std::vector<int>> prefetch;
  double prefetch_max_flops = 0;
  cudaStream_t side = nullptr;
  cudaEvent_t fork_ev = nullptr;
  cudaEvent_t join_ev = nullptr;

  ~Impl() {
    cuda_warn(cudaSetDevice(s->device), "cudaSetDevice (releasing a context)");
    if (stream) cuda_warn(cudaStreamSynchronize(stream), "cudaStreamSynchronize (releasing a context)");
    if (side) cuda_warn(cudaStreamDestroy(side), "cudaStreamDestroy (prefetch stream)");
    if (fork_ev) cuda_warn(cudaEventDestroy(fork_ev), "cudaEventDestroy");
    if (join_ev) cuda_warn(cudaEventDestroy(join_ev), "cudaEventDestroy");
    for (auto& [k, sig] : cache)
      if (sig.exec) cuda_warn(cudaGraphExecDestroy(sig.exec), "cudaGraphExecDestroy");
    cuda_warn(cudaFree(arena), "freeing the activation arena");
    cuda_warn(cudaFree(workspace), "freeing the GEMM/conv workspace");
    for (void* p : out_buf) cuda_warn(cudaFree(p), "freeing an output buffer");
    if (own_stream && stream) cuda_warn(cudaStreamDestroy(stream), "cudaStreamDestroy");
  }

  const Plan& plan() const { return s->art.plan; }

  // profile: null for a normal run; else `repeats` step-by-step runs, one median per step.
  void run(const std::vector<sabre_tensor>& inputs, std::vector<sabre_tensor>& outputs, bool sync,
           std::vector<StepTime>* profile = nullptr, int repeats = 0);
  void profile_steps(const Signature& sig, const std::vector<void*>& ptr, std::vector<StepTime>& out, int repeats);
  Signature& signature(const std::vector<std::vector<int64_t>>& in_shapes);
  sabre_gemm_args gemm_args(const Step& st, const Signature& sig, const std::vector<void*>& ptr) const;
  sabre_conv_args conv_step_args(const Step& st, const Signature& sig, const std::vector<void*>& ptr) const;
  const sabre_conv_entry& conv_kernel(const Step& st, const sabre_conv_args& a, std::string* name) const;
  const sabre_kernel_entry& gemm_kernel(const Step& st, const sabre_gemm_args& a, std::string* name) const;
  void enqueue(size_t i, const Signature& sig, const std::vector<void*>& ptr);
  void launch_unreplayed(Signature& sig, std::vector<void*>& ptr, const std::vector<void*>& io,
                         std::vector<StepTime>* profile, int repeats);
  // Every step in order, with the weight prefetches between them (the graph capture and the run without graphs).
  void enqueue_all(const Signature& sig, const std::vector<void*>& ptr);
};

// Weights smaller than this are not worth a prefetch launch (biases, LayerNorm scales).
constexpr uint64_t kPrefetchMinBytes = 64 << 10;

// SABRE_PREFETCH: how many kernel steps ahead of a GEMM or conv its weights are prefetched into L2;
// 0 turns it off. Read once per context.
int prefetch_lead_from_env() {
  const char* v = std::getenv("SABRE_PREFETCH");
  if (!v || !*v) return 1;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (*end || n < 0 || n > 64) {
    std::fprintf(stderr, "sabre: warning: SABRE_PREFETCH='%s' is not a step count 0..64; prefetching 1 step ahead\n", v);
    return 1;
  }
  return static_cast<int>(n);
}

// SABRE_PREFETCH_MAX_GFLOP: the weights of a GEMM or conv doing this much work or more, with at least
// kPrefetchMaxRows rows, at a run's shapes are not prefetched (prefetch_at_shapes; default 4; 0: no
// limit, every scheduled weight, the behaviour before 2026-12-04). Read once per context.
double prefetch_max_flops_from_env() {
  constexpr double kDefault = 4e9;
  const char* v = std::getenv("SABRE_PREFETCH_MAX_GFLOP");
  if (!v || !*v) return kDefault;
  char* end = nullptr;
  const double g = std::strtod(v, &end);
  if (*end || !(g >= 0) || g > 1e6) {
    std::fprintf(stderr, "sabre: warning: SABRE_PREFETCH_MAX_GFLOP='%s' is not a number 0..1e6; using 4\n", v);
    return kDefault;
  }
  return g * 1e9;
}

// How many weights a prefetch schedule fetches a run, and their bytes.
void count_prefetch(const Plan& plan, const std::vector<std::vector<int>>& lists, uint64_t& weights, uint64_t& bytes) {
  weights = bytes = 0;
  for (const auto& ws : lists)
    for (int t : ws) {
      ++weights;
      bytes += plan.tensors[static_cast<size_t>(t)].weight_bytes;
    }
}

void ExecutionContext::Impl::enqueue_all(const Signature& sig, const std::vector<void*>& ptr) {
  const Plan& p = plan();
  bool forked = false;
  try {
    for (size_t i = 0; i < p.steps.size(); ++i) {
      if (!sig.prefetch[i].empty()) {  // never without `side`: the constructor makes it where any list is not empty
        cuda_check(cudaEventRecord(fork_ev, stream), "cudaEventRecord (prefetch fork)");
        cuda_check(cudaStreamWaitEvent(side, fork_ev, 0), "cudaStreamWaitEvent (prefetch fork)");
        forked = true;
        for (int t : sig.prefetch[i]) {
          const TensorInfo& ti = p.tensors[static_cast<size_t>(t)];
          cudaError_t e = native::l2_prefetch(ptr[static_cast<size_t>(t)], ti.weight_bytes, side);
          if (e != cudaSuccess)
            throw Error(SABRE_ERR_CUDA, "prefetching weight '" + ti.name + "' into L2 failed: " + cudaGetErrorName(e) +
                                            ": " + native::last_error_message());
        }
      }
      enqueue(i, sig, ptr);
    }
  } catch (...) {
    // Join the side stream before the caller abandons a capture, so that neither stream is left
    // capturing or waiting on work that will never be launched.
    if (forked) {
      cudaEventRecord(join_ev, side);
      cudaStreamWaitEvent(stream, join_ev, 0);
      cudaGetLastError();
    }
    throw;
  }
  if (forked) {
    cuda_check(cudaEventRecord(join_ev, side), "cudaEventRecord (prefetch join)");
    cuda_check(cudaStreamWaitEvent(stream, join_ev, 0), "cudaStreamWaitEvent (prefetch join)");
  }
}

ExecutionContext::ExecutionContext(Session& session, void* stream, bool use_graphs) : impl_(std::make_unique<Impl>()) {
  Impl& c = *impl_;
  c.s = session.impl_;
  c.use_graphs = use_graphs;
  cuda_check(cudaSetDevice(c.s->device), "cudaSetDevice");
  if (stream) {
    c.stream = static_cast<cudaStream_t>(stream);
  } else {
    cuda_check(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking), "creating the context's stream");
    c.own_stream = true;
  }
  c.out_buf.assign(c.plan().outputs.size(), nullptr);
  c.out_cap.assign(c.plan().outputs.size(), 0);
  c.out_shapes.resize(c.plan().outputs.size());
  const int lead = prefetch_lead_from_env();
  c.prefetch = prefetch_schedule(c.plan(), lead, kPrefetchMinBytes);
  c.prefetch_max_flops = prefetch_max_flops_from_env();
  count_prefetch(c.plan(), c.prefetch, c.stats.prefetched_weights, c.stats.prefetched_bytes);
  if (c.stats.prefetched_weights > 0) {
    c.stats.prefetch_lead = lead;
    cuda_check(cudaStreamCreateWithFlags(&c.side, cudaStreamNonBlocking), "creating the L2 prefetch stream");
    cuda_check(cudaEventCreateWithFlags(&c.fork_ev, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    cuda_check(cudaEventCreateWithFlags(&c.join_ev, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  }
}

ExecutionContext::~ExecutionContext() = default;
void* ExecutionContext::stream() const { return impl_->stream; }
const RunStats& ExecutionContext::last_stats() const { return impl_->stats; }

void ExecutionContext::run(const std::vector<sabre_tensor>& inputs, std::vector<sabre_tensor>& outputs, bool sync) {
  impl_->run(inputs, outputs, sync);
}

std::vector<StepTime> ExecutionContext::profile(const std::vector<sabre_tensor>& inputs, std::vector<sabre_tensor>& outputs,
                                                int repeats) {
  if (repeats < 1) throw Error(SABRE_ERR_INVALID_ARGUMENT, "profile needs at least one repeat");
  std::vector<StepTime> out;
  impl_->run(inputs, outputs, true, &out, repeats);
  return out;
}

namespace {
// A host callback that holds its stream until the enqueuing thread has queued everything behind it.
void CUDART_CB hold_stream(void* flag) {
  auto* go = static_cast<std::atomic<bool>*>(flag);
  while (!go->load(std::memory_order_acquire)) {
  }
}
}  // namespace

void ExecutionContext::Impl::profile_steps(const Signature& sig, const std::vector<void*>& ptr, std::vector<StepTime>& out,
                                           int repeats) {
  const Plan& p = plan();
  const size_t n = p.steps.size();
  std::vector<cudaEvent_t> ev(n + 1, nullptr);
  struct Events {
    std::vector<cudaEvent_t>& v;
    ~Events() {
      for (cudaEvent_t e : v)
        if (e) cudaEventDestroy(e);
    }
  } destroy{ev};
  for (auto& e : ev) cuda_check(cudaEventCreate(&e), "cudaEventCreate");
  std::vector<std::vector<float>> ms(n);
  for (int r = 0; r < repeats; ++r) {
    std::atomic<bool> go{false};
    cuda_check(cudaLaunchHostFunc(stream, hold_stream, &go), "cudaLaunchHostFunc");
    try {
      cuda_check(cudaEventRecord(ev[0], stream), "cudaEventRecord");
      for (size_t i = 0; i < n; ++i) {
        enqueue(i, sig, ptr);
        cuda_check(cudaEventRecord(ev[i + 1], stream), "cudaEventRecord");
      }
    } catch (...) {
      go.store(true, std::memory_order_release);
      // The error being thrown is the one to report; a failed drain is only said.
      cuda_warn(cudaStreamSynchronize(stream), "cudaStreamSynchronize (after a failed profile step)");
      throw;
    }
    go.store(true, std::memory_order_release);
    cuda_check(cudaStreamSynchronize(stream), "running the model (cudaStreamSynchronize)");
    for (size_t i = 0; i < n; ++i) {
      float t = 0;
      cuda_check(cudaEventElapsedTime(&t, ev[i], ev[i + 1]), "cudaEventElapsedTime");
      ms[i].push_back(t);
    }
  }
  out.clear();
  for (size_t i = 0; i < n; ++i) {
    const Step& st = p.steps[i];
    StepTime t;
    t.index = i;
    t.op = st.op;
    t.name = st.name;
    if (st.op == "gemm") {
      gemm_kernel(st, gemm_args(st, sig, ptr), &t.kernel);
    } else if (st.op == "conv") {
      sabre_conv_args a = conv_step_args(st, sig, ptr);
      conv_kernel(st, a, &t.kernel);
    }
    std::sort(ms[i].begin(), ms[i].end());
    t.us = 1000.0 * ms[i][ms[i].size() / 2];
    out.push_back(std::move(t));
  }
}

ExecutionContext::Impl::Signature& ExecutionContext::Impl::signature(const std::vector<std::vector<int64_t>>& in_shapes) {
  std::string key;
  for (const auto& sh : in_shapes) key += shape_str(sh);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Signature sig;
  try {
    sig.dims = plan().bind_dims(in_shapes);
  } catch (const PlanError& e) {
    throw Error(SABRE_ERR_INVALID_ARGUMENT, e.what());
  }
  try {
    for (const auto& t : plan().tensors) {
      std::vector<int64_t> sh;
      for (const auto& d : t.shape) sh.push_back(d.eval(sig.dims));
      sig.shapes.push_back(std::move(sh));
    }
    sig.bytes = tensor_bytes(plan(), sig.dims);
    sig.mp = plan_memory(plan(), sig.bytes);
    sig.prefetch = prefetch_at_shapes(plan(), prefetch, sig.shapes, prefetch_max_flops);
    count_prefetch(plan(), sig.prefetch, sig.prefetched_weights, sig.prefetched_bytes);
  } catch (const PlanError& e) {
    throw Error(SABRE_ERR_INTERNAL, std::string("the plan does not evaluate at these shapes: ") + e.what());
  }
  return cache.emplace(key, std::move(sig)).first->second;
}

// Everything a run does that a replay skips: the weights' and activations' addresses, the GEMM and
// conv workspace (the largest any dispatched kernel asks for at these shapes and pointers; growing
// it bumps arena_epoch, so every captured graph is captured again), then the steps: profiled one by
// one, enqueued without graphs, or captured into the signature's graph and launched.
void ExecutionContext::Impl::launch_unreplayed(Signature& sig, std::vector<void*>& ptr, const std::vector<void*>& io,
                                               std::vector<StepTime>* profile, int repeats) {
  const Plan& p = plan();
  for (size_t t = 0; t < p.tensors.size(); ++t) {
    const TensorInfo& ti = p.tensors[t];
    if (ti.kind == TensorKind::weight) ptr[t] = static_cast<char*>(s->weights_dev) + ti.weight_offset;
    else if (ti.kind == TensorKind::activation && sig.mp.offset[t] >= 0) ptr[t] = static_cast<char*>(arena) + sig.mp.offset[t];
  }
  for (size_t t = 0; t < p.tensors.size(); ++t)
    if (sig.mp.alias_of[t] != static_cast<int>(t)) ptr[t] = ptr[static_cast<size_t>(sig.mp.alias_of[t])];
  size_t ws = 0;
  for (const auto& st : p.steps)
    if (st.op == "gemm") {
      sabre_gemm_args a = gemm_args(st, sig, ptr);
      ws = std::max(ws, gemm_kernel(st, a, nullptr).workspace_size(&a));
    } else if (st.op == "conv") {
      sabre_conv_args a = conv_step_args(st, sig, ptr);
      ws = std::max(ws, conv_kernel(st, a, nullptr).workspace_size(&a));
    }
  if (ws > workspace_size) {
    cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    cuda_check(cudaFree(workspace), "freeing the GEMM/conv workspace to grow it");
    workspace = nullptr;
    workspace_size = 0;
    cuda_check(cudaMalloc(&workspace, ws), "allocating the GEMM/conv workspace");
    workspace_size = ws;
    ++arena_epoch;
  }
  if (profile) {
    profile_steps(sig, ptr, *profile, repeats);
  } else if (!use_graphs) {
    enqueue_all(sig, ptr);
  } else {
    cuda_check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    cudaGraph_t graph = nullptr;
    try {
      enqueue_all(sig, ptr);
    } catch (...) {
      cudaStreamEndCapture(stream, &graph);  // abandons the capture; the stream is usable again
      if (graph) cudaGraphDestroy(graph);
      cudaGetLastError();
      throw;
    }
    cuda_check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
    // Same signature, other pointers (a caller alternating buffers): updating the instantiated
    // graph in place is much cheaper than instantiating again; fall back when CUDA refuses.
    bool updated = false;
    if (sig.exec) {
      cudaGraphExecUpdateResultInfo info{};
      updated = cudaGraphExecUpdate(sig.exec, graph, &info) == cudaSuccess;
      if (!updated) {
        cudaGetLastError();  // a refused update is not an error: the graph is instantiated again below
        cuda_check(cudaGraphExecDestroy(sig.exec), "cudaGraphExecDestroy");
        sig.exec = nullptr;
      }
    }
    if (!updated) {
      cudaGraphExec_t exec = nullptr;
      cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
      if (e != cudaSuccess) cudaGraphDestroy(graph);
      cuda_check(e, "cudaGraphInstantiate");
      sig.exec = exec;
    }
    cuda_check(cudaGraphDestroy(graph), "cudaGraphDestroy");
    sig.io = io;
    sig.epoch = arena_epoch;
    cuda_check(cudaGraphLaunch(sig.exec, stream), "cudaGraphLaunch");
  }
}

void ExecutionContext::Impl::run(const std::vector<sabre_tensor>& inputs, std::vector<sabre_tensor>& outputs, bool sync,
                                 std::vector<StepTime>* profile, int repeats) {
  const Plan& p = plan();
  cuda_check(cudaSetDevice(s->device), "cudaSetDevice");
  // 1. Match inputs by name and check each descriptor.
  std::vector<const sabre_tensor*> by_pos(p.inputs.size(), nullptr);
  auto names = [&](const std::vector<TensorSpec>& specs) {
    std::string o;
    for (const auto& sp : specs) o += (o.empty() ? "" : ", ") + sp.name;
    return o;
  };
  for (const auto& t : inputs) {
    std::string name = t.name ? t.name : "";
    size_t k = 0;
    while (k < s->in_specs.size() && s->in_specs[k].name != name) ++k;
    if (k == s->in_specs.size())
      throw Error(SABRE_ERR_INVALID_ARGUMENT, "unknown input '" + name + "'; the model's inputs are: " + names(s->in_specs));
    if (by_pos[k]) throw Error(SABRE_ERR_INVALID_ARGUMENT, "input '" + name + "' is given twice");
    by_pos[k] = &t;
  }
  std::vector<std::vector<int64_t>> in_shapes;
  for (size_t k = 0; k < by_pos.size(); ++k) {
    const TensorSpec& spec = s->in_specs[k];
    const sabre_tensor* t = by_pos[k];
    if (!t) throw Error(SABRE_ERR_INVALID_ARGUMENT, "missing input '" + spec.name + "'; the model's inputs are: " + names(s->in_specs));
    if (t->device_type != SABRE_DEVICE_CUDA)
      throw Error(SABRE_ERR_INVALID_ARGUMENT, "input '" + spec.name + "' is not in CUDA device memory (device_type " +
                                                  std::to_string(t->device_type) + "); copy it to the GPU first");
    if (t->device_id != s->device)
      throw Error(SABRE_ERR_INVALID_ARGUMENT, "input '" + spec.name + "' is on device " + std::to_string(t->device_id) +
                                                  " but the session runs on device " + std::to_string(s->device));
    if (t->dtype.code != spec.dtype.code || t->dtype.bits != spec.dtype.bits || t->dtype.lanes != 1)
      throw Error(SABRE_ERR_INVALID_ARGUMENT, "input '" + spec.name + "' is " + dlpack_name(t->dtype) +
                                                  " but the model expects " + dlpack_name(spec.dtype));
    if (t->ndim < 0 || (t->ndim > 0 && !t->shape))
      throw Error(SABRE_ERR_INVALID_ARGUMENT, "input '" + spec.name + "' has no shape");
    std::vector<int64_t> sh(t->shape, t->shape + t->ndim);
    for (int64_t d : sh)
      if (d < 0) throw Error(SABRE_ERR_INVALID_ARGUMENT, "input '" + spec.name + "' has a negative dim: " + shape_str(sh));
    if (t->strides) {
      int64_t want = 1;
      for (int d = t->ndim - 1; d >= 0; --d) {
        if (sh[static_cast<size_t>(d)] != 1 && t->strides[d] != want)
          throw Error(SABRE_ERR_INVALID_ARGUMENT, "input '" + spec.name + "' is strided; pass a dense row-major tensor");
        want *= sh[static_cast<size_t>(d)];
      }
    }
    if (!t->data && numel(sh) > 0) throw Error(SABRE_ERR_INVALID_ARGUMENT, "input '" + spec.name + "' has a null data pointer");
    in_shapes.push_back(std::move(sh));
  }
  Signature& sig = signature(in_shapes);

  // 2. Outputs: the caller's buffers where given (checked), else the context's.
  std::vector<sabre_tensor*> out_by_pos(p.outputs.size(), nullptr);
  for (auto& t : outputs) {
    std::string name = t.name ? t.name : "";
    size_t k = 0;
    while (k < s->out_specs.size() && s->out_specs[k].name != name) ++k;
    if (k == s->out_specs.size())
      throw Error(SABRE_ERR_INVALID_ARGUMENT, "unknown output '" + name + "'; the model's outputs are: " + names(s->out_specs));
    if (out_by_pos[k]) throw Error(SABRE_ERR_INVALID_ARGUMENT, "output '" + name + "' is given twice");
    out_by_pos[k] = &t;
  }
  std::vector<void*> ptr(p.tensors.size(), nullptr);
  for (size_t k = 0; k < p.inputs.size(); ++k) ptr[static_cast<size_t>(p.inputs[k])] = by_pos[k]->data;
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    auto id = static_cast<size_t>(p.outputs[k]);
    const auto& want = sig.shapes[id];
    sabre_tensor* t = out_by_pos[k];
    if (t && t->data) {
      const TensorSpec& spec = s->out_specs[k];
      if (t->device_type != SABRE_DEVICE_CUDA || t->device_id != s->device)
        throw Error(SABRE_ERR_INVALID_ARGUMENT, "output '" + spec.name + "' must be device memory on device " + std::to_string(s->device));
      if (t->dtype.code != spec.dtype.code || t->dtype.bits != spec.dtype.bits)
        throw Error(SABRE_ERR_INVALID_ARGUMENT, "output '" + spec.name + "' is " + dlpack_name(t->dtype) + " but the model writes " +
                                                    dlpack_name(spec.dtype));
      if (t->ndim < 0 || (t->ndim > 0 && !t->shape))
        throw Error(SABRE_ERR_INVALID_ARGUMENT, "output '" + spec.name + "' has no shape");
      std::vector<int64_t> got(t->shape, t->shape + t->ndim);
      if (got != want)
        throw Error(SABRE_ERR_INVALID_ARGUMENT, "output '" + spec.name + "' has shape " + shape_str(got) + " but these inputs give " +
                                                    shape_str(want));
      ptr[id] = t->data;
    } else {
      if (out_cap[k] < sig.bytes[id]) {
        cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        cuda_check(cudaFree(out_buf[k]), "freeing output '" + s->out_specs[k].name + "' to grow it");
        out_buf[k] = nullptr;
        out_cap[k] = 0;
        cuda_check(cudaMalloc(&out_buf[k], sig.bytes[id]), "allocating output '" + s->out_specs[k].name + "'");
        out_cap[k] = sig.bytes[id];
      }
      ptr[id] = out_buf[k];
    }
  }
  // 3. Arena (grows; growing invalidates every captured graph).
  if (sig.mp.peak_bytes > arena_size) {
    cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    cuda_check(cudaFree(arena), "freeing the activation arena to grow it");
    arena = nullptr;
    arena_size = 0;
    cuda_check(cudaMalloc(&arena, sig.mp.peak_bytes), "allocating " + std::to_string(sig.mp.peak_bytes) + " bytes of activations");
    arena_size = sig.mp.peak_bytes;
    ++arena_epoch;
  }
  // 4. Replay: the signature's graph was captured with these inputs, outputs, arena and workspace
  // (growing either bumps arena_epoch), and the workspace was sized then for exactly these
  // arguments, so nothing else needs doing again. Everything up to the launch counts in the
  // latency a caller sees (and in `sabre bench`'s gpu ms, whose start event precedes it): sizing
  // the workspace on every run cost BERT-base (49 GEMM steps) 135-176 us a run on the H200's host
  // (bench/results/host_overhead_h200_2026-12-04.txt).
  std::vector<void*> io;
  for (int id : p.inputs) io.push_back(ptr[static_cast<size_t>(id)]);
  for (int id : p.outputs) io.push_back(ptr[static_cast<size_t>(id)]);
  stats.graph_replayed = false;
  if (!profile && use_graphs && sig.exec && sig.io == io && sig.epoch == arena_epoch) {
    stats.graph_replayed = true;
    cuda_check(cudaGraphLaunch(sig.exec, stream), "cudaGraphLaunch");
  } else {
    launch_unreplayed(sig, ptr, io, profile, repeats);
  }
  if (sync) cuda_check(cudaStreamSynchronize(stream), "running the model (cudaStreamSynchronize)");
  // 5. Fill the returned descriptors.
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    sabre_tensor* t = out_by_pos[k];
    if (!t || t->data) continue;
    auto id = static_cast<size_t>(p.outputs[k]);
    out_shapes[k] = sig.shapes[id];
    t->data = ptr[id];
    t->device_type = SABRE_DEVICE_CUDA;
    t->device_id = s->device;
    t->dtype = s->out_specs[k].dtype;
    t->ndim = static_cast<int32_t>(out_shapes[k].size());
    t->shape = out_shapes[k].data();
    t->strides = nullptr;
  }
  stats.peak_activation_bytes = sig.mp.peak_bytes;
  stats.activation_bytes_without_reuse = sig.mp.sum_bytes;
  stats.prefetched_weights = sig.prefetched_weights;
  stats.prefetched_bytes = sig.prefetched_bytes;
}

// The gemm step's kernel: its dispatch table read at m and at the alignment the actual extents,
// strides and pointers allow. Throws PlanError (the caller says which step).
const sabre_kernel_entry& ExecutionContext::Impl::gemm_kernel(const Step& st, const sabre_gemm_args& a,
                                                              std::string* name) const {
  const size_t elem = ir::size_of(plan().tensors[static_cast<size_t>(st.outputs.at(0))].dtype);
  std::string k = select_gemm_kernel(st, a.m, gemm_alignment(a, elem));
  const sabre_kernel_entry& e = s->gemm.at(k);  // every dispatched name was checked at load
  if (name) *name = std::move(k);
  return e;
}

sabre_gemm_args ExecutionContext::Impl::gemm_args(const Step& st, const Signature& sig, const std::vector<void*>& ptr) const {
  const Dims& d = sig.dims;
  sabre_gemm_args a{};
  try {
    a.m = param_dim(st, "m", d);
    a.n = param_dim(st, "n", d);
    a.k = param_dim(st, "k", d);
    a.batch = param_dim(st, "batch", d, 1);
    a.lda = param_dim(st, "lda", d, a.k);
    const std::string layout = param_str(st, "layout", "tn");
    a.ldb = param_dim(st, "ldb", d, layout == "tt" ? a.n : a.k);
    a.ldd = param_dim(st, "ldd", d, a.n);
    a.ldr = param_dim(st, "ldr", d, a.n);
    a.stride_a = param_dim(st, "stride_a", d, a.m * a.lda);
    a.stride_b = param_dim(st, "stride_b", d, 0);
    a.stride_d = param_dim(st, "stride_d", d, a.m * a.ldd);
    a.stride_r = param_dim(st, "stride_r", d, a.m * a.ldr);
    a.alpha = static_cast<float>(param_num(st, "alpha", 1.0));
    a.beta = static_cast<float>(param_num(st, "beta", 0.0));
    auto at = [&](size_t slot, const char* off_key) -> void* {
      if (slot >= st.inputs.size() || st.inputs[slot] < 0) return nullptr;
      auto id = static_cast<size_t>(st.inputs[slot]);
      size_t es = ir::size_of(plan().tensors[id].dtype);
      return static_cast<char*>(ptr[id]) + param_dim(st, off_key, d, 0) * static_cast<int64_t>(es);
    };
    a.a = at(0, "a_offset");
    a.b = at(1, "b_offset");
    a.bias = at(2, "bias_offset");
    a.residual = at(3, "r_offset");
    auto out = static_cast<size_t>(st.outputs.at(0));
    a.d = static_cast<char*>(ptr[out]) + param_dim(st, "d_offset", d, 0) * static_cast<int64_t>(ir::size_of(plan().tensors[out].dtype));
  } catch (const PlanError& e) {
    throw Error(SABRE_ERR_INTERNAL, e.what());
  }
  return a;
}

sabre_conv_args ExecutionContext::Impl::conv_step_args(const Step& st, const Signature& sig,
                                                      const std::vector<void*>& ptr) const {
  sabre_conv_args a{};
  try {
    a = conv_args(st, sig.dims);
  } catch (const PlanError& e) {
    throw Error(SABRE_ERR_INTERNAL, e.what());
  }
  auto at = [&](size_t slot) -> void* {
    if (slot >= st.inputs.size() || st.inputs[slot] < 0) return nullptr;
    return ptr[static_cast<size_t>(st.inputs[slot])];
  };
  a.x = at(0);
  a.filter = at(1);
  a.bias = at(2);
  a.residual = at(3);
  a.y = ptr[static_cast<size_t>(st.outputs.at(0))];
  return a;
}

// The conv step's kernel: its dispatch table read at the implicit GEMM's M = n·p·q.
const sabre_conv_entry& ExecutionContext::Impl::conv_kernel(const Step& st, const sabre_conv_args& a,
                                                            std::string* name) const {
  std::string k;
  try {
    k = select_gemm_kernel(st, a.n * a.p * a.q);
  } catch (const PlanError& e) {
    throw Error(SABRE_ERR_INTERNAL, e.what());
  }
  if (name) *name = k;
  return s->conv.at(k);  // every dispatched name was checked at load
}

void ExecutionContext::Impl::enqueue(size_t i, const Signature& sig, const std::vector<void*>& ptr) {
  const Step& st = plan().steps[i];
  const std::string where = "step '" + st.name + "' (" + st.op + ")";
  auto in = [&](size_t k) -> const void* {
    if (k >= st.inputs.size() || st.inputs[k] < 0) return nullptr;
    return ptr[static_cast<size_t>(st.inputs[k])];
  };
  auto out = [&](size_t k) -> void* {
    if (k >= st.outputs.size()) return nullptr;
    return ptr[static_cast<size_t>(st.outputs[k])];
  };
  auto tin = [&](size_t k) -> const TensorInfo& { return plan().tensors[static_cast<size_t>(st.inputs.at(k))]; };
  auto shin = [&](size_t k) -> const std::vector<int64_t>& { return sig.shapes[static_cast<size_t>(st.inputs.at(k))]; };
  auto shout = [&](size_t k) -> const std::vector<int64_t>& { return sig.shapes[static_cast<size_t>(st.outputs.at(k))]; };
  auto bytes_out = [&](size_t k) { return sig.bytes[static_cast<size_t>(st.outputs.at(k))]; };
  bool any = false;
  for (size_t k = 0; k < st.outputs.size(); ++k) any |= bytes_out(k) > 0;
  if (!any) return;  // nothing to compute at these shapes
  auto native_check = [&](cudaError_t e) {
    if (e == cudaSuccess) return;
    std::string msg = native::last_error_message();
    cudaGetLastError();
    throw Error(e == cudaErrorInvalidValue || e == cudaErrorNotSupported ? SABRE_ERR_INTERNAL : SABRE_ERR_CUDA,
                where + " failed: " + cudaGetErrorName(e) + (msg.empty() ? "" : ": " + msg));
  };
  auto axis_of = [&](int64_t axis, size_t rank) { return axis < 0 ? axis + static_cast<int64_t>(rank) : axis; };
  const Dims& d = sig.dims;
  try {
    const std::string& op = st.op;
    if (op == "gemm") {
      sabre_gemm_args a = gemm_args(st, sig, ptr);
      a.workspace = workspace;
      a.workspace_size = workspace_size;
      std::string kname;
      const sabre_kernel_entry& k = gemm_kernel(st, a, &kname);
      int rc = k.run(&a, reinterpret_cast<sabre_stream_t>(stream));
      if (rc != SABRE_OK)
        throw Error(rc == SABRE_CUDA_ERROR ? SABRE_ERR_CUDA : SABRE_ERR_INTERNAL,
                    where + ": kernel " + kname + " failed (status " + std::to_string(rc) + ") at m=" + std::to_string(a.m) +
                        " n=" + std::to_string(a.n) + " k=" + std::to_string(a.k) + ": " + (k.last_error ? k.last_error() : ""));
    } else if (op == "conv") {
      sabre_conv_args a = conv_step_args(st, sig, ptr);
      a.workspace = workspace;
      a.workspace_size = workspace_size;
      std::string kname;
      const sabre_conv_entry& k = conv_kernel(st, a, &kname);
      int rc = k.run(&a, reinterpret_cast<sabre_stream_t>(stream));
      if (rc != SABRE_OK)
        throw Error(rc == SABRE_CUDA_ERROR ? SABRE_ERR_CUDA : SABRE_ERR_INTERNAL,
                    where + ": conv kernel " + kname + " failed (status " + std::to_string(rc) + ") at n,h,w,c=" +
                        std::to_string(a.n) + "," + std::to_string(a.h) + "," + std::to_string(a.w) + "," +
                        std::to_string(a.c) + " k,r,s=" + std::to_string(a.k) + "," + std::to_string(a.r) + "," +
                        std::to_string(a.s) + ": " + (k.last_error ? k.last_error() : ""));
    } else if (op == "softmax") {
      native::SoftmaxArgs a;
      a.dtype = tin(0).dtype;
      a.x = in(0);
      a.y = out(0);
      const auto& xs = shin(0);
      int64_t cols_def = xs.empty() ? 1 : xs.back();
      a.cols = param_dim(st, "cols", d, cols_def);
      a.b = param_dim(st, "b", d, 1);
      a.h = param_dim(st, "h", d, 1);
      a.q = param_dim(st, "q", d, a.cols ? numel(xs) / a.cols / (a.b * a.h) : 0);
      a.scale = static_cast<float>(param_num(st, "scale", 1.0));
      a.causal = param_bool(st, "causal", false);
      a.mask = in(1);
      if (a.mask) {
        a.mask_dtype = tin(1).dtype;
        auto ms = param_dims(st, "mask_stride", d);
        if (ms.size() != 3) throw PlanError("plan: " + where + " has a mask but no 3-element mask_stride");
        std::copy(ms.begin(), ms.end(), a.mask_stride);
      }
      native_check(native::softmax(a, stream));
    } else if (op == "layernorm") {
      native::LayerNormArgs a;
      a.dtype = tin(0).dtype;
      const auto& xs = shin(0);
      a.cols = param_dim(st, "cols", d, xs.empty() ? 1 : xs.back());
      a.rows = param_dim(st, "rows", d, a.cols ? numel(xs) / a.cols : 0);
      a.eps = static_cast<float>(param_num(st, "eps", 1e-5));
      a.x = in(0);
      a.gamma = in(1);
      a.beta = in(2);
      a.residual = in(3);
      a.y = out(0);
      if (param_bool(st, "f32_copy", false)) {
        if (st.outputs.size() != 2 || plan().tensors[static_cast<size_t>(st.outputs[1])].dtype != DType::f32)
          throw PlanError("plan: " + where + " has f32_copy but no f32 second output");
        a.y_f32 = static_cast<float*>(out(1));
      } else {
        a.sum_out = out(1);
      }
      native_check(native::layernorm(a, stream));
    } else if (op == "embed_layernorm") {
      // inputs: gamma, beta (-1: none), then (table, ids) per term; docs/RUNTIME.md.
      native::EmbedLayerNormArgs a;
      a.dtype = plan().tensors[static_cast<size_t>(st.outputs.at(0))].dtype;
      const auto rows = param_dims(st, "row_dims", d), offsets = param_dims(st, "offsets", d),
                 strides = param_dims(st, "strides", d);
      const size_t terms = st.inputs.size() >= 2 ? (st.inputs.size() - 2) / 2 : 0;
      if (rows.empty() || rows.size() > static_cast<size_t>(native::kMaxEmbedRank) || terms < 1 ||
          terms > static_cast<size_t>(native::kMaxEmbedTerms) || st.inputs.size() != 2 + 2 * terms ||
          offsets.size() != terms || strides.size() != terms * rows.size())
        throw PlanError("plan: " + where + " needs 1-" + std::to_string(native::kMaxEmbedRank) + " row_dims, 1-" +
                        std::to_string(native::kMaxEmbedTerms) + " (table, ids) input pairs after gamma and beta, " +
                        "an offset per term and a stride per term and row dim");
      a.rank = static_cast<int>(rows.size());
      std::copy(rows.begin(), rows.end(), a.row_dims);
      a.num_terms = static_cast<int>(terms);
      for (size_t t = 0; t < terms; ++t) {
        native::EmbedTerm& m = a.terms[t];
        if (shin(2 + 2 * t).size() != 2) throw PlanError("plan: " + where + ": embedding tables must be [vocab, cols]");
        m.table = in(2 + 2 * t);
        m.vocab = shin(2 + 2 * t)[0];
        m.ids = in(3 + 2 * t);
        m.ids_dtype = tin(3 + 2 * t).dtype;
        m.offset = offsets[t];
        std::copy(strides.begin() + static_cast<std::ptrdiff_t>(t * rows.size()),
                  strides.begin() + static_cast<std::ptrdiff_t>((t + 1) * rows.size()), m.strides);
      }
      a.cols = param_dim(st, "cols", d);
      a.eps = static_cast<float>(param_num(st, "eps", 1e-5));
      a.gamma = in(0);
      a.beta = in(1);
      a.y = out(0);
      native_check(native::embed_layernorm(a, stream));
    } else if (op == "elementwise") {
      std::vector<std::vector<int64_t>> in_dims;
      std::vector<const void*> ins;
      std::vector<void*> outs;
      for (size_t k = 0; k < st.inputs.size(); ++k) {
        in_dims.push_back(shin(k));
        ins.push_back(in(k));
      }
      for (size_t k = 0; k < st.outputs.size(); ++k) outs.push_back(out(k));
      const auto& chain = s->chains.at(i);
      SabreEwParams prm = native::prepare_params(chain, shout(0), in_dims, ins, outs);
      auto l = s->launchers.find(i);
      if (l != s->launchers.end()) {
        int rc = l->second(&prm, native::ew_grid_size(prm), stream);
        native_check(static_cast<cudaError_t>(rc));
      } else {
        native_check(native::elementwise_run(s->programs.at(i), prm, stream));
      }
    } else if (op == "where") {
      native_check(native::where(tin(1).dtype, in(0), shin(0), in(1), shin(1), in(2), shin(2), out(0), shout(0), stream));
    } else if (op == "cast") {
      native_check(native::cast(tin(0).dtype, plan().tensors[static_cast<size_t>(st.outputs[0])].dtype, in(0), out(0),
                                numel(shin(0)), stream));
    } else if (op == "reduce") {
      static const std::map<std::string, native::ReduceOp> kinds = {
          {"sum", native::ReduceOp::sum}, {"mean", native::ReduceOp::mean}, {"max", native::ReduceOp::max},
          {"min", native::ReduceOp::min}, {"prod", native::ReduceOp::prod}, {"sum_square", native::ReduceOp::sum_square}};
      auto kind = kinds.find(param_str(st, "kind", "sum"));
      if (kind == kinds.end()) throw PlanError("plan: " + where + " has unknown reduce kind");
      native_check(native::reduce(kind->second, tin(0).dtype, in(0), shin(0), param_dims(st, "axes", d), out(0), stream));
    } else if (op == "permute") {
      native_check(native::permute(ir::size_of(tin(0).dtype), in(0), shin(0), param_dims(st, "perm", d), out(0), stream));
    } else if (op == "nchw_to_nhwc") {
      // Dims from the tensors: x [n,c,h,w], y [n,h,w,c_pad]; the dtypes may differ (a fused input cast).
      const auto& xs = shin(0);
      const auto& ys = shout(0);
      if (xs.size() != 4 || ys.size() != 4 || ys[0] != xs[0] || ys[1] != xs[2] || ys[2] != xs[3] || ys[3] < xs[1])
        throw PlanError("plan: " + where + " needs x [n,c,h,w] and y [n,h,w,c_pad] with c_pad >= c");
      native_check(native::nchw_to_nhwc(tin(0).dtype, plan().tensors[static_cast<size_t>(st.outputs[0])].dtype, in(0),
                                        xs[0], xs[1], xs[2], xs[3], ys[3], out(0), stream));
    } else if (op == "im2col") {
      // x [n,c,h,w] as the plan gives it (a model input read in place, its dtype cast on the way).
      const Im2colGeometry g = im2col_geometry(st, d, shout(0));
      if (shin(0) != std::vector<int64_t>{g.n, g.c, g.h, g.w})
        throw PlanError("plan: " + where + " reads x " + shape_str(shin(0)) + " but its params say [n,c,h,w] = " +
                        shape_str({g.n, g.c, g.h, g.w}));
      native::Im2colArgs a;
      a.x_dtype = tin(0).dtype;
      a.a_dtype = plan().tensors[static_cast<size_t>(st.outputs[0])].dtype;
      a.x = in(0);
      a.a = out(0);
      a.n = g.n, a.c = g.c, a.h = g.h, a.w = g.w, a.r = g.r, a.s = g.s, a.p = g.p, a.q = g.q, a.cols = g.cols;
      a.pad_h = g.pad_h, a.pad_w = g.pad_w, a.stride_h = g.stride_h, a.stride_w = g.stride_w;
      a.dil_h = g.dil_h, a.dil_w = g.dil_w;
      native_check(native::im2col(a, stream));
    } else if (op == "stem_conv") {
      // x [n,c,h,w] as the plan gives it (a model input read in place, its dtype cast on the way).
      const StemConvGeometry g = stem_conv_geometry(st, d, shin(0), shin(1), shout(0));
      native::StemConvArgs a;
      a.x_dtype = tin(0).dtype;
      a.dtype = plan().tensors[static_cast<size_t>(st.outputs[0])].dtype;
      a.x = in(0);
      a.w = in(1);
      a.bias = in(2);
      a.y = out(0);
      a.n = g.n, a.c = g.c, a.h = g.h, a.w_ = g.w, a.k = g.k, a.r = g.r, a.s = g.s, a.p = g.p, a.q = g.q, a.cols = g.cols;
      a.pad_h = g.pad_h, a.pad_w = g.pad_w, a.stride_h = g.stride_h, a.stride_w = g.stride_w;
      a.dil_h = g.dil_h, a.dil_w = g.dil_w;
      a.clamp = g.clamp.on, a.clamp_min = g.clamp.lo, a.clamp_max = g.clamp.hi;
      native_check(native::stem_conv(a, stream));
    } else if (op == "slice") {
      auto starts = param_dims(st, "starts", d), ends = param_dims(st, "ends", d), axes = param_dims(st, "axes", d),
           steps = param_dims(st, "steps", d);
      native_check(native::slice(ir::size_of(tin(0).dtype), in(0), shin(0), starts, ends, axes, steps, out(0), stream));
    } else if (op == "strided_copy") {
      native_check(native::strided_copy(ir::size_of(tin(0).dtype), in(0), param_dim(st, "offset", d, 0), shout(0),
                                        param_dims(st, "strides", d), out(0), stream));
    } else if (op == "concat") {
      std::vector<const void*> xs;
      std::vector<std::vector<int64_t>> dims;
      for (size_t k = 0; k < st.inputs.size(); ++k) {
        xs.push_back(in(k));
        dims.push_back(shin(k));
      }
      native_check(native::concat(ir::size_of(tin(0).dtype), xs, dims, axis_of(param_dim(st, "axis", d), shout(0).size()),
                                  out(0), stream));
    } else if (op == "split") {
      int64_t axis = axis_of(param_dim(st, "axis", d), shin(0).size());
      std::vector<int64_t> sizes;
      std::vector<void*> ys;
      for (size_t k = 0; k < st.outputs.size(); ++k) {
        sizes.push_back(shout(k).at(static_cast<size_t>(axis)));
        ys.push_back(out(k));
      }
      native_check(native::split(ir::size_of(tin(0).dtype), in(0), shin(0), axis, sizes, ys, stream));
    } else if (op == "gather") {
      native_check(native::gather(ir::size_of(tin(0).dtype), in(0), shin(0), axis_of(param_dim(st, "axis", d, 0), shin(0).size()),
                                  in(1), tin(1).dtype, numel(shin(1)), out(0), stream));
    } else if (op == "pool2d" || op == "global_average_pool") {
      bool nhwc = param_str(st, "layout", "nchw") == "nhwc";
      const auto& xs = shin(0);
      if (xs.size() != 4) throw PlanError("plan: " + where + " needs a 4-D input");
      int64_t n = xs[0], c = nhwc ? xs[3] : xs[1], h = nhwc ? xs[1] : xs[2], w = nhwc ? xs[2] : xs[3];
      native::Layout layout = nhwc ? native::Layout::nhwc : native::Layout::nchw;
      if (op == "global_average_pool") {
        native_check(native::global_average_pool(tin(0).dtype, layout, in(0), n, c, h, w, out(0), stream));
      } else {
        native::PoolArgs a;
        a.kind = param_str(st, "kind", "max") == "average" ? native::PoolKind::average : native::PoolKind::max;
        a.layout = layout;
        a.dtype = tin(0).dtype;
        a.x = in(0);
        a.y = out(0);
        a.n = n, a.c = c, a.h = h, a.w = w;
        auto two = [&](const char* key, int64_t def, int64_t* dst) {
          auto v = param_dims(st, key, d);
          dst[0] = v.size() > 0 ? v[0] : def;
          dst[1] = v.size() > 1 ? v[1] : def;
        };
        two("kernel", 1, a.kernel);
        two("stride", 1, a.stride);
        two("dilation", 1, a.dilation);
        auto pads = param_dims(st, "pads", d);
        pads.resize(4, 0);
        a.pad_begin[0] = pads[0], a.pad_begin[1] = pads[1], a.pad_end[0] = pads[2], a.pad_end[1] = pads[3];
        a.count_include_pad = param_bool(st, "count_include_pad", false);
        native::pool_output_dims(a, param_bool(st, "ceil_mode", false));
        native_check(native::pool2d(a, stream));
      }
    } else if (op == "attention") {
      native::AttentionArgs a;
      a.dtype = tin(0).dtype;
      a.q = in(0), a.k = in(1), a.v = in(2), a.o = out(0);
      // Q, K and V at column offsets of one packed projection (lower.cpp: packed_split).
      if (auto off = param_dims(st, "offsets", d); !off.empty()) {
        if (off.size() != 3) throw PlanError("plan: " + where + " param 'offsets' needs 3 column offsets");
        const int64_t es = static_cast<int64_t>(ir::size_of(a.dtype));
        a.q = static_cast<const char*>(a.q) + off[0] * es;
        a.k = static_cast<const char*>(a.k) + off[1] * es;
        a.v = static_cast<const char*>(a.v) + off[2] * es;
      }
      a.b = param_dim(st, "b", d), a.h = param_dim(st, "h", d), a.sq = param_dim(st, "sq", d);
      a.sk = param_dim(st, "sk", d), a.d = param_dim(st, "d", d);
      auto three = [&](const char* key, int64_t* dst) {
        auto v = param_dims(st, key, d);
        if (v.size() != 3) throw PlanError("plan: " + where + " param '" + key + "' needs 3 strides");
        for (int i = 0; i < 3; ++i) dst[i] = v[static_cast<size_t>(i)];
      };
      three("q_stride", a.q_stride);
      three("k_stride", a.k_stride);
      three("v_stride", a.v_stride);
      three("o_stride", a.o_stride);
      a.scale = static_cast<float>(param_num(st, "scale", 1.0));
      a.causal = param_bool(st, "causal", false);
      if (st.inputs.size() > 3 && st.inputs[3] >= 0) {
        a.mask = in(3);
        a.mask_dtype = tin(3).dtype;
        three("mask_stride", a.mask_stride);
        if (a.mask_dtype == DType::i64) {  // a select mask: its two values
          if (!st.params.get("mask_true") || !st.params.get("mask_false"))
            throw PlanError("plan: " + where + " has an i64 mask but not both params mask_true and mask_false");
          a.mask_true = static_cast<float>(param_num(st, "mask_true", 0.0));
          a.mask_false = static_cast<float>(param_num(st, "mask_false", 0.0));
        }
      }
      native_check(native::attention(a, stream));
    } else if (op == "depthwise_conv" || op == "grouped_conv") {
      native::DepthwiseArgs a;
      a.dtype = tin(0).dtype;
      a.x = in(0);
      a.w = in(1);
      a.bias = st.inputs.size() > 2 && st.inputs[2] >= 0 ? in(2) : nullptr;
      a.y = out(0);
      a.n = param_dim(st, "n", d), a.h = param_dim(st, "h", d), a.w_ = param_dim(st, "w", d);
      a.c = param_dim(st, "c", d), a.r = param_dim(st, "r", d), a.s = param_dim(st, "s", d);
      a.p = param_dim(st, "p", d), a.q = param_dim(st, "q", d);
      if (op == "grouped_conv") a.k = param_dim(st, "k", d), a.groups = param_dim(st, "groups", d);
      auto two = [&](const char* key, int64_t def) {
        auto v = param_dims(st, key, d);
        v.resize(2, def);
        return v;
      };
      auto pads = two("pads", 0), strides = two("strides", 1), dils = two("dilations", 1);
      a.pad_h = pads[0], a.pad_w = pads[1], a.stride_h = strides[0], a.stride_w = strides[1];
      a.dil_h = dils[0], a.dil_w = dils[1];
      const Clamp cl = clamp_param(st);  // a fused Relu/Clip
      a.clamp = cl.on, a.clamp_min = cl.lo, a.clamp_max = cl.hi;
      native_check(native::depthwise_conv2d(a, stream));
    } else if (op == "fill") {
      native_check(native::fill_values(plan().tensors[static_cast<size_t>(st.outputs[0])].dtype, out(0),
                                       numel(shout(0)), param_dims(st, "values", d), stream));
    } else if (op == "iota") {
      native_check(native::iota(plan().tensors[static_cast<size_t>(st.outputs[0])].dtype, out(0), numel(shout(0)),
                                static_cast<double>(param_dim(st, "start", d, 0)),
                                static_cast<double>(param_dim(st, "delta", d, 1)), stream));
    } else if (op == "copy" || op == "reshape") {
      void* y = out(0);
      if (y != in(0))  // an aliased reshape view needs no work
        cuda_check(cudaMemcpyAsync(y, in(0), bytes_out(0), cudaMemcpyDeviceToDevice, stream), where + ": cudaMemcpyAsync");
    } else {
      throw PlanError("plan: " + where + " is an unknown op");
    }
  } catch (const PlanError& e) {
    throw Error(SABRE_ERR_INTERNAL, e.what());
  } catch (const std::invalid_argument& e) {
    throw Error(SABRE_ERR_INTERNAL, where + ": " + e.what());
  }
}

#else  // no CUDA

struct ExecutionContext::Impl {
  RunStats stats;
};
ExecutionContext::ExecutionContext(Session&, void*, bool) : impl_(std::make_unique<Impl>()) {
  throw Error(SABRE_ERR_NO_DEVICE, "no CUDA device: this sabre was built without the CUDA toolkit");
}
ExecutionContext::~ExecutionContext() = default;
void* ExecutionContext::stream() const { return nullptr; }
const RunStats& ExecutionContext::last_stats() const { return impl_->stats; }
void ExecutionContext::run(const std::vector<sabre_tensor>&, std::vector<sabre_tensor>&, bool) {
  throw Error(SABRE_ERR_NO_DEVICE, "no CUDA device: this sabre was built without the CUDA toolkit");
}
std::vector<StepTime> ExecutionContext::profile(const std::vector<sabre_tensor>&, std::vector<sabre_tensor>&, int) {
  throw Error(SABRE_ERR_NO_DEVICE, "no CUDA device: this sabre was built without the CUDA toolkit");
}

#endif

}  // namespace sabre
