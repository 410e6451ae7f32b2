// fuse_depthwise_activation: depthwise conv -> Relu or Clip with constant bounds: the clamp runs in
// the depthwise kernel's store (MobileNetV2's ReLU6 after each depthwise conv was a step of its own).
// Tests: tests/unit/codegen_passes_test.cpp
#include <cmath>

#include "codegen/passes/pass.h"

namespace sabre::codegen::passes {

PassResult fuse_depthwise_activation(LowerContext& cx) {
  PassResult r;
  if (!cx.o.pick_conv) {
    r.skipped = "no conv kernel picker (LowerOptions::pick_conv): convs are refused";
    return r;
  }
  for (Node* conv : cx.order) {
    if (!conv->domain().empty() || conv->op() != "Conv" || !depthwise_problem(conv).empty()) continue;
    Node* u = cx.sole_user(conv->output(0));
    if (!u || !u->domain().empty() || cx.absorbed.count(u) || u->num_outputs() != 1) continue;
    std::pair<double, double> bounds{0.0, INFINITY};  // Relu
    if (u->op() == "Clip") {
      auto b = clip_bounds(u);
      if (!b || b->first > b->second) {  // min above max: every output is max; not worth a special case
        r.refused.push_back({conv->name(), "Clip " + u->name() + " not absorbed: " +
                                               (b ? "its min is above its max" : "its bounds are not constant scalars")});
        continue;
      }
      bounds = *b;
    } else if (u->op() != "Relu") {
      continue;
    }
    cx.absorbed.insert(u);
    cx.dw_act[conv] = {u, bounds.first, bounds.second};
    ++r.fired;
  }
  return r;
}

}  // namespace sabre::codegen::passes
