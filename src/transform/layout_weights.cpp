#include "transform/layout_weights.h"

#include <mutex>

#include "ir/infer.h"
#include "reference/reference.h"
#include "transform/rewrite.h"

namespace sabre::transform {

namespace {

void infer_matmul_trans_b(ir::Node& n) {
  const ir::Value* a = n.input(0);
  const ir::Value* b = n.input(1);
  if (!a || !b) throw ir::ShapeError("node '" + n.name() + "' (sabre.MatMulTransB): needs two inputs");
  const ir::Shape& as = a->shape();
  const ir::Shape& bs = b->shape();
  if (as.size() < 2 || bs.size() != 2)
    throw ir::ShapeError("node '" + n.name() + "' (sabre.MatMulTransB): A must be rank >= 2 and B 2-D [N,K], got " +
                         ir::str(as) + " and " + ir::str(bs));
  if (as.back() != bs[1])
    throw ir::ShapeError("node '" + n.name() + "' (sabre.MatMulTransB): inner dims differ: " + as.back().str() +
                         " vs " + bs[1].str());
  ir::Shape out(as.begin(), as.end() - 1);
  out.push_back(bs[0]);
  n.output(0)->set_type(a->dtype(), out);
}

std::vector<ir::Tensor> run_matmul_trans_b(const ir::Node& n, const std::vector<const ir::Tensor*>& xs) {
  if (xs.size() < 2 || !xs[0] || !xs[1] || xs[1]->rank() != 2)
    throw reference::ReferenceError("node '" + n.name() + "' (sabre.MatMulTransB): needs A and a 2-D B");
  ir::Tensor b = detail::transpose2d(*xs[1]);
  ir::Graph tmp;
  ir::Node* mm = tmp.add_node("MatMul", {tmp.add_value("a"), tmp.add_value("b")}, 1, {}, n.name());
  return reference::eval_node(*mm, {xs[0], &b});
}

}  // namespace

void register_matmul_trans_b_op() {
  static std::once_flag once;
  std::call_once(once, [] {
    ir::register_infer("sabre", "MatMulTransB", infer_matmul_trans_b);
    reference::register_kernel("sabre", "MatMulTransB", run_matmul_trans_b);
  });
}

ir::Graph layout_weights(ir::Graph g) {
  register_matmul_trans_b_op();
  for (ir::Node* n : g.topo_order()) {
    if (!n->domain().empty() || n->num_inputs() < 2) continue;
    ir::Value* b = n->input(1);
    if (!b || !b->is_constant() || b->constant().rank() != 2) continue;
    if (n->op() == "MatMul") {
      if (!n->input(0) || n->input(0)->shape().size() < 2) continue;
      ir::Value* bt = detail::add_constant_dedup(g, b->name() + ".T", detail::transpose2d(b->constant()));
      ir::Node* mt = g.add_node("MatMulTransB", {n->input(0), bt}, 1, {}, detail::temp_node_name(g, n->name()), "sabre");
      mt->output(0)->set_type(n->output(0)->type());
      const std::string name = n->name();
      detail::replace_value(g, n->output(0), mt->output(0));
      g.remove_node(n);
      mt->set_name(name);
    } else if (n->op() == "Gemm" && n->attr_int("transB", 0) == 0) {
      ir::Value* bt = detail::add_constant_dedup(g, b->name() + ".T", detail::transpose2d(b->constant()));
      n->set_input(1, bt);
      n->set_attr("transB", int64_t{1});
    }
  }
  g.remove_dead();
  return g;
}

}  // namespace sabre::transform
