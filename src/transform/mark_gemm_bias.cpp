#include "transform/mark_gemm_bias.h"

#include <cstring>

#include "transform/rewrite.h"

namespace sabre::transform {

namespace {

bool is_gemm(const ir::Value* v) {
  const ir::Node* p = v ? v->producer() : nullptr;
  if (!p) return false;
  if (p->domain() == "sabre") return p->op() == "MatMulTransB";
  return p->domain().empty() && (p->op() == "MatMul" || (p->op() == "Gemm" && !p->input(2)));
}

// c is a vector over the last dim of x, possibly with leading 1s, and no higher rank than x.
bool bias_like(const ir::Value* c, const ir::Value* x) {
  if (!c || !c->is_constant() || !x->type().known || x->shape().empty()) return false;
  const ir::Dim& n = x->shape().back();
  if (!n.is_static()) return false;
  const auto& d = c->constant().dims();
  if (d.empty() || d.size() > x->shape().size() || d.back() != n.value()) return false;
  for (size_t i = 0; i + 1 < d.size(); ++i)
    if (d[i] != 1) return false;
  return c->dtype() == x->dtype();
}

}  // namespace

ir::Graph mark_gemm_bias(ir::Graph g) {
  for (ir::Node* n : g.topo_order()) {
    if (n->op() != "Add" || !n->domain().empty() || n->num_inputs() != 2) continue;
    ir::Value* x = n->input(0);
    ir::Value* c = n->input(1);
    if (!(is_gemm(x) && bias_like(c, x))) std::swap(x, c);
    if (!(is_gemm(x) && bias_like(c, x))) continue;
    ir::Value* bias = c;
    if (c->constant().rank() != 1) {
      const ir::Tensor& t = c->constant();
      ir::Tensor v(t.dtype(), {t.numel()});
      std::memcpy(v.mutable_bytes(), t.bytes(), t.nbytes());
      bias = detail::add_constant_dedup(g, c->name() + ".vec", std::move(v));
    }
    if (n->input(0) != x) n->set_input(0, x);
    if (n->input(1) != bias) n->set_input(1, bias);
  }
  g.remove_dead();
  return g;
}

}  // namespace sabre::transform
