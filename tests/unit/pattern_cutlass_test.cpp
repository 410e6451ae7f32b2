// Every entry of the CUTLASS table, from its name: a graph where it fires (one region, that
// pattern, bit-identical outputs), one with nothing to do (the epilogue without a GEMM/conv), one
// with an unaligned contraction dim (fires on the fallback kernels' alignment, and says why), and
// one its check refuses (grouped convs; f64 GEMMs), with the refusal's reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <sstream>

#include "backends/cutlass/patterns.h"
#include "ir/infer.h"
#include "ir/printer.h"
#include "partition/partitioner.h"
#include "partition/report.h"
#include "reference/reference.h"
#include "transform/canonicalize.h"

namespace sabre {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string t; std::getline(ss, t, sep);) out.push_back(t);
  return out;
}

// The IR text for `entry` with the contraction/channel dim `k`; without the GEMM/conv when `core` is false.
std::string graph_for(const std::string& entry, int64_t k, bool core) {
  std::string rest = entry.substr(std::string("cutlass.").size());
  std::string family, epi;
  for (const char* f : {"batched_gemm", "conv2d_fprop", "gemm"})
    if (rest.rfind(f, 0) == 0) {
      family = f;
      epi = rest.substr(family.size());
      break;
    }
  std::vector<std::string> tokens = split(epi.empty() ? "" : epi.substr(1), '_');
  std::ostringstream s;
  std::string out_shape, last;
  if (family == "gemm") {
    out_shape = "[batch,seq,16]";
    s << "graph g(%x: f16[batch,seq," << k << "], %r: f16" << out_shape << ", %e: f16" << out_shape << ") -> (%y) {\n";
    s << "  %w = const f16[16," << k << "] @00000000000000a1\n  %b = const f16[16] @00000000000000a2\n";
    if (core) s << "  %v0 = sabre.MatMulTransB(%x, %w)\n";
    last = core ? "%v0" : "%e";
  } else if (family == "batched_gemm") {
    s << "graph g(%q: f16[batch,2,seq," << k << "], %kk: f16[batch,2,seq," << k << "], %e: f16[batch,2,seq,seq]) -> (%y) {\n";
    if (core) s << "  %kt = Transpose(%kk) {perm=[0, 1, 3, 2]}\n  %v0 = MatMul(%q, %kt)\n";
    last = core ? "%v0" : "%e";
  } else {
    out_shape = "[batch,16,5,5]";
    s << "graph g(%x: f16[batch," << k << ",5,5], %r: f16" << out_shape << ", %e: f16" << out_shape << ") -> (%y) {\n";
    s << "  %w = const f16[16," << k << ",3,3] @00000000000000a3\n  %b = const f16[16] @00000000000000a4\n";
    bool bias = !tokens.empty() && tokens[0] == "bias";
    if (core) s << "  %v0 = Conv(%x, %w" << (bias ? ", %b" : "") << ") {kernel_shape=[3, 3], pads=[1, 1, 1, 1]}\n";
    if (bias) tokens.erase(tokens.begin());
    last = core ? "%v0" : "%e";
  }
  int i = 1;
  for (const std::string& t : tokens) {
    std::string v = "%v" + std::to_string(i++);
    if (t == "bias") s << "  " << v << " = Add(" << last << ", %b)\n";
    else if (t == "res") s << "  " << v << " = Add(" << last << ", %r)\n";
    else if (t == "relu") s << "  " << v << " = Relu(" << last << ")\n";
    else if (t == "gelu") s << "  " << v << " = Gelu(" << last << ")\n";
    else if (t == "gelutanh") s << "  " << v << " = Gelu(" << last << ") {approximate=\"tanh\"}\n";
    else if (t == "sigmoid") s << "  " << v << " = Sigmoid(" << last << ")\n";
    else if (t == "hardswish") s << "  " << v << " = HardSwish(" << last << ")\n";
    else if (t == "relu6")  // Clip with constant bounds, as torch exports ReLU6
      s << "  " << v << "lo = const f16[] [0.0]\n  " << v << "hi = const f16[] [6.0]\n  " << v << " = Clip(" << last
        << ", " << v << "lo, " << v << "hi)\n";
    else if (t == "silu") s << "  " << v << "s = Sigmoid(" << last << ")\n  " << v << " = Mul(" << last << ", " << v << "s)\n";
    else ADD_FAILURE() << "token " << t << " of " << entry << " has no graph builder";
    last = v;
  }
  s << "  %y = Identity(" << last << ")\n}\n";
  return s.str();
}

