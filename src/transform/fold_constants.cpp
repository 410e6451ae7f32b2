#include "transform/fold_constants.h"

#include <algorithm>

#include "reference/reference.h"
#include "transform/rewrite.h"

namespace sabre::transform {

namespace {
// Folding these would freeze a random draw, or they have no meaning on constants.
// Sequences and string tensors stay values of the reference run, never constants the GPU path would meet.
bool never_fold(const ir::Node& n) {
  const std::string& op = n.op();
  for (const ir::Value* o : n.outputs())
    if (o->type().sequence || o->dtype() == ir::DType::str) return true;
  return n.domain() == "sabre" || op.rfind("Random", 0) == 0 || op == "Multinomial" || op == "Bernoulli";
}
constexpr int64_t kMaxFoldedElements = int64_t{64} << 20;
}  // namespace

ir::Graph fold_constants(ir::Graph g) {
  for (ir::Node* n : g.topo_order()) {
    if (never_fold(*n) || n->num_inputs() == 0 || !reference::has_kernel(n->domain(), n->op())) continue;
    std::vector<const ir::Tensor*> ins;
    bool all_const = true;
    for (ir::Value* v : n->inputs()) {
      if (v && !v->is_constant()) all_const = false;
      ins.push_back(v && v->is_constant() ? &v->constant() : nullptr);
    }
    if (!all_const) continue;
    bool small = true;
    for (ir::Value* o : n->outputs()) {
      if (!o->type().known || !ir::is_static(o->shape())) {
        small = o->type().known ? false : small;
        continue;
      }
      small = small && ir::num_elements(o->shape()).value() <= kMaxFoldedElements;
    }
    if (!small) continue;
    std::vector<ir::Tensor> outs;
    try {
      outs = reference::eval_node(*n, ins);
    } catch (const std::exception&) {
      continue;  // not foldable here (a kernel's own refusal); it stays in the graph and fails where it runs
    }
    for (size_t i = 0; i < n->num_outputs() && i < outs.size(); ++i) {
      ir::Value* o = n->output(i);
      ir::Value* c = g.add_constant(o->name() + ".folded", std::move(outs[i]));
      detail::replace_value(g, o, c);
    }
  }
  // A Pad whose pads are all zero returns its input whatever its mode and value (torch's F.pad of a
  // window-size remainder that is 0 at this input size, as Swin exports): its users read the input.
  for (ir::Node* n : g.topo_order()) {
    if (n->op() != "Pad" || !n->domain().empty() || n->num_inputs() < 2 || !n->input(1) ||
        !n->input(1)->is_constant() || g.is_graph_output(n->output(0)))
      continue;
    const std::vector<int64_t> pads = n->input(1)->constant().to_i64_vector();
    if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; }))
      g.replace_all_uses(n->output(0), n->input(0));
  }
  g.remove_dead();
  return g;
}

}  // namespace sabre::transform
