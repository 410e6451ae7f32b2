// Shape inference with symbolic dims, on graphs built with the IR API.
#include "ir/infer.h"

#include <gtest/gtest.h>

namespace sabre::ir {
namespace {

Dim sym(const char* s) { return Dim::symbol(s); }

Value* i64s(Graph& g, const std::vector<int64_t>& v, bool scalar = false) {
  return g.add_constant("", Tensor::from_i64(v, scalar ? std::vector<int64_t>{} : std::vector<int64_t>{static_cast<int64_t>(v.size())}));
}

// x[dim i] as a 1-D shape value: Unsqueeze(Gather(Shape(x), i), 0), the way PyTorch exports it.
Value* dim_of(Graph& g, Value* x, int64_t i) {
  Value* s = g.add_node("Shape", {x}, 1)->output(0);
  Value* d = g.add_node("Gather", {s, i64s(g, {i}, true)}, 1, {{"axis", int64_t{0}}})->output(0);
  return g.add_node("Unsqueeze", {d, i64s(g, {0})}, 1)->output(0);
}

std::string shape_of(const Value* v) { return str(v->shape()); }

TEST(Infer, SymbolicBroadcasting) {
  Graph g;
  Value* x = g.add_input("x", {DType::f32, {sym("batch"), sym("seq"), Dim(768)}});
  Value* b = g.add_constant("b", Tensor::from_f32(std::vector<float>(768, 0.5f), {768}));
  Value* mask = g.add_input("mask", {DType::f32, {sym("batch"), Dim(1), Dim(1), sym("seq")}});
  Value* scores = g.add_input("scores", {DType::f32, {sym("batch"), Dim(12), sym("seq"), sym("seq")}});
  Node* add = g.add_node("Add", {x, b}, 1);
  Node* add2 = g.add_node("Add", {scores, mask}, 1);
  infer_types(g);
  EXPECT_EQ(shape_of(add->output(0)), "[batch,seq,768]");
  EXPECT_EQ(shape_of(add2->output(0)), "[batch,12,seq,seq]");
}

TEST(Infer, BroadcastMismatchNamesTheNode) {
  Graph g;
  Value* x = g.add_input("x", {DType::f32, {sym("batch"), Dim(768)}});
  Value* y = g.add_input("y", {DType::f32, {Dim(512)}});
  g.add_node("Add", {x, y}, 1, {}, "bad_add");
  try {
    infer_types(g);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("node 'bad_add' (Add)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("768 and 512"), std::string::npos) << e.what();
  }
}

TEST(Infer, MatMulInnerDimsMustAgree) {
  Graph g;
  Value* a = g.add_input("a", {DType::f32, {sym("m"), Dim(64)}});
  Value* b = g.add_input("b", {DType::f32, {Dim(32), Dim(8)}});
  g.add_node("MatMul", {a, b}, 1, {}, "mm");
  EXPECT_THROW(infer_types(g), ShapeError);
  Graph h;
  Value* c = h.add_input("c", {DType::f32, {sym("b"), Dim(12), sym("s"), Dim(64)}});
  Value* d = h.add_input("d", {DType::f32, {sym("b"), Dim(12), Dim(64), sym("s")}});
  Node* mm = h.add_node("MatMul", {c, d}, 1);
  infer_types(h);
  EXPECT_EQ(shape_of(mm->output(0)), "[b,12,s,s]");
}

// BERT's attention reshape: Shape->Gather->Unsqueeze->Concat->Reshape stays symbolic.
TEST(Infer, BertReshapeChainStaysSymbolic) {
  Graph g;
  Value* x = g.add_input("x", {DType::f32, {sym("batch"), sym("seq"), Dim(768)}});
  Value* shape = g.add_node("Concat", {dim_of(g, x, 0), dim_of(g, x, 1), i64s(g, {12}), i64s(g, {64})}, 1,
                            {{"axis", int64_t{0}}})->output(0);
  Node* r = g.add_node("Reshape", {x, shape}, 1);
  Node* flat = g.add_node("Reshape", {x, i64s(g, {-1, 768})}, 1);
  Node* back = g.add_node("Reshape", {flat->output(0), i64s(g, {0, 12, 64})}, 1);
  infer_types(g);
  ASSERT_TRUE(shape->known_dims());
  EXPECT_EQ(str(*shape->known_dims()), "[batch,seq,12,64]");
  EXPECT_EQ(shape_of(r->output(0)), "[batch,seq,12,64]");
  EXPECT_EQ(shape_of(flat->output(0)), "[batch*seq,768]");
  EXPECT_EQ(shape_of(back->output(0)), "[batch*seq,12,64]");
}

TEST(Infer, ReshapeArithmeticOnShapes) {
  Graph g;
  Value* x = g.add_input("x", {DType::f32, {sym("batch"), sym("seq"), Dim(768)}});
  // [batch*seq, 768] computed with Mul on shape values, and [batch, seq+1] with Add.
  Value* bs = g.add_node("Mul", {dim_of(g, x, 0), dim_of(g, x, 1)}, 1)->output(0);
  Value* tgt = g.add_node("Concat", {bs, i64s(g, {768})}, 1, {{"axis", int64_t{0}}})->output(0);
  Node* r = g.add_node("Reshape", {x, tgt}, 1);
  Value* s1 = g.add_node("Add", {dim_of(g, x, 1), i64s(g, {1})}, 1)->output(0);
  Node* zeros = g.add_node("ConstantOfShape", {g.add_node("Concat", {dim_of(g, x, 0), s1}, 1, {{"axis", int64_t{0}}})->output(0)}, 1);
  infer_types(g);
  EXPECT_EQ(shape_of(r->output(0)), "[batch*seq,768]");
  EXPECT_EQ(shape_of(zeros->output(0)), "[batch,seq+1]");
  EXPECT_EQ(zeros->output(0)->dtype(), DType::f32);
}

TEST(Infer, RangeExpandSliceWithSymbolicLengths) {
  Graph g;
  Value* ids = g.add_input("ids", {DType::i64, {sym("batch"), sym("seq")}});
  Value* pos_table = g.add_constant("pos", Tensor::from_i64(std::vector<int64_t>(512, 3), {1, 512}));
  Value* seq = g.add_node("Gather", {g.add_node("Shape", {ids}, 1)->output(0), i64s(g, {1}, true)}, 1)->output(0);
  Node* range = g.add_node("Range", {i64s(g, {0}, true), seq, i64s(g, {1}, true)}, 1);
  Node* sl = g.add_node("Slice", {pos_table, i64s(g, {0}), dim_of(g, ids, 1), i64s(g, {1})}, 1);
  Node* ex = g.add_node("Expand", {sl->output(0), g.add_node("Shape", {ids}, 1)->output(0)}, 1);
  Node* shp = g.add_node("Shape", {ids}, 1, {{"start", int64_t{-1}}});
  infer_types(g);
  EXPECT_EQ(shape_of(range->output(0)), "[seq]");
  EXPECT_EQ(shape_of(sl->output(0)), "[1,seq]");
  EXPECT_EQ(shape_of(ex->output(0)), "[batch,seq]");
  EXPECT_EQ(str(*shp->output(0)->known_dims()), "[seq]");
}

TEST(Infer, EqualWhereDecideWhenKnown) {
  // PyTorch's expand(-1, ...) export: Where(Equal(shape, -1), ones, shape).
  Graph g;
  Value* x = g.add_input("x", {DType::f32, {sym("batch"), Dim(1), Dim(64)}});
  Value* tgt = g.add_node("Concat", {dim_of(g, x, 0), i64s(g, {-1, 64})}, 1, {{"axis", int64_t{0}}})->output(0);
  Value* eq = g.add_node("Equal", {tgt, i64s(g, {-1})}, 1)->output(0);
  Value* fixed = g.add_node("Where", {eq, i64s(g, {1, 1, 1}), tgt}, 1)->output(0);
  Node* ex = g.add_node("Expand", {x, fixed}, 1);
  infer_types(g);
  ASSERT_TRUE(fixed->known_dims());
  EXPECT_EQ(str(*fixed->known_dims()), "[batch,1,64]");
  EXPECT_EQ(shape_of(ex->output(0)), "[batch,1,64]");
}

TEST(Infer, ConvPoolAndFriends) {
  Graph g;
  Value* x = g.add_input("x", {DType::f32, {sym("n"), Dim(3), Dim(224), Dim(224)}});
  Value* w = g.add_constant("w", Tensor(DType::f32, {64, 3, 7, 7}));
  Node* c = g.add_node("Conv", {x, w}, 1, {{"strides", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{3, 3, 3, 3}}});
  Node* p = g.add_node("MaxPool", {c->output(0)}, 1,
                       {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}},
                        {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  Node* gap = g.add_node("GlobalAveragePool", {p->output(0)}, 1);
  Node* fl = g.add_node("Flatten", {gap->output(0)}, 1);
  infer_types(g);
  EXPECT_EQ(shape_of(c->output(0)), "[n,64,112,112]");
  EXPECT_EQ(shape_of(p->output(0)), "[n,64,56,56]");
  EXPECT_EQ(shape_of(fl->output(0)), "[n,64]");
}

TEST(Infer, ConvOnSymbolicSpatialDims) {
  Graph g;
  Value* x = g.add_input("x", {DType::f32, {Dim(1), Dim(8), sym("h"), sym("w")}});
  Value* w = g.add_constant("w", Tensor(DType::f32, {8, 8, 3, 3}));
  Node* c = g.add_node("Conv", {x, w}, 1, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  Node* valid = g.add_node("Conv", {x, w}, 1);
  infer_types(g);
  EXPECT_EQ(shape_of(c->output(0)), "[1,8,h,w]");
  EXPECT_EQ(shape_of(valid->output(0)), "[1,8,h-2,w-2]");
}

TEST(Infer, SplitSqueezeTransposeReduce) {
  Graph g;
  Value* x = g.add_input("x", {DType::f32, {sym("b"), sym("s"), Dim(2304)}});
  Node* sp = g.add_node("Split", {x}, 3, {{"axis", int64_t{-1}}, {"num_outputs", int64_t{3}}});
  Node* sp2 = g.add_node("Split", {x, i64s(g, {768, 1536})}, 2, {{"axis", int64_t{2}}});
  Node* t = g.add_node("Transpose", {sp->output(0)}, 1, {{"perm", std::vector<int64_t>{2, 0, 1}}});
  Node* rm = g.add_node("ReduceMean", {x, i64s(g, {-1})}, 1, {{"keepdims", int64_t{0}}});
  Node* us = g.add_node("Unsqueeze", {rm->output(0), i64s(g, {0, -1})}, 1);
  Node* sq = g.add_node("Squeeze", {us->output(0), i64s(g, {0})}, 1);
  infer_types(g);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(shape_of(sp->output(i)), "[b,s,768]");
  EXPECT_EQ(shape_of(sp2->output(1)), "[b,s,1536]");
  EXPECT_EQ(shape_of(t->output(0)), "[768,b,s]");
  EXPECT_EQ(shape_of(us->output(0)), "[1,b,s,1]");
  EXPECT_EQ(shape_of(sq->output(0)), "[b,s,1]");
}

// Run-time axes of a known count type (tests/unit/infer_index_test.cpp); of an unknown count, the
// result's rank is unknown, which is unsupported rather than invalid.
TEST(Infer, RunTimeAxesAreUnsupportedNotInvalid) {
  Graph g;
  Value* x = g.add_input("x", {DType::f32, {Dim(2), Dim(3)}});
  Value* axes = g.add_input("axes", {DType::i64, {sym("n")}});
  g.add_node("Unsqueeze", {x, axes}, 1, {}, "us");
  EXPECT_THROW(infer_types(g), ShapeUnsupported);
}

void double_first_dim(Node& n) {
  Shape s = n.input(0)->shape();
  s[0] = s[0] * Dim(2);
  n.output(0)->set_type(n.input(0)->dtype(), s);
}

TEST(Infer, RegisterInferForSabreOps) {
  Graph g;
  Value* x = g.add_input("x", {DType::f16, {sym("t"), Dim(4)}});
  Node* n = g.add_node("Doubler", {x}, 1, {}, "", "sabre");
  EXPECT_FALSE(has_infer("sabre", "Doubler"));
  EXPECT_THROW(infer_types(g), ShapeError);
  register_infer("sabre", "Doubler", double_first_dim);
  EXPECT_TRUE(has_infer("sabre", "Doubler"));
  infer_types(g);
  EXPECT_EQ(shape_of(n->output(0)), "[2*t,4]");
  auto ops = supported_ops();
  EXPECT_TRUE(std::is_sorted(ops.begin(), ops.end()));
  EXPECT_NE(std::find(ops.begin(), ops.end(), "LayerNormalization"), ops.end());
}

}  // namespace
}  // namespace sabre::ir
