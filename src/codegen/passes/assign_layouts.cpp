// assign_layouts: conv kernels read and write NHWC. Conv outputs are stored NHWC, and so are the
// outputs of pooling and elementwise chains that read an NHWC value (and whose other operands can
// follow: rank-4 activations, constants, scalars); every other reader sees NCHW through one
// conversion per value (LowerContext::tensor), so permutes appear only where the NHWC region ends
// or begins. Tests: tests/unit/codegen_passes_test.cpp
#include "codegen/passes/pass.h"

namespace sabre::codegen::passes {
namespace {

// Why the elementwise group `gr` that reads an NHWC value stays NCHW ("" where it goes NHWC), or
// nullopt where it reads no NHWC value (nothing to decide).
std::optional<std::string> nchw_reason(const LowerContext& cx, const EwGroup& gr) {
  bool reads_nhwc = false;
  for (const Value* v : gr.inputs) reads_nhwc |= cx.nhwc.count(v) != 0;
  if (!reads_nhwc) return std::nullopt;
  for (const Node* m : gr.nodes)
    if (m->output(0)->shape().size() != 4)
      return "stays NCHW: " + m->name() + " writes rank " + std::to_string(m->output(0)->shape().size());
  for (const Value* v : gr.inputs) {
    if (cx.nhwc.count(v)) continue;
    if (v->is_constant() && !cx.materialized.count(v)) {
      if (v->shape().size() > 4) return "stays NCHW: constant " + v->name() + " has rank above 4";
    } else if (v->shape().size() != 4) {
      return "stays NCHW: it reads " + v->name() + " of rank " + std::to_string(v->shape().size());
    }
  }
  return "";
}

}  // namespace

PassResult assign_layouts(LowerContext& cx) {
  PassResult r;
  if (!cx.o.pick_conv) {  // conv regions are refused: nothing runs NHWC
    r.skipped = "no conv kernel picker (LowerOptions::pick_conv): nothing runs NHWC";
    return r;
  }
  for (Node* n : cx.order) {
    if (!cx.needed.count(n) || cx.absorbed.count(n)) continue;
    if (is_conv_region(n)) {
      if (n->output(0)->shape().size() == 4) cx.nhwc.insert(n->output(0));
      continue;
    }
    if (n->domain() != "") continue;
    const std::string& op = n->op();
    if (op == "Conv" && depthwise_problem(n).empty()) {
      cx.nhwc.insert(n->output(0));
      if (auto it = cx.dw_act.find(n); it != cx.dw_act.end()) cx.nhwc.insert(it->second.node->output(0));
      continue;
    }
    if ((op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool") && n->num_outputs() == 1 &&
        n->input(0)->shape().size() == 4 && cx.nhwc.count(n->input(0))) {
      cx.nhwc.insert(n->output(0));
      continue;
    }
    if (is_ew(n)) {
      auto it = cx.group_of.find(n);
      if (it == cx.group_of.end() || cx.groups[it->second].nodes.back() != n) continue;
      const std::optional<std::string> why = nchw_reason(cx, cx.groups[it->second]);
      if (!why) continue;
      if (!why->empty()) {
        r.refused.push_back({n->name(), "elementwise chain " + *why + " (a conversion to NCHW goes before it)"});
        continue;
      }
      for (Node* m : cx.groups[it->second].nodes) cx.nhwc.insert(m->output(0));
    }
  }
  r.fired = static_cast<int>(cx.nhwc.size());
  return r;
}

}  // namespace sabre::codegen::passes
