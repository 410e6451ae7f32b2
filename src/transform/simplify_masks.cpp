#include "transform/simplify_masks.h"

#include <map>
#include <optional>
#include <set>

#include "ir/infer.h"
#include "transform/rewrite.h"

namespace sabre::transform {

namespace {
using ir::Dim;
using ir::Node;
using ir::Shape;
using ir::Value;

const Node* producer_op(const Value* v, const char* op) {
  const Node* n = v ? v->producer() : nullptr;
  return n && n->domain().empty() && n->op() == op ? n : nullptr;
}

// The element of a one-element constant (any rank).
std::optional<double> scalar_const(const Value* v) {
  if (!v || !v->is_constant() || v->constant().numel() != 1) return std::nullopt;
  return v->constant().get_f64(0);
}

// Numpy broadcasting of known shapes; nullopt where two dims differ and neither is 1.
std::optional<Shape> broadcast(const std::vector<const Shape*>& shapes) {
  size_t rank = 0;
  for (const Shape* s : shapes) rank = std::max(rank, s->size());
  Shape out(rank, Dim(1));
  for (const Shape* s : shapes)
    for (size_t i = 0; i < s->size(); ++i) {
      Dim& o = out[rank - s->size() + i];
      const Dim& d = (*s)[i];
      if (d == Dim(1) || o == d) continue;
      if (o != Dim(1)) return std::nullopt;
      o = d;
    }
  return out;
}

// Range(start, limit, delta) with constant start and delta, seen through Unsqueeze: its one
// axis that is not 1 and its length.
struct Iota {
  size_t axis = 0;
  Dim length;
  double start = 0, delta = 0;
};
std::optional<Iota> iota_view(const Value* v) {
  const Value* x = v;
  while (const Node* u = producer_op(x, "Unsqueeze")) x = u->input(0);
  const Node* r = producer_op(x, "Range");
  if (!r || !v->type().known || !x->type().known || x->shape().size() != 1) return std::nullopt;
  const auto start = scalar_const(r->input(0)), delta = scalar_const(r->input(2));
  if (!start || !delta) return std::nullopt;
  Iota it{0, x->shape()[0], *start, *delta};
  int axes = 0;
  for (size_t i = 0; i < v->shape().size(); ++i)
    if (v->shape()[i] != Dim(1)) it.axis = i, ++axes;
  if (axes != 1 || v->shape()[it.axis] != it.length) return std::nullopt;
  return it;
}

bool is_iota_0_1(const std::optional<Iota>& it, const Dim& length) {
  return it && it->start == 0 && it->delta == 1 && it->length == length;
}

// Rewrite 1: Gather(data, b·K + k, axis 0), data M [D0, D1] flattened ([D0·D1, 1] by Flatten at
// axis 2, or [D0·D1] by Reshape), b and k iotas 0..D0-1 and 0..D1-1 on two axes of the index
// shape (b's first), K = D1: element (.., b, .., k, ..) is M[b, k], so the result is M with unit
// axes inserted everywhere else (an Unsqueeze: a view).
bool gather_as_view(ir::Graph& g, Node* n) {
  if (n->op() != "Gather" || !n->domain().empty() || n->attr_int("axis", 0) != 0) return false;
  Value* data = n->input(0);
  Value* idx = n->input(1);
  Value* out = n->output(0);
  if (!data->type().known || !idx->type().known || !out->type().known) return false;
  const Node* flat = producer_op(data, "Flatten");
  const Node* resh = producer_op(data, "Reshape");
  Value* m = flat ? flat->input(0) : resh ? resh->input(0) : nullptr;
  if (!m || !m->type().known || m->shape().size() != 2) return false;
  const Shape& ms = m->shape();
  const Shape& ds = data->shape();
  if (flat && !(flat->attr_int("axis", 1) == 2 && ds.size() == 2 && ds[1] == Dim(1))) return false;
  if (resh && ds.size() != 1) return false;
  if (ds[0] != ms[0] * ms[1]) return false;
  const Node* add = producer_op(idx, "Add");
  if (!add) return false;
  const Shape& is = idx->shape();
  for (int ka = 0; ka < 2; ++ka) {
    const Value* kv = add->input(ka);
    const Node* mul = producer_op(add->input(1 - ka), "Mul");
    if (!mul) continue;
    for (int mb = 0; mb < 2; ++mb) {
      const Value* bv = mul->input(mb);
      const Value* scale = mul->input(1 - mb);
      std::optional<Dim> k_dim;
      if (scale->known_dims() && scale->known_dims()->size() == 1) k_dim = (*scale->known_dims())[0];
      if (!k_dim || *k_dim != ms[1]) continue;
      const auto b = iota_view(bv), k = iota_view(kv);
      if (!is_iota_0_1(b, ms[0]) || !is_iota_0_1(k, ms[1])) continue;
      if (bv->shape().size() != is.size() || kv->shape().size() != is.size() || b->axis >= k->axis) continue;
      std::vector<int64_t> axes;
      for (size_t i = 0; i < is.size(); ++i)
        if (i != b->axis && i != k->axis) axes.push_back(static_cast<int64_t>(i));
      if (flat) axes.push_back(static_cast<int64_t>(is.size()));
      Value* ax = detail::add_constant_dedup(g, out->name() + ".axes",
                                             ir::Tensor::from_i64(axes, {static_cast<int64_t>(axes.size())}));
      Node* u = g.add_node("Unsqueeze", {m, ax}, 1, {}, detail::temp_node_name(g, n->name()));
      u->output(0)->set_type(out->type());
      const std::string name = n->name();
      detail::replace_value(g, out, u->output(0));
      g.remove_node(n);
      u->set_name(name);
      return true;
    }
  }
  return false;
}

// Rewrite 3: a view (Unsqueeze, Reshape, Squeeze, Flatten) of a Cast is the Cast of the view, when
// the Cast's other readers only read its shape: the cast then sits next to the elementwise ops after
// the views (the mask's Where) and runs in their kernel instead of its own.
bool cast_below_view(ir::Graph& g, Node* v) {
  static const std::set<std::string> kViews = {"Unsqueeze", "Reshape", "Squeeze", "Flatten"};
  if (!v->domain().empty() || !kViews.count(v->op()) || !v->output(0)->type().known) return false;
  Value* x = v->input(0);
  const Node* c = producer_op(x, "Cast");
  if (!c || g.is_graph_output(x) || !c->input(0)->type().known) return false;
  for (const Node* u : x->users())
    if (u != v && u->op() != "Shape" && !(kViews.count(u->op()) && u->input(0) == x)) return false;
  std::vector<Value*> ins = v->inputs();
  ins[0] = c->input(0);
  const std::string name = v->name();
  Node* view = g.add_node(v->op(), ins, 1, v->attrs(), detail::temp_node_name(g, name));
  view->output(0)->set_type(c->input(0)->dtype(), v->output(0)->shape());
  Node* cast = g.add_node("Cast", {view->output(0)}, 1, c->attrs(), c->name() + " (after " + name + ")");
  cast->output(0)->set_type(v->output(0)->type());
  detail::replace_value(g, v->output(0), cast->output(0));
  g.remove_node(v);
  view->set_name(name);
  return true;
}

// Rewrite 2: values that are broadcasts of smaller ones, and their narrow forms.
class Narrower {
 public:
  explicit Narrower(ir::Graph& g) : g_(g) {}

