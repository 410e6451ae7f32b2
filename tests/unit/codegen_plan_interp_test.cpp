// A CPU interpreter of runtime plans (host loops with each step op's semantics from docs/RUNTIME.md,
// values rounded to each tensor's dtype), run on the plan lowered from bert_tiny and compared with
// the reference executor on the original model: the numerical check of the lowering without a GPU.

#include <gtest/gtest.h>

#include <deque>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "backends/cutlass/conv_spec.h"
#include "backends/cutlass/patterns.h"
#include "backends/native/stem_conv.h"
#include "codegen/compile.h"
#include "codegen/lower.h"
#include "frontend/onnx/importer.h"
#include "ir/infer.h"
#include "ir/printer.h"
#include "partition/partitioner.h"
#include "reference/reference.h"
#include "runtime/resolve.h"
#include "transform/canonicalize.h"
#include "tune/conv_tune.h"

#include "plan_interp.h"

namespace sabre {
namespace {

namespace fs = std::filesystem;
using namespace plan_interp;

// Models exported from HuggingFace transformers (bench/models/export_hf.py writes them; too big
// to ship): SABRE_HF_MODELS=DIR runs DIR/bert_base.onnx and DIR/gpt2.onnx through the same check.
TEST(CodegenPlanInterp, HuggingFaceExportsMatchReference) {
  const char* dir = std::getenv("SABRE_HF_MODELS");
  if (!dir) GTEST_SKIP() << "set SABRE_HF_MODELS to the folder export_hf.py wrote";
  for (const char* m : {"bert_base", "gpt2"}) {
    std::string p = std::string(dir) + "/" + m + ".onnx";
    ASSERT_TRUE(fs::exists(p)) << p << " is missing: SABRE_HF_MODELS must name the folder export_hf.py wrote";
    SCOPED_TRACE(p);
    check_model(fs::absolute(p).string(), ir::DType::f16, 1e-2);
    // With attention fused: 12 attention steps, no permutes left (GPT-2's causal mask and the
    // Cast of its probabilities included), Q, K and V read in place from one projection (BERT's
    // three joined by merge_qkv, GPT-2's c_attn as exported), so no split step either.
    codegen::Lowered low;
    check_model(fs::absolute(p).string(), ir::DType::f16, 1e-2, true, &low);
    int attention = 0, permutes = 0, splits = 0, packed = 0;
    for (const auto& st : low.plan.steps) {
      attention += st.op == "attention", permutes += st.op == "permute", splits += st.op == "split";
      packed += st.op == "attention" && pj(st).get("offsets");
    }
    EXPECT_EQ(attention, 12);
    EXPECT_EQ(permutes, 0);
    EXPECT_EQ(splits, 0);
    EXPECT_EQ(packed, 12);
  }
}

// torchvision exports (bench/models/export_tv.py writes them): SABRE_TV_MODELS=DIR runs
// DIR/resnet50.onnx and DIR/mobilenet_v2.onnx (NHWC conv regions, depthwise convs) through the
// check, with the stem as im2col + GEMM (the default) and as one stem_conv step (--stem direct:
// ResNet-50's 7x7/2 with relu, MobileNetV2's 3x3/2 with relu6).
TEST(CodegenPlanInterp, TorchvisionExportsMatchReference) {
  const char* dir = std::getenv("SABRE_TV_MODELS");
  if (!dir) GTEST_SKIP() << "set SABRE_TV_MODELS to the folder export_tv.py wrote";
  // Both in f16: export_tv.py calibrates the BatchNorm variances, without which MobileNetV2's
  // activations underflow f16 (its docstring has the numbers).
  for (auto [m, dt, tol] : {std::tuple<const char*, ir::DType, double>{"resnet50", ir::DType::f16, 1e-2},
                            {"mobilenet_v2", ir::DType::f16, 1e-2}}) {
    std::string p = std::string(dir) + "/" + m + ".onnx";
    ASSERT_TRUE(fs::exists(p)) << p << " is missing: SABRE_TV_MODELS must name the folder export_tv.py wrote";
    const ir::Graph g = onnx_frontend::import_model(fs::absolute(p).string());
    for (codegen::Stem stem : {codegen::Stem::im2col, codegen::Stem::direct}) {
      const std::string name = p + " --stem " + std::string(codegen::stem_name(stem));
      SCOPED_TRACE(name);
      codegen::Lowered low;
      check_graph(name, g, dt, tol, &low, false, stem);
      EXPECT_EQ(count_steps(low.plan, "stem_conv"), stem == codegen::Stem::direct ? 1 : 0);
      EXPECT_EQ(count_steps(low.plan, "im2col"), stem == codegen::Stem::direct ? 0 : 1);
    }
  }
}

// The zoo's attention forms on the real exports (bench/zoo.py export writes them; too big to ship):
// SABRE_ZOO_MODELS=DIR runs DIR/onnx/NAME.onnx with attention fused against the reference, NAME from
// SABRE_ZOO_ATTENTION (comma-separated; default llama_gqa,clip_vit_b32,vit_b16), each attention
// layer one step (Llama's grouped-query heads after rotary and its causal mask included). Prints the
// plan's step count beside each output's error.
TEST(CodegenPlanInterp, ZooAttentionMatchesReference) {
  const char* dir = std::getenv("SABRE_ZOO_MODELS");
  if (!dir) GTEST_SKIP() << "set SABRE_ZOO_MODELS to the folder bench/zoo.py export wrote into";
  const char* names = std::getenv("SABRE_ZOO_ATTENTION");
  std::stringstream list(names ? names : "llama_gqa,clip_vit_b32,vit_b16");
  // Swin-T's 12 include its 5 shifted windows (bias + shift mask folded), Whisper's 1500 keys,
  // MobileViT-S's head dims 36/48/60.
  const std::map<std::string, int> layers = {{"llama_gqa", 4},        {"clip_vit_b32", 12}, {"vit_b16", 12},
                                             {"swin_t", 12},          {"bert_base", 12},    {"whisper_tiny_enc", 4},
                                             {"mobilevit_s", 9}};
  for (std::string m; std::getline(list, m, ',');) {
    const std::string p = std::string(dir) + "/onnx/" + m + ".onnx";
    ASSERT_TRUE(fs::exists(p)) << p << " is missing";
    SCOPED_TRACE(p);
    codegen::Lowered low;
    check_model(fs::absolute(p).string(), ir::DType::f16, 1e-2, true, &low);
    int attention = 0;
    for (const auto& st : low.plan.steps) attention += st.op == "attention";
    std::printf("%s: %zu steps, %d attention\n", m.c_str(), low.plan.steps.size(), attention);
    if (layers.count(m)) EXPECT_EQ(attention, layers.at(m)) << m;
  }
}

// --fuse-attention: bert_tiny's attention (head dim 32) becomes one step per layer, without the
// head permutes, reading Q, K and V in place from one joined projection GEMM (merge_qkv: one GEMM
// instead of three, no split step), and the plan still computes the model.
TEST(CodegenPlanInterp, BertTinyFusedAttentionMatchesReference) {
  codegen::Lowered plain, low;
  check_model("bert_tiny", ir::DType::f16, 4e-3, false, &plain);
  check_model("bert_tiny", ir::DType::f16, 4e-3, true, &low);
  int attention = 0, permutes = 0, softmax = 0, split = 0, gemms = 0, plain_gemms = 0;
  for (const auto& st : low.plan.steps) {
    attention += st.op == "attention";
    permutes += st.op == "permute";
    softmax += st.op == "softmax";
    split += st.op == "split";
    gemms += st.op == "gemm";
    if (st.op != "attention") continue;
    ASSERT_NE(pj(st).get("offsets"), nullptr) << st.name;
    EXPECT_EQ(st.inputs[0], st.inputs[1]) << "Q and K from one tensor";
    EXPECT_EQ(st.inputs[0], st.inputs[2]) << "Q and V from one tensor";
  }
  for (const auto& st : plain.plan.steps) plain_gemms += st.op == "gemm";
  EXPECT_EQ(attention, 2);
  EXPECT_EQ(permutes, 0);
  EXPECT_EQ(softmax, 0);
  EXPECT_EQ(split, 0);
  EXPECT_EQ(gemms, plain_gemms - 2 * 2 - 2 * 2) << "per layer: 3 projections joined, 2 batched GEMMs fused";
}

// transformers 5's mask, Where(Cast<bool>(attention_mask), 0, finfo(f32).min): the attention steps
// read the i64 mask (views of the input) and select the two values, so no step computes it; the
// plan still computes the model (random 0/1 masks: masking matters). bert_tiny's (1 - m) * -10000
// is not a select and keeps its step.
TEST(CodegenPlanInterp, BertTinyWhereMaskIsReadByTheAttention) {
  codegen::Lowered low, old_style;
  check_model("bert_tiny_where", ir::DType::f16, 4e-3, true, &low);
  int attention = 0, mask_steps = 0;
  for (const auto& st : low.plan.steps) {
    if (st.op == "elementwise")  // the pooler's Tanh is one; none reads the i64 mask
      for (int t : st.inputs) mask_steps += t >= 0 && low.plan.tensors[static_cast<size_t>(t)].dtype == ir::DType::i64;
    if (st.op != "attention") continue;
    ++attention;
    ASSERT_EQ(st.inputs.size(), 4u) << st.name;
    EXPECT_EQ(low.plan.tensors[static_cast<size_t>(st.inputs[3])].dtype, ir::DType::i64) << st.name;
    ASSERT_TRUE(pj(st).get("mask_true") && pj(st).get("mask_false")) << st.name;
    EXPECT_EQ(pj(st).get("mask_true")->num(), 0.0);
    EXPECT_EQ(pj(st).get("mask_false")->num(), double(std::numeric_limits<float>::lowest()));
  }
  EXPECT_EQ(attention, 2);
  EXPECT_EQ(mask_steps, 0) << "the mask's Where and casts ran as a step";
  check_model("bert_tiny", ir::DType::f16, 4e-3, true, &old_style);
  for (const auto& st : old_style.plan.steps) {
    if (st.op == "attention") {
      EXPECT_FALSE(pj(st).get("mask_true")) << st.name;
    }
  }
  // bf16 too (the select is the same; the plan's dtypes are not).
  check_model("bert_tiny_where", ir::DType::bf16, 2.5e-2, true);
}

// The fires_*.ir cases of a lowering pass's golden folder, parsed and typed, with their stems.
std::vector<std::pair<std::string, ir::Graph>> golden_fires_cases(const fs::path& dir) {
  std::vector<std::pair<std::string, ir::Graph>> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string stem = e.path().stem().string();
    if (e.path().extension() != ".ir" || stem.rfind("fires_", 0) != 0) continue;
    std::ifstream f(e.path());
    std::stringstream text;
    text << f.rdbuf();
    ir::Graph g = ir::parse_graph(text.str());
    ir::infer_types(g);
    out.emplace_back(stem, std::move(g));
  }
  return out;
}

// Attention as each exporter writes it (the fires cases of tests/golden/lower/fuse_attention: ViT/
// CLIP's double cast, Llama's grouped-query heads with rotary, SDPA's scale on Q and K, timm's
// gathered QKV, multi-query broadcast): one attention step each, and the plan computes what the
// graph does (the reference runs it unfused) at 7 queries and keys, in f16 and bf16.
TEST(CodegenPlanInterp, FusedAttentionFormsMatchReference) {
  transform::register_ops();
  const fs::path dir = fs::path(SABRE_SOURCE_DIR) / "tests" / "golden" / "lower" / "fuse_attention";
  int cases = 0;
  for (auto& [stem, g] : golden_fires_cases(dir)) {
    for (auto [dt, tol] : {std::pair{ir::DType::f16, 4e-3}, {ir::DType::bf16, 2.5e-2}}) {
      codegen::Lowered low;
      check_graph(stem, g, dt, tol, &low, true);
      int attention = 0;
      for (const auto& st : low.plan.steps) attention += st.op == "attention";
      EXPECT_EQ(attention, 1) << stem;
    }
    ++cases;
  }
  EXPECT_GE(cases, 6);
}

TEST(CodegenPlanInterp, BertTinyF16MatchesReference) { check_model("bert_tiny", ir::DType::f16, 4e-3); }
TEST(CodegenPlanInterp, BertTinyBf16MatchesReference) { check_model("bert_tiny", ir::DType::bf16, 2.5e-2); }
TEST(CodegenPlanInterp, Gpt2BlockF16MatchesReference) { check_model("gpt2_block", ir::DType::f16, 4e-3); }
// Its head dim is 16: fused since the kernel pads head dims (one attention step, causal).
TEST(CodegenPlanInterp, Gpt2BlockFusedHeadDim16MatchesReference) {
  codegen::Lowered low;
  check_model("gpt2_block", ir::DType::f16, 4e-3, true, &low);
  int attention = 0;
  for (const auto& st : low.plan.steps) attention += st.op == "attention";
  EXPECT_EQ(attention, 1);
}

// The elementwise ops issue 29 added (rotary Sin/Cos, Swin's Mod, MobileViT's Ceil, the rest of the
// math and activation ops) lower to fused elementwise chains, no other step, and compute what the
// reference does.
TEST(CodegenPlanInterp, Issue29ElementwiseOpsLowerToChains) {
  ir::Graph g;
  ir::Value* x = g.add_input("x", {ir::DType::f32, {ir::Dim::symbol("batch"), ir::Dim(4), ir::Dim(3), ir::Dim(5)}, true});
  auto c = [&](float v) { return g.add_constant("", ir::Tensor::scalar_f32(v)); };
  auto op = [&](const std::string& o, std::vector<ir::Value*> in, std::map<std::string, ir::AttrValue> a = {}) {
    return g.add_node(o, std::move(in), 1, std::move(a))->output(0);
  };
  auto sum = [&](std::vector<ir::Value*> v) {
    ir::Value* s = v[0];
    for (size_t i = 1; i < v.size(); ++i) s = op("Add", {s, v[i]});
    return s;
  };
  ir::Value* x3 = op("Mul", {x, c(3.f)});
  g.add_output(sum({op("Mul", {x, op("Cos", {x})}), op("Mul", {x3, op("Sin", {x})})}));
  g.add_output(sum({op("Mod", {op("Mul", {x, c(7.f)}), c(2.5f)}, {{"fmod", int64_t{1}}}),
                    op("Mod", {op("Mul", {x, c(7.f)}), c(-1.5f)}, {{"fmod", int64_t{1}}})}));
  g.add_output(sum({op("Ceil", {x3}), op("Floor", {x3}), op("Round", {x3}), op("Sign", {x})}));
  g.add_output(sum({op("Elu", {x3}, {{"alpha", 0.7}}), op("Selu", {x3}), op("Celu", {x3}, {{"alpha", 1.3}}),
                    op("Softplus", {x3}), op("Softsign", {x3}), op("Mish", {x3}),
                    op("ThresholdedRelu", {x}, {{"alpha", 0.2}}), op("Shrink", {x}, {{"lambd", 0.3}, {"bias", 0.1}})}));
  ir::Value* h = op("Mul", {x, c(0.5f)});
  g.add_output(sum({op("Tan", {x}), op("Asin", {h}), op("Acos", {h}), op("Atan", {x3}), op("Sinh", {x}),
                    op("Cosh", {x}), op("Asinh", {x3}), op("Acosh", {op("Add", {x, c(2.f)})}), op("Atanh", {h})}));
  // IsNaN of Log(x < 0), IsInf of 1/0 where Ceil(x) is 0: bool results selected by Where.
  ir::Value* nan_mask = op("IsNaN", {op("Log", {x})});
  ir::Value* inf_mask = op("IsInf", {op("Div", {c(1.f), op("Ceil", {x})})}, {{"detect_negative", int64_t{0}}});
  g.add_output(op("Add", {op("Where", {nan_mask, c(2.f), c(0.f)}), op("Where", {inf_mask, c(1.f), c(0.f)})}));
  std::vector<float> slope = {0.1f, -0.2f, 0.3f, 0.5f};
  g.add_output(op("PRelu", {x, g.add_constant("slope", ir::Tensor::from_f32(slope, {4, 1, 1}))}));
  ir::infer_types(g);
  codegen::Lowered low;
  check_graph("issue29_elementwise", g, ir::DType::f16, 5e-3, &low);
  for (const auto& s : low.plan.steps)
    EXPECT_TRUE(s.op == "elementwise" || s.op == "reshape" || s.name == "x.cast") << s.op << " step " << s.name;
}

// Each exporter's spelling of the activation after a depthwise conv (the fires cases of
// tests/golden/lower/fuse_depthwise_activation: SiLU in both operand orders, Swish with a scale,
// sigmoid, HardSwish, x·HardSigmoid(x), HardSigmoid, ReLU6) runs in the depthwise step (no
// elementwise step is left), and the plan computes what the graph does, in f16 and bf16.
TEST(CodegenPlanInterp, DepthwiseActivationFormsMatchReference) {
  transform::register_ops();
  const fs::path dir = fs::path(SABRE_SOURCE_DIR) / "tests" / "golden" / "lower" / "fuse_depthwise_activation";
  int cases = 0;
  for (auto& [stem, g] : golden_fires_cases(dir)) {
    for (auto [dt, tol] : {std::pair{ir::DType::f16, 4e-3}, {ir::DType::bf16, 2.5e-2}}) {
      codegen::Lowered low;
      check_graph(stem, g, dt, tol, &low);
      EXPECT_EQ(count_steps(low.plan, "depthwise_conv"), 1) << stem;
      EXPECT_EQ(count_steps(low.plan, "elementwise"), 0) << stem << ": the activation ran as a step";
    }
    ++cases;
  }
  EXPECT_GE(cases, 8);
}

// EfficientNet's MBConv block at toy size: expand 1x1 + SiLU, depthwise 3x3 + SiLU (in the step),
// squeeze-excite (pool, 1x1 + SiLU, 1x1 + sigmoid: GEMM epilogues), the scale, project 1x1 + x.
// The scale is the one elementwise step (fuse_se_scale: no GEMM kernel takes it as a prologue).
TEST(CodegenPlanInterp, SqueezeExciteBlockMatchesReference) {
  transform::register_ops();
  ir::Graph g = ir::parse_graph(R"(graph mbconv(%x: f32[batch,16,6,6]) -> (%y) {
    %we = const f32[32,16,1,1] @0101010101010101
    %be = const f32[32] @0202020202020202
    %wd = const f32[32,1,3,3] @0303030303030303
    %bd = const f32[32] @0404040404040404
    %w1 = const f32[8,32,1,1] @0505050505050505
    %b1 = const f32[8] @0606060606060606
    %w2 = const f32[32,8,1,1] @0707070707070707
    %b2 = const f32[32] @0808080808080808
    %wp = const f32[16,32,1,1] @0909090909090909
    %bp = const f32[16] @0a0a0a0a0a0a0a0a
    %e = Conv(%x, %we, %be) {kernel_shape=[1, 1]}
    %es = Sigmoid(%e)
    %ea = Mul(%e, %es)
    %d = Conv(%ea, %wd, %bd) {group=32, kernel_shape=[3, 3], pads=[1, 1, 1, 1]}
    %ds = Sigmoid(%d)
    %da = Mul(%ds, %d)
    %p = GlobalAveragePool(%da)
    %f1 = Conv(%p, %w1, %b1) {kernel_shape=[1, 1]}
    %f1s = Sigmoid(%f1)
    %f1a = Mul(%f1, %f1s)
    %f2 = Conv(%f1a, %w2, %b2) {kernel_shape=[1, 1]}
    %gate = Sigmoid(%f2)
    %m = Mul(%da, %gate)
    %pr = Conv(%m, %wp, %bp) {kernel_shape=[1, 1]}
    %y = Add(%pr, %x)
  })");
  ir::infer_types(g);
  codegen::Lowered low;
  check_graph("mbconv", g, ir::DType::f16, 4e-3, &low);
  EXPECT_EQ(count_steps(low.plan, "depthwise_conv"), 1);
  EXPECT_EQ(count_steps(low.plan, "elementwise"), 1) << "only the squeeze-excite scale";
  EXPECT_EQ(count_steps(low.plan, "gemm"), 4);
  for (const auto& st : low.plan.steps)
    if (st.op == "depthwise_conv") {
      const auto& p = st.as<runtime::DepthwiseConvParams>();
      ASSERT_TRUE(p.activation);
      EXPECT_EQ(p.activation->op, native::ConvAct::silu);
      EXPECT_FALSE(p.clamp);
    }
}

