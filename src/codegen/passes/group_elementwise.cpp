// group_elementwise: maximal chains of elementwise ops, each producer read only by the next, become
// one generated kernel each (an "elementwise" step), within the kernel ABI's input and node limits.
// Tests: tests/unit/codegen_passes_test.cpp
#include <algorithm>

#include "backends/native/ew_abi.h"
#include "codegen/passes/pass.h"

namespace sabre::codegen::passes {

PassResult group_elementwise(LowerContext& cx) {
  PassResult r;
  for (Node* n : cx.order) {
    if (!cx.needed.count(n) || cx.absorbed.count(n) || !is_ew(n)) continue;
    std::set<const Value*> ext;
    int own = ew_chain_nodes(n);
    for (Value* v : ew_operands(n)) {
      if (scalar_constant(v)) ++own;
      else ext.insert(v);
    }
    // Producer groups that only n reads: merge them into one.
    std::vector<int> merge;
    for (Value* v : ew_operands(n)) {
      Node* p = v->producer();
      if (!p || !cx.group_of.count(p) || !only_user(cx.g, v, n)) continue;
      int gi = cx.group_of[p];
      if (cx.groups[gi].nodes.back() != p || std::count(merge.begin(), merge.end(), gi)) continue;
      merge.push_back(gi);
    }
    std::set<const Value*> inputs;
    int count = own;
    for (int gi : merge) {
      inputs.insert(cx.groups[gi].inputs.begin(), cx.groups[gi].inputs.end());
      count += cx.groups[gi].chain_nodes;
    }
    for (const Value* v : ext) {
      bool internal = false;
      for (int gi : merge) internal |= cx.groups[gi].nodes.back()->output(0) == v;
      if (!internal) inputs.insert(v);
    }
    // Input nodes count once per external input; keep within the kernel ABI's limits.
    int input_nodes_before = 0;
    for (int gi : merge) input_nodes_before += static_cast<int>(cx.groups[gi].inputs.size());
    int total = count - input_nodes_before + static_cast<int>(inputs.size());
    if (!merge.empty() && (inputs.size() > SABRE_EW_MAX_INPUTS || total > SABRE_EW_MAX_NODES))
      r.refused.push_back({n->name(), "not joined to the chain before it: " +
                                          (inputs.size() > SABRE_EW_MAX_INPUTS
                                               ? std::to_string(inputs.size()) + " inputs, a kernel takes " +
                                                     std::to_string(SABRE_EW_MAX_INPUTS)
                                               : std::to_string(total) + " nodes, a kernel takes " +
                                                     std::to_string(SABRE_EW_MAX_NODES))});
    if (merge.empty() || inputs.size() > SABRE_EW_MAX_INPUTS || total > SABRE_EW_MAX_NODES) {
      EwGroup gr;
      gr.nodes = {n};
      gr.inputs = ext;
      gr.chain_nodes = own + static_cast<int>(ext.size());
      cx.groups.push_back(std::move(gr));
      cx.group_of[n] = static_cast<int>(cx.groups.size()) - 1;
      continue;
    }
    int into = merge[0];
    std::vector<Node*> nodes;
    for (int gi : merge) nodes.insert(nodes.end(), cx.groups[gi].nodes.begin(), cx.groups[gi].nodes.end());
    std::sort(nodes.begin(), nodes.end(), [&](Node* a, Node* b) { return cx.pos(a) < cx.pos(b); });
    nodes.push_back(n);
    for (size_t i = 1; i < merge.size(); ++i) cx.groups[merge[i]].nodes.clear();
    cx.groups[into].nodes = nodes;
    cx.groups[into].inputs = inputs;
    cx.groups[into].chain_nodes = total;
    for (Node* m : nodes) cx.group_of[m] = into;
  }
  for (const EwGroup& gr : cx.groups) r.fired += gr.nodes.size() > 1;
  return r;
}

}  // namespace sabre::codegen::passes
