// transform::unflatten_gemm: GPT-2's flattened Conv1D GEMMs become MatMul (+ Add) on the 3-D
// activation, computing the same values; what does not match the form is left alone.
#include <gtest/gtest.h>

#include <random>

#include "ir/infer.h"
#include "random_tensor.h"
#include "reference/reference.h"
#include "transform/unflatten_gemm.h"

namespace sabre {
namespace {

using ir::Dim;
using ir::DType;

using test_util::random_f32;

// x [batch, seq, 8] -> Reshape [-1, 8] -> Gemm(W, C) -> Reshape [0, 0, 16] (GPT-2's Conv1D form).
ir::Graph conv1d(bool trans_b, double alpha, bool bias_2d, std::mt19937& rng) {
  ir::Graph g;
  ir::Value* x = g.add_input("x", {DType::f32, {Dim::symbol("batch"), Dim::symbol("seq"), Dim(8)}});
  ir::Value* flat = g.add_node("Reshape", {x, g.add_constant("s1", ir::Tensor::from_i64({-1, 8}, {2}))}, 1)->output(0);
  ir::Value* w = g.add_constant("w", random_f32(trans_b ? std::vector<int64_t>{16, 8} : std::vector<int64_t>{8, 16}, rng));
  ir::Value* c = g.add_constant("c", random_f32(bias_2d ? std::vector<int64_t>{1, 16} : std::vector<int64_t>{16}, rng));
  ir::Value* y = g.add_node("Gemm", {flat, w, c}, 1,
                            {{"transB", int64_t{trans_b ? 1 : 0}}, {"alpha", alpha}, {"beta", 1.0}}, "fc")
                     ->output(0);
  // The target shape as the exporter computes it: x's leading dims from Shape(x), then N.
  ir::Value* shape = g.add_node("Shape", {x}, 1)->output(0);
  std::vector<ir::Value*> parts;
  for (int64_t i : {0, 1}) {
    ir::Value* d = g.add_node("Gather", {shape, g.add_constant("", ir::Tensor::from_i64({i}, {1}))}, 1,
                              {{"axis", int64_t{0}}})->output(0);
    parts.push_back(d);
  }
  parts.push_back(g.add_constant("n", ir::Tensor::from_i64({16}, {1})));
  ir::Value* target = g.add_node("Concat", parts, 1, {{"axis", int64_t{0}}})->output(0);
  g.add_output(g.add_node("Reshape", {y, target}, 1)->output(0));
  ir::infer_types(g);
  return g;
}

int count(const ir::Graph& g, const std::string& op) {
  int n = 0;
  for (const ir::Node* x : g.nodes()) n += x->op() == op;
  return n;
}

void expect_same_values(const ir::Graph& a, const ir::Graph& b, std::mt19937& rng) {
  std::map<std::string, ir::Tensor> in{{"x", random_f32({2, 5, 8}, rng)}};
  auto ya = reference::run(a, in), yb = reference::run(b, in);
  ASSERT_EQ(ya.size(), 1u);
  ASSERT_EQ(ya[0].dims(), yb[0].dims());
  for (int64_t i = 0; i < ya[0].numel(); ++i) EXPECT_NEAR(ya[0].get_f64(i), yb[0].get_f64(i), 1e-5) << i;
}

TEST(UnflattenGemm, Conv1dBecomesMatMulPlusBias) {
  for (bool trans_b : {false, true})
    for (bool bias_2d : {false, true}) {
      std::mt19937 rng(3);
      ir::Graph g = conv1d(trans_b, 1.0, bias_2d, rng);
      ir::Graph before = g.clone();
      g = transform::unflatten_gemm(std::move(g));
      EXPECT_EQ(count(g, "Gemm"), 0);
      EXPECT_EQ(count(g, "Reshape"), 0);  // both gone (the shape computation is dead too)
      EXPECT_EQ(count(g, "MatMul"), 1);
      EXPECT_EQ(count(g, "Add"), 1);
      EXPECT_EQ(g.outputs()[0]->shape(), before.outputs()[0]->shape());
      EXPECT_NO_THROW(ir::verify(g));
      expect_same_values(before, g, rng);
    }
}

TEST(UnflattenGemm, OtherAlphaIsLeftAlone) {
  std::mt19937 rng(4);
  ir::Graph g = transform::unflatten_gemm(conv1d(true, 0.5, false, rng));
  EXPECT_EQ(count(g, "Gemm"), 1);
  EXPECT_EQ(count(g, "MatMul"), 0);
}

}  // namespace
}  // namespace sabre
