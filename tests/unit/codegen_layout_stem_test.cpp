// The conv stem at the NHWC boundary: channel padding, im2col + GEMM, the one-kernel stem_conv and
// their tuning, checked on plans run by the CPU plan interpreter (plan_interp.h).

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

// x [batch, c_in, 16, 16] f32 -> relu(conv 7x7/2 pad 3 (K=k1) + b) -> MaxPool 3x3/2 -> conv 3x3
// (K=8) + b -> y: ResNet's stem at toy size. nchw_reader: sigmoid(x) as a second output, a
// reader of x outside the conv region.
ir::Graph stem_graph(int64_t c_in, int64_t k1, bool nchw_reader = false) {
  std::mt19937 rng(5);
  ir::Graph g;
  g.name = "stem";
  ir::Value* x = g.add_input("images", {ir::DType::f32, {ir::Dim::symbol("batch"), ir::Dim(c_in), ir::Dim(16), ir::Dim(16)}, true});
  ir::Node* c1 = g.add_node("Conv", {x, random_const(g, "w1", {k1, c_in, 7, 7}, 0.3, rng), random_const(g, "b1", {k1}, 0.5, rng)},
                            1, {{"kernel_shape", std::vector<int64_t>{7, 7}}, {"pads", std::vector<int64_t>{3, 3, 3, 3}},
                                {"strides", std::vector<int64_t>{2, 2}}},
                            "stem_conv");
  ir::Node* r1 = g.add_node("Relu", {c1->output(0)}, 1, {}, "stem_relu");
  ir::Node* mp = g.add_node("MaxPool", {r1->output(0)}, 1,
                            {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                             {"strides", std::vector<int64_t>{2, 2}}},
                            "stem_pool");
  ir::Node* c2 = g.add_node("Conv", {mp->output(0), random_const(g, "w2", {8, k1, 3, 3}, 0.3, rng), random_const(g, "b2", {8}, 0.5, rng)},
                            1, {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}},
                            "conv2");
  g.add_output(c2->output(0));
  if (nchw_reader) {
    g.add_output(g.add_node("Sigmoid", {x}, 1, {}, "gate")->output(0));
  }
  ir::infer_types(g);
  return g;
}

// Fires with the stem on the conv path (sabre compile --stem conv): the stem's C = 3 would take
// alignment-1 kernels; the images' conversion to NHWC writes 8 channels (5 of zeros) and casts
// f32 -> f16 on the way, the filter gets zero taps, the conv runs on alignment-8 kernels, the same
// values come out, and a note says what happened. The conv after the pool (C = 8 already) is untouched.
TEST(CodegenLayoutNhwc, StemConvChannelsPaddedAtTheBoundary) {
  codegen::Lowered low;
  check_graph("stem", stem_graph(3, 8), ir::DType::f16, 4e-3, &low, false, codegen::Stem::conv);
  if (HasFatalFailure()) return;
  const auto& p = low.plan;
  const runtime::Step* in = only_nchw_to_nhwc(p);
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(in->inputs.at(0), p.inputs.at(0)) << "reads the f32 images: the cast is fused";
  const auto& xt = p.tensors[static_cast<size_t>(in->outputs.at(0))];
  EXPECT_EQ(xt.dtype, ir::DType::f16);
  ASSERT_EQ(xt.shape.size(), 4u);
  EXPECT_EQ(xt.shape[3].str(), "8");
  EXPECT_NE(in->name.find("channels padded 3 -> 8"), std::string::npos) << in->name;
  EXPECT_EQ(count_steps(p, "cast"), 1) << "only the output's";
  const runtime::Step* stem = conv_step(p, 0);
  ASSERT_NE(stem, nullptr);
  EXPECT_EQ(stem->inputs.at(0), in->outputs.at(0));
  EXPECT_EQ(num_param(*stem, "c"), 8);
  EXPECT_NE(kernel_of(*stem).find("_a8"), std::string::npos) << kernel_of(*stem);
  // The KRSC filter [8,7,7,8]: the padding taps are zeros, the others the model's (none zero).
  const auto& wt = p.tensors[static_cast<size_t>(stem->inputs.at(1))];
  ASSERT_EQ(wt.kind, runtime::TensorKind::weight);
  std::vector<std::string> wshape;
  for (const auto& d : wt.shape) wshape.push_back(d.str());
  EXPECT_EQ(wshape, (std::vector<std::string>{"8", "7", "7", "8"}));
  ASSERT_EQ(wt.weight_bytes, size_t{8 * 7 * 7 * 8 * 2});
  ir::Tensor w(wt.dtype, {8, 7, 7, 8}, nullptr, low.weights.data() + wt.weight_offset);
  int zeros_in_pad = 0, zeros_in_data = 0;
  for (int64_t i = 0; i < w.numel(); ++i) (i % 8 >= 3 ? zeros_in_pad : zeros_in_data) += w.get_f64(i) == 0;
  EXPECT_EQ(zeros_in_pad, 8 * 7 * 7 * 5);
  EXPECT_EQ(zeros_in_data, 0);
  const runtime::Step* c2 = conv_step(p, 1);
  ASSERT_NE(c2, nullptr);
  EXPECT_EQ(num_param(*c2, "c"), 8);
  EXPECT_NE(kernel_of(*c2).find("_a8"), std::string::npos) << kernel_of(*c2);
  int notes = 0;
  for (const auto& n : low.notes)
    if (n.find("padded") != std::string::npos) {
      ++notes;
      EXPECT_NE(n.find(stem->name), std::string::npos) << n;
      EXPECT_NE(n.find("input channels padded 3 -> 8 at the NHWC boundary"), std::string::npos) << n;
      EXPECT_NE(n.find("alignment-1"), std::string::npos) << n;
    }
  EXPECT_EQ(notes, 1);
}

