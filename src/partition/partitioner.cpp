#include "partition/partitioner.h"

#include <algorithm>
#include <set>
#include <unordered_set>

namespace sabre::partition {

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
