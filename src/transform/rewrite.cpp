#include "transform/rewrite.h"

#include <cstring>

namespace sabre::transform::detail {

void replace_value(ir::Graph& g, ir::Value* old, ir::Value* repl) {
  if (old == repl) return;
  const std::string name = old->name();
  g.replace_all_uses(old, repl);
  std::string tmp = name + ".dead";
  for (int i = 0; g.find_value(tmp); ++i) tmp = name + ".dead" + std::to_string(i);
  g.rename_value(old, tmp);
  g.rename_value(repl, name);
}

void remove_nodes(ir::Graph& g, const std::vector<ir::Node*>& nodes) {
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) g.remove_node(*it);
}

std::string temp_node_name(const ir::Graph& g, const std::string& base) {
  std::string n = base + ".new";
  for (int i = 0;; ++i) {
    bool taken = false;
    for (const ir::Node* x : g.nodes()) taken = taken || x->name() == n;
    if (!taken) return n;
    n = base + ".new" + std::to_string(i);
  }
}

ir::Value* add_constant_dedup(ir::Graph& g, const std::string& name, ir::Tensor t) {
  // memcmp, not a content hash: hashing every same-shaped weight on every call made BERT-base's
  // canonicalization quadratic in its weights (15 of 18 s), while memcmp stops at the first
  // differing byte.
  for (ir::Value* c : g.constants()) {
    const ir::Tensor& e = c->constant();
    if (e.dtype() == t.dtype() && e.dims() == t.dims() && std::memcmp(e.bytes(), t.bytes(), t.nbytes()) == 0) return c;
  }
  return g.add_constant(name, std::move(t));
}

ir::Tensor transpose2d(const ir::Tensor& t) {
  const int64_t r = t.dims().at(0), c = t.dims().at(1);
  const size_t es = ir::size_of(t.dtype());
  ir::Tensor out(t.dtype(), {c, r});
  uint8_t* o = out.mutable_bytes();
  const uint8_t* in = t.bytes();
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) std::memcpy(o + (j * r + i) * es, in + (i * c + j) * es, es);
  return out;
}

}  // namespace sabre::transform::detail