// The images also read in NCHW (sigmoid(x) as a second output), --stem conv: that reader gets
// the one cast of the images (the conversion reads whichever copy exists first), the stem still
// pads; both outputs match.
TEST(CodegenLayoutNhwc, StemPaddingWithAnNchwReaderOfTheImages) {
  codegen::Lowered low;
  check_graph("stem_nchw_reader", stem_graph(3, 8, true), ir::DType::f16, 4e-3, &low, false, codegen::Stem::conv);
  if (HasFatalFailure()) return;
  const auto& p = low.plan;
  const runtime::Step* in = only_nchw_to_nhwc(p);
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(p.tensors[static_cast<size_t>(in->outputs.at(0))].shape.at(3).str(), "8");
  EXPECT_EQ(num_param(*conv_step(p, 0), "c"), 8);
  int input_casts = 0;
  for (const auto& s : p.steps) input_casts += s.op == "cast" && s.inputs.at(0) == p.inputs.at(0);
  EXPECT_EQ(input_casts, 1) << "the NCHW reader's copy in the compute dtype";
}

// Fires (--stem conv with the real analytic picker): the stem padded 3 -> 8 runs on a few_channels
// kernel (GEMM K = 7·7·8 = 392, not 7·7·32 for the optimized iterator's 32-wide channel tiles), at
// every batch bucket; conv2 (C = 64 after the pool) is an ordinary conv and takes the optimized
// iterator; no im2col step. Random images: the values match the reference in f16 and bf16, and the
// note says the stem took the conv path on few_channels.
TEST(CodegenLayoutNhwc, StemConvOnFewChannelsKernels) {
  const codegen::ConvKernelPicker analytic = [](const codegen::ConvProblem& p) {
    return codegen::analytic_conv_kernel(p, 90);
  };
  for (ir::DType dt : {ir::DType::f16, ir::DType::bf16}) {
    SCOPED_TRACE(std::string(ir::name(dt)));
    codegen::Lowered low;
    check_graph("stem_few_channels", stem_graph(3, 64), dt, dt == ir::DType::f16 ? 4e-3 : 2.5e-2, &low, false,
                codegen::Stem::conv, true, analytic);
    if (HasFatalFailure()) return;
    const auto& p = low.plan;
    EXPECT_EQ(count_steps(p, "im2col"), 0);
    EXPECT_EQ(low.im2col_convs, 0);
    const runtime::Step* stem = conv_step(p, 0);
    const runtime::Step* c2 = conv_step(p, 1);
    ASSERT_TRUE(stem && c2);
    EXPECT_EQ(num_param(*stem, "c"), 8);
    EXPECT_EQ(num_param(*stem, "r"), 7);
    for (const auto& e : pj(*stem).get("dispatch")->arr())
      EXPECT_NE(e.get("kernel")->str().find("sm80_conv_fprop_few_channels_nhwc_"), std::string::npos) << e.get("kernel")->str();
    EXPECT_EQ(num_param(*c2, "c"), 64);
    for (const auto& e : pj(*c2).get("dispatch")->arr())
      EXPECT_EQ(e.get("kernel")->str().find("few_channels"), std::string::npos) << e.get("kernel")->str();
    int said = 0;
    for (const auto& n : low.notes)
      said += n.find("input channels padded 3 -> 8") != std::string::npos &&
              n.find("runs as a conv step (--stem conv) on sm80_conv_fprop_few_channels_") != std::string::npos &&
              n.find("(few_channels: GEMM K = R*S*C = 392, no padding to the tile's K)") != std::string::npos;
    EXPECT_EQ(said, 1);
  }
}

