// Tuning on several GPUs without a GPU: the --gpus grammar and its errors (parse_gpus,
// resolve_gpus, the CLI), the timing pool with fake workers (each item done once, work goes to
// whichever worker is free, a worker that dies has its item handed on or reported, each worker sees
// only its own GPU), tune_tasks giving the same DB and picks on 1..4 workers as the sequential
// measurer, and several processes writing one tuning DB at once.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "backends/cutlass/kernel_spec.h"
#include "tune/db.h"
#include "tune/gpu_pool.h"
#include "tune/profiler.h"
#include "tune/rank.h"

using namespace sabre::tune;
namespace cb = sabre::cutlass_backend;
namespace fs = std::filesystem;

namespace {

std::string temp_path(const std::string& tag) {
  auto dir = fs::temp_directory_path() / ("sabre_gpu_pool_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  auto p = dir / tag;
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(p.string() + suffix);
  return p.string();
}

std::vector<std::string> lines(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// One line per call, appended whole (O_APPEND): several worker processes log into one file.
void log_line(const std::string& path, const std::string& line) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) return;
  const std::string l = line + "\n";
  (void)!write(fd, l.data(), l.size());
  close(fd);
}

template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(GpuList, ParsesAllCountsAndLists) {
  EXPECT_EQ(parse_gpus("all"), std::vector<int>{kAllGpus});
  EXPECT_EQ(parse_gpus("1"), std::vector<int>{0});
  EXPECT_EQ(parse_gpus("3"), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(parse_gpus("0,2,3"), (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(parse_gpus("3,1"), (std::vector<int>{3, 1}));
  EXPECT_EQ(parse_gpus("device=2"), std::vector<int>{2});
  EXPECT_EQ(parse_gpus("device=0,2"), (std::vector<int>{0, 2}));
}

TEST(GpuList, RefusesBadListsWithWhatToWrite) {
  for (const char* bad : {"", "0", "x", "-1", "1,-1", "1,,2", "1,", "device=", "device=x", "ALL", "2.5", "1 2", "9999999"}) {
    const std::string e = error_of([&] { parse_gpus(bad); });
    EXPECT_NE(e.find("give all, a count N"), std::string::npos) << "'" << bad << "': " << e;
  }
  EXPECT_NE(error_of([] { parse_gpus("0"); }).find("at least one GPU"), std::string::npos);
  EXPECT_NE(error_of([] { parse_gpus("1,2,1"); }).find("names GPU 1 twice"), std::string::npos);
  EXPECT_NE(error_of([] { parse_gpus("device=3,3"); }).find("twice"), std::string::npos);
}

TEST(GpuList, ResolvesAgainstTheMachine) {
  EXPECT_EQ(resolve_gpus({}, 4), std::vector<int>{0});
  EXPECT_EQ(resolve_gpus({kAllGpus}, 1), std::vector<int>{0});
  EXPECT_EQ(resolve_gpus({kAllGpus}, 4), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(resolve_gpus({2, 0}, 4), (std::vector<int>{2, 0}));
  EXPECT_EQ(error_of([] { resolve_gpus({0, 1, 2}, 2); }), "GPU 2 asked for, but this machine has 2 GPUs (ids 0..1)");
  EXPECT_EQ(error_of([] { resolve_gpus({1}, 1); }), "GPU 1 asked for, but this machine has 1 GPU (id 0)");
  EXPECT_NE(error_of([] { resolve_gpus({1, 1}, 4); }).find("listed twice"), std::string::npos);
  EXPECT_NE(error_of([] { resolve_gpus({-3}, 4); }).find("0 or more"), std::string::npos);
  // Mixed models are refused (the DB keys a run's measurements by one GPU name), naming both.
  const std::vector<std::string> names = {"NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"};
  EXPECT_EQ(resolve_gpus({0, 1}, names), (std::vector<int>{0, 1}));
  EXPECT_EQ(resolve_gpus({2}, names), std::vector<int>{2});
  const std::string mixed = error_of([&] { resolve_gpus({kAllGpus}, names); });
  EXPECT_NE(mixed.find("GPU 0 is NVIDIA H100 80GB HBM3 but GPU 2 is NVIDIA A100-SXM4-80GB"), std::string::npos) << mixed;
  EXPECT_NE(mixed.find("--gpus 0, then --gpus 2"), std::string::npos) << mixed;
}

TEST(GpuList, VisibleDevicesFollowAnInheritedList) {
  EXPECT_EQ(visible_devices_for(0, nullptr), "0");
  EXPECT_EQ(visible_devices_for(3, nullptr), "3");
  EXPECT_EQ(visible_devices_for(1, "4,6"), "6");
  EXPECT_EQ(visible_devices_for(0, "GPU-1234abcd,GPU-5678"), "GPU-1234abcd");
  EXPECT_NE(error_of([] { visible_devices_for(2, "4,6"); }).find("not among CUDA_VISIBLE_DEVICES=4,6"), std::string::npos);
}

TEST(GpuPool, CandidatePayloadsRoundTrip) {
  const Candidates c = {{"k1", "/a b/lib:1.so"}, {"cublaslt_x#algo0", ""}, {"k:3", "12:xy"}};
  EXPECT_EQ(decode_candidates(encode_candidates(c)), c);
  EXPECT_TRUE(decode_candidates("").empty());
  EXPECT_THROW(decode_candidates("5:ab"), std::logic_error);
}

// Every item done exactly once, by a worker that saw only its own GPU, whatever the worker count;
// `done` reports each once.
TEST(GpuPool, EachItemOnceOnEveryWorkerCount) {
  for (int n : {1, 2, 3, 4}) {
    const std::string log = temp_path("each_" + std::to_string(n) + ".txt");
    PoolOptions o;
    o.devices.clear();
    for (int d = 0; d < n; ++d) o.devices.push_back(d);
    const size_t items = 23;
    std::map<size_t, int> reported;
    std::set<size_t> prepared_twice, prepared;
    run_pool(
        items, o,
        [&](size_t i) -> std::optional<std::string> {
          if (!prepared.insert(i).second) prepared_twice.insert(i);
          if (i % 7 == 3) return std::nullopt;  // nothing to time: done in the parent
          return "payload " + std::to_string(i);
        },
        [&](size_t w, size_t i, const std::string& payload) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5 + 7 * (i % 3)));
          log_line(log, std::to_string(i) + " " + std::to_string(w) + " " + std::getenv("CUDA_VISIBLE_DEVICES") + " " +
                            payload);
        },
        [&](size_t i, size_t, bool ok, double) {
          EXPECT_TRUE(ok);
          ++reported[i];
        });
    EXPECT_TRUE(prepared_twice.empty());
    EXPECT_EQ(reported.size(), items);
    for (const auto& [i, c] : reported) EXPECT_EQ(c, 1) << "item " << i;
    std::map<size_t, int> ran;
    for (const std::string& l : lines(log)) {
      std::istringstream in(l);
      size_t i = 0, w = 0;
      std::string visible, word, num;
      in >> i >> w >> visible >> word >> num;
      ++ran[i];
      EXPECT_EQ(visible, std::to_string(o.devices[w])) << "worker " << w << " sees only its GPU";
      EXPECT_EQ(num, std::to_string(i));
    }
    EXPECT_EQ(ran.size(), items - 3) << n << " workers";  // items 3, 10, 17 need no worker
    for (const auto& [i, c] : ran) EXPECT_EQ(c, 1) << "item " << i << " ran " << c << " times on " << n << " workers";
  }
}

// Work goes to whichever worker is free: while one worker is held by a slow item, the other takes
// everything else (static halves would leave it 4 of the 9 fast items).
TEST(GpuPool, AFreeWorkerTakesTheNextItem) {
  const std::string log = temp_path("steal.txt");
  PoolOptions o;
  o.devices = {0, 1};
  std::map<size_t, size_t> by;
  run_pool(
      10, o, [](size_t) -> std::optional<std::string> { return "x"; },
      [&](size_t w, size_t i, const std::string&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(i == 0 ? 1500 : 20));
        log_line(log, std::to_string(i) + " " + std::to_string(w));
      },
      [&](size_t i, size_t w, bool ok, double) {
        EXPECT_TRUE(ok);
        by[i] = w;
      });
  ASSERT_EQ(by.size(), 10u);
  const size_t slow = by[0];
  for (size_t i = 1; i < 10; ++i) EXPECT_NE(by[i], slow) << "item " << i << " waited behind the slow one";
}

// A worker that dies on an item: the item goes to a fresh worker once (a flaky death), or is reported
// not ok after max_attempts (an item that kills every worker), and every other item is still done.
TEST(GpuPool, AWorkerThatDiesHasItsItemHandedOnOrReported) {
  for (int n : {1, 3}) {
    const std::string log = temp_path("die_" + std::to_string(n) + ".txt");
    const std::string flaky_mark = temp_path("flaky_" + std::to_string(n));
    PoolOptions o;
    o.devices.clear();
    for (int d = 0; d < n; ++d) o.devices.push_back(d);
    std::map<size_t, bool> result;
    run_pool(
        12, o, [](size_t) -> std::optional<std::string> { return "x"; },
        [&](size_t, size_t i, const std::string&) {
          if (i == 4 && !fs::exists(flaky_mark)) {
            std::ofstream(flaky_mark) << "x";
            raise(SIGKILL);
          }
          if (i == 7) raise(SIGSEGV);
          log_line(log, std::to_string(i));
        },
        [&](size_t i, size_t, bool ok, double) {
          EXPECT_FALSE(result.count(i)) << "item " << i << " reported twice";
          result[i] = ok;
        });
    ASSERT_EQ(result.size(), 12u) << n << " workers";
    for (size_t i = 0; i < 12; ++i) EXPECT_EQ(result[i], i != 7) << "item " << i << " on " << n << " workers";
    std::multiset<std::string> ran;
    for (const auto& l : lines(log)) ran.insert(l);
    EXPECT_EQ(ran.size(), 11u);
    EXPECT_EQ(ran.count("4"), 1u) << "the flaky item was done once, by a fresh worker";
    EXPECT_EQ(ran.count("7"), 0u);
  }
}

// Every worker gone for good (each dies on every item, restarts used up): the rest is reported, not
// waited on forever.
TEST(GpuPool, ReportsWhatIsLeftWhenEveryWorkerIsGone) {
  PoolOptions o;
  o.devices = {0, 1};
  o.max_restarts = 1;
  std::map<size_t, bool> result;
  run_pool(
      9, o, [](size_t) -> std::optional<std::string> { return "x"; },
      [](size_t, size_t, const std::string&) { _exit(9); },
      [&](size_t i, size_t, bool ok, double) { result[i] = ok; });
  ASSERT_EQ(result.size(), 9u);
  for (const auto& [i, ok] : result) EXPECT_FALSE(ok) << i;
}

namespace {

Environment h200() { return {"NVIDIA H200", 90, "13.0", "4.2.0", "1"}; }

GemmProblem problem(int64_t n, int64_t k, const std::string& epi) {
  GemmProblem p;
  p.dtype = "f16";
  p.layout = "tn";
  p.epilogue = epi;
  p.n = n;
  p.k = k;
  p.m_min = 1;
  p.m_max = 4096;
  return p;
}

CompileFn fake_compile() {
  return [](const std::vector<cb::KernelSpec>& specs) {
    std::vector<CompileResult> out;
    for (const auto& s : specs) {
      const std::string name = cb::kernel_name(s);
      const bool ok = name.size() % 5 != 0;  // some fail, deterministically
      out.push_back({name, ok, false, ok ? "/fake/" + name + ".so" : "", "/fake/" + name + ".log", 0});
    }
    return out;
  };
}

// A deterministic time per (workload, kernel): the same winner whichever GPU measures it.
Measurement fake_time(const GemmProblem& p, int64_t m, const std::string& kernel) {
  Measurement r;
  r.workload = workload_key(p, m);
  r.kernel = kernel;
  r.time_us = 10.0 + double(std::hash<std::string>{}(r.workload + kernel) % 1000) / 10.0;
  r.rel_error = 1e-4;
  if (std::hash<std::string>{}(kernel) % 11 == 0) r.status = Status::wrong_result, r.time_us = INFINITY;
  if (auto lt = parse_lt_candidate(kernel)) r.detail = std::string(kDeployPrefix) + lt->first + "_algo" + std::to_string(lt->second) + "_t1_s1_k1_r0_w0_o0_i0_c0";
  return r;
}

std::vector<TuneTask> many_tasks() {
  std::vector<TuneTask> out;
  for (const auto& [n, k, epi] : std::vector<std::tuple<int64_t, int64_t, std::string>>{
           {768, 768, "bias"}, {3072, 768, "bias_gelu"}, {768, 3072, "bias"}, {2304, 768, "bias"}})
    for (int64_t m : {1, 16, 128, 1024, 4096}) out.push_back({problem(n, k, epi), m});
  return out;
}

// Every (workload, kernel) row, without its timestamp, in one text.
std::string rows(const TuningDb& db, const std::vector<TuneTask>& ts) {
  std::string out;
  for (const TuneTask& t : ts)
    for (const Measurement& m : db.measurements(h200(), workload_key(t.problem, t.m)))
      out += m.workload + " | " + m.kernel + " | " + to_string(m.status) + " | " + std::to_string(m.time_us) + "\n";
  return out;
}

}  // namespace

// The pool with 1..4 workers fills the DB exactly as the one-GPU sequential measurer does (each
// candidate once) and so gives the same picks; a worker per GPU, each seeing its own.
TEST(GpuPool, TuneTasksGivesTheSamePicksOnAnyNumberOfGpus) {
  const std::vector<TuneTask> ts = many_tasks();
  ProfileOptions o;
  o.top_k = 4;
  o.lt_algos = 3;
  o.quiet = true;
  std::string reference;
  std::vector<std::string> reference_picks;
  {
    TuningDb db(temp_path("seq.db"));
    auto reps = tune_tasks(ts, db, h200(), o,
                           MeasureFn([](const GemmProblem& p, int64_t m, const std::string& k, const std::string&) {
                             return fake_time(p, m, k);
                           }),
                           fake_compile());
    reference = rows(db, ts);
    for (const auto& r : reps) reference_picks.push_back(r.winner ? r.winner->kernel : "-");
  }
  ASSERT_FALSE(reference.empty());
  for (int n : {1, 2, 4}) {
    const std::string dbpath = temp_path("pool_" + std::to_string(n) + ".db");
    const std::string log = temp_path("pool_calls_" + std::to_string(n) + ".txt");
    TuningDb db(dbpath);
    o.gpus.clear();
    for (int d = 0; d < n; ++d) o.gpus.push_back(d);
    BatchMeasureFn batch = [dbpath, log](const GemmProblem& p, int64_t m,
                                          const std::vector<std::pair<std::string, std::string>>& todo) {
      TuningDb child(dbpath);  // in the worker process: its own connection, as measure_in_children
      for (const auto& [kernel, library] : todo) {
        log_line(log, std::string(std::getenv("CUDA_VISIBLE_DEVICES")) + " " + std::to_string(getpid()) + " " +
                          workload_key(p, m) + " " + kernel);
        child.record(h200(), fake_time(p, m, kernel));
      }
    };
    auto reps = tune_tasks(ts, db, h200(), o, batch, fake_compile());
    EXPECT_EQ(rows(db, ts), reference) << n << " GPUs";
    ASSERT_EQ(reps.size(), ts.size());
    for (size_t i = 0; i < ts.size(); ++i)
      EXPECT_EQ(reps[i].winner ? reps[i].winner->kernel : "-", reference_picks[i]) << n << " GPUs, task " << i;
    std::set<std::string> calls, gpus, pids;
    size_t count = 0;
    for (const std::string& l : lines(log)) {
      std::istringstream in(l);
      std::string gpu, pid;
      in >> gpu >> pid;
      gpus.insert(gpu);
      pids.insert(pid);
      calls.insert(l.substr(gpu.size() + pid.size() + 2));
      ++count;
    }
    EXPECT_EQ(calls.size(), count) << "no candidate measured twice on " << n << " GPUs";
    EXPECT_LE(pids.size(), size_t(n));
    EXPECT_LE(gpus.size(), size_t(n));
    if (n > 1) {
      EXPECT_GT(gpus.size(), 1u) << "the work was spread over the GPUs";
    }
  }
}

// Several processes write one fresh DB file at once (creating it too): every row arrives, none is
// lost to "database is locked".
TEST(TuningDbConcurrency, SeveralProcessesWriteOneDbAtOnce) {
  const std::string path = temp_path("concurrent.db");
  const int procs = 8, rows_each = 150;
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  std::vector<pid_t> pids;
  for (int p = 0; p < procs; ++p) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(go[1]);
      char c;
      (void)!read(go[0], &c, 1);  // all start together
      try {
        TuningDb db(path);
        Environment env = h200();
        if (p % 2) env.gpu = "NVIDIA H100";  // environments created concurrently too
        for (int r = 0; r < rows_each; ++r)
          db.record(env, {"workload " + std::to_string(r % 10), "kernel_" + std::to_string(p) + "_" + std::to_string(r),
                          Status::ok, 1.0 + r, 1e-4, ""});
      } catch (const std::exception& e) {
        std::fprintf(stderr, "writer %d: %s\n", p, e.what());
        _exit(1);
      }
      _exit(0);
    }
    pids.push_back(pid);
  }
  close(go[0]);
  close(go[1]);  // EOF: go
  for (pid_t pid : pids) {
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "a writer failed (its error is above)";
  }
  TuningDb db(path);
  EXPECT_EQ(db.count(), int64_t(procs * rows_each));
  EXPECT_EQ(db.environments().size(), 2u);
}

