// The artifact writer and the validating loader: a round trip, and every corruption the loader
// must name (truncated weights, edited manifest, edited plan, missing/unlisted kernel, wrong
// format version, wrong GPU).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "runtime/artifact.h"

using namespace sabre::runtime;
namespace fs = std::filesystem;

namespace {

Plan small_plan() {
  Plan p;
  p.symbols = {{"batch", 1, 8}};
  p.tensors = {{"x", DType::f16, {DimExpr::parse("batch"), 64}, TensorKind::input, 0, 0},
               {"gamma", DType::f16, {64}, TensorKind::weight, 0, 128},
               {"beta", DType::f16, {64}, TensorKind::weight, 256, 128},
               {"y", DType::f16, {DimExpr::parse("batch"), 64}, TensorKind::output, 0, 0}};
  p.inputs = {0};
  p.outputs = {3};
  p.steps = {make_step("layernorm", "/ln", {0, 1, 2}, {3})};
  return p;
}

std::vector<uint8_t> random_bytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng() | 1);
  return v;
}

std::string fresh_dir(const std::string& tag) {
  fs::path d = fs::temp_directory_path() / ("sabre_rt_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d.string();
}

// A fake kernel library: the loader only checksums it (dlopen happens in Session).
std::string fake_kernel(const std::string& dir) {
  fs::create_directories(dir);
  std::string p = dir + "/gemm_a.so";
  std::ofstream(p, std::ios::binary) << "not really a shared object, but bytes with a checksum";
  return p;
}

std::string write_good(const std::string& tag) {
  std::string dir = fresh_dir(tag);
  ManifestInfo m;
  m.arch = "sm_90a";
  m.sm = 90;
  m.gpu_name = "NVIDIA H200";
  m.tools = {{"sabre", "0.1"}, {"cuda", "13.0"}, {"cutlass", "4.2"}};
  m.source_model = "/models/x.onnx";
  write_artifact(dir, small_plan(), random_bytes(512, 1), {fake_kernel(dir + "_src")}, m);
  return dir;
}

std::string load_error(const std::string& dir) {
  try {
    load_artifact(dir);
  } catch (const ArtifactError& e) {
    return e.what();
  } catch (const PlanError& e) {
    return std::string("PlanError: ") + e.what();
  }
  return "no error";
}

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void spit(const std::string& p, const std::string& s) { std::ofstream(p, std::ios::binary | std::ios::trunc) << s; }

bool contains(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

}  // namespace

TEST(RuntimeArtifact, RoundTripsPlanWeightsKernelsAndManifest) {
  std::string dir = write_good("roundtrip");
  LoadedArtifact a = load_artifact(dir);
  EXPECT_EQ(a.plan.to_json(), small_plan().to_json());
  EXPECT_EQ(a.manifest.arch, "sm_90a");
  EXPECT_EQ(a.manifest.sm, 90);
  EXPECT_EQ(a.manifest.tools.at("cutlass"), "4.2");
  EXPECT_EQ(a.manifest.source_model, "/models/x.onnx");
  ASSERT_EQ(a.weights->size(), 512u);
  EXPECT_EQ(std::vector<uint8_t>(a.weights->data(), a.weights->data() + 512), random_bytes(512, 1));
  ASSERT_EQ(a.kernel_libraries.size(), 1u);
  EXPECT_TRUE(contains(a.kernel_libraries[0], "kernels/gemm_a.so"));
  EXPECT_EQ(a.manifest.files.size(), 3u);
  EXPECT_EQ(a.manifest.files.at("weights.bin").checksum, checksum(random_bytes(512, 1).data(), 512));
}

TEST(RuntimeArtifact, ChecksumIsXxh3_64) {
  // XXH3-64 of "" and "a" (the values xxHash's own XXH3_64bits gives).
  EXPECT_EQ(checksum("", 0), "xxh3_64:2d06800538d394c2");
  EXPECT_EQ(checksum("a", 1), "xxh3_64:e6c632b61e964e1f");
  // A file is checksummed in 1 MiB pieces: the same value as the bytes at once.
  const std::string dir = fresh_dir("filesum");
  fs::create_directories(dir);
  const std::vector<uint8_t> big = random_bytes((3 << 20) + 17, 5);
  std::ofstream(dir + "/big.bin", std::ios::binary).write(reinterpret_cast<const char*>(big.data()),
                                                          static_cast<std::streamsize>(big.size()));
  EXPECT_EQ(file_checksum(dir + "/big.bin"), checksum(big.data(), big.size()));
}

TEST(RuntimeArtifact, AnOlderSabresFnvChecksumsSayRebuild) {
  // The manifest an older sabre wrote: the same files, checksummed with FNV-1a.
  std::string dir = write_good("oldsum");
  std::string m = slurp(dir + "/manifest.json");
  for (size_t at; (at = m.find("xxh3_64:")) != std::string::npos;) m.replace(at, 8, "fnv1a64:");
  spit(dir + "/manifest.json", m);
  std::string e = load_error(dir);
  EXPECT_TRUE(contains(e, "written by an older sabre")) << e;
  EXPECT_TRUE(contains(e, "rebuild the artifact with this sabre (sabre compile)")) << e;
  // A checksum of no known kind is corruption, not age.
  m = slurp(dir + "/manifest.json");
  for (size_t at; (at = m.find("fnv1a64:")) != std::string::npos;) m.replace(at, 8, "md5sum::");
  spit(dir + "/manifest.json", m);
  e = load_error(dir);
  EXPECT_TRUE(contains(e, "not xxh3_64:<16 hex digits>; the artifact is corrupt")) << e;
}

TEST(RuntimeArtifact, TruncatedWeightsAreNamed) {
  std::string dir = write_good("trunc");
  fs::resize_file(dir + "/weights.bin", 300);
  std::string e = load_error(dir);
  EXPECT_TRUE(contains(e, "weights.bin has 300 bytes, manifest.json says 512")) << e;
}

TEST(RuntimeArtifact, FlippedWeightByteFailsTheChecksum) {
  std::string dir = write_good("flip");
  std::string w = slurp(dir + "/weights.bin");
  w[100] = static_cast<char>(w[100] ^ 0x40);
  spit(dir + "/weights.bin", w);
  std::string e = load_error(dir);
  EXPECT_TRUE(contains(e, "weights.bin has checksum")) << e;
  EXPECT_TRUE(contains(e, "modified")) << e;
}

TEST(RuntimeArtifact, EditedManifestIsDetected) {
  std::string dir = write_good("manifest");
  std::string m = slurp(dir + "/manifest.json");
  // An edited size: the files no longer match what the manifest says.
  std::string edited = m;
  size_t at = edited.find("\"size\":512");
  ASSERT_NE(at, std::string::npos) << m;
  edited.replace(at, 10, "\"size\":513");
  spit(dir + "/manifest.json", edited);
  EXPECT_TRUE(contains(load_error(dir), "weights.bin has 512 bytes, manifest.json says 513")) << load_error(dir);
  // A broken manifest: not JSON.
  spit(dir + "/manifest.json", m.substr(0, m.size() / 2));
  EXPECT_TRUE(contains(load_error(dir), "manifest.json: not valid JSON")) << load_error(dir);
  // A manifest without its files table.
  auto root = sabre::json::parse(m);
  sabre::json::Object o = root.obj();
  o.erase("files");
  spit(dir + "/manifest.json", sabre::json::Value(o).dump());
  EXPECT_TRUE(contains(load_error(dir), "manifest.json: no 'files'")) << load_error(dir);
  // No manifest at all.
  fs::remove(dir + "/manifest.json");
  EXPECT_TRUE(contains(load_error(dir), "has no manifest.json")) << load_error(dir);
}

TEST(RuntimeArtifact, EditedPlanIsDetected) {
  std::string dir = write_good("plan");
  std::string p = slurp(dir + "/plan.json");
  size_t at = p.find("\"/ln\"");
  ASSERT_NE(at, std::string::npos);
  p.replace(at, 5, "\"/LN\"");  // same size, other bytes
  spit(dir + "/plan.json", p);
  EXPECT_TRUE(contains(load_error(dir), "plan.json has checksum")) << load_error(dir);
}

TEST(RuntimeArtifact, MissingAndUnlistedKernelsAreNamed) {
  std::string dir = write_good("kernels");
  fs::rename(dir + "/kernels/gemm_a.so", dir + "/kernels_gemm_a.so.bak");
  EXPECT_TRUE(contains(load_error(dir), "kernels/gemm_a.so is missing")) << load_error(dir);
  fs::rename(dir + "/kernels_gemm_a.so.bak", dir + "/kernels/gemm_a.so");
  EXPECT_EQ(load_error(dir), "no error");
  spit(dir + "/kernels/extra.so", "sneaked in");
  EXPECT_TRUE(contains(load_error(dir), "kernels/extra.so is not listed in manifest.json")) << load_error(dir);
}

TEST(RuntimeArtifact, WrongFormatVersionSaysRecompile) {
  std::string dir = write_good("version");
  std::string m = slurp(dir + "/manifest.json");
  size_t at = m.find("\"format_version\":1");
  ASSERT_NE(at, std::string::npos);
  m.replace(at, 18, "\"format_version\":9");
  spit(dir + "/manifest.json", m);
  std::string e = load_error(dir);
  EXPECT_TRUE(contains(e, "artifact format version 9, this runtime reads version 1; recompile")) << e;
}

TEST(RuntimeArtifact, WrongArchNamesBoth) {
  std::string dir = write_good("arch");
  LoadedArtifact a = load_artifact(dir);
  EXPECT_NO_THROW(check_device(a.manifest, 90, "NVIDIA H200"));
  try {
    check_device(a.manifest, 80, "NVIDIA A100-SXM4-80GB");
    FAIL() << "sm 80 accepted an sm 90 artifact";
  } catch (const ArtifactError& e) {
    EXPECT_TRUE(contains(e.what(), "compiled for sm_90a (sm 90")) << e.what();
    EXPECT_TRUE(contains(e.what(), "A100-SXM4-80GB is sm 80")) << e.what();
  }
}

TEST(RuntimeArtifact, WriterRefusesMisplacedWeights) {
  Plan p = small_plan();
  p.tensors[2].weight_offset = 100;  // not 256-aligned
  EXPECT_THROW(write_artifact(fresh_dir("misplaced"), p, random_bytes(512, 2), {}, {}), ArtifactError);
  p.tensors[2].weight_offset = 512;  // past the end
  EXPECT_THROW(write_artifact(fresh_dir("misplaced2"), p, random_bytes(512, 2), {}, {}), ArtifactError);
}

TEST(RuntimeArtifact, NotADirectory) {
  EXPECT_TRUE(contains(load_error("/nonexistent/model.sabre"), "is not a directory")) << load_error("/nonexistent/model.sabre");
}
