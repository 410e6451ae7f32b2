#include "partition/partitioner.h"

#include <algorithm>
#include <deque>
#include <mutex>
#include <set>
#include <unordered_set>

#include "ir/infer.h"
#include "reference/reference.h"

namespace sabre::partition {

namespace {

bool is_composite(const ir::Node* n) { return n->op() == "Composite" && n->domain() == "sabre"; }

void infer_composite(ir::Node& n) {
  const auto& body = n.attr_graph("body");
  if (!body || body->inputs().size() != n.num_inputs() || body->outputs().size() != n.num_outputs())
    throw ir::IrError("Composite '" + n.name() + "': body inputs/outputs must match the node's");
  // Re-infer a copy with the node's input types, so a changed symbol binding flows through.
  ir::Graph b = body->clone();
  for (size_t i = 0; i < n.num_inputs(); ++i)
    if (n.input(i) && n.input(i)->type().known) b.inputs()[i]->set_type(n.input(i)->type());
  ir::infer_types(b);
  for (size_t i = 0; i < n.num_outputs(); ++i) n.output(i)->set_type(b.outputs()[i]->type());
}

std::vector<ir::Tensor> run_composite(const ir::Node& n, const std::vector<const ir::Tensor*>& xs) {
  const auto& body = *n.attr_graph("body");
  std::map<std::string, ir::Tensor> ins;
  for (size_t i = 0; i < body.inputs().size(); ++i) {
    if (i >= xs.size() || !xs[i])
      throw reference::ReferenceError("Composite '" + n.name() + "': input " + std::to_string(i) + " is missing");
    ins[body.inputs()[i]->name()] = *xs[i];
  }
  return reference::run(body, ins);
}

}  // namespace

void register_composite_op() {
  static std::once_flag once;
  std::call_once(once, [] {
    ir::register_infer("sabre", "Composite", infer_composite);
    reference::register_kernel("sabre", "Composite", run_composite);
  });
}

std::optional<std::string> region_problem(const ir::Graph& g, const std::vector<ir::Node*>& region) {
  if (region.empty()) return "empty region";
  std::unordered_set<const ir::Node*> in(region.begin(), region.end());
  for (const ir::Node* n : region)
    if (is_composite(n)) return "overlaps region '" + n->name() + "'";
  // A cycle once contracted: some value leaves the region, and a path from its readers comes back.
  std::deque<const ir::Node*> work;
  std::unordered_set<const ir::Node*> seen;
  std::map<const ir::Node*, const ir::Node*> exit_of;  // outside node -> the first outside node of its path
  for (const ir::Node* n : region)
    for (const ir::Value* v : n->outputs())
      for (const ir::Node* u : v->users())
        if (!in.count(u) && seen.insert(u).second) {
          work.push_back(u);
          exit_of[u] = u;
        }
  while (!work.empty()) {
    const ir::Node* u = work.front();
    work.pop_front();
    for (const ir::Value* v : u->outputs())
      for (const ir::Node* w : v->users()) {
        if (in.count(w))
          return "cycle: a path leaves the region through '" + exit_of[u]->name() + "' and re-enters at '" +
                 w->name() + "'";
        if (seen.insert(w).second) {
          exit_of[w] = exit_of[u];
          work.push_back(w);
        }
      }
  }
  const ir::Node* root = region.back();
  for (const ir::Node* n : region)
    for (size_t i = 0; i < n->num_outputs(); ++i) {
      const ir::Value* v = n->output(i);
      if (n == root && i == 0) continue;
      if (g.is_graph_output(v)) return "intermediate '" + v->name() + "' is a graph output";
      for (const ir::Node* u : v->users())
        if (!in.count(u)) return "intermediate '" + v->name() + "' is also read by '" + u->name() + "'";
    }
  return std::nullopt;
}

ir::Node* make_composite(ir::Graph& g, const std::vector<ir::Node*>& region, const Match& m,
                         const PatternEntry& entry, const std::string& backend,
                         const std::map<std::string, ir::AttrValue>& extra) {
  std::unordered_set<const ir::Node*> in(region.begin(), region.end());
  std::vector<ir::Value*> external;
  for (const ir::Node* n : region)
    for (ir::Value* v : n->inputs())
      if (v && (!v->producer() || !in.count(v->producer())) &&
          std::find(external.begin(), external.end(), v) == external.end())
        external.push_back(v);
  // Captured roles first, in the entry's order; then whatever else the region reads.
  std::vector<ir::Value*> inputs;
  std::vector<std::string> roles;
  for (const auto& r : entry.roles) {
    auto it = m.values.find(r);
    if (it == m.values.end()) continue;
    if (std::find(external.begin(), external.end(), it->second) == external.end()) continue;
    auto at = std::find(inputs.begin(), inputs.end(), it->second);
    if (at != inputs.end()) {  // one value in two roles (a conv's input is its own residual)
      roles[at - inputs.begin()] += "," + r;
      continue;
    }
    inputs.push_back(it->second);
    roles.push_back(r);
  }
  for (ir::Value* v : external)
    if (std::find(inputs.begin(), inputs.end(), v) == inputs.end()) {
      inputs.push_back(v);
      roles.push_back("");
    }

  auto body = std::make_shared<ir::Graph>();
  body->name = entry.name;
  std::map<const ir::Value*, ir::Value*> map;
  for (ir::Value* v : inputs) map[v] = body->add_input(v->name(), v->type());
  for (const ir::Node* n : region) {
    std::vector<ir::Value*> ins, outs;
    for (ir::Value* v : n->inputs()) ins.push_back(v ? map.at(v) : nullptr);
    for (ir::Value* v : n->outputs()) {
      ir::Value* c = body->add_value(v->name());
      c->set_type(v->type());
      c->set_known_dims(v->known_dims());
      map[v] = c;
      outs.push_back(c);
    }
    body->add_node_with_outputs(n->op(), ins, outs, n->attrs(), n->name(), n->domain());
  }
  ir::Node* root = region.back();
  ir::Value* out = root->output(0);
  body->add_output(map.at(out));

  std::map<std::string, ir::AttrValue> attrs = extra;
  attrs["pattern"] = entry.name;
  attrs["backend"] = backend;
  attrs["body"] = body;
  attrs["roles"] = roles;
  size_t index = 0;
  for (const ir::Node* n : g.nodes())
    if (is_composite(n)) ++index;
  std::string name;
  for (;; ++index) {
    name = backend + "_region" + std::to_string(index);
    bool taken = false;
    for (const ir::Node* n : g.nodes()) taken = taken || n->name() == name;
    if (!taken) break;
  }
  ir::Node* c = g.add_node("Composite", inputs, 1, std::move(attrs), name, "sabre");
  ir::Value* cout = c->output(0);
  cout->set_type(out->type());
  cout->set_known_dims(out->known_dims());
  const std::string out_name = out->name();
  g.replace_all_uses(out, cout);
  for (auto it = region.rbegin(); it != region.rend(); ++it) g.remove_node(*it);
  g.rename_value(out, out_name + ".replaced");
  g.rename_value(cout, out_name);
  return c;
}

PartitionResult partition(ir::Graph g, const PatternTable& table) {
  register_composite_op();
  PartitionResult r;
  for (const PatternEntry& entry : table.entries) {
    std::set<std::string> tried;  // node names this entry has been tried at
    for (bool progress = true; progress;) {
      progress = false;
      for (ir::Node* n : g.topo_order()) {
        if (is_composite(n) || !tried.insert(n->name()).second) continue;
        std::optional<Match> m = match_at(entry.pattern, n);
        if (!m || m->region.empty() || m->root != n) continue;
        std::vector<std::string> names;
        for (const ir::Node* x : m->region) names.push_back(x->name());
        if (auto why = region_problem(g, m->region)) {
          r.refusals.push_back({entry.name, names, *why});
          continue;
        }
        CheckResult cr = entry.check ? entry.check(*m) : CheckResult{};
        if (!cr.ok) {
          r.refusals.push_back({entry.name, names, cr.reason});
          continue;
        }
        ir::Node* c = make_composite(g, m->region, *m, entry, table.backend, cr.attrs);
        r.regions.push_back({c->name(), entry.name, names});
        progress = true;
        break;  // the graph changed: walk a fresh topological order
      }
    }
  }
  g.remove_dead();
  r.graph = std::move(g);
  return r;
}

}  // namespace sabre::partition
