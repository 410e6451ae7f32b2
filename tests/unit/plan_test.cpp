#include <gtest/gtest.h>

#include "runtime/plan.h"

using namespace sabre::runtime;

namespace {
Plan tiny_plan() {
  Plan p;
  p.symbols = {{"batch", 1, 8}, {"seq", 1, 512}};
  p.tensors = {{"x", DType::f16, {DimExpr::parse("batch"), DimExpr::parse("seq"), 768}, TensorKind::input, 0, 0},
               {"w", DType::f16, {768, 768}, TensorKind::weight, 0, 768 * 768 * 2},
               {"y", DType::f16, {DimExpr::parse("batch*seq"), 768}, TensorKind::output, 0, 0}};
  p.inputs = {0};
  p.outputs = {2};
  GemmParams g{.m = ParamDim::text("batch*seq"), .n = 768, .k = 768, .epilogue = "bias_gelu",
               .dispatch = {{-1, "sm90_gemm"}}};
  p.steps = {{"gemm", "/encoder/ffn", {0, 1, -1}, {2}, g}};
  return p;
}
}  // namespace

TEST(Plan, JsonRoundTrips) {
  Plan p = tiny_plan();
  Plan q = Plan::from_json(p.to_json());
  EXPECT_EQ(q.to_json(), p.to_json());
  EXPECT_EQ(q.tensors[2].shape[0].str(), "batch*seq");
  EXPECT_EQ(q.steps[0].inputs[2], -1);
  EXPECT_EQ(q.steps[0].as<GemmParams>().epilogue, "bias_gelu");
  EXPECT_EQ(q.steps[0].as<GemmParams>(), p.steps[0].as<GemmParams>());
}

TEST(Plan, BindsSymbolsAndChecksRanges) {
  Plan p = tiny_plan();
  auto dims = p.bind_dims({{2, 128, 768}});
  EXPECT_EQ(dims.at("batch"), 2);
  EXPECT_EQ(p.tensors[2].shape[0].eval(dims), 256);
  try {
    p.bind_dims({{2, 600, 768}});
    FAIL();
  } catch (const PlanError& e) {
    EXPECT_STREQ(e.what(), "seq=600 is outside the compiled range 1..512; recompile with --dynamic seq=1..600");
  }
  EXPECT_THROW(p.bind_dims({{2, 128}}), PlanError);
  try {
    p.bind_dims({{2, 128, 512}});
    FAIL();
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("must be 768"), std::string::npos) << e.what();
  }
}

TEST(Plan, CorruptPlansSayWhatIsWrong) {
  std::string good = tiny_plan().to_json();
  auto err = [](const std::string& text) {
    try {
      Plan::from_json(text);
    } catch (const PlanError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(err(good.substr(0, good.size() / 2)).find("not valid JSON"), std::string::npos);
  std::string bad_id = good;
  bad_id.replace(bad_id.find("\"outputs\":[2]"), 13, "\"outputs\":[9]");
  EXPECT_NE(err(bad_id).find("does not exist"), std::string::npos) << err(bad_id);
  std::string bad_ver = good;
  bad_ver.replace(bad_ver.find("\"format_version\":1"), 18, "\"format_version\":7");
  EXPECT_NE(err(bad_ver).find("recompile"), std::string::npos) << err(bad_ver);
}

TEST(DimExpr, ParsesAndEvaluates) {
  EXPECT_EQ(DimExpr::parse("2*batch*seq+1").eval({{"batch", 3}, {"seq", 5}}), 31);
  EXPECT_EQ(DimExpr::parse("seq-1").str(), "seq-1");
  EXPECT_THROW(DimExpr::parse("seq+"), PlanError);
  EXPECT_THROW(DimExpr::parse("batch").eval({}), PlanError);
  // Slice bounds from exporters: the int64 extremes parse exactly, one past them does not.
  EXPECT_EQ(DimExpr::parse("9223372036854775807").value(), INT64_MAX);
  EXPECT_EQ(DimExpr::parse("-9223372036854775807").value(), -INT64_MAX);
  EXPECT_EQ(DimExpr::parse("-9223372036854775808").value(), INT64_MIN);
  EXPECT_EQ(DimExpr::parse(DimExpr(INT64_MAX).str()).value(), INT64_MAX);
  EXPECT_EQ(DimExpr(INT64_MIN).str(), "-9223372036854775808");
  EXPECT_THROW(DimExpr::parse("9223372036854775808"), PlanError);
  EXPECT_THROW(DimExpr::parse("-9223372036854775809"), PlanError);
  EXPECT_THROW(DimExpr::parse("4611686018427387904*3"), PlanError);
}