// Refuses: a C = 3 conv whose input is already NHWC (another conv's output) keeps the alignment-1
// kernels (padding would cost a pass of its own), and so does one whose K (3) breaks the access
// too; the images enter unpadded, no note. The values still match.
TEST(CodegenLayoutNhwc, NoChannelPaddingWhereTheBoundaryIsNotTheInputOrKIsUnaligned) {
  codegen::Lowered low;
  check_graph("stem_k3", stem_graph(3, 3), ir::DType::f16, 4e-3, &low);
  if (HasFatalFailure()) return;
  const auto& p = low.plan;
  const runtime::Step* in = only_nchw_to_nhwc(p);
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(p.tensors[static_cast<size_t>(in->outputs.at(0))].shape.at(3).str(), "3") << "K=3: not padded";
  const runtime::Step* stem = conv_step(p, 0);
  const runtime::Step* c2 = conv_step(p, 1);
  ASSERT_TRUE(stem && c2);
  EXPECT_EQ(num_param(*stem, "c"), 3);
  EXPECT_EQ(num_param(*c2, "c"), 3) << "X is the pool's NHWC output";
  EXPECT_NE(kernel_of(*stem).find("_a1"), std::string::npos) << kernel_of(*stem);
  EXPECT_NE(kernel_of(*c2).find("_a1"), std::string::npos) << kernel_of(*c2);
  for (const auto& n : low.notes) EXPECT_EQ(n.find("padded"), std::string::npos) << n;
}

std::string dims_text(const runtime::TensorInfo& t) {
  std::string s;
  for (const auto& d : t.shape) s += (s.empty() ? "" : ",") + d.str();
  return s;
}
// The steps of kind `op` whose first input is tensor `t`.
int first_input_readers(const runtime::Plan& p, const std::string& op, int t) {
  int n = 0;
  for (const auto& s : p.steps) n += s.op == op && s.inputs.at(0) == t;
  return n;
}
// Weight `t` is a stem filter packed for im2col or stem_conv: [k, cols], zeros exactly in the
// columns no tap takes (the model's taps are none zero): for im2col (cp 0) the columns from rsc;
// for stem_conv (cp = stem_conv_channel_pitch(c)) the channels from c to cp of each tap, then the
// columns from rsc / c · cp.
void expect_packed_filter(const codegen::Lowered& low, int t, int64_t k, int64_t rsc, int64_t cols, int64_t c = 0,
                          int64_t cp = 0) {
  const auto& wt = low.plan.tensors[static_cast<size_t>(t)];
  ASSERT_EQ(wt.kind, runtime::TensorKind::weight);
  EXPECT_EQ(dims_text(wt), std::to_string(k) + "," + std::to_string(cols));
  ir::Tensor w(wt.dtype, {k, cols}, nullptr, low.weights.data() + wt.weight_offset);
  auto data = [&](int64_t col) { return cp ? col < rsc / c * cp && col % cp < c : col < rsc; };
  int64_t zeros_past = 0, zeros_in_data = 0;
  for (int64_t i = 0; i < w.numel(); ++i) (data(i % cols) ? zeros_in_data : zeros_past) += w.get_f64(i) == 0;
  EXPECT_EQ(zeros_past, k * (cols - rsc));
  EXPECT_EQ(zeros_in_data, 0);
}

