// sabre's compile API: an ONNX model in, an artifact directory out (what `sabre compile` does),
// for programs that compile in-process. Errors come back as a status and a message whose first
// line says what is wrong and what to do, never as an exception; an exception the progress callback throws is passed on
// unchanged, which is how a caller stops a compile. No GPU is needed unless tuning is asked for.
// `sabre compile` is a client of this call. The header is in-tree only: the compiler libraries are not installed (cmake/SabrePackage.cmake
// installs the runtime). Tests: tests/unit/compiler_api_test.cpp
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace sabre {

struct CompileOptions {
  std::string dtype = "f16";  // compute dtype: "f16" or "bf16"
  // Dynamic dims: symbol -> {min, max} (inclusive). A symbol left out gets sabre compile's default
  // range (batch-like names 1..64, others 1..512).
  std::map<std::string, std::pair<int64_t, int64_t>> dynamic_dims;
  std::string arch = "sm_90a";  // what kernels are compiled for
  // automatic: time GEMM candidates when this machine has a GPU of `arch`, else pick from the
  // tuning DB or the analytic model; always: a GPU is required; never: the analytic model picks.
  enum class Tune { automatic, always, never };
  Tune tune = Tune::automatic;
  std::string tuning_db;   // empty: the default DB (sabre db path)
  std::string tuned_for;   // pick from the DB's measurements of this GPU ("NVIDIA H200"), timing nothing
  std::string cache_dir;   // kernel compile cache; empty: the default
  int jobs = 0;            // parallel compiler processes; 0: all cores
  // GPUs that time candidates when tuning, one worker each (sabre compile --gpus): device ids, each
  // once; empty: GPU 0; {kAllGpus}: every GPU of the machine. They must be of one model.
  static constexpr int kAllGpus = -1;
  std::vector<int> gpus;
  bool plan_only = false;  // write the artifact without kernels; compile nothing
  // How the lowering runs (sabre compile's flags of the same names; the defaults are theirs).
  int top_k = 4;                // CUTLASS candidates timed per GEMM workload and M bucket
  bool cublaslt = true;         // deploy a cuBLASLt algorithm where the tuner measured one fastest
  bool fuse_attention = true;   // attention as one native kernel where it fits
  bool pointwise_gemm = true;   // 1x1 stride-1 convs as GEMMs over their NHWC tensors
  // The RGB stem (a conv on NCHW images with C < 8): one native kernel, im2col + GEMM, or a conv on
  // channels padded to 8.
  enum class Stem { direct, im2col, conv };
  Stem stem = Stem::direct;
  // Conv kernel families: the model ranks CUTLASS 2.x sm80 against 3.x sm90 kernels, or one is insisted on.
  enum class ConvKernels { automatic, sm80, sm90 };
  ConvKernels conv_kernels = ConvKernels::automatic;
  // Print the graph and plan after these lowering passes ("PASS[,PASS]" or "all"); empty reads
  // $SABRE_DUMP_AFTER. To dump_file, else ($SABRE_DUMP_FILE, else) stderr.
  std::string dump_after, dump_file;
  // One line per stage ("import ...", "partition: 17 CUTLASS regions, 0 refusals", ...).
  std::function<void(const std::string&)> progress;
};

enum class CompileStatus {
  ok,
  invalid_argument,  // an option is off (dtype, arch, a dim range, an empty output path)
  model_error,       // the model file cannot be read or is not a valid ONNX model
  unsupported,       // a valid model sabre cannot compile (an op, a dtype, a shape)
  io_error,          // the artifact, cache or tuning DB cannot be written or read
  build_failed,      // a kernel failed to compile, or tuning failed (the message names it and its log)
  out_of_memory,
};

// What a compile wrote.
struct CompileSummary {
  std::map<std::string, int> steps_by_op;  // plan steps by kind ("gemm", "softmax", ...)
  size_t gemm_kernels = 0, conv_kernels = 0, elementwise_kernels = 0;
  size_t kernels_compiled = 0, kernels_cached = 0;
  size_t kernels_from_pack = 0;  // of kernels_cached: entries `sabre kernels pack` built
  // Every kernel the plan uses, in build order: name, kind (gemm, cublaslt, conv, elementwise) and where
  // its library came from: compiled, cache, pack (a cache entry of the kernel pack) or planned (plan_only).
  struct Kernel {
    std::string name, kind, origin;
  };
  std::vector<Kernel> kernel_list;
  uint64_t weights_bytes = 0;
  uint64_t artifact_bytes_without_weights = 0;
  double seconds = 0, tune_seconds = 0;
  // Wall time of each phase in the order they ran: import, canonicalize, partition, tune (where it
  // ran), lower, build (kernel compiles and cache hits; not with plan_only), write.
  std::vector<std::pair<std::string, double>> phase_seconds;
  size_t tuned_points = 0, measured_candidates = 0;  // (workload, M) points; new measurements
  std::vector<std::string> notes;  // what the user should know (fusions left out, where picks came from)
};

struct CompileOutcome : CompileSummary {  // the summary is filled when ok()
  CompileStatus status = CompileStatus::ok;
  std::string message;  // when status != ok: what is wrong, what to do (first line); details after
  bool ok() const { return status == CompileStatus::ok; }
};

// Compiles the ONNX model at `model` into the artifact directory `artifact_dir`.
CompileOutcome compile(const std::string& model, const std::string& artifact_dir, const CompileOptions& options = {});

}  // namespace sabre
