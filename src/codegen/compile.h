// The model compiler's driver: ONNX file -> artifact directory (docs/RUNTIME.md section 1).
// import -> canonicalize -> partition -> lower -> build kernels (cached, in parallel) -> write_artifact.
// No GPU is needed: kernels are compiled for --arch, and GEMM kernels are picked analytically
// unless tuning is asked for. Tests: tests/unit/codegen_compile_test.cpp
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "codegen/lower.h"
#include "partition/report.h"
#include "sabre/compiler.h"
#include "tune/rank.h"

namespace sabre::codegen {

// The conv kernel families the conv picker may choose (sabre compile --conv-kernels; tune/rank.h).
using ConvKernels = tune::ConvKernels;

struct CompileOptions {
  ir::DType dtype = ir::DType::f16;  // compute dtype
  DimRanges ranges;                  // --dynamic
  // automatic: profile GEMM candidates when this machine has a GPU of the target arch, else the
  // analytic model picks; always: a GPU is required; never: the analytic model picks.
  enum class Tune { automatic, always, never };
  Tune tune = Tune::automatic;
  std::string tuning_db;             // empty: TuningDb::default_path()
  // Pick from the DB's measurements of this GPU (its name as the DB has it, "NVIDIA H200"), timing
  // nothing; without it, a machine with no GPU of the target arch picks from the DB when it holds
  // one GPU's measurements for the target SM and this build (else the analytic model picks).
  std::string tuned_for;
  int top_k = 4;                     // CUTLASS candidates timed per (workload, M bucket)
  bool cublaslt = true;              // PickOptions::cublaslt (sabre compile --no-cublaslt: false)
  bool fuse_attention = true;        // LowerOptions::fuse_attention (sabre compile --no-fuse-attention: false)
  ConvKernels conv_kernels = ConvKernels::automatic;
  Stem stem = Stem::direct;          // LowerOptions::stem (sabre compile --stem direct|im2col|conv)
  bool pointwise_gemm = true;        // LowerOptions::pointwise_gemm (sabre compile --no-pointwise-gemm: false)
  bool plan_only = false;            // write the artifact without kernels; compile nothing
  std::string dump_after;            // LowerOptions::dump_after (sabre compile --dump-after); "" reads $SABRE_DUMP_AFTER
  std::string dump_file;             // LowerOptions::dump_file; "" reads $SABRE_DUMP_FILE, else stderr
  std::string arch = "sm_90a";       // what kernels are compiled for
  int jobs = 0;                      // parallel compiler processes; 0: all cores
  std::vector<int> gpus;             // GPUs that time candidates (tune/gpu_pool.h parse_gpus form); empty: GPU 0
  std::string cache_dir;             // compile cache; empty: CompileCache::default_dir()
  std::string nvcc = "nvcc";
  // One line per stage ("import", "partition: 17 regions", ...); nothing when unset.
  std::function<void(const std::string&)> progress;
};

// What a compile wrote: the public API's summary (include/sabre/compiler.h).
using CompileSummary = sabre::CompileSummary;

// "sm_90a" -> 90. Throws std::invalid_argument for anything else than sm_<digits>[a].
int arch_sm(const std::string& arch);

// The .cu text of a generated elementwise kernel plus its host launcher
// `extern "C" int <name>_launch(const SabreEwParams*, unsigned grid, cudaStream_t)` (docs/RUNTIME.md).
std::string elementwise_library_source(const ElementwiseKernel& k);

// The analytic conv kernel choice (LowerOptions::pick_conv of `sabre compile`) for a problem at its
// batch p.n: among the catalog configs (conv_spec.h) with the widest alignment C and K allow, their
// serial split-K variants where the output tiles leave SMs idle, and on sm 90 the sm90 family
// (conv_sm90.h) as `family` allows, the one the GEMM model (tune/rank.h) predicts fastest on the
// implicit GEMM. Throws std::invalid_argument saying why when no conv kernel fits (grouped convs,
// an epilogue conv kernels are not generated with, a dtype).
// Tests: tests/unit/codegen_lower_test.cpp
std::string analytic_conv_kernel(const ConvProblem& p, int target_sm, ConvKernels family = ConvKernels::automatic);

// canonicalize() as `sabre compile` runs it: with fuse_attention (LowerOptions::fuse_attention) the
// Q/K/V projections are joined too (merge_qkv), which the fused attention reads in place; grouped
// convs are regrouped to the CUTLASS grouped kernels' multiples (regroup_convs). `sabre tune`
// canonicalizes with this call, so both see the same GEMM and conv workloads.
// dump: print the IR after every pass to stderr (sabre partition --dump-passes).
ir::Graph canonicalize_model(ir::Graph g, bool fuse_attention, bool dump = false);

// Fills each left-out GEMM or conv's runs_on in `rep` (a report of `partitioned`): the native kernel
// gpu_route names, or that sabre compile refuses the model. For sabre partition and sabre.partition.
void annotate_gpu_routes(partition::PartitionReport& rep, const ir::Graph& partitioned);

// The GEMM problems `sabre compile` tunes for a partitioned graph lowered with `lo` (its picker is
// replaced; weights are laid out, not converted): every problem the lowering asks a picker for with
// alignment > 1, in first-seen order. Alignment-1 problems (the fallbacks of symbolic-N/K GEMMs, odd
// static extents) are left to the analytic model. A stem_conv step (Stem::direct) asks for none: it
// is a native kernel. `sabre tune` collects with this call too, so a model it tuned compiles without
// new measurements. Throws what lower() throws.
std::vector<tune::GemmProblem> tuned_gemm_problems(const ir::Graph& partitioned, LowerOptions lo, int target_sm);

// The conv problems `sabre compile` tunes: every (conv region, batch bucket) problem the lowering
// with `lo` asks lo.pick_conv for (which still answers them), deduplicated, in first-seen order;
// none when lo.pick_conv is unset. Throws what lower() throws.
std::vector<ConvProblem> tuned_conv_problems(const ir::Graph& partitioned, LowerOptions lo, int target_sm);

/** Compiles `model` into the artifact directory `out_dir`. Throws onnx_frontend::ImportError,
    UnsupportedError, std::invalid_argument (bad options) or std::runtime_error (a kernel failed to
    compile: the message names it and its log). Tests: tests/unit/codegen_compile_test.cpp */
CompileSummary compile_model(const std::string& model, const std::string& out_dir, const CompileOptions& opts);

}  // namespace sabre::codegen
