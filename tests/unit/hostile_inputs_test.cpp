// Issue 30's crash, hang and quiet-failure classes at the unit level: overflow-safe arithmetic,
// integer Div edge cases in the reference, Range bounds, tensor size checks, the regular-file and
// size checks on user-named files, checked writes, and the --compare-reference tolerance.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include "ir/dim.h"
#include "ir/graph.h"
#include "ir/infer.h"
#include "ir/tensor.h"
#include "ir/tensor_size.h"
#include "reference/compare.h"
#include "reference/reference.h"
#include "support/checked.h"
#include "support/files.h"

namespace {

using sabre::ir::Dim;
using sabre::ir::DType;
using sabre::ir::Graph;
using sabre::ir::Tensor;
namespace support = sabre::support;
namespace fs = std::filesystem;
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(Checked, AddMulProductDetectOverflow) {
  EXPECT_EQ(support::checked_mul(int64_t{1} << 31, int64_t{1} << 31), int64_t{1} << 62);
  EXPECT_FALSE(support::checked_mul(int64_t{1} << 32, int64_t{1} << 31));
  EXPECT_FALSE(support::checked_mul(kMin, -1));
  EXPECT_FALSE(support::checked_add(kMax, 1));
  EXPECT_EQ(support::checked_product({2, 3, 7}), 42);
  EXPECT_FALSE(support::checked_product({int64_t{1} << 40, int64_t{1} << 40}));
  EXPECT_FALSE(support::checked_product({3, -1}));
  EXPECT_EQ(support::saturating_mul(kMax, 2), kMax);
  EXPECT_EQ(support::saturating_mul(kMax, -2), kMin);
  EXPECT_EQ(support::saturating_add(kMin, -1), kMin);
}

TEST(Checked, WrappingDivAndRemAreDefinedForMinByMinusOne) {
  EXPECT_EQ(support::wrapping_div(kMin, -1), kMin);
  EXPECT_EQ(support::wrapping_rem(kMin, -1), 0);
  EXPECT_EQ(support::wrapping_rem(kMin, -1, true), 0);
  EXPECT_EQ(support::wrapping_div(-7, 2), -3);  // toward zero
  EXPECT_EQ(support::wrapping_rem(-7, 2), -1);  // dividend's sign
  EXPECT_EQ(support::wrapping_rem(-7, 2, true), 1);  // divisor's sign
  EXPECT_EQ(support::wrapping_rem(7, -2, true), -1);
}

// Div of two int64 graph inputs on the reference executor.
std::vector<Tensor> run_div(std::vector<int64_t> a, std::vector<int64_t> b) {
  Graph g;
  const int64_t n = static_cast<int64_t>(a.size());
  auto* x = g.add_input("a", {DType::i64, sabre::ir::to_shape({n}), true});
  auto* y = g.add_input("b", {DType::i64, sabre::ir::to_shape({n}), true});
  g.add_output(g.add_node("Div", {x, y}, 1, {}, "div0")->output(0));
  return sabre::reference::run(g, {{"a", Tensor::from_i64(a, {n})}, {"b", Tensor::from_i64(b, {n})}});
}

TEST(ReferenceDiv, Int64MinByMinusOneWraps) {
  auto out = run_div({kMin, -7, 7}, {-1, 2, -2});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].to_i64_vector(), (std::vector<int64_t>{kMin, -3, -3}));
}

TEST(ReferenceDiv, ByZeroIsRefusedNamingTheNode) {
  try {
    run_div({5, 1}, {1, 0});
    FAIL() << "expected a ReferenceError";
  } catch (const sabre::reference::ReferenceError& e) {
    EXPECT_NE(std::string(e.what()).find("div0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("division by zero"), std::string::npos) << e.what();
  }
}

// A Range node over constant scalars, shape-inferred.
void infer_range(int64_t start, int64_t limit, int64_t delta) {
  Graph g;
  auto c = [&](int64_t v) { return g.add_constant("", Tensor::from_i64({v}, {})); };
  g.add_output(g.add_node("Range", {c(start), c(limit), c(delta)}, 1, {}, "range0")->output(0));
  sabre::ir::infer_types(g);
}

TEST(RangeBounds, DeltaZeroAndHugeCountsAreRefusedByShapeInference) {
  EXPECT_NO_THROW(infer_range(0, 10, 3));
  EXPECT_THROW(infer_range(0, 10, 0), sabre::ir::ShapeError);
  EXPECT_THROW(infer_range(0, int64_t{1} << 50, 1), sabre::ir::ShapeError);
  EXPECT_THROW(infer_range(kMin, kMax, 1), sabre::ir::ShapeError);  // span past int64
  EXPECT_NO_THROW(infer_range(kMax, kMin, 1));                      // empty, with a span past int64
}

TEST(TensorSize, OverflowAndHugeShapesAreRefusedBeforeAllocating) {
  EXPECT_THROW(Tensor(DType::f32, {int64_t{1} << 40, int64_t{1} << 40}), sabre::ir::TensorSizeError);
  EXPECT_THROW(Tensor(DType::f32, {int64_t{1} << 41}), sabre::ir::TensorSizeError);
  EXPECT_THROW(Tensor(DType::f32, {2, -3}), sabre::ir::TensorSizeError);
  try {  // 2^40 f32 elements: 4 TiB, more than any test machine holds
    sabre::ir::check_tensor_size(DType::f32, {int64_t{1} << 40}, "input 'x'");
    FAIL() << "expected a TensorSizeError";
  } catch (const sabre::ir::TensorSizeError& e) {
    EXPECT_NE(std::string(e.what()).find("input 'x' of shape [1099511627776]"), std::string::npos) << e.what();
  }
  EXPECT_EQ(Tensor(DType::f32, {3, 4}).numel(), 12);
}

TEST(DimArithmetic, OverflowThrowsInsteadOfWrapping) {
  const Dim big(int64_t{1} << 40);
  EXPECT_THROW(big * big, std::overflow_error);
  EXPECT_THROW(Dim(kMax) + Dim(1), std::overflow_error);
  EXPECT_THROW((Dim(4) * Dim::symbol("b")).evaluate({{"b", int64_t{1} << 62}}), std::overflow_error);
  EXPECT_THROW(Dim(kMin).divide(Dim(-1)), std::overflow_error);  // INT64_MIN / -1: no trap
  EXPECT_EQ((Dim(6) * Dim::symbol("n")).divide(Dim(-2))->str(), "-3*n");
}

class FilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sabre_files_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const support::FileError& e) {
    return e.what();
  }
  return "";
}