// Fires (LowerOptions::stem im2col, the default): the stem (C = 3, 7x7: 147 columns) becomes an
// im2col step that reads the f32 images as they are (NCHW, cast on the way) into A [batch·64, 152]
// and a gemm step A·Bᵀ with B [8, 152] (the filter repacked, zero columns past 147), the conv's bias
// and relu, whose D is the stem's NHWC value; conv2 (C = 8, after the NHWC pool) stays a conv. No
// nchw_to_nhwc and no input cast: one conversion left, the output's. The same values come out, and
// the notes say what happened.
TEST(CodegenLayoutNhwc, StemConvAsIm2colGemm) {
  codegen::Lowered low;
  check_graph("stem_im2col", stem_graph(3, 8), ir::DType::f16, 4e-3, &low);
  if (HasFatalFailure()) return;
  const auto& p = low.plan;
  EXPECT_EQ(count_steps(p, "nchw_to_nhwc"), 0);
  EXPECT_EQ(count_steps(p, "conv"), 1) << "conv2";
  EXPECT_EQ(count_steps(p, "cast"), 1) << "only the output's";
  EXPECT_EQ(low.layout_permutes, 1) << "the output's permute";
  EXPECT_EQ(low.im2col_convs, 1);
  const runtime::Step* im = only_step(p, "im2col");
  const runtime::Step* gm = only_step(p, "gemm");
  ASSERT_TRUE(im && gm);
  EXPECT_NE(im->name.find("stem_conv (im2col, 147 -> 152 columns)"), std::string::npos) << im->name;
  EXPECT_EQ(im->inputs.at(0), p.inputs.at(0)) << "reads the f32 images";
  const auto& a = p.tensors[static_cast<size_t>(im->outputs.at(0))];
  EXPECT_EQ(a.kind, runtime::TensorKind::activation) << "an intermediate the planner places";
  EXPECT_EQ(a.dtype, ir::DType::f16);
  ASSERT_EQ(a.shape.size(), 2u);
  EXPECT_EQ(a.shape[0].eval({{"batch", 3}}), 3 * 8 * 8);
  EXPECT_EQ(a.shape[1].str(), "152");
  for (const char* k : {"c", "r", "s", "p", "q", "h", "w"}) EXPECT_TRUE(pj(*im).get(k)) << k;
  EXPECT_EQ(num_param(*im, "c"), 3);
  EXPECT_EQ(num_param(*im, "r"), 7);
  EXPECT_EQ(pj(*im).get("n")->str(), "batch");
  // The gemm: M = batch·P·Q (symbolic), N = K = 8, K = 152, "tn", the conv's epilogue; D is the
  // NHWC tensor the pool reads.
  EXPECT_EQ(gm->inputs.at(0), im->outputs.at(0));
  EXPECT_EQ(gm->inputs.at(3), -1) << "no residual";
  EXPECT_EQ(runtime::DimExpr::parse(pj(*gm).get("m")->str()).eval({{"batch", 5}}), 5 * 64);
  EXPECT_EQ(num_param(*gm, "n"), 8);
  EXPECT_EQ(num_param(*gm, "k"), 152);
  EXPECT_EQ(num_param(*gm, "lda"), 152);
  EXPECT_EQ(pj(*gm).get("layout")->str(), "tn");
  EXPECT_EQ(pj(*gm).get("epilogue")->str(), "bias_relu");
  EXPECT_FALSE(pj(*gm).get("dispatch")->arr().empty());
  EXPECT_EQ(dims_text(p.tensors[static_cast<size_t>(gm->outputs.at(0))]), "batch,8,8,8") << "NHWC [N,P,Q,K]";
  EXPECT_EQ(first_input_readers(p, "pool2d", gm->outputs.at(0)), 1);
  expect_packed_filter(low, gm->inputs.at(1), 8, 147, 152);  // B [8, 152]
  EXPECT_EQ(low.gemm_kernels.size(), 1u);
  EXPECT_EQ(low.conv_kernels.size(), 1u) << "conv2's only";
  int said = 0;
  for (const auto& n : low.notes) {
    said += n.find("conv stem_conv (cutlass_region") != std::string::npos &&
            n.find("im2col (147 -> 152 columns) + GEMM instead of a C-padded (3 -> 8) implicit-GEMM conv") != std::string::npos;
    if (n.rfind("NHWC inside conv regions", 0) == 0) {
      EXPECT_NE(n.find("1 NCHW<->NHWC conversion at the region edges, 1 conv reading NCHW through im2col"), std::string::npos) << n;
    }
    EXPECT_EQ(n.find("input channels padded"), std::string::npos) << n;
  }
  EXPECT_EQ(said, 1);
}

// The same in bf16, and with the images also read in NCHW (sigmoid(x) as a second output): that
// reader gets the one cast of the images, the im2col reads whichever copy exists when it runs;
// both outputs match.
TEST(CodegenLayoutNhwc, StemIm2colWithAnNchwReaderOfTheImagesBf16) {
  codegen::Lowered low;
  check_graph("stem_im2col_nchw_reader", stem_graph(3, 8, true), ir::DType::bf16, 2.5e-2, &low);
  if (HasFatalFailure()) return;
  const auto& p = low.plan;
  EXPECT_EQ(count_steps(p, "im2col"), 1);
  EXPECT_EQ(count_steps(p, "nchw_to_nhwc"), 0);
  int input_casts = 0;
  for (const auto& s : p.steps) input_casts += s.op == "cast" && s.inputs.at(0) == p.inputs.at(0);
  EXPECT_EQ(input_casts, 1) << "the NCHW reader's copy in the compute dtype";
}

// Nothing to do: C = 64 needs no padding, so the stem stays a conv reading the images through one
// unpadded nchw_to_nhwc.
TEST(CodegenLayoutNhwc, Im2colNothingToDoWhereCIsAligned) {
  codegen::Lowered low;
  check_graph("stem_c64", stem_graph(64, 8), ir::DType::f16, 4e-3, &low);
  if (HasFatalFailure()) return;
  EXPECT_EQ(count_steps(low.plan, "im2col"), 0);
  EXPECT_EQ(count_steps(low.plan, "conv"), 2);
  EXPECT_EQ(low.im2col_convs, 0);
  const runtime::Step* in = only_nchw_to_nhwc(low.plan);
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(low.plan.tensors[static_cast<size_t>(in->outputs.at(0))].shape.at(3).str(), "64");
  EXPECT_EQ(num_param(*conv_step(low.plan, 0), "c"), 64);
}

