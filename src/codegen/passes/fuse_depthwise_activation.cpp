// fuse_depthwise_activation: the activation after a depthwise conv runs in the depthwise kernel's
// store (MobileNetV2's ReLU6, EfficientNet's SiLU after each depthwise conv were steps of their own).
// The forms, over the conv's output c (each exporter's spelling of the same math):
//   Relu(c), Clip(c, lo, hi) with constant bounds      -> clamp [0, inf) / [lo, hi]
//   Sigmoid(c)                                         -> sigmoid
//   HardSigmoid(c){alpha, beta}                        -> hard_sigmoid(alpha, beta)
//   HardSwish(c)                                       -> hard_swish(1/6, 1/2)
//   c·Sigmoid(c), Sigmoid(c)·c                         -> silu(1)
//   c·Sigmoid(c·a), c·Sigmoid(a·c), a a constant scalar -> silu(a) (ONNX Swish, decomposed)
//   c·HardSigmoid(c){alpha, beta}, either order        -> hard_swish(alpha, beta)
// Tests: tests/golden/lower/fuse_depthwise_activation/, tests/unit/codegen_plan_interp_test.cpp
#include <algorithm>
#include <cmath>

#include "codegen/passes/pass.h"

namespace sabre::codegen::passes {
namespace {

using native::ConvAct;

bool is_op(const Node* n, const char* op) { return n && n->domain().empty() && n->op() == op && n->num_outputs() == 1; }

// The readers of c's data (Shape/Size see only its dims), each once.
std::vector<Node*> readers(const Value* c) {
  std::vector<Node*> out;
  for (Node* u : c->users())
    if (!(u->domain().empty() && (u->op() == "Shape" || u->op() == "Size")) &&
        std::find(out.begin(), out.end(), u) == out.end())
      out.push_back(u);
  return out;
}

// The other operand of binary `m` where one operand is `v`, or nullptr.
Value* other_operand(const Node* m, const Value* v) {
  if (m->num_inputs() != 2) return nullptr;
  if (m->input(0) == v) return m->input(1);
  if (m->input(1) == v) return m->input(0);
  return nullptr;
}

// A candidate: the nodes after the conv that one activation absorbs, the last one's output the step's.
struct Form {
  std::vector<Node*> nodes;
  DwActivation act;
  std::string what;  // how refusals name it: "SiLU Mul_3"
};

// The gate of a SiLU-like Mul(c, gate(c)): Sigmoid(c), Sigmoid(c·a) / Sigmoid(a·c) (Swish), HardSigmoid(c).
// Fills `f` (gate nodes, activation) and returns true where `gate` is one.
bool gate_form(const LowerContext& cx, const Value* c, const Value* gate, Form& f) {
  Node* g = gate ? gate->producer() : nullptr;
  if (is_op(g, "HardSigmoid") && g->input(0) == c) {
    f.nodes = {g};
    f.act.act = ConvAct::hard_swish;
    f.act.alpha = g->attr_float("alpha", 0.2), f.act.beta = g->attr_float("beta", 0.5);
    return true;
  }
  if (!is_op(g, "Sigmoid")) return false;
  if (g->input(0) == c) {
    f.nodes = {g};
    f.act.act = ConvAct::silu;
    return true;
  }
  Node* s = g->input(0)->producer();  // Swish's scale: Sigmoid(c·a)
  if (!is_op(s, "Mul") || !only_user(cx.g, s->output(0), g)) return false;
  Value* a = other_operand(s, c);
  if (!a || !scalar_constant(a) || !ir::is_float(a->dtype())) return false;
  f.nodes = {s, g};
  f.act.act = ConvAct::silu;
  f.act.alpha = a->constant().get_f64(0);
  return true;
}

// The activation form reading c at `u`, or nullopt where `u` starts none.
std::optional<Form> form_at(const LowerContext& cx, const Value* c, Node* u, std::string* refused) {
  Form f;
  f.act = {nullptr, -INFINITY, INFINITY};
  if (is_op(u, "Relu")) {
    f.act.lo = 0;
  } else if (is_op(u, "Clip")) {
    auto b = clip_bounds(u);
    if (!b || b->first > b->second) {  // min above max: every output is max; not worth a special case
      *refused = "Clip " + u->name() + " not absorbed: " + (b ? "its min is above its max" : "its bounds are not constant scalars");
      return std::nullopt;
    }
    f.act.lo = b->first, f.act.hi = b->second;
  } else if (is_op(u, "Sigmoid") && u->input(0) == c) {
    f.act.act = ConvAct::sigmoid;
  } else if (is_op(u, "HardSigmoid")) {
    f.act.act = ConvAct::hard_sigmoid;
    f.act.alpha = u->attr_float("alpha", 0.2), f.act.beta = u->attr_float("beta", 0.5);
  } else if (is_op(u, "HardSwish")) {
    f.act.act = ConvAct::hard_swish;
    f.act.alpha = 1.0 / 6.0, f.act.beta = 0.5;
  } else if (is_op(u, "Mul") && gate_form(cx, c, other_operand(u, c), f)) {
    f.nodes.push_back(u);
    f.what = std::string(f.act.act == ConvAct::silu ? "SiLU " : "hard swish ") + u->name();
    f.act.node = u;
    return f;
  } else {
    return std::nullopt;
  }
  f.nodes = {u};
  f.what = u->op() + " " + u->name();
  f.act.node = u;
  return f;
}

}  // namespace

PassResult fuse_depthwise_activation(LowerContext& cx) {
  PassResult r;
  if (!cx.o.pick_conv) {
    r.skipped = "no conv kernel picker (LowerOptions::pick_conv): convs are refused";
    return r;
  }
  for (Node* conv : cx.order) {
    if (!conv->domain().empty() || conv->op() != "Conv" || !depthwise_problem(conv).empty()) continue;
    const Value* c = conv->output(0);
    const std::vector<Node*> rd = readers(c);
    // A SiLU's Mul reads c and its gate, and the gate (a Sigmoid, or a Swish scale) reads c too:
    // the Muls are tried first, so a Sigmoid is taken alone only where no Mul makes it a SiLU.
    std::optional<Form> f;
    std::string why;
    for (bool muls : {true, false})
      for (Node* u : rd)
        if (!f && why.empty() && is_op(u, "Mul") == muls) f = form_at(cx, c, u, &why);
    if (!f) {
      if (!why.empty()) r.refused.push_back({conv->name(), why});
      continue;
    }
    // Every node of the form but the last is read only inside it, and c only by the form.
    auto inside = [&](const Node* n) { return std::find(f->nodes.begin(), f->nodes.end(), n) != f->nodes.end(); };
    std::string problem;
    for (const Node* u : rd)
      if (!inside(u)) problem = "the conv's output is also read by " + where(u) + " (the step writes only the activation's output)";
    if (cx.g.is_graph_output(c)) problem = "the conv's output is a model output";
    for (size_t i = 0; i + 1 < f->nodes.size() && problem.empty(); ++i) {
      const Value* v = f->nodes[i]->output(0);
      for (const Node* u : v->users())
        if (!inside(u)) problem = "its " + f->nodes[i]->op() + "'s output is also read by " + where(u);
      if (cx.g.is_graph_output(v)) problem = "its " + f->nodes[i]->op() + "'s output is a model output";
    }
    for (const Node* n : f->nodes)
      if (cx.absorbed.count(n)) problem = "another fusion took " + n->name();
    if (!problem.empty()) {
      r.refused.push_back({conv->name(), f->what + " not absorbed: " + problem});
      continue;
    }
    for (Node* n : f->nodes) cx.absorbed.insert(n);
    cx.dw_act[conv] = f->act;
    ++r.fired;
  }
  return r;
}

}  // namespace sabre::codegen::passes
