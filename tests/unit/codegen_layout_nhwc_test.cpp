// NHWC inside conv regions (issue 7): the layout assignment, grouped and depthwise convs, fused
// activations, checked on plans run by the CPU plan interpreter (plan_interp.h).

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

std::vector<int64_t> perm_of(const runtime::Step& s) {
  std::vector<int64_t> v;
  for (const auto& x : pj(s).get("perm")->arr()) v.push_back(static_cast<int64_t>(x.num()));
  return v;
}

// x -> relu(conv1(x)+b1) = h -> h * scale[C,1,1] -> conv2(.)+b2 + h -> y: two conv regions, an
// elementwise op with a per-channel constant between them and a residual read by the second.
ir::Graph two_conv_graph(int64_t group2 = 1, int64_t C = 8) {
  std::mt19937 rng(11);
  ir::Graph g;
  g.name = "two_conv";
  ir::Value* x = g.add_input("x", {ir::DType::f32, {ir::Dim::symbol("batch"), ir::Dim(C), ir::Dim(6), ir::Dim(6)}, true});
  std::map<std::string, ir::AttrValue> conv_attrs = {{"kernel_shape", std::vector<int64_t>{3, 3}},
                                                      {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                                                      {"strides", std::vector<int64_t>{1, 1}}};
  ir::Node* c1 = g.add_node("Conv", {x, random_const(g, "w1", {C, C, 3, 3}, 0.2, rng), random_const(g, "b1", {C}, 0.5, rng)},
                            1, conv_attrs, "conv1");
  ir::Node* r1 = g.add_node("Relu", {c1->output(0)}, 1, {}, "relu1");
  ir::Node* m = g.add_node("Mul", {r1->output(0), random_const(g, "scale", {C, 1, 1}, 1.0, rng)}, 1, {}, "scale");
  auto attrs2 = conv_attrs;
  attrs2["group"] = group2;
  ir::Node* c2 = g.add_node("Conv", {m->output(0), random_const(g, "w2", {C, C / group2, 3, 3}, 0.2, rng),
                                     random_const(g, "b2", {C}, 0.5, rng)},
                            1, attrs2, "conv2");
  ir::Node* a = g.add_node("Add", {c2->output(0), r1->output(0)}, 1, {}, "residual");
  g.add_output(a->output(0));
  ir::infer_types(g);
  return g;
}

// Fires: the conv chain runs NHWC with one conversion in (x, cast from f32 on the way: no cast
// step) and one permute out (y); the per-channel constant of the Mul between the convs is
// transposed at compile time, and the filters are KRSC. C = 8 needs no padding.
TEST(CodegenLayoutNhwc, TwoConvChainPermutesOnlyAtTheEdges) {
  codegen::Lowered low;
  check_graph("two_conv", two_conv_graph(), ir::DType::f16, 4e-3, &low);
  if (HasFatalFailure()) return;
  const auto& p = low.plan;
  EXPECT_EQ(count_steps(p, "conv"), 2);
  EXPECT_EQ(count_steps(p, "elementwise"), 1);
  EXPECT_EQ(low.layout_permutes, 2);
  const runtime::Step* in = only_nchw_to_nhwc(p);
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(in->inputs.at(0), p.inputs.at(0)) << "x enters NHWC straight from the f32 input";
  EXPECT_EQ(p.tensors[static_cast<size_t>(in->outputs.at(0))].dtype, ir::DType::f16);
  EXPECT_EQ(p.tensors[static_cast<size_t>(in->outputs.at(0))].shape.at(3).str(), "8") << "no padding";
  EXPECT_EQ(count_steps(p, "cast"), 1) << "only the output's; the input's is fused";
  std::vector<std::vector<int64_t>> perms;
  for (const auto& s : p.steps)
    if (s.op == "permute") perms.push_back(perm_of(s));
  ASSERT_EQ(perms.size(), 1u);
  EXPECT_EQ(perms[0], (std::vector<int64_t>{0, 3, 1, 2})) << "y leaves NCHW";
  for (const auto& n : low.notes) EXPECT_EQ(n.find("padded"), std::string::npos) << n;
  for (const auto& s : p.steps) {
    if (s.op != "conv") continue;
    const auto& w = p.tensors[static_cast<size_t>(s.inputs[1])];
    EXPECT_EQ(w.kind, runtime::TensorKind::weight);
    ASSERT_EQ(w.shape.size(), 4u);
    EXPECT_EQ(w.shape[3].str(), "8") << "KRSC filter";
    EXPECT_EQ(w.shape[1].str(), "3") << "KRSC filter";
    EXPECT_EQ(pj(s).get("dispatch")->arr().at(0).get("kernel")->str().rfind("sm80_conv_fprop_nhwc_f16", 0), 0u);
  }
  EXPECT_EQ(low.conv_kernels.size(), 2u) << "bias_relu and bias_res";
  // The output keeps the model's name and NCHW shape.
  const auto& out = p.tensors[static_cast<size_t>(p.outputs[0])];
  EXPECT_EQ(out.shape[1].str(), "8");
  EXPECT_EQ(out.shape[3].str(), "6");
}

// A grouped second conv that no regrouping fits to a tensor-core kernel (6 channels: 3 groups of 2,
// 2 of 3; dense, 6 breaks the 16-byte access) stays out of the conv table and runs on the native
// grouped kernel, in NHWC with the rest: the same values as the reference, the filter [K,C/G,R,S]
// as [R,S,C/G,K], still one permute in and one out. With 8 channels (4 groups of 2, 2 of 4) the
// regrouped dense conv runs on the conv kernels instead.
TEST(CodegenLayoutNhwc, GroupedConvRunsNativeInNhwc) {
  for (int64_t groups : {3, 2}) {
    codegen::Lowered low;
    check_graph("two_conv_grouped" + std::to_string(groups), two_conv_graph(groups, 6), ir::DType::f16, 4e-3, &low);
    if (HasFatalFailure()) return;
    EXPECT_EQ(count_steps(low.plan, "grouped_conv"), 1);
    EXPECT_EQ(count_steps(low.plan, "depthwise_conv"), 0);
    EXPECT_EQ(count_steps(low.plan, "conv"), 1);
    for (const auto& st : low.plan.steps)
      if (st.op == "grouped_conv") {
        EXPECT_EQ(pj(st).get("groups")->num(), double(groups));
        EXPECT_EQ(pj(st).get("k")->num(), 6.0);
        const auto& w = low.plan.tensors[static_cast<size_t>(st.inputs.at(1))];
        ASSERT_EQ(w.shape.size(), 4u);
        EXPECT_EQ(w.shape[2].str(), std::to_string(6 / groups));  // [R,S,C/G,K]
        EXPECT_EQ(w.shape[3].str(), "6");
      }
    EXPECT_EQ(low.layout_permutes, 2);
  }
  for (int64_t groups : {4, 2}) {
    codegen::Lowered low;
    check_graph("two_conv_regrouped" + std::to_string(groups), two_conv_graph(groups), ir::DType::f16, 4e-3, &low);
    if (HasFatalFailure()) return;
    EXPECT_EQ(count_steps(low.plan, "grouped_conv"), 0);
    EXPECT_EQ(count_steps(low.plan, "conv"), 2);
    for (const auto& st : low.plan.steps)
      if (st.op == "conv") EXPECT_EQ(pj(st).get("groups")->num(), 1.0);
  }
}

// A ResNeXt bottleneck (1x1, grouped 3x3 of 32 groups of 4 channels, 1x1): sabre compile regroups
// the 3x3 into 4 groups of 32 (block-diagonal filter), which the CUTLASS grouped kernels take: a conv
// step with groups 4 and a [K,R,S,32] filter on a grouped kernel, the same values as the reference.
TEST(CodegenLayoutNhwc, ResnextGroupedConvRunsOnGroupedKernels) {
  auto graph = [](int64_t width, int64_t groups) {
    std::mt19937 rng(12);
    ir::Graph g;
    g.name = "resnext_block";
    ir::Value* x = g.add_input("x", {ir::DType::f32, {ir::Dim::symbol("batch"), ir::Dim(16), ir::Dim(6), ir::Dim(6)}, true});
    std::map<std::string, ir::AttrValue> a1 = {{"kernel_shape", std::vector<int64_t>{1, 1}}};
    std::map<std::string, ir::AttrValue> a3 = {{"kernel_shape", std::vector<int64_t>{3, 3}},
                                               {"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"group", groups}};
    ir::Node* c1 = g.add_node("Conv", {x, random_const(g, "w1", {width, 16, 1, 1}, 0.3, rng),
                                       random_const(g, "b1", {width}, 0.5, rng)}, 1, a1, "conv1");
    ir::Node* r1 = g.add_node("Relu", {c1->output(0)}, 1, {}, "relu1");
    ir::Node* c2 = g.add_node("Conv", {r1->output(0), random_const(g, "w2", {width, width / groups, 3, 3}, 0.3, rng),
                                       random_const(g, "b2", {width}, 0.5, rng)}, 1, a3, "conv2");
    ir::Node* r2 = g.add_node("Relu", {c2->output(0)}, 1, {}, "relu2");
    ir::Node* c3 = g.add_node("Conv", {r2->output(0), random_const(g, "w3", {16, width, 1, 1}, 0.3, rng),
                                       random_const(g, "b3", {16}, 0.5, rng)}, 1, a1, "conv3");
    g.add_output(c3->output(0));
    ir::infer_types(g);
    return g;
  };
  const codegen::ConvKernelPicker analytic = [](const codegen::ConvProblem& p) {
    return codegen::analytic_conv_kernel(p, 90, codegen::ConvKernels::sm80);
  };
  {
    codegen::Lowered low;
    check_graph("resnext_32x4", graph(128, 32), ir::DType::f16, 4e-3, &low, false, codegen::Stem::im2col, true, analytic);
    if (HasFatalFailure()) return;
    EXPECT_EQ(count_steps(low.plan, "grouped_conv"), 0);
    int grouped = 0;
    for (const auto& st : low.plan.steps)
      if (st.op == "conv" && pj(st).get("groups")->num() != 1) {
        ++grouped;
        EXPECT_EQ(pj(st).get("groups")->num(), 4.0);
        const auto& w = low.plan.tensors[static_cast<size_t>(st.inputs.at(1))];
        ASSERT_EQ(w.shape.size(), 4u);
        EXPECT_EQ(w.shape[0].str(), "128");
        EXPECT_EQ(w.shape[3].str(), "32");  // [K,R,S,C/G] after regrouping
        for (const auto& e : pj(st).get("dispatch")->arr()) {
          auto spec = cutlass_backend::parse_conv_kernel_name(e.get("kernel")->str());
          ASSERT_TRUE(spec) << e.get("kernel")->str();
          EXPECT_TRUE(spec->config.grouped) << e.get("kernel")->str();
        }
      }
    EXPECT_EQ(grouped, 1);
  }
  {
    // 2 groups of 4: no divisor makes groups of 32, so the conv becomes dense (2x the work).
    codegen::Lowered low;
    check_graph("grouped_2x4", graph(8, 2), ir::DType::f16, 4e-3, &low, false, codegen::Stem::im2col, true, analytic);
    if (HasFatalFailure()) return;
    EXPECT_EQ(count_steps(low.plan, "grouped_conv"), 0);
    for (const auto& st : low.plan.steps)
      if (st.op == "conv") EXPECT_EQ(pj(st).get("groups")->num(), 1.0);
  }
}

// Refuses: a grouped conv whose weights are not constant has no kernel; lowering names it and why,
// and nothing is half-converted (the error lists it, no plan).
TEST(CodegenLayoutNhwc, GroupedConvWithRuntimeFilterIsRefusedWithReason) {
  ir::Graph g = two_conv_graph(2);
  ir::Node* c2 = nullptr;
  for (ir::Node* n : g.nodes())
    if (n->name() == "conv2") c2 = n;
  ASSERT_NE(c2, nullptr);
  ir::Value* wv = g.add_input("w2_runtime", {ir::DType::f32, {ir::Dim(8), ir::Dim(4), ir::Dim(3), ir::Dim(3)}, true});
  c2->set_input(1, wv);
  ir::infer_types(g);
  g = partition::partition(transform::canonicalize(std::move(g)), cutlass_backend::pattern_table()).graph;
  codegen::LowerOptions o;
  o.ranges = codegen::parse_dynamic("batch=1..4");
  o.pick = [](const tune::GemmProblem& p) { return tune::pick_kernels(p, tune::PickOptions{}); };
  o.pick_conv = test_pick_conv;
  try {
    codegen::lower(g, o);
    FAIL() << "a grouped conv with a runtime filter lowered";
  } catch (const codegen::UnsupportedError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("conv2 (Conv)"), std::string::npos) << m;
    EXPECT_NE(m.find("constant filters"), std::string::npos) << m;
  }
}

// A depthwise conv (group = channels) in the chain runs on the native depthwise kernel, in NHWC
// with the rest: the same values, still one permute in and one out.
TEST(CodegenLayoutNhwc, DepthwiseConvRunsNativeInNhwc) {
  codegen::Lowered low;
  check_graph("two_conv_depthwise", two_conv_graph(8), ir::DType::f16, 4e-3, &low);
  if (HasFatalFailure()) return;
  int depthwise = 0, permutes = 0;
  for (const auto& st : low.plan.steps) {
    depthwise += st.op == "depthwise_conv";
    permutes += st.op == "permute";
  }
  EXPECT_EQ(depthwise, 1);
  EXPECT_LE(permutes, 2);
}

// Nothing to do: a model without convs gets no permute from the layout assignment.
TEST(CodegenLayoutNhwc, BertHasNoLayoutPermutes) {
  std::string path = model_path("bert_tiny");
  ASSERT_FALSE(path.empty());
  ir::Graph g = partition::partition(transform::canonicalize(onnx_frontend::import_model(path)),
                                     cutlass_backend::pattern_table()).graph;
  codegen::LowerOptions o;
  o.ranges = codegen::parse_dynamic("batch=1..4,seq=1..16");
  o.pick = [](const tune::GemmProblem& p) { return tune::pick_kernels(p, tune::PickOptions{}); };
  o.pick_conv = test_pick_conv;
  codegen::Lowered low = codegen::lower(g, o);
  EXPECT_EQ(low.layout_permutes, 0);
  for (const auto& t : low.plan.tensors) EXPECT_EQ(t.name.find(".nhwc"), std::string::npos) << t.name;
}

// The generated ResNet block (Conv+BN+Relu, Conv+BN + residual + Relu, MaxPool,
// GlobalAveragePool, Flatten, Gemm): BatchNorm folded, both convs NHWC, pooling NHWC, one
// permute (the input) and none at the head: the pooled [N,1,1,C] is the same bytes as [N,C,1,1].
// Its 10-class FC head (N=10, not a multiple of 8 halves) runs on alignment-2 fallback kernels.
TEST(CodegenLayoutNhwc, ResnetBlockF16MatchesReference) {
  codegen::Lowered low;
  check_model("resnet_block", ir::DType::f16, 4e-3, false, &low);
  if (HasFatalFailure()) return;
  const auto& p = low.plan;
  EXPECT_EQ(count_steps(p, "conv"), 2);
  EXPECT_EQ(count_steps(p, "gemm"), 1);
  EXPECT_EQ(low.layout_permutes, 1);
  EXPECT_EQ(count_steps(p, "nchw_to_nhwc"), 1);
  EXPECT_EQ(count_steps(p, "permute"), 0);
  for (const auto& s : p.steps) {
    if (s.op == "pool2d" || s.op == "global_average_pool") {
      EXPECT_EQ(pj(s).get("layout")->str(), "nhwc") << s.name;
    }
    if (s.op == "conv") {
      EXPECT_NE(pj(s).get("epilogue")->str().find("bias"), std::string::npos) << "BatchNorm folded";
    }
  }
  ASSERT_FALSE(low.gemm_kernels.empty());
  for (const auto& k : low.gemm_kernels) EXPECT_NE(k.find("_a2_"), std::string::npos) << k;
}

// MobileNetV2's inverted residual at toy size, after BatchNorm folding, ReLU6 as torch exports it
// (Clip with constant bounds 0 and 6): x [batch,8,6,6] -> clip(conv 1x1 to 16 + b) -> clip(depthwise
// 3x3 + b) -> conv 1x1 to 8 + b + x. Weights large enough that both clamps at 6 engage.
ir::Graph inverted_residual_graph() {
  std::mt19937 rng(13);
  ir::Graph g;
  g.name = "inverted_residual";
  ir::Value* x = g.add_input("x", {ir::DType::f32, {ir::Dim::symbol("batch"), ir::Dim(8), ir::Dim(6), ir::Dim(6)}, true});
  ir::Value* lo = g.add_constant("relu6_min", ir::Tensor::from_f32({0.0f}, {}));
  ir::Value* hi = g.add_constant("relu6_max", ir::Tensor::from_f32({6.0f}, {}));
  using Ints = std::vector<int64_t>;
  ir::Node* e = g.add_node("Conv", {x, random_const(g, "w_expand", {16, 8, 1, 1}, 3.0, rng), random_const(g, "b_expand", {16}, 0.5, rng)},
                           1, {{"kernel_shape", Ints{1, 1}}}, "expand");
  ir::Node* e6 = g.add_node("Clip", {e->output(0), lo, hi}, 1, {}, "expand_relu6");
  ir::Node* d = g.add_node("Conv", {e6->output(0), random_const(g, "w_dw", {16, 1, 3, 3}, 1.0, rng), random_const(g, "b_dw", {16}, 0.5, rng)},
                           1, {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}, {"group", int64_t{16}}}, "depthwise");
  ir::Node* d6 = g.add_node("Clip", {d->output(0), lo, hi}, 1, {}, "depthwise_relu6");
  ir::Node* p = g.add_node("Conv", {d6->output(0), random_const(g, "w_project", {8, 16, 1, 1}, 0.3, rng), random_const(g, "b_project", {8}, 0.5, rng)},
                           1, {{"kernel_shape", Ints{1, 1}}}, "project");
  ir::Node* y = g.add_node("Add", {p->output(0), x}, 1, {}, "residual");
  g.add_output(y->output(0));
  ir::infer_types(g);
  return g;
}

// Fires: the expanding conv and its Clip(0, 6) are one conv step with the bias_relu6 epilogue (the
// depthwise conv reads its output directly: no clip step between), the projection keeps bias_res,
// the depthwise conv's Clip runs in the native depthwise step (clamp [0, 6]; the projection reads
// its output directly), and the plan computes the block. Both 1x1 convs are "gemm" steps over their
// NHWC tensors by default (LowerOptions::pointwise_gemm) and "conv" steps without it.
TEST(CodegenLayoutNhwc, InvertedResidualFusesRelu6IntoTheConv) {
  for (bool pointwise : {true, false}) {
    SCOPED_TRACE(pointwise ? "1x1 convs as GEMMs" : "1x1 convs on the conv kernels");
    const std::string op = pointwise ? "gemm" : "conv";
    codegen::Lowered low;
    check_graph("inverted_residual", inverted_residual_graph(), ir::DType::f16, 4e-3, &low, false, codegen::Stem::im2col, pointwise);
    if (HasFatalFailure()) return;
    const auto& p = low.plan;
    ASSERT_EQ(count_steps(p, op), 2);
    EXPECT_EQ(count_steps(p, pointwise ? "conv" : "gemm"), 0);
    EXPECT_EQ(low.pointwise_convs, pointwise ? 2 : 0);
    EXPECT_EQ(count_steps(p, "depthwise_conv"), 1);
    const runtime::Step* expand = conv_step(p, 0, op);
    const runtime::Step* project = conv_step(p, 1, op);
    ASSERT_TRUE(expand && project);
    EXPECT_EQ(pj(*expand).get("epilogue")->str(), "bias_relu6");
    EXPECT_NE(kernel_of(*expand).find("_bias_relu6"), std::string::npos) << kernel_of(*expand);
    EXPECT_EQ(pj(*project).get("epilogue")->str(), "bias_res");
    EXPECT_NE(kernel_of(*project).find("_bias_res"), std::string::npos) << kernel_of(*project);
    EXPECT_EQ(count_steps(p, "elementwise"), 0) << "both Clips are fused";
    if (pointwise) {  // A = X [n·h·w, C], B = the filter [K, C], the residual as it lies (NHWC)
      EXPECT_EQ(pj(*expand).get("m")->str(), "36*batch");
      EXPECT_EQ(num_param(*expand, "n"), 16);
      EXPECT_EQ(num_param(*expand, "k"), 8);
      EXPECT_EQ(pj(*expand).get("layout")->str(), "tn");
      EXPECT_EQ(num_param(*project, "n"), 8);
      EXPECT_EQ(num_param(*project, "k"), 16);
      EXPECT_EQ(num_param(*project, "beta"), 1);
      ASSERT_EQ(project->inputs.size(), 4u);
      EXPECT_GE(project->inputs.at(3), 0) << "the residual is the GEMM's R";
    }
    for (const auto& s : p.steps) {
      if (s.op == "depthwise_conv") {
        EXPECT_EQ(s.inputs.at(0), expand->outputs.at(0)) << "a step between the conv and the depthwise conv";
        EXPECT_EQ(project->inputs.at(0), s.outputs.at(0)) << "a step between the depthwise conv and the projection";
        const json::Value* cl = pj(s).get("clamp");
        ASSERT_NE(cl, nullptr);
        EXPECT_EQ(cl->dump(), "[0,6]");
      }
    }
  }
}

// The depthwise conv's activation: a Relu fuses as clamp [0, none]; a Clip with min above max is
// refused and stays an elementwise step; a depthwise conv read by two nodes keeps its Relu apart
// (nothing to fuse into one store).
TEST(CodegenLayoutNhwc, DepthwiseActivationFusion) {
  auto graph = [](const std::string& act, bool second_reader) {
    std::mt19937 rng(11);
    using Ints = std::vector<int64_t>;
    ir::Graph g;
    g.name = "dw_act";
    ir::Value* x = g.add_input("x", {ir::DType::f32, {ir::Dim::symbol("batch"), ir::Dim(16), ir::Dim(9), ir::Dim(11)}, true});
    ir::Node* d = g.add_node("Conv", {x, random_const(g, "w_dw", {16, 1, 3, 3}, 1.0, rng), random_const(g, "b_dw", {16}, 0.5, rng)},
                             1, {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}, {"group", int64_t{16}}}, "depthwise");
    ir::Node* a = nullptr;
    if (act == "relu") {
      a = g.add_node("Relu", {d->output(0)}, 1, {}, "relu");
    } else {  // Clip(x, 6, 0): min above max, every output is max; left to the elementwise kernel
      a = g.add_node("Clip", {d->output(0), g.add_constant("lo", ir::Tensor::from_f32({6.0f}, {})),
                              g.add_constant("hi", ir::Tensor::from_f32({0.0f}, {}))}, 1, {}, "clip");
    }
    ir::Node* p = g.add_node("Conv", {a->output(0), random_const(g, "w_p", {8, 16, 1, 1}, 0.3, rng), random_const(g, "b_p", {8}, 0.5, rng)},
                             1, {{"kernel_shape", Ints{1, 1}}}, "project");
    g.add_output(p->output(0));
    if (second_reader) g.add_output(d->output(0));
    ir::infer_types(g);
    return g;
  };
  {
    codegen::Lowered low;
    check_graph("dw_relu", graph("relu", false), ir::DType::f16, 4e-3, &low);
    if (HasFatalFailure()) return;
    EXPECT_EQ(count_steps(low.plan, "elementwise"), 0);
    for (const auto& s : low.plan.steps)
      if (s.op == "depthwise_conv") {
        ASSERT_NE(pj(s).get("clamp"), nullptr);
        EXPECT_EQ(pj(s).get("clamp")->dump(), "[0,null]");
      }
  }
  for (bool second : {false, true}) {
    const std::string act = second ? "relu" : "inverted_clip";
    codegen::Lowered low;
    check_graph("dw_" + act, graph(second ? "relu" : "clip", second), ir::DType::f16, 4e-3, &low);
    if (HasFatalFailure()) return;
    EXPECT_EQ(count_steps(low.plan, "elementwise"), 1) << act;
    for (const auto& s : low.plan.steps)
      if (s.op == "depthwise_conv") {
        EXPECT_EQ(pj(s).get("clamp"), nullptr) << act;
      }
  }
}

