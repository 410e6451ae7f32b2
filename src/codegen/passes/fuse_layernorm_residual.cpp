// fuse_layernorm_residual: LayerNorm(a + b) reads a and b and adds them itself (one step, no Add).
// Tests: tests/unit/codegen_passes_test.cpp
#include "codegen/passes/fusion.h"

namespace sabre::codegen::passes {
namespace {

using namespace pattern;

Pat structure() {
  const Pat sum = op("Add", {wildcard("a"), wildcard("b")}).as("add");
  return alt({op("LayerNormalization", {sum, wildcard(), wildcard()}), op("LayerNormalization", {sum, wildcard()})});
}

Verdict check(const Match& m, LowerContext& cx) {
  const Node* ln = m.root;
  const Node* add = m.nodes.at("add");
  if (cx.embedding.count(ln)) return Verdict::not_mine();  // fuse_embed_layernorm took this LayerNorm
  const Value* x = ln->input(0);
  auto refuse = [&](const std::string& why) { return Verdict::refuse("residual " + add->name() + " not absorbed: " + why); };
  if (cx.absorbed.count(add)) return refuse("another fusion took the Add");
  if (!only_user(cx.g, x, ln))
    return refuse(cx.g.is_graph_output(x) ? "the Add's output is a model output"
                                          : "the Add has " + std::to_string(x->users().size()) + " users");
  const Value* a = m.value("a");
  const Value* b = m.value("b");
  if (a->shape() != x->shape() || b->shape() != x->shape())
    return refuse("the Add broadcasts (" + ir::str(a->shape()) + " + " + ir::str(b->shape()) + ")");
  if (a->is_constant() || b->is_constant()) return refuse("an operand is a constant (a bias, not a residual)");
  return Verdict::fuse();
}

void record(const Match& m, LowerContext& cx) {
  Node* add = m.nodes.at("add");
  cx.absorbed.insert(add);
  cx.ln_residual[m.root] = add;
}

}  // namespace

const Fusion& layernorm_residual_fusion() {
  static const Fusion f{"fuse_layernorm_residual", "y = LayerNorm(a + b), a and b of y's shape", structure(), check, record};
  return f;
}

PassResult fuse_layernorm_residual(LowerContext& cx) { return run_fusion(layernorm_residual_fusion(), cx); }

}  // namespace sabre::codegen::passes
