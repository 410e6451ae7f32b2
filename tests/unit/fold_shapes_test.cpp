// fold_shapes: static shape subgraphs become constants, symbolic ones stay.
#include "transform/fold_shapes.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>

#include "ir/infer.h"

namespace sabre::transform {
namespace {

using ir::Dim;
using ir::DType;

ir::Value* i64s(ir::Graph& g, const std::vector<int64_t>& v, bool scalar = false) {
  return g.add_constant("", ir::Tensor::from_i64(v, scalar ? std::vector<int64_t>{} : std::vector<int64_t>{static_cast<int64_t>(v.size())}));
}

// x -> Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), Unsqueeze(Gather(Shape(x), 1)), [12], [64])) -> out
ir::Graph bert_reshape(ir::Shape xshape) {
  ir::Graph g;
  ir::Value* x = g.add_input("x", {DType::f32, xshape});
  std::vector<ir::Value*> parts;
  for (int64_t i : {0, 1}) {
    ir::Value* s = g.add_node("Shape", {x}, 1)->output(0);
    ir::Value* d = g.add_node("Gather", {s, i64s(g, {i}, true)}, 1, {{"axis", int64_t{0}}})->output(0);
    parts.push_back(g.add_node("Unsqueeze", {d, i64s(g, {0})}, 1)->output(0));
  }
  parts.push_back(i64s(g, {12}));
  parts.push_back(i64s(g, {64}));
  ir::Value* shape = g.add_node("Concat", parts, 1, {{"axis", int64_t{0}}})->output(0);
  g.add_output(g.add_node("Reshape", {x, shape}, 1, {}, "reshape")->output(0));
  return g;
}

TEST(FoldShapes, StaticDimsFoldToConstants) {
  ir::Graph g = bert_reshape({Dim(2), Dim(16), Dim(768)});
  ir::infer_types(g);
  g = fold_shapes(std::move(g));
  ASSERT_EQ(g.num_nodes(), 1u) << "only the Reshape is left";
  const ir::Node* r = g.nodes()[0];
  EXPECT_EQ(r->op(), "Reshape");
  ASSERT_TRUE(r->input(1)->is_constant());
  EXPECT_EQ(r->input(1)->constant().to_i64_vector(), (std::vector<int64_t>{2, 16, 12, 64}));
  EXPECT_EQ(r->input(1)->dtype(), DType::i64);
  EXPECT_EQ(ir::str(g.outputs()[0]->shape()), "[2,16,12,64]");
  ir::verify(g);
}

TEST(FoldShapes, SymbolicDimsStayComputed) {
  ir::Graph g = bert_reshape({Dim::symbol("batch"), Dim::symbol("seq"), Dim(768)});
  ir::infer_types(g);
  size_t before = g.num_nodes();
  g = fold_shapes(std::move(g));
  EXPECT_EQ(g.num_nodes(), before);
  const ir::Node* r = g.outputs()[0]->producer();
  EXPECT_FALSE(r->input(1)->is_constant());
  EXPECT_EQ(ir::str(g.outputs()[0]->shape()), "[batch,seq,12,64]");
}

TEST(FoldShapes, PartlyStaticFoldsTheStaticPart) {
  // Shape(x)[2] is static (768) even when batch and seq are not.
  ir::Graph g;
  ir::Value* x = g.add_input("x", {DType::f32, {Dim::symbol("batch"), Dim::symbol("seq"), Dim(768)}});
  ir::Value* s = g.add_node("Shape", {x}, 1)->output(0);
  ir::Value* hidden = g.add_node("Gather", {s, i64s(g, {2})}, 1, {{"axis", int64_t{0}}}, "hidden")->output(0);
  ir::Value* tgt = g.add_node("Concat", {i64s(g, {-1}), hidden}, 1, {{"axis", int64_t{0}}})->output(0);
  g.add_output(g.add_node("Reshape", {x, tgt}, 1)->output(0));
  ir::infer_types(g);
  g = fold_shapes(std::move(g));
  ASSERT_EQ(g.num_nodes(), 1u);
  EXPECT_EQ(g.nodes()[0]->input(1)->constant().to_i64_vector(), (std::vector<int64_t>{-1, 768}));
  EXPECT_EQ(ir::str(g.outputs()[0]->shape()), "[batch*seq,768]");
}

TEST(FoldShapes, NothingToFold) {
  ir::Graph g;
  ir::Value* x = g.add_input("x", {DType::f32, {Dim(2), Dim(3)}});
  g.add_output(g.add_node("Relu", {x}, 1)->output(0));
  ir::infer_types(g);
  g = fold_shapes(std::move(g));
  EXPECT_EQ(g.num_nodes(), 1u);
}

TEST(FoldShapes, GraphOutputsAreNotReplaced) {
  // A static Shape that the user asked for keeps its node (and its name).
  ir::Graph g;
  ir::Value* x = g.add_input("x", {DType::f32, {Dim(2), Dim(3)}});
  ir::Value* s = g.add_node("Shape", {x}, 1)->output(0);
  g.add_output(s);
  ir::infer_types(g);
  g = fold_shapes(std::move(g));
  EXPECT_EQ(g.num_nodes(), 1u);
  EXPECT_EQ(g.outputs()[0], s);
}

// Window-attention padding as torchvision's Swin exports it: p = (7 - W % 7) % 7 from Shape(x),
// then Pad(x, [0, 0, 0, p]). A static W must give a static padded width; a symbolic one stays
// unknown rather than guessed.
// With torch_pads, the list goes the way torch.onnx exports F.pad(x, (0, p)): [0, p, 0, 0] reshaped
// to [2, 2], its rows reversed (Slice step -1), transposed and flattened back.
ir::Graph window_pad(ir::Shape xshape, bool torch_pads = false) {
  ir::Graph g;
  ir::Value* x = g.add_input("x", {DType::f32, xshape});
  ir::Value* s = g.add_node("Shape", {x}, 1)->output(0);
  ir::Value* w = g.add_node("Gather", {s, i64s(g, {1}, true)}, 1, {{"axis", int64_t{0}}})->output(0);
  ir::Value* m = g.add_node("Mod", {w, i64s(g, {7}, true)}, 1, {{"fmod", int64_t{0}}})->output(0);
  ir::Value* d = g.add_node("Sub", {i64s(g, {7}, true), m}, 1)->output(0);
  ir::Value* p = g.add_node("Mod", {d, i64s(g, {7}, true)}, 1, {{"fmod", int64_t{0}}})->output(0);
  ir::Value* pu = g.add_node("Unsqueeze", {p, i64s(g, {0})}, 1)->output(0);
  ir::Value* pads = g.add_node("Concat", {i64s(g, {0, 0, 0}), pu}, 1, {{"axis", int64_t{0}}})->output(0);
  if (torch_pads) {
    ir::Value* l = g.add_node("Concat", {i64s(g, {0}), pu, i64s(g, {0, 0})}, 1, {{"axis", int64_t{0}}})->output(0);
    ir::Value* m2 = g.add_node("Reshape", {l, i64s(g, {-1, 2})}, 1)->output(0);
    ir::Value* rev = g.add_node("Slice", {m2, i64s(g, {-1}), i64s(g, {INT64_MIN + 1}), i64s(g, {0}), i64s(g, {-1})}, 1)->output(0);
    ir::Value* t = g.add_node("Transpose", {rev}, 1, {{"perm", std::vector<int64_t>{1, 0}}})->output(0);
    pads = g.add_node("Reshape", {t, i64s(g, {-1})}, 1)->output(0);
  }
  g.add_output(g.add_node("Pad", {x, pads}, 1, {{"mode", std::string("constant")}}, "pad")->output(0));
  return g;
}

TEST(FoldShapes, IntegerModOfStaticDimsFolds) {
  ir::Graph g = window_pad({Dim::symbol("batch"), Dim(10)});
  ir::infer_types(g);
  EXPECT_EQ(ir::str(g.outputs()[0]->shape()), "[batch,14]");
  g = fold_shapes(std::move(g));
  ASSERT_EQ(g.num_nodes(), 1u) << "only the Pad is left";
  EXPECT_EQ(g.nodes()[0]->input(1)->constant().to_i64_vector(), (std::vector<int64_t>{0, 0, 0, 4}));
  ir::verify(g);
}

TEST(FoldShapes, ReversedTransposedPadListFolds) {
  ir::Graph g = window_pad({Dim::symbol("batch"), Dim(10)}, true);
  ir::infer_types(g);
  EXPECT_EQ(ir::str(g.outputs()[0]->shape()), "[batch,14]");
  g = fold_shapes(std::move(g));
  ASSERT_EQ(g.num_nodes(), 1u) << "only the Pad is left";
  EXPECT_EQ(g.nodes()[0]->input(1)->constant().to_i64_vector(), (std::vector<int64_t>{0, 0, 0, 4}));
}

TEST(FoldShapes, IntegerModOfSymbolicDimsStaysUnknown) {
  ir::Graph g = window_pad({Dim::symbol("batch"), Dim::symbol("width")});
  ir::infer_types(g);
  EXPECT_FALSE(g.outputs()[0]->shape()[1].is_static());
  size_t before = g.num_nodes();
  g = fold_shapes(std::move(g));
  EXPECT_EQ(g.num_nodes(), before);
}

TEST(FoldShapes, NegativeModFollowsTheDivisorSign) {
  // ONNX Mod with fmod=0 takes the divisor's sign (like Python); fmod=1 the dividend's (like C).
  for (auto [fmod, want] : {std::pair<int64_t, int64_t>{0, 4}, {1, -3}}) {
    ir::Graph g;
    ir::Value* m = g.add_node("Mod", {i64s(g, {-10}), i64s(g, {7})}, 1, {{"fmod", fmod}})->output(0);
    ir::Value* x = g.add_input("x", {DType::f32, {Dim(5)}});
    ir::Value* pads = g.add_node("Concat", {i64s(g, {0}), m}, 1, {{"axis", int64_t{0}}})->output(0);
    g.add_output(g.add_node("Pad", {x, pads}, 1, {{"mode", std::string("constant")}})->output(0));
    ir::infer_types(g);
    EXPECT_EQ(ir::str(g.outputs()[0]->shape()), "[" + std::to_string(5 + want) + "]") << "fmod=" << fmod;
  }
}

}  // namespace
}  // namespace sabre::transform
