// The activation memory planner (docs/RUNTIME.md section 4): one arena per shape signature,
// buffers reused by liveness over the plan's steps, reshape views aliased to their source.
// Tests: tests/unit/runtime_planner_test.cpp
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/plan.h"

namespace sabre::runtime {

inline constexpr uint64_t kArenaAlignment = 256;

struct MemoryPlan {
  // Per tensor id: byte offset in the arena for activations (and aliased views), -1 otherwise
  // (inputs, outputs and weights live outside the arena).
  std::vector<int64_t> offset;
  // Per tensor id: the tensor whose storage it uses (itself unless it is a reshape view).
  std::vector<int> alias_of;
  uint64_t peak_bytes = 0;  // arena size
  uint64_t sum_bytes = 0;   // what the activations would take without reuse
};

// Byte size of every tensor of `plan` at the bound `dims`.
std::vector<uint64_t> tensor_bytes(const Plan& plan, const std::map<std::string, int64_t>& dims);

// Plans the arena. A reshape step's output aliases its input when both are activations (or the
// output is an activation and the input any tensor: then the view points there too); the
// source's live range extends to the view's last use. Throws PlanError on a read before any
// write (broken invariant of a plan: steps are in execution order).
MemoryPlan plan_memory(const Plan& plan, const std::vector<uint64_t>& bytes);

// L2 weight prefetch (docs/RUNTIME.md section 5): per step, the weight tensors to prefetch into L2
// just before that step is enqueued, so that they arrive while it runs: the weights of at least
// `min_bytes` that GEMM and conv steps read, `lead` kernel steps ahead of them (reshapes, views
// without a kernel, are not counted). A weight the steps between already read is not fetched again.
// All lists are empty for lead <= 0.
std::vector<std::vector<int>> prefetch_schedule(const Plan& plan, int lead, uint64_t min_bytes);

// The schedule at one set of tensor shapes (`shapes[t]`, every tensor): without the weights whose
// GEMM or conv step (the first after the prefetch that reads it) is large there: at least
// kPrefetchMaxRows output rows (its output's elements over the last dim: M of a GEMM, N*P*Q of a
// conv) and at least `max_flops` of work, 2 * output elements * weight elements / the output's last
// dim (2*M*N*K). An empirical rule (bench/results/prefetch_size_*): large GEMMs keep their weights
// streaming well without a prefetch, which then only competes for L2 and bandwidth, while small ones
// gain from it; the row bound keeps mid-sized batches prefetching. max_flops <= 0 keeps every entry.
constexpr int64_t kPrefetchMaxRows = 2048;
std::vector<std::vector<int>> prefetch_at_shapes(const Plan& plan, const std::vector<std::vector<int>>& schedule,
                                                 const std::vector<std::vector<int64_t>>& shapes, double max_flops);

}  // namespace sabre::runtime
