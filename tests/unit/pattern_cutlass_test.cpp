// Every entry of the CUTLASS table, from its name: a graph where it fires (one region, that
// pattern, bit-identical outputs), one with nothing to do (the epilogue without a GEMM/conv), one
// with an unaligned contraction dim (fires on the fallback kernels' alignment, and says why), and
// one its check refuses (grouped convs; f64 GEMMs), with the refusal's reason.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <sstream>

#include "backends/cutlass/patterns.h"
#include "ir/infer.h"
#include "ir/printer.h"
#include "partition/partitioner.h"
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
    else if (t == "silu") s << "  " << v << "s = Sigmoid(" << last << ")\n  " << v << " = Mul(" << last << ", " << v << "s)\n";
    else ADD_FAILURE() << "token " << t << " of " << entry << " has no graph builder";
    last = v;
  }
  s << "  %y = Identity(" << last << ")\n}\n";
  return s.str();
}

ir::Graph parse(const std::string& text) {
  transform::register_ops();
  partition::register_composite_op();
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
