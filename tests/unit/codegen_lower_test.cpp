// Lowering partitioned models to runtime plans, and the plan-only compile driver (CPU only: no
// kernel is compiled here).
#include <gtest/gtest.h>

#include <deque>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <algorithm>
#include <set>
#include <utility>

#include "backends/cutlass/conv_sm90.h"
#include "backends/cutlass/conv_spec.h"
#include "backends/cutlass/kernel_spec.h"
#include "backends/cutlass/patterns.h"
#include "codegen/compile.h"
#include "codegen/lower.h"
#include "ir/infer.h"
#include "frontend/onnx/importer.h"
#include "partition/partitioner.h"
#include "runtime/artifact.h"
#include "runtime/resolve.h"
#include "transform/canonicalize.h"
#include "tune/db.h"
#include "tune/profiler.h"
#include "tune/rank.h"
#include "tune/select.h"

namespace sabre {
namespace {
// A step's params as the plan writes them; kept alive for the whole test run, so pointers into
// them stay valid.
[[maybe_unused]] const sabre::json::Value& pj(const sabre::runtime::Step& s) {
  static std::deque<sabre::json::Value> keep;
  keep.push_back(s.params_json());
  return keep.back();
}

namespace fs = std::filesystem;

std::string model_path(const std::string& name) {
  for (const std::string& dir : {std::string(SABRE_SOURCE_DIR) + "/models", std::string(SABRE_BINARY_DIR) + "/models"}) {
    std::string p = dir + "/" + name + ".onnx";
    if (fs::exists(p)) return p;
  }
  return "";
}

ir::Graph partitioned(const std::string& name) {
  std::string p = model_path(name);
  if (p.empty()) throw std::runtime_error(name + ".onnx not found: build the models target");
  ir::Graph g = transform::canonicalize(onnx_frontend::import_model(p));
  return partition::partition(std::move(g), cutlass_backend::pattern_table()).graph;
}

codegen::LowerOptions options(ir::DType dt = ir::DType::f16) {
  codegen::LowerOptions o;
  o.dtype = dt;
  o.ranges = codegen::parse_dynamic("batch=1..8,seq=1..128");
  o.pick = [](const tune::GemmProblem& p) { return tune::pick_kernels(p, tune::PickOptions{}); };
  return o;
}

int count_ops(const ir::Graph& g, const std::string& op) {
  int n = 0;
  for (const ir::Node* x : g.nodes()) n += x->op() == op;
  return n;
}

std::vector<const runtime::Step*> steps_of(const runtime::Plan& p, const std::string& op) {
  std::vector<const runtime::Step*> v;
  for (const auto& s : p.steps)
    if (s.op == op) v.push_back(&s);
  return v;
}

TEST(CodegenLower, BertTinyF16PlanValidatesAndFuses) {
  ir::Graph g = partitioned("bert_tiny");
  codegen::Lowered low = codegen::lower(g, options());
  const runtime::Plan& plan = low.plan;
  // Round trip through JSON validates ids, kinds and dims.
  runtime::Plan back = runtime::Plan::from_json(plan.to_json());
  EXPECT_EQ(back.steps.size(), plan.steps.size());
  EXPECT_EQ(back.to_json(), plan.to_json());

  // Every GEMM region is one gemm step with a dispatch table of known kernels.
  auto gemms = steps_of(plan, "gemm");
  EXPECT_EQ(static_cast<int>(gemms.size()), count_ops(g, "Composite"));
  int gelu_epilogues = 0;
  for (const auto* s : gemms) {
    const json::Value* d = pj(*s).get("dispatch");
    ASSERT_TRUE(d && d->is_array() && !d->arr().empty()) << s->name;
    EXPECT_EQ(d->arr().back().get("max_m")->num(), -1) << s->name;
    for (const auto& e : d->arr()) EXPECT_TRUE(cutlass_backend::parse_kernel_name(e.get("kernel")->str())) << e.dump();
    EXPECT_EQ(pj(*s).get("dtype")->str(), "f16");
    gelu_epilogues += pj(*s).get("epilogue")->str() == "bias_gelu";
  }
  EXPECT_EQ(gelu_epilogues, 2);
  EXPECT_FALSE(low.gemm_kernels.empty());

  // Softmax absorbed the 1/sqrt(d) scale and the additive mask; LayerNorm its residual Add.
  auto sm = steps_of(plan, "softmax");
  ASSERT_EQ(static_cast<int>(sm.size()), count_ops(g, "Softmax"));
  for (const auto* s : sm) {
    EXPECT_EQ(s->inputs.size(), 2u) << "mask not fused into " << s->name;
    EXPECT_NEAR(pj(*s).get("scale")->num(), 1.0 / std::sqrt(32.0), 1e-6);
  }
  auto ln = steps_of(plan, "layernorm");
  ASSERT_EQ(static_cast<int>(ln.size()), count_ops(g, "LayerNormalization") - 1);
  // The embeddings (word + token type + position Gathers, two Adds, a LayerNorm) are one
  // embed_layernorm step: the input ids [batch, seq]; the position ids, a Slice of a constant
  // [1, 64] buffer (stride 0 over the batch); the token type ids, an Expand to [batch, seq] of a
  // Slice of another such buffer. Here seq reaches 128, past the buffers, so the Slices (whose ends
  // clamp) and the Expand still run and the step reads their outputs.
  auto emb = steps_of(plan, "embed_layernorm");
  ASSERT_EQ(emb.size(), 1u);
  EXPECT_EQ(emb[0]->inputs.size(), 2u + 2 * 3);
  EXPECT_EQ(pj(*emb[0]).get("row_dims")->dump(), R"(["batch","seq"])");
  EXPECT_EQ(pj(*emb[0]).get("offsets")->dump(), R"(["0","0","0"])");
  EXPECT_EQ(pj(*emb[0]).get("strides")->dump(), R"(["seq","1","0","1","seq","1"])");
  EXPECT_EQ(plan.tensors[emb[0]->inputs[3]].kind, runtime::TensorKind::input);
  EXPECT_EQ(steps_of(plan, "slice").size(), 2u);
  EXPECT_EQ(steps_of(plan, "strided_copy").size(), 1u);
  // The pooler's GEMM reads the [CLS] rows in place (row 0 of each [seq, 64] matrix): no gather.
  EXPECT_TRUE(steps_of(plan, "gather").empty());
  int in_place_rows = 0;
  for (const auto* s : steps_of(plan, "gemm"))
    if (pj(*s).get("lda")->str() == "64*seq") {
      ++in_place_rows;
      EXPECT_EQ(pj(*s).get("a_offset")->str(), "0");
      EXPECT_EQ(pj(*s).get("m")->str(), "batch");
    }
  EXPECT_EQ(in_place_rows, 1);
  // With seq at most 64 every id is read in place: the buffers are weights, no view runs.
  {
    codegen::LowerOptions o = options();
    o.ranges = codegen::parse_dynamic("batch=1..8,seq=1..64");
    codegen::Lowered in_place = codegen::lower(g, o);
    auto e = steps_of(in_place.plan, "embed_layernorm");
    ASSERT_EQ(e.size(), 1u);
    EXPECT_EQ(pj(*e[0]).get("strides")->dump(), R"(["seq","1","0","1","0","1"])");
    for (size_t t : {5u, 7u}) {
      EXPECT_EQ(in_place.plan.tensors[e[0]->inputs[t]].kind, runtime::TensorKind::weight);
      EXPECT_EQ(in_place.plan.tensors[e[0]->inputs[t]].dtype, ir::DType::i64);
    }
    for (const char* op : {"gather", "slice", "strided_copy"}) EXPECT_TRUE(steps_of(in_place.plan, op).empty()) << op;
  }

  // No standalone GELU, Div or Softmax-feeding Add survives; the mask chain Cast/Sub/Mul is one step.
  bool mask_chain = false;
  for (const auto* s : steps_of(plan, "elementwise")) {
    for (const auto& nd : pj(*s).get("chain")->get("nodes")->arr()) {
      EXPECT_NE(nd.get("op")->str(), "gelu_erf") << s->name;
      EXPECT_NE(nd.get("op")->str(), "erf") << s->name;
    }
    mask_chain |= pj(*s).get("chain")->get("nodes")->arr().size() >= 5 && s->name.find("fused") != std::string::npos;
    ASSERT_TRUE(pj(*s).get("kernel"));
  }
  EXPECT_TRUE(mask_chain);
  EXPECT_FALSE(low.ew_kernels.empty());
  for (const auto& k : low.ew_kernels) EXPECT_NE(k.source.find(k.name), std::string::npos);

  // Weights: compute dtype only (no f32 left), 256-aligned, inside the blob. Integer inputs stay.
  for (const auto& t : plan.tensors) {
    if (t.kind == runtime::TensorKind::weight) {
      EXPECT_NE(t.dtype, ir::DType::f32) << t.name;
      EXPECT_EQ(t.weight_offset % 256, 0u) << t.name;
      EXPECT_LE(t.weight_offset + t.weight_bytes, low.weights.size()) << t.name;
    }
    if (t.kind == runtime::TensorKind::activation) {
      EXPECT_NE(t.dtype, ir::DType::f32) << t.name;
    }
  }
  ASSERT_EQ(plan.inputs.size(), 2u);
  for (int i : plan.inputs) EXPECT_EQ(plan.tensors[i].dtype, ir::DType::i64);
  ASSERT_EQ(plan.outputs.size(), 2u);
  for (int o : plan.outputs) EXPECT_EQ(plan.tensors[o].dtype, ir::DType::f32);  // the model's dtype, via a cast
  EXPECT_EQ(steps_of(plan, "cast").size(), 2u);
  // Shape subgraphs left nothing behind.
  for (const auto& s : plan.steps) EXPECT_EQ(s.name.find("Shape"), std::string::npos) << s.name;

  // Every step reads only tensors written earlier (or inputs/weights).
  std::vector<bool> ready(plan.tensors.size(), false);
  for (size_t i = 0; i < plan.tensors.size(); ++i)
    ready[i] = plan.tensors[i].kind == runtime::TensorKind::input || plan.tensors[i].kind == runtime::TensorKind::weight;
  for (const auto& s : plan.steps) {
    for (int t : s.inputs) EXPECT_TRUE(t == -1 || ready[t]) << s.name << " reads " << plan.tensors[t].name;
    for (int t : s.outputs) ready[t] = true;
  }
  for (int o : plan.outputs) EXPECT_TRUE(ready[o]);
}

TEST(CodegenLower, Bf16KeepsNoF32Weights) {
  codegen::Lowered low = codegen::lower(partitioned("bert_tiny"), options(ir::DType::bf16));
  int checked = 0;
  for (const auto& t : low.plan.tensors) {
    if (t.kind != runtime::TensorKind::weight) continue;
    EXPECT_NE(t.dtype, ir::DType::f32) << t.name;
    if (t.name.find("weight") != std::string::npos) {
      EXPECT_EQ(t.dtype, ir::DType::bf16) << t.name;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 8) << "bert_tiny's tensors named *weight: 3 embedding tables, 5 LayerNorm scales";
}

// LowerOptions::weights off (the collecting lowering of sabre compile and sabre tune): the same
// plan, the same weight offsets, sizes and dtypes, and no blob.
TEST(CodegenLower, WithoutWeightsLaysOutTheSamePlan) {
  const ir::Graph g = partitioned("bert_tiny");
  codegen::Lowered full = codegen::lower(g, options());
  codegen::LowerOptions o = options();
  o.weights = false;
  codegen::Lowered bare = codegen::lower(g, o);
  EXPECT_FALSE(full.weights.empty());
  EXPECT_TRUE(bare.weights.empty());
  EXPECT_EQ(full.plan.to_json(), bare.plan.to_json());
}

// tuned_gemm_problems is what sabre compile tunes and what sabre tune collects: bert_tiny's
// attention GEMMs (batched, symbolic N) are among them unless attention is fused.
TEST(CodegenLower, TunedGemmProblemsFollowTheFusion) {
  const ir::Graph g = partitioned("bert_tiny");
  auto batched = [](const std::vector<tune::GemmProblem>& ps) {
    int n = 0;
    for (const auto& p : ps) n += p.batch > 1;
    return n;
  };
  codegen::LowerOptions o = options();
  std::vector<tune::GemmProblem> plain = codegen::tuned_gemm_problems(g, o, 90);
  o.fuse_attention = true;
  std::vector<tune::GemmProblem> fused = codegen::tuned_gemm_problems(g, o, 90);
  EXPECT_EQ(batched(plain), 2) << "Q·Kᵀ and P·V";
  EXPECT_EQ(batched(fused), 0);
  EXPECT_EQ(plain.size(), fused.size() + 2);
  for (const auto& p : plain) EXPECT_GT(p.alignment, 1) << tune::workload_key(p, p.m_max);
}

// gpu_route (what `sabre partition` prints under each left-out GEMM or conv): a depthwise Conv runs
// on the native depthwise kernel, a grouped Conv with two channels per group on the native grouped
// one; a grouped Conv whose channel count is symbolic, a dense Conv the table left out and a MatMul
// have no path.
TEST(CodegenLower, GpuRouteOfLeftOutNodes) {
  ir::Graph g;
  const int64_t C = 8;
  ir::Value* x = g.add_input("x", {ir::DType::f32, {ir::Dim::symbol("batch"), ir::Dim(C), ir::Dim(6), ir::Dim(6)}, true});
  auto weight = [&](const std::string& name, std::vector<int64_t> dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.01f * static_cast<float>(i % 17) - 0.08f;
    return g.add_constant(name, ir::Tensor::from_f32(v, dims));
  };
  std::map<std::string, ir::AttrValue> attrs = {{"kernel_shape", std::vector<int64_t>{3, 3}},
                                                 {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  auto conv = [&](const std::string& name, int64_t group) {
    auto a = attrs;
    a["group"] = group;
    return g.add_node("Conv", {x, weight(name + ".w", {C, C / group, 3, 3})}, 1, a, name);
  };
  const ir::Node* depthwise = conv("dw", C);
  const ir::Node* grouped = conv("g2", 4);
  const ir::Node* dense = conv("dense", 1);
  auto b = attrs;
  b["group"] = int64_t(2);  // channels known only at run time: the kernel's channel split is not fixed
  ir::Value* xs = g.add_input("xs", {ir::DType::f32, {ir::Dim::symbol("batch"), ir::Dim::symbol("ch"), ir::Dim(6), ir::Dim(6)}, true});
  const ir::Node* unsized = g.add_node("Conv", {xs, weight("u.w", {8, 4, 3, 3})}, 1, b, "unsized");
  const ir::Node* mm = g.add_node("MatMul", {x, weight("m.w", {6, 6})}, 1, {}, "mm");
  ir::infer_types(g);
  std::string why;
  EXPECT_NE(codegen::gpu_route(*depthwise, &why).find("native NHWC depthwise kernel"), std::string::npos);
  EXPECT_NE(codegen::gpu_route(*grouped, &why).find("native NHWC grouped-conv kernel"), std::string::npos);
  EXPECT_EQ(codegen::gpu_route(*unsized, &why), "");
  EXPECT_NE(why.find("input channel count must be static"), std::string::npos) << why;
  EXPECT_EQ(codegen::gpu_route(*dense, &why), "");
  EXPECT_NE(why.find("no GPU path outside the regions"), std::string::npos) << why;
  EXPECT_EQ(codegen::gpu_route(*mm, &why), "");
  EXPECT_NE(why.find("no GPU path outside the regions"), std::string::npos) << why;
}

TEST(CodegenLower, DefaultRangesAreReported) {
  auto o = options();
  o.ranges.clear();
  codegen::Lowered low = codegen::lower(partitioned("bert_tiny"), o);
  ASSERT_EQ(low.notes.size(), 1u);
  EXPECT_NE(low.notes[0].find("batch=1..64"), std::string::npos) << low.notes[0];
  EXPECT_EQ(low.plan.symbols.size(), 2u);
}

TEST(CodegenLower, ConvIsAClearUnsupportedError) {
  try {
    auto o = options();
    o.ranges.clear();
    codegen::lower(partitioned("resnet_block"), o);
    FAIL() << "resnet_block lowered";
  } catch (const codegen::UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("conv offload is not implemented yet (issue 7)"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("MaxPool"), std::string::npos) << "pooling lowers: " << e.what();
    EXPECT_EQ(std::string(e.what()).find("GlobalAveragePool"), std::string::npos) << "pooling lowers: " << e.what();
  }
}

// The conv picker `sabre compile` uses: catalog names (conv_spec.h), the widest alignment C and K
// allow, tiles and split-K by the model (few output tiles: split; many: none); refusals say why.
TEST(CodegenLower, AnalyticConvKernelPicksCatalogNames) {
  codegen::ConvProblem p;
  p.dtype = "f16";
  p.epilogue = "bias_relu";
  p.n = 8, p.h = p.w = p.p = p.q = 32, p.c = p.k = 16, p.r = p.s = 3, p.pad_h = p.pad_w = 1;
  p.alignment = 8;
  std::string name = codegen::analytic_conv_kernel(p, 90, codegen::ConvKernels::sm80);
  auto spec = cutlass_backend::parse_conv_kernel_name(name);
  ASSERT_TRUE(spec) << name;
  EXPECT_EQ(spec->config.alignment, 8) << name;
  EXPECT_EQ(spec->config.tile.n, 64) << name;  // 16 output channels: the narrowest tile
  EXPECT_EQ(cutlass_backend::epilogue_name(spec->epi), "bias_relu") << name;
  // ResNet-50's last 3x3 layer: at batch 1 (M = 49) a few output tiles over K = 4608 leave most of
  // the 132 SMs idle, so the pick splits K; at batch 256 the tiles fill the GPU and nothing splits.
  codegen::ConvProblem deep = p;
  deep.n = 1, deep.h = deep.w = deep.p = deep.q = 7, deep.c = deep.k = 512;
  for (const char* epi : {"bias_relu", "bias_res_relu"}) {
    deep.epilogue = epi;
    name = codegen::analytic_conv_kernel(deep, 90, codegen::ConvKernels::sm80);
    spec = cutlass_backend::parse_conv_kernel_name(name);
    ASSERT_TRUE(spec) << name;
    EXPECT_GT(spec->config.split_k, 1) << name;
    EXPECT_FALSE(cutlass_backend::conv_unsupported_reason(*spec, 90)) << name;
  }
  deep.n = 256;
  spec = cutlass_backend::parse_conv_kernel_name(codegen::analytic_conv_kernel(deep, 90, codegen::ConvKernels::sm80));
  ASSERT_TRUE(spec);
  EXPECT_EQ(spec->config.split_k, 1);
  EXPECT_EQ(spec->config.tile.m, 128);
  // The sm90 family: on an sm 90 target at batch 256 the model prefers its TMA/wgmma kernels (the
  // mma.sync ones reach ~0.6 of the peak there); never on sm 80; --conv-kernels sm90 insists where
  // C and K allow (multiples of 8) and falls back to sm80 where they do not.
  name = codegen::analytic_conv_kernel(deep, 90);
  EXPECT_TRUE(cutlass_backend::parse_sm90_conv_kernel_name(name)) << name;
  EXPECT_TRUE(cutlass_backend::parse_conv_kernel_name(codegen::analytic_conv_kernel(deep, 80)));
  EXPECT_TRUE(cutlass_backend::parse_sm90_conv_kernel_name(codegen::analytic_conv_kernel(deep, 90, codegen::ConvKernels::sm90)));
  codegen::ConvProblem odd = deep;
  odd.c = 6, odd.alignment = 2;
  name = codegen::analytic_conv_kernel(odd, 90, codegen::ConvKernels::sm90);
  EXPECT_TRUE(cutlass_backend::parse_conv_kernel_name(name)) << name;
  deep.n = 1;
  deep.epilogue = "relu";  // no bias: serial slices would have no source to add into; parallel ones split
  spec = cutlass_backend::parse_conv_kernel_name(codegen::analytic_conv_kernel(deep, 90, codegen::ConvKernels::sm80));
  ASSERT_TRUE(spec);
  EXPECT_GT(spec->config.split_k, 1);
  EXPECT_EQ(spec->config.split_mode, cutlass_backend::ConvSplitK::parallel);
  p.k = 256;
  p.epilogue = "bias_res_relu";
  spec = cutlass_backend::parse_conv_kernel_name(codegen::analytic_conv_kernel(p, 90, codegen::ConvKernels::sm80));
  ASSERT_TRUE(spec);
  EXPECT_GE(spec->config.tile.m, 128);  // M = 8192: large tiles (C = 16: few_channels 256x64)
  p.c = 3;  // an RGB stem: C allows alignment 1
  p.alignment = 1;
  spec = cutlass_backend::parse_conv_kernel_name(codegen::analytic_conv_kernel(p, 90));
  ASSERT_TRUE(spec);
  EXPECT_EQ(spec->config.alignment, 1);
  p.alignment = 8;
  p.groups = 2;
  EXPECT_THROW(codegen::analytic_conv_kernel(p, 90), std::invalid_argument);  // 2 does not divide c = 3
  p.c = 64;  // two groups of 32 in and 128 out: a grouped kernel (which has no residual epilogue)
  EXPECT_THROW(codegen::analytic_conv_kernel(p, 90), std::invalid_argument);
  p.epilogue = "bias_relu";
  spec = cutlass_backend::parse_conv_kernel_name(codegen::analytic_conv_kernel(p, 90));
  ASSERT_TRUE(spec);
  EXPECT_TRUE(spec->config.grouped);
  p.c = 3;
  p.groups = 1;
  p.epilogue = "bias_gelu";  // patterns fuse it, conv kernels are not generated with it
  try {
    codegen::analytic_conv_kernel(p, 90);
    FAIL() << "bias_gelu conv picked";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("bias_gelu"), std::string::npos) << e.what();
  }
}

// With the analytic conv picker (as `sabre compile` runs it) the whole resnet_block lowers: its
// convs on the analytic conv kernels, its 10-class FC head (N=10) on alignment-2 GEMM fallbacks.
TEST(CodegenLower, ResnetBlockConvsLowerWithTheAnalyticPicker) {
  auto o = options();
  o.ranges = codegen::parse_dynamic("batch=1..8");
  o.pick_conv = [](const codegen::ConvProblem& p) { return codegen::analytic_conv_kernel(p, 90); };
  codegen::Lowered low = codegen::lower(partitioned("resnet_block"), o);
  ASSERT_FALSE(low.conv_kernels.empty());
  ASSERT_EQ(low.gemm_kernels.size(), 1u);
  EXPECT_NE(low.gemm_kernels[0].find("_a2_"), std::string::npos) << low.gemm_kernels[0];
  // Each conv step's table, read at M = n·p·q as the runtime reads it, gives the picker's kernel for
  // that batch's bucket (powers of two up to 8); entries ascend and the last covers any M.
  int convs = 0;
  for (const runtime::Step& st : low.plan.steps) {
    if (st.op != "conv") continue;
    ++convs;
    const auto& disp = pj(st).get("dispatch")->arr();
    ASSERT_FALSE(disp.empty()) << st.name;
    EXPECT_EQ(disp.back().get("max_m")->num(), -1) << st.name;
    for (size_t i = 1; i + 1 < disp.size(); ++i)
      EXPECT_LT(disp[i - 1].get("max_m")->num(), disp[i].get("max_m")->num()) << st.name;
    codegen::ConvProblem cp;
    cp.dtype = pj(st).get("dtype")->str();
    cp.epilogue = pj(st).get("epilogue")->str();
    auto num = [&](const char* key) { return std::stoll(pj(st).get(key)->str()); };  // static dims, as text
    cp.h = num("h"), cp.w = num("w"), cp.c = num("c"), cp.k = num("k"), cp.r = num("r"), cp.s = num("s");
    cp.p = num("p"), cp.q = num("q");
    const auto& pads = pj(st).get("pads")->arr();
    const auto& strides = pj(st).get("strides")->arr();
    cp.pad_h = static_cast<int64_t>(pads[0].num()), cp.pad_w = static_cast<int64_t>(pads[1].num());
    cp.stride_h = static_cast<int64_t>(strides[0].num()), cp.stride_w = static_cast<int64_t>(strides[1].num());
    cp.alignment = 8;  // 16 bytes of f16, halved until it divides both channel counts
    while (cp.c % cp.alignment || cp.k % cp.alignment) cp.alignment /= 2;
    for (int64_t n = 1; n <= 8; ++n) {
      int64_t bucket = 1;
      while (bucket < n) bucket *= 2;
      cp.n = bucket;
      EXPECT_EQ(runtime::select_gemm_kernel(st, n * cp.p * cp.q), codegen::analytic_conv_kernel(cp, 90))
          << st.name << " at batch " << n;
    }
  }
  EXPECT_GT(convs, 0);
}

TEST(CodegenLower, UnsupportedOpsAreListedAtOnce) {
  ir::Graph g;
  ir::Shape sh = {ir::Dim::symbol("batch"), ir::Dim(8)};
  ir::Value* x = g.add_input("x", {ir::DType::f32, sh, true});
  ir::Node* a = g.add_node("Hardmax", {x}, 1, {}, "hm0");
  a->output(0)->set_type(ir::DType::f32, sh);
  ir::Node* b = g.add_node("Hardmax", {a->output(0)}, 1, {}, "hm1");
  b->output(0)->set_type(ir::DType::f32, sh);
  g.add_output(b->output(0));
  try {
    auto o = options();
    o.ranges = codegen::parse_dynamic("batch=1..4");
    codegen::lower(g, o);
    FAIL() << "Hardmax lowered";
  } catch (const codegen::UnsupportedError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("unsupported for GPU (2 nodes)"), std::string::npos) << m;
    EXPECT_NE(m.find("hm0 (Hardmax)"), std::string::npos) << m;
    EXPECT_NE(m.find("hm1 (Hardmax)"), std::string::npos) << m;
  }
}

// f32 model outputs written by the step that computes them: a LayerNorm output the plan reads again
// (y -> Tanh) gets an f32 copy from the layernorm kernel, and the Tanh chain, read by nothing else,
// casts to f32 itself: no cast step; both outputs are the steps' own tensors.
TEST(CodegenLower, F32ModelOutputsNeedNoCastStep) {
  ir::Graph g;
  ir::Shape sh = {ir::Dim::symbol("batch"), ir::Dim(16)};
  ir::Value* x = g.add_input("x", {ir::DType::f32, sh, true});
  ir::Value* gamma = g.add_constant("gamma", ir::Tensor::from_f32(std::vector<float>(16, 1.5f), {16}));
  ir::Node* ln = g.add_node("LayerNormalization", {x, gamma}, 1, {}, "ln");
  ln->output(0)->set_type(ir::DType::f32, sh);
  ir::Node* t = g.add_node("Tanh", {ln->output(0)}, 1, {}, "tanh");
  t->output(0)->set_type(ir::DType::f32, sh);
  g.add_output(ln->output(0));
  g.add_output(t->output(0));
  auto o = options();
  o.ranges = codegen::parse_dynamic("batch=1..4");
  const runtime::Plan plan = codegen::lower(g, o).plan;
  auto casts = steps_of(plan, "cast");  // only x's, into the compute dtype
  ASSERT_EQ(casts.size(), 1u);
  EXPECT_EQ(casts[0]->inputs[0], plan.inputs[0]);
  auto l = steps_of(plan, "layernorm");
  ASSERT_EQ(l.size(), 1u);
  ASSERT_EQ(l[0]->outputs.size(), 2u);
  EXPECT_TRUE(pj(*l[0]).get("f32_copy")->boolean());
  EXPECT_EQ(plan.tensors[l[0]->outputs[0]].dtype, ir::DType::f16);
  ASSERT_EQ(plan.outputs.size(), 2u);
  EXPECT_EQ(plan.outputs[0], l[0]->outputs[1]);
  EXPECT_EQ(plan.tensors[plan.outputs[0]].kind, runtime::TensorKind::output);
  EXPECT_EQ(plan.tensors[plan.outputs[0]].dtype, ir::DType::f32);
  auto ew = steps_of(plan, "elementwise");
  ASSERT_EQ(ew.size(), 1u);
  EXPECT_EQ(ew[0]->inputs[0], l[0]->outputs[0]);  // the Tanh reads the f16 y
  EXPECT_EQ(plan.outputs[1], ew[0]->outputs[0]);
  EXPECT_EQ(plan.tensors[plan.outputs[1]].dtype, ir::DType::f32);
  // Round trip through JSON validates the two-output layernorm.
  EXPECT_EQ(runtime::Plan::from_json(plan.to_json()).to_json(), plan.to_json());
}

TEST(CodegenLower, ParseDynamic) {
  auto r = codegen::parse_dynamic("batch=1..256,seq=4");
  EXPECT_EQ(r.at("batch"), (std::pair<int64_t, int64_t>{1, 256}));
  EXPECT_EQ(r.at("seq"), (std::pair<int64_t, int64_t>{4, 4}));
  EXPECT_THROW(codegen::parse_dynamic("batch=8..1"), std::invalid_argument);
  EXPECT_THROW(codegen::parse_dynamic("batch"), std::invalid_argument);
  EXPECT_THROW(codegen::parse_dynamic("batch=0..4"), std::invalid_argument);
  EXPECT_THROW(codegen::parse_dynamic("batch=x"), std::invalid_argument);
  // Kernel dims are int32: the largest bound is 2^31 - 1, and a larger one says so.
  EXPECT_EQ(codegen::parse_dynamic("batch=1..2147483647").at("batch").second, 2147483647);
  try {
    codegen::parse_dynamic("batch=1..3000000000");
    ADD_FAILURE() << "batch=1..3000000000 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("past 2147483647"), std::string::npos) << e.what();
  }
  auto o = options();
  o.ranges = codegen::parse_dynamic("beam=1..4");
  EXPECT_THROW(codegen::lower(partitioned("bert_tiny"), o), std::invalid_argument);
}

TEST(CodegenCompile, PlanOnlyGpt2BlockWritesALoadableArtifact) {
  std::string p = model_path("gpt2_block");
  ASSERT_FALSE(p.empty());
  fs::path dir = fs::temp_directory_path() / ("sabre_codegen_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  codegen::CompileOptions o;
  o.plan_only = true;
  o.fuse_attention = false;  // the softmax's own causal fold (fused, the attention step takes the mask)
  o.ranges = codegen::parse_dynamic("batch=1..4,seq=1..64");
  std::vector<std::string> lines;
  o.progress = [&](const std::string& s) { lines.push_back(s); };
  codegen::CompileSummary s = codegen::compile_model(p, dir.string(), o);
  EXPECT_GE(lines.size(), 4u);
  EXPECT_GT(s.steps_by_op["gemm"], 0);
  EXPECT_EQ(s.kernels_compiled + s.kernels_cached, 0u);
  runtime::LoadedArtifact a = runtime::load_artifact(dir.string());
  EXPECT_TRUE(a.kernel_libraries.empty());
  // The causal Where(Trilu(ConstantOfShape)) folded into the softmax; the position Range into a slice.
  auto sm = steps_of(a.plan, "softmax");
  ASSERT_EQ(sm.size(), 1u);
  EXPECT_TRUE(pj(*sm[0]).get("causal")->boolean());
  bool range_slice = false;
  for (const auto* st : steps_of(a.plan, "slice")) range_slice |= st->name.find("gather of a range") != std::string::npos;
  EXPECT_TRUE(range_slice);
  fs::remove_all(dir);
}

// A DB tuned on another machine (the GPU host), a compile without timing (--plan-only here; no GPU
// in CI): the plan deploys the DB's winners and a note names the GPU they were measured on. The
// winners are made the analytic model's second choice, so picking them is the DB's doing. --tuned-for
// a GPU the DB lacks is an error; a DB of two GPUs is not guessed from (analytic picks, a note)
// until --tuned-for names one.
TEST(CodegenCompile, PlanOnlyPicksFromADbTunedElsewhere) {
  const std::string model = model_path("bert_tiny");
  ASSERT_FALSE(model.empty());
  const fs::path dir = fs::temp_directory_path() / ("sabre_db_pick_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  codegen::CompileOptions o;
  o.plan_only = true;
  o.ranges = codegen::parse_dynamic("batch=1..8,seq=1..128");
  o.tuning_db = (dir / "tuning.db").string();

  // The workloads the compile looks up, found as compile_model finds them.
  ir::Graph g = codegen::canonicalize_model(onnx_frontend::import_model(model), o.fuse_attention);
  partition::PartitionResult pr = partition::partition(std::move(g), cutlass_backend::pattern_table());
  codegen::LowerOptions lo;
  lo.dtype = o.dtype;
  lo.ranges = o.ranges;
  const std::vector<tune::GemmProblem> problems = codegen::tuned_gemm_problems(pr.graph, lo, 90);
  ASSERT_FALSE(problems.empty());
  const tune::Environment h200{"NVIDIA H200", 90, "13.0", tune::cutlass_version(), tune::template_version()};
  const tune::Environment h100{"NVIDIA H100 80GB HBM3", 90, "13.0", tune::cutlass_version(), tune::template_version()};
  std::set<std::string> db_pick, analytic_pick;
  {
    tune::TuningDb db(o.tuning_db);
    for (const auto& p : problems)
      for (int64_t m : tune::m_buckets(p.m_min, p.m_max)) {
        const auto ranked = tune::rank_candidates(p, m, 90, 2);
        ASSERT_EQ(ranked.size(), 2u) << tune::workload_key(p, m);
        db.record(h200, {tune::workload_key(p, m), ranked[1].name, tune::Status::ok, 10.0, 1e-4, ""});
        db.record(h200, {tune::workload_key(p, m), ranked[0].name, tune::Status::ok, 20.0, 1e-4, ""});
        db_pick.insert(ranked[1].name);
        analytic_pick.insert(ranked[0].name);
      }
  }
  ASSERT_FALSE(std::includes(db_pick.begin(), db_pick.end(), analytic_pick.begin(), analytic_pick.end()))
      << "the test needs picks that tell the DB's from the analytic model's";
  auto deployed = [&](const codegen::CompileSummary& s, const std::string& note) {
    bool noted = false;
    for (const auto& n : s.notes) noted |= n.find(note) != std::string::npos;
    EXPECT_TRUE(noted) << "no note with '" << note << "'";
    std::set<std::string> k;
    const runtime::LoadedArtifact a = runtime::load_artifact((dir / "a.sabre").string());
    for (const auto* st : steps_of(a.plan, "gemm"))
      for (const auto& e : pj(*st).get("dispatch")->arr()) k.insert(e.get("kernel")->str());
    return k;
  };
  auto subset = [](const std::set<std::string>& a, const std::set<std::string>& b) {
    return std::includes(b.begin(), b.end(), a.begin(), a.end());
  };

  std::set<std::string> got = deployed(codegen::compile_model(model, (dir / "a.sabre").string(), o), "measured on NVIDIA H200");
  EXPECT_FALSE(got.empty());
  EXPECT_TRUE(subset(got, db_pick));

  o.tuned_for = "NVIDIA H100 80GB HBM3";
  try {
    codegen::compile_model(model, (dir / "b.sabre").string(), o);
    ADD_FAILURE() << "--tuned-for a GPU the DB lacks compiled";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'NVIDIA H200' only"), std::string::npos) << e.what();
  }

  {
    tune::TuningDb db(o.tuning_db);
    for (const auto& p : problems)
      for (int64_t m : tune::m_buckets(p.m_min, p.m_max))
        db.record(h100, {tune::workload_key(p, m), *db_pick.begin(), tune::Status::ok, 5.0, 1e-4, ""});
  }
  o.tuned_for.clear();
  got = deployed(codegen::compile_model(model, (dir / "a.sabre").string(), o), "several GPUs");
  EXPECT_TRUE(subset(got, analytic_pick));
  o.tuned_for = "NVIDIA H200";
  got = deployed(codegen::compile_model(model, (dir / "a.sabre").string(), o), "measured on NVIDIA H200");
  EXPECT_TRUE(subset(got, db_pick));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sabre

