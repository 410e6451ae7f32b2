// The C API's error paths that need no GPU: NULL arguments, corrupt artifacts, unknown ops, and
// loading where there is no GPU (or the wrong one): a status, a one-line message, no crash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "runtime/artifact.h"
#include "sabre/sabre.h"
#include "sabre/session.h"

using namespace sabre::runtime;
namespace fs = std::filesystem;

namespace {

std::string make_artifact(const std::string& tag, const std::string& op = "layernorm") {
  Plan p;
  p.tensors = {{"x", DType::f32, {4, 64}, TensorKind::input, 0, 0},
               {"gamma", DType::f32, {64}, TensorKind::weight, 0, 256},
               {"y", DType::f32, {4, 64}, TensorKind::output, 0, 0}};
  p.inputs = {0};
  p.outputs = {2};
  p.steps = {make_step(op, "/ln", {0, 1}, {2})};
  std::vector<uint8_t> w(256);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint8_t>(i * 7 + 3);
  ManifestInfo m;
  m.arch = "sm_1x";
  m.sm = 1;  // matches no real GPU: a GPU machine must answer "wrong arch", a CPU one "no device"
  std::string dir = (fs::temp_directory_path() / ("sabre_capi_" + tag + "_" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  write_artifact(dir, p, w, {}, m);
  return dir;
}

}  // namespace

TEST(RuntimeCApi, NullArgumentsAreRefused) {
  sabre_session* s = reinterpret_cast<sabre_session*>(0x1);
  EXPECT_EQ(sabre_session_load(nullptr, 0, &s), SABRE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(s, reinterpret_cast<sabre_session*>(0x1));  // not touched when out is valid but dir is not
  EXPECT_STREQ(sabre_last_error(), "artifact_dir is NULL");
  EXPECT_EQ(sabre_session_load("x", 0, nullptr), SABRE_ERR_INVALID_ARGUMENT);
  sabre_context* c = nullptr;
  EXPECT_EQ(sabre_context_create(nullptr, nullptr, &c), SABRE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sabre_run(nullptr, nullptr, 0, nullptr, 0, 1), SABRE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sabre_session_num_inputs(nullptr), 0);
  EXPECT_EQ(sabre_session_input_name(nullptr, 0), nullptr);
  sabre_session_free(nullptr);
  sabre_context_free(nullptr);
}

TEST(RuntimeCApi, QueriesOnNullAreSafeAndTheVersionIsTheProjects) {
  EXPECT_EQ(sabre_session_num_outputs(nullptr), 0);
  EXPECT_EQ(sabre_session_output_name(nullptr, 0), nullptr);
  EXPECT_EQ(sabre_session_input_ndim(nullptr, 0), 0);
  EXPECT_EQ(sabre_session_input_dim(nullptr, 0, 0), nullptr);
  EXPECT_EQ(sabre_session_output_dim(nullptr, 0, 0), nullptr);
  EXPECT_EQ(sabre_session_input_dtype(nullptr, 0).bits, 0);
  EXPECT_EQ(sabre_session_input_index(nullptr, "x"), -1);
  EXPECT_EQ(sabre_session_output_index(nullptr, "y"), -1);
  EXPECT_EQ(sabre_context_stream(nullptr), nullptr);
  EXPECT_EQ(sabre_context_peak_bytes(nullptr), 0u);
  DLTensor t{};
  EXPECT_EQ(sabre_run(nullptr, &t, 1, nullptr, 0, 1), SABRE_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(sabre_last_error(), "context is NULL");
  EXPECT_STREQ(sabre_version(), SABRE_PROJECT_VERSION);
  EXPECT_STREQ(sabre::version(), SABRE_PROJECT_VERSION);
}

TEST(RuntimeCApi, LoadingWithoutTheRightGpuSaysSo) {
  std::string dir = make_artifact("nodev");
  sabre_session* s = nullptr;
  sabre_rt_status st = sabre_session_load(dir.c_str(), 0, &s);
  std::string msg = sabre_last_error();
  EXPECT_EQ(s, nullptr);
  ASSERT_TRUE(st == SABRE_ERR_NO_DEVICE || st == SABRE_ERR_WRONG_ARCH) << st << ": " << msg;
  if (st == SABRE_ERR_NO_DEVICE)
    EXPECT_EQ(msg.rfind("no CUDA device", 0), 0u) << msg;
  else
    EXPECT_NE(msg.find("compiled for sm_1x (sm 1)"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
  // And again: nothing is left broken by the first failure.
  EXPECT_EQ(sabre_session_load(dir.c_str(), 0, &s), st);
}

TEST(RuntimeCApi, CorruptArtifactIsAnArtifactErrorOnAnyMachine) {
  std::string dir = make_artifact("corrupt");
  fs::resize_file(dir + "/weights.bin", 100);
  sabre_session* s = nullptr;
  EXPECT_EQ(sabre_session_load(dir.c_str(), 0, &s), SABRE_ERR_ARTIFACT);
  EXPECT_NE(std::string(sabre_last_error()).find("weights.bin has 100 bytes, manifest.json says 256"), std::string::npos)
      << sabre_last_error();
  EXPECT_EQ(sabre_session_load("/nonexistent/model.sabre", 0, &s), SABRE_ERR_ARTIFACT);
}

TEST(RuntimeCApi, UnknownOpIsNamed) {
  std::string dir = make_artifact("unknown_op", "frobnicate");
  try {
    sabre::Session s(dir);
    FAIL() << "loaded a plan with an unknown op";
  } catch (const sabre::Error& e) {
    EXPECT_EQ(e.code, SABRE_ERR_ARTIFACT);
    EXPECT_NE(std::string(e.what()).find("step '/ln' (frobnicate) is an op this runtime does not know"), std::string::npos)
        << e.what();
  }
}
