#include "tune/profiler.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "backends/cublaslt/lt_spec.h"
#include "backends/cutlass/emitter.h"
#include "backends/cutlass/nvcc.h"
#include "support/subprocess.h"
#include "tune/gpu_pool.h"
#include "tune/rank.h"

namespace sabre::tune {

using namespace cutlass_backend;

// 2: gelu_erf epilogues compute through SabreGeluErf (one ex2) instead of CUTLASS's GELU (erff), so
// their timings from 1 no longer describe the kernels those names build.
// 3: sm90 epilogues without a source term are EVT trees without LinComb's beta*C FMA, and gelu_erf
// epilogues with f16/bf16 results compute gelu_erf16 (degree 5): faster where the epilogue is not
// hidden under the mainloop.
std::string template_version() { return "3"; }

std::string cutlass_version() {
  std::ifstream in(std::string(SABRE_CUTLASS_DIR) + "/include/cutlass/version.h");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::string v;
  for (const char* part : {"MAJOR", "MINOR", "PATCH"}) {
    std::smatch m;
    if (!std::regex_search(text, m, std::regex(std::string("#define CUTLASS_") + part + " ([0-9]+)"))) return "unknown";
    v += (v.empty() ? "" : ".") + m[1].str();
  }
  return v;
}

std::vector<std::string> lt_candidates(const GemmProblem& p, int count) {
  const cublaslt_backend::LtSpec spec{problem_operands(p), problem_epilogue(p)};
  if (cublaslt_backend::unsupported_reason(spec)) return {};  // gelu_erf, silu, residual after the activation, ...
  const std::string base = cublaslt_backend::lt_name(spec);
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) out.push_back(base + "#algo" + std::to_string(i));
  return out;
}

bool needs_measuring(const TuningDb& db, const Environment& env, const std::string& workload, const std::string& kernel) {
  auto m = db.find(env, workload, kernel);
  // A cuBLASLt row from before its algorithms could be deployed (ok, no detail) is measured again
  // to learn the algorithm; every later cuBLASLt row has a detail (gpu_measure.cpp).
  return !m || (m->status == Status::ok && m->detail.empty() && parse_lt_candidate(kernel));
}

std::optional<std::string> deployable_kernel(const Measurement& m) {
  if (cutlass_backend::parse_kernel_name(m.kernel)) return m.kernel;
  if (!parse_lt_candidate(m.kernel)) return std::nullopt;
  const std::string prefix = kDeployPrefix;
  if (m.detail.rfind(prefix, 0) != 0) return std::nullopt;
  std::string name = m.detail.substr(prefix.size());
  if (!cublaslt_backend::parse_lt_kernel_name(name)) return std::nullopt;
  return name;
}

