// transform::simplify_masks (through canonicalize, as sabre compile runs it): the padding mask
// HuggingFace transformers 5 exports (a [B,K] mask gathered at b·K + k over Range iotas, And-ed
// with `q >= 0`, Expand-ed to [B,1,Q,K], made additive by Where) reaches the attention's Add as
// the [B,1,1,K] mask it is, with the same values, its casts after the views; where `q >= c` can be
// false it stays [B,1,Q,K].
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
using ir::Graph;
using ir::Value;

Value* i64s(Graph& g, const std::string& name, std::vector<int64_t> v, std::vector<int64_t> dims) {
  return g.add_constant(name, ir::Tensor::from_i64(v, std::move(dims)));
}

Value* node(Graph& g, const std::string& op, std::vector<Value*> in, std::map<std::string, ir::AttrValue> attrs = {}) {
  return g.add_node(op, std::move(in), 1, std::move(attrs), op + std::to_string(g.num_nodes()))->output(0);
}

// scores [batch,2,seq,seq] + mask(attention_mask [batch,seq]) -> Softmax, as transformers 5
// builds the mask; `q_floor` is the c of its `q >= c` (0 there: always true). With
// `mask_output`, the additive mask is a graph output too.
Graph hf_mask_graph(int64_t q_floor, bool mask_output) {
  Graph g;
  const Dim b = Dim::symbol("batch"), s = Dim::symbol("seq");
  Value* am = g.add_input("attention_mask", {DType::i64, {b, s}, true});
  Value* scores = g.add_input("scores", {DType::f32, {b, Dim(2), s, s}, true});
  Value* m = node(g, "Cast", {am}, {{"to", std::string("bool")}});
  Value* shape = node(g, "Shape", {m});
  Value* nb = node(g, "Gather", {shape, i64s(g, "zero", {0}, {})}, {{"axis", int64_t(0)}});
  Value* nk = node(g, "Gather", {shape, i64s(g, "one", {1}, {})}, {{"axis", int64_t(0)}});
  Value* nk1 = node(g, "Gather", {shape, i64s(g, "one1", {1}, {1})}, {{"axis", int64_t(0)}});
  Value* c0 = i64s(g, "c0", {0}, {});
  Value* c1 = i64s(g, "c1", {1}, {});
  Value* bi = node(g, "Range", {c0, nb, c1});
  Value* qi = node(g, "Range", {c0, nk, c1});
  Value* ki = node(g, "Range", {c0, nk, c1});
  // b through three Unsqueezes (as exported), q and k through one each.
  bi = node(g, "Unsqueeze", {bi, i64s(g, "ax1", {1}, {1})});
  bi = node(g, "Unsqueeze", {bi, i64s(g, "ax2", {2}, {1})});
  bi = node(g, "Unsqueeze", {bi, i64s(g, "ax3", {3}, {1})});
  qi = node(g, "Unsqueeze", {qi, i64s(g, "ax013", {0, 1, 3}, {3})});
  ki = node(g, "Unsqueeze", {ki, i64s(g, "ax012", {0, 1, 2}, {3})});
  Value* ge = node(g, "GreaterOrEqual", {qi, i64s(g, "floor", {q_floor}, {})});
  Value* q_ok = node(g, "And", {g.add_constant("yes", ir::Tensor::from_i64({1}, {}).cast(DType::boolean)), ge});
  Value* flat = node(g, "Flatten", {m}, {{"axis", int64_t(2)}});
  Value* idx = node(g, "Add", {ki, node(g, "Mul", {bi, nk1})});
  Value* picked = node(g, "Gather", {flat, idx}, {{"axis", int64_t(0)}});
  picked = node(g, "Reshape", {picked, i64s(g, "minus1", {-1}, {1})});
  picked = node(g, "Reshape", {picked, node(g, "Shape", {idx})});
  Value* both = node(g, "And", {q_ok, picked});
  Value* wide = node(g, "Expand", {both, i64s(g, "ones4", {1, 1, 1, 1}, {4})});
  Value* additive = node(g, "Where", {wide, g.add_constant("zero_f", ir::Tensor::scalar_f32(0.f)),
                                      g.add_constant("neg", ir::Tensor::scalar_f32(-1e9f))});
  g.add_output(node(g, "Softmax", {node(g, "Add", {scores, additive})}, {{"axis", int64_t(-1)}}));
  if (mask_output) g.add_output(additive);
  ir::infer_types(g);
  return g;
}

// Nodes of `op` on the data path (Range and Gather also compute shapes, which run on no GPU).
int count(const Graph& g, const std::string& op) {
  int n = 0;
  for (const ir::Node* x : g.nodes()) n += x->op() == op && !x->output(0)->known_dims();
  return n;
}

