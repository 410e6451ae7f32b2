// Kernel selection for one GEMM region: the tuning database's winner when there is one, else the
// analytic model's pick (rank.h); symbolic M gets a dispatch table over power-of-two buckets.
// This is what the model compiler (src/codegen) calls. Tests: tests/unit/rank_test.cpp
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tune/db.h"

namespace sabre::ir {
class Graph;
}

namespace sabre::tune {

struct GemmProblem {          // one GEMM region of a model
  std::string dtype;          // "f16" | "bf16" | "f32"
  std::string layout;         // "tn" | "tt"
  std::string epilogue;       // kernel_spec.h spelling: "linear", "bias", "bias_gelu", "bias_res", ...
  int64_t n = 0, k = 0, batch = 1;  // static
  int64_t m_min = 1, m_max = 1;     // M's range (equal when M is static)
  int alignment = 8;          // elements per 16-byte access the operands allow (from the Composite)
  bool operator==(const GemmProblem&) const = default;
};

// One 2-D forward convolution as the conv kernels see it (kernel_abi.h sabre_conv_args: NHWC x,
// KRSC filter), at one batch (the lowering asks at each batch bucket's representative).
struct ConvProblem {
  std::string dtype;     // "f16" / "bf16"
  std::string epilogue;  // kernel_spec.h spelling: linear, bias, bias_relu, bias_res_relu, ...
  int64_t n = 0, h = 0, w = 0, c = 0, k = 0, r = 0, s = 0, p = 0, q = 0;
  int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1, groups = 1;
  int alignment = 1;  // elements per 16-byte access that C and K allow
  bool operator==(const ConvProblem&) const = default;
};

struct DispatchEntry {  // ascending max_m; the last covers m_max
  int64_t max_m = 0;
  std::string kernel;
  bool operator==(const DispatchEntry&) const = default;
};

struct PickOptions {
  bool tune = false;          // false: the analytic model picks (no GPU needed)
  TuningDb* db = nullptr;     // winners are read from (and, when tuning, written to) here
  Environment env;            // the GPU the artifact is for
  int top_k = 4;
  int target_sm = 90;
  // Where a cuBLASLt algorithm measured fastest, deploy it (lt_spec.h); false: CUTLASS kernels only,
  // cuBLASLt's times then serve only as the yardstick.
  bool cublaslt = true;
};

// The kernel for each M bucket of `p`. Bucket representatives are the powers of two from m_min up
// to m_max (m_max itself closes the last bucket); neighbouring buckets with the same pick merge.
// With opts.tune, buckets the DB has no winner for are profiled (needs a GPU: see profiler.h).
// Throws std::invalid_argument for a problem no catalog kernel can run (bad dtype, epilogue, ...).
std::vector<DispatchEntry> pick_kernels(const GemmProblem& p, const PickOptions& opts);

// Bucket representatives of an M range: 1,2,4,... from m_min (rounded up to a power of two) below
// m_max, then m_max. A static M (m_min == m_max) is one bucket.
std::vector<int64_t> m_buckets(int64_t m_min, int64_t m_max);

// The workload text the DB keys measurements by, for one concrete M:
// "gemm f16 tn bias_gelu m=128 n=768 k=768 b=1 a=8".
std::string workload_key(const GemmProblem& p, int64_t m);

// The problem of a GEMM workload text workload_key made, at its one M; nullopt for other text.
std::optional<GemmProblem> parse_workload_key(const std::string& key);

// Why GEMM kernel `kernel` (a CUTLASS name or a deployable cuBLASLt name, lt_spec.h) cannot run
// problem `p` on target_sm: another dtype, layout or epilogue, an alignment the problem does not
// allow, or a spec the target cannot run; nullopt when it can. What keeps a tuning-DB row from
// deploying a kernel that computes something else (docs/TRUST.md).
std::optional<std::string> gemm_kernel_mismatch(const std::string& kernel, const GemmProblem& p, int target_sm);

// Why a measurement row (its workload, kernel and detail) describes no kernel that computes its
// workload, or nullopt: what `sabre db import` checks of rows of this build.
std::optional<std::string> row_mismatch(const Measurement& m, int sm);

// The workload text the DB keys conv measurements by:
// "conv f16 bias_relu n=1 h=7 w=7 c=512 k=512 r=3 s=3 p=7 q=7 pad=1,1 str=1,1 dil=1,1 g=1 a=8".
std::string conv_workload_key(const ConvProblem& p);

// The GEMM workloads of a partitioned graph (its sabre.Composite regions of kind gemm /
// batched_gemm), deduplicated, in first-seen order. Symbolic M ranges over [1, default_max];
// symbolic N/K/batch cannot be tuned statically and such regions are skipped.
std::vector<GemmProblem> gemm_problems(const ir::Graph& partitioned, int64_t default_max);
// The same with declared ranges of the dim symbols (`--dim batch=1..32`): a symbolic M whose
// symbols all have ranges spans [M(minima), M(maxima)]; otherwise [1, default_max].
std::vector<GemmProblem> gemm_problems(const ir::Graph& partitioned, int64_t default_max,
                                       const std::map<std::string, std::pair<int64_t, int64_t>>& ranges);

}  // namespace sabre::tune