TEST_F(FilesTest, NonRegularFilesAreRefusedWithoutBlocking) {
  const std::string fifo = (dir_ / "pipe").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(error_of([&] { support::read_input_file(fifo, "model", support::kMaxModelBytes); }).find("FIFO"),
            std::string::npos);
  EXPECT_NE(error_of([&] { support::read_input_file("/dev/zero", "", support::kMaxDataBytes); }).find("character device"),
            std::string::npos);
  EXPECT_NE(error_of([&] { support::read_input_file(dir_.string(), "", support::kMaxDataBytes); }).find("directory"),
            std::string::npos);
  std::string missing = error_of([&] { support::read_input_file((dir_ / "nope").string(), "", 10); });
  EXPECT_NE(missing.find("cannot read '"), std::string::npos) << missing;
  EXPECT_NE(missing.find("No such file or directory"), std::string::npos) << missing;
}

TEST_F(FilesTest, SizeCapAndContents) {
  const std::string f = (dir_ / "f.bin").string();
  std::ofstream(f) << "0123456789";
  EXPECT_EQ(support::read_input_file(f, "", 10), "0123456789");
  EXPECT_NE(error_of([&] { support::read_input_file(f, "", 9); }).find("more than the 9-byte limit"), std::string::npos);
  support::InputFile in(f, "", 100);
  char buf[3];
  in.read_at(buf, 3, 7);
  EXPECT_EQ(std::string(buf, 3), "789");
  EXPECT_THROW(in.read_at(buf, 3, 8), support::FileError);
}

TEST_F(FilesTest, WritesThatFailAreErrors) {
  const std::string f = (dir_ / "out.bin").string();
  support::write_output_file(f, "abc", 3);
  EXPECT_EQ(fs::file_size(f), 3u);
  if (fs::exists("/dev/full")) {
    std::string e = error_of([] { support::write_output_file("/dev/full", "abc", 3); });
    EXPECT_NE(e.find("No space left on device"), std::string::npos) << e;
  }
  EXPECT_THROW(support::write_output_file("", "abc", 3), support::FileError);
  EXPECT_THROW(support::write_output_file((dir_ / "no" / "such").string(), "abc", 3), support::FileError);
}

TEST(CompareTolerance, PerDtypeDefaultsAndVerdicts) {
  auto t = [](std::vector<float> v) { return Tensor::from_f32(v, {static_cast<int64_t>(v.size())}); };
  const auto f32 = sabre::reference::default_tolerance(DType::f32);
  EXPECT_DOUBLE_EQ(f32.rtol, 1e-2);
  EXPECT_DOUBLE_EQ(sabre::reference::default_tolerance(DType::bf16).rtol, 5e-2);
  EXPECT_DOUBLE_EQ(sabre::reference::default_tolerance(DType::i64).rtol, 0);
  auto close = sabre::reference::compare(t({1.0f, 2.0f, -3.0f}), t({1.001f, 2.0f, -3.0f}), f32);
  EXPECT_TRUE(close.within);
  EXPECT_NEAR(close.max_abs, 1e-3, 1e-6);
  auto far = sabre::reference::compare(t({1.5f, 2.0f, -3.0f}), t({1.0f, 2.0f, -3.0f}), f32);
  EXPECT_FALSE(far.within);
  EXPECT_NEAR(far.rel_l2, 0.5 / std::sqrt(14.0), 1e-6);
  EXPECT_TRUE(sabre::reference::compare(t({1.5f, 2.0f, -3.0f}), t({1.0f, 2.0f, -3.0f}), {0.2, 0}).within);
  // Near-zero outputs pass on atol; a NaN never passes.
  EXPECT_TRUE(sabre::reference::compare(t({1e-5f, 0}), t({0, 0}), f32).within);
  EXPECT_FALSE(sabre::reference::compare(t({NAN, 0}), t({0, 0}), {1e9, 1e9}).within);
  EXPECT_FALSE(sabre::reference::compare(t({1, 2}), t({1, 2, 3}), f32).within);
}

}  // namespace
