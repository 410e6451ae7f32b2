// The kernel pack's list and record (tune/kernel_pack.h); the CLI end to end: tests/cli/kernel_pack.py.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "backends/cutlass/kernel_spec.h"
#include "tune/conv_tune.h"
#include "tune/kernel_pack.h"
#include "tune/profiler.h"

namespace fs = std::filesystem;
using namespace sabre::tune;

namespace {

const char* kGemm = "sm90_ws_pingpong_tn_f16_f16_f32_64x32x128_c1x1_a8_bias";
const char* kConv = "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8_bias_relu";

TEST(KernelPack, ListSkipsCommentsAndBlankLinesAndKeepsLineNumbers) {
  auto e = parse_pack_list(std::string("# the pack\n\n") + kGemm + "  # 12 models\n   \n" + kConv + "\n", "L");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].name, kGemm);
  EXPECT_EQ(e[0].line, 3);
  EXPECT_EQ(e[1].name, kConv);
  EXPECT_EQ(e[1].line, 5);
}

TEST(KernelPack, UnknownNameIsRefusedNamingTheLine) {
  try {
    parse_pack_list(std::string(kGemm) + "\n# c\nsm90_not_a_kernel\n", "my.txt");
    FAIL() << "no error";
  } catch (const PackListError& e) {
    EXPECT_NE(std::string(e.what()).find("my.txt:3: 'sm90_not_a_kernel' is not a kernel name"), std::string::npos)
        << e.what();
  }
}

TEST(KernelPack, TwoNamesOnALineAndDuplicatesAreRefused) {
  EXPECT_THROW(parse_pack_list(std::string(kGemm) + " " + kConv + "\n", "L"), PackListError);
  EXPECT_THROW(parse_pack_list(std::string(kGemm) + "\n" + kGemm + "\n", "L"), PackListError);
}

// The committed list must parse: a stale or misspelt name would only show when a user packs.
TEST(KernelPack, BuiltinListParsesAndIsNotEmpty) {
  auto e = parse_pack_list(builtin_pack_list(), builtin_pack_list_origin());
  EXPECT_GE(e.size(), 50u);
  for (const auto& x : e) EXPECT_NO_THROW(kernel_compile_job(x.name, 90)) << x.name;
}

// The pack must build the very job sabre compile builds, or its entries are never hit.
TEST(KernelPack, JobsAreTheCompileJobs) {
  auto g = kernel_compile_job(kGemm, 90);
  auto want = gemm_compile_job(*sabre::cutlass_backend::parse_kernel_name(kGemm), 90);
  EXPECT_EQ(g.name, want.name);
  EXPECT_EQ(g.source, want.source);
  EXPECT_EQ(g.flags, want.flags);
  auto c = kernel_compile_job(kConv, 90);
  auto cw = conv_compile_job(kConv, 90);
  EXPECT_EQ(c.source, cw.source);
  EXPECT_EQ(c.flags, cw.flags);
  EXPECT_THROW(kernel_compile_job(kGemm, 80), std::invalid_argument);  // sm90 kernels need sm_90a
}

TEST(KernelPack, RecordRoundTrip) {
  fs::path dir = fs::temp_directory_path() / ("sabre_pack_test_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  EXPECT_TRUE(pack_entries(dir.string()).empty());
  write_pack_record(dir.string(), "sm_90a", "L", {{"a", "0123456789abcdef"}, {"b", "fedcba9876543210"}});
  write_pack_record(dir.string(), "sm_80", "L", {{"c", "1111111111111111"}});
  std::ofstream(dir / "other.list") << "x-1\n";  // not a pack record
  auto got = pack_entries(dir.string());
  EXPECT_EQ(got, (std::set<std::string>{"a-0123456789abcdef", "b-fedcba9876543210", "c-1111111111111111"}));
  fs::remove_all(dir);
}

}  // namespace
