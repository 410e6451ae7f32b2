// fuse_se_scale: the squeeze-excite scale y = x · gate, x [N,C,H,W] and gate [N,C,1,1] broadcast over
// H and W, the gate a sigmoid or hard sigmoid (a Sigmoid/HardSigmoid node, or the epilogue of the GEMM
// or conv region computing it), in either operand order. It is folded where it is cheapest that the
// kernels allow: the elementwise step that runs it also runs what follows it elementwise (a residual
// Add, an activation: group_elementwise joins them), the gate read through a broadcast of its
// [N,C,1,1] tensor. The other place, the A-operand prologue of the 1x1 conv or GEMM that reads y,
// would save the step, but no GEMM or conv kernel sabre runs scales A as it loads it (the SM90 kernels
// load A by TMA straight into shared memory), so there the pass refuses and says so.
// Tests: tests/golden/lower/fuse_se_scale/, tests/unit/codegen_plan_interp_test.cpp
#include "codegen/passes/fusion.h"

namespace sabre::codegen::passes {
namespace {

using namespace pattern;

bool spatial(const ir::Shape& s) { return !(s[2] == Dim(1) && s[3] == Dim(1)); }

// A gate: in (0, 1) per (n, c), from a Sigmoid or HardSigmoid node or a region whose epilogue ends in sigmoid.
bool is_gate(const Value* g) {
  const Node* p = g->producer();
  if (!p) return false;
  if (p->domain().empty()) return p->op() == "Sigmoid" || p->op() == "HardSigmoid";
  const std::string e = p->attr_string("epilogue", "");
  return p->domain() == "sabre" && p->op() == "Composite" && e.size() >= 7 && e.compare(e.size() - 7, 7, "sigmoid") == 0;
}

// The feature map and gate of an SE scale at `m`, or {nullptr, nullptr}.
std::pair<Value*, Value*> se_operands(const Node* m) {
  if (!m->domain().empty() || m->op() != "Mul" || m->num_inputs() != 2) return {nullptr, nullptr};
  for (int i : {0, 1}) {
    Value *x = m->input(i), *g = m->input(1 - i);
    const ir::Shape &xs = x->shape(), &gs = g->shape();
    if (xs.size() != 4 || gs.size() != 4 || !spatial(xs)) continue;
    if (gs[0] == xs[0] && gs[1] == xs[1] && gs[2] == Dim(1) && gs[3] == Dim(1) && is_gate(g)) return {x, g};
  }
  return {nullptr, nullptr};
}

// Why a scale that is not the head of a longer elementwise step stays a step of its own.
std::string not_folded(const Node* m, LowerContext& cx) {
  const Value* y = m->output(0);
  std::string why;
  Node* u = cx.sole_user(y);
  if (cx.g.is_graph_output(y)) {
    why = "its output is a model output";
  } else if (!u) {
    why = "its output is read by " + std::to_string(y->users().size()) + " nodes";
  } else if (u->domain() == "sabre" && u->op() == "Composite") {
    why = "a GEMM or conv region reads it, and no GEMM or conv kernel takes the scale as an A-operand prologue";
  } else {
    why = "a " + u->op() + " reads it, which no elementwise step runs";
  }
  return "SE scale not folded into what follows: " + why + "; the scale is an elementwise step of its own";
}

// The structure finds a Mul with a gate operand; se_operands decides which operand is the gate
// from the shapes (either order, as the structure's match may bind the other first).
Verdict check(const Match& match, LowerContext& cx) {
  Node* m = match.root;
  if (!cx.needed.count(m) || cx.absorbed.count(m)) return Verdict::not_mine();
  const auto operands = se_operands(m);
  if (!operands.first) return Verdict::not_mine();
  // Recorded either way: the dump names the scale where it is not folded too.
  auto it = cx.group_of.find(m);
  if (it != cx.group_of.end() && cx.groups[it->second].nodes.back() != m)
    return Verdict::fuse().with(operands);  // the elementwise ops after it run in its step
  return Verdict::keep(not_folded(m, cx)).with(operands);
}

void record(const Match& m, const Verdict& v, LowerContext& cx) {
  cx.se_scale[m.root] = std::any_cast<std::pair<Value*, Value*>>(v.decision);
}

Pat structure() {
  const Pat gate = alt({op("Sigmoid", {wildcard()}), op("HardSigmoid", {wildcard()}),
                        op_any("Composite", {attr_test("epilogue ends in sigmoid", [](const Node& n) {
                                 const std::string e = n.attr_string("epilogue", "");
                                 return e.size() >= 7 && e.compare(e.size() - 7, 7, "sigmoid") == 0;
                               })},
                               "sabre")});
  return wildcard("x") * gate.as("gate");
}

}  // namespace

const Fusion& se_scale_fusion() {
  static const Fusion f{"fuse_se_scale",
                        "y = x · gate, x [N,C,H,W], gate [N,C,1,1] in (0, 1), run in the elementwise step after it",
                        structure(), check, record};
  return f;
}

PassResult fuse_se_scale(LowerContext& cx) { return run_fusion(se_scale_fusion(), cx); }

}  // namespace sabre::codegen::passes
