// The native fusions as table entries (src/codegen/passes/fusion.h): every entry is a lowering pass
// of its name, in the lowering's order, with its algebra and a printable structure; run_fusion's
// verdicts (fuse, keep, not_mine, refuse, and a refused part of a fused match) record, count and
// note as fusion.h says; op_any matches an op whatever its operand count.
// The per-fusion cases (fires / nothing to do / refused) are tests/golden/lower/<pass>/.
#include <gtest/gtest.h>

#include <algorithm>

#include "codegen/lower.h"
#include "codegen/passes/fusion.h"
#include "ir/infer.h"
#include "ir/printer.h"
#include "transform/canonicalize.h"

namespace sabre::codegen::passes {
namespace {

TEST(FusionTable, EveryEntryIsALoweringPassInTheLoweringsOrder) {
  const std::vector<std::string> passes = lowering_pass_names();
  size_t last = 0;
  ASSERT_FALSE(fusion_table().empty());
  for (const Fusion* f : fusion_table()) {
    auto it = std::find(passes.begin(), passes.end(), std::string(f->name));
    ASSERT_NE(it, passes.end()) << f->name << " is no lowering pass";
    const size_t at = static_cast<size_t>(it - passes.begin());
    EXPECT_GT(at + 1, last) << f->name << " is out of the lowering's order";
    last = at + 1;
    EXPECT_FALSE(f->algebra.empty()) << f->name;
    EXPECT_FALSE(f->structure.str().empty()) << f->name;
    EXPECT_TRUE(f->check && f->record) << f->name;
  }
}

// The fusion passes are all table entries, none a hand-written walk of the graph.
TEST(FusionTable, EveryNativeFusionPassIsAnEntry) {
  for (const std::string& pass : lowering_pass_names()) {
    if (!(pass.rfind("fuse_", 0) == 0 || pass == "slice_range_gather" || pass == "group_elementwise")) continue;
    bool found = false;
    for (const Fusion* f : fusion_table()) found |= f->name == pass;
    EXPECT_TRUE(found) << pass << " is a hand-written pass, not a Fusion entry (fusion.h)";
  }
}

ir::Graph graph() {
  transform::register_ops();
  ir::Graph g = ir::parse_graph(R"(graph g(%x: f32[2,8]) -> (%y) {
    %a = Relu(%x) name="fuse_me"
    %b = Relu(%a) name="keep_me"
    %c = Relu(%b) name="keep_quietly"
    %d = Relu(%c) name="refuse_me"
    %e = Relu(%d) name="not_mine"
    %y = Relu(%e) name="fuse_part"
  })");
  ir::infer_types(g);
  return g;
}

// A check keyed by the Relu's name; record marks the node absorbed, so what was recorded shows.
TEST(FusionTable, RunFusionRecordsCountsAndNotesPerVerdict) {
  const ir::Graph g = graph();
  LowerOptions o;
  LowerContext cx(g, o);
  const Fusion f{"test_fusion", "y = Relu(x)", pattern::op("Relu", {pattern::wildcard("x")}),
                 [](const pattern::Match& m, LowerContext&) {
                   const std::string& n = m.root->name();
                   if (n == "fuse_me") return Verdict::fuse();
                   if (n == "keep_me") return Verdict::keep("part of keep_me not taken");
                   if (n == "keep_quietly") return Verdict::keep();
                   if (n == "refuse_me") return Verdict::refuse("refused at refuse_me");
                   if (n == "fuse_part") return Verdict::fuse("part of fuse_part not taken").with(std::string("kept"));
                   return Verdict::not_mine();
                 },
                 [](const pattern::Match& m, const Verdict& v, LowerContext& cx) {
                   cx.absorbed.insert(m.root);
                   if (m.root->name() == "fuse_part") {
                     EXPECT_EQ(std::any_cast<std::string>(v.decision), "kept");
                   }
                 }};
  const PassResult r = run_fusion(f, cx);
  EXPECT_EQ(r.fired, 2) << "fuse counts, keep does not";
  std::vector<std::string> recorded;
  for (const Node* n : cx.order)
    if (cx.absorbed.count(n)) recorded.push_back(n->name());
  EXPECT_EQ(recorded, (std::vector<std::string>{"fuse_me", "keep_me", "keep_quietly", "fuse_part"}));
  ASSERT_EQ(r.refused.size(), 3u);
  EXPECT_EQ(r.refused[0].node, "keep_me");
  EXPECT_EQ(r.refused[0].reason, "part of keep_me not taken");
  EXPECT_EQ(r.refused[1].node, "refuse_me");
  EXPECT_EQ(r.refused[1].reason, "refused at refuse_me");
  EXPECT_EQ(r.refused[2].node, "fuse_part");
}

TEST(FusionTable, OpAnyMatchesAnyOperandCountAndPrintsThem) {
  transform::register_ops();
  ir::Graph g = ir::parse_graph(R"(graph g(%x: f32[8], %z: f32[8]) -> (%y, %w) {
    %y = Sum(%x, %z, %x) name="three"
    %w = Sum(%x) name="one"
  })");
  ir::infer_types(g);
  const pattern::Pat p = pattern::op_any("Sum", {pattern::attr_test("named", [](const Node&) { return true; })});
  EXPECT_TRUE(pattern::match_at(p, g.find_value("y")->producer()));
  EXPECT_TRUE(pattern::match_at(p, g.find_value("w")->producer()));
  EXPECT_FALSE(pattern::match_at(pattern::op("Sum", {pattern::wildcard()}), g.find_value("y")->producer()));
  EXPECT_EQ(p.str(), "Sum(..., named)");
  // "*": any op of the domain that passes the attrs.
  const pattern::Pat any = pattern::op_any("*", {pattern::attr_test("one input", [](const Node& n) { return n.num_inputs() == 1; })});
  EXPECT_FALSE(pattern::match_at(any, g.find_value("y")->producer()));
  EXPECT_TRUE(pattern::match_at(any, g.find_value("w")->producer()));
}

}  // namespace
}  // namespace sabre::codegen::passes