// x [batch,3,12,12] -> one conv region read straight from the images: `kind` "residual" adds a
// second input [batch,8,12,12] (conv + bias + residual), "depthwise" is group = 3 (one 3x3 filter
// per channel), "wide" a 19x19 filter (3·19·19 = 1083 columns > 1024), "11x11" an 11x11 filter
// (363 columns: im2col takes it, stem_conv's 256 do not).
ir::Graph one_conv_graph(const std::string& kind) {
  std::mt19937 rng(13);
  ir::Graph g;
  g.name = "one_conv_" + kind;
  const ir::Shape xs = {ir::Dim::symbol("batch"), ir::Dim(3), ir::Dim(12), ir::Dim(12)};
  ir::Value* x = g.add_input("images", {ir::DType::f32, xs, true});
  const bool depthwise = kind == "depthwise", wide = kind == "wide";
  const int64_t k = depthwise ? 3 : 8, f = wide ? 19 : kind == "11x11" ? 11 : 3, pad = f / 2;
  std::map<std::string, ir::AttrValue> attrs = {{"kernel_shape", std::vector<int64_t>{f, f}},
                                                 {"pads", std::vector<int64_t>{pad, pad, pad, pad}}};
  if (depthwise) attrs["group"] = int64_t{3};
  ir::Node* c = g.add_node("Conv", {x, random_const(g, "w", {k, depthwise ? 1 : 3, f, f}, 0.3, rng), random_const(g, "b", {k}, 0.5, rng)},
                           1, attrs, "conv");
  ir::Value* y = c->output(0);
  if (kind == "residual") {
    ir::Value* r = g.add_input("skip", {ir::DType::f32, {ir::Dim::symbol("batch"), ir::Dim(8), ir::Dim(12), ir::Dim(12)}, true});
    y = g.add_node("Add", {y, r}, 1, {}, "add")->output(0);
  }
  g.add_output(g.add_node("Relu", {y}, 1, {}, "relu")->output(0));
  ir::infer_types(g);
  return g;
}

// Refuses: a conv with a residual (the GEMM path takes none), a grouped (depthwise) conv and one
// with more than 1024 columns are not lowered to im2col + GEMM; each runs as before (the padded
// conv, the native depthwise kernel) and matches the reference.
TEST(CodegenLayoutNhwc, Im2colRefusesResidualGroupedAndWideConvs) {
  for (const std::string kind : {"residual", "depthwise", "wide"}) {
    SCOPED_TRACE(kind);
    codegen::Lowered low;
    check_graph("one_conv_" + kind, one_conv_graph(kind), ir::DType::f16, 4e-3, &low);
    if (HasFatalFailure()) return;
    EXPECT_EQ(count_steps(low.plan, "im2col"), 0);
    EXPECT_EQ(count_steps(low.plan, "gemm"), 0);
    EXPECT_EQ(low.im2col_convs, 0);
    if (kind == "depthwise") {
      EXPECT_EQ(count_steps(low.plan, "depthwise_conv"), 1);
      continue;
    }
    const runtime::Step* conv = conv_step(low.plan, 0);
    ASSERT_NE(conv, nullptr);
    EXPECT_EQ(num_param(*conv, "c"), 8) << "padded 3 -> 8 as before";
    if (kind == "residual") {
      EXPECT_NE(pj(*conv).get("epilogue")->str().find("res"), std::string::npos);
    }
  }
}

// The generated cnn_stem model (scripts/make_models.py: ResNet's stem on [batch,3,32,32], BatchNorm
// folded): its stem runs as im2col + GEMM from the f32 images, and nothing in the plan converts
// between NCHW and NHWC (the pooled [N,1,1,C] head is a view); the plan matches the reference.
TEST(CodegenLayoutNhwc, CnnStemModelRunsItsStemAsIm2colGemm) {
  codegen::Lowered low;
  check_model("cnn_stem", ir::DType::f16, 4e-3, false, &low);
  if (HasFatalFailure()) return;
  const auto& p = low.plan;
  EXPECT_EQ(count_steps(p, "im2col"), 1);
  EXPECT_EQ(count_steps(p, "gemm"), 2) << "the stem and the head";
  EXPECT_EQ(count_steps(p, "conv"), 1);
  EXPECT_EQ(count_steps(p, "nchw_to_nhwc"), 0);
  EXPECT_EQ(count_steps(p, "permute"), 0);
  EXPECT_EQ(low.layout_permutes, 0);
  EXPECT_EQ(low.im2col_convs, 1);
  const runtime::Step* im = only_step(p, "im2col");
  ASSERT_NE(im, nullptr);
  EXPECT_EQ(im->inputs.at(0), p.inputs.at(0));
  EXPECT_NE(im->name.find("/conv1/Conv (im2col, 147 -> 152 columns)"), std::string::npos) << im->name;
}

// ---- the stem as one stem_conv kernel (Stem::direct) ----------------------------------------------

// The shapes of a step's tensors at `dims`.
std::vector<int64_t> shape_at(const runtime::Plan& p, int t, const runtime::Dims& dims) {
  std::vector<int64_t> s;
  for (const auto& d : p.tensors[static_cast<size_t>(t)].shape) s.push_back(d.eval(dims));
  return s;
}
int notes_with(const codegen::Lowered& low, const std::string& text) {
  int n = 0;
  for (const auto& note : low.notes) n += note.find(text) != std::string::npos;
  return n;
}

