// group_elementwise: maximal chains of elementwise ops, each producer read only by the next, become
// one generated kernel each (an "elementwise" step), within the kernel ABI's input and node limits.
// As a fusion entry the site is each elementwise node in order: it joins the chains before it that
// only it reads (fuse), or starts a chain of its own (keep), with a note where the limits kept it out.
// Tests: tests/golden/lower/group_elementwise/
#include <algorithm>

#include "backends/native/ew_abi.h"
#include "codegen/passes/fusion.h"

namespace sabre::codegen::passes {
namespace {

using namespace pattern;

// Where node n goes: the producer groups it joins (none: a group of its own), and that group's
// external inputs and chain-node count.
struct Join {
  std::vector<int> merge;
  std::set<const Value*> inputs;
  int chain_nodes = 0;
};

Verdict check(const Match& m, LowerContext& cx) {
  Node* n = m.root;
  if (!cx.needed.count(n) || cx.absorbed.count(n)) return Verdict::not_mine();
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
  const Join alone{{}, ext, own + static_cast<int>(ext.size())};
  if (merge.empty()) return Verdict::keep().with(alone);
  if (inputs.size() > SABRE_EW_MAX_INPUTS || total > SABRE_EW_MAX_NODES)
    return Verdict::keep("not joined to the chain before it: " +
                         (inputs.size() > SABRE_EW_MAX_INPUTS
                              ? std::to_string(inputs.size()) + " inputs, a kernel takes " +
                                    std::to_string(SABRE_EW_MAX_INPUTS)
                              : std::to_string(total) + " nodes, a kernel takes " + std::to_string(SABRE_EW_MAX_NODES)))
        .with(alone);
  return Verdict::fuse().with(Join{merge, inputs, total});
}

void record(const Match& m, const Verdict& v, LowerContext& cx) {
  Node* n = m.root;
  const auto& j = std::any_cast<const Join&>(v.decision);
  if (j.merge.empty()) {
    EwGroup gr;
    gr.nodes = {n};
    gr.inputs = j.inputs;
    gr.chain_nodes = j.chain_nodes;
    cx.groups.push_back(std::move(gr));
    cx.group_of[n] = static_cast<int>(cx.groups.size()) - 1;
    return;
  }
  int into = j.merge[0];
  std::vector<Node*> nodes;
  for (int gi : j.merge) nodes.insert(nodes.end(), cx.groups[gi].nodes.begin(), cx.groups[gi].nodes.end());
  std::sort(nodes.begin(), nodes.end(), [&](Node* a, Node* b) { return cx.pos(a) < cx.pos(b); });
  nodes.push_back(n);
  for (size_t i = 1; i < j.merge.size(); ++i) cx.groups[j.merge[i]].nodes.clear();
  cx.groups[into].nodes = nodes;
  cx.groups[into].inputs = j.inputs;
  cx.groups[into].chain_nodes = j.chain_nodes;
  for (Node* x : nodes) cx.group_of[x] = into;
}

}  // namespace

const Fusion& elementwise_chain_fusion() {
  static const Fusion f{"group_elementwise",
                        "y = f_k(...f_2(f_1(x, ...), ...)...): one generated kernel, each link read only by the next",
                        op_any("*", {attr_test("elementwise (a chain kernel runs it)", [](const Node& n) { return is_ew(&n); })}),
                        check, record};
  return f;
}

PassResult group_elementwise(LowerContext& cx) {
  PassResult r = run_fusion(elementwise_chain_fusion(), cx);
  // Fired counts the chains formed (groups of two or more), not the joins that formed them.
  r.fired = 0;
  for (const EwGroup& gr : cx.groups) r.fired += gr.nodes.size() > 1;
  return r;
}

}  // namespace sabre::codegen::passes