  // Every element nonzero (true): constants, `iota >= c` with the iota never below c, And and
  // Cast (to or from bool) of such values.
  bool all_true(const Value* v) const {
    if (v->is_constant()) {
      const ir::Tensor& t = v->constant();
      for (int64_t i = 0; i < t.numel(); ++i)
        if (t.get_f64(i) == 0) return false;
      return t.numel() > 0;
    }
    const Node* n = v->producer();
    if (!n || !n->domain().empty()) return false;
    if (n->op() == "And") return all_true(n->input(0)) && all_true(n->input(1));
    if (n->op() == "Cast")
      return (v->dtype() == ir::DType::boolean || n->input(0)->dtype() == ir::DType::boolean) && all_true(n->input(0));
    if (n->op() == "GreaterOrEqual") {
      const auto it = iota_view(n->input(0));
      const auto c = scalar_const(n->input(1));
      return it && c && it->delta >= 0 && it->start >= *c;
    }
    return false;
  }

  // A value whose broadcast to v's shape is v: v itself where there is none smaller.
  Value* narrow(Value* v) {
    auto hit = memo_.find(v);
    if (hit != memo_.end()) return hit->second;
    Value* r = v;
    const Node* n = v->producer();
    if (n && n->domain().empty() && v->type().known) {
      const std::string& op = n->op();
      if (op == "Expand") {
        r = narrow(n->input(0));
      } else if (op == "And") {
        for (int i = 0; i < 2 && r == v; ++i)
          if (all_true(n->input(i)) && n->input(1 - i)->dtype() == ir::DType::boolean) r = narrow(n->input(1 - i));
      } else if (op == "Cast") {
        Value* x = narrow(n->input(0));
        if (x != n->input(0)) r = rebuild(n, {x, nullptr, nullptr});
      } else if (op == "Where" && scalar_const(n->input(1)) && scalar_const(n->input(2))) {
        Value* c = narrow(n->input(0));
        if (c != n->input(0)) r = rebuild(n, {c, n->input(1), n->input(2)});
      }
    }
    memo_[v] = r;
    return r;
  }

