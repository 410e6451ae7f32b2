// Host-side resolution: GEMM dispatch by M, conv-like steps' geometry at a call's dims, DLPack
// dtypes. (Reading params: runtime_step_params_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/resolve.h"

using namespace sabre::runtime;
using sabre::json::Value;

namespace {
// A step of kind `op` whose params are `params` (JSON text), read as a plan load reads them.
Step step(const std::string& op, const std::string& name, const std::string& params) {
  Step s;
  s.op = op;
  s.name = name;
  s.params = parse_step_params(*step_kind(op), sabre::json::parse(params), "step '" + name + "' (" + op + ")");
  return s;
}
Step gemm_step() {
  return step("gemm", "/ffn",
              R"({"m":"batch*seq","n":3072,"k":"768","lda":"768","dispatch":[{"max_m":64,"kernel":"small"},{"max_m":1024,"kernel":"mid"},{"max_m":-1,"kernel":"big"}]})");
}
}  // namespace

TEST(RuntimeResolve, DimsFromStringsAndNumbers) {
  const Step s = gemm_step();
  const GemmParams& g = s.as<GemmParams>();
  Dims d{{"batch", 4}, {"seq", 100}};
  EXPECT_EQ(g.m.eval(d), 400);
  EXPECT_EQ(g.n.eval(d), 3072);
  EXPECT_EQ(g.k.eval(d), 768);
  EXPECT_FALSE(g.batch.has_value());
  EXPECT_THROW(g.m.eval({{"batch", 4}}), PlanError);  // seq unbound
}

TEST(RuntimeResolve, GemmDispatchPicksTheFirstTableEntryCoveringM) {
  Step s = gemm_step();
  EXPECT_EQ(select_gemm_kernel(s, 1), "small");
  EXPECT_EQ(select_gemm_kernel(s, 64), "small");
  EXPECT_EQ(select_gemm_kernel(s, 65), "mid");
  EXPECT_EQ(select_gemm_kernel(s, 1024), "mid");
  EXPECT_EQ(select_gemm_kernel(s, 1 << 20), "big");
  Step bounded = step("gemm", "/ffn", R"({"m":1,"n":1,"k":1,"dispatch":[{"max_m":128,"kernel":"only"}]})");
  try {
    select_gemm_kernel(bounded, 129);
    FAIL();
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("no kernel in its dispatch table covers m=129"), std::string::npos) << e.what();
  }
  // A gemm step without its table does not load.
  EXPECT_THROW(step("gemm", "/ffn", R"({"m":1,"n":1,"k":1})"), PlanError);
  EXPECT_THROW(step("gemm", "/ffn", R"({"m":1,"n":1,"k":1,"dispatch":[]})"), PlanError);
  // aligned_to picks the aligned table where the call's alignment reaches it.
  Step aligned = step("gemm", "/qk",
                      R"({"m":1,"n":1,"k":1,"dispatch":[{"max_m":-1,"kernel":"a1"}],)"
                      R"("dispatch_aligned":[{"max_m":-1,"kernel":"a8"}],"aligned_to":8})");
  EXPECT_EQ(select_gemm_kernel(aligned, 5, 4), "a1");
  EXPECT_EQ(select_gemm_kernel(aligned, 5, 8), "a8");
  EXPECT_EQ(gemm_step_kernels(aligned), (std::vector<std::string>{"a1", "a8"}));
}

TEST(RuntimeResolve, ChainRoundTripsThroughJson) {
  using namespace sabre::native;
  ElementwiseChain c;
  c.inputs = {DType::f16, DType::f16};
  int a = c.input(0), b = c.input(1);
  int s = c.binary(EwOp::add, a, b);
  int g = c.unary(EwOp::gelu_erf, s);
  c.outputs = {c.cast(g, DType::f16)};
  const std::string text = Value(sabre::json::Object{{"chain", chain_to_json(c)}}).dump();
  ElementwiseChain back = step("elementwise", "/bias_gelu", text).as<ElementwiseParams>().chain;
  ASSERT_EQ(back.nodes.size(), c.nodes.size());
  for (size_t i = 0; i < c.nodes.size(); ++i) {
    EXPECT_EQ(back.nodes[i].op, c.nodes[i].op) << i;
    EXPECT_EQ(back.nodes[i].dtype, c.nodes[i].dtype) << i;
    EXPECT_EQ(back.nodes[i].a, c.nodes[i].a) << i;
  }
  EXPECT_EQ(kernel_name(back), kernel_name(c));
  try {
    step("elementwise", "/bias_gelu",
         R"({"chain":{"inputs":["f16"],"nodes":[{"op":"frobnicate","dtype":"f16","a":0}],"outputs":[0]}})");
    FAIL();
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown elementwise op 'frobnicate'"), std::string::npos) << e.what();
  }
}