// The shape of the mask the scores' Add reads.
ir::Shape mask_shape(const Graph& g) {
  for (const ir::Node* n : g.nodes())
    if (n->op() == "Add" && n->input(0)->name() == "scores") return n->input(1)->shape();
  ADD_FAILURE() << "no Add of the scores";
  return {};
}

void expect_same_outputs(const Graph& a, const Graph& b, int64_t batch, int64_t seq, std::mt19937& rng) {
  std::vector<int64_t> mask(batch * seq);
  std::bernoulli_distribution keep(0.7);
  for (auto& x : mask) x = keep(rng) ? 1 : 0;
  mask[0] = 0;  // at least one padded key
  std::map<std::string, ir::Tensor> in{{"attention_mask", ir::Tensor::from_i64(mask, {batch, seq})},
                                       {"scores", test_util::random_f32({batch, 2, seq, seq}, rng)}};
  auto ya = reference::run(a, in), yb = reference::run(b, in);
  ASSERT_EQ(ya.size(), yb.size());
  for (size_t o = 0; o < ya.size(); ++o) {
    ASSERT_EQ(ya[o].dims(), yb[o].dims()) << o;
    for (int64_t i = 0; i < ya[o].numel(); ++i) ASSERT_EQ(ya[o].get_f64(i), yb[o].get_f64(i)) << o << " " << i;
  }
}

TEST(SimplifyMasks, PaddingMaskBecomesBatchByKeys) {
  std::mt19937 rng(3);
  const Graph g = hf_mask_graph(0, false);
  const Graph c = transform::canonicalize(g.clone());
  EXPECT_EQ(mask_shape(g), (ir::Shape{Dim::symbol("batch"), Dim(1), Dim::symbol("seq"), Dim::symbol("seq")}));
  EXPECT_EQ(mask_shape(c), (ir::Shape{Dim::symbol("batch"), Dim(1), Dim(1), Dim::symbol("seq")}));
  for (const char* gone : {"Gather", "Expand", "GreaterOrEqual", "And", "Flatten"})
    EXPECT_EQ(count(c, gone), 0) << gone;
  EXPECT_NO_THROW(ir::verify(c));
  // The additive mask is Where(Cast(views of attention_mask)): the casts sit after the views, next
  // to the Where, so one elementwise kernel reads the i64 mask.
  const ir::Node* add = nullptr;
  for (const ir::Node* n : c.nodes())
    if (n->op() == "Add" && n->input(0)->name() == "scores") add = n;
  ASSERT_TRUE(add);
  const ir::Node* where = add->input(1)->producer();
  ASSERT_TRUE(where && where->op() == "Where");
  const Value* v = where->input(0);
  int casts = 0, views = 0;
  for (; v->producer() && v->producer()->op() == "Cast"; v = v->producer()->input(0)) ++casts;
  for (; v->producer() && (v->producer()->op() == "Unsqueeze" || v->producer()->op() == "Reshape"); v = v->producer()->input(0))
    ++views;
  EXPECT_GE(casts, 1);
  EXPECT_GE(views, 1);
  EXPECT_EQ(v->name(), "attention_mask");
  for (auto [batch, seq] : {std::pair{3, 5}, std::pair{1, 7}, std::pair{4, 1}}) expect_same_outputs(g, c, batch, seq, rng);
}

TEST(SimplifyMasks, AQueryTestThatCanFailKeepsTheQueryAxis) {
  std::mt19937 rng(4);
  const Graph g = hf_mask_graph(2, false);  // q >= 2 is false for the first two rows
  const Graph c = transform::canonicalize(g.clone());
  EXPECT_EQ(mask_shape(c), (ir::Shape{Dim::symbol("batch"), Dim(1), Dim::symbol("seq"), Dim::symbol("seq")}));
  EXPECT_EQ(count(c, "Gather"), 0);  // the gather is still a view of the mask
  expect_same_outputs(g, c, 3, 5, rng);
}

TEST(SimplifyMasks, AMaskThatIsAGraphOutputKeepsItsShape) {
  std::mt19937 rng(5);
  const Graph g = hf_mask_graph(0, true);
  const Graph c = transform::canonicalize(g.clone());
  EXPECT_EQ(mask_shape(c), (ir::Shape{Dim::symbol("batch"), Dim(1), Dim(1), Dim::symbol("seq")}));
  EXPECT_EQ(c.outputs()[1]->shape(), g.outputs()[1]->shape());
  expect_same_outputs(g, c, 3, 5, rng);
}

}  // namespace
}  // namespace sabre
