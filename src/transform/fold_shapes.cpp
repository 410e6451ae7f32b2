#include "transform/fold_shapes.h"

namespace sabre::transform {

namespace {
// A value that fold_shapes may turn into a constant: produced by a node, integer or bool, its
// elements all known as static dims and as many of them as its static shape holds.
bool foldable(const ir::Graph& g, const ir::Value* v) {
  const auto& kd = v->known_dims();
  if (!kd || !v->producer() || !v->type().known || ir::is_float(v->dtype())) return false;
  // Graph outputs keep their names and producers: the user asked for exactly that value.
  if (g.is_graph_output(v)) return false;
  if (!ir::is_static(v->shape())) return false;
  ir::Dim n = ir::num_elements(v->shape());
  if (n.value() != static_cast<int64_t>(kd->size())) return false;
  for (const ir::Dim& d : *kd)
    if (!d.is_static()) return false;
  return true;
}
}  // namespace

ir::Graph fold_shapes(ir::Graph g) {
  for (ir::Node* n : g.topo_order()) {
    for (ir::Value* v : n->outputs()) {
      if (!foldable(g, v)) continue;
      std::vector<int64_t> vals;
      for (const ir::Dim& d : *v->known_dims()) vals.push_back(d.value());
      ir::Tensor t = ir::Tensor::from_i64(vals, ir::static_dims(v->shape()));
      if (v->dtype() != ir::DType::i64) t = t.cast(v->dtype());
      ir::Value* c = g.add_constant(v->name(), std::move(t));
      g.replace_all_uses(v, c);
    }
  }
  g.remove_dead();
  return g;
}

}  // namespace sabre::transform