// The zoo's CNNs on the real exports (bench/zoo.py export writes them): SABRE_ZOO_MODELS=DIR runs
// DIR/onnx/NAME.onnx against the reference, NAME from SABRE_ZOO_CNN (comma-separated; default
// efficientnet_b0,regnet_y_400mf,mobilenet_v2): depthwise activations fused, squeeze-excite scales.
// RegNetY-400MF with random weights is ill-conditioned in f16 (bench/models/zoo_models.py: PyTorch's
// own fp16 output is far from its fp32), so it gets a wider tolerance than the others.
TEST(CodegenPlanInterp, ZooConvNetsMatchReference) {
  const char* dir = std::getenv("SABRE_ZOO_MODELS");
  if (!dir) GTEST_SKIP() << "set SABRE_ZOO_MODELS to the folder bench/zoo.py export wrote into";
  const char* names = std::getenv("SABRE_ZOO_CNN");
  std::stringstream list(names ? names : "efficientnet_b0,regnet_y_400mf,mobilenet_v2");
  for (std::string m; std::getline(list, m, ',');) {
    const std::string p = std::string(dir) + "/onnx/" + m + ".onnx";
    ASSERT_TRUE(fs::exists(p)) << p << " is missing";
    SCOPED_TRACE(p);
    codegen::Lowered low;
    check_model(fs::absolute(p).string(), ir::DType::f16, m == "regnet_y_400mf" ? 5e-2 : 1e-2, false, &low);
    std::printf("%s: %zu steps, %d elementwise, %d depthwise_conv\n", m.c_str(), low.plan.steps.size(),
                count_steps(low.plan, "elementwise"), count_steps(low.plan, "depthwise_conv"));
  }
}

