// fuse_attention_mask: an additive mask Where(Cast<bool>(m), t, f) of an i64 tensor m (scalar t
// and f: the padding mask HF exports build from attention_mask) that only fused attention steps
// read: they read m itself and select t or f per element, and the Where and its casts are not
// emitted (at batch 1 BERT-base's mask was a kernel of its own, ahead of the first layer).
// Tests: tests/golden/lower/fuse_attention_mask/
#include <cmath>

#include "codegen/passes/fusion.h"

namespace sabre::codegen::passes {
namespace {

using namespace pattern;

// What a read-through mask takes: the i64 source, the casts between, and the two selected values.
struct SelectMask {
  std::vector<AttentionFusion*> readers;
  Value* m = nullptr;
  std::vector<Node*> casts;
  double t = 0, f = 0;
};

Verdict check(const Match& match, LowerContext& cx) {
  Node* where = match.root;
  Value* w = where->output(0);
  SelectMask s;
  for (auto& [out, a] : cx.attention)
    if (a.mask == w) s.readers.push_back(&a);
  if (s.readers.empty()) return Verdict::not_mine();  // no fused attention step reads it
  auto refuse = [](const std::string& why) {
    return Verdict::refuse("mask not read as its i64 source by the attention steps: " + why);
  };
  if (cx.g.is_graph_output(w) || w->users().size() != s.readers.size())
    return refuse("the mask is also read outside the fused attention steps");
  if (!scalar_constant(match.value("t")) || !scalar_constant(match.value("f")))
    return refuse("the Where does not select between two constant scalars");
  // Every reader is a fused softmax's mask Add (absorbed), one per attention step that reads w.
  for (const Node* u : w->users())
    if (!cx.absorbed.count(u) || u->op() != "Add") return refuse("a reader of the mask is not a fused softmax's mask Add");
  s.m = match.value("cond");
  while (Node* c = s.m->producer()) {
    if (!c->domain().empty() || c->op() != "Cast" || c->output(0)->dtype() != ir::DType::boolean) break;
    s.casts.push_back(c);
    s.m = c->input(0);
  }
  s.t = match.value("t")->constant().get_f64(0), s.f = match.value("f")->constant().get_f64(0);
  if (s.casts.empty() || s.m->dtype() != ir::DType::i64 || !(s.m->shape() == w->shape()))
    return refuse("the condition is not a Cast to bool of an i64 tensor of the mask's shape");
  if (!std::isfinite(s.t) || !std::isfinite(s.f))  // the plan's JSON has no infinities
    return refuse("a selected value is infinite");
  return Verdict::fuse().with(std::move(s));
}

void record(const Match& match, const Verdict& v, LowerContext& cx) {
  const auto& s = std::any_cast<const SelectMask&>(v.decision);
  for (AttentionFusion* a : s.readers) {
    a->mask = s.m;
    a->select = true;
    a->mask_true = s.t;
    a->mask_false = s.f;
  }
  Node* where = match.root;
  cx.absorbed.insert(where);
  Node* next = where;
  for (Node* c : s.casts) {  // a cast something else also reads is still computed
    if (!only_user(cx.g, c->output(0), next)) break;
    cx.absorbed.insert(c);
    next = c;
  }
}

}  // namespace

const Fusion& attention_mask_fusion() {
  static const Fusion f{"fuse_attention_mask",
                        "attention reads m (i64) as mask = m ? t : f, for Where(Cast<bool>(m), t, f) read only by "
                        "attention steps",
                        op("Where", {wildcard("cond"), wildcard("t"), wildcard("f")}), check, record};
  return f;
}

PassResult fuse_attention_mask(LowerContext& cx) {
  if (!cx.o.fuse_attention) {
    PassResult r;
    r.skipped = "attention fusion is off (LowerOptions::fuse_attention)";
    return r;
  }
  return run_fusion(attention_mask_fusion(), cx);
}

}  // namespace sabre::codegen::passes
