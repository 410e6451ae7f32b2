// fuse_se_scale: the squeeze-excite scale y = x · gate, x [N,C,H,W] and gate [N,C,1,1] broadcast over
// H and W, the gate a sigmoid or hard sigmoid (a Sigmoid/HardSigmoid node, or the epilogue of the GEMM
// or conv region computing it), in either operand order. It is folded where it is cheapest that the
// kernels allow: the elementwise step that runs it also runs what follows it elementwise (a residual
// Add, an activation: group_elementwise joins them), the gate read through a broadcast of its
// [N,C,1,1] tensor. The other place, the A-operand prologue of the 1x1 conv or GEMM that reads y,
// would save the step, but no GEMM or conv kernel sabre runs scales A as it loads it (the SM90 kernels
// load A by TMA straight into shared memory), so there the pass refuses and says so.
// Tests: tests/golden/lower/fuse_se_scale/, tests/unit/codegen_plan_interp_test.cpp
#include "codegen/passes/pass.h"

namespace sabre::codegen::passes {
namespace {

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

}  // namespace

PassResult fuse_se_scale(LowerContext& cx) {
  PassResult r;
  for (Node* m : cx.order) {
    if (!cx.needed.count(m) || cx.absorbed.count(m)) continue;
    const auto [x, gate] = se_operands(m);
    if (!x) continue;
    cx.se_scale[m] = {x, gate};
    auto it = cx.group_of.find(m);
    if (it != cx.group_of.end() && cx.groups[it->second].nodes.back() != m) {
      ++r.fired;  // the elementwise ops after it run in its step
      continue;
    }
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
    r.refused.push_back({m->name(), "SE scale not folded into what follows: " + why + "; the scale is an elementwise step of its own"});
  }
  return r;
}

}  // namespace sabre::codegen::passes