ir::Graph parse(const std::string& text) {
  transform::register_ops();
  ir::Graph g = ir::parse_graph(text);
  ir::infer_types(g);
  return g;
}

std::map<std::string, ir::Tensor> inputs_for(const ir::Graph& g) {
  std::mt19937 rng(9);
  std::map<std::string, ir::Tensor> ins;
  for (const ir::Value* v : g.inputs()) {
    std::vector<int64_t> shape;
    for (const ir::Dim& d : v->shape()) shape.push_back(*d.evaluate({{"batch", 2}, {"seq", 3}}));
    ir::Tensor t(v->dtype(), shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, std::uniform_real_distribution<double>(-1, 1)(rng));
    ins[v->name()] = std::move(t);
  }
  return ins;
}

const ir::Node* composite_of(const ir::Graph& g) {
  for (const ir::Node* n : g.nodes())
    if (n->op() == "Composite") return n;
  return nullptr;
}

class CutlassEntry : public ::testing::TestWithParam<std::string> {};

TEST_P(CutlassEntry, FiresKeepsBitsNothingToDoFallsBackAndRefuses) {
  const std::string entry = GetParam();
  const auto& table = cutlass_backend::pattern_table();
  {
    SCOPED_TRACE("fires");
    std::string text = graph_for(entry, 32, true);
    ir::Graph g = parse(text);
    auto ins = inputs_for(g);
    auto want = reference::run(g, ins);
    auto r = partition::partition(g.clone(), table);
    ASSERT_EQ(r.regions.size(), 1u) << text << ir::print(r.graph);
    EXPECT_EQ(r.regions[0].pattern, entry) << text;
    auto got = reference::run(r.graph, ins);
    ASSERT_EQ(got[0].dims(), want[0].dims());
    EXPECT_EQ(std::memcmp(got[0].bytes(), want[0].bytes(), want[0].nbytes()), 0);
  }
  {
    SCOPED_TRACE("nothing to do");
    auto r = partition::partition(parse(graph_for(entry, 32, false)), table);
    EXPECT_TRUE(r.regions.empty());
  }
  if (entry.find("conv2d") != std::string::npos) {
    // Convs take unaligned channel counts (the RGB stem) on the narrower-access fallback kernels:
    // C=12 fires with alignment 4; what they refuse is grouped convolution.
    auto r = partition::partition(parse(graph_for(entry, 12, true)), table);
    ASSERT_EQ(r.regions.size(), 1u) << ir::print(r.graph);
    const ir::Node* comp = composite_of(r.graph);
    ASSERT_TRUE(comp);
    EXPECT_EQ(comp->attr_int("alignment"), 4);
    // The lowering pads such a C at the NHWC boundary (CodegenLayoutNhwc.StemConvChannelsPadded...).
    EXPECT_NE(comp->attr_string("alignment_note").find("sabre compile zero-pads C"), std::string::npos)
        << comp->attr_string("alignment_note");
    // C=3 (3x3 filter: 27 columns) runs as im2col + GEMM there unless a residual is added
    // (CodegenLayoutNhwc.StemConvAsIm2colGemm).
    auto r3 = partition::partition(parse(graph_for(entry, 3, true)), table);
    ASSERT_EQ(r3.regions.size(), 1u) << ir::print(r3.graph);
    const std::string note3 = composite_of(r3.graph)->attr_string("alignment_note");
    const bool res = entry.find("_res") != std::string::npos;
    EXPECT_EQ(note3.find("im2col (R*S*C = 27 columns, rounded up to 8) + GEMM") != std::string::npos, !res) << note3;
    EXPECT_EQ(note3.find("sabre compile zero-pads C") != std::string::npos, res) << note3;
    std::string grouped = graph_for(entry, 32, true);
    const std::string conv_attrs = "{kernel_shape=[3, 3], pads=[1, 1, 1, 1]}";
    grouped.replace(grouped.find(conv_attrs), conv_attrs.size(), "{group=2, kernel_shape=[3, 3], pads=[1, 1, 1, 1]}");
    const std::string w32 = "%w = const f16[16,32,3,3]";
    grouped.replace(grouped.find(w32), w32.size(), "%w = const f16[16,16,3,3]");
    auto rg = partition::partition(parse(grouped), table);
    EXPECT_TRUE(rg.regions.empty()) << ir::print(rg.graph);
    bool said = false;
    for (const auto& f : rg.refusals) said = said || (f.pattern == entry && f.reason.find("group=2") != std::string::npos);
    EXPECT_TRUE(said) << "no refusal of " << entry << " for group=2";
    // Groups of 16 input and 32 output channels are what the grouped kernels take (no residual),
    // and the region keeps the groups and the values bit for bit.
    std::string wide = grouped;
    wide.replace(wide.find("%w = const f16[16,16,3,3]"), 25, "%w = const f16[64,16,3,3]");
    for (const std::string& k16 : {std::string("f16[16]"), std::string("f16[batch,16,")})
      for (size_t at = wide.find(k16); at != std::string::npos; at = wide.find(k16, at + 1))
        wide.replace(at, k16.size(), k16 == "f16[16]" ? "f16[64]" : "f16[batch,64,");
    ir::Graph gw = parse(wide);
    auto rw = partition::partition(gw.clone(), table);
    if (entry.find("_res") != std::string::npos) {
      // A shorter entry (the conv without the residual Add) may take it instead.
      for (const auto& region : rw.regions) EXPECT_NE(region.pattern, entry) << ir::print(rw.graph);
      bool no_res = false;
      for (const auto& f : rw.refusals) no_res = no_res || f.reason.find("no residual epilogue") != std::string::npos;
      EXPECT_TRUE(no_res) << entry;
    } else {
      ASSERT_EQ(rw.regions.size(), 1u) << wide << ir::print(rw.graph);
      const ir::Node* cw = composite_of(rw.graph);
      ASSERT_TRUE(cw);
      EXPECT_EQ(cw->attr_int("groups"), 2);
      EXPECT_EQ(cw->attr_int("alignment"), 8);
      auto ins = inputs_for(gw);
      auto want = reference::run(gw, ins), got = reference::run(rw.graph, ins);
      ASSERT_EQ(got[0].dims(), want[0].dims());
      EXPECT_EQ(std::memcmp(got[0].bytes(), want[0].bytes(), want[0].nbytes()), 0);
    }
    // Depthwise stays on the native kernel, with the reason.
    std::string dw = graph_for(entry, 32, true);
    dw.replace(dw.find(conv_attrs), conv_attrs.size(), "{group=32, kernel_shape=[3, 3], pads=[1, 1, 1, 1]}");
    dw.replace(dw.find(w32), w32.size(), "%w = const f16[32,1,3,3]");
    for (size_t at = dw.find("f16[16]"); at != std::string::npos; at = dw.find("f16[16]", at + 1)) dw.replace(at, 7, "f16[32]");
    for (size_t at = dw.find("f16[batch,16,"); at != std::string::npos; at = dw.find("f16[batch,16,", at + 1))
      dw.replace(at, 13, "f16[batch,32,");
    auto rd = partition::partition(parse(dw), table);
    EXPECT_TRUE(rd.regions.empty()) << ir::print(rd.graph);
    bool depthwise = false;
    for (const auto& f : rd.refusals) depthwise = depthwise || f.reason.find("depthwise") != std::string::npos;
    EXPECT_TRUE(depthwise) << entry;
    return;
  }
  {
    // Unaligned contraction dims take the narrower-access fallback kernels (the region says so);
    // what the GEMM checks refuse is a dtype no kernel takes.
    SCOPED_TRACE("unaligned fires, f64 refused");
    auto r = partition::partition(parse(graph_for(entry, 12, true)), table);
    ASSERT_EQ(r.regions.size(), 1u) << ir::print(r.graph);
    const ir::Node* comp = composite_of(r.graph);
    ASSERT_TRUE(comp);
    EXPECT_EQ(comp->attr_int("alignment"), 4);
    EXPECT_NE(comp->attr_string("alignment_note").find("K=12 not a multiple of 8: alignment-4 fallback kernels"),
              std::string::npos);
    std::string f64 = graph_for(entry, 32, true);
    for (size_t at = f64.find("f16"); at != std::string::npos; at = f64.find("f16", at)) f64.replace(at, 3, "f64");
    auto rr = partition::partition(parse(f64), table);
    EXPECT_TRUE(rr.regions.empty()) << ir::print(rr.graph);
    bool said = false;
    for (const auto& f : rr.refusals) said = said || (f.pattern == entry && f.reason.find("dtype f64") != std::string::npos);
    EXPECT_TRUE(said) << "no refusal of " << entry << " for f64";
  }
}

