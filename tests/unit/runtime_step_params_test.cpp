// Typed step params (runtime/step_params.h): every kind's struct survives struct -> JSON -> struct
// with every field set and with none of its optional fields set; the JSON it writes reads back to
// the same bytes; a missing or mistyped field is a load error naming the step and the field.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/plan.h"

using namespace sabre::runtime;
using sabre::json::Value;

namespace {

const ParamDim kDim = ParamDim::text("2*batch+1");
const ParamDims kTriple = {ParamDim::text("seq"), ParamDim(1), ParamDim::text("0")};

// A struct of `kind` with every field set (optional ones too), different from its defaults.
StepParams full(StepKind kind) {
  switch (kind) {
    case StepKind::gemm:
      return GemmParams{.m = kDim, .n = 3072, .k = ParamDim::text("768"), .batch = 2, .lda = 768, .ldb = 768,
                        .ldd = 3072, .ldr = 3072, .stride_a = ParamDim::text("0"), .stride_b = 0, .stride_d = 5,
                        .stride_r = 6, .a_offset = 7, .b_offset = 8, .bias_offset = 9, .r_offset = 10, .d_offset = 11,
                        .alpha = 0.5, .beta = 1, .dtype = "f16", .layout = "tn", .epilogue = "bias_gelu",
                        .pattern = "cutlass.gemm_bias_gelu", .dispatch = {{64, "small"}, {-1, "big"}},
                        .dispatch_aligned = DispatchTable{{-1, "big_a8"}}, .aligned_to = 8};
    case StepKind::conv:
      return ConvParams{.n = ParamDim::text("batch"), .h = 56, .w = 56, .c = 64, .k = 64, .r = 3, .s = 3, .p = 56,
                        .q = 56, .pads = param_numbers({1, 1, 1, 1}), .strides = param_numbers({1, 1}),
                        .dilations = param_numbers({1, 1}), .groups = 1, .alpha = 1, .beta = 0, .dtype = "f16",
                        .epilogue = "bias_relu", .pattern = "cutlass.conv2d", .dispatch = {{-1, "conv_k"}},
                        .dispatch_aligned = DispatchTable{{-1, "conv_k8"}}, .aligned_to = 8};
    case StepKind::softmax:
      return SoftmaxParams{.b = kDim, .h = 12, .q = ParamDim::text("seq"), .cols = ParamDim::text("seq"),
                           .scale = 0.125, .causal = true, .log = true, .mask_stride = kTriple};
    case StepKind::layernorm:
      return LayerNormParams{.rows = kDim, .cols = 768, .eps = 1e-12, .f32_copy = true};
    case StepKind::embed_layernorm:
      return EmbedLayerNormParams{.row_dims = {ParamDim::text("batch"), ParamDim::text("seq")},
                                  .offsets = {0, 0},
                                  .strides = {ParamDim::text("seq"), 1, 0, 1},
                                  .cols = 768,
                                  .eps = 1e-5};
    case StepKind::elementwise: {
      sabre::native::ElementwiseChain c;
      c.inputs = {DType::f16, DType::f16};
      int s = c.binary(sabre::native::EwOp::add, c.input(0), c.input(1));
      c.outputs = {c.cast(c.unary(sabre::native::EwOp::gelu_erf, s), DType::f16)};
      return ElementwiseParams{.chain = c, .kernel = sabre::native::kernel_name(c), .library = "kernels/ew.so"};
    }
    case StepKind::where: return WhereParams{};
    case StepKind::cast: return CastParams{};
    case StepKind::reduce: return ReduceParams{.kind = ReduceKind::log_sum_exp, .axes = param_numbers({1, 2})};
    case StepKind::permute: return PermuteParams{.perm = param_numbers({0, 2, 1, 3})};
    case StepKind::slice:
      return SliceParams{.starts = param_numbers({0}), .ends = ParamDims{ParamDim::text("seq")},
                         .axes = param_numbers({1}), .steps = param_numbers({1})};
    case StepKind::strided_copy: return StridedCopyParams{.offset = ParamDim::text("0"), .strides = kTriple};
    case StepKind::concat: return ConcatParams{.axis = 1};
    case StepKind::split: return SplitParams{.axis = 2};
    case StepKind::gather: return GatherParams{.axis = 0};
    case StepKind::pool2d:
      return Pool2dParams{.kind = PoolMode::average, .layout = TensorLayout::nhwc, .kernel = param_numbers({3, 3}),
                          .stride = param_numbers({2, 2}), .dilation = param_numbers({1, 1}),
                          .pads = param_numbers({1, 1, 1, 1}), .ceil_mode = true, .count_include_pad = false};
    case StepKind::global_average_pool: return GlobalAveragePoolParams{.layout = TensorLayout::nhwc};
    case StepKind::copy: return CopyParams{};
    case StepKind::reshape: return ReshapeParams{};
    case StepKind::fill: return FillParams{.values = ParamDims{ParamDim::text("batch"), ParamDim::text("seq")}};
    case StepKind::iota: return IotaParams{.start = 0, .delta = ParamDim::text("1")};
    case StepKind::depthwise_conv:
      return DepthwiseConvParams{.n = ParamDim::text("batch"), .h = 28, .w = 28, .c = 96, .r = 3, .s = 3, .p = 28,
                                 .q = 28, .pads = param_numbers({1, 1}), .strides = param_numbers({1, 1}),
                                 .dilations = param_numbers({1, 1}), .clamp = ClampParam{0, 6},
                                 .activation = ActivationParam{.op = sabre::native::ConvAct::hard_swish,
                                                               .alpha = 0.25, .beta = 0.5}};
    case StepKind::attention:
      return AttentionParams{.b = ParamDim::text("batch"), .h = 12, .sq = ParamDim::text("seq"),
                             .sk = ParamDim::text("seq"), .d = 64, .kv_group = 4, .q_stride = kTriple,
                             .k_stride = kTriple, .v_stride = kTriple, .o_stride = kTriple, .mask_stride = kTriple,
                             .mask_batch = ParamDims{ParamDim::text("4"), ParamDim::text("12*seq*seq")}, .offsets = ParamDims{0, 768, 1536}, .scale = 0.125, .mask_true = 0, .mask_false = -65504,
                             .causal = false};
    case StepKind::nchw_to_nhwc: return NchwToNhwcParams{};
    case StepKind::im2col:
      return Im2colParams{.n = ParamDim::text("batch"), .c = 3, .h = 224, .w = 224, .r = 7, .s = 7, .p = 112,
                          .q = 112, .pads = param_numbers({3, 3, 3, 3}), .strides = param_numbers({2, 2}),
                          .dilations = param_numbers({1, 1})};
    case StepKind::stem_conv: {
      StemConvParams p;
      static_cast<Im2colParams&>(p) = std::get<Im2colParams>(full(StepKind::im2col));
      p.k = 64, p.dtype = "f16", p.epilogue = "bias_relu", p.clamp = ClampParam{0, INFINITY};
      return p;
    }
    case StepKind::grouped_conv: {
      GroupedConvParams p{std::get<DepthwiseConvParams>(full(StepKind::depthwise_conv))};
      p.k = 192, p.groups = 32, p.clamp = ClampParam{-INFINITY, 6};
      return p;
    }
    case StepKind::gather_elements: return GatherElementsParams{.axis = 2};
    case StepKind::trilu: return TriluParams{.k = -1, .upper = false};
    case StepKind::cumsum: return CumsumParams{.axis = 1, .exclusive = true, .reverse = true};
    case StepKind::count: break;
  }
  ADD_FAILURE() << "no sample for kind " << static_cast<int>(kind);
  return {};
}

std::string where(StepKind k) { return std::string("step '/x' (") + to_string(k) + ")"; }

StepParams reread(StepKind k, const StepParams& p) {
  return parse_step_params(k, sabre::json::parse(to_json(p).dump()), where(k));
}

// The load error of `kind` with params `text`, or "loaded".
std::string load_error(StepKind kind, const std::string& text) {
  try {
    parse_step_params(kind, sabre::json::parse(text), where(kind));
  } catch (const PlanError& e) {
    return e.what();
  }
  return "loaded";
}

}  // namespace