 private:
  // n again over `ins` (nullptr past its inputs), its output typed at their broadcast shape.
  Value* rebuild(const Node* n, std::vector<Value*> ins) {
    ins.resize(n->num_inputs());
    std::vector<const Shape*> shapes;
    for (const Value* x : ins) shapes.push_back(&x->shape());
    const auto shape = broadcast(shapes);
    if (!shape) return n->output(0);
    Node* m = g_.add_node(n->op(), ins, 1, n->attrs(), n->name() + " (narrow)");
    m->output(0)->set_type(n->output(0)->dtype(), *shape);
    return m->output(0);
  }

  ir::Graph& g_;
  std::map<Value*, Value*> memo_;
};

// Elementwise ops whose inputs broadcast against each other (ONNX multidirectional broadcasting).
const std::set<std::string> kBroadcasting = {"Add",  "Sub",     "Mul",  "Div",          "Pow",  "Where",
                                             "And",  "Or",      "Xor",  "Max",          "Min",  "Equal",
                                             "Less", "Greater", "Mod",  "GreaterOrEqual", "LessOrEqual"};

}  // namespace

ir::Graph simplify_masks(ir::Graph g) {
  for (Node* n : g.topo_order()) gather_as_view(g, n);
  Narrower narrower(g);
  for (Node* n : g.topo_order()) {
    if (!n->domain().empty() || !kBroadcasting.count(n->op()) || !n->output(0)->type().known) continue;
    for (size_t i = 0; i < n->num_inputs(); ++i) {
      Value* v = n->input(i);
      if (!v || !v->type().known) continue;
      Value* w = narrower.narrow(v);
      if (w == v) continue;
      std::vector<const Shape*> shapes;
      for (size_t j = 0; j < n->num_inputs(); ++j) shapes.push_back(j == i ? &w->shape() : &n->input(j)->shape());
      const auto shape = broadcast(shapes);
      if (shape && *shape == n->output(0)->shape()) n->set_input(i, w);
    }
  }
  g.remove_dead();
  g.sort();
  for (bool moved = true; moved;) {
    moved = false;
    for (Node* n : g.topo_order()) moved = cast_below_view(g, n) || moved;
    g.remove_dead();
    g.sort();
  }
  return g;
}

}  // namespace sabre::transform