std::vector<std::string> entry_names() {
  std::vector<std::string> out;
  for (const auto& e : cutlass_backend::pattern_table().entries) out.push_back(e.name);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Table, CutlassEntry, ::testing::ValuesIn(entry_names()), [](const auto& info) {
  std::string n = info.param;
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
});

TEST(CutlassTable, EveryEntryStatesItsAlgebraAndRoles) {
  for (const auto& e : cutlass_backend::pattern_table().entries) {
    EXPECT_EQ(e.name.rfind("cutlass.", 0), 0u) << e.name;
    EXPECT_NE(e.algebra.find('='), std::string::npos) << e.name;
    EXPECT_FALSE(e.roles.empty()) << e.name;
  }
}

// relu6 fuses Clip only with constant bounds exactly 0 and 6 (the kernel's are compile-time constants).
// Other constant bounds: the check refuses and says why; bounds computed at run time: the structure
// does not match. Either way the GEMM or conv (+ bias) becomes a region and the Clip stays outside.
TEST(CutlassTable, Relu6FusesOnlyClipZeroSix) {
  const auto& table = cutlass_backend::pattern_table();
  struct Case {
    std::string lo, hi;  // IR values
    bool fuses;
    std::string reason;  // of the refusal; "" when the structure does not match at all
  };
  const std::vector<Case> cases = {
      {"const f16[] [0.0]", "const f16[] [6.0]", true, ""},
      {"const f16[1] [0.0]", "const f16[1] [6.0]", true, ""},  // one-element tensors are scalars too
      {"const f16[] [0.0]", "const f16[] [5.0]", false, "Clip bounds [0, 5] are not relu6's [0, 6]"},
      {"const f16[] [-1.0]", "const f16[] [6.0]", false, "Clip bounds [-1, 6] are not relu6's [0, 6]"},
      {"const f16[] [6.0]", "const f16[] [0.0]", false, "Clip bounds [6, 0] are not relu6's [0, 6]"},
      {"", "", false, ""},  // graph inputs: run-time bounds
  };
  for (const std::string family : {"gemm", "conv"}) {
    for (const Case& c : cases) {
      const bool runtime = c.lo.empty();
      std::ostringstream t;
      if (family == "gemm") {
        t << "graph g(%x: f16[batch,32]" << (runtime ? ", %lo: f16[], %hi: f16[]" : "") << ") -> (%y) {\n"
          << "  %w = const f16[16,32] @00000000000000b1\n  %b = const f16[16] @00000000000000b2\n"
          << "  %mm = sabre.MatMulTransB(%x, %w)\n  %h = Add(%mm, %b)\n";
      } else {
        t << "graph g(%x: f16[batch,32,5,5]" << (runtime ? ", %lo: f16[], %hi: f16[]" : "") << ") -> (%y) {\n"
          << "  %w = const f16[16,32,3,3] @00000000000000b3\n  %b = const f16[16] @00000000000000b4\n"
          << "  %h = Conv(%x, %w, %b) {kernel_shape=[3, 3], pads=[1, 1, 1, 1]}\n";
      }
      if (!runtime) t << "  %lo = " << c.lo << "\n  %hi = " << c.hi << "\n";
      t << "  %y = Clip(%h, %lo, %hi)\n}\n";
      SCOPED_TRACE(t.str());
      const std::string prefix = family == "gemm" ? "cutlass.gemm" : "cutlass.conv2d_fprop";
      auto r = partition::partition(parse(t.str()), table);
      ASSERT_EQ(r.regions.size(), 1u) << ir::print(r.graph);
      EXPECT_EQ(r.regions[0].pattern, prefix + (c.fuses ? "_bias_relu6" : "_bias"));
      const ir::Node* comp = composite_of(r.graph);
      ASSERT_TRUE(comp);
      EXPECT_EQ(comp->attr_string("epilogue"), c.fuses ? "bias_relu6" : "bias");
      bool clip_outside = false;
      for (const ir::Node* n : r.graph.nodes()) clip_outside = clip_outside || n->op() == "Clip";
      EXPECT_EQ(clip_outside, !c.fuses);
      std::string refusal;
      for (const auto& f : r.refusals)
        if (f.pattern == prefix + "_bias_relu6") refusal = f.reason;
      if (c.reason.empty()) {
        EXPECT_EQ(refusal, "");
      } else {
        EXPECT_NE(refusal.find(c.reason), std::string::npos) << refusal;
      }
    }
  }
}

