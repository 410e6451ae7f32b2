#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "support/json.h"
#include "tune/db.h"

using namespace sabre::tune;

namespace {
Environment h200() { return {"NVIDIA H200", 90, "13.0", "4.2.0", "t1"}; }

std::string temp_db(const char* tag) {
  auto dir = std::filesystem::temp_directory_path() / ("sabre_db_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto p = dir / (std::string(tag) + ".db");
  std::filesystem::remove(p);
  std::filesystem::remove(p.string() + "-wal");
  std::filesystem::remove(p.string() + "-shm");
  return p.string();
}

Measurement ok(const std::string& w, const std::string& k, double us) { return {w, k, Status::ok, us, 1e-4, ""}; }
}  // namespace

TEST(TuningDb, WinnerIsFastestOkMeasurementAndFailuresAreKept) {
  TuningDb db(":memory:");
  db.record(h200(), ok("gemm m=128", "k_slow", 20.0));
  db.record(h200(), ok("gemm m=128", "k_fast", 10.0));
  db.record(h200(), {"gemm m=128", "k_hung", Status::hung, 0.5, 0, "watchdog after 5 s"});
  auto w = db.winner(h200(), "gemm m=128");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->kernel, "k_fast");
  auto all = db.measurements(h200(), "gemm m=128");
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all.back().kernel, "k_hung");
  EXPECT_EQ(all.back().status, Status::hung);
  EXPECT_TRUE(std::isinf(all.back().time_us)) << "a failed candidate scores +inf whatever was passed";
  EXPECT_EQ(all.back().detail, "watchdog after 5 s");
}

TEST(TuningDb, EnvironmentsAreSeparate) {
  TuningDb db(":memory:");
  db.record(h200(), ok("w", "k", 1.0));
  Environment other = h200();
  other.template_version = "t2";  // a template change must not reuse old timings
  EXPECT_FALSE(db.winner(other, "w"));
  EXPECT_FALSE(db.find(other, "w", "k"));
  EXPECT_TRUE(db.find(h200(), "w", "k"));
  db.record(other, ok("w", "k", 2.0));
  EXPECT_EQ(db.environments().size(), 2u);
}

// A DB from before a template change (the H200's, imported from bench/results) says why it is not
// used; one with rows for this build, or only for other GPUs, says nothing.
TEST(TuningDb, OtherBuildsOfThisGpuAreNamed) {
  TuningDb db(":memory:");
  Environment now = h200();
  now.template_version = "t2";
  EXPECT_EQ(db.other_builds_note(now), "");
  db.record(h200(), ok("w", "k", 1.0));
  Environment a100{"NVIDIA A100", 80, "12.4", "4.2.0", "t1"};
  db.record(a100, ok("w", "k", 2.0));
  const std::string note = db.other_builds_note(now);
  EXPECT_NE(note.find("NVIDIA H200 from other builds (templates t1)"), std::string::npos) << note;
  EXPECT_NE(note.find("none from this one (CUDA 13.0, CUTLASS 4.2.0, templates t2)"), std::string::npos) << note;
  EXPECT_EQ(note.find("A100"), std::string::npos) << note;
  Environment cuda = h200();
  cuda.cuda = "13.1";
  db.record(cuda, ok("w", "k", 1.5));
  EXPECT_NE(db.other_builds_note(now).find("(templates t1; CUDA 13.1, templates t1)"), std::string::npos)
      << db.other_builds_note(now);
  db.record(now, ok("w", "k", 0.9));
  EXPECT_EQ(db.other_builds_note(now), "") << "rows for this build: nothing to say";
  Environment v100{"Tesla V100", 70, "13.0", "4.2.0", "t2"};
  EXPECT_EQ(db.other_builds_note(v100), "") << "only other GPUs' rows";
}

TEST(TuningDb, ExportImportRoundTripsAndMergeKeepsTheBest) {
  TuningDb a(":memory:");
  a.record(h200(), ok("w1", "k1", 5.0));
  a.record(h200(), {"w1", "k2", Status::compile_failed, 0, 0, "log: /tmp/x.log"});
  std::string text = a.export_jsonl();
  TuningDb b(":memory:");
  b.record(h200(), ok("w1", "k1", 4.0));  // b already has a faster k1
  EXPECT_EQ(b.import_jsonl(text), 1);     // k2 taken, k1 kept as the faster
  EXPECT_DOUBLE_EQ(b.find(h200(), "w1", "k1")->time_us, 4.0);
  EXPECT_EQ(b.find(h200(), "w1", "k2")->status, Status::compile_failed);
  EXPECT_EQ(b.count(), 2);
  // Every exported line is valid JSON with the env inline.
  auto first = sabre::json::parse(text.substr(0, text.find('\n')));
  EXPECT_EQ(first.get("env")->get("gpu")->str(), "NVIDIA H200");
}

TEST(TuningDb, BadImportIsRejectedWholeWithLineNumber) {
  TuningDb db(":memory:");
  db.record(h200(), ok("w", "k", 1.0));
  std::string good = db.export_jsonl();
  try {
    db.import_jsonl(good + "{not json\n");
    FAIL() << "expected DbError";
  } catch (const DbError& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
  EXPECT_EQ(db.count(), 1);
}

TEST(TuningDb, NotADatabaseFileGivesClearError) {
  std::string p = temp_db("garbage");
  std::ofstream(p) << "this is not sqlite, just some text that is long enough to be read as a header.......";
  try {
    TuningDb db(p);
    FAIL() << "expected DbError";
  } catch (const DbError& e) {
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

// A tuner killed with -9 mid-run loses nothing it already recorded, and the file stays usable.
TEST(TuningDb, SurvivesKillNineMidRun) {
  std::string p = temp_db("kill9");
  { TuningDb init(p); }
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    TuningDb db(p);
    for (int i = 0;; ++i) {  // records until killed
      db.record(h200(), ok("w", "k" + std::to_string(i), 1.0 + i));
      if (i == 20) {
        std::ofstream(p + ".ready") << "x";
      }
    }
  }
  for (int tries = 0; tries < 500 && !std::filesystem::exists(p + ".ready"); ++tries)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(std::filesystem::exists(p + ".ready")) << "child never got going";
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  TuningDb db(p);
  int64_t n = db.count();
  EXPECT_GE(n, 21);
  for (int i = 0; i <= 20; ++i) EXPECT_TRUE(db.find(h200(), "w", "k" + std::to_string(i))) << i;
  db.record(h200(), ok("w", "after", 0.5));
  EXPECT_EQ(db.winner(h200(), "w")->kernel, "after");
}