TEST(StepParams, EveryKindHasItsStructInStepKindOrder) {
  for (size_t i = 0; i < kStepKindCount; ++i) {
    const auto k = static_cast<StepKind>(i);
    EXPECT_EQ(kind_of(full(k)), k) << to_string(k);
    EXPECT_EQ(kind_of(default_step_params(k)), k) << to_string(k);
  }
}

TEST(StepParams, EveryKindRoundTripsThroughJson) {
  for (size_t i = 0; i < kStepKindCount; ++i) {
    const auto k = static_cast<StepKind>(i);
    SCOPED_TRACE(to_string(k));
    const StepParams p = full(k);
    const StepParams back = reread(k, p);
    EXPECT_TRUE(back == p) << to_json(p).dump() << "\nread back as\n" << to_json(back).dump();
    EXPECT_EQ(to_json(back).dump(), to_json(p).dump());
  }
}

TEST(StepParams, OptionalFieldsLeftOutStayOut) {
  // The kinds' defaults hold no optional field: they write only their required keys, and read back equal.
  for (size_t i = 0; i < kStepKindCount; ++i) {
    const auto k = static_cast<StepKind>(i);
    SCOPED_TRACE(to_string(k));
    if (k == StepKind::elementwise || k == StepKind::grouped_conv || k == StepKind::attention)
      continue;  // need a chain, k and groups, 3 strides each
    StepParams p = default_step_params(k);
    if (auto* g = std::get_if<GemmParams>(&p)) g->dispatch = {{-1, "k"}};
    if (auto* c = std::get_if<ConvParams>(&p)) {
      c->dispatch = {{-1, "k"}};
      c->p = c->q = 1 - 0;  // not checked here: only conv_args checks the geometry
    }
    EXPECT_TRUE(reread(k, p) == p) << to_json(p).dump();
  }
  EXPECT_EQ(to_json(SoftmaxParams{}).dump(), "{}");
  EXPECT_EQ(to_json(ConcatParams{.axis = 1}).dump(), R"({"axis":1})");
}