// MobileNetV2 as torchvision exports it: Conv (no bias) -> BatchNormalization -> Clip(0, 6).
// Canonicalization folds the BatchNorm into the conv's bias; the conv, its bias and the Clip become
// one relu6 region, which the partition report names, and the outputs keep their bits.
TEST(CutlassTable, MobileNetConvBnClipIsOneRelu6Region) {
  const std::string text =
      "graph g(%x: f32[batch,8,5,5]) -> (%y) {\n"
      "  %w = const f32[16,8,3,3] @00000000000000c1\n"
      "  %scale = const f32[16] @00000000000000c2\n  %beta = const f32[16] @00000000000000c3\n"
      "  %mean = const f32[16] @00000000000000c4\n  %var = const f32[16] [1.0, 0.5, 2.0, 1.5, 1.0, 0.5, 2.0, 1.5, "
      "1.0, 0.5, 2.0, 1.5, 1.0, 0.5, 2.0, 1.5]\n"
      "  %lo = const f32[] [0.0]\n  %hi = const f32[] [6.0]\n"
      "  %c = Conv(%x, %w) {kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]}\n"
      "  %bn = BatchNormalization(%c, %scale, %beta, %mean, %var) {epsilon=1e-5}\n"
      "  %y = Clip(%bn, %lo, %hi)\n}\n";
  ir::Graph canon = transform::canonicalize(parse(text));
  auto ins = inputs_for(canon);
  for (auto& [name, t] : ins)  // conv sums of 72 products: scale up so some outputs pass 6
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, 4 * t.get_f64(i));
  auto want = reference::run(canon, ins);
  auto r = partition::partition(canon.clone(), cutlass_backend::pattern_table());
  ASSERT_EQ(r.regions.size(), 1u) << ir::print(r.graph);
  EXPECT_EQ(r.regions[0].pattern, "cutlass.conv2d_fprop_bias_relu6");
  const ir::Node* comp = composite_of(r.graph);
  ASSERT_TRUE(comp);
  EXPECT_EQ(comp->attr_string("epilogue"), "bias_relu6");
  EXPECT_EQ(r.graph.nodes().size(), 1u) << "nothing outside the region: " << ir::print(r.graph);
  const std::string report = partition::format_report(partition::make_report(r, {{"batch", 2}}), "cutlass");
  EXPECT_NE(report.find("cutlass.conv2d_fprop_bias_relu6"), std::string::npos) << report;
  EXPECT_NE(report.find("epilogue=bias_relu6"), std::string::npos) << report;
  EXPECT_NE(report.find("clip_max: f32[]"), std::string::npos) << report;
  auto got = reference::run(r.graph, ins);
  ASSERT_EQ(got[0].dims(), want[0].dims());
  EXPECT_EQ(std::memcmp(got[0].bytes(), want[0].bytes(), want[0].nbytes()), 0);
  double top = 0;
  for (int64_t i = 0; i < want[0].numel(); ++i) top = std::max(top, want[0].get_f64(i));
  EXPECT_EQ(top, 6.0) << "the clamp at 6 is exercised";
}

TEST(CutlassTable, AlignmentIsSixteenBytes) {
  EXPECT_EQ(cutlass_backend::max_alignment(ir::DType::f16), 8);
  EXPECT_EQ(cutlass_backend::max_alignment(ir::DType::bf16), 8);
  EXPECT_EQ(cutlass_backend::max_alignment(ir::DType::f32), 4);
  EXPECT_EQ(cutlass_backend::fallback_alignment(ir::DType::f16, 3), 1);
  EXPECT_EQ(cutlass_backend::fallback_alignment(ir::DType::f16, 12), 4);
  EXPECT_EQ(cutlass_backend::fallback_alignment(ir::DType::f32, 10), 2);
}

}  // namespace
}  // namespace sabre