std::optional<std::pair<std::string, int>> parse_lt_candidate(const std::string& kernel) {
  if (kernel.rfind("cublaslt_", 0) != 0) return std::nullopt;
  auto h = kernel.rfind("#algo");
  if (h == std::string::npos) return std::nullopt;
  try {
    size_t used = 0;
    int algo = std::stoi(kernel.substr(h + 5), &used);
    if (used != kernel.size() - h - 5 || algo < 0) return std::nullopt;
    return std::make_pair(kernel.substr(0, h), algo);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

namespace {

bool better(const Measurement& a, const std::optional<Measurement>& b) {
  return a.status == Status::ok && (!b || a.time_us < b->time_us);
}

WorkloadReport summarize(const TuneTask& t, const std::string& workload, const std::string& analytic,
                         const TuningDb& db, const Environment& env, const ProfileOptions& opts) {
  WorkloadReport r;
  r.task = t;
  r.workload = workload;
  r.analytic_pick = analytic;
  const auto lts = lt_candidates(t.problem, opts.lt_algos);
  for (const Measurement& m : db.measurements(env, workload)) {
    if (better(m, r.winner)) r.winner = m;
    bool is_lt = parse_lt_candidate(m.kernel).has_value();
    if (!is_lt && better(m, r.cutlass_best)) r.cutlass_best = m;
    if (is_lt && better(m, r.lt_best)) r.lt_best = m;
    if (!lts.empty() && m.kernel == lts[0]) r.lt_top1 = m;
    if (m.kernel == analytic) r.analytic = m;
  }
  return r;
}

}  // namespace

WorkloadReport report_from_db(const TuneTask& t, const TuningDb& db, const Environment& env,
                              const ProfileOptions& opts) {
  auto ranked = rank_candidates(t.problem, t.m, opts.target_sm, 1);
  return summarize(t, workload_key(t.problem, t.m), ranked.empty() ? "" : ranked[0].name, db, env, opts);
}

std::vector<std::vector<Candidate>> cutlass_candidates(const std::vector<TuneTask>& tasks, const ProfileOptions& opts) {
  std::vector<std::vector<Candidate>> ranked;
  // Per problem (the workload text at M 0: tasks differing only in M share it), each kernel's best
  // ranking position over the problem's tasks.
  std::map<std::string, std::map<std::string, size_t>> best_pos;
  for (const TuneTask& t : tasks) {
    ranked.push_back(rank_candidates(t.problem, t.m, opts.target_sm, size_t(std::max(opts.top_k, 1))));
    auto& pos = best_pos[workload_key(t.problem, 0)];
    for (size_t i = 0; i < ranked.back().size(); ++i) {
      auto [it, fresh] = pos.emplace(ranked.back()[i].name, i);
      if (!fresh) it->second = std::min(it->second, i);
    }
  }
  if (opts.max_kernels_per_problem <= 0) return ranked;
  std::map<std::string, std::set<std::string>> keep;
  for (const auto& [problem, pos] : best_pos) {
    std::vector<std::pair<size_t, std::string>> order;
    for (const auto& [name, i] : pos) order.push_back({i, name});
    std::sort(order.begin(), order.end());
    auto& k = keep[problem];
    for (const auto& [i, name] : order)
      if (i == 0 || k.size() < size_t(opts.max_kernels_per_problem)) k.insert(name);  // first choices always
  }
  for (size_t t = 0; t < tasks.size(); ++t) {
    const auto& k = keep[workload_key(tasks[t].problem, 0)];
    std::erase_if(ranked[t], [&](const Candidate& c) { return !k.count(c.name); });
  }
  return ranked;
}

namespace {

using TodoFn = std::function<void(const TuneTask& t, const std::string& workload,
                                  const std::vector<std::pair<std::string, std::string>>& todo)>;
using Todo = std::vector<std::pair<std::string, std::string>>;


std::vector<WorkloadReport> tune_impl(const std::vector<TuneTask>& tasks, TuningDb& db, const Environment& env,
                                      const ProfileOptions& opts, const TodoFn& run_todo, const CompileFn& compile,
                                      TuneStats* stats, bool pooled) {
  using Clock = std::chrono::steady_clock;
  auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  TuneStats st;
  std::vector<std::vector<Candidate>> ranked = cutlass_candidates(tasks, opts);
  struct Plan {
    std::string workload;
    std::vector<Candidate> cutlass;
    std::vector<std::string> todo;  // kernels this run must time, in ranking order
  };
  std::vector<Plan> plans;
  std::vector<KernelSpec> to_compile;
  std::set<std::string> queued;
  for (size_t ti = 0; ti < tasks.size(); ++ti) {
    const TuneTask& t = tasks[ti];
    Plan p;
    p.workload = workload_key(t.problem, t.m);
    p.cutlass = std::move(ranked[ti]);
    std::vector<std::string> names;
    for (const Candidate& c : p.cutlass) names.push_back(c.name);
    for (const std::string& n : lt_candidates(t.problem, opts.lt_algos)) names.push_back(n);
    for (const std::string& n : names) {
      if (!needs_measuring(db, env, p.workload, n)) continue;  // measured before (maybe by a run that was killed)
      p.todo.push_back(n);
    }
    for (const Candidate& c : p.cutlass)
      if (std::find(p.todo.begin(), p.todo.end(), c.name) != p.todo.end() && queued.insert(c.name).second)
        to_compile.push_back(c.spec);
    plans.push_back(std::move(p));
  }

  // One parallel batch for everything; kernels do not depend on the shape. With a cache lookup
  // the batch runs in a child process and each point is timed once its kernels are there.
  std::map<std::string, CompileResult> built;
  std::map<std::string, KernelSpec> spec_of;
  for (const KernelSpec& k : to_compile) spec_of[kernel_name(k)] = k;
  const auto compile_start = Clock::now();
  pid_t compiler = -1;
  if (!to_compile.empty() && opts.compiled_lookup && tasks.size() > 1) {
    std::fflush(nullptr);
    compiler = support::fork_child();  // dies with us, however we end
    if (compiler == 0) {
      int rc = 0;
      try {
        compile(to_compile);
      } catch (...) {
        rc = 1;
      }
      std::fflush(nullptr);
      _exit(rc);
    }
  }
  // An exception on the way out must not leave the batch compiling behind us.
  struct StopCompiler {
    pid_t& pid;
    ~StopCompiler() {
      if (pid <= 0) return;
      support::kill_child(pid);
      int status = 0;
      support::reap_child(pid, &status);
    }
  } stop_compiler{compiler};
  double waited_s = 0;
  auto wait_for = [&](const std::string& kernel) {
    if (compiler <= 0 || built.count(kernel) || !spec_of.count(kernel)) return;
    const auto w0 = Clock::now();
    for (;;) {
      if (auto r = opts.compiled_lookup(spec_of.at(kernel))) {
        built[kernel] = *r;
        break;
      }
      int status = 0;
      if (support::reap_child(compiler, &status, WNOHANG) == compiler) {  // the batch ended: last look
        st.compile_s = seconds_since(compile_start);
        compiler = 0;
        auto r = opts.compiled_lookup(spec_of.at(kernel));
        built[kernel] = r ? *r : CompileResult{kernel, false, false, "", "the compile process ended without a result", 0};
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    waited_s += seconds_since(w0);
  };
  if (!to_compile.empty() && compiler < 0) {
    std::vector<CompileResult> res = compile(to_compile);
    if (res.size() != to_compile.size())
      throw std::logic_error("compile function broke its contract: one result per spec, in order");
    for (size_t i = 0; i < res.size(); ++i) built[kernel_name(to_compile[i])] = res[i];
    st.compile_s = seconds_since(compile_start);
  }
  st.compiled = int(to_compile.size());

  // What task i's worker must time: its candidates less those that failed to compile (recorded here).
  auto runnable_of = [&](size_t i) {
    Plan& p = plans[i];
    std::vector<std::pair<std::string, std::string>> runnable;
    for (const std::string& kernel : p.todo) {
      wait_for(kernel);
      auto b = built.find(kernel);
      if (b != built.end() && !b->second.ok) {
        db.record(env, {p.workload, kernel, Status::compile_failed, std::numeric_limits<double>::infinity(), 0,
                        "compile failed; log: " + b->second.log});
      } else {
        runnable.push_back({kernel, b != built.end() ? b->second.library : ""});
      }
    }
    return runnable;
  };
  const std::vector<int> devices = opts.gpus.empty() ? std::vector<int>{0} : opts.gpus;
  auto progress = [&](size_t i, double took, size_t worker) {
    const int measured = int(plans[i].todo.size());
    if (!opts.quiet && measured)
      std::fprintf(stderr, "[%zu/%zu] %s: timed %d candidates in %.1f s%s\n", i + 1, tasks.size(),
                   plans[i].workload.c_str(), measured, took,
                   devices.size() > 1 ? (" on GPU " + std::to_string(devices[worker])).c_str() : "");
  };
  if (!pooled) {
    for (size_t i = 0; i < tasks.size(); ++i) {
      auto runnable = runnable_of(i);
      const auto t0 = Clock::now();
      if (!runnable.empty()) run_todo(tasks[i], plans[i].workload, runnable);
      const double took = seconds_since(t0);
      st.timing_s += took;
      progress(i, took, 0);
    }
  } else {
    // One worker per GPU, each taking the next (workload, M) point as it becomes free; the points
    // are handed out in order, so compiles overlap timing as with one GPU.
    std::vector<std::vector<std::pair<std::string, std::string>>> handed(tasks.size());
    const double waited_before = waited_s;
    const auto t0 = Clock::now();
    PoolOptions pool;
    pool.devices = devices;
    run_pool(
        tasks.size(), pool,
        [&](size_t i) -> std::optional<std::string> {
          handed[i] = runnable_of(i);
          if (handed[i].empty()) return std::nullopt;
          return encode_candidates(handed[i]);
        },
        [&](size_t, size_t i, const std::string& payload) {
          run_todo(tasks[i], plans[i].workload, decode_candidates(payload));
        },
        [&](size_t i, size_t worker, bool ok, double took) {
          for (const auto& kv : handed[i])
            if (!db.find(env, plans[i].workload, kv.first))
              db.record(env, {plans[i].workload, kv.first, Status::crashed, std::numeric_limits<double>::infinity(), 0,
                              ok ? "the batch measurer left it unmeasured"
                                 : "its timing worker (GPU " + std::to_string(devices[worker]) + ") died"});
          progress(i, took, worker);
        });
    st.timing_s = std::max(0.0, seconds_since(t0) - (waited_s - waited_before));
  }
  std::vector<WorkloadReport> out;
  for (size_t i = 0; i < tasks.size(); ++i) {
    Plan& p = plans[i];
    const int measured = int(p.todo.size());
    WorkloadReport r = summarize(tasks[i], p.workload, p.cutlass.empty() ? "" : p.cutlass[0].name, db, env, opts);
    r.measured = measured;
    r.reused = int(p.cutlass.size() + lt_candidates(tasks[i].problem, opts.lt_algos).size()) - measured;
    out.push_back(std::move(r));
  }
  if (compiler > 0) {  // every point is timed; the batch may still be compiling unused kernels
    int status = 0;
    support::reap_child(compiler, &status);
    compiler = 0;
    st.compile_s = seconds_since(compile_start);
  }
  if (!opts.quiet && (st.compiled || st.timing_s > 0))
    std::fprintf(stderr, "compiled %d kernels in %.1f s, timed in %.1f s%s\n", st.compiled, st.compile_s, st.timing_s,
                 waited_s > 0 ? (" (compiling and timing overlapped; " + std::to_string(int(waited_s)) +
                                 " s waiting for kernels)").c_str()
                              : "");
  if (stats) *stats = st;
  return out;
}

}  // namespace

std::vector<WorkloadReport> tune_tasks(const std::vector<TuneTask>& tasks, TuningDb& db, const Environment& env,
                                       const ProfileOptions& opts, const MeasureFn& measure,
                                       const CompileFn& compile, TuneStats* stats) {
  return tune_impl(
      tasks, db, env, opts,
      [&](const TuneTask& t, const std::string& workload, const std::vector<std::pair<std::string, std::string>>& todo) {
        for (const auto& [kernel, library] : todo) {
          Measurement m = measure(t.problem, t.m, kernel, library);
          m.workload = workload;
          m.kernel = kernel;
          if (m.status != Status::ok) m.time_us = std::numeric_limits<double>::infinity();
          db.record(env, m);  // at once: a kill after this line loses nothing
        }
      },
      compile, stats, false);
}

std::vector<WorkloadReport> tune_tasks(const std::vector<TuneTask>& tasks, TuningDb& db, const Environment& env,
                                       const ProfileOptions& opts, const BatchMeasureFn& measure,
                                       const CompileFn& compile, TuneStats* stats) {
  return tune_impl(
      tasks, db, env, opts,
      [&](const TuneTask& t, const std::string& workload, const std::vector<std::pair<std::string, std::string>>& todo) {
        measure(t.problem, t.m, todo);  // in a timing worker; the parent records what it left unmeasured
      },
      compile, stats, true);
}

void measure_in_children(const std::string& db_path, const Environment& env, const std::string& workload,
                         const std::vector<std::pair<std::string, std::string>>& todo,
                         std::chrono::milliseconds per_candidate, const CandidateMeasureFn& in_child) {
  TuningDb db(db_path);
  size_t next = 0;
  auto skip_done = [&] {
    while (next < todo.size() && !needs_measuring(db, env, workload, todo[next].first)) ++next;
  };
  skip_done();
  while (next < todo.size()) {
    const size_t first = next;
    const unsigned alarm_s = unsigned(std::max<int64_t>(1, (per_candidate.count() + 999) / 1000));
    ChildResult r = run_in_child(
        [&](const std::function<void(const std::string&)>&) {
          TuningDb child_db(db_path);  // never the parent's connection across fork
          for (size_t i = first; i < todo.size(); ++i) {
            alarm(alarm_s);  // per candidate: a hang ends the child with SIGALRM
            Measurement ms = in_child(todo[i].first, todo[i].second);
            alarm(0);
            ms.workload = workload;
            ms.kernel = todo[i].first;
            if (ms.status != Status::ok) ms.time_us = std::numeric_limits<double>::infinity();
            child_db.record(env, ms);
            if (ms.status == Status::crashed) return true;  // a fresh process for the rest
          }
          return true;
        },
        per_candidate * int64_t(todo.size() - first) + std::chrono::milliseconds(5000));
    skip_done();
    if (next < todo.size() && next == first) {
      // The child died on this candidate before recording it.
      const bool hung = r.outcome == ChildResult::Outcome::hung || r.detail.find("Alarm") != std::string::npos;
      db.record(env, {workload, todo[next].first, hung ? Status::hung : Status::crashed,
                      std::numeric_limits<double>::infinity(), 0,
                      (hung ? "no result within " + std::to_string(per_candidate.count()) + " ms" : r.detail)});
      skip_done();
    } else if (next < todo.size() && r.outcome != ChildResult::Outcome::ok) {
      // Died after some progress: the next candidate is the culprit.
      const bool hung = r.outcome == ChildResult::Outcome::hung || r.detail.find("Alarm") != std::string::npos;
      db.record(env, {workload, todo[next].first, hung ? Status::hung : Status::crashed,
                      std::numeric_limits<double>::infinity(), 0, r.detail});
      skip_done();
    }
  }
}

BatchMeasureFn batched_in_children(std::string db_path, Environment env, std::chrono::milliseconds per_candidate,
                                   MeasureFn in_child) {
  return [=](const GemmProblem& p, int64_t m, const std::vector<std::pair<std::string, std::string>>& todo) {
    measure_in_children(db_path, env, workload_key(p, m), todo, per_candidate,
                        [&](const std::string& kernel, const std::string& library) { return in_child(p, m, kernel, library); });
  };
}

CompileJob gemm_compile_job(const KernelSpec& s, int target_sm) {
  NvccOptions nv;
  nv.target_sm = target_sm;
  return {kernel_name(s), emit_kernel(s, target_sm), cache_flags(nvcc_command(s, "@SRC@", "@LIB@", nv)),
          s.config.family == Family::sm90 ? "cutlass_gemm_sm90" : "cutlass_gemm_sm80"};
}

CompileJob lt_compile_job(const cublaslt_backend::LtKernelSpec& s) {
  std::vector<std::string> flags = cublaslt_backend::lt_kernel_flags();
  flags.push_back("-I" + sabre_include_dir());
  return {cublaslt_backend::lt_kernel_name(s), cublaslt_backend::emit_lt_kernel(s), flags};
}

CompileFn default_compile_fn(const ProfileOptions& opts) {
  return [opts](const std::vector<KernelSpec>& specs) {
    const std::string nvcc = find_nvcc();
    CompileCache cache(opts.cache_dir.empty() ? CompileCache::default_dir() : opts.cache_dir, nvcc);
    std::vector<CompileJob> jobs;
    for (const KernelSpec& s : specs) jobs.push_back(gemm_compile_job(s, opts.target_sm));
    int jobs_n = opts.jobs > 0 ? opts.jobs : int(std::max(1u, std::thread::hardware_concurrency()));
    return cache.compile_all(jobs, jobs_n, opts.quiet);
  };
}

std::function<std::optional<CompileResult>(const KernelSpec&)> default_lookup_fn(const ProfileOptions& opts) {
  auto cache = std::make_shared<CompileCache>(opts.cache_dir.empty() ? CompileCache::default_dir() : opts.cache_dir,
                                              find_nvcc());
  // The tuner polls while a batch compiles: emit and key each kernel's source once.
  auto jobs = std::make_shared<std::map<std::string, CompileJob>>();
  return [cache, jobs, opts](const KernelSpec& s) -> std::optional<CompileResult> {
    const std::string name = kernel_name(s);
    auto it = jobs->find(name);
    if (it == jobs->end()) it = jobs->emplace(name, gemm_compile_job(s, opts.target_sm)).first;
    CompileResult r = cache->lookup(it->second);
    if (!r.cached) return std::nullopt;
    return r;
  };
}

}  // namespace sabre::tune
