// The pattern language: sharing binds one value, commutative operands, alternatives with
// backtracking, optional tails, attribute constraints, captures; and the partitioner's region
// rules (no overlap, no cycle) on hand-built graphs.
#include <gtest/gtest.h>

#include "ir/infer.h"
#include "ir/printer.h"
#include "partition/partitioner.h"
#include "pattern/pattern.h"

namespace sabre::partition {
namespace {

ir::Graph parse(const std::string& text) {
  ir::Graph g = ir::parse_graph(text);
  ir::infer_types(g);
  return g;
}

ir::Node* producer(ir::Graph& g, const std::string& value) { return g.find_value(value)->producer(); }

TEST(Pattern, SharedSubpatternMustBindOneValue) {
  ir::Graph g = parse(R"(graph g(%a: f32[4], %b: f32[4]) -> (%y, %z) {
    %s = Sigmoid(%a)
    %y = Mul(%a, %s)
    %z = Mul(%b, %s)
  })");
  Pat x = wildcard("x");
  Pat silu = x * op("Sigmoid", {x});
  auto m = match_at(silu, producer(g, "y"));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->value("x"), g.find_value("a"));
  EXPECT_EQ(m->region.size(), 2u);
  EXPECT_EQ(m->region.back(), producer(g, "y")) << "post-order: the root comes last";
  EXPECT_FALSE(match_at(silu, producer(g, "z"))) << "b*sigmoid(a) is not silu";
}

TEST(Pattern, CommutativeOperandsMatchEitherOrder) {
  ir::Graph g = parse(R"(graph g(%a: f32[4]) -> (%y) {
    %c = const f32[] [0.5]
    %y = Mul(%c, %a)
  })");
  EXPECT_TRUE(match_at(wildcard("x") * scalar(0.5), producer(g, "y")));
  EXPECT_FALSE(match_at(op("Mul", {wildcard(), scalar(0.5)}), producer(g, "y"))) << "op() keeps the order";
  EXPECT_FALSE(match_at(wildcard() * scalar(0.25), producer(g, "y"))) << "scalar compares the value";
}

TEST(Pattern, AlternativesBacktrackWhenALaterOperandFails) {
  // The first choice for the left operand matches, but then the right operand cannot: the matcher
  // must come back and try the second choice.
  ir::Graph g = parse(R"(graph g(%a: f32[4]) -> (%y) {
    %r = Relu(%a)
    %y = Add(%r, %a)
  })");
  // Choice 1 binds x to %r, then the right operand %a is not %r: back to choice 2, Relu(x) with x=%a.
  Pat x = wildcard("x");
  Pat p = op("Add", {alt({x, op("Relu", {x})}), x});
  auto m = match_at(p, producer(g, "y"));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->value("x"), g.find_value("a"));
  EXPECT_EQ(m->region.size(), 2u) << "the Relu joined through the second choice";
}

TEST(Pattern, OptionalTailTakesTheTailWhenPresent) {
  ir::Graph g = parse(R"(graph g(%a: f32[4], %b: f32[4]) -> (%y, %z) {
    %m = MatMul(%a, %b)
    %y = Relu(%m)
    %z = Tanh(%a)
  })");
  Pat p = optional_tail(op("MatMul", {wildcard("A"), wildcard("B")}), [](Pat x) { return op("Relu", {x}); });
  auto m = match_at(p, producer(g, "y"));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->region.size(), 2u);
  auto bare = match_at(p, producer(g, "m"));
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->region.size(), 1u);
  EXPECT_FALSE(match_at(p, producer(g, "z")));
}

TEST(Pattern, AttributeConstraintsWithDefaults) {
  ir::Graph g = parse(R"(graph g(%a: f32[4]) -> (%y, %z) {
    %y = Gelu(%a)
    %z = Gelu(%a) {approximate="tanh"}
  })");
  Pat erf = op("Gelu", {wildcard()}, {attr_eq("approximate", std::string("none"), std::string("none"))});
  EXPECT_TRUE(match_at(erf, producer(g, "y"))) << "absent attribute takes its ONNX default";
  EXPECT_FALSE(match_at(erf, producer(g, "z")));
  EXPECT_EQ(erf.str(), "Gelu(_, approximate=\"none\")");
}

TEST(Pattern, ConstantOnlyMatchesConstants) {
  ir::Graph g = parse(R"(graph g(%a: f32[4], %b: f32[4]) -> (%y, %z) {
    %c = const f32[4] [1, 2, 3, 4]
    %y = Add(%a, %c)
    %z = Add(%a, %b)
  })");
  Pat p = wildcard("x") + constant("bias");
  auto m = match_at(p, producer(g, "y"));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->value("bias"), g.find_value("c"));
  EXPECT_FALSE(match_at(p, producer(g, "z")));
}

// The cycle case: a region {MatMul, Add} whose MatMul output leaves through Relu and comes back
// into the Add. Contracting it would make a node that feeds itself.
TEST(Partition, RefusesARegionThatAPathLeavesAndReenters) {
  ir::Graph g = parse(R"(graph g(%x: f32[2,4], %w: f32[4,4]) -> (%y) {
    %t = MatMul(%x, %w)
    %r = Relu(%t)
    %y = Add(%t, %r)
  })");
  std::vector<ir::Node*> region = {producer(g, "t"), producer(g, "y")};
  auto why = region_problem(g, region);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("cycle"), std::string::npos) << *why;

  PatternTable t{"test", {{"test.mm_add", "D = A·B + R", op("MatMul", {wildcard("A"), wildcard("B")}) + wildcard("R"),
                           nullptr, {"A", "B", "R"}}}};
  auto r = partition(std::move(g), t);
  EXPECT_TRUE(r.regions.empty());
  ASSERT_FALSE(r.refusals.empty());
  EXPECT_NE(r.refusals[0].reason.find("cycle"), std::string::npos);
  ir::verify(r.graph);
}

TEST(Partition, RegionsNeverOverlap) {
  ir::Graph g = parse(R"(graph g(%x: f32[4]) -> (%y) {
    %a = Relu(%x)
    %b = Tanh(%a)
    %y = Sigmoid(%b)
  })");
  // Both entries want the Tanh: the first in priority order gets it, the second finds nothing.
  PatternTable t{"test",
                 {{"test.relu_tanh", "", op("Tanh", {op("Relu", {wildcard("x")})}), nullptr, {"x"}},
                  {"test.tanh_sigmoid", "", op("Sigmoid", {op("Tanh", {wildcard("x")})}), nullptr, {"x"}}}};
  auto r = partition(std::move(g), t);
  ASSERT_EQ(r.regions.size(), 1u);
  EXPECT_EQ(r.regions[0].pattern, "test.relu_tanh");
  ir::verify(r.graph);
}

TEST(Partition, CheckRefusalKeepsTheGraphAndSaysWhy) {
  ir::Graph g = parse(R"(graph g(%x: f32[4]) -> (%y) {
    %y = Relu(%x)
  })");
  PatternTable t{"test",
                 {{"test.relu", "", op("Relu", {wildcard("x")}), [](const Match&) { return CheckResult::refuse("no"); }, {"x"}}}};
  auto r = partition(std::move(g), t);
  EXPECT_TRUE(r.regions.empty());
  ASSERT_EQ(r.refusals.size(), 1u);
  EXPECT_EQ(r.refusals[0].reason, "no");
  EXPECT_EQ(r.graph.num_nodes(), 1u);
}

}  // namespace
}  // namespace sabre::partition
