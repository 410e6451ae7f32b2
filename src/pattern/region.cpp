#include "pattern/region.h"

#include <deque>
#include <map>
#include <unordered_set>

namespace sabre::pattern {

bool is_composite(const ir::Node* n) { return n->op() == "Composite" && n->domain() == "sabre"; }

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

}  // namespace sabre::pattern