TEST(StepParams, DimsKeepTheFormTheyAreWrittenIn) {
  // The compiler writes some dims as text ("768") and some as numbers (768): both come back as written.
  const std::string text = R"({"b":"batch","cols":768,"h":"12","q":"seq*2"})";
  const StepParams p = parse_step_params(StepKind::softmax, sabre::json::parse(text), where(StepKind::softmax));
  EXPECT_EQ(to_json(p).dump(), text);
  const auto& s = std::get<SoftmaxParams>(p);
  EXPECT_EQ(s.q->eval({{"seq", 5}}), 10);
  EXPECT_EQ(s.cols->eval({}), 768);
  EXPECT_FALSE(ParamDim(768) == ParamDim::text("768"));
}

TEST(StepParams, MissingRequiredFieldsAreLoadErrorsNamingStepAndField) {
  EXPECT_EQ(load_error(StepKind::gemm, R"({"n":1,"k":1,"dispatch":[{"max_m":-1,"kernel":"k"}]})"),
            "plan: step '/x' (gemm) has no param 'm'");
  EXPECT_EQ(load_error(StepKind::gemm, R"({"m":1,"n":1,"k":1})"), "plan: step '/x' (gemm) has no param 'dispatch'");
  EXPECT_EQ(load_error(StepKind::concat, "{}"), "plan: step '/x' (concat) has no param 'axis'");
  EXPECT_EQ(load_error(StepKind::attention, R"({"b":1,"h":1,"sq":1,"sk":1,"d":64})"),
            "plan: step '/x' (attention) has no param 'q_stride'");
  EXPECT_EQ(load_error(StepKind::grouped_conv,
                       R"({"n":1,"h":8,"w":8,"c":8,"r":3,"s":3,"p":8,"q":8,"groups":2})"),
            "plan: step '/x' (grouped_conv) has no param 'k'");
  EXPECT_EQ(load_error(StepKind::elementwise, "{}"), "plan: step '/x' (elementwise) has no param 'chain'");
  // A null counts as absent, as it always did.
  EXPECT_EQ(load_error(StepKind::split, R"({"axis":null})"), "plan: step '/x' (split) has no param 'axis'");
}

