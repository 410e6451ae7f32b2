// What the executor's files share (include/sabre/session.h's Session and ExecutionContext): the
// loaded session, a context's state, and the CUDA status helpers. Only src/runtime/session_*.cpp
// include it: session_load.cpp (artifact -> kernels, weights, each step's launch),
// session_exec.cpp (shape signatures, arena, CUDA graphs), session_steps.cpp (one launch function
// per step kind) and session_profile.cpp (step timings).
#pragma once

#include "sabre/session.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/artifact.h"
#include "runtime/kernels.h"
#include "runtime/planner.h"
#include "runtime/resolve.h"
#include "runtime/step_kind.h"

#if SABRE_RUNTIME_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "backends/native/native.h"
#include "sabre/kernel_abi.h"
#endif

namespace sabre {

// The session files read the plan's types unqualified, as the executor always has.
using namespace runtime;

#if SABRE_RUNTIME_HAVE_CUDA

using EwLaunchFn = int (*)(const SabreEwParams*, unsigned, cudaStream_t);

// One step's launch on a context (session_steps.cpp); a step kind's launch function is one of its
// members, chosen at load.
struct StepLaunch;
using StepLaunchFn = void (StepLaunch::*)() const;
// The launch function of a step kind (session_steps.cpp).
StepLaunchFn step_launch_fn(StepKind k);

inline void cuda_check(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so the next call starts clean
  throw Error(SABRE_ERR_CUDA, what + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

// Where nothing may throw (destructors, unwinding after another error): a failed release is said
// on stderr, once per call, and the cleanup goes on.
void cuda_warn(cudaError_t e, const char* what);

inline int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

struct Session::Impl {
  LoadedArtifact art;
  int device = 0;
  std::vector<TensorSpec> in_specs, out_specs;
  void* weights_dev = nullptr;
  std::unique_ptr<KernelLibraries> kernels;  // dlopened after load_artifact verified every file
  std::map<std::string, sabre_kernel_entry> gemm;
  std::map<std::string, sabre_conv_entry> conv;
  // Per step index: the chain's program (elementwise), the generated launcher or null.
  std::map<size_t, SabreEwProgram> programs;
  std::map<size_t, EwLaunchFn> launchers;
  // Per step: its kind and launch function, resolved once at load (session_load.cpp).
  std::vector<runtime::StepKind> kinds;
  std::vector<StepLaunchFn> launch;

  ~Impl();
  void* find_symbol(const std::string& sym, const std::string& library) const;
};

struct ExecutionContext::Impl {
  std::shared_ptr<Session::Impl> s;
  cudaStream_t stream = nullptr;
  bool own_stream = false;
  // On a stream the context owns, each run first waits for what the caller already issued to the
  // legacy default stream (a plain cudaMemcpy of an input, which may return before its DMA lands).
  cudaEvent_t legacy_ev = nullptr;
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
  // Each step's NVTX range name (step_label), made at the first run (session_profile.cpp).
  std::vector<std::string> step_labels;
  const char* step_label(size_t i);

  ~Impl();

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

#else  // no CUDA in this build

struct Session::Impl {
  LoadedArtifact art;
  std::vector<TensorSpec> in_specs, out_specs;
};

#endif

}  // namespace sabre
