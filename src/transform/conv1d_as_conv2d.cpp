#include "transform/conv1d_as_conv2d.h"

#include <cstring>

#include "ir/infer.h"
#include "transform/rewrite.h"

namespace sabre::transform {

ir::Graph conv1d_as_conv2d(ir::Graph g) {
  bool changed = false;
  for (ir::Node* conv : g.topo_order()) {
    if (conv->op() != "Conv" || !conv->domain().empty() || conv->num_outputs() != 1) continue;
    ir::Value* x = conv->input(0);
    ir::Value* w = conv->input(1);
    if (!x || !w || x->shape().size() != 3 || !w->is_constant() || w->constant().rank() != 3) continue;
    if (conv->attr_string("auto_pad", "NOTSET") != "NOTSET") continue;
    const auto pads = conv->attr_ints("pads", {0, 0});
    const auto strides = conv->attr_ints("strides", {1});
    const auto dil = conv->attr_ints("dilations", {1});
    if (pads.size() != 2 || strides.size() != 1 || dil.size() != 1) continue;

    const ir::Tensor& wt = w->constant();
    ir::Tensor w4(wt.dtype(), {wt.dims()[0], wt.dims()[1], 1, wt.dims()[2]});  // the same bytes
    if (wt.nbytes()) std::memcpy(w4.mutable_bytes(), wt.bytes(), wt.nbytes());
    ir::Value* w4v = detail::add_constant_dedup(g, w->name() + ".2d", std::move(w4));
    ir::Value* axis = detail::add_constant_dedup(g, conv->name() + ".axis2", ir::Tensor::from_i64({2}, {1}));
    ir::Node* up = g.add_node("Unsqueeze", {x, axis}, 1, {}, conv->name() + ".to2d");

    auto attrs = conv->attrs();
    attrs["pads"] = std::vector<int64_t>{0, pads[0], 0, pads[1]};
    attrs["strides"] = std::vector<int64_t>{1, strides[0]};
    attrs["dilations"] = std::vector<int64_t>{1, dil[0]};
    attrs["kernel_shape"] = std::vector<int64_t>{1, wt.dims()[2]};
    std::vector<ir::Value*> ins{up->output(0), w4v};
    if (conv->num_inputs() > 2) ins.push_back(conv->input(2));
    ir::Node* c2 = g.add_node("Conv", ins, 1, attrs, detail::temp_node_name(g, conv->name()));
    ir::Node* down = g.add_node("Squeeze", {c2->output(0), axis}, 1, {}, conv->name() + ".to1d");
    down->output(0)->set_type(conv->output(0)->type());
    const std::string name = conv->name();
    detail::replace_value(g, conv->output(0), down->output(0));
    g.remove_node(conv);
    c2->set_name(name);
    changed = true;
  }
  if (!changed) return g;
  g.remove_dead();
  ir::infer_types(g);  // the Unsqueeze and the 2-D Conv between
  return g;
}

}  // namespace sabre::transform
