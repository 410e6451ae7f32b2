// eliminate_dead_code: which nodes must run, walking back from the outputs through the inputs each
// node's (possibly fused) step reads. What no output reads does not run; an integer value shape
// folding knows (Shape(x), a Gather of it, ...) is written by a "fill" step from the evaluated dims,
// so the shape subgraph that computes it disappears. Tests: tests/unit/codegen_passes_test.cpp
#include "codegen/passes/pass.h"

namespace sabre::codegen::passes {
namespace {

// The values the step for `n` reads, after the fusions.
std::vector<Value*> data_inputs(const LowerContext& cx, Node* n) {
  const std::string& op = n->op();
  if (n->domain() == "sabre") {
    std::vector<Value*> v = n->inputs();
    if (auto it = cx.row_gather.find(n); it != cx.row_gather.end()) v[it->second.input] = it->second.x;
    return v;
  }
  if (is_view(op) || op == "Expand" || op == "Slice" || op == "Transpose" || op == "Split" ||
      op.rfind("Reduce", 0) == 0 || op == "Clip")
    return {n->input(0)};
  if (op == "Softmax") {
    auto it = cx.softmax.find(n);
    if (it == cx.softmax.end()) return {n->input(0)};
    std::vector<Value*> v{it->second.x};
    if (it->second.mask) v.push_back(it->second.mask);
    return v;
  }
  if (op == "LayerNormalization" && cx.embedding.count(n)) {
    std::vector<Value*> v{n->input(1)};
    if (n->num_inputs() > 2 && n->input(2)) v.push_back(n->input(2));
    for (const EmbeddingTerm& t : cx.embedding.at(n)) {
      v.push_back(t.table);
      v.push_back(t.ids);
    }
    return v;
  }
  if (op == "LayerNormalization") {
    std::vector<Value*> v(n->inputs());
    if (auto it = cx.ln_residual.find(n); it != cx.ln_residual.end()) {
      v[0] = it->second->input(0);
      v.push_back(it->second->input(1));
    }
    return v;
  }
  if (op == "Gather" && cx.range_gather.count(n)) return {n->input(0)};
  if (auto it = cx.attention.find(n); it != cx.attention.end()) {
    std::vector<Value*> v{it->second.q, it->second.k, it->second.v};
    if (it->second.mask) v.push_back(it->second.mask);
    return v;
  }
  if (op == "Range" && cx.range_operands(n)) return {};
  std::vector<Value*> v;
  for (Value* x : n->inputs())
    if (x) v.push_back(x);
  return v;
}


}  // namespace

PassResult eliminate_dead_code(LowerContext& cx) {
  PassResult r;
  std::vector<Node*> work;
  for (const Value* v : cx.g.outputs())
    if (v->producer()) work.push_back(v->producer());
  while (!work.empty()) {
    Node* n = work.back();
    work.pop_back();
    if (!cx.needed.insert(n).second) continue;
    for (Value* v : data_inputs(cx, n)) {
      if (cx.materializable(v)) {
        cx.materialized.insert(v);  // written by a fill step from its known dims; its producer need not run
        continue;
      }
      if (v && v->producer() && (v->producer()->op() == "Shape" || v->producer()->op() == "Size") &&
          v->producer()->domain().empty())
        r.refused.push_back({n->name(), "shape value %" + v->name() + " not filled from the dims: " +
                                            (!v->known_dims() ? "shape inference does not know it"
                                                              : "more than " + std::to_string(kMaxFillValues) + " values") +
                                            ", so its " + v->producer()->op() + " runs"});
      if (v && v->producer() && !cx.needed.count(v->producer())) work.push_back(v->producer());
    }
  }
  for (const Node* n : cx.order) r.fired += !cx.needed.count(n) && !cx.absorbed.count(n);
  r.fired += static_cast<int>(cx.materialized.size());
  return r;
}

}  // namespace sabre::codegen::passes