TEST(RuntimeResolve, DlpackDtypesMapBothWays) {
  for (size_t i = 0; i < sabre::ir::kDTypeCount; ++i) {
    auto t = static_cast<DType>(i);
    if (t == DType::str) continue;  // CPU reference only: no DLPack spelling
    auto back = from_dlpack(to_dlpack(t));
    ASSERT_TRUE(back.has_value()) << sabre::ir::name(t);
    EXPECT_EQ(*back, t);
  }
  EXPECT_EQ(dlpack_name(to_dlpack(DType::f16)), "float16");
  EXPECT_EQ(dlpack_name(to_dlpack(DType::bf16)), "bfloat16");
  EXPECT_FALSE(from_dlpack({SABRE_DTYPE_FLOAT, 16, 4}).has_value());
}

// A conv step's params -> sabre_conv_args (what the runtime hands the conv kernel), its kernel by
// M = n·p·q, and the refusals the ABI needs (asymmetric pads; p,q inconsistent with the rest).
TEST(RuntimeResolve, ConvArgsFromStepParams) {
  const std::string table =
      R"("dispatch":[{"max_m":-1,"kernel":"sm80_conv_fprop_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8_bias_res_relu"}])";
  Step s = step("conv", "/layer1/conv",
                R"({"n":"batch","h":"32","w":32,"c":"16","k":"16","r":3,"s":3,"p":"32","q":"32","pads":[1,1,1,1],)"
                R"("strides":[1,1],"dilations":[1,1],"groups":1,"alpha":1,"beta":1,)" + table + "}");
  sabre_conv_args a = conv_args(s, {{"batch", 3}});
  EXPECT_EQ(a.n, 3);
  EXPECT_EQ(a.h, 32);
  EXPECT_EQ(a.c, 16);
  EXPECT_EQ(a.k, 16);
  EXPECT_EQ(a.r, 3);
  EXPECT_EQ(a.q, 32);
  EXPECT_EQ(a.pad_h, 1);
  EXPECT_EQ(a.pad_w, 1);
  EXPECT_EQ(a.stride_w, 1);
  EXPECT_EQ(a.dil_h, 1);
  EXPECT_EQ(a.groups, 1);
  EXPECT_FLOAT_EQ(a.beta, 1.0f);
  EXPECT_EQ(a.x, nullptr);
  EXPECT_EQ(select_gemm_kernel(s, a.n * a.p * a.q),
            "sm80_conv_fprop_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8_bias_res_relu");
  EXPECT_TRUE(is_known_op("conv"));

  Step asym = step("conv", "/c",
                   R"({"n":1,"h":8,"w":8,"c":8,"k":8,"r":3,"s":3,"p":8,"q":8,"pads":[1,1,2,1],"strides":[1,1],"dilations":[1,1],)" +
                       table + "}");
  EXPECT_THROW(conv_args(asym, {}), PlanError);
  Step wrong_p = step("conv", "/c",
                      R"({"n":1,"h":8,"w":8,"c":8,"k":8,"r":3,"s":3,"p":7,"q":8,"pads":[1,1,1,1],"strides":[1,1],"dilations":[1,1],)" +
                          table + "}");
  EXPECT_THROW(conv_args(wrong_p, {}), PlanError);
  Step strided = step("conv", "/c",
                      R"({"n":1,"h":8,"w":8,"c":8,"k":16,"r":3,"s":3,"p":4,"q":4,"pads":[1,1,1,1],"strides":[2,2],"dilations":[1,1],)" +
                          table + "}");
  EXPECT_EQ(conv_args(strided, {}).stride_h, 2);
}