// A chain's non-finite constants and bounds (a -inf where-mask constant, a Clip without max) reach
// the plan as "-inf"/"inf" (JSON has no infinity; step_params.cpp reads them back): the interpreter
// reads them the same way, and the plan computes what the graph does.
TEST(CodegenPlanInterp, ElementwiseChainNonFiniteConstantsMatchReference) {
  ir::Graph g;
  g.name = "non_finite_chain";
  ir::Value* x = g.add_input("x", {ir::DType::f32, {ir::Dim::symbol("batch"), ir::Dim(16)}, true});
  auto scalar = [&](const char* n, float v) { return g.add_constant(n, ir::Tensor::from_f32({v}, {})); };
  ir::Value* keep = g.add_node("Greater", {x, scalar("thirty", 30.0f)}, 1, {}, "keep")->output(0);
  ir::Value* shifted = g.add_node("Sub", {x, scalar("forty", 40.0f)}, 1, {}, "shift")->output(0);
  ir::Value* masked = g.add_node("Where", {keep, shifted, scalar("neg_inf", -INFINITY)}, 1, {}, "mask")->output(0);
  g.add_output(g.add_node("Sigmoid", {masked}, 1, {}, "gate")->output(0));
  g.add_output(g.add_node("Clip", {shifted, scalar("low", -2.0f)}, 1, {}, "floor")->output(0));
  ir::infer_types(g);
  codegen::Lowered low;
  check_graph("non_finite_chain", g, ir::DType::f16, 4e-3, &low);
  std::string chains;
  for (const auto& s : low.plan.steps)
    if (s.op == "elementwise") chains += pj(s).dump();
  EXPECT_NE(chains.find(R"("alpha":"-inf")"), std::string::npos) << chains;
  EXPECT_NE(chains.find(R"("beta":"inf")"), std::string::npos) << chains;
}