// Layout propagation through Transposes and reductions (tests/golden/lower/assign_layouts/, every
// case): each plan computes what its graph does, in f16. ConvNeXt's block keeps the conv's NHWC
// bytes through its channels-last LayerNorm and Linear layers: no permute or conversion inside (one
// conversion in, one permute out at the graph's edges), the layer-scale's [C,1,1] constant stored
// [1,1,1,C]. A Transpose pair cancels (no step); a mean over H and W reads the NHWC tensor in place;
// a Transpose that is no NCHW/NHWC swap, or whose output is a model output, is one permute step
// reading the NHWC tensor.
TEST(CodegenLayoutNhwc, LayoutsPropagateThroughTransposesAndReductions) {
  transform::register_ops();
  const fs::path dir = fs::path(SABRE_SOURCE_DIR) / "tests" / "golden" / "lower" / "assign_layouts";
  std::map<std::string, codegen::Lowered> plans;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".ir") continue;
    std::ifstream f(e.path());
    std::stringstream text;
    text << f.rdbuf();
    ir::Graph g = ir::parse_graph(text.str());
    ir::infer_types(g);
    const std::string stem = e.path().stem().string();
    check_graph(stem, g, ir::DType::f16, 4e-3, &plans[stem]);
    if (HasFatalFailure()) return;
  }
  ASSERT_EQ(plans.count("fires_channels_last_block"), 1u);
  const runtime::Plan& block = plans["fires_channels_last_block"].plan;
  EXPECT_EQ(count_steps(block, "nchw_to_nhwc"), 1) << "x enters NHWC";
  EXPECT_EQ(count_steps(block, "permute"), 1) << "y leaves NHWC";
  EXPECT_EQ(plans["fires_channels_last_block"].layout_permutes, 2);
  EXPECT_EQ(count_steps(block, "layernorm"), 1);
  EXPECT_EQ(count_steps(block, "gemm"), 2);
  const runtime::Step* mul = only_step(block, "elementwise");
  ASSERT_NE(mul, nullptr);
  bool layer_scale = false;
  for (int t : mul->inputs) {
    const runtime::TensorInfo& ti = block.tensors[static_cast<size_t>(t)];
    if (ti.kind != runtime::TensorKind::weight) continue;
    layer_scale = true;
    ASSERT_EQ(ti.shape.size(), 4u) << ti.name;
    EXPECT_EQ(ti.shape[3].str(), "8") << ti.name << ": the per-channel constant broadcasts over NHWC's last dim";
    EXPECT_EQ(ti.shape[1].str(), "1") << ti.name;
  }
  EXPECT_TRUE(layer_scale) << "the Mul reads the layer scale";
  EXPECT_EQ(count_steps(plans["fires_transpose_pair_cancels"].plan, "permute"), 0);
  const runtime::Step* mean = only_step(plans["fires_reduce_mean_reads_nhwc"].plan, "reduce");
  ASSERT_NE(mean, nullptr);
  EXPECT_EQ(count_steps(plans["fires_reduce_mean_reads_nhwc"].plan, "permute"), 0);
  std::vector<int64_t> axes;
  for (const auto& a : pj(*mean).get("axes")->arr()) axes.push_back(static_cast<int64_t>(a.num()));
  EXPECT_EQ(axes, (std::vector<int64_t>{1, 2})) << "H and W of [N,H,W,C]";
  const runtime::Plan& swap = plans["refused_permute_not_a_swap"].plan;
  ASSERT_EQ(count_steps(swap, "permute"), 1) << "the Transpose reads the NHWC tensor, no conversion first";
  for (const auto& st : swap.steps)
    if (st.op == "permute") EXPECT_EQ(perm_of(st), (std::vector<int64_t>{0, 3, 2, 1})) << "[N,H,W,C] -> [N,C,W,H]";
  EXPECT_EQ(count_steps(plans["refused_transpose_is_a_model_output"].plan, "permute"), 1) << "no conversion first";
}

