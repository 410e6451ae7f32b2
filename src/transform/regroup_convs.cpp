#include "transform/regroup_convs.h"

#include <cstring>

namespace sabre::transform {

int64_t regroup_factor(int64_t groups, int64_t c_per_group, int64_t k_per_group, const RegroupOptions& o) {
  if (groups <= 1 || c_per_group <= 1 || k_per_group < 1 || o.k_multiple < 1 || o.c_multiple < 1) return 0;
  for (int64_t m = 1; m <= groups; ++m) {
    if (groups % m) continue;
    if ((m * k_per_group) % o.k_multiple == 0 && (m * c_per_group) % o.c_multiple == 0) return m == 1 ? 0 : m;
  }
  if (groups <= o.max_dense_groups && (groups * c_per_group) % o.c_multiple == 0) return groups;  // dense
  return 0;
}

ir::Graph regroup_convs(ir::Graph g, const RegroupOptions& o) {
  for (ir::Node* conv : g.topo_order()) {
    if (conv->op() != "Conv" || !conv->domain().empty()) continue;
    const int64_t groups = conv->attr_int("group", 1);
    ir::Value* wv = conv->input(1);
    if (groups <= 1 || !wv || !wv->is_constant() || wv->constant().rank() != 4) continue;
    const ir::Tensor& w = wv->constant();
    const int64_t K = w.dims()[0], cg = w.dims()[1], R = w.dims()[2], S = w.dims()[3];
    if (K % groups) continue;  // invalid; the importer's checks say so
    const int64_t kg = K / groups;
    const int64_t m = regroup_factor(groups, cg, kg, o);
    if (m == 0) continue;
    // Output channel k of old group g = k / kg sits in new group k / (m·kg); its taps over the new
    // group's m·cg input channels are zero except at the old group's slot (g mod m)·cg.
    const int64_t cg2 = m * cg, taps = R * S;
    const size_t es = ir::size_of(w.dtype());
    ir::Tensor w2(w.dtype(), {K, cg2, R, S});
    std::memset(w2.mutable_bytes(), 0, w2.nbytes());
    for (int64_t k = 0; k < K; ++k) {
      const int64_t slot = (k / kg) % m;
      std::memcpy(w2.mutable_bytes() + static_cast<size_t>((k * cg2 + slot * cg) * taps) * es,
                  w.bytes() + static_cast<size_t>(k * cg * taps) * es, static_cast<size_t>(cg * taps) * es);
    }
    ir::Value* nw = g.add_constant(wv->name() + ".regrouped" + std::to_string(groups / m), std::move(w2));
    conv->set_input(1, nw);
    conv->set_attr("group", groups / m);
  }
  g.remove_dead();
  return g;
}

}  // namespace sabre::transform
