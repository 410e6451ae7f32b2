// fuse_softmax: Softmax(Where(causal, Div(x, c) | Mul(x, c), fill) + mask) as one native softmax; the
// mask broadcasts to the scores or, a relative position bias, has their shape.
// Tests: tests/unit/codegen_passes_test.cpp
#include "codegen/passes/fusion.h"

namespace sabre::codegen::passes {
namespace {

using namespace pattern;

// Trilu(ConstantOfShape(true), k=0) {upper=0} of a square [S,S]: the causal mask.
bool is_causal(const Value* cond) {
  const Node* t = cond ? cond->producer() : nullptr;
  if (!t || t->op() != "Trilu" || t->attr_int("upper", 1) != 0) return false;
  if (t->input(1) && !(scalar_constant(t->input(1)) && t->input(1)->constant().get_i64(0) == 0)) return false;
  const Node* c = t->input(0)->producer();
  if (!c || c->op() != "ConstantOfShape" || !c->has_attr("value")) return false;
  const ir::Tensor& v = c->attr_tensor("value");
  const auto& sh = cond->shape();
  return v.numel() == 1 && v.get_f64(0) != 0 && sh.size() == 2 && sh[0] == sh[1];
}

// A product's scores (a batched GEMM region or a MatMul), possibly scaled by a constant: the
// operand of the mask Add that is not the mask when both have the scores' full shape (a relative
// position bias [b, h, q, k]).
bool scores_like(const Value* v) {
  const Node* p = v->producer();
  if (p && p->domain().empty() && (p->op() == "Mul" || p->op() == "Div") && scalar_constant(p->input(1)))
    p = p->input(0)->producer();
  return p && ((p->domain().empty() && p->op() == "MatMul") ||
               (p->domain() == "sabre" && p->op() == "Composite" && p->attr_string("kind", "") == "batched_gemm"));
}

std::string other_reader(const ir::Graph& g, const Value* v) {
  return g.is_graph_output(v) ? "is a model output" : "has " + std::to_string(v->users().size()) + " readers";
}

// The chain above the Softmax, walked up from it: a causal Where, then a mask Add, then a scale,
// each taken only when the one below it was. The first part that matches but cannot be taken is
// the refusal (nothing above it is looked at).
Verdict check(const Match& m, LowerContext& cx) {
  Node* s = m.root;
  std::string part;  // the part not absorbed and why
  SoftmaxFusion f;
  f.x = s->input(0);
  const size_t rank = f.x->shape().size();
  const Dim cols = f.x->shape().back();
  Node* p = f.x->producer();
  if (p && p->op() == "Where" && only_user(cx.g, f.x, s) && is_causal(p->input(0)) && scalar_constant(p->input(2)) &&
      p->input(1)->shape() == f.x->shape()) {
    f.causal = true;
    f.absorbed.push_back(p);
    f.x = p->input(1);
    p = f.x->producer();
  } else if (p && p->op() == "Where" && is_causal(p->input(0))) {
    part = "causal Where " + p->name() + " not absorbed: " +
           (!only_user(cx.g, f.x, s) ? "its output " + other_reader(cx.g, f.x)
            : !scalar_constant(p->input(2)) ? "the fill value is not a constant scalar"
                                            : "its input is broadcast to the scores' shape");
  }
  if (p && p->op() == "Add" && only_user(cx.g, f.x, f.absorbed.empty() ? s : f.absorbed.back()) && rank == 4) {
    std::string why = "neither operand is a mask over the scores' last dim broadcast to them";
    for (int side = 0; side < 2; ++side) {
      Value* a = p->input(side);
      Value* mask = p->input(1 - side);
      if (a->shape() == f.x->shape() && mask->shape().size() <= 4 && !mask->shape().empty() &&
          mask->shape().back() == cols && ir::is_float(mask->dtype()) &&
          (mask->shape() != f.x->shape() || (scores_like(a) && !scores_like(mask)))) {
        f.mask = mask;
        f.absorbed.push_back(p);
        f.x = a;
        p = f.x->producer();
        why.clear();
        break;
      }
      if (a->shape() == f.x->shape() && !ir::is_float(mask->dtype()))
        why = "the mask " + mask->name() + " is " + std::string(ir::name(mask->dtype())) + ", not float";
      else if (a->shape() == f.x->shape() && mask->shape() == f.x->shape() && why.rfind("the mask", 0) != 0)
        why = "both operands have the scores' full shape and neither alone is a Q·Kᵀ product";
    }
    if (!why.empty()) part = "mask Add " + p->name() + " not absorbed: " + why;
  } else if (p && p->op() == "Add" && rank == 4) {
    part = "mask Add " + p->name() + " not absorbed: its output " + other_reader(cx.g, f.x);
  }
  if (p && (p->op() == "Div" || p->op() == "Mul") && scalar_constant(p->input(1)) &&
      p->input(0)->shape() == f.x->shape() && only_user(cx.g, f.x, f.absorbed.empty() ? s : f.absorbed.back())) {
    double c = p->input(1)->constant().get_f64(0);
    if (p->op() == "Div" ? c != 0 : true) {
      f.scale = p->op() == "Div" ? 1.0 / c : c;
      f.absorbed.push_back(p);
      f.x = p->input(0);
    } else {
      part = "scale " + p->name() + " not absorbed: division by zero";
    }
  } else if (p && (p->op() == "Div" || p->op() == "Mul") && scalar_constant(p->input(1)) &&
             p->input(0)->shape() == f.x->shape()) {
    part = "scale " + p->name() + " not absorbed: its output " + other_reader(cx.g, f.x);
  }
  // A Softmax with nothing absorbed is still recorded: the attention fusion and its step read it.
  const bool fused = !f.absorbed.empty();
  return (fused ? Verdict::fuse(part) : Verdict::keep(part)).with(std::move(f));
}

void record(const Match& m, const Verdict& v, LowerContext& cx) {
  const auto& f = std::any_cast<const SoftmaxFusion&>(v.decision);
  for (Node* a : f.absorbed) cx.absorbed.insert(a);
  cx.softmax[m.root] = f;
}

// Over the last axis, where the chain kernels' row reductions run.
Pat structure() {
  return op("Softmax", {wildcard("x")}, {attr_test("axis=-1 (the last)", [](const Node& s) {
              const size_t rank = s.input(0)->shape().size();
              return rank != 0 && norm_axis(s.attr_int("axis", -1), rank) == static_cast<int64_t>(rank) - 1;
            })});
}

}  // namespace

const Fusion& softmax_fusion() {
  static const Fusion f{"fuse_softmax", "y = Softmax(Where(causal, scale·x, fill) + mask) over the last axis",
                        structure(), check, record};
  return f;
}

PassResult fuse_softmax(LowerContext& cx) { return run_fusion(softmax_fusion(), cx); }

}  // namespace sabre::codegen::passes
