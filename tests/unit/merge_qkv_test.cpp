// transform::merge_qkv (through canonicalize, as sabre compile --fuse-attention runs it): three
// projections of one activation, each read by a heads Reshape, become one GEMM and a Split with
// bit-identical values; groups of another size, or projections read elsewhere, stay.
#include <gtest/gtest.h>

#include <random>

#include "ir/infer.h"
#include "random_tensor.h"
#include "reference/reference.h"
#include "transform/canonicalize.h"

namespace sabre {
namespace {

using ir::Dim;
using ir::DType;

using test_util::random_f32;

// x [batch, seq, 16] -> `count` x (MatMul(x, W_i[16, 8]) + b_i -> Reshape [0, 0, 2, 4]) -> outputs;
// with `extra_reader`, the first projection is also a graph output (read by something else).
ir::Graph projections(int count, bool extra_reader, std::mt19937& rng) {
  ir::Graph g;
  ir::Value* x = g.add_input("x", {DType::f32, {Dim::symbol("batch"), Dim::symbol("seq"), Dim(16)}, true});
  ir::Value* heads = g.add_constant("heads", ir::Tensor::from_i64({0, 0, 2, 4}, {4}));
  for (int i = 0; i < count; ++i) {
    const std::string p = "p" + std::to_string(i);
    ir::Value* y = g.add_node("MatMul", {x, g.add_constant(p + ".w", random_f32({16, 8}, rng))}, 1, {}, p + ".mm")->output(0);
    ir::Value* z = g.add_node("Add", {y, g.add_constant(p + ".b", random_f32({8}, rng))}, 1, {}, p + ".add")->output(0);
    g.add_output(g.add_node("Reshape", {z, heads}, 1, {}, p + ".heads")->output(0));
    if (extra_reader && i == 0) g.add_output(z);
  }
  ir::infer_types(g);
  return g;
}

int count(const ir::Graph& g, const std::string& op) {
  int n = 0;
  for (const ir::Node* x : g.nodes()) n += x->op() == op;
  return n;
}

ir::Graph canonical(const ir::Graph& g, bool merge) {
  transform::PassOptions o;
  o.merge_qkv = merge;
  return transform::canonicalize(g.clone(), o);
}

void expect_identical(const ir::Graph& a, const ir::Graph& b, std::mt19937& rng) {
  std::map<std::string, ir::Tensor> in{{"x", random_f32({2, 5, 16}, rng)}};
  auto ya = reference::run(a, in), yb = reference::run(b, in);
  ASSERT_EQ(ya.size(), yb.size());
  for (size_t o = 0; o < ya.size(); ++o) {
    ASSERT_EQ(ya[o].dims(), yb[o].dims()) << o;
    for (int64_t i = 0; i < ya[o].numel(); ++i) ASSERT_EQ(ya[o].get_f64(i), yb[o].get_f64(i)) << o << " " << i;
  }
}

TEST(MergeQkv, ThreeProjectionsBecomeOneGemmAndASplit) {
  std::mt19937 rng(5);
  const ir::Graph g = projections(3, false, rng);
  const ir::Graph plain = canonical(g, false), merged = canonical(g, true);
  EXPECT_EQ(count(plain, "MatMulTransB"), 3);
  EXPECT_EQ(count(merged, "MatMulTransB"), 1);
  EXPECT_EQ(count(merged, "Add"), 1);
  EXPECT_EQ(count(merged, "Split"), 1);
  for (const ir::Node* n : merged.nodes())
    if (n->op() == "MatMulTransB") {
      EXPECT_EQ(n->input(1)->constant().dims(), (std::vector<int64_t>{24, 16}));
      EXPECT_EQ(n->output(0)->shape().back(), Dim(24));
    }
  EXPECT_NO_THROW(ir::verify(merged));
  for (size_t o = 0; o < 3; ++o) EXPECT_EQ(merged.outputs()[o]->shape(), plain.outputs()[o]->shape());
  expect_identical(plain, merged, rng);
}

TEST(MergeQkv, OffUnlessAsked) {
  std::mt19937 rng(5);
  EXPECT_EQ(count(canonical(projections(3, false, rng), false), "Split"), 0);
}

TEST(MergeQkv, OtherGroupsAndOtherReadersStay) {
  for (auto [n, extra] : {std::pair{2, false}, std::pair{4, false}, std::pair{3, true}}) {
    std::mt19937 rng(9);
    const ir::Graph g = projections(n, extra, rng);
    const ir::Graph merged = canonical(g, true);
    EXPECT_EQ(count(merged, "MatMulTransB"), n) << n << (extra ? " with an extra reader" : "");
    EXPECT_EQ(count(merged, "Split"), 0);
    expect_identical(canonical(g, false), merged, rng);
  }
}

}  // namespace
}  // namespace sabre