// An im2col step's params at the bound dims (what the runtime hands native::im2col): the stem at
// batch 3 with a [batch*12544, 152] output; the refusals (p disagreeing with the rest, a's rows or
// columns wrong, lists of the wrong length), each naming the step.
TEST(RuntimeResolve, Im2colGeometryFromStepParams) {
  const std::string name = "/conv1/Conv (im2col, 147 -> 152 columns)";
  Step s = step("im2col", name,
                R"({"n":"batch","c":3,"h":"224","w":224,"r":7,"s":7,"p":"112","q":"112","pads":[3,3,3,3],)"
                R"("strides":[2,2],"dilations":[1,1]})");
  EXPECT_TRUE(is_known_op("im2col"));
  const Dims at3 = {{"batch", 3}};
  Im2colGeometry g = im2col_geometry(s, at3, {3 * 112 * 112, 152});
  EXPECT_EQ(g.n, 3);
  EXPECT_EQ(g.c, 3);
  EXPECT_EQ(g.h, 224);
  EXPECT_EQ(g.w, 224);
  EXPECT_EQ(g.r, 7);
  EXPECT_EQ(g.s, 7);
  EXPECT_EQ(g.p, 112);
  EXPECT_EQ(g.q, 112);
  EXPECT_EQ(g.cols, 152);
  EXPECT_EQ(g.pad_h, 3);
  EXPECT_EQ(g.stride_w, 2);
  EXPECT_EQ(g.dil_h, 1);
  // The same step at batch 32: only n and the rows move.
  EXPECT_EQ(im2col_geometry(s, {{"batch", 32}}, {32 * 112 * 112, 152}).n, 32);
  auto refused = [&](const Step& st, std::vector<int64_t> a, const char* why) {
    try {
      im2col_geometry(st, at3, a);
      ADD_FAILURE() << "accepted: " << why;
    } catch (const PlanError& e) {
      EXPECT_NE(std::string(e.what()).find("step '/conv1/Conv (im2col, 147 -> 152 columns)' (im2col)"), std::string::npos)
          << e.what();
    }
  };
  refused(s, {2 * 112 * 112, 152}, "rows for batch 2");
  refused(s, {3 * 112 * 112, 144}, "fewer columns than r*s*c");
  refused(s, {3 * 112 * 112 * 152}, "a not 2-D");
  Step wrong_p = step("im2col", name,
      R"({"n":"batch","c":3,"h":224,"w":224,"r":7,"s":7,"p":111,"q":112,"pads":[3,3,3,3],"strides":[2,2],"dilations":[1,1]})");
  refused(wrong_p, {3 * 111 * 112, 152}, "p not the output size");
  Step short_pads = step("im2col", name,
      R"({"n":"batch","c":3,"h":224,"w":224,"r":7,"s":7,"p":112,"q":112,"pads":[3,3],"strides":[2,2],"dilations":[1,1]})");
  refused(short_pads, {3 * 112 * 112, 152}, "pads of 2");
  // Asymmetric pads are fine (only the begin pads place the taps), dilation 2 too.
  Step asym = step("im2col", name,
      R"({"n":1,"c":4,"h":9,"w":9,"r":3,"s":3,"p":9,"q":8,"pads":[2,1,0,0],"strides":[1,1],"dilations":[1,1]})");
  EXPECT_EQ(im2col_geometry(asym, {}, {72, 40}).pad_h, 2);
  Step dil = step("im2col", name,
      R"({"n":1,"c":3,"h":11,"w":11,"r":3,"s":3,"p":7,"q":7,"pads":[0,0,0,0],"strides":[1,1],"dilations":[2,2]})");
  EXPECT_EQ(im2col_geometry(dil, {}, {49, 32}).dil_w, 2);
}

