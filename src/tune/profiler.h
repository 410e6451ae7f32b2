// The profiler: for each (workload, M) it takes the analytic model's top-k CUTLASS kernels (at most
// max_kernels_per_problem distinct ones per problem over its M buckets) and
// cuBLASLt's heuristic algorithms, compiles what needs compiling (CompileCache, in parallel),
// times each candidate in a child process under a watchdog and records every measurement in the
// TuningDb the moment it is made. A rerun (after kill -9 or with a warm DB) measures only the
// (workload, kernel) pairs the DB does not have. Compiling and timing are injected functions, so
// the resume logic is tested without a GPU. Tests: tests/unit/tune_profiler_test.cpp
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backends/cublaslt/lt_spec.h"
#include "backends/cutlass/kernel_spec.h"
#include "tune/compile_cache.h"
#include "tune/db.h"
#include "tune/rank.h"
#include "tune/select.h"
#include "tune/watchdog.h"

namespace sabre::tune {

struct ProfileOptions {
  int top_k = 4;          // CUTLASS candidates per workload, from the analytic ranking
  // Distinct CUTLASS kernels compiled for one problem over all its M buckets (0: no cap). Kept by
  // best ranking position over the buckets (ties by name); every bucket's analytic first choice is
  // kept even past the cap, so the untuned pick is always timed.
  int max_kernels_per_problem = 8;
  int lt_algos = 16;      // cuBLASLt heuristic algorithms per workload (0: none)
  int target_sm = 90;
  int jobs = 0;           // parallel compiles; 0: all cores
  bool quiet = false;     // no progress output
  std::chrono::milliseconds timeout{60000};  // per candidate (compile excluded)
  std::string cache_dir;  // kernel cache; empty: CompileCache::default_dir()
  // GPUs the batch measurers time on, one worker each (ids resolved by resolve_gpus); empty: GPU 0.
  // The workers take (workload, M) points from one queue; every measurement goes to the one DB.
  std::vector<int> gpus;
  // Set (default_lookup_fn): the compile batch runs in a child process while the tuner times each
  // (workload, M) point as soon as its kernels are in the cache; unset: compile all, then time.
  std::function<std::optional<CompileResult>(const cutlass_backend::KernelSpec&)> compiled_lookup;
};

// One unit of tuning work: a problem at one M.
struct TuneTask {
  GemmProblem problem;
  int64_t m = 0;
};

// Times one candidate: `library` is its .so (CUTLASS) or empty (cuBLASLt, "cublaslt_...#algoN").
// Returns the measurement (status and time); must not throw for a kernel's failure.
using MeasureFn = std::function<Measurement(const GemmProblem& p, int64_t m, const std::string& kernel,
                                            const std::string& library)>;
// Compiles CUTLASS candidates; results in the order of `specs` (name, ok, library, log).
using CompileFn = std::function<std::vector<CompileResult>(const std::vector<cutlass_backend::KernelSpec>& specs)>;

struct WorkloadReport {
  TuneTask task;
  std::string workload;
  std::string analytic_pick;               // the model's first choice
  std::optional<Measurement> winner;       // fastest correct candidate
  std::optional<Measurement> cutlass_best; // fastest correct CUTLASS candidate
  std::optional<Measurement> lt_top1;      // cuBLASLt heuristic's first algorithm
  std::optional<Measurement> lt_best;      // fastest of cuBLASLt's algorithms
  std::optional<Measurement> analytic;     // the analytic pick's measurement, when it was timed
  int measured = 0;  // candidates timed in this run
  int reused = 0;    // candidates the DB already had
};

// Where a tune_tasks call spent its wall time.
struct TuneStats {
  double compile_s = 0;  // the parallel compile batch (cache hits included)
  double timing_s = 0;   // measuring, all tasks
  int compiled = 0;      // kernels handed to the compile function
};

// The CUTLASS candidates of each task: its top_k of the analytic ranking, in ranking order, less
// the kernels past ProfileOptions::max_kernels_per_problem for its problem (tasks whose problems
// differ only in M share the cap). Tests: tests/unit/tune_profiler_test.cpp
std::vector<std::vector<Candidate>> cutlass_candidates(const std::vector<TuneTask>& tasks, const ProfileOptions& opts);

// The cuBLASLt candidates of a problem: "cublaslt_tn_f16_f16_f32_bias#algo0" ...; none when
// cuBLASLt cannot compute the epilogue (gelu_erf, silu, ...).
std::vector<std::string> lt_candidates(const GemmProblem& p, int count);
// How a cuBLASLt measurement's detail names the kernel its algorithm deploys as ("deploy NAME").
inline constexpr const char* kDeployPrefix = "deploy ";
// What a measured candidate deploys as: a CUTLASS kernel's own name; for a cuBLASLt candidate the
// kernel its measurement's detail names after kDeployPrefix (lt_spec.h: the timed algorithm fixed by
// its configuration). Nullopt when there is none (a DB row from before cuBLASLt kernels could be
// deployed, or an algorithm cuBLASLt could not rebuild from its configuration).
std::optional<std::string> deployable_kernel(const Measurement& m);
// Whether the tuner must (still) measure `kernel` on `workload`: no row yet, or a cuBLASLt row that
// predates deployable algorithms (ok, without a detail).
bool needs_measuring(const TuningDb& db, const Environment& env, const std::string& workload, const std::string& kernel);
// "cublaslt_...#algo3" -> {"cublaslt_...", 3}; nullopt for a CUTLASS name.
std::optional<std::pair<std::string, int>> parse_lt_candidate(const std::string& kernel);

// Tunes every task: compiles all missing CUTLASS candidates in one parallel batch, then times the
// unmeasured ones task by task. Failures are recorded (compile_failed with the log's path, crashed,
// hung, wrong_result) with time +inf. A candidate is never measured twice for one environment.
std::vector<WorkloadReport> tune_tasks(const std::vector<TuneTask>& tasks, TuningDb& db, const Environment& env,
                                       const ProfileOptions& opts, const MeasureFn& measure,
                                       const CompileFn& compile, TuneStats* stats = nullptr);

// Measures the listed (kernel, library) candidates of one task and records every measurement in
// the DB file itself, as it goes (it runs in other processes: the caller's connection sees rows).
using BatchMeasureFn = std::function<void(const GemmProblem& p, int64_t m,
                                          const std::vector<std::pair<std::string, std::string>>& todo)>;

// tune_tasks with one batch call per task, made in a timing worker process per GPU of
// ProfileOptions::gpus (gpu_pool.h: one queue, work goes to whichever worker is free); candidates the
// batch left unmeasured, or whose worker died, are recorded as crashed. Saves a process and CUDA
// context per candidate.
std::vector<WorkloadReport> tune_tasks(const std::vector<TuneTask>& tasks, TuningDb& db, const Environment& env,
                                       const ProfileOptions& opts, const BatchMeasureFn& measure,
                                       const CompileFn& compile, TuneStats* stats = nullptr);

// A BatchMeasureFn that runs `in_child` for the candidates one after another in a watchdog child,
// which records each result into the DB file at db_path at once. Each candidate gets
// `per_candidate` (an alarm in the child). When a child crashes or hangs, the first unmeasured
// candidate is recorded as crashed or hung and a fresh child takes the rest; a measurement whose
// status is `crashed` ends its child too (a CUDA fault poisons the context).
BatchMeasureFn batched_in_children(std::string db_path, Environment env, std::chrono::milliseconds per_candidate,
                                   MeasureFn in_child);
// The loop behind batched_in_children, for a workload of any kind: measures the (kernel, library)
// candidates of `todo` that the DB at db_path lacks, `in_child` running inside watchdog children,
// each result recorded at once; a candidate that kills or hangs its child is recorded as crashed
// or hung and a fresh child takes the rest.
using CandidateMeasureFn = std::function<Measurement(const std::string& kernel, const std::string& library)>;
void measure_in_children(const std::string& db_path, const Environment& env, const std::string& workload,
                         const std::vector<std::pair<std::string, std::string>>& todo,
                         std::chrono::milliseconds per_candidate, const CandidateMeasureFn& in_child);

// The GPU timing of one candidate in the calling process (call it only inside a child).
MeasureFn gpu_in_process_measure_fn();

// The report of a task from the DB alone (no measuring): what `sabre tune` prints on a warm run.
WorkloadReport report_from_db(const TuneTask& t, const TuningDb& db, const Environment& env, const ProfileOptions& opts);

// The real functions. default_compile_fn emits each spec and compiles it through CompileCache
// with the nvcc flags of backends/cutlass/nvcc.h. gpu_measure_fn times on GPU 0 in a child
// process (see gpu_measure.cpp); it exists only in builds with the CUDA toolkit.
CompileFn default_compile_fn(const ProfileOptions& opts);
// The compile-cache job of a CUTLASS GEMM kernel: its name, emitted source and cache_flags of
// nvcc.h's command. `sabre compile` builds with the same jobs, so the two share cached objects.
CompileJob gemm_compile_job(const cutlass_backend::KernelSpec& s, int target_sm);
// The same for a deployed cuBLASLt kernel (lt_spec.h, emit_lt_kernel): host code only, linked with cuBLASLt.
CompileJob lt_compile_job(const cublaslt_backend::LtKernelSpec& s);
// What default_compile_fn's cache holds for a spec (a library or a recorded failure); nullopt
// while it is not compiled yet. For ProfileOptions::compiled_lookup.
std::function<std::optional<CompileResult>(const cutlass_backend::KernelSpec&)> default_lookup_fn(
    const ProfileOptions& opts);
bool have_gpu_support();  // this build can time kernels (CUDA toolkit found at configure time)
MeasureFn gpu_measure_fn(const ProfileOptions& opts);
// Probes GPU 0 in a child process (the parent never creates a CUDA context: fork would break it).
// Fills env (gpu name, SM, CUDA runtime version) and returns true, or returns false with `why`.
bool probe_gpu(Environment& env, std::string& why);
// The same for the GPUs `ids` (parse_gpus's form; empty: GPU 0): `resolved` gets their ids
// (resolve_gpus), env describes them. Throws std::invalid_argument for an id past the machine's
// count or GPUs of different models (the message names the count or the models).
bool probe_gpus(const std::vector<int>& ids, std::vector<int>& resolved, Environment& env, std::string& why);

// A watchdog outcome as a measurement: ok payload "ok TIME_US REL_ERR", failed payload
// "STATUS detail", crashed and hung as themselves (time +inf). Tests: tests/unit/tune_profiler_test.cpp
Measurement measurement_from_child(const ChildResult& r);

// sabre's template version (bump when emitted code changes) and the CUTLASS version it builds with.
std::string template_version();
std::string cutlass_version();

}  // namespace sabre::tune
