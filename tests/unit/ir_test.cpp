// IR core: graph bookkeeping (users, producers, rewiring, dead code, order, clone, verify), tensors
// (16-bit float rounding, copy-on-write, hashing) and attribute getters.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "ir/graph.h"
#include "ir/printer.h"

using namespace sabre::ir;

namespace {

size_t count(const std::vector<Node*>& v, const Node* n) { return static_cast<size_t>(std::count(v.begin(), v.end(), n)); }

// x -> Relu -> Add(relu, w) -> out, plus a dead Neg of x.
struct Small {
  Graph g;
  Value *x, *w;
  Node *relu, *add, *dead;
  Small() {
    x = g.add_input("x", {DType::f32, {Dim::symbol("n"), 4}, true});
    w = g.add_constant("w", Tensor::from_f32({1, 2, 3, 4}, {4}));
    relu = g.add_node("Relu", {x}, 1);
    add = g.add_node("Add", {relu->output(0), w}, 1);
    dead = g.add_node("Neg", {x}, 1);
    g.add_output(add->output(0));
  }
};

}  // namespace

TEST(Graph, TracksUsersAndProducers) {
  Small s;
  EXPECT_EQ(s.relu->output(0)->producer(), s.relu);
  EXPECT_EQ(s.x->producer(), nullptr);
  EXPECT_EQ(count(s.x->users(), s.relu), 1u);
  EXPECT_EQ(count(s.x->users(), s.dead), 1u);
  // A node reading the same value twice appears once per slot.
  Node* sq = s.g.add_node("Mul", {s.x, s.x}, 1);
  EXPECT_EQ(count(s.x->users(), sq), 2u);
  sq->set_input(1, s.w);
  EXPECT_EQ(count(s.x->users(), sq), 1u);
  EXPECT_EQ(count(s.w->users(), sq), 1u);
  sq->set_input(1, nullptr);
  EXPECT_EQ(count(s.w->users(), sq), 0u);
  EXPECT_EQ(sq->input(1), nullptr);
  EXPECT_EQ(sq->input(7), nullptr);  // past the end reads as absent
}

TEST(Graph, ReplaceAllUsesRewiresNodesAndOutputs) {
  Small s;
  Value* out = s.add->output(0);
  Node* id = s.g.add_node("Identity", {s.relu->output(0)}, 1);
  s.g.replace_all_uses(out, id->output(0));
  EXPECT_EQ(s.g.outputs()[0], id->output(0));
  s.g.replace_all_uses(s.relu->output(0), s.x);
  EXPECT_EQ(s.add->input(0), s.x);
  EXPECT_EQ(id->input(0), s.x);
  EXPECT_TRUE(s.relu->output(0)->users().empty());
}

TEST(Graph, RemoveDeadKeepsOnlyWhatReachesOutputs) {
  Small s;
  Value* unused = s.g.add_constant("unused", Tensor::from_f32({5}, {1}));
  (void)unused;
  EXPECT_EQ(s.g.num_nodes(), 3u);
  s.g.remove_dead();
  EXPECT_EQ(s.g.num_nodes(), 2u);
  EXPECT_EQ(s.g.find_value("unused"), nullptr);
  EXPECT_NE(s.g.find_value("w"), nullptr);
  EXPECT_NE(s.g.find_value("x"), nullptr);  // inputs stay even when only dead nodes read them
  EXPECT_EQ(count(s.x->users(), s.relu), 1u);
  EXPECT_EQ(s.x->users().size(), 1u);
  verify(s.g, /*require_types=*/false);
}

TEST(Graph, RemoveNodeRefusesLiveOutputs) {
  Small s;
  EXPECT_THROW(s.g.remove_node(s.relu), IrError);  // Add still reads it
  EXPECT_THROW(s.g.remove_node(s.add), IrError);   // a graph output
  s.g.remove_node(s.dead);
  EXPECT_EQ(s.g.num_nodes(), 2u);
}

TEST(Graph, TopoOrderIsStableAndSortFixesInsertionOrder) {
  Graph g;
  Value* x = g.add_input("x", {DType::f32, {2}, true});
  Value* later = g.add_value("later");
  Node* consumer = g.add_node("Relu", {later}, 1);  // inserted before its producer
  Node* producer = g.add_node_with_outputs("Neg", {x}, {later});
  Node* free_node = g.add_node("Abs", {x}, 1);
  g.add_output(consumer->output(0));
  g.add_output(free_node->output(0));
  auto order = g.topo_order();
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[0], producer);
  EXPECT_EQ(order[1], consumer);
  EXPECT_EQ(order[2], free_node);
  g.sort();
  EXPECT_EQ(g.nodes(), order);
  // A cycle is an error, not a hang.
  producer->set_input(0, consumer->output(0));
  EXPECT_THROW(g.topo_order(), IrError);
}

TEST(Graph, CloneIsDeepAndIndependent) {
  Small s;
  s.relu->output(0)->set_type(DType::f32, {Dim::symbol("n"), 4});
  Graph c = s.g.clone();
  EXPECT_EQ(print(c), print(s.g));
  Value* cx = c.find_value("x");
  ASSERT_NE(cx, nullptr);
  EXPECT_NE(cx, s.x);
  // Rewiring the clone leaves the original alone.
  c.replace_all_uses(c.find_value(s.relu->output(0)->name()), cx);
  EXPECT_NE(print(c), print(s.g));
  EXPECT_EQ(s.add->input(0), s.relu->output(0));
  // Constants share storage: they are immutable.
  EXPECT_EQ(c.find_value("w")->constant().bytes(), s.w->constant().bytes());
}

