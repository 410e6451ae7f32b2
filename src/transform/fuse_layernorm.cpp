#include "transform/fuse_layernorm.h"

#include "pattern/pattern.h"
#include "pattern/region.h"
#include "transform/rewrite.h"

namespace sabre::transform {

namespace {
using namespace pattern;

Pat layernorm_form() {
  Pat x = wildcard("x");
  auto keep = attr_eq("keepdims", int64_t{1}, int64_t{1});
  Pat mean = op("ReduceMean", {x, constant("axes1")}, {keep});
  Pat d = op("Sub", {x, mean});
  Pat var = op("ReduceMean", {alt({op("Pow", {d, scalar(2.0)}), d * d}), constant("axes2")}, {keep});
  Pat normed = op("Div", {d, op("Sqrt", {var + constant("eps")})});
  Pat scaled = normed * constant("gamma");
  return alt({scaled + constant("beta"), scaled});
}

// Reduces over exactly the last axis of a rank-r input.
bool last_axis(const ir::Value* axes, size_t rank) {
  auto v = axes->constant().to_i64_vector();
  return v.size() == 1 && (v[0] == -1 || v[0] == static_cast<int64_t>(rank) - 1);
}

bool vector_over(const ir::Value* p, const ir::Dim& c) {
  return p->shape().size() == 1 && p->shape()[0] == c;
}

}  // namespace

ir::Graph fuse_layernorm(ir::Graph g) {
  static const Pat form = layernorm_form();
  for (bool changed = true; changed;) {
    changed = false;
    // Consumers first: a match rooted at the last node of an idiom takes its optional tail too.
    auto order = g.topo_order();
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      ir::Node* n = *it;
      auto m = match_at(form, n);
      if (!m || m->root != n) continue;
      ir::Value* x = m->value("x");
      const size_t rank = x->shape().size();
      if (rank == 0 || !ir::is_float(x->dtype()) || !x->type().known) continue;
      const ir::Dim c = x->shape().back();
      if (!last_axis(m->value("axes1"), rank) || !last_axis(m->value("axes2"), rank)) continue;
      const ir::Tensor& eps = m->value("eps")->constant();
      if (eps.numel() != 1 || !vector_over(m->value("gamma"), c)) continue;
      if (m->has("beta") && !vector_over(m->value("beta"), c)) continue;
      if (region_problem(g, m->region)) continue;
      std::vector<ir::Value*> ins = {x, m->value("gamma")};
      if (m->has("beta")) ins.push_back(m->value("beta"));
      ir::Node* ln = g.add_node("LayerNormalization", ins, 1,
                                {{"axis", int64_t{-1}}, {"epsilon", eps.get_f64(0)}},
                                detail::temp_node_name(g, n->name()));
      ln->output(0)->set_type(n->output(0)->type());
      const std::string name = n->name();
      detail::replace_value(g, n->output(0), ln->output(0));
      detail::remove_nodes(g, m->region);
      ln->set_name(name);
      changed = true;
      break;
    }
  }
  g.remove_dead();  // the idiom's constants
  return g;
}

}  // namespace sabre::transform
