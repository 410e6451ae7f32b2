// fold_constants: constant subgraphs become constants; a Pad whose pads are all zero reads through.
#include "transform/fold_constants.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "ir/infer.h"

namespace sabre::transform {
namespace {

using ir::Dim;
using ir::DType;

// x [2,5,6] -> Pad(x, PADS, mode) -> Relu -> y
ir::Graph padded(const std::vector<int64_t>& pads, bool pad_is_output = false) {
  ir::Graph g;
  ir::Value* x = g.add_input("x", {DType::f32, {Dim(2), Dim(5), Dim(6)}});
  ir::Value* p = g.add_constant("pads", ir::Tensor::from_i64(pads, {static_cast<int64_t>(pads.size())}));
  ir::Value* padded = g.add_node("Pad", {x, p}, 1, {{"mode", std::string("constant")}}, "pad")->output(0);
  if (pad_is_output) g.add_output(padded);
  g.add_output(g.add_node("Relu", {padded}, 1, {}, "relu")->output(0));
  ir::infer_types(g);
  return g;
}

int count(const ir::Graph& g, const std::string& op) {
  int c = 0;
  for (const ir::Node* n : g.topo_order()) c += n->op() == op;
  return c;
}

TEST(FoldConstants, ZeroPadsReadThrough) {
  ir::Graph g = fold_constants(padded({0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(count(g, "Pad"), 0);
  ASSERT_EQ(count(g, "Relu"), 1);
  for (const ir::Node* n : g.topo_order())
    if (n->op() == "Relu") EXPECT_EQ(n->input(0)->name(), "x");
}

TEST(FoldConstants, NonZeroPadsStay) {
  ir::Graph g = fold_constants(padded({0, 0, 1, 0, 0, 1}));
  EXPECT_EQ(count(g, "Pad"), 1);
}

TEST(FoldConstants, ZeroPadThatIsAGraphOutputStays) {
  ir::Graph g = fold_constants(padded({0, 0, 0, 0, 0, 0}, /*pad_is_output=*/true));
  EXPECT_EQ(count(g, "Pad"), 1);
}

}  // namespace
}  // namespace sabre::transform