// Fires (--stem direct): the stem (C = 3, 7x7/2: 147 columns) is one stem_conv step that reads the
// f32 images as they are (no cast, no nchw_to_nhwc), the filter packed with each tap's 3 channels
// padded to 4 (196 columns, rounded up to 208), the conv's bias, relu as clamp [0, null], and writes the
// NHWC tensor the pool reads: no im2col, no GEMM for it, nothing to pick. The runtime's
// stem_conv_geometry takes the step at batch 3, the values match the reference in f16 and bf16,
// and the notes say what happened.
TEST(CodegenLayoutNhwc, StemDirectIsOneStemConvStep) {
  for (ir::DType dt : {ir::DType::f16, ir::DType::bf16}) {
    SCOPED_TRACE(std::string(ir::name(dt)));
    codegen::Lowered low;
    check_graph("stem_direct", stem_graph(3, 8), dt, dt == ir::DType::f16 ? 4e-3 : 2.5e-2, &low, false,
                codegen::Stem::direct);
    if (HasFatalFailure()) return;
    const auto& p = low.plan;
    EXPECT_EQ(count_steps(p, "im2col"), 0);
    EXPECT_EQ(count_steps(p, "gemm"), 0);
    EXPECT_EQ(count_steps(p, "nchw_to_nhwc"), 0);
    EXPECT_EQ(count_steps(p, "conv"), 1) << "conv2";
    EXPECT_EQ(count_steps(p, "cast"), 1) << "only the output's";
    EXPECT_EQ(low.stem_convs, 1);
    EXPECT_EQ(low.im2col_convs, 0);
    EXPECT_TRUE(low.gemm_kernels.empty());
    const runtime::Step* sc = only_step(p, "stem_conv");
    ASSERT_NE(sc, nullptr);
    EXPECT_NE(sc->name.find("(stem_conv, one stem_conv kernel, R*S*C = 147 in 208 columns, 4 a tap)"), std::string::npos) << sc->name;
    ASSERT_EQ(sc->inputs.size(), 3u);
    EXPECT_EQ(sc->inputs[0], p.inputs.at(0)) << "reads the f32 images";
    EXPECT_EQ(p.tensors[static_cast<size_t>(sc->inputs[0])].dtype, ir::DType::f32);
    EXPECT_GE(sc->inputs[2], 0) << "the bias";
    EXPECT_EQ(num_param(*sc, "c"), 3);
    EXPECT_EQ(num_param(*sc, "r"), 7);
    EXPECT_EQ(num_param(*sc, "s"), 7);
    EXPECT_EQ(num_param(*sc, "k"), 8);
    EXPECT_EQ(pj(*sc).get("n")->str(), "batch");
    EXPECT_EQ(pj(*sc).get("dtype")->str(), ir::name(dt));
    EXPECT_EQ(pj(*sc).get("epilogue")->str(), "bias_relu");
    ASSERT_NE(pj(*sc).get("clamp"), nullptr);
    EXPECT_EQ(pj(*sc).get("clamp")->dump(), "[0,null]") << "relu: unbounded above";
    const auto& yt = p.tensors[static_cast<size_t>(sc->outputs.at(0))];
    EXPECT_EQ(dims_text(yt), "batch,8,8,8") << "NHWC [N,P,Q,K]";
    EXPECT_EQ(yt.dtype, dt);
    EXPECT_EQ(first_input_readers(p, "pool2d", sc->outputs.at(0)), 1);
    expect_packed_filter(low, sc->inputs[1], 8, 147, 208, 3, 4);  // w [8, 208]
    // The runtime takes the step as lowered (shapes, pads, relu as an upper-unbounded clamp).
    const runtime::Dims at3 = {{"batch", 3}};
    const runtime::StemConvGeometry g = runtime::stem_conv_geometry(
        *sc, at3, shape_at(p, sc->inputs[0], at3), shape_at(p, sc->inputs[1], at3), shape_at(p, sc->outputs[0], at3));
    EXPECT_EQ(g.n * g.cols, 3 * 208);
    EXPECT_TRUE(g.clamp.on && g.clamp.lo == 0.f && g.clamp.hi == INFINITY);
    EXPECT_EQ(notes_with(low, "conv stem_conv (cutlass_region"), 1);
    EXPECT_EQ(notes_with(low, "): one stem_conv kernel (im2col in shared memory + tensor-core MMA, R*S*C = 147 in 208 "
                              "columns, 4 a tap) reading images in NCHW (--stem im2col: im2col + GEMM; --stem conv: the padded conv)"),
              1);
    EXPECT_EQ(notes_with(low, "1 NCHW<->NHWC conversion at the region edges, 1 conv reading NCHW in one stem_conv kernel"), 1);
    EXPECT_EQ(notes_with(low, "input channels padded"), 0);
    EXPECT_EQ(notes_with(low, "not one stem_conv kernel"), 0);
  }
}

