// Execution (include/sabre/session.h: ExecutionContext): a run's inputs and outputs checked, its
// shape signature (dims, memory plan, prefetch schedule) made once per input shapes, the arena and
// workspace grown, and the steps captured into one CUDA graph per signature and replayed. Each
// step's launch is in session_steps.cpp, the step timings in session_profile.cpp.
// Tests: tests/gpu/runtime_session_test.cpp (GPU), tests/unit/runtime_capi_test.cpp
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "runtime/session_internal.h"
#include "runtime/session_profile_nvtx.h"

namespace sabre {

#if SABRE_RUNTIME_HAVE_CUDA

namespace {

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
// limit, every scheduled weight). Read once per context.
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

}  // namespace

ExecutionContext::Impl::~Impl() {
  cuda_warn(cudaSetDevice(s->device), "cudaSetDevice (releasing a context)");
  if (stream) cuda_warn(cudaStreamSynchronize(stream), "cudaStreamSynchronize (releasing a context)");
  if (side) cuda_warn(cudaStreamDestroy(side), "cudaStreamDestroy (prefetch stream)");
  if (fork_ev) cuda_warn(cudaEventDestroy(fork_ev), "cudaEventDestroy");
  if (join_ev) cuda_warn(cudaEventDestroy(join_ev), "cudaEventDestroy");
  if (legacy_ev) cuda_warn(cudaEventDestroy(legacy_ev), "cudaEventDestroy");
  for (auto& [k, sig] : cache)
    if (sig.exec) cuda_warn(cudaGraphExecDestroy(sig.exec), "cudaGraphExecDestroy");
  cuda_warn(cudaFree(arena), "freeing the activation arena");
  cuda_warn(cudaFree(workspace), "freeing the GEMM/conv workspace");
  for (void* p : out_buf) cuda_warn(cudaFree(p), "freeing an output buffer");
  if (own_stream && stream) cuda_warn(cudaStreamDestroy(stream), "cudaStreamDestroy");
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
      const NvtxRange range(step_label(i));
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
    cuda_check(cudaEventCreateWithFlags(&c.legacy_ev, cudaEventDisableTiming), "cudaEventCreateWithFlags");
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
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const Step& st = p.steps[i];
    if (s->kinds[i] == StepKind::gemm) {
      sabre_gemm_args a = gemm_args(st, sig, ptr);
      ws = std::max(ws, gemm_kernel(st, a, nullptr).workspace_size(&a));
    } else if (s->kinds[i] == StepKind::conv) {
      sabre_conv_args a = conv_step_args(st, sig, ptr);
      ws = std::max(ws, conv_kernel(st, a, nullptr).workspace_size(&a));
    }
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
  // latency a caller sees (and in `sabre bench`'s gpu ms, whose start event precedes it), which is
  // why the workspace is sized only when a graph is captured, not on every run.
  std::vector<void*> io;
  for (int id : p.inputs) io.push_back(ptr[static_cast<size_t>(id)]);
  for (int id : p.outputs) io.push_back(ptr[static_cast<size_t>(id)]);
  stats.graph_replayed = false;
  if (legacy_ev) {
    // The context's own stream is non-blocking (graphs cannot be captured on one that syncs with
    // the legacy stream), so order it after the caller's legacy-stream work explicitly.
    cuda_check(cudaEventRecord(legacy_ev, cudaStreamLegacy), "cudaEventRecord (legacy default stream)");
    cuda_check(cudaStreamWaitEvent(stream, legacy_ev, 0), "cudaStreamWaitEvent (legacy default stream)");
  }
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
    const GemmParams& g = st.as<GemmParams>();
    auto dim = [&](const std::optional<ParamDim>& v, int64_t def) { return v ? v->eval(d) : def; };
    a.m = g.m.eval(d);
    a.n = g.n.eval(d);
    a.k = g.k.eval(d);
    a.batch = dim(g.batch, 1);
    a.lda = dim(g.lda, a.k);
    a.ldb = dim(g.ldb, g.layout.value_or("tn") == "tt" ? a.n : a.k);
    a.ldd = dim(g.ldd, a.n);
    a.ldr = dim(g.ldr, a.n);
    a.stride_a = dim(g.stride_a, a.m * a.lda);
    a.stride_b = dim(g.stride_b, 0);
    a.stride_d = dim(g.stride_d, a.m * a.ldd);
    a.stride_r = dim(g.stride_r, a.m * a.ldr);
    a.alpha = static_cast<float>(g.alpha.value_or(1.0));
    a.beta = static_cast<float>(g.beta.value_or(0.0));
    auto at = [&](size_t slot, const std::optional<ParamDim>& offset) -> void* {
      if (slot >= st.inputs.size() || st.inputs[slot] < 0) return nullptr;
      auto id = static_cast<size_t>(st.inputs[slot]);
      size_t es = ir::size_of(plan().tensors[id].dtype);
      return static_cast<char*>(ptr[id]) + dim(offset, 0) * static_cast<int64_t>(es);
    };
    a.a = at(0, g.a_offset);
    a.b = at(1, g.b_offset);
    a.bias = at(2, g.bias_offset);
    a.residual = at(3, g.r_offset);
    auto out = static_cast<size_t>(st.outputs.at(0));
    a.d = static_cast<char*>(ptr[out]) + dim(g.d_offset, 0) * static_cast<int64_t>(ir::size_of(plan().tensors[out].dtype));
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