// A stem_conv step's params at the bound dims (what the runtime hands native::stem_conv): ResNet's
// stem at batch 3, x [3,3,224,224], w [64,160], y [3,112,112,64], relu (clamp [0, null]);
// relu6 and no clamp; and the refusals, each a PlanError naming the step and saying what is wrong:
// asymmetric pads, lists of the wrong length, p disagreeing with the rest, x, w or y of the wrong
// shape (among them fewer columns than r*s*CP), a clamp whose min is above its max, a clamp that is not a pair.
TEST(RuntimeResolve, StemConvGeometryFromStepParams) {
  const std::string name = "/conv1/Conv (one stem_conv kernel)";
  const std::string window =
      R"("n":"batch","c":3,"h":"224","w":224,"k":64,"r":7,"s":7,"p":"112","q":"112","strides":[2,2],"dilations":[1,1])";
  auto stem = [&](const std::string& rest) { return step("stem_conv", name, "{" + window + rest + "}"); };
  Step s = stem(R"(,"pads":[3,3,3,3],"clamp":[0,null])");
  EXPECT_TRUE(is_known_op("stem_conv"));
  const Dims at3 = {{"batch", 3}};
  const std::vector<int64_t> x = {3, 3, 224, 224}, w = {64, 208}, y = {3, 112, 112, 64};
  StemConvGeometry g = stem_conv_geometry(s, at3, x, w, y);
  EXPECT_EQ(g.n, 3);
  EXPECT_EQ(g.c, 3);
  EXPECT_EQ(g.h, 224);
  EXPECT_EQ(g.w, 224);
  EXPECT_EQ(g.k, 64);
  EXPECT_EQ(g.r, 7);
  EXPECT_EQ(g.p, 112);
  EXPECT_EQ(g.q, 112);
  EXPECT_EQ(g.cols, 208);
  EXPECT_EQ(g.pad_w, 3);
  EXPECT_EQ(g.stride_h, 2);
  EXPECT_EQ(g.dil_w, 1);
  EXPECT_TRUE(g.clamp.on);
  EXPECT_EQ(g.clamp.lo, 0.f);
  EXPECT_EQ(g.clamp.hi, INFINITY);
  Step relu6 = stem(R"(,"pads":[3,3,3,3],"clamp":[0,6])");
  EXPECT_EQ(stem_conv_geometry(relu6, at3, x, w, y).clamp.hi, 6.f);
  Step linear = stem(R"(,"pads":[3,3,3,3])");
  EXPECT_FALSE(stem_conv_geometry(linear, at3, x, w, y).clamp.on);

  auto refused = [&](const Step& st, std::vector<int64_t> xs, std::vector<int64_t> ws, std::vector<int64_t> ys,
                     const std::string& why) {
    try {
      stem_conv_geometry(st, at3, xs, ws, ys);
      ADD_FAILURE() << "accepted: " << why;
    } catch (const PlanError& e) {
      EXPECT_NE(std::string(e.what()).find("step '/conv1/Conv (one stem_conv kernel)' (stem_conv)"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused(stem(R"(,"pads":[3,3,4,3])"), x, w, y, "has asymmetric pads [3,3,4,3]; the kernel pads both sides of a dim alike");
  refused(stem(R"(,"pads":[3,3])"), x, w, y, "needs pads [4], strides [2] and dilations [2]");
  Step wrong_p = step("stem_conv", name,
      R"({"n":"batch","c":3,"h":224,"w":224,"k":64,"r":7,"s":7,"p":111,"q":112,"pads":[3,3,3,3],"strides":[2,2],"dilations":[1,1]})");
  refused(wrong_p, x, w, {3, 111, 112, 64}, "dims disagree");
  refused(s, {2, 3, 224, 224}, w, y, "x must be [n,c,h,w]");
  refused(s, {3, 224, 224, 3}, w, y, "x must be [n,c,h,w]");
  refused(s, x, {64, 144}, y, "w must be [k, cols] with cols >= r*s*4");
  refused(s, x, {32, 208}, y, "w must be [k, cols] with cols >= r*s*4");
  refused(s, x, {64 * 208}, y, "w must be [k, cols] with cols >= r*s*4");
  refused(s, x, w, {3, 64, 112, 112}, "y must be [n,p,q,k]");
  refused(s, x, w, {3, 112, 112, 32}, "y must be [n,p,q,k]");
  // A clamp that is not a pair, or whose min is above its max, does not load.
  auto load_error = [&](const std::string& rest) {
    try {
      stem(rest);
    } catch (const PlanError& e) {
      return std::string(e.what());
    }
    return std::string("loaded");
  };
  EXPECT_NE(load_error(R"(,"pads":[3,3,3,3],"clamp":[6,0])").find("has its min above its max"), std::string::npos);
  EXPECT_NE(load_error(R"(,"pads":[3,3,3,3],"clamp":[0])").find("param 'clamp' must be [min, max]"), std::string::npos);
  EXPECT_NE(load_error(R"(,"pads":[3,3,3,3],"clamp":[0])").find("step '" + name + "' (stem_conv)"), std::string::npos);
}
