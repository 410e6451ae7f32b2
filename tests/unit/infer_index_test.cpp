// Shape inference for list operands computed at run time (axes, split sizes, repeats) and for the
// ops whose output size depends on the data: the rank is known, the dims become unknown symbols.
#include <gtest/gtest.h>

#include "ir/infer.h"

namespace sabre::ir {
namespace {

std::string shape_of(const Value* v) { return str(v->shape()); }
bool all_unknown(const Value* v) {
  for (const Dim& d : v->shape())
    if (d.is_static()) return false;
  return true;
}

TEST(InferRuntimeLists, UnsqueezeAxesInputGivesRankAndUnknownDims) {
  Graph g;
  Value* x = g.add_input("x", {DType::f32, {Dim(3), Dim(4)}});
  Value* axes = g.add_input("axes", {DType::i64, {Dim(2)}});
  Node* n = g.add_node("Unsqueeze", {x, axes}, 1);
  infer_types(g);
  EXPECT_EQ(n->output(0)->shape().size(), 4u);
  EXPECT_TRUE(all_unknown(n->output(0)));
}

TEST(InferRuntimeLists, ReduceKeepdimsAndNot) {
  Graph g;
  Value* x = g.add_input("x", {DType::f32, {Dim(2), Dim(3), Dim(4)}});
  Value* axes = g.add_input("axes", {DType::i64, {Dim(1)}});
  Node* keep = g.add_node("ReduceSum", {x, axes}, 1);
  Node* drop = g.add_node("ReduceMax", {x, axes}, 1, {{"keepdims", int64_t{0}}});
  infer_types(g);
  EXPECT_EQ(keep->output(0)->shape().size(), 3u);
  EXPECT_EQ(drop->output(0)->shape().size(), 2u);
}

TEST(InferRuntimeLists, SplitSizesInputKeepsTheOtherDims) {
  Graph g;
  Value* x = g.add_input("x", {DType::f32, {Dim(7), Dim(3)}});
  Value* s = g.add_input("split", {DType::i64, {Dim(2)}});
  Node* n = g.add_node("Split", {x, s}, 2);
  infer_types(g);
  EXPECT_FALSE(n->output(0)->shape()[0].is_static());
  EXPECT_EQ(n->output(1)->shape()[1], Dim(3));
}

TEST(InferRuntimeLists, ListOfUnknownLengthIsStillRefused) {
  Graph g;
  Value* x = g.add_input("x", {DType::f32, {Dim(3), Dim(4)}});
  Value* axes = g.add_input("axes", {DType::i64, {Dim::symbol("n")}});
  g.add_node("Unsqueeze", {x, axes}, 1, {}, "u");
  EXPECT_THROW(infer_types(g), ShapeUnsupported);
}

TEST(InferIndex, DataDependentSizes) {
  Graph g;
  Value* x = g.add_input("x", {DType::f32, {Dim(3), Dim(4)}});
  Node* nz = g.add_node("NonZero", {x}, 1);
  Node* topk = g.add_node("TopK", {x, g.add_constant("", Tensor::from_i64({2}, {1}))}, 2);
  Node* uq = g.add_node("Unique", {x}, 4);
  infer_types(g);
  EXPECT_EQ(nz->output(0)->dtype(), DType::i64);
  EXPECT_EQ(nz->output(0)->shape()[0], Dim(2));
  EXPECT_FALSE(nz->output(0)->shape()[1].is_static());
  EXPECT_EQ(shape_of(topk->output(0)), "[3,2]");
  EXPECT_EQ(topk->output(1)->dtype(), DType::i64);
  EXPECT_EQ(shape_of(uq->output(2)), "[12]");
}

TEST(InferIndex, GatherNDAndEinsumShapes) {
  Graph g;
  Value* x = g.add_input("x", {DType::f32, {Dim(2), Dim(3), Dim(4)}});
  Value* idx = g.add_input("i", {DType::i64, {Dim(2), Dim(5), Dim(1)}});
  Node* gnd = g.add_node("GatherND", {x, idx}, 1, {{"batch_dims", int64_t{1}}});
  Value* y = g.add_input("y", {DType::f32, {Dim(2), Dim(4), Dim(6)}});
  Node* es = g.add_node("Einsum", {x, y}, 1, {{"equation", std::string("bij,bjk->bik")}});
  infer_types(g);
  EXPECT_EQ(shape_of(gnd->output(0)), "[2,5,4]");
  EXPECT_EQ(shape_of(es->output(0)), "[2,3,6]");
}

TEST(InferIndex, ConvTransposeOutputSize) {
  Graph g;
  Value* x = g.add_input("x", {DType::f32, {Dim(1), Dim(4), Dim(3), Dim(4)}});
  Value* w = g.add_input("w", {DType::f32, {Dim(4), Dim(3), Dim(3), Dim(2)}});
  Node* n = g.add_node("ConvTranspose", {x, w}, 1,
                       {{"group", int64_t{2}}, {"strides", std::vector<int64_t>{2, 1}},
                        {"pads", std::vector<int64_t>{1, 0, 0, 1}}, {"output_padding", std::vector<int64_t>{1, 0}}});
  infer_types(g);
  // H: 2*(3-1) + 1 + 3 - 1 = 7; W: 1*(4-1) + 0 + 2 - 1 = 4
  EXPECT_EQ(shape_of(n->output(0)), "[1,6,7,4]");
}

}  // namespace
}  // namespace sabre::ir
