// Model statistics: symbolic GEMM/conv FLOPs, parameter counts, histogram.
#include <gtest/gtest.h>

#include "ir/stats.h"

using namespace sabre::ir;

namespace {
Dim sym(const char* s) { return Dim::symbol(s); }

Value* typed(Node* n, DType dt, Shape s) {
  n->output(0)->set_type(dt, std::move(s));
  return n->output(0);
}
}  // namespace

TEST(Stats, GemmAndConvFlopsAreSymbolicPolynomials) {
  Graph g;
  g.name = "m";
  Dim b = sym("batch"), s = sym("seq");
  Value* x = g.add_input("x", {DType::f32, {b, s, 64}, true});
  Value* w1 = g.add_constant("w1", Tensor(DType::f32, {64, 96}));
  Value* h = typed(g.add_node("MatMul", {x, w1}, 1), DType::f32, {b, s, 96});
  // Batched MatMul [batch,seq,96] x [batch,96,seq] -> [batch,seq,seq]: K = 96.
  Value* ht = typed(g.add_node("Transpose", {h}, 1, {{"perm", std::vector<int64_t>{0, 2, 1}}}), DType::f32, {b, 96, s});
  Value* att = typed(g.add_node("MatMul", {h, ht}, 1), DType::f32, {b, s, s});
  // Gemm with transA: A is [K, M] = [5, 3], B [5, 7] -> [3, 7].
  Value* a = g.add_constant("a", Tensor(DType::f16, {5, 3}));
  Value* bm = g.add_constant("bm", Tensor(DType::f16, {5, 7}));
  Value* gm = typed(g.add_node("Gemm", {a, bm}, 1, {{"transA", int64_t{1}}}), DType::f16, {3, 7});
  // Grouped conv: x [batch,8,10,10], W [16, 8/2, 3, 3], groups 2, output [batch,16,8,8].
  Value* img = g.add_input("img", {DType::f32, {b, 8, 10, 10}, true});
  Value* cw = g.add_constant("cw", Tensor(DType::f32, {16, 4, 3, 3}));
  Value* cv = typed(g.add_node("Conv", {img, cw}, 1, {{"group", int64_t{2}}}), DType::f32, {b, 16, 8, 8});
  // ConvTranspose: x [batch,16,8,8], W [16, 4, 2, 2] -> each input element does 4*2*2 MACs.
  Value* tw = g.add_constant("tw", Tensor(DType::f32, {16, 4, 2, 2}));
  Value* ct = typed(g.add_node("ConvTranspose", {cv, tw}, 1), DType::f32, {b, 4, 16, 16});
  // A MatMul whose types were never inferred: counted as unknown, not as zero work.
  Value* un = g.add_node("MatMul", {att, att}, 1)->output(0);
  Value* ids = g.add_constant("ids", Tensor::from_i64({1, 2, 3}, {3}));
  Value* gat = g.add_node("Gather", {w1, ids}, 1)->output(0);
  for (Value* o : {gm, ct, un, gat}) g.add_output(o);

  ModelStats st = compute_stats(g);
  EXPECT_EQ(st.flops.at("MatMul").nodes, 2);
  EXPECT_EQ(st.flops.at("MatMul").unknown, 1);
  EXPECT_EQ(st.flops.at("MatMul").flops.str(), "192*batch*seq*seq+12288*batch*seq");
  EXPECT_EQ(st.flops.at("Gemm").flops.str(), std::to_string(2 * 3 * 7 * 5));
  EXPECT_EQ(st.flops.at("Conv").flops.str(), std::to_string(2 * 16 * 8 * 8 * 4 * 3 * 3) + "*batch");
  EXPECT_EQ(st.flops.at("ConvTranspose").flops.str(), std::to_string(2 * 16 * 8 * 8 * 4 * 2 * 2) + "*batch");
  EXPECT_EQ(*st.total_flops().evaluate({{"batch", 2}, {"seq", 3}}),
            192 * 2 * 9 + 12288 * 6 + 210 + 2 * (73728 + 32768));
  EXPECT_EQ(st.symbols, (std::vector<std::string>{"batch", "seq"}));
  // Float constants only: w1, a, bm, cw, tw; not the i64 indices.
  EXPECT_EQ(st.parameter_count, 64 * 96 + 15 + 35 + 16 * 4 * 9 + 16 * 4 * 4);
  EXPECT_EQ(st.parameter_bytes, 4 * (64 * 96 + 16 * 4 * 9 + 16 * 4 * 4) + 2 * (15 + 35));
  EXPECT_EQ(st.op_histogram.at("MatMul"), 3);
  EXPECT_EQ(st.op_histogram.at("Gather"), 1);
  EXPECT_EQ(st.num_nodes, 8);
}

TEST(Stats, CountsWorkInsideCompositeBodies) {
  auto body = std::make_shared<Graph>();
  body->name = "gemm";
  Value* p = body->add_input("p", {DType::f16, {sym("m"), 32}, true});
  Value* w = body->add_constant("w", Tensor(DType::f16, {32, 16}));
  body->add_output(typed(body->add_node("MatMul", {p, w}, 1), DType::f16, {sym("m"), 16}));
  Graph g;
  Value* x = g.add_input("x", {DType::f16, {sym("m"), 32}, true});
  Node* c = g.add_node("Composite", {x}, 1, {{"body", body}}, "", "sabre");
  g.add_output(c->output(0));
  ModelStats st = compute_stats(g);
  EXPECT_EQ(st.op_histogram.at("sabre.Composite"), 1);
  EXPECT_EQ(st.op_histogram.count("MatMul"), 0u);
  EXPECT_EQ(st.flops.at("MatMul").flops.str(), "1024*m");
  EXPECT_EQ(st.parameter_count, 512);
}

TEST(Stats, HumanCounts) {
  EXPECT_EQ(human_count(999), "999");
  EXPECT_EQ(human_count(1234567), "1.23M");
  EXPECT_EQ(human_count(2.2e9), "2.20G");
  EXPECT_EQ(human_count(-1500), "-1.50K");
}
