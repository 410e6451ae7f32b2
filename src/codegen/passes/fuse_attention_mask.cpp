// fuse_attention_mask: an additive mask Where(Cast<bool>(m), t, f) of an i64 tensor m (scalar t
// and f: the padding mask HF exports build from attention_mask) that only fused attention steps
// read: they read m itself and select t or f per element, and the Where and its casts are not
// emitted (at batch 1 BERT-base's mask was a kernel of its own, ahead of the first layer).
// Tests: tests/unit/codegen_passes_test.cpp
#include <cmath>

#include "codegen/passes/pass.h"

namespace sabre::codegen::passes {

PassResult fuse_attention_mask(LowerContext& cx) {
  PassResult r;
  if (!cx.o.fuse_attention) {
    r.skipped = "attention fusion is off (LowerOptions::fuse_attention)";
    return r;
  }
  std::map<Value*, std::vector<AttentionFusion*>> readers;
  for (auto& [out, a] : cx.attention)
    if (a.mask) readers[a.mask].push_back(&a);
  for (auto& [w, fused] : readers) {
    Node* where = w->producer();
    if (!where || !where->domain().empty() || where->op() != "Where") continue;
    auto refuse = [&](const std::string& why) {
      r.refused.push_back({where->name(), "mask not read as its i64 source by the attention steps: " + why});
    };
    if (cx.g.is_graph_output(w) || w->users().size() != fused.size()) {
      refuse("the mask is also read outside the fused attention steps");
      continue;
    }
    if (!scalar_constant(where->input(1)) || !scalar_constant(where->input(2))) {
      refuse("the Where does not select between two constant scalars");
      continue;
    }
    // Every reader is a fused softmax's mask Add (absorbed), one per attention step that reads w.
    bool all_fused = true;
    for (const Node* u : w->users()) all_fused = all_fused && cx.absorbed.count(u) && u->op() == "Add";
    if (!all_fused) {
      refuse("a reader of the mask is not a fused softmax's mask Add");
      continue;
    }
    std::vector<Node*> casts;
    Value* m = where->input(0);
    while (Node* c = m->producer()) {
      if (!c->domain().empty() || c->op() != "Cast" || c->output(0)->dtype() != ir::DType::boolean) break;
      casts.push_back(c);
      m = c->input(0);
    }
    const double t = where->input(1)->constant().get_f64(0), f = where->input(2)->constant().get_f64(0);
    if (casts.empty() || m->dtype() != ir::DType::i64 || !(m->shape() == w->shape())) {
      refuse("the condition is not a Cast to bool of an i64 tensor of the mask's shape");
      continue;
    }
    if (!std::isfinite(t) || !std::isfinite(f)) {  // the plan's JSON has no infinities
      refuse("a selected value is infinite");
      continue;
    }
    for (AttentionFusion* a : fused) {
      a->mask = m;
      a->select = true;
      a->mask_true = t;
      a->mask_false = f;
    }
    cx.absorbed.insert(where);
    Node* next = where;
    for (Node* c : casts) {  // a cast something else also reads is still computed
      if (!only_user(cx.g, c->output(0), next)) break;
      cx.absorbed.insert(c);
      next = c;
    }
    ++r.fired;
  }
  return r;
}

}  // namespace sabre::codegen::passes
