// The profiler's bookkeeping without a GPU (src/tune/profiler.h): fake compile and measure
// functions stand in for nvcc and the GPU. Checks: every candidate measured once and recorded at
// once; a run killed with SIGKILL mid-way resumes measuring only what is missing; failed compiles,
// crashing and hanging candidates (real watchdog children) score +inf and the tuner goes on;
// winners must be correct; cuBLASLt candidates and their names.
#include <gtest/gtest.h>

#include <optional>
#include <thread>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "backends/cutlass/kernel_spec.h"
#include "tune/profiler.h"
#include "tune/rank.h"
#include "tune_test_util.h"

using namespace sabre::tune;
namespace cb = sabre::cutlass_backend;
using sabre::test_util::gemm_problem;
using sabre::test_util::h200;

namespace {

std::string temp_path(const char* tag) {
  auto dir = std::filesystem::temp_directory_path() / ("sabre_profiler_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto p = dir / tag;
  std::filesystem::remove(p);
  std::filesystem::remove(p.string() + "-wal");
  std::filesystem::remove(p.string() + "-shm");
  return p.string();
}

// A compile function that "builds" every spec except those named in `fail`.
CompileFn fake_compile(std::set<std::string> fail, int* calls = nullptr) {
  return [fail, calls](const std::vector<cb::KernelSpec>& specs) {
    std::vector<CompileResult> out;
    for (const auto& s : specs) {
      CompileResult r;
      r.name = cb::kernel_name(s);
      r.ok = !fail.count(r.name);
      r.library = r.ok ? "/fake/" + r.name + ".so" : "";
      r.log = "/fake/" + r.name + ".log";
      out.push_back(r);
      if (calls) ++*calls;
    }
    return out;
  };
}

// Deterministic fake time from the kernel name; appends each call to `log` (a file, so a killed
// child's calls are visible too).
MeasureFn fake_measure(const std::string& log) {
  return [log](const GemmProblem&, int64_t m, const std::string& kernel, const std::string& library) {
    std::ofstream(log, std::ios::app) << m << " " << kernel << "\n";
    Measurement r;
    r.time_us = 10.0 + double(std::hash<std::string>{}(kernel) % 1000) / 10.0;
    r.rel_error = 1e-4;
    // CUTLASS candidates arrive with their library; cuBLASLt ones without, and report the kernel
    // their algorithm deploys as (gpu_measure.cpp).
    auto lt = parse_lt_candidate(kernel);
    if (lt ? !library.empty() : library.empty()) r.status = Status::crashed;
    if (lt) r.detail = std::string(kDeployPrefix) + lt->first + "_algo" + std::to_string(lt->second) + "_t1_s1_k1_r0_w0_o0_i0_c0";
    return r;
  };
}

std::vector<std::string> lines(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::vector<TuneTask> tasks() {
  return {{gemm_problem(768, 768, "bias"), 128}, {gemm_problem(768, 768, "bias"), 4096}, {gemm_problem(3072, 768, "bias_gelu"), 1024}};
}

ProfileOptions opts() {
  ProfileOptions o;
  o.top_k = 4;
  o.lt_algos = 3;
  o.quiet = true;
  return o;
}

}  // namespace

TEST(Profiler, LtCandidatesOnlyForEpiloguesCublasltHas) {
  auto lt = lt_candidates(gemm_problem(768, 768, "bias_relu"), 2);
  ASSERT_EQ(lt.size(), 2u);
  EXPECT_EQ(lt[0], "cublaslt_tn_f16_f16_f32_bias_relu#algo0");
  EXPECT_EQ(parse_lt_candidate(lt[1]), std::make_pair(std::string("cublaslt_tn_f16_f16_f32_bias_relu"), 1));
  EXPECT_TRUE(lt_candidates(gemm_problem(768, 768, "bias_gelu"), 4).empty());  // erf GELU: cuBLASLt has only tanh
  EXPECT_EQ(lt_candidates(gemm_problem(768, 768, "bias_gelutanh"), 4).size(), 4u);
  EXPECT_TRUE(lt_candidates(gemm_problem(768, 768, "gelu_res"), 4).empty());
  EXPECT_FALSE(parse_lt_candidate("sm90_ws_coop_tn_f16_f16_f32_128x256x64_c1x2_a8_bias"));
  EXPECT_FALSE(parse_lt_candidate("cublaslt_tn_f16_f16_f32_bias#algox"));
}

TEST(Profiler, MeasuresEachCandidateOnceAndRecordsEverything) {
  TuningDb db(":memory:");
  const std::string log = temp_path("calls.txt");
  int compiled = 0;
  auto reports = tune_tasks(tasks(), db, h200(), opts(), fake_measure(log), fake_compile({}, &compiled));
  ASSERT_EQ(reports.size(), 3u);
  auto calls = lines(log);
  // 4 CUTLASS + 3 cuBLASLt for the bias workloads; bias_gelu (erf) has no cuBLASLt candidates.
  EXPECT_EQ(calls.size(), 4u + 3 + 4 + 3 + 4);
  EXPECT_EQ(std::set<std::string>(calls.begin(), calls.end()).size(), calls.size());
  EXPECT_LE(compiled, 12);  // kernels shared between workloads compile once
  EXPECT_EQ(db.count(), int64_t(calls.size()));
  for (const auto& r : reports) {
    ASSERT_TRUE(r.winner) << r.workload;
    EXPECT_EQ(r.winner->status, Status::ok);
    auto ms = db.measurements(h200(), r.workload);
    EXPECT_EQ(r.winner->kernel, ms[0].kernel);
    EXPECT_EQ(r.measured, int(ms.size()));
    EXPECT_EQ(r.reused, 0);
    ASSERT_TRUE(r.cutlass_best);
    EXPECT_TRUE(cb::parse_kernel_name(r.cutlass_best->kernel));
    EXPECT_EQ(r.analytic_pick, rank_candidates(r.task.problem, r.task.m, 90, 1)[0].name);
    ASSERT_TRUE(r.analytic);  // the model's pick is always among the timed
  }
  EXPECT_TRUE(reports[0].lt_top1);
  EXPECT_EQ(reports[0].lt_top1->kernel, "cublaslt_tn_f16_f16_f32_bias#algo0");
  EXPECT_FALSE(reports[2].lt_top1);

  // Warm: nothing measured or compiled again, same winners.
  std::filesystem::remove(log);
  compiled = 0;
  auto again = tune_tasks(tasks(), db, h200(), opts(), fake_measure(log), fake_compile({}, &compiled));
  EXPECT_TRUE(lines(log).empty());
  EXPECT_EQ(compiled, 0);
  for (size_t i = 0; i < again.size(); ++i) {
    EXPECT_EQ(again[i].winner->kernel, reports[i].winner->kernel);
    EXPECT_EQ(again[i].measured, 0);
    EXPECT_EQ(again[i].reused, reports[i].measured);
    EXPECT_EQ(report_from_db(tasks()[i], db, h200(), opts()).winner->kernel, reports[i].winner->kernel);
  }
}

// max_kernels_per_problem: one problem over its 13 M buckets compiles at most the cap (or its
// buckets' distinct analytic first choices, if more), each bucket's first choice is always timed,
// and each task keeps its ranking order; another problem has its own cap.
TEST(Profiler, CapsKernelsPerProblemAndAlwaysTimesEachBucketsAnalyticPick) {
  const GemmProblem p = gemm_problem(768, 768, "bias");
  std::vector<TuneTask> ts;
  for (int64_t m : m_buckets(1, 4096)) ts.push_back({p, m});
  ts.push_back({gemm_problem(3072, 768, "bias_gelu"), 1024});
  ProfileOptions o = opts();
  o.top_k = 6;
  o.lt_algos = 0;
  o.max_kernels_per_problem = 3;
  std::set<std::string> uncapped, top1;
  for (const TuneTask& t : ts) {
    if (t.problem.n != 768) continue;
    auto r = rank_candidates(t.problem, t.m, 90, 6);
    for (const auto& c : r) uncapped.insert(c.name);
    top1.insert(r[0].name);
  }
  ASSERT_GT(uncapped.size(), 3u);  // the cap has work to do
  const size_t expected = std::max<size_t>(3, top1.size());

  auto lists = cutlass_candidates(ts, o);
  ASSERT_EQ(lists.size(), ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    auto full = rank_candidates(ts[i].problem, ts[i].m, 90, 6);
    ASSERT_FALSE(lists[i].empty());
    EXPECT_EQ(lists[i][0].name, full[0].name) << ts[i].m;
    size_t j = 0;  // a subsequence of the ranking: order kept
    for (const auto& c : lists[i]) {
      while (j < full.size() && full[j].name != c.name) ++j;
      EXPECT_LT(j, full.size()) << c.name << " out of ranking order at M " << ts[i].m;
    }
  }
  EXPECT_EQ(lists.back().size(), 3u);  // the other problem: one bucket, its own cap of 3

  TuningDb db(":memory:");
  std::set<std::string> compiled;
  CompileFn record = [&](const std::vector<cb::KernelSpec>& specs) {
    for (const auto& s : specs) compiled.insert(cb::kernel_name(s));
    return fake_compile({})(specs);
  };
  auto reports = tune_tasks(ts, db, h200(), o, fake_measure(temp_path("capped.txt")), record);
  std::set<std::string> timed;
  for (size_t i = 0; i + 1 < reports.size(); ++i) {
    ASSERT_TRUE(reports[i].analytic) << reports[i].workload;  // the untuned pick is always measured
    for (const auto& m : db.measurements(h200(), reports[i].workload)) timed.insert(m.kernel);
  }
  EXPECT_EQ(timed.size(), expected);
  for (const auto& name : top1) EXPECT_TRUE(timed.count(name)) << name;
  EXPECT_LE(compiled.size(), expected + 3);

  // 0: no cap, every task's full top_k.
  o.max_kernels_per_problem = 0;
  lists = cutlass_candidates(ts, o);
  for (size_t i = 0; i < ts.size(); ++i) EXPECT_EQ(lists[i].size(), rank_candidates(ts[i].problem, ts[i].m, 90, 6).size());
}

// Split-K kernels are timed at the small-M buckets of a long-K problem (K = 16384: 256 k-iterations
// a tile; at BERT's K = 3072 the measured lock hand-off makes them lose), where the model ranks them
// high, and nowhere the grid already fills the GPU; they take places under the per-problem cap
// rather than adding compiles.
TEST(Profiler, SplitKCandidatesOnlyAtSmallMAndWithinTheCap) {
  const GemmProblem p = gemm_problem(768, 16384, "bias_res");
  std::vector<TuneTask> ts;
  for (int64_t m : m_buckets(1, 4096)) ts.push_back({p, m});
  ProfileOptions o = opts();
  std::set<std::string> top1;
  for (const TuneTask& t : ts) top1.insert(rank_candidates(t.problem, t.m, 90, 1)[0].name);
  auto lists = cutlass_candidates(ts, o);
  std::set<std::string> all;
  bool split_at_small_m = false;
  for (size_t i = 0; i < ts.size(); ++i)
    for (const Candidate& c : lists[i]) {
      all.insert(c.name);
      const bool split = cb::is_split_k(c.spec.config.schedule);
      split_at_small_m |= split && ts[i].m <= 128;
      if (ts[i].m >= 2048) {
        EXPECT_FALSE(split) << c.name << " at M " << ts[i].m;
      }
    }
  EXPECT_TRUE(split_at_small_m);
  EXPECT_LE(all.size(), std::max<size_t>(size_t(o.max_kernels_per_problem), top1.size()));
}

TEST(Profiler, ResumesAfterSigkillWithoutLosingOrRepeatingMeasurements) {
  const std::string dbpath = temp_path("resume.db");
  const std::string log = temp_path("resume_calls.txt");
  constexpr int kKillAfter = 9;
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    TuningDb db(dbpath);
    auto inner = fake_measure(log);
    int n = 0;
    MeasureFn dying = [&](const GemmProblem& p, int64_t m, const std::string& k, const std::string& lib) {
      if (n++ == kKillAfter) raise(SIGKILL);  // kill -9 in the middle of a measurement
      return inner(p, m, k, lib);
    };
    tune_tasks(tasks(), db, h200(), opts(), dying, fake_compile({}));
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the child should have been killed";
  auto first = lines(log);
  ASSERT_EQ(first.size(), size_t(kKillAfter));
  {
    TuningDb db(dbpath);
    EXPECT_EQ(db.count(), kKillAfter) << "every measurement made before the kill is in the DB";
  }
  std::filesystem::remove(log);
  TuningDb db(dbpath);
  auto reports = tune_tasks(tasks(), db, h200(), opts(), fake_measure(log), fake_compile({}));
  auto second = lines(log);
  EXPECT_EQ(first.size() + second.size(), 18u) << "all candidates measured exactly once over both runs";
  std::set<std::string> all(first.begin(), first.end());
  for (const auto& l : second) EXPECT_TRUE(all.insert(l).second) << "measured again after resume: " << l;
  EXPECT_EQ(db.count(), 18);
  int reused = 0;
  for (const auto& r : reports) reused += r.reused;
  EXPECT_EQ(reused, kKillAfter);
}

TEST(Profiler, FailedCompileCrashAndHangScoreInfinityAndTuningGoesOn) {
  TuningDb db(":memory:");
  TuneTask t{gemm_problem(768, 768, "bias"), 1024};
  auto ranked = rank_candidates(t.problem, t.m, 90, 4);
  ASSERT_EQ(ranked.size(), 4u);
  const std::string bad_compile = ranked[0].name, crasher = ranked[1].name, hanger = ranked[2].name,
                    wrong = ranked[3].name;
  // Real watchdog children: the crasher segfaults, the hanger sleeps past the deadline.
  MeasureFn measure = [&](const GemmProblem&, int64_t, const std::string& k, const std::string&) {
    ChildResult r = run_in_child(
        [&](const std::function<void(const std::string&)>& report) {
          if (k == crasher) raise(SIGSEGV);
          if (k == hanger) sleep(30);
          if (k == wrong) {
            report("wrong_result relative L2 error 0.5 above 0.005");
            return false;
          }
          report("ok 12.5 0.0001");
          return true;
        },
        std::chrono::milliseconds(1500));
    return measurement_from_child(r);
  };
  ProfileOptions o = opts();
  auto reports = tune_tasks({t}, db, h200(), o, measure, fake_compile({bad_compile}));
  ASSERT_EQ(reports.size(), 1u);
  auto get = [&](const std::string& k) { return *db.find(h200(), reports[0].workload, k); };
  EXPECT_EQ(get(bad_compile).status, Status::compile_failed);
  EXPECT_NE(get(bad_compile).detail.find(".log"), std::string::npos) << "the log is kept and named";
  EXPECT_EQ(get(crasher).status, Status::crashed);
  EXPECT_EQ(get(hanger).status, Status::hung);
  EXPECT_EQ(get(wrong).status, Status::wrong_result);
  for (const auto& k : {bad_compile, crasher, hanger, wrong}) EXPECT_TRUE(std::isinf(get(k).time_us)) << k;
  // The cuBLASLt algorithms ran after the failures, and only a correct one can win.
  ASSERT_TRUE(reports[0].winner);
  EXPECT_TRUE(parse_lt_candidate(reports[0].winner->kernel));
  EXPECT_DOUBLE_EQ(reports[0].winner->time_us, 12.5);
  EXPECT_FALSE(reports[0].cutlass_best);
}

// The real compile path (emit_kernel + nvcc.h's flags through CompileCache): needs nvcc, minutes;
// run with SABRE_TEST_NVCC=1. A second call must hit the cache and compile nothing.
TEST(ProfilerNvcc, DefaultCompileFnBuildsThroughTheCacheOnce) {
  if (!std::getenv("SABRE_TEST_NVCC")) {
    const char* why = std::getenv("SABRE_TEST_NVCC_SLOW");
    GTEST_SKIP() << (why ? why : "set SABRE_TEST_NVCC=1 to run nvcc");
  }
  ProfileOptions o;
  o.quiet = true;
  o.cache_dir = temp_path("kcache");
  std::filesystem::remove_all(o.cache_dir);
  GemmProblem p = gemm_problem(768, 768, "bias_gelu");
  auto ranked = rank_candidates(p, 1024, 90, 1);
  ASSERT_EQ(ranked.size(), 1u);
  auto fn = default_compile_fn(o);
  auto r = fn({ranked[0].spec});
  ASSERT_EQ(r.size(), 1u);
  ASSERT_TRUE(r[0].ok) << "log: " << r[0].log;
  EXPECT_FALSE(r[0].cached);
  EXPECT_TRUE(std::filesystem::exists(r[0].library));
  auto again = fn({ranked[0].spec});
  EXPECT_TRUE(again[0].ok && again[0].cached);
  EXPECT_EQ(again[0].library, r[0].library);
}

// Batch children: one process measures many candidates and records each at once; a crash, a hang
// (the per-candidate alarm) or a measurement that reports a crash ends the child, the culprit is
// recorded, and a fresh child finishes the rest. Nothing is measured twice.
TEST(Profiler, BatchedChildrenRecordAsTheyGoAndRestartPastFailures) {
  const std::string dbpath = temp_path("batch.db");
  const std::string log = temp_path("batch_calls.txt");
  TuningDb db(dbpath);
  TuneTask t{gemm_problem(768, 768, "bias"), 1024};
  auto ranked = rank_candidates(t.problem, t.m, 90, 4);
  ASSERT_EQ(ranked.size(), 4u);
  const std::string segv = ranked[1].name, hang = ranked[2].name;
  const std::string lt_fault = "cublaslt_tn_f16_f16_f32_bias#algo0";
  MeasureFn in_child = [&](const GemmProblem&, int64_t, const std::string& k, const std::string&) {
    std::ofstream(log, std::ios::app) << getpid() << " " << k << "\n";
    if (k == segv) raise(SIGSEGV);
    if (k == hang) sleep(30);
    Measurement m;
    m.status = k == lt_fault ? Status::crashed : Status::ok;  // e.g. an illegal address: context is gone
    m.time_us = 10 + double(k.size() % 7);
    if (parse_lt_candidate(k)) m.detail = "not deployable: a fake";  // as gpu_measure.cpp: never empty
    return m;
  };
  auto reports = tune_tasks({t}, db, h200(), opts(), batched_in_children(dbpath, h200(), std::chrono::milliseconds(1000), in_child),
                            fake_compile({}));
  const std::string w = workload_key(t.problem, t.m);
  EXPECT_EQ(db.find(h200(), w, segv)->status, Status::crashed);
  EXPECT_EQ(db.find(h200(), w, hang)->status, Status::hung);
  EXPECT_EQ(db.find(h200(), w, lt_fault)->status, Status::crashed);
  EXPECT_EQ(db.find(h200(), w, ranked[0].name)->status, Status::ok);
  EXPECT_EQ(db.find(h200(), w, ranked[3].name)->status, Status::ok);
  EXPECT_EQ(db.count(), 7);  // 4 CUTLASS + 3 cuBLASLt, each once
  auto calls = lines(log);
  EXPECT_EQ(calls.size(), 7u) << "each candidate ran exactly once";
  std::set<std::string> pids;
  for (const auto& c : calls) pids.insert(c.substr(0, c.find(' ')));
  EXPECT_EQ(pids.size(), 4u) << "a child per failure plus the first: segv, hang, reported crash";
  ASSERT_TRUE(reports[0].winner);
  EXPECT_EQ(reports[0].measured, 7);
}

// compiled_lookup: the compile batch runs in a child process and points are timed as their
// kernels appear in the "cache" (marker files here), before the whole batch is done; a kernel the
// child fails to build is recorded as compile_failed, and the rest are timed as usual.
TEST(Profiler, OverlapsCompilingWithTiming) {
  const std::string dir = temp_path("overlap");
  std::filesystem::create_directories(dir);
  const std::string log = temp_path("overlap_calls.txt");
  const std::vector<TuneTask> ts = tasks();
  // The kernel the last task needs first: failed in the child.
  const std::string bad = rank_candidates(ts[2].problem, ts[2].m, 90, 1)[0].name;
  CompileFn slow = [dir, bad](const std::vector<cb::KernelSpec>& specs) {
    std::vector<CompileResult> out;
    for (const auto& s : specs) {
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
      const std::string name = cb::kernel_name(s);
      std::ofstream(dir + "/" + name + (name == bad ? ".failed" : ".so")) << "x";
      out.push_back({name, name != bad, false, name != bad ? dir + "/" + name + ".so" : "", dir + "/" + name + ".log", 0});
    }
    std::ofstream(dir + "/DONE") << "x";
    return out;
  };
  ProfileOptions o = opts();
  o.compiled_lookup = [dir](const cb::KernelSpec& s) -> std::optional<CompileResult> {
    const std::string name = cb::kernel_name(s);
    if (std::filesystem::exists(dir + "/" + name + ".so")) return CompileResult{name, true, true, dir + "/" + name + ".so", "", 0};
    if (std::filesystem::exists(dir + "/" + name + ".failed")) return CompileResult{name, false, true, "", dir + "/" + name + ".log", 0};
    return std::nullopt;
  };
  bool timed_before_done = false;
  MeasureFn measure = [&](const GemmProblem& p, int64_t m, const std::string& kernel, const std::string& library) {
    if (!std::filesystem::exists(dir + "/DONE")) timed_before_done = true;
    return fake_measure(log)(p, m, kernel, library);
  };
  TuningDb db(":memory:");
  auto reports = tune_tasks(ts, db, h200(), o, measure, slow);
  ASSERT_EQ(reports.size(), 3u);
  EXPECT_TRUE(timed_before_done) << "the first point waited for the whole batch";
  EXPECT_TRUE(std::filesystem::exists(dir + "/DONE"));  // the child finished before tune_tasks returned
  auto failed = db.find(h200(), workload_key(ts[2].problem, ts[2].m), bad);
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->status, Status::compile_failed);
  for (const auto& r : reports) EXPECT_TRUE(r.cutlass_best) << r.workload;
}

TEST(Profiler, MeasuresCublasltRowsWithoutTheirAlgorithmAgainOnce) {
  // A DB from before cuBLASLt algorithms could be deployed: ok rows with no detail. The tuner
  // measures those again (to learn the algorithm), once; CUTLASS rows stay as they are.
  const std::string dbpath = temp_path("lt_again.db"), log = temp_path("lt_again.log");
  TuningDb db(dbpath);
  const TuneTask t{gemm_problem(768, 768, "bias"), 128};
  const std::string w = workload_key(t.problem, t.m);
  const auto ranked = rank_candidates(t.problem, t.m, 90, 4);
  for (const auto& c : ranked) db.record(h200(), {w, c.name, Status::ok, 9.0, 1e-4, ""});
  for (const auto& k : lt_candidates(t.problem, 3)) db.record(h200(), {w, k, Status::ok, 8.0, 1e-4, ""});
  tune_tasks({t}, db, h200(), opts(), fake_measure(log), fake_compile({}));
  auto first = lines(log);
  ASSERT_EQ(first.size(), 3u) << "each cuBLASLt row measured again, no CUTLASS one";
  for (const auto& l : first) EXPECT_NE(l.find("cublaslt_"), std::string::npos) << l;
  const auto m = db.find(h200(), w, "cublaslt_tn_f16_f16_f32_bias#algo1");
  ASSERT_TRUE(m);
  EXPECT_EQ(deployable_kernel(*m), "cublaslt_tn_f16_f16_f32_bias_algo1_t1_s1_k1_r0_w0_o0_i0_c0");
  tune_tasks({t}, db, h200(), opts(), fake_measure(log), fake_compile({}));
  EXPECT_EQ(lines(log).size(), 3u) << "a warm run measures nothing";
}
