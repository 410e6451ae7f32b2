#include "tune/conv_tune.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>
#include <thread>

#include "backends/cutlass/conv_emitter.h"
#include "backends/cutlass/conv_sm90.h"
#include "backends/cutlass/conv_spec.h"
#include "backends/cutlass/nvcc.h"
#include "tune/gpu_pool.h"

namespace sabre::tune {

using namespace cutlass_backend;

CompileJob conv_compile_job(const std::string& name, int target_sm) {
  NvccOptions o;
  o.target_sm = target_sm;
  if (auto s90 = parse_sm90_conv_kernel_name(name))
    return {name, emit_sm90_conv_kernel(*s90, target_sm), cache_flags(nvcc_sm90_conv_command("@SRC@", "@LIB@", o)),
            "cutlass_conv_sm90"};
  if (auto s80 = parse_conv_kernel_name(name))
    return {name, emit_conv_kernel(*s80, target_sm), cache_flags(nvcc_conv_command("@SRC@", "@LIB@", o)),
            "cutlass_conv_sm80"};
  throw std::invalid_argument("'" + name + "' is not a conv kernel name (conv_spec.h, conv_sm90.h)");
}

std::vector<ConvCandidate> conv_candidates(const ConvProblem& p, const ProfileOptions& opts, ConvKernels family) {
  const std::vector<ConvCandidate> ranked = rank_conv_candidates(p, opts.target_sm, family);
  if (opts.top_k <= 0 || ranked.size() <= size_t(opts.top_k)) return ranked;
  std::vector<ConvCandidate> out(ranked.begin(), ranked.begin() + opts.top_k);
  // The model compares the two families least well (one mma.sync CTA per SM against wgmma): each
  // family's best is timed even when the other fills the top k.
  for (bool sm90 : {false, true}) {
    auto is_family = [&](const ConvCandidate& c) { return is_sm90_conv_kernel_name(c.name) == sm90; };
    if (std::none_of(out.begin(), out.end(), is_family)) {
      auto it = std::find_if(ranked.begin(), ranked.end(), is_family);
      if (it != ranked.end()) out.push_back(*it);
    }
  }
  return out;
}

std::vector<ConvTuneReport> tune_convs(const std::vector<ConvProblem>& problems, TuningDb& db, const Environment& env,
                                       const ProfileOptions& opts, ConvKernels family, const ConvMeasureFn& in_child,
                                       const ConvCompileFn& compile) {
  if (db.path() == ":memory:")
    throw std::invalid_argument("tune_convs: the measuring children record into the DB file; an in-memory DB has none");
  std::vector<std::vector<ConvCandidate>> cands;
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const ConvProblem& p : problems) {
    cands.push_back(conv_candidates(p, opts, family));
    const std::string workload = conv_workload_key(p);
    for (const ConvCandidate& c : cands.back())
      if (!db.find(env, workload, c.name) && seen.insert(c.name).second) names.push_back(c.name);
  }
  std::map<std::string, CompileResult> built;
  if (!names.empty()) {
    std::vector<CompileResult> results = compile(names);
    if (results.size() != names.size())
      throw std::logic_error("tune_convs: the compile function returned " + std::to_string(results.size()) +
                             " results for " + std::to_string(names.size()) + " kernels (invariant: one each)");
    for (size_t i = 0; i < names.size(); ++i) built[names[i]] = results[i];
  }
  std::vector<ConvTuneReport> out(problems.size());
  std::vector<std::vector<std::pair<std::string, std::string>>> todos(problems.size());
  for (size_t i = 0; i < problems.size(); ++i) {
    const ConvProblem& p = problems[i];
    ConvTuneReport& rep = out[i];
    rep.problem = p;
    rep.workload = conv_workload_key(p);
    rep.analytic_pick = cands[i].front().name;
    for (const ConvCandidate& c : cands[i]) {
      if (db.find(env, rep.workload, c.name)) {
        ++rep.reused;
        continue;
      }
      auto it = built.find(c.name);
      if (it == built.end() || !it->second.ok) {
        const std::string why = it == built.end() ? "not compiled" : "compile failed, log: " + it->second.log;
        db.record(env, {rep.workload, c.name, Status::compile_failed, std::numeric_limits<double>::infinity(), 0, why});
        ++rep.measured;
        continue;
      }
      todos[i].push_back({c.name, it->second.library});
    }
    rep.measured += int(todos[i].size());
  }
  // One timing worker per GPU (gpu_pool.h), each taking the next problem as it becomes free.
  PoolOptions pool;
  if (!opts.gpus.empty()) pool.devices = opts.gpus;
  run_pool(
      problems.size(), pool,
      [&](size_t i) -> std::optional<std::string> {
        if (todos[i].empty()) return std::nullopt;
        return encode_candidates(todos[i]);
      },
      [&](size_t, size_t i, const std::string& payload) {
        measure_in_children(db.path(), env, out[i].workload, decode_candidates(payload), opts.timeout,
                            [&](const std::string& kernel, const std::string& library) {
                              return in_child(problems[i], kernel, library);
                            });
      },
      [&](size_t i, size_t worker, bool ok, double took) {
        ConvTuneReport& rep = out[i];
        for (const auto& kv : todos[i])
          if (!db.find(env, rep.workload, kv.first))
            db.record(env, {rep.workload, kv.first, Status::crashed, std::numeric_limits<double>::infinity(), 0,
                            ok ? "the measuring children left it unmeasured"
                               : "its timing worker (GPU " + std::to_string(pool.devices[worker]) + ") died"});
        for (const ConvCandidate& c : cands[i]) {
          auto m = db.find(env, rep.workload, c.name);
          if (!m) continue;
          if (c.name == rep.analytic_pick) rep.analytic = m;
          if (m->status == Status::ok && (!rep.winner || m->time_us < rep.winner->time_us)) rep.winner = m;
        }
        if (!opts.quiet)
          std::fprintf(stderr, "[%zu/%zu] %s: timed %zu candidates in %.1f s%s%s%s\n", i + 1, problems.size(),
                       rep.workload.c_str(), todos[i].size(), took, rep.winner ? ", fastest " : ", none correct",
                       rep.winner ? rep.winner->kernel.c_str() : "",
                       pool.devices.size() > 1 ? (" (GPU " + std::to_string(pool.devices[worker]) + ")").c_str() : "");
      });
  return out;
}

std::string pick_conv_kernel(const ConvProblem& p, const TuningDb* db, const Environment& env, int target_sm,
                             ConvKernels family) {
  const std::vector<ConvCandidate> ranked = rank_conv_candidates(p, target_sm, family);
  if (db) {
    std::set<std::string> allowed;
    for (const ConvCandidate& c : ranked) allowed.insert(c.name);
    for (const Measurement& m : db->measurements(env, conv_workload_key(p)))  // fastest first
      if (m.status == Status::ok && allowed.count(m.kernel)) return m.kernel;
  }
  return ranked.front().name;
}

ConvCompileFn default_conv_compile_fn(const ProfileOptions& opts) {
  return [opts](const std::vector<std::string>& names) {
    CompileCache cache(opts.cache_dir.empty() ? CompileCache::default_dir() : opts.cache_dir, find_nvcc());
    std::vector<CompileJob> jobs;
    for (const std::string& n : names) jobs.push_back(conv_compile_job(n, opts.target_sm));
    const int parallel = opts.jobs > 0 ? opts.jobs : int(std::max(1u, std::thread::hardware_concurrency()));
    return cache.compile_all(jobs, parallel, opts.quiet);
  };
}

}  // namespace sabre::tune