TEST(StepParams, MistypedFieldsAreLoadErrorsNamingStepAndField) {
  EXPECT_EQ(load_error(StepKind::concat, R"({"axis":[1]})"),
            "plan: step '/x' (concat) param 'axis' is neither a dim string nor a number");
  EXPECT_EQ(load_error(StepKind::permute, R"({"perm":3})"), "plan: step '/x' (permute) param 'perm' must be a list");
  EXPECT_EQ(load_error(StepKind::softmax, R"({"scale":"big"})"),
            "plan: step '/x' (softmax) param 'scale' must be a number");
  EXPECT_EQ(load_error(StepKind::softmax, R"({"causal":"yes"})"),
            "plan: step '/x' (softmax) param 'causal' must be true or false");
  EXPECT_EQ(load_error(StepKind::pool2d, R"({"layout":7})"),
            "plan: step '/x' (pool2d) param 'layout' is 7, not a layout (nchw, nhwc)");
  EXPECT_EQ(load_error(StepKind::pool2d, R"({"kind":"median"})"),
            "plan: step '/x' (pool2d) param 'kind' is \"median\", not a pool kind (max, average)");
  EXPECT_EQ(load_error(StepKind::global_average_pool, R"({"layout":"NHWC"})"),
            "plan: step '/x' (global_average_pool) param 'layout' is \"NHWC\", not a layout (nchw, nhwc)");
  EXPECT_EQ(load_error(StepKind::pool2d, R"({"dtype":"f16"})"), "loaded") << "keys a kind does not list are ignored";
  // Dim text the grammar refuses loads as written and is refused if evaluated; ONNX's INT64_MAX
  // slice end ("to the end") evaluates.
  EXPECT_EQ(load_error(StepKind::iota, R"({"start":"2*"})"), "loaded");
  const StepParams big = parse_step_params(StepKind::slice, sabre::json::parse(R"({"ends":["9223372036854775807"]})"),
                                           where(StepKind::slice));
  EXPECT_EQ(to_json(big).dump(), R"({"ends":["9223372036854775807"]})");
  EXPECT_EQ(eval_dims(std::get<SliceParams>(big).ends, {}), std::vector<int64_t>{INT64_MAX});
  const StepParams over = parse_step_params(StepKind::slice, sabre::json::parse(R"({"ends":["9223372036854775808"]})"),
                                            where(StepKind::slice));
  EXPECT_THROW(eval_dims(std::get<SliceParams>(over).ends, {}), PlanError);
  EXPECT_NE(load_error(StepKind::gather, R"({"axis":1.5})").find("plan: step '/x' (gather) param 'axis'"),
            std::string::npos);
  EXPECT_NE(load_error(StepKind::gather, R"({"axis":1e300})").find("not a whole number"), std::string::npos);
  EXPECT_EQ(load_error(StepKind::gemm, R"({"m":1,"n":1,"k":1,"dispatch":[{"kernel":"k"}]})"),
            "plan: step '/x' (gemm) param 'dispatch' has an entry without max_m or kernel");
  EXPECT_EQ(load_error(StepKind::gemm, R"({"m":1,"n":1,"k":1,"dispatch":[{"max_m":-1,"kernel":"k"}],"aligned_to":3.5})"),
            "plan: step '/x' (gemm) param 'aligned_to' is 3.5, not an element count");
  EXPECT_NE(load_error(StepKind::reduce, R"({"kind":"median"})")
                .find("plan: step '/x' (reduce) param 'kind' is \"median\", not a reduce kind (sum, mean,"),
            std::string::npos);
  EXPECT_EQ(load_error(StepKind::attention, R"({"b":1,"h":1,"sq":1,"sk":1,"d":64,"q_stride":[1,2,3],"k_stride":[1,2,3],)"
                                            R"("v_stride":[1,2,3],"o_stride":[1,2,3],"mask_batch":[0,8]})"),
            "plan: step '/x' (attention) param 'mask_batch' needs [inner >= 1, outer stride]");
  EXPECT_EQ(load_error(StepKind::attention, R"({"b":1,"h":1,"sq":1,"sk":1,"d":64,"q_stride":[1,2],"k_stride":[1,2,3],)"
                                            R"("v_stride":[1,2,3],"o_stride":[1,2,3]})"),
            "plan: step '/x' (attention) param 'q_stride' needs 3 strides");
  EXPECT_EQ(load_error(StepKind::depthwise_conv,
                       R"({"n":1,"h":8,"w":8,"c":8,"r":3,"s":3,"p":8,"q":8,"clamp":[6,0]})"),
            "plan: step '/x' (depthwise_conv) param 'clamp' [6.000000, 0.000000] has its min above its max");
  EXPECT_EQ(load_error(StepKind::softmax, "[1]"), "plan: step '/x' (softmax) has params that are not an object");
  EXPECT_NE(load_error(StepKind::elementwise, R"({"chain":{"inputs":["f16"],"nodes":[],"outputs":[3]}})").find(
                "plan: step '/x' (elementwise) param 'chain'"),
            std::string::npos);
}

TEST(StepParams, PlansWithABadStepSayWhichWhenTheyLoad) {
  Plan p;
  p.tensors = {{"x", DType::f16, {4, 8}, TensorKind::input, 0, 0}, {"y", DType::f16, {4, 8}, TensorKind::output, 0, 0}};
  p.inputs = {0};
  p.outputs = {1};
  p.steps = {make_step("concat", "/cat", {0}, {1})};
  const std::string good = p.to_json();
  EXPECT_NO_THROW(Plan::from_json(good));
  std::string bad = good;
  bad.replace(bad.find(R"("axis":0)"), 8, R"("axis":[0])");
  try {
    Plan::from_json(bad);
    FAIL() << "loaded";
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("plan: step '/cat' (concat) param 'axis'"), std::string::npos) << e.what();
  }
  std::string unknown = good;
  unknown.replace(unknown.find(R"("op":"concat")"), 13, R"("op":"frobnicate")");
  try {
    Plan::from_json(unknown);
    FAIL() << "loaded";
  } catch (const PlanError& e) {
    EXPECT_EQ(std::string(e.what()),
              "plan: step '/cat' (frobnicate) is an op this runtime does not know; run it with the sabre that compiled it");
  }
}