namespace {

int sh(const std::string& cmd, std::string& out) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  out.clear();
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

}  // namespace

// --gpus on the command line: a bad list, a GPU twice, or --gpus where nothing is timed is a usage
// error (exit 2, one line naming the flag) before any work; a good list passes the parser.
TEST(GpuListCli, TuneAndCompileRefuseBadLists) {
  const std::string sabre = std::string(SABRE_BINARY_DIR) + "/sabre";
  if (!fs::exists(sabre)) GTEST_SKIP() << "build the sabre target first (" << sabre << ")";
  const std::string model = std::string(SABRE_SOURCE_DIR) + "/models/bert_tiny.onnx";
  const std::string out_dir = temp_path("cli_out.sabre");
  struct Case {
    std::string args, words;
  };
  const std::vector<Case> cases = {
      {"tune " + model + " --gpus 0", "--gpus 0: at least one GPU"},
      {"tune " + model + " --gpus 1,1", "names GPU 1 twice"},
      {"tune " + model + " --gpus two", "'two' is not a GPU list"},
      {"tune " + model + " --gpus", "--gpus"},
      {"tune " + model + " --gpus 2 --no-tune", "--no-tune times nothing"},
      {"compile " + model + " -o " + out_dir + " --gpus 0,x", "'x' is not a GPU id"},
      {"compile " + model + " -o " + out_dir + " --gpus 2 --no-tune", "--no-tune times nothing"},
      {"compile " + model + " -o " + out_dir + " --gpus all --tuned-for 'NVIDIA H200'", "--tuned-for times nothing"},
  };
  for (const Case& c : cases) {
    std::string out;
    EXPECT_EQ(sh(sabre + " " + c.args, out), 2) << c.args << "\n" << out;
    EXPECT_NE(out.find(c.words), std::string::npos) << c.args << "\n" << out;
    EXPECT_EQ(out.find("terminate"), std::string::npos) << out;
  }
  EXPECT_FALSE(fs::exists(out_dir)) << "nothing written for a bad command line";
  // Both commands list the flag in their help.
  std::string out;
  EXPECT_EQ(sh(sabre + " tune --help", out), 0);
  EXPECT_NE(out.find("--gpus all|N|LIST"), std::string::npos) << out;
  EXPECT_EQ(sh(sabre + " compile --help", out), 0);
  EXPECT_NE(out.find("--gpus"), std::string::npos) << out;
}
