#include "runtime/planner.h"

#include <algorithm>
#include <numeric>

namespace sabre::runtime {

std::vector<uint64_t> tensor_bytes(const Plan& plan, const std::map<std::string, int64_t>& dims) {
  std::vector<uint64_t> out;
  out.reserve(plan.tensors.size());
  for (const auto& t : plan.tensors) {
    uint64_t n = 1;
    for (const auto& d : t.shape) {
      int64_t v = d.eval(dims);
      if (v < 0) throw PlanError("tensor '" + t.name + "' has dim " + d.str() + " = " + std::to_string(v) + " < 0");
      n *= static_cast<uint64_t>(v);
    }
    out.push_back(n * ir::size_of(t.dtype));
  }
  return out;
}

MemoryPlan plan_memory(const Plan& plan, const std::vector<uint64_t>& bytes) {
  const size_t n = plan.tensors.size();
  MemoryPlan mp;
  mp.offset.assign(n, -1);
  mp.alias_of.resize(n);
  std::iota(mp.alias_of.begin(), mp.alias_of.end(), 0);
  auto root = [&](int t) {
    while (mp.alias_of[static_cast<size_t>(t)] != t) t = mp.alias_of[static_cast<size_t>(t)];
    return t;
  };
  auto is_act = [&](int t) { return plan.tensors[static_cast<size_t>(t)].kind == TensorKind::activation; };
  // A reshape into an activation is a view of its source (whatever the source's kind).
  for (const auto& s : plan.steps)
    if (s.kind() == StepKind::reshape && s.inputs.size() == 1 && s.outputs.size() == 1 && s.inputs[0] >= 0 &&
        is_act(s.outputs[0]))
      mp.alias_of[static_cast<size_t>(s.outputs[0])] = root(s.inputs[0]);

  const int kNone = -1;
  std::vector<int> first(n, kNone), last(n, kNone);
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    for (int t : s.outputs) {
      int r = root(t);
      if (first[static_cast<size_t>(r)] == kNone) first[static_cast<size_t>(r)] = static_cast<int>(i);
      last[static_cast<size_t>(r)] = std::max(last[static_cast<size_t>(r)], static_cast<int>(i));
    }
    for (int t : s.inputs) {
      if (t < 0) continue;
      int r = root(t);
      if (is_act(r) && first[static_cast<size_t>(r)] == kNone)
        throw PlanError("plan: step '" + s.name + "' (" + s.op + ") reads '" + plan.tensors[static_cast<size_t>(t)].name +
                        "' before any step writes it (steps must be in execution order)");
      last[static_cast<size_t>(r)] = std::max(last[static_cast<size_t>(r)], static_cast<int>(i));
    }
  }
  // Arena buffers: activation roots that some step writes.
  std::vector<int> bufs;
  for (size_t t = 0; t < n; ++t)
    if (root(static_cast<int>(t)) == static_cast<int>(t) && is_act(static_cast<int>(t)) && first[t] != kNone) {
      bufs.push_back(static_cast<int>(t));
      mp.sum_bytes += bytes[t];
    }
  // Greedy by size, largest first; each at the lowest aligned offset free during its interval.
  std::stable_sort(bufs.begin(), bufs.end(), [&](int a, int b) { return bytes[static_cast<size_t>(a)] > bytes[static_cast<size_t>(b)]; });
  auto align = [](uint64_t v) { return (v + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; };
  std::vector<int> placed;
  for (int b : bufs) {
    auto bi = static_cast<size_t>(b);
    std::vector<std::pair<uint64_t, uint64_t>> busy;  // [begin, end) of overlapping-in-time buffers
    for (int p : placed) {
      auto pi = static_cast<size_t>(p);
      if (first[pi] <= last[bi] && first[bi] <= last[pi])
        busy.push_back({static_cast<uint64_t>(mp.offset[pi]), static_cast<uint64_t>(mp.offset[pi]) + align(bytes[pi])});
    }
    std::sort(busy.begin(), busy.end());
    uint64_t at = 0, need = align(bytes[bi]);
    for (const auto& [lo, hi] : busy) {
      if (at + need <= lo) break;
      at = std::max(at, hi);
    }
    mp.offset[bi] = static_cast<int64_t>(at);
    mp.peak_bytes = std::max(mp.peak_bytes, at + need);
    placed.push_back(b);
  }
  for (size_t t = 0; t < n; ++t) {
    int r = root(static_cast<int>(t));
    if (r != static_cast<int>(t)) {
      mp.alias_of[t] = r;
      mp.offset[t] = mp.offset[static_cast<size_t>(r)];
    }
  }
  return mp;
}

std::vector<std::vector<int>> prefetch_schedule(const Plan& plan, int lead, uint64_t min_bytes) {
  const size_t n = plan.steps.size();
  std::vector<std::vector<int>> out(n);
  if (lead <= 0) return out;
  std::vector<size_t> kernels;  // indices of the steps that launch work
  for (size_t i = 0; i < n; ++i)
    if (plan.steps[i].kind() != StepKind::reshape) kernels.push_back(i);
  for (size_t k = 0; k < kernels.size(); ++k) {
    const Step& st = plan.steps[kernels[k]];
    if ((st.kind() != StepKind::gemm && st.kind() != StepKind::conv) || k < static_cast<size_t>(lead)) continue;
    const size_t at = kernels[k - static_cast<size_t>(lead)];
    for (int t : st.inputs) {
      if (t < 0) continue;
      const TensorInfo& ti = plan.tensors[static_cast<size_t>(t)];
      if (ti.kind != TensorKind::weight || ti.weight_bytes < min_bytes) continue;
      bool read_between = false;  // by a step from `at` on: already in L2, or on its way
      for (size_t j = at; j < kernels[k] && !read_between; ++j)
        for (int u : plan.steps[j].inputs) read_between |= u == t;
      if (!read_between) out[at].push_back(t);
    }
  }
  return out;
}

std::vector<std::vector<int>> prefetch_at_shapes(const Plan& plan, const std::vector<std::vector<int>>& schedule,
                                                 const std::vector<std::vector<int64_t>>& shapes, double max_flops) {
  if (max_flops <= 0) return schedule;
  auto elements = [&](int t) {
    double n = 1;
    for (int64_t d : shapes[static_cast<size_t>(t)]) n *= static_cast<double>(d);
    return n;
  };
  std::vector<std::vector<int>> out(schedule.size());
  for (size_t i = 0; i < schedule.size(); ++i)
    for (int t : schedule[i]) {
      double flops = 0, rows = 0;  // of the first GEMM or conv after step i that reads t
      for (size_t j = i + 1; j < plan.steps.size(); ++j) {
        const Step& st = plan.steps[j];
        if ((st.kind() != StepKind::gemm && st.kind() != StepKind::conv) ||
            std::find(st.inputs.begin(), st.inputs.end(), t) == st.inputs.end() || st.outputs.empty())
          continue;
        const auto& y = shapes[static_cast<size_t>(st.outputs[0])];
        const double n = y.empty() ? 1.0 : static_cast<double>(y.back());
        if (n > 0) {
          rows = elements(st.outputs[0]) / n;
          flops = 2.0 * rows * elements(t);
        }
        break;
      }
      if (rows < static_cast<double>(kPrefetchMaxRows) || flops < max_flops) out[i].push_back(t);
    }
  return out;
}

}  // namespace sabre::runtime