TEST(Graph, FreshNamesNeverCollide) {
  Graph g;
  Value* a = g.add_value("a");
  Value* a2 = g.add_value("a");
  Value* anon = g.add_value("");
  EXPECT_EQ(a->name(), "a");
  EXPECT_NE(a2->name(), "a");
  EXPECT_FALSE(anon->name().empty());
  EXPECT_NE(anon->name(), a2->name());
  EXPECT_THROW(g.add_input("a", {DType::f32, {}, true}), IrError);
  g.rename_value(a2, "b");
  EXPECT_EQ(g.find_value("b"), a2);
  EXPECT_EQ(g.find_value(a2->name()), a2);
}

TEST(Graph, SymbolsInFirstAppearanceOrder) {
  Graph g;
  g.add_input("a", {DType::f32, {Dim::symbol("seq"), Dim::symbol("batch") * Dim::symbol("seq")}, true});
  g.add_input("b", {DType::f32, {Dim::symbol("past") + Dim::symbol("seq"), 3}, true});
  EXPECT_EQ(g.symbols(), (std::vector<std::string>{"seq", "batch", "past"}));
}

TEST(Graph, SmallIntegerConstantsKnowTheirDims) {
  Graph g;
  Value* shape = g.add_constant("shape", Tensor::from_i64({2, -1, 64}, {3}));
  ASSERT_TRUE(shape->known_dims().has_value());
  EXPECT_EQ(str(*shape->known_dims()), "[2,-1,64]");
  Value* f = g.add_constant("f", Tensor::from_f32({2}, {1}));
  EXPECT_FALSE(f->known_dims().has_value());
  EXPECT_EQ(str(f->shape()), "[1]");
  EXPECT_TRUE(f->type().known);
}

TEST(Verify, NamesTheBrokenInvariant) {
  {
    Small s;
    EXPECT_NO_THROW(verify(s.g, false));
    try {
      verify(s.g, true);
      FAIL();
    } catch (const IrError& e) {
      EXPECT_NE(std::string(e.what()).find("has no inferred type"), std::string::npos) << e.what();
    }
  }
  {
    Small s;
    s.g.add_node("Relu", {s.x}, 1, {}, s.relu->name());
    try {
      verify(s.g, false);
      FAIL();
    } catch (const IrError& e) {
      EXPECT_NE(std::string(e.what()).find("duplicate node name"), std::string::npos) << e.what();
    }
  }
  {
    Small s;
    s.g.add_output(s.g.add_value("ghost"));
    try {
      verify(s.g, false);
      FAIL();
    } catch (const IrError& e) {
      EXPECT_EQ(std::string(e.what()), "graph output 'ghost' is never defined");
    }
  }
}

TEST(Node, AttributeGettersCheckTypes) {
  Graph g;
  Value* x = g.add_input("x", {DType::f32, {2}, true});
  Node* n = g.add_node("Op", {x}, 1,
                       {{"i", int64_t{3}}, {"f", 0.5}, {"s", std::string("f16")}, {"is", std::vector<int64_t>{1, 2}}});
  EXPECT_EQ(n->attr_int("i"), 3);
  EXPECT_EQ(n->attr_int("missing", 7), 7);
  EXPECT_EQ(n->attr_float("f"), 0.5);
  EXPECT_EQ(n->attr_string("s"), "f16");
  EXPECT_EQ(n->attr_string("nope", "d"), "d");
  EXPECT_EQ(n->attr_ints("is"), (std::vector<int64_t>{1, 2}));
  EXPECT_THROW(n->attr_int("f"), IrError);  // a float is not an int
  EXPECT_THROW(n->attr_int("missing"), IrError);
  EXPECT_THROW(n->attr_graph("i"), IrError);
}

TEST(Tensor, HalfAndBfloatRoundToNearestEven) {
  // f16: 1 + 2^-11 is exactly halfway between 1 and 1 + 2^-10: ties to even (1).
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie to even upward
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);                          // rounds to inf
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);             // smallest subnormal
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(NAN))));
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  // Every finite half survives half -> float -> half.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if (((h >> 10) & 0x1f) == 0x1f) continue;
    ASSERT_EQ(float_to_half(half_to_float(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
}

TEST(Tensor, CopyOnWriteKeepsCopiesApart) {
  Tensor a = Tensor::from_f32({1, 2, 3}, {3});
  Tensor b = a;
  EXPECT_EQ(a.bytes(), b.bytes());  // shared until written
  b.set_f64(0, 9);
  EXPECT_EQ(a.get_f64(0), 1);
  EXPECT_EQ(b.get_f64(0), 9);
  EXPECT_NE(a.bytes(), b.bytes());
}

TEST(Tensor, CastAndHash) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-50, 50);
  std::vector<float> v(24);
  for (auto& x : v) x = u(rng);
  Tensor t = Tensor::from_f32(v, {2, 3, 4});
  Tensor h = t.cast(DType::f16);
  Tensor i = t.cast(DType::i32);
  for (int64_t k = 0; k < t.numel(); ++k) {
    EXPECT_NEAR(h.get_f64(k), v[static_cast<size_t>(k)], 0.05);
    EXPECT_EQ(i.get_i64(k), static_cast<int64_t>(v[static_cast<size_t>(k)]));  // truncation toward zero
  }
  Tensor same = Tensor::from_f32(v, {2, 3, 4});
  Tensor reshaped = Tensor::from_f32(v, {6, 4});
  EXPECT_EQ(t.content_hash(), same.content_hash());
  EXPECT_NE(t.content_hash(), reshaped.content_hash());
  EXPECT_NE(t.content_hash(), h.content_hash());
  same.set_f64(23, v[23] + 1);
  EXPECT_NE(t.content_hash(), same.content_hash());
}
