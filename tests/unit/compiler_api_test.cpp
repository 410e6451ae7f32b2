// The public compile API (include/sabre/compiler.h): a plan-only compile through sabre::compile,
// every failure as a status and a message (no exception), and a progress callback's exception
// passed on unchanged.
#include "sabre/compiler.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "runtime/artifact.h"

namespace sabre {
namespace {

namespace fs = std::filesystem;

const std::string kBert = std::string(SABRE_SOURCE_DIR) + "/models/bert_tiny.onnx";

fs::path scratch(const std::string& what) {
  fs::path d = fs::temp_directory_path() / ("sabre_compiler_api_" + what + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

TEST(CompilerApi, PlanOnlyWritesALoadableArtifact) {
  const fs::path out = scratch("ok");
  CompileOptions o;
  o.plan_only = true;
  o.dynamic_dims = {{"batch", {1, 4}}, {"seq", {1, 64}}};
  std::vector<std::string> lines;
  o.progress = [&](const std::string& s) { lines.push_back(s); };
  CompileOutcome r = compile(kBert, out.string(), o);
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_TRUE(r.message.empty());
  EXPECT_GE(lines.size(), 4u);
  EXPECT_GT(r.steps_by_op["gemm"], 0);
  EXPECT_EQ(r.kernels_compiled + r.kernels_cached, 0u);
  EXPECT_FALSE(r.phase_seconds.empty());
  runtime::LoadedArtifact a = runtime::load_artifact(out.string());
  EXPECT_TRUE(a.kernel_libraries.empty());
  fs::remove_all(out);
}

TEST(CompilerApi, FailuresComeBackAsAStatus) {
  const fs::path out = scratch("bad");
  CompileOptions plan;
  plan.plan_only = true;
  auto status_of = [&](const std::string& model, const CompileOptions& o) {
    CompileOutcome r = compile(model, out.string(), o);
    EXPECT_FALSE(r.message.empty());
    EXPECT_EQ(r.message.find("std::"), std::string::npos) << r.message;
    return r.status;
  };
  EXPECT_EQ(status_of("/nonexistent/model.onnx", plan), CompileStatus::model_error);

  fs::create_directories(out.parent_path());
  const fs::path junk = out.string() + ".junk.onnx";
  std::ofstream(junk) << "not a model";
  EXPECT_EQ(status_of(junk.string(), plan), CompileStatus::model_error);
  fs::remove(junk);

  CompileOptions o = plan;
  o.dtype = "f8";
  EXPECT_EQ(status_of(kBert, o), CompileStatus::invalid_argument);
  o = plan;
  o.arch = "sm_x";
  EXPECT_EQ(status_of(kBert, o), CompileStatus::invalid_argument);
  o = plan;
  o.dynamic_dims = {{"batch", {4, 1}}};
  EXPECT_EQ(status_of(kBert, o), CompileStatus::invalid_argument);
  o = plan;
  o.jobs = -1;
  EXPECT_EQ(status_of(kBert, o), CompileStatus::invalid_argument);
  o = plan;
  o.top_k = 0;
  EXPECT_EQ(status_of(kBert, o), CompileStatus::invalid_argument);
  o = plan;
  o.dump_after = "no_such_pass";
  EXPECT_EQ(status_of(kBert, o), CompileStatus::invalid_argument);
  for (const std::vector<int>& gpus : std::vector<std::vector<int>>{{1, 1}, {-2}, {0, CompileOptions::kAllGpus}}) {
    o = plan;
    o.gpus = gpus;  // checked before anything runs, even where nothing is timed
    EXPECT_EQ(status_of(kBert, o), CompileStatus::invalid_argument) << gpus.size();
  }
  EXPECT_EQ(compile(kBert, "", plan).status, CompileStatus::invalid_argument);
  EXPECT_FALSE(fs::exists(out));
}

// The lowering options `sabre compile` has reach the lowering through the API (the CLI is a client of it).
TEST(CompilerApi, LoweringOptionsReachTheLowering) {
  const fs::path out = scratch("lowering");
  CompileOptions o;
  o.plan_only = true;
  CompileOutcome fused = compile(kBert, out.string(), o);
  ASSERT_TRUE(fused.ok()) << fused.message;
  EXPECT_GT(fused.steps_by_op["attention"], 0);
  o.fuse_attention = false;
  CompileOutcome unfused = compile(kBert, out.string(), o);
  ASSERT_TRUE(unfused.ok()) << unfused.message;
  EXPECT_EQ(unfused.steps_by_op.count("attention"), 0u);
  EXPECT_GT(unfused.steps_by_op["softmax"], 0);

  const fs::path dump = out.string() + ".dump.txt";
  o.dump_after = "fuse_softmax";
  o.dump_file = dump.string();
  ASSERT_TRUE(compile(kBert, out.string(), o).ok());
  std::ifstream in(dump);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("fuse_softmax"), std::string::npos);
  fs::remove(dump);
  fs::remove_all(out);
}

TEST(CompilerApi, AProgressCallbacksExceptionStopsTheCompileUnchanged) {
  struct Stop : std::runtime_error {
    using std::runtime_error::runtime_error;
  };
  const fs::path out = scratch("stop");
  CompileOptions o;
  o.plan_only = true;
  int calls = 0;
  o.progress = [&](const std::string&) {
    if (++calls == 2) throw Stop("stop here");
  };
  EXPECT_THROW(compile(kBert, out.string(), o), Stop);
  EXPECT_EQ(calls, 2);
  fs::remove_all(out);
}

}  // namespace
}  // namespace sabre
