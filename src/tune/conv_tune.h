// Conv kernel tuning (issue 7): the GEMM tuner's method for conv workloads. For each conv problem
// (one conv region at one batch bucket) it takes the analytic ranking's top-k conv kernels
// (rank_conv_candidates: sm80 implicit GEMMs with their split-K variants and, on sm 90, the sm90
// TMA/wgmma family), compiles the missing ones in one parallel batch through the compile cache
// `sabre compile` shares, and times each in a watchdog child (measure_in_children) after checking
// its output against a double-precision reference; every measurement goes to the tuning DB the
// moment it is made, keyed by conv_workload_key. The compiler then picks the DB's fastest correct
// kernel per bucket. Compiling and timing are injected, so the flow is tested without a GPU.
// Tests: tests/unit/conv_tune_test.cpp
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tune/compile_cache.h"
#include "tune/db.h"
#include "tune/profiler.h"
#include "tune/rank.h"
#include "tune/select.h"

namespace sabre::tune {

// The compile-cache job of a conv kernel of either family, by name: its emitted source and the
// cache flags of nvcc.h's command for that family. `sabre compile` builds with the same jobs, so
// tuning and compiling share objects. Throws std::invalid_argument for any other name.
CompileJob conv_compile_job(const std::string& name, int target_sm);

// Times one conv candidate (its library) in the calling process; must not throw for a kernel's
// failure (report it in the Measurement). gpu_conv_in_process_measure_fn, or a fake in tests.
using ConvMeasureFn =
    std::function<Measurement(const ConvProblem& p, const std::string& kernel, const std::string& library)>;
// Compiles conv kernels by name; results in the order of `names`.
using ConvCompileFn = std::function<std::vector<CompileResult>(const std::vector<std::string>& names)>;

struct ConvTuneReport {
  ConvProblem problem;
  std::string workload;
  std::string analytic_pick;           // the model's first choice
  std::optional<Measurement> winner;   // fastest correct candidate
  std::optional<Measurement> analytic; // the analytic pick's measurement
  int measured = 0;                    // candidates timed in this run
  int reused = 0;                      // candidates the DB already had
};

// The conv candidates of a problem: the top opts.top_k of rank_conv_candidates (so the analytic
// pick is always first), plus the best of the sm80 or sm90 family when the top k has none of it.
std::vector<ConvCandidate> conv_candidates(const ConvProblem& p, const ProfileOptions& opts, ConvKernels family);

// Tunes every problem as the file comment says. The DB must be a file (children record into it).
// Failed compiles are recorded as compile_failed with the log's path; a candidate is never
// measured twice for one environment.
std::vector<ConvTuneReport> tune_convs(const std::vector<ConvProblem>& problems, TuningDb& db, const Environment& env,
                                       const ProfileOptions& opts, ConvKernels family, const ConvMeasureFn& in_child,
                                       const ConvCompileFn& compile);

// The kernel for a conv problem: the fastest correct measurement the DB has for its workload among
// the family's candidates (conv_candidates with every rank), else the analytic pick.
std::string pick_conv_kernel(const ConvProblem& p, const TuningDb* db, const Environment& env, int target_sm,
                             ConvKernels family);

// The real functions: compiling through the CompileCache with all cores (opts.jobs), and timing on
// GPU 0 in the calling process (gpu_measure.cpp; call it only inside a child). The latter throws
// std::runtime_error in a build without the CUDA toolkit.
ConvCompileFn default_conv_compile_fn(const ProfileOptions& opts);
ConvMeasureFn gpu_conv_in_process_measure_fn();

}  // namespace sabre::tune
