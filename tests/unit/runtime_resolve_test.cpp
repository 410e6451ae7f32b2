// Host-side resolution: dims in params, GEMM dispatch by M, elementwise chains from JSON,
// DLPack dtypes.
#include <gtest/gtest.h>

#include "runtime/resolve.h"

using namespace sabre::runtime;
using sabre::json::Value;

namespace {
Step gemm_step() {
  Step s;
  s.op = "gemm";
  s.name = "/ffn";
  s.params = sabre::json::parse(
      R"({"m":"batch*seq","n":3072,"k":"768","lda":"768","dispatch":[{"max_m":64,"kernel":"small"},{"max_m":1024,"kernel":"mid"},{"max_m":-1,"kernel":"big"}]})");
  return s;
}
}  // namespace

TEST(RuntimeResolve, DimsFromStringsAndNumbers) {
  Step s = gemm_step();
  Dims d{{"batch", 4}, {"seq", 100}};
  EXPECT_EQ(param_dim(s, "m", d), 400);
  EXPECT_EQ(param_dim(s, "n", d), 3072);
  EXPECT_EQ(param_dim(s, "k", d), 768);
  EXPECT_EQ(param_dim(s, "batch", d, 1), 1);
  try {
    param_dim(s, "ldb", d);
    FAIL();
  } catch (const PlanError& e) {
    EXPECT_STREQ(e.what(), "plan: step '/ffn' (gemm) has no param 'ldb'");
  }
  EXPECT_THROW(param_dim(s, "m", {{"batch", 4}}), PlanError);  // seq unbound
}

TEST(RuntimeResolve, GemmDispatchPicksTheFirstTableEntryCoveringM) {
  Step s = gemm_step();
  EXPECT_EQ(select_gemm_kernel(s, 1), "small");
  EXPECT_EQ(select_gemm_kernel(s, 64), "small");
  EXPECT_EQ(select_gemm_kernel(s, 65), "mid");
  EXPECT_EQ(select_gemm_kernel(s, 1024), "mid");
  EXPECT_EQ(select_gemm_kernel(s, 1 << 20), "big");
  Step bounded = s;
  bounded.params = sabre::json::parse(R"({"dispatch":[{"max_m":128,"kernel":"only"}]})");
  try {
    select_gemm_kernel(bounded, 129);
    FAIL();
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("no kernel in its dispatch table covers m=129"), std::string::npos) << e.what();
  }
  Step none = s;
  none.params = Value(sabre::json::Object{});
  EXPECT_THROW(select_gemm_kernel(none, 1), PlanError);
}

TEST(RuntimeResolve, ChainRoundTripsThroughJson) {
  using namespace sabre::native;
  ElementwiseChain c;
  c.inputs = {DType::f16, DType::f16};
  int a = c.input(0), b = c.input(1);
  int s = c.binary(EwOp::add, a, b);
  int g = c.unary(EwOp::gelu_erf, s);
  c.outputs = {c.cast(g, DType::f16)};
  Step st;
  st.op = "elementwise";
  st.name = "/bias_gelu";
  st.params = Value(sabre::json::Object{{"chain", chain_to_json(c)}});
  ElementwiseChain back = parse_chain(Step{st.op, st.name, {}, {}, sabre::json::parse(st.params.dump())});
  ASSERT_EQ(back.nodes.size(), c.nodes.size());
  for (size_t i = 0; i < c.nodes.size(); ++i) {
    EXPECT_EQ(back.nodes[i].op, c.nodes[i].op) << i;
    EXPECT_EQ(back.nodes[i].dtype, c.nodes[i].dtype) << i;
    EXPECT_EQ(back.nodes[i].a, c.nodes[i].a) << i;
  }
  EXPECT_EQ(kernel_name(back), kernel_name(c));
  Step bad = st;
  bad.params = sabre::json::parse(R"({"chain":{"inputs":["f16"],"nodes":[{"op":"frobnicate","dtype":"f16","a":0}],"outputs":[0]}})");
  try {
    parse_chain(bad);
    FAIL();
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown elementwise op 'frobnicate'"), std::string::npos) << e.what();
  }
}

TEST(RuntimeResolve, DlpackDtypesMapBothWays) {
  for (size_t i = 0; i < sabre::ir::kDTypeCount; ++i) {
    auto t = static_cast<DType>(i);
    auto back = from_dlpack(to_dlpack(t));
    ASSERT_TRUE(back.has_value()) << sabre::ir::name(t);
    EXPECT_EQ(*back, t);
  }
  EXPECT_EQ(dlpack_name(to_dlpack(DType::f16)), "float16");
  EXPECT_EQ(dlpack_name(to_dlpack(DType::bf16)), "bfloat16");
  EXPECT_FALSE(from_dlpack({SABRE_DTYPE_FLOAT, 16, 4}).has_value());
}
