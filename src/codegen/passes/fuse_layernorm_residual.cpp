// fuse_layernorm_residual: LayerNorm(a + b) reads a and b and adds them itself (one step, no Add).
// Tests: tests/unit/codegen_passes_test.cpp
#include "codegen/passes/pass.h"

namespace sabre::codegen::passes {

PassResult fuse_layernorm_residual(LowerContext& cx) {
  PassResult r;
  for (Node* ln : cx.order) {
    if (!ln->domain().empty() || ln->op() != "LayerNormalization" || cx.embedding.count(ln)) continue;
    Value* x = ln->input(0);
    Node* p = x->producer();
    if (!p || p->op() != "Add" || p->domain() != "") continue;
    auto refuse = [&](const std::string& why) { r.refused.push_back({ln->name(), "residual " + p->name() + " not absorbed: " + why}); };
    if (cx.absorbed.count(p)) {
      refuse("another fusion took the Add");
      continue;
    }
    if (!only_user(cx.g, x, ln)) {
      refuse(cx.g.is_graph_output(x) ? "the Add's output is a model output"
                                     : "the Add has " + std::to_string(x->users().size()) + " users");
      continue;
    }
    if (p->input(0)->shape() != x->shape() || p->input(1)->shape() != x->shape()) {
      refuse("the Add broadcasts (" + ir::str(p->input(0)->shape()) + " + " + ir::str(p->input(1)->shape()) + ")");
      continue;
    }
    if (p->input(0)->is_constant() || p->input(1)->is_constant()) {
      refuse("an operand is a constant (a bias, not a residual)");
      continue;
    }
    cx.absorbed.insert(p);
    cx.ln_residual[ln] = p;
    ++r.fired;
  }
  return r;
}

}  // namespace sabre::codegen::passes
