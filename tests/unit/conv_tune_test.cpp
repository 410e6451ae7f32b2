// Conv tuning without a GPU (src/tune/conv_tune.h): fake compile and measure functions stand in
// for nvcc and the GPU; the measuring runs in real watchdog children. Checks: every candidate is
// measured once and recorded; a failed compile, a wrong result and a crashing candidate score +inf
// and the tuner goes on; a rerun measures nothing; the compiler's pick is the fastest correct
// kernel of the family it may use; the jobs and workload keys; the problems a lowering asks for.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "backends/cutlass/conv_sm90.h"
#include "backends/cutlass/conv_spec.h"
#include "backends/cutlass/patterns.h"
#include "codegen/compile.h"
#include "frontend/onnx/importer.h"
#include "generated_models.h"
#include "partition/partitioner.h"
#include "tune/conv_tune.h"

using namespace sabre;
using namespace sabre::tune;

namespace {

Environment h200() { return {"NVIDIA H200", 90, "13.0", "4.2.0", "1"}; }

std::string temp_path(const char* tag) {
  auto dir = std::filesystem::temp_directory_path() / ("sabre_conv_tune_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto p = dir / tag;
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(p.string() + suffix);
  return p.string();
}

// ResNet-50's last 3x3 layer at batch 1 and at batch 32.
ConvProblem deep(int64_t n) {
  ConvProblem p;
  p.dtype = "f16";
  p.epilogue = "bias_relu";
  p.n = n, p.h = p.w = p.p = p.q = 7, p.c = p.k = 512, p.r = p.s = 3, p.pad_h = p.pad_w = 1;
  p.alignment = 8;
  return p;
}

ConvCompileFn fake_compile(std::set<std::string> fail, std::vector<std::string>* asked = nullptr) {
  return [fail, asked](const std::vector<std::string>& names) {
    std::vector<CompileResult> out;
    for (const auto& n : names) {
      CompileResult r;
      r.name = n;
      r.ok = !fail.count(n);
      r.library = r.ok ? "/fake/" + n + ".so" : "";
      r.log = "/fake/" + n + ".log";
      out.push_back(r);
      if (asked) asked->push_back(n);
    }
    return out;
  };
}

// Times from the name (sm90 kernels faster at batch 32, slower at batch 1), every call appended to
// `log` (a file: the calls happen in children); `wrong` computes wrong results, `crash` aborts.
ConvMeasureFn fake_measure(const std::string& log, std::string wrong = "", std::string crash = "") {
  return [=](const ConvProblem& p, const std::string& kernel, const std::string& library) {
    std::ofstream(log, std::ios::app) << conv_workload_key(p) << " " << kernel << "\n";
    if (kernel == crash) std::abort();
    Measurement m;
    if (library != "/fake/" + kernel + ".so") {
      m.status = Status::crashed;
      m.detail = "wrong library " + library;
      return m;
    }
    if (kernel == wrong) {
      m.status = Status::wrong_result;
      m.detail = "relative L2 error 0.5";
      return m;
    }
    const bool sm90 = cutlass_backend::is_sm90_conv_kernel_name(kernel);
    m.time_us = 10.0 + double(std::hash<std::string>{}(kernel) % 100) / 10.0 + (sm90 == (p.n == 1) ? 20.0 : 0.0);
    m.rel_error = 1e-4;
    return m;
  };
}

int lines(const std::string& path) {
  std::ifstream in(path);
  int n = 0;
  for (std::string s; std::getline(in, s);) ++n;
  return n;
}

}  // namespace

TEST(ConvTune, WorkloadKeyAndJobs) {
  EXPECT_EQ(conv_workload_key(deep(1)),
            "conv f16 bias_relu n=1 h=7 w=7 c=512 k=512 r=3 s=3 p=7 q=7 pad=1,1 str=1,1 dil=1,1 g=1 a=8");
  ConvProblem other = deep(1);
  other.stride_w = 2;
  EXPECT_NE(conv_workload_key(other), conv_workload_key(deep(1)));
  const std::string s80 = "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_64x64x32_w32x32x32_s4_a8_splitk2_bias_relu";
  const std::string s90 = "sm90_conv_fprop_nhwc_f16_f16_f32_128x128x64_c1x1_a8_bias_relu";
  CompileJob j80 = conv_compile_job(s80, 90), j90 = conv_compile_job(s90, 90);
  EXPECT_EQ(j80.name, s80);
  EXPECT_NE(j80.source.find("DefaultConv2dFprop<"), std::string::npos);
  EXPECT_NE(j90.source.find("cutlass::conv::collective::CollectiveBuilder"), std::string::npos);
  auto has = [](const std::vector<std::string>& flags, const std::string& f) {
    return std::find(flags.begin(), flags.end(), f) != flags.end() ||
           std::any_of(flags.begin(), flags.end(), [&](const std::string& x) { return x.find(f) != std::string::npos; });
  };
  EXPECT_TRUE(has(j90.flags, "sm_90a")) << "sm90 conv kernels need the arch-specific target";
  EXPECT_FALSE(has(j80.flags, "sm_90a"));
  EXPECT_THROW(conv_compile_job("sm90_ws_pingpong_tn_f16_f16_f32_64x64x64_c1x1_a8_bias", 90), std::invalid_argument);
}

TEST(ConvTune, CandidatesAreTheRankingsTopK) {
  ProfileOptions o;
  o.top_k = 3;
  for (int64_t n : {1, 32}) {
    auto c = conv_candidates(deep(n), o, ConvKernels::automatic);
    ASSERT_GE(c.size(), 3u);
    ASSERT_LE(c.size(), 4u);
    EXPECT_EQ(c.front().name, codegen::analytic_conv_kernel(deep(n), 90));
    for (size_t i = 1; i < 3; ++i) EXPECT_LE(c[i - 1].predicted_us, c[i].predicted_us);
    // Both families are timed, whatever the model thinks of one of them.
    EXPECT_TRUE(std::any_of(c.begin(), c.end(), [](auto& x) { return cutlass_backend::is_sm90_conv_kernel_name(x.name); }));
    EXPECT_TRUE(std::any_of(c.begin(), c.end(), [](auto& x) { return !cutlass_backend::is_sm90_conv_kernel_name(x.name); }));
  }
  for (const auto& c : conv_candidates(deep(32), o, ConvKernels::sm80))
    EXPECT_TRUE(cutlass_backend::parse_conv_kernel_name(c.name)) << c.name;
  for (const auto& c : conv_candidates(deep(32), o, ConvKernels::sm90))
    EXPECT_TRUE(cutlass_backend::parse_sm90_conv_kernel_name(c.name)) << c.name;
}

// Two workloads, all of both families' top 6; one candidate fails to compile, one computes wrong
// results, one kills its child. Each is recorded once, the tuner goes on, the picks are the fastest
// correct kernels, and a rerun compiles and measures nothing.
TEST(ConvTune, TunesRecordsFailuresAndResumes) {
  const std::string dbpath = temp_path("conv.db"), log = temp_path("calls.txt");
  TuningDb db(dbpath);
  ProfileOptions o;
  o.top_k = 6;
  o.quiet = true;
  o.timeout = std::chrono::milliseconds(20000);
  const std::vector<ConvProblem> problems = {deep(1), deep(32)};
  auto c1 = conv_candidates(deep(1), o, ConvKernels::automatic);
  auto c32 = conv_candidates(deep(32), o, ConvKernels::automatic);
  ASSERT_GE(c1.size(), 4u);
  const std::string no_compile = c1[1].name, wrong = c1[2].name, crash = c1[3].name;
  std::vector<std::string> asked;
  auto reps = tune_convs(problems, db, h200(), o, ConvKernels::automatic, fake_measure(log, wrong, crash),
                         fake_compile({no_compile}, &asked));
  ASSERT_EQ(reps.size(), 2u);
  std::set<std::string> unique(asked.begin(), asked.end());
  EXPECT_EQ(unique.size(), asked.size()) << "each kernel compiled once over both workloads";
  for (size_t i = 0; i < 2; ++i) {
    const auto& cands = i == 0 ? c1 : c32;
    const std::string w = conv_workload_key(problems[i]);
    EXPECT_EQ(reps[i].workload, w);
    EXPECT_EQ(reps[i].analytic_pick, cands.front().name);
    EXPECT_EQ(db.measurements(h200(), w).size(), cands.size());
    ASSERT_TRUE(reps[i].winner);
    for (const Measurement& m : db.measurements(h200(), w)) {
      if (m.status == Status::ok) {
        EXPECT_LE(reps[i].winner->time_us, m.time_us) << m.kernel;
      }
    }
    EXPECT_EQ(pick_conv_kernel(problems[i], &db, h200(), 90, ConvKernels::automatic), reps[i].winner->kernel);
  }
  const std::string w1 = conv_workload_key(deep(1));
  auto status = [&](const std::string& k) { return db.find(h200(), w1, k)->status; };
  EXPECT_EQ(status(no_compile), Status::compile_failed);
  EXPECT_NE(db.find(h200(), w1, no_compile)->detail.find("/fake/" + no_compile + ".log"), std::string::npos);
  EXPECT_EQ(status(wrong), Status::wrong_result);
  EXPECT_EQ(status(crash), Status::crashed);
  EXPECT_NE(reps[0].winner->kernel, wrong);
  // The family a compile may use bounds the pick: with sm80 only, a faster sm90 winner is passed over.
  const std::string k32 = pick_conv_kernel(deep(32), &db, h200(), 90, ConvKernels::sm80);
  EXPECT_TRUE(cutlass_backend::parse_conv_kernel_name(k32)) << k32;
  // Without measurements (another GPU) the analytic pick.
  Environment other = h200();
  other.gpu = "NVIDIA H100";
  EXPECT_EQ(pick_conv_kernel(deep(1), &db, other, 90, ConvKernels::automatic), c1.front().name);

  const int calls = lines(log);
  asked.clear();
  reps = tune_convs(problems, db, h200(), o, ConvKernels::automatic, fake_measure(log, wrong, crash),
                    fake_compile({no_compile}, &asked));
  EXPECT_TRUE(asked.empty());
  EXPECT_EQ(lines(log), calls);
  EXPECT_EQ(reps[0].measured + reps[1].measured, 0);
  EXPECT_EQ(size_t(reps[0].reused), c1.size());
  EXPECT_THROW(tune_convs(problems, *std::make_unique<TuningDb>(":memory:"), h200(), o, ConvKernels::automatic,
                          fake_measure(log), fake_compile({})),
               std::invalid_argument);
}

// The problems compile tunes for resnet_block at batch 1..8: each conv at each power-of-two batch.
TEST(ConvTune, ProblemsOfALoweringAreEachConvAtEachBatchBucket) {
  const std::string path = test_util::generated_model("resnet_block");
  SABRE_REQUIRE_GENERATED_MODEL(path);
  ir::Graph g = codegen::canonicalize_model(onnx_frontend::import_model(path), false);
  auto pr = partition::partition(std::move(g), cutlass_backend::pattern_table());
  codegen::LowerOptions lo;
  lo.ranges = codegen::parse_dynamic("batch=1..8");
  EXPECT_TRUE(codegen::tuned_conv_problems(pr.graph, lo, 90).empty()) << "no conv picker: nothing to tune";
  lo.pick_conv = [](const ConvProblem& p) { return codegen::analytic_conv_kernel(p, 90); };
  auto probs = codegen::tuned_conv_problems(pr.graph, lo, 90);
  ASSERT_FALSE(probs.empty());
  std::set<int64_t> batches;
  for (const auto& p : probs) batches.insert(p.n);
  EXPECT_EQ(batches, (std::set<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(probs.size() % 4, 0u);
  for (size_t i = 0; i < probs.size(); ++i)
    for (size_t j = i + 1; j < probs.size(); ++j) EXPECT_FALSE(probs[i] == probs[j]);
}
