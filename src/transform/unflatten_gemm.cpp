#include "transform/unflatten_gemm.h"

#include <cstring>

#include "transform/rewrite.h"

namespace sabre::transform {

ir::Graph unflatten_gemm(ir::Graph g) {
  for (ir::Node* gemm : g.topo_order()) {
    if (gemm->op() != "Gemm" || !gemm->domain().empty() || gemm->num_outputs() != 1) continue;
    if (gemm->attr_int("transA", 0) != 0 || gemm->attr_float("alpha", 1.0) != 1.0 || gemm->attr_float("beta", 1.0) != 1.0)
      continue;
    ir::Value* a = gemm->input(0);
    ir::Value* b = gemm->input(1);
    ir::Value* c = gemm->num_inputs() > 2 ? gemm->input(2) : nullptr;
    ir::Node* flatten = a ? a->producer() : nullptr;
    if (!flatten || flatten->op() != "Reshape" || !flatten->domain().empty() || !b || !b->is_constant()) continue;
    ir::Value* x = flatten->input(0);
    const ir::Shape& xs = x->shape();
    if (xs.size() < 3 || a->shape().size() != 2 || !(xs.back() == a->shape()[1])) continue;
    const ir::Tensor& bt = b->constant();
    if (bt.rank() != 2) continue;
    const bool trans_b = gemm->attr_int("transB", 0) != 0;
    const int64_t n = trans_b ? bt.dims()[0] : bt.dims()[1];
    if (c && (!c->is_constant() || c->constant().numel() != n || c->constant().rank() > 2)) continue;
    // The one reader must reshape back to x's leading dims and N.
    ir::Value* y = gemm->output(0);
    if (y->users().size() != 1 || g.is_graph_output(y)) continue;
    ir::Node* unflatten = y->users()[0];
    if (unflatten->op() != "Reshape" || !unflatten->domain().empty() || unflatten->input(0) != y) continue;
    ir::Shape want(xs.begin(), xs.end() - 1);
    want.push_back(ir::Dim(n));
    if (unflatten->output(0)->shape() != want) continue;

    const ir::DType dt = unflatten->output(0)->dtype();
    ir::Value* w = trans_b ? detail::add_constant_dedup(g, b->name() + ".kn", detail::transpose2d(bt)) : b;
    const std::string name = gemm->name();
    ir::Node* mm = g.add_node("MatMul", {x, w}, 1, {}, detail::temp_node_name(g, name));
    mm->output(0)->set_type(dt, want);
    ir::Value* out = mm->output(0);
    ir::Node* add = nullptr;
    if (c) {
      ir::Value* bias = c;
      if (c->constant().rank() != 1) {
        ir::Tensor flat(c->constant().dtype(), {n});
        std::memcpy(flat.mutable_bytes(), c->constant().bytes(), c->constant().nbytes());
        bias = detail::add_constant_dedup(g, c->name() + ".flat", std::move(flat));
      }
      add = g.add_node("Add", {out, bias}, 1, {}, detail::temp_node_name(g, name + "/bias_add"));
      add->output(0)->set_type(dt, want);
      out = add->output(0);
    }
    detail::replace_value(g, unflatten->output(0), out);
    g.remove_node(unflatten);
    g.remove_node(gemm);
    mm->set_name(name);
    if (add) add->set_name(name + "/bias_add");
  }
  g.remove_dead();
  return g;
}

}  // namespace sabre::transform