// The data movement, reduction and normalization ops issue 29 lowers onto existing step kinds:
// DepthToSpace (both modes), SpaceToDepth and Tile as one strided_copy each, GlobalMaxPool and
// the L1/L2/LogSum/LogSumExp reductions and ArgMax/ArgMin as reduce steps, LogSoftmax as a softmax step, and Xor,
// Mean and CastLike inside elementwise chains, GatherElements, Trilu and CumSum on their own native
// steps. Each computes what the reference does.
TEST(CodegenPlanInterp, Issue29MovementAndReductionOpsLowerOntoExistingSteps) {
  ir::Graph g;
  ir::Value* x = g.add_input("x", {ir::DType::f32, {ir::Dim::symbol("batch"), ir::Dim(8), ir::Dim(4), ir::Dim(6)}, true});
  auto op = [&](const std::string& o, std::vector<ir::Value*> in, std::map<std::string, ir::AttrValue> a = {}) {
    return g.add_node(o, std::move(in), 1, std::move(a))->output(0);
  };
  auto ints = [&](std::vector<int64_t> v) {
    return g.add_constant("", ir::Tensor::from_i64(v, {static_cast<int64_t>(v.size())}));
  };
  g.add_output(op("DepthToSpace", {x}, {{"blocksize", int64_t{2}}}));
  g.add_output(op("DepthToSpace", {x}, {{"blocksize", int64_t{2}}, {"mode", std::string("CRD")}}));
  g.add_output(op("SpaceToDepth", {x}, {{"blocksize", int64_t{2}}}));
  g.add_output(op("Tile", {x, ints({1, 2, 1, 3})}));
  g.add_output(op("GlobalMaxPool", {x}));
  g.add_output(op("ReduceL1", {x, ints({1, 3})}, {{"keepdims", int64_t{0}}}));
  g.add_output(op("ReduceL2", {x, ints({2})}));
  ir::Value* pos = op("Add", {op("Mul", {x, x}), g.add_constant("", ir::Tensor::scalar_f32(0.5f))});
  g.add_output(op("ReduceLogSum", {pos, ints({3})}));
  g.add_output(op("ReduceLogSumExp", {x, ints({1, 2})}, {{"keepdims", int64_t{0}}}));
  g.add_output(op("LogSoftmax", {x}, {{"axis", int64_t{-1}}}));
  g.add_output(op("LogSoftmax", {x}, {{"axis", int64_t{0}}}));  // other axes: permuted around the step
  g.add_output(op("Softmax", {x}, {{"axis", int64_t{1}}}));
  // Ties: x's values are multiples of 1e-3, so an axis of 8 often repeats one.
  ir::Value* xr = op("Round", {op("Mul", {x, g.add_constant("", ir::Tensor::scalar_f32(3.f))})});
  g.add_output(op("ArgMax", {xr}, {{"axis", int64_t{1}}}));
  g.add_output(op("ArgMin", {xr}, {{"axis", int64_t{-1}}, {"keepdims", int64_t{0}}, {"select_last_index", int64_t{1}}}));
  ir::Value* zero = g.add_constant("", ir::Tensor::scalar_f32(0.f));
  ir::Value* y = op("Sin", {x});
  g.add_output(op("Where", {op("Xor", {op("Greater", {x, zero}), op("Greater", {y, zero})}), x, y}));
  g.add_output(op("Mean", {x, y, op("Cos", {x})}));
  // GatherElements with indices computed in the graph (negative ones too), Trilu both ways, CumSum.
  ir::Value* idx = op("Cast", {xr}, {{"to", std::string("i64")}});  // in [-3, 3] on an axis of 4
  g.add_output(op("GatherElements", {x, idx}, {{"axis", int64_t{2}}}));
  g.add_output(op("Trilu", {x, g.add_constant("", ir::Tensor::from_i64({-1}, {}))}, {{"upper", int64_t{0}}}));
  g.add_output(op("Trilu", {x, g.add_constant("", ir::Tensor::from_i64({2}, {}))}));
  g.add_output(op("CumSum", {x, g.add_constant("", ir::Tensor::from_i64({-1}, {}))}));
  g.add_output(op("CumSum", {x, g.add_constant("", ir::Tensor::from_i64({1}, {}))},
                  {{"exclusive", int64_t{1}}, {"reverse", int64_t{1}}}));
  g.add_output(op("CastLike", {op("Mul", {x, g.add_constant("", ir::Tensor::scalar_f32(3.f))}),
                               g.add_constant("", ir::Tensor::from_i64({0}, {1}))}));
  ir::infer_types(g);
  codegen::Lowered low;
  check_graph("issue29_movement_reductions", g, ir::DType::f16, 5e-3, &low);
  std::map<std::string, int> kinds;
  for (const auto& s : low.plan.steps) ++kinds[s.op];
  EXPECT_EQ(kinds["strided_copy"], 4);
  EXPECT_EQ(kinds["reduce"], 7);
  EXPECT_EQ(kinds["softmax"], 3);
  EXPECT_EQ(kinds["gather_elements"], 1);
  EXPECT_EQ(kinds["trilu"], 2);
  EXPECT_EQ(kinds["cumsum"], 2);
}

}  // namespace
}  // namespace sabre
