// sabre's C++ runtime API: a Session loads a compiled artifact once (validated, kernels loaded,
// weights on the device); an ExecutionContext per thread or stream runs it with its own
// activation arena and CUDA-graph cache (one graph per input-shape signature). Tensors are named
// DLPack-style descriptors (sabre_tensor below): the caller's device pointers are used in place.
// Errors throw sabre::Error (one line: what is wrong, what to do); after one, the session and
// context stay usable. docs/RUNTIME.md section 5.
// Tests: tests/unit/runtime_capi_test.cpp, tests/gpu/runtime_session_test.cpp
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "sabre/sabre.h"

// A tensor in device memory named by the model's input or output name, with DLPack's device and
// dtype codes (strides NULL = dense row-major; only dense tensors are accepted). For an output
// passed with data == NULL the context supplies its own buffer (valid until the context's next
// run) and sets data, and shape points at the context's copy of the shape. The C API (sabre.h)
// takes DLPack's DLTensor in model order instead.
struct sabre_tensor {
  const char* name;
  void* data;
  int32_t device_type;  // SABRE_DEVICE_CUDA
  int32_t device_id;
  sabre_dtype dtype;
  int32_t ndim;
  const int64_t* shape;
  const int64_t* strides;  // elements; NULL = dense
};

namespace sabre {

// The library's version, "MAJOR.MINOR.PATCH" (sabre_version()).
const char* version();

struct Error : std::runtime_error {
  Error(sabre_rt_status c, const std::string& what) : std::runtime_error(what), code(c) {}
  sabre_rt_status code;
};

struct TensorSpec {
  std::string name;
  sabre_dtype dtype;
  std::vector<std::string> shape;  // dim strings ("batch", "768")
};

// Timing-free facts about one run, for bench and tests.
struct RunStats {
  uint64_t peak_activation_bytes = 0;
  uint64_t activation_bytes_without_reuse = 0;
  bool graph_replayed = false;  // the shape signature had a captured graph already
  // L2 weight prefetch (SABRE_PREFETCH; docs/RUNTIME.md section 5): weight tensors a run asks the
  // L2 to fetch ahead of the GEMM or conv reading them (at its shapes: large GEMMs' are left out),
  // their bytes, and how many kernel steps ahead. Before the first run: every scheduled weight.
  uint64_t prefetched_weights = 0;
  uint64_t prefetched_bytes = 0;
  int prefetch_lead = 0;
};

// One plan step's GPU time in a profiled run (ExecutionContext::profile, sabre bench --profile).
struct StepTime {
  size_t index = 0;
  std::string op;      // "gemm", "attention", "layernorm", ...
  std::string name;    // the node or region it came from
  std::string kernel;  // the dispatched CUTLASS kernel for gemm and conv steps, else empty
  double us = 0;       // median over the repeats
  std::vector<double> runs_us;  // each repeat's time, in run order (the trace lays them out)
  // The step's operands and results at the profiled shapes, and their bytes summed: what the step
  // reads and writes if it touches each once (a view such as reshape moves none of it).
  std::vector<std::vector<int64_t>> input_shapes, output_shapes;
  uint64_t bytes = 0;
  double flops = 0;  // gemm and conv steps: 2·M·N·K (the implicit GEMM's for a conv); else 0, not counted
};

class ExecutionContext;

class Session {
 public:
  // Loads and validates `artifact_dir` for CUDA device `device_id`: throws Error with
  // SABRE_ERR_ARTIFACT, SABRE_ERR_NO_DEVICE, SABRE_ERR_WRONG_ARCH or SABRE_ERR_CUDA.
  explicit Session(const std::string& artifact_dir, int device_id = 0);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const std::vector<TensorSpec>& inputs() const;
  const std::vector<TensorSpec>& outputs() const;
  // The manifest's source_model ("" if none), for --compare-reference.
  const std::string& source_model() const;
  // Output shapes for these input shapes (model input order); throws Error for bad shapes.
  std::vector<std::vector<int64_t>> output_shapes(const std::vector<std::vector<int64_t>>& input_shapes) const;

  struct Impl;
  std::shared_ptr<Impl> impl_;
};

class ExecutionContext {
 public:
  // stream: a cudaStream_t or nullptr to create one (each run on it first waits for the legacy
  // default stream's work, as sabre_context_create says). use_graphs: capture a CUDA graph per
  // shape signature (off: launch step by step every time).
  explicit ExecutionContext(Session& session, void* stream = nullptr, bool use_graphs = true);
  ~ExecutionContext();
  ExecutionContext(const ExecutionContext&) = delete;
  ExecutionContext& operator=(const ExecutionContext&) = delete;

  // See sabre_run. Enqueues on stream(); synchronizes when `sync`.
  void run(const std::vector<sabre_tensor>& inputs, std::vector<sabre_tensor>& outputs, bool sync = true);
  void* stream() const;
  const RunStats& last_stats() const;
  // Runs the plan `repeats` times step by step (no graph) with a CUDA event between steps; the
  // stream is held until every step of a repeat is enqueued, so the GPU runs them back to back as
  // it would a graph. Returns each step's median time, in plan order. Synchronizes.
  std::vector<StepTime> profile(const std::vector<sabre_tensor>& inputs, std::vector<sabre_tensor>& outputs,
                                int repeats = 20);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sabre
