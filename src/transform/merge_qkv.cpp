#include "transform/merge_qkv.h"

#include <cstring>
#include <map>

#include "transform/rewrite.h"

namespace sabre::transform {

namespace {

// One projection: the MatMulTransB, its bias Add and the Reshape that reads it.
struct Projection {
  ir::Node* mm = nullptr;
  ir::Node* add = nullptr;
};

// mm = MatMulTransB(x, W const [N, K]) read only by Add(mm, bias const [N]), itself read by one
// Reshape (and Shape/Size; not a graph output): its Projection, else none.
bool projection(const ir::Graph& g, ir::Node* mm, Projection* p) {
  if (mm->domain() != "sabre" || mm->op() != "MatMulTransB" || mm->num_inputs() != 2) return false;
  const ir::Value* w = mm->input(1);
  if (!w->is_constant() || w->constant().rank() != 2 || mm->output(0)->users().size() != 1) return false;
  ir::Node* add = mm->output(0)->users()[0];
  if (add->op() != "Add" || !add->domain().empty() || add->input(0) != mm->output(0)) return false;
  const ir::Value* b = add->input(1);
  if (!b->is_constant() || b->constant().rank() != 1 || b->constant().dims()[0] != w->constant().dims()[0] ||
      b->dtype() != w->dtype() || g.is_graph_output(add->output(0)))
    return false;
  // Shape and Size readers (exporters compute the heads shape from the projection) read the Split's
  // output as well: same shape.
  int reshapes = 0;
  for (const ir::Node* u : add->output(0)->users()) {
    if (u->domain().empty() && (u->op() == "Shape" || u->op() == "Size")) continue;
    if (u->op() != "Reshape" || !u->domain().empty()) return false;
    ++reshapes;
  }
  if (reshapes != 1) return false;
  p->mm = mm;
  p->add = add;
  return true;
}

// The tensors stacked along their first axis (same dtype and trailing dims: byte concatenation).
ir::Tensor stack_rows(const std::vector<const ir::Tensor*>& ts) {
  std::vector<int64_t> dims = ts[0]->dims();
  dims[0] = 0;
  for (const ir::Tensor* t : ts) dims[0] += t->dims()[0];
  ir::Tensor out(ts[0]->dtype(), dims);
  size_t at = 0;
  for (const ir::Tensor* t : ts) {
    std::memcpy(out.mutable_bytes() + at, t->bytes(), t->nbytes());
    at += t->nbytes();
  }
  return out;
}

}  // namespace

ir::Graph merge_qkv(ir::Graph g) {
  // Projections by the activation they read, in graph order.
  std::map<const ir::Value*, std::vector<Projection>> by_input;
  std::vector<const ir::Value*> order;
  for (ir::Node* n : g.topo_order()) {
    Projection p;
    if (!projection(g, n, &p)) continue;
    auto& v = by_input[n->input(0)];
    if (v.empty()) order.push_back(n->input(0));
    v.push_back(p);
  }
  for (const ir::Value* x : order) {
    const std::vector<Projection>& ps = by_input[x];
    if (ps.size() != 3) continue;
    const ir::Tensor& w0 = ps[0].mm->input(1)->constant();
    bool same = true;
    for (const Projection& p : ps) {
      const ir::Tensor& w = p.mm->input(1)->constant();
      same = same && w.dtype() == w0.dtype() && w.dims()[1] == w0.dims()[1];
    }
    if (!same) continue;
    std::vector<const ir::Tensor*> ws, bs;
    std::vector<int64_t> sizes;
    for (const Projection& p : ps) {
      ws.push_back(&p.mm->input(1)->constant());
      bs.push_back(&p.add->input(1)->constant());
      sizes.push_back(p.mm->input(1)->constant().dims()[0]);
    }
    const std::string base = ps[0].mm->name();
    auto fresh = [&](const std::string& suffix) {
      const std::string want = base + suffix;
      for (const ir::Node* n : g.nodes())
        if (n->name() == want) return detail::temp_node_name(g, want);
      return want;
    };
    ir::Value* w = detail::add_constant_dedup(g, base + ".qkv_weight", stack_rows(ws));
    ir::Value* b = detail::add_constant_dedup(g, base + ".qkv_bias", stack_rows(bs));
    ir::Tensor split_sizes(ir::DType::i64, {3});
    std::memcpy(split_sizes.mutable_bytes(), sizes.data(), sizeof(int64_t) * 3);
    ir::Value* split_c = detail::add_constant_dedup(g, base + ".qkv_split", std::move(split_sizes));
    ir::Node* mm = g.add_node("MatMulTransB", {ps[0].mm->input(0), w}, 1, {}, fresh(".qkv"), "sabre");
    ir::Node* add = g.add_node("Add", {mm->output(0), b}, 1, {}, fresh(".qkv_bias"));
    ir::Node* split = g.add_node("Split", {add->output(0), split_c}, 3, {{"axis", int64_t{-1}}},
                                 fresh(".qkv_split"));
    for (size_t i = 0; i < 3; ++i) detail::replace_value(g, ps[i].add->output(0), split->output(i));
    std::vector<ir::Node*> dead;
    for (const Projection& p : ps) dead.push_back(p.mm), dead.push_back(p.add);
    detail::remove_nodes(g, dead);
  }
  g.remove_dead();
  return g;
}

}  // namespace sabre::transform
