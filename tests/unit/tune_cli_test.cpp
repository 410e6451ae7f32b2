// `sabre db` and `sabre tune` through the built binary: export -> import into a fresh DB -> export
// is the same text; merge keeps the faster correct row; show names the winner; `tune --no-tune`
// prints the analytic picks, and without a GPU plain `tune` exits 3 with the reason.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tune/db.h"
#include "tune_test_util.h"

using namespace sabre::tune;
namespace fs = std::filesystem;
using sabre::test_util::h200;
using sabre::test_util::sh;

namespace {

const std::string kSabre = std::string(SABRE_BINARY_DIR) + "/sabre";

std::string dir() {
  auto d = fs::temp_directory_path() / ("sabre_tune_cli_" + std::to_string(getpid()));
  fs::create_directories(d);
  return d.string();
}

}  // namespace

class TuneCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kSabre)) GTEST_SKIP() << "build the sabre target first (" << kSabre << ")";
  }
};

TEST_F(TuneCli, DbExportImportMergeShowRoundTrip) {
  const std::string d = dir();
  const std::string a = d + "/a.db", b = d + "/b.db", c = d + "/c.db", jl = d + "/a.jsonl";
  for (const auto& p : {a, b, c, jl}) fs::remove(p);
  {
    TuningDb db(a);
    db.record(h200(), {"gemm f16 tn bias m=128 n=768 k=768 b=1 a=8", "kern_fast", Status::ok, 7.25, 1e-4, ""});
    db.record(h200(), {"gemm f16 tn bias m=128 n=768 k=768 b=1 a=8", "kern_hang", Status::hung, 0, 0, "60 s"});
    db.record(h200(), {"gemm f16 tn bias m=4096 n=768 k=768 b=1 a=8", "kern_slow", Status::ok, 40.5, 1e-4, ""});
  }
  std::string out;
  ASSERT_EQ(sh(kSabre + " db export --db " + a + " -o " + jl, out), 0) << out;
  ASSERT_EQ(sh(kSabre + " db import " + jl + " --db " + b, out), 0) << out;
  EXPECT_NE(out.find("imported 3"), std::string::npos) << out;
  std::string ea, eb;
  ASSERT_EQ(sh(kSabre + " db export --db " + a, ea), 0);
  ASSERT_EQ(sh(kSabre + " db export --db " + b, eb), 0);
  EXPECT_EQ(ea, eb);
  EXPECT_NE(ea.find("kern_hang"), std::string::npos) << "failures survive the round trip";

  // merge: c has a faster correct kern_slow; the merge keeps it.
  {
    TuningDb db(c);
    db.record(h200(), {"gemm f16 tn bias m=4096 n=768 k=768 b=1 a=8", "kern_slow", Status::ok, 30.0, 1e-4, ""});
  }
  ASSERT_EQ(sh(kSabre + " db merge " + c + " --db " + b, out), 0) << out;
  {
    TuningDb db(b);
    EXPECT_EQ(db.count(), 3);
    EXPECT_DOUBLE_EQ(db.find(h200(), "gemm f16 tn bias m=4096 n=768 k=768 b=1 a=8", "kern_slow")->time_us, 30.0);
  }
  ASSERT_EQ(sh(kSabre + " db show --db " + b + " --all --workload m=128", out), 0) << out;
  EXPECT_NE(out.find("winner: kern_fast  7.25 us"), std::string::npos) << out;
  EXPECT_NE(out.find("hung"), std::string::npos) << out;
  EXPECT_EQ(out.find("m=4096"), std::string::npos) << "the workload filter applies";

  EXPECT_EQ(sh(kSabre + " db frobnicate --db " + b, out), 2) << out;
  EXPECT_EQ(sh(kSabre + " db import --db " + b, out), 2) << out;
  EXPECT_EQ(sh(kSabre + " db import " + d + "/missing.jsonl --db " + b, out), 1) << out;
}

TEST_F(TuneCli, NoTunePrintsAnalyticDispatchTables) {
  const std::string model = std::string(SABRE_SOURCE_DIR) + "/models/bert_tiny.onnx";
  std::string out;
  ASSERT_EQ(sh(kSabre + " tune " + model + " --no-tune --dim batch=1..4 --dim seq=1..64", out), 0) << out;
  EXPECT_NE(out.find("GEMM workloads"), std::string::npos) << out;
  EXPECT_NE(out.find("bias_gelu"), std::string::npos) << out;
  EXPECT_NE(out.find("M <= 256"), std::string::npos) << "batch*seq tops out at 4*64" << out;
  EXPECT_NE(out.find("sm90_"), std::string::npos) << out;
  EXPECT_EQ(sh(kSabre + " tune " + model + " --dtype fp8", out), 2) << out;
  EXPECT_EQ(sh(kSabre + " tune " + model + " --dim batch=9..2", out), 2) << out;
}

TEST_F(TuneCli, WithoutAGpuTuneExplainsAndExitsThree) {
  std::string out;
  int probe = sh("nvidia-smi -L", out);
  if (probe == 0 && out.find("GPU") != std::string::npos) GTEST_SKIP() << "a GPU is present: the no-GPU path does not apply";
  const std::string model = std::string(SABRE_SOURCE_DIR) + "/models/bert_tiny.onnx";
  EXPECT_EQ(sh(kSabre + " tune " + model + " --db " + dir() + "/nogpu.db", out), 3) << out;
  EXPECT_NE(out.find("timing needs a GPU"), std::string::npos) << out;
  EXPECT_NE(out.find("M <= "), std::string::npos) << out;
}
