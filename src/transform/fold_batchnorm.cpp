#include "transform/fold_batchnorm.h"

#include <cmath>

#include "transform/rewrite.h"

namespace sabre::transform {

namespace {

bool all_const(const ir::Node* n, size_t from, size_t to) {
  for (size_t i = from; i < to; ++i)
    if (!n->input(i) || !n->input(i)->is_constant()) return false;
  return true;
}

std::vector<double> values(const ir::Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.get_f64(i);
  return v;
}

}  // namespace

ir::Graph fold_batchnorm(ir::Graph g) {
  for (ir::Node* bn : g.topo_order()) {
    if (bn->op() != "BatchNormalization" || !bn->domain().empty() || bn->num_outputs() != 1) continue;
    ir::Value* y = bn->input(0);
    ir::Node* conv = y ? y->producer() : nullptr;
    if (!conv || conv->op() != "Conv" || !conv->domain().empty()) continue;
    if (y->users().size() != 1 || g.is_graph_output(y)) continue;
    if (!all_const(bn, 1, 5) || !conv->input(1)->is_constant()) continue;
    ir::Value* bias_v = conv->input(2);
    if (bias_v && !bias_v->is_constant()) continue;
    const ir::Tensor& w = conv->input(1)->constant();
    if (!ir::is_float(w.dtype()) || w.rank() < 1) continue;
    const int64_t k = w.dims()[0];
    auto gamma = values(bn->input(1)->constant()), beta = values(bn->input(2)->constant());
    auto mean = values(bn->input(3)->constant()), var = values(bn->input(4)->constant());
    if (static_cast<int64_t>(gamma.size()) != k || beta.size() != gamma.size() || mean.size() != gamma.size() ||
        var.size() != gamma.size())
      continue;
    const double eps = bn->attr_float("epsilon", 1e-5);
    std::vector<double> b0 = bias_v ? values(bias_v->constant()) : std::vector<double>(k, 0.0);
    if (static_cast<int64_t>(b0.size()) != k) continue;

    // Scale in double, round once to the weight's dtype.
    ir::Tensor w2(w.dtype(), w.dims());
    const int64_t per = w.numel() / k;
    ir::Tensor b2(w.dtype(), {k});
    for (int64_t o = 0; o < k; ++o) {
      const double s = gamma[o] / std::sqrt(var[o] + eps);
      for (int64_t i = 0; i < per; ++i) w2.set_f64(o * per + i, w.get_f64(o * per + i) * s);
      b2.set_f64(o, (b0[o] - mean[o]) * s + beta[o]);
    }
    ir::Value* wv = g.add_constant(conv->input(1)->name() + ".bn_folded", std::move(w2));
    ir::Value* bv = g.add_constant(conv->name() + ".bias_bn_folded", std::move(b2));
    ir::Node* c2 = g.add_node("Conv", {conv->input(0), wv, bv}, 1, conv->attrs(), detail::temp_node_name(g, conv->name()));
    c2->output(0)->set_type(bn->output(0)->type());
    const std::string name = conv->name();
    detail::replace_value(g, bn->output(0), c2->output(0));
    g.remove_node(bn);
    g.remove_node(conv);
    c2->set_name(name);
  }
  g.remove_dead();
  return g;
}

}  // namespace sabre::transform