// The 1x1 convs run as GEMMs are tuned as GEMMs: sabre tune and compile --tune collect them
// among the GEMM problems (M = batch·h·w over the batch range) and not among the conv problems;
// with pointwise_gemm off they are conv problems again, one per batch bucket.
TEST(CodegenLayoutNhwc, PointwiseGemmsAreTunedAsGemms) {
  const ir::Graph g = partition::partition(codegen::canonicalize_model(inverted_residual_graph(), false),
                                           cutlass_backend::pattern_table()).graph;
  codegen::LowerOptions o;
  o.ranges = codegen::parse_dynamic("batch=1..8");
  o.pick_conv = [](const codegen::ConvProblem& p) { return codegen::analytic_conv_kernel(p, 90); };
  std::vector<tune::GemmProblem> gemms = codegen::tuned_gemm_problems(g, o, 90);
  ASSERT_EQ(gemms.size(), 2u);
  std::set<std::string> seen;
  for (const auto& p : gemms) {
    seen.insert(p.epilogue + " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k));
    EXPECT_EQ(p.layout, "tn");
    EXPECT_EQ(p.alignment, 8);
    EXPECT_EQ(p.m_min, 36);
    EXPECT_EQ(p.m_max, 8 * 36);
  }
  EXPECT_EQ(seen, (std::set<std::string>{"bias_relu6 n=16 k=8", "bias_res n=8 k=16"}));
  EXPECT_TRUE(codegen::tuned_conv_problems(g, o, 90).empty());
  o.pointwise_gemm = false;
  EXPECT_TRUE(codegen::tuned_gemm_problems(g, o, 90).empty());
  EXPECT_EQ(codegen::tuned_conv_problems(g, o, 90).size(), 2u * 4) << "both 1x1 convs at batch 1, 2, 4, 8";
}

}  // namespace
}  // namespace sabre