TEST(StepParams, Window2dIsTheOneConvGeometry) {
  const auto w = Window2d::from_lists({3, 3, 3, 3}, {2, 2}, {1, 1});
  ASSERT_TRUE(w);
  EXPECT_TRUE(w->symmetric());
  EXPECT_EQ(w->out_extent(0, 224, 7), 112);
  const auto asym = Window2d::from_lists({2, 1, 0, 0}, {}, {});
  ASSERT_TRUE(asym);
  EXPECT_FALSE(asym->symmetric());
  EXPECT_EQ(asym->out_extent(0, 9, 3), 9);
  EXPECT_EQ(asym->out_extent(1, 9, 3), 8);
  EXPECT_FALSE(Window2d::from_lists({1, 1}, {1, 1}, {1, 1}));
}

// A native grouped conv's fused activation: absent is none; each name with its alpha and beta; a
// malformed one is a load error naming the step and the form it must take.
TEST(StepParams, DepthwiseActivation) {
  const std::string geometry = R"("n":1,"h":8,"w":8,"c":8,"r":3,"s":3,"p":8,"q":8)";
  auto load = [&](const std::string& extra) {
    return std::get<DepthwiseConvParams>(parse_step_params(
        StepKind::depthwise_conv, sabre::json::parse("{" + geometry + extra + "}"), where(StepKind::depthwise_conv)));
  };
  EXPECT_FALSE(load("").activation);
  DepthwiseConvParams p = load(R"(,"activation":{"op":"silu","alpha":1.5,"beta":0})");
  ASSERT_TRUE(p.activation);
  EXPECT_EQ(p.activation->op, sabre::native::ConvAct::silu);
  EXPECT_EQ(p.activation->alpha, 1.5);
  p = load(R"(,"activation":{"op":"hard_sigmoid"})");
  EXPECT_EQ(p.activation->op, sabre::native::ConvAct::hard_sigmoid);
  EXPECT_FALSE(p.activation->alpha);  // 1 when it runs
  for (const char* bad : {R"("silu")", R"({"op":"gelu"})", R"({"op":"none"})", R"({"op":"silu","alpha":"1"})"}) {
    const std::string e = load_error(StepKind::depthwise_conv, "{" + geometry + R"(,"activation":)" + bad + "}");
    EXPECT_NE(e.find("plan: step '/x' (depthwise_conv) param 'activation' must be {\"op\": silu|sigmoid|"),
              std::string::npos)
        << bad << ": " << e;
  }
}

// A chain's non-finite constants and bounds (ONNX Clip without min or max, a -inf mask constant)
// are written as "inf"/"-inf"/"nan" and read back: JSON has no infinity, and the null it would
// otherwise hold made such a plan fail to load ("malformed chain").
TEST(StepParams, ChainKeepsNonFiniteConstants) {
  sabre::native::ElementwiseChain c;
  c.inputs = {DType::f32};
  int clip = c.unary(sabre::native::EwOp::clip, c.input(0), -INFINITY, INFINITY);
  int low = c.binary(sabre::native::EwOp::add, clip, c.constant(-INFINITY, DType::f32));
  c.outputs = {c.binary(sabre::native::EwOp::add, low, c.constant(NAN, DType::f32))};
  const StepParams p = ElementwiseParams{.chain = c};
  const std::string text = to_json(p).dump();
  EXPECT_NE(text.find(R"("alpha":"-inf")"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("beta":"inf")"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("alpha":"nan")"), std::string::npos) << text;
  const StepParams back = reread(StepKind::elementwise, p);
  const auto& ch = std::get<ElementwiseParams>(back).chain;
  EXPECT_EQ(to_json(back).dump(), text);
  EXPECT_TRUE(std::isinf(ch.nodes[1].alpha) && ch.nodes[1].alpha < 0);
  EXPECT_TRUE(std::isinf(ch.nodes[1].beta) && ch.nodes[1].beta > 0);
  EXPECT_NE(load_error(StepKind::elementwise, R"({"chain":{"inputs":["f32"],"nodes":[{"op":"input","dtype":"f32","a":0},)"
                                              R"({"op":"constant","dtype":"f32","alpha":"big"}],"outputs":[1]}})")
                .find("not a number, inf, -inf or nan"),
            std::string::npos);
}
