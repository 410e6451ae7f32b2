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
// Tests: tests/golden/lower/fuse_depthwise_activation/, tests/unit/codegen_plan_interp_test.cpp,
// tests/unit/codegen_layout_nhwc_test.cpp
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <variant>

#include "codegen/passes/fusion.h"

namespace sabre::codegen::passes {
namespace {

using native::ConvAct;
using namespace pattern;

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

// A candidate: the nodes after the conv that one activation absorbs, the last one's output the step's.
struct Form {
  std::vector<Node*> nodes;
  DwActivation act;
  std::string what;  // how refusals name it: "SiLU Mul_3"
};

// One activation form over the conv's output c: its structure, rooted at the node whose output the
// step writes, and what the kernel applies (or, a refusal, why the form cannot be absorbed).
struct ActForm {
  Pat structure;
  bool mul;  // rooted at a Mul (a SiLU-like product): tried before the forms that are not
  std::function<std::variant<DwActivation, std::string>(const Match&, const LowerContext&)> act;
};

DwActivation activation(ConvAct a, double alpha = 1, double beta = 0, double lo = -INFINITY, double hi = INFINITY) {
  return {nullptr, lo, hi, a, alpha, beta};
}

double attr(const Match& m, const std::string& node, const char* name, double def) {
  return m.nodes.at(node)->attr_float(name, def);
}

// The forms, each exporter's spelling of the same math (the file's header lists them).
const std::vector<ActForm>& forms() {
  static const std::vector<ActForm> table = [] {
    const Pat c = wildcard("c");
    std::vector<ActForm> t;
    t.push_back({c * op("Sigmoid", {c}).as("gate"), true, [](const Match&, const LowerContext&) {
                   return std::variant<DwActivation, std::string>(activation(ConvAct::silu));
                 }});
    t.push_back({c * op("Sigmoid", {(c * constant("a")).as("scale")}).as("gate"), true,
                 [](const Match& m, const LowerContext& cx) -> std::variant<DwActivation, std::string> {
                   const Value* a = m.value("a");  // Swish's scale: a constant float scalar, read only by the gate
                   const Node* s = m.nodes.at("scale");
                   if (!scalar_constant(a) || !ir::is_float(a->dtype()) || !only_user(cx.g, s->output(0), m.nodes.at("gate")))
                     return std::string();
                   return activation(ConvAct::silu, a->constant().get_f64(0));
                 }});
    t.push_back({c * op("HardSigmoid", {c}).as("gate"), true, [](const Match& m, const LowerContext&) {
                   return std::variant<DwActivation, std::string>(
                       activation(ConvAct::hard_swish, attr(m, "gate", "alpha", 0.2), attr(m, "gate", "beta", 0.5)));
                 }});
    t.push_back({op("Relu", {c}), false, [](const Match&, const LowerContext&) {
                   return std::variant<DwActivation, std::string>(activation(ConvAct::none, 1, 0, 0));
                 }});
    t.push_back({op_any("Clip"), false, [](const Match& m, const LowerContext&) -> std::variant<DwActivation, std::string> {
                   auto b = clip_bounds(m.root);
                   if (!b || b->first > b->second)  // min above max: every output is max; not worth a special case
                     return "Clip " + m.root->name() + " not absorbed: " +
                            (b ? "its min is above its max" : "its bounds are not constant scalars");
                   return activation(ConvAct::none, 1, 0, b->first, b->second);
                 }});
    t.push_back({op("Sigmoid", {c}), false, [](const Match&, const LowerContext&) {
                   return std::variant<DwActivation, std::string>(activation(ConvAct::sigmoid));
                 }});
    t.push_back({op("HardSigmoid", {c}).as("act"), false, [](const Match& m, const LowerContext&) {
                   return std::variant<DwActivation, std::string>(
                       activation(ConvAct::hard_sigmoid, attr(m, "act", "alpha", 0.2), attr(m, "act", "beta", 0.5)));
                 }});
    t.push_back({op("HardSwish", {c}), false, [](const Match&, const LowerContext&) {
                   return std::variant<DwActivation, std::string>(activation(ConvAct::hard_swish, 1.0 / 6.0, 0.5));
                 }});
    return t;
  }();
  return table;
}

// The activation form rooted at reader `u` of c, or nullopt where `u` roots none (or, with
// *refused set, where it roots one that cannot be absorbed).
std::optional<Form> form_at(const LowerContext& cx, const Value* c, Node* u, std::string* refused) {
  for (const ActForm& af : forms()) {
    if (af.mul != (u->domain().empty() && u->op() == "Mul")) continue;
    auto m = match_at(af.structure, u);
    // Clip's structure names no c: u reads c, and where c is a bound, clip_bounds says it is no constant.
    if (!m || (m->has("c") && m->value("c") != c)) continue;
    auto act = af.act(*m, cx);
    if (auto* why = std::get_if<std::string>(&act)) {
      *refused = *why;
      if (!why->empty()) return std::nullopt;
      continue;
    }
    Form f;
    f.act = std::get<DwActivation>(act);
    f.act.node = u;
    f.nodes = m->region;  // the gate's nodes before the Mul: post-order
    f.what = af.mul ? std::string(f.act.act == ConvAct::silu ? "SiLU " : "hard swish ") + u->name()
                    : u->op() + " " + u->name();
    return f;
  }
  return std::nullopt;
}

Verdict check(const Match& m, LowerContext& cx) {
  const Node* conv = m.root;
  const Value* c = conv->output(0);
  const std::vector<Node*> rd = readers(c);
  // A SiLU's Mul reads c and its gate, and the gate (a Sigmoid, or a Swish scale) reads c too:
  // the Muls are tried first, so a Sigmoid is taken alone only where no Mul makes it a SiLU.
  std::optional<Form> f;
  std::string why;
  for (bool muls : {true, false})
    for (Node* u : rd)
      if (!f && why.empty() && is_op(u, "Mul") == muls) f = form_at(cx, c, u, &why);
  if (!f) return why.empty() ? Verdict::not_mine() : Verdict::refuse(why);
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
  if (!problem.empty()) return Verdict::refuse(f->what + " not absorbed: " + problem);
  return Verdict::fuse().with(std::move(*f));
}

void record(const Match& m, const Verdict& v, LowerContext& cx) {
  const auto& f = std::any_cast<const Form&>(v.decision);
  for (Node* n : f.nodes) cx.absorbed.insert(n);
  cx.dw_act[m.root] = f.act;
}

}  // namespace

const Fusion& depthwise_activation_fusion() {
  static const Fusion f{"fuse_depthwise_activation", "y = act(DepthwiseConv(x, w) + b), act one of the forms above",
                        op_any("Conv", {attr_test("depthwise (the native kernel runs it)",
                                                  [](const Node& n) { return depthwise_problem(&n).empty(); })}),
                        check, record};
  return f;
}

PassResult fuse_depthwise_activation(LowerContext& cx) {
  if (!cx.o.pick_conv) {
    PassResult r;
    r.skipped = "no conv kernel picker (LowerOptions::pick_conv): convs are refused";
    return r;
  }
  return run_fusion(depthwise_activation_fusion(), cx);
}

}  // namespace sabre::codegen::passes