// The images also read in NCHW (sigmoid(x) as a second output), bf16: that reader gets the one
// cast of the images, the stem_conv reads whichever copy exists when it runs; both outputs match.
TEST(CodegenLayoutNhwc, StemDirectWithAnNchwReaderOfTheImagesBf16) {
  codegen::Lowered low;
  check_graph("stem_direct_nchw_reader", stem_graph(3, 8, true), ir::DType::bf16, 2.5e-2, &low, false,
              codegen::Stem::direct);
  if (HasFatalFailure()) return;
  const auto& p = low.plan;
  EXPECT_EQ(count_steps(p, "stem_conv"), 1);
  EXPECT_EQ(count_steps(p, "im2col"), 0);
  EXPECT_EQ(count_steps(p, "nchw_to_nhwc"), 0);
  int input_casts = 0;
  for (const auto& s : p.steps) input_casts += s.op == "cast" && s.inputs.at(0) == p.inputs.at(0);
  EXPECT_EQ(input_casts, 1) << "the NCHW reader's copy in the compute dtype";
}

// x [batch,3,16,16] f32 -> conv 3x3/2 pad 1 (K = 32) + b -> `act` -> y: MobileNetV2's stem at toy
// size. act "relu6" (Clip(0, 6) as torch exports it), "sigmoid", "silu" (x·sigmoid(x)) or ""
// (none). Weights large enough that the clamp at 6 engages.
ir::Graph mobile_stem_graph(const std::string& act) {
  std::mt19937 rng(17);
  ir::Graph g;
  g.name = "mobile_stem_" + act;
  ir::Value* x = g.add_input("images", {ir::DType::f32, {ir::Dim::symbol("batch"), ir::Dim(3), ir::Dim(16), ir::Dim(16)}, true});
  using Ints = std::vector<int64_t>;
  ir::Node* c = g.add_node("Conv", {x, random_const(g, "w", {32, 3, 3, 3}, 2.0, rng), random_const(g, "b", {32}, 0.5, rng)}, 1,
                           {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}, "stem_conv");
  ir::Value* y = c->output(0);
  if (act == "relu6") {
    y = g.add_node("Clip", {y, g.add_constant("relu6_min", ir::Tensor::from_f32({0.0f}, {})),
                            g.add_constant("relu6_max", ir::Tensor::from_f32({6.0f}, {}))},
                   1, {}, "relu6")->output(0);
  } else if (act == "sigmoid") {
    y = g.add_node("Sigmoid", {y}, 1, {}, "sigmoid")->output(0);
  } else if (act == "silu") {
    y = g.add_node("Mul", {y, g.add_node("Sigmoid", {y}, 1, {}, "sigmoid")->output(0)}, 1, {}, "silu")->output(0);
  }
  g.add_output(y);
  ir::infer_types(g);
  return g;
}

// Fires on MobileNetV2's stem (3x3/2, C = 3, K = 32: 27 taps in 48 columns) with its ReLU6 as
// clamp [0, 6], and without an activation (epilogue "bias", no clamp); the values match.
TEST(CodegenLayoutNhwc, StemDirectRelu6AndNoActivation) {
  for (const std::string act : {"relu6", ""}) {
    SCOPED_TRACE(act);
    codegen::Lowered low;
    check_graph("mobile_stem_direct_" + act, mobile_stem_graph(act), ir::DType::f16, 4e-3, &low, false,
                codegen::Stem::direct);
    if (HasFatalFailure()) return;
    const runtime::Step* sc = only_step(low.plan, "stem_conv");
    ASSERT_NE(sc, nullptr);
    EXPECT_EQ(count_steps(low.plan, "im2col") + count_steps(low.plan, "gemm") + count_steps(low.plan, "conv"), 0);
    EXPECT_EQ(num_param(*sc, "k"), 32);
    expect_packed_filter(low, sc->inputs.at(1), 32, 27, 48, 3, 4);
    EXPECT_EQ(pj(*sc).get("epilogue")->str(), act.empty() ? "bias" : "bias_relu6");
    if (act.empty()) {
      EXPECT_EQ(pj(*sc).get("clamp"), nullptr);
    } else {
      ASSERT_NE(pj(*sc).get("clamp"), nullptr);
      EXPECT_EQ(pj(*sc).get("clamp")->dump(), "[0,6]");
    }
    EXPECT_EQ(notes_with(low, "): one stem_conv kernel (im2col in shared memory + tensor-core MMA, R*S*C = 27 in 48 columns, 4 a tap)"), 1);
  }
}

