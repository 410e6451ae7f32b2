#include "transform/fuse_gelu.h"

#include <cmath>

#include "pattern/pattern.h"
#include "pattern/region.h"
#include "transform/rewrite.h"

namespace sabre::transform {

namespace {
using namespace pattern;

// x·0.5·s in the three shapes exporters give it: (x·0.5)·s, (x·s)·0.5, x·(0.5·s); Mul commutes.
Pat half_x_times(Pat x, Pat s) {
  Pat half = scalar(0.5);
  return alt({(x * half) * s, (x * s) * half, x * (half * s)});
}

Pat erf_form() {
  Pat x = wildcard("x");
  Pat scaled = alt({op("Div", {x, scalar(std::sqrt(2.0))}), x * scalar(1.0 / std::sqrt(2.0))});
  return half_x_times(x, op("Erf", {scaled}) + scalar(1.0));
}

Pat tanh_form() {
  Pat x = wildcard("x");
  Pat cube = alt({op("Pow", {x, scalar(3.0)}), (x * x) * x, x * (x * x)});
  Pat inner = x + scalar(0.044715) * cube;
  Pat t = op("Tanh", {scalar(std::sqrt(2.0 / M_PI)) * inner});
  return half_x_times(x, t + scalar(1.0));
}

}  // namespace

ir::Graph fuse_gelu(ir::Graph g) {
  static const Pat forms[2] = {erf_form(), tanh_form()};
  static const char* approximate[2] = {"none", "tanh"};
  for (bool changed = true; changed;) {
    changed = false;
    // Consumers first: a match rooted at the last node of an idiom takes its optional tail too.
    auto order = g.topo_order();
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      ir::Node* n = *it;
      for (int f = 0; f < 2 && !changed; ++f) {
        auto m = match_at(forms[f], n);
        if (!m || m->root != n || !ir::is_float(m->value("x")->dtype())) continue;
        if (region_problem(g, m->region)) continue;  // an intermediate is used elsewhere
        ir::Node* gelu = g.add_node("Gelu", {m->value("x")}, 1, {{"approximate", std::string(approximate[f])}},
                                    detail::temp_node_name(g, n->name()));
        gelu->output(0)->set_type(n->output(0)->type());
        const std::string name = n->name();
        detail::replace_value(g, n->output(0), gelu->output(0));
        detail::remove_nodes(g, m->region);
        gelu->set_name(name);
        changed = true;
      }
      if (changed) break;
    }
  }
  g.remove_dead();  // the idiom's constants
  return g;
}

}  // namespace sabre::transform
