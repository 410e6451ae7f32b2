// `sabre run MODEL.sabre` and `sabre bench MODEL.sabre` where the artifact cannot run: a corrupt
// artifact, no GPU (this CPU machine) or the wrong one: one clear line on stderr, exit code 1,
// no crash. Runs the built sabre binary.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

#include "runtime/artifact.h"

using namespace sabre::runtime;
namespace fs = std::filesystem;

namespace {

struct Result {
  int code = -1;
  std::string err;
};

Result sabre_cli(const std::string& args) {
  std::string bin = std::string(SABRE_BINARY_DIR) + "/sabre";
  EXPECT_TRUE(fs::exists(bin)) << "build the sabre target first: " << bin;
  std::string errfile = (fs::temp_directory_path() / ("sabre_cli_err_" + std::to_string(::getpid()))).string();
  int status = std::system((bin + " " + args + " >/dev/null 2>" + errfile).c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  FILE* f = std::fopen(errfile.c_str(), "r");
  if (f) {
    std::array<char, 4096> buf{};
    size_t n = std::fread(buf.data(), 1, buf.size(), f);
    r.err.assign(buf.data(), n);
    std::fclose(f);
  }
  return r;
}

std::string artifact(const std::string& tag) {
  Plan p;
  p.symbols = {{"batch", 1, 4}};
  p.tensors = {{"x", DType::f32, {DimExpr::parse("batch"), 8}, TensorKind::input, 0, 0},
               {"y", DType::f32, {DimExpr::parse("batch"), 8}, TensorKind::output, 0, 0}};
  p.inputs = {0};
  p.outputs = {1};
  p.steps = {make_step("copy", "/c", {0}, {1})};
  ManifestInfo m;
  m.arch = "sm_1x";
  m.sm = 1;
  std::string dir = (fs::temp_directory_path() / ("sabre_cli_" + tag + "_" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  write_artifact(dir, p, std::vector<uint8_t>(256, 7), {}, m);
  return dir;
}

}  // namespace

TEST(RuntimeCli, RunWithoutTheRightGpuIsOneLineAndExit1) {
  std::string dir = artifact("run");
  Result r = sabre_cli("run " + dir + " -o " + dir + "_out");
  EXPECT_EQ(r.code, 1) << r.err;
  bool no_dev = r.err.find("sabre run: error: no CUDA device") != std::string::npos;
  bool wrong = r.err.find("compiled for sm_1x") != std::string::npos;
  EXPECT_TRUE(no_dev || wrong) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(RuntimeCli, BenchWithoutTheRightGpuIsOneLineAndExit1) {
  std::string dir = artifact("bench");
  Result r = sabre_cli("bench " + dir + " --dim batch=2");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_TRUE(r.err.find("no CUDA device") != std::string::npos || r.err.find("compiled for sm_1x") != std::string::npos) << r.err;
}

TEST(RuntimeCli, CorruptArtifactIsNamedBeforeAnyGpuQuestion) {
  std::string dir = artifact("corrupt");
  fs::resize_file(dir + "/weights.bin", 10);
  Result r = sabre_cli("run " + dir + " -o " + dir + "_out");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("weights.bin has 10 bytes, manifest.json says 256"), std::string::npos) << r.err;
}