// Refuses (--stem direct), each with a note saying why, and runs as --stem im2col has it: an
// epilogue the kernel does not apply (sigmoid, silu: im2col + GEMM with that epilogue), an 11x11
// filter (484 columns > 256: im2col + GEMM), a residual (neither takes it: the padded conv). The
// values match.
TEST(CodegenLayoutNhwc, StemDirectFallsBackToIm2col) {
  struct Case {
    std::string name;
    ir::Graph graph;
    std::string why;
    bool im2col;
  };
  std::vector<Case> cases;
  cases.push_back({"sigmoid", mobile_stem_graph("sigmoid"), "(epilogue bias_sigmoid: the kernel applies a bias and relu or relu6 only)", true});
  cases.push_back({"silu", mobile_stem_graph("silu"), "(epilogue bias_silu: the kernel applies a bias and relu or relu6 only)", true});
  cases.push_back({"11x11", one_conv_graph("11x11"),
                   "(stem_conv: 496 filter columns for R*S*CP = 484, it takes a multiple of 16 up to 256)", true});
  cases.push_back({"residual", one_conv_graph("residual"), "(a residual, which the kernel does not add)", false});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    codegen::Lowered low;
    check_graph("stem_direct_refused_" + c.name, c.graph, ir::DType::f16, 4e-3, &low, false, codegen::Stem::direct);
    if (HasFatalFailure()) return;
    EXPECT_EQ(count_steps(low.plan, "stem_conv"), 0);
    EXPECT_EQ(low.stem_convs, 0);
    EXPECT_EQ(count_steps(low.plan, "im2col"), c.im2col ? 1 : 0);
    EXPECT_EQ(low.im2col_convs, c.im2col ? 1 : 0);
    EXPECT_EQ(count_steps(low.plan, "conv"), c.im2col ? 0 : 1);
    EXPECT_EQ(notes_with(low, "): not one stem_conv kernel " + c.why + "; it runs as with --stem im2col"), 1);
  }
}

// sabre compile --tune collects its GEMM problems through lower (tuned_gemm_problems): with --stem
// im2col the stem's GEMM is among them, as every other GEMM is, and its conv problems are gone from
// the conv list; with --stem direct (the default: one native stem_conv step) the stem is in neither
// list; with the stem on the
// conv path (--stem conv) it is the other way round from im2col, and the stem's conv
// problem (C padded to 8) has few_channels kernels among its candidates, first.
TEST(CodegenLayoutNhwc, Im2colGemmIsTunedLikeTheOthers) {
  const ir::Graph g = partition::partition(codegen::canonicalize_model(stem_graph(3, 8), false),
                                           cutlass_backend::pattern_table()).graph;
  codegen::LowerOptions o;
  o.ranges = codegen::parse_dynamic("batch=1..8");
  o.pick_conv = [](const codegen::ConvProblem& p) { return codegen::analytic_conv_kernel(p, 90); };
  o.stem = codegen::Stem::im2col;
  std::vector<tune::GemmProblem> gemms = codegen::tuned_gemm_problems(g, o, 90);
  ASSERT_EQ(gemms.size(), 1u);
  EXPECT_EQ(gemms[0].layout, "tn");
  EXPECT_EQ(gemms[0].epilogue, "bias_relu");
  EXPECT_EQ(gemms[0].n, 8);
  EXPECT_EQ(gemms[0].k, 152);
  EXPECT_EQ(gemms[0].alignment, 8);
  EXPECT_EQ(gemms[0].m_min, 64);
  EXPECT_EQ(gemms[0].m_max, 8 * 64);
  std::set<int64_t> filters;
  for (const auto& c : codegen::tuned_conv_problems(g, o, 90)) filters.insert(c.r);
  EXPECT_EQ(filters, (std::set<int64_t>{3})) << "conv2 only, not the 7x7 stem";
  o.stem = codegen::LowerOptions{}.stem;  // the default, direct: nothing to tune for the stem
  EXPECT_EQ(o.stem, codegen::Stem::direct);
  EXPECT_TRUE(codegen::tuned_gemm_problems(g, o, 90).empty());
  filters.clear();
  for (const auto& c : codegen::tuned_conv_problems(g, o, 90)) filters.insert(c.r);
  EXPECT_EQ(filters, (std::set<int64_t>{3})) << "conv2 only, not the 7x7 stem";
  o.stem = codegen::Stem::conv;
  EXPECT_TRUE(codegen::tuned_gemm_problems(g, o, 90).empty());
  const std::vector<codegen::ConvProblem> convs = codegen::tuned_conv_problems(g, o, 90);
  EXPECT_EQ(convs.size(), 2u * 4) << "both convs at batch 1, 2, 4, 8";
  int stems = 0;
  for (const auto& c : convs) {
    if (c.r != 7) continue;
    ++stems;
    EXPECT_EQ(c.c, 8) << "padded 3 -> 8";
    EXPECT_EQ(c.alignment, 8);
    tune::ProfileOptions po;
    po.target_sm = 90;
    const std::vector<tune::ConvCandidate> cands = tune::conv_candidates(c, po, tune::ConvKernels::automatic);
    ASSERT_FALSE(cands.empty());
    EXPECT_NE(cands.front().name.find("_few_channels_"), std::string::npos) << "batch " << c.n << ": " << cands.front().name;
  }
  EXPECT_EQ(stems, 4);
}

}  // namespace
}  // namespace sabre
