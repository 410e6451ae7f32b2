#include "ir/graph.h"

#include <algorithm>
#include <queue>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace sabre::ir {

namespace {
template <class T>
const T& get_attr(const std::map<std::string, AttrValue>& attrs, const std::string& k, const Node& n) {
  auto it = attrs.find(k);
  if (it == attrs.end()) throw IrError("node '" + n.name() + "' (" + n.op() + ") has no attribute '" + k + "'");
  if (const T* v = std::get_if<T>(&it->second)) return *v;
  throw IrError("node '" + n.name() + "' (" + n.op() + ") attribute '" + k + "' has another type");
}
}  // namespace

void Node::set_input(size_t i, Value* v) {
  Value* old = inputs_.at(i);
  if (old) {
    auto& u = old->users_;
    auto it = std::find(u.begin(), u.end(), this);
    if (it != u.end()) u.erase(it);
  }
  inputs_[i] = v;
  if (v) v->users_.push_back(this);
}

int64_t Node::attr_int(const std::string& k) const { return get_attr<int64_t>(attrs_, k, *this); }
int64_t Node::attr_int(const std::string& k, int64_t def) const {
  return has_attr(k) ? attr_int(k) : def;
}
double Node::attr_float(const std::string& k) const {
  auto it = attrs_.find(k);
  if (it != attrs_.end())
    if (const int64_t* i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
  return get_attr<double>(attrs_, k, *this);
}
double Node::attr_float(const std::string& k, double def) const { return has_attr(k) ? attr_float(k) : def; }
const std::string& Node::attr_string(const std::string& k) const { return get_attr<std::string>(attrs_, k, *this); }
std::string Node::attr_string(const std::string& k, const std::string& def) const {
  return has_attr(k) ? attr_string(k) : def;
}
const std::vector<int64_t>& Node::attr_ints(const std::string& k) const {
  return get_attr<std::vector<int64_t>>(attrs_, k, *this);
}
std::vector<int64_t> Node::attr_ints(const std::string& k, const std::vector<int64_t>& def) const {
  return has_attr(k) ? attr_ints(k) : def;
}
const std::vector<double>& Node::attr_floats(const std::string& k) const {
  return get_attr<std::vector<double>>(attrs_, k, *this);
}
const Tensor& Node::attr_tensor(const std::string& k) const { return get_attr<Tensor>(attrs_, k, *this); }
const std::shared_ptr<Graph>& Node::attr_graph(const std::string& k) const {
  return get_attr<std::shared_ptr<Graph>>(attrs_, k, *this);
}

std::string Graph::fresh_name(const std::string& hint) {
  std::string base = hint.empty() ? "v" : hint;
  if (!hint.empty() && !by_name_.count(hint)) return hint;
  for (;;) {
    std::string n = base + "_" + std::to_string(next_id_++);
    if (!by_name_.count(n)) return n;
  }
}

Value* Graph::add_value(const std::string& name) {
  auto v = std::make_unique<Value>();
  v->name_ = fresh_name(name);
  Value* p = v.get();
  by_name_[p->name_] = p;
  values_.push_back(std::move(v));
  return p;
}

Value* Graph::add_input(const std::string& name, TensorType type) {
  if (by_name_.count(name)) throw IrError("duplicate value name '" + name + "'");
  Value* v = add_value(name);
  type.known = true;
  v->type_ = std::move(type);
  inputs_.push_back(v);
  return v;
}

Value* Graph::add_constant(const std::string& name, Tensor t) {
  Value* v = add_value(name);
  v->type_ = {t.dtype(), to_shape(t.dims()), true};
  if (!is_float(t.dtype()) && t.rank() <= 1 && t.numel() <= 64) {
    auto vals = t.to_i64_vector();
    v->known_dims_ = std::vector<Dim>(vals.begin(), vals.end());
  }
  v->constant_ = std::make_shared<const Tensor>(std::move(t));
  return v;
}

std::vector<Value*> Graph::constants() const {
  std::vector<Value*> out;
  for (const auto& v : values_)
    if (v->constant_) out.push_back(v.get());
  return out;
}

Value* Graph::find_value(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

bool Graph::is_graph_input(const Value* v) const {
  return std::find(inputs_.begin(), inputs_.end(), v) != inputs_.end();
}
bool Graph::is_graph_output(const Value* v) const {
  return std::find(outputs_.begin(), outputs_.end(), v) != outputs_.end();
}

std::vector<std::string> Graph::symbols() const {
  std::vector<std::string> out;
  for (const Value* v : inputs_)
    for (const Dim& d : v->shape())
      for (const auto& s : v->type().sequence ? std::vector<std::string>{} : d.symbols())  // elements differ: no binding
        if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  return out;
}

Node* Graph::add_node(const std::string& op, std::vector<Value*> inputs, size_t num_outputs,
                      std::map<std::string, AttrValue> attrs, const std::string& name, const std::string& domain) {
  std::vector<Value*> outs;
  std::string base = name.empty() ? op : name;
  for (size_t i = 0; i < num_outputs; ++i) outs.push_back(add_value(base + "_out" + std::to_string(i)));
  return add_node_with_outputs(op, std::move(inputs), std::move(outs), std::move(attrs), name, domain);
}

Node* Graph::add_node_with_outputs(const std::string& op, std::vector<Value*> inputs, std::vector<Value*> outputs,
                                   std::map<std::string, AttrValue> attrs, const std::string& name,
                                   const std::string& domain) {
  auto n = std::make_unique<Node>();
  n->op_ = op;
  n->domain_ = domain;
  n->name_ = name.empty() ? op + "_" + std::to_string(next_id_++) : name;
  n->attrs_ = std::move(attrs);
  n->inputs_ = std::move(inputs);
  n->outputs_ = std::move(outputs);
  for (Value* v : n->inputs_)
    if (v) v->users_.push_back(n.get());
  for (Value* v : n->outputs_) {
    if (v->producer_) throw IrError("value '" + v->name() + "' already has a producer");
    v->producer_ = n.get();
  }
  Node* p = n.get();
  nodes_.push_back(std::move(n));
  return p;
}

void Graph::rename_value(Value* v, const std::string& name) {
  if (v->name_ == name) return;
  if (by_name_.count(name)) throw IrError("rename_value: name '" + name + "' is taken");
  auto it = by_name_.find(v->name_);
  if (it != by_name_.end() && it->second == v) by_name_.erase(it);
  v->name_ = name;
  by_name_[name] = v;
}

void Graph::replace_all_uses(Value* from, Value* to) {
  if (from == to) return;
  std::vector<Node*> users = from->users_;
  for (Node* n : users)
    for (size_t i = 0; i < n->inputs_.size(); ++i)
      if (n->inputs_[i] == from) n->set_input(i, to);
  for (auto& o : outputs_)
    if (o == from) o = to;
}

void Graph::remove_node(Node* n) {
  for (Value* v : n->outputs_) {
    if (!v->users_.empty()) throw IrError("remove_node: output '" + v->name() + "' of '" + n->name() + "' is still used");
    if (is_graph_output(v)) throw IrError("remove_node: '" + v->name() + "' is a graph output");
    v->producer_ = nullptr;
  }
  for (size_t i = 0; i < n->inputs_.size(); ++i) n->set_input(i, nullptr);
  auto it = std::find_if(nodes_.begin(), nodes_.end(), [&](const auto& p) { return p.get() == n; });
  nodes_.erase(it);
}

void Graph::remove_dead() {
  // Live = reaches a graph output.
  std::unordered_set<const Node*> live;
  std::vector<Value*> stack(outputs_.begin(), outputs_.end());
  while (!stack.empty()) {
    Value* v = stack.back();
    stack.pop_back();
    if (!v || !v->producer_ || live.count(v->producer_)) continue;
    live.insert(v->producer_);
    for (Value* in : v->producer_->inputs_) stack.push_back(in);
  }
  std::vector<Node*> order = topo_order();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* n = *it;
    if (live.count(n)) continue;
    for (Value* v : n->outputs_) v->users_.clear();  // users are dead too (reverse order)
    remove_node(n);
  }
  std::set<const Value*> keep(inputs_.begin(), inputs_.end());
  keep.insert(outputs_.begin(), outputs_.end());
  std::vector<std::unique_ptr<Value>> kept;
  for (auto& v : values_) {
    if (keep.count(v.get()) || v->producer_ || !v->users_.empty()) {
      kept.push_back(std::move(v));
    } else {
      by_name_.erase(v->name_);
    }
  }
  values_ = std::move(kept);
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  out.reserve(nodes_.size());
  for (const auto& n : nodes_) out.push_back(n.get());
  return out;
}

std::vector<Node*> Graph::topo_order() const {
  std::unordered_map<const Node*, size_t> index;
  for (size_t i = 0; i < nodes_.size(); ++i) index[nodes_[i].get()] = i;
  std::vector<size_t> pending(nodes_.size(), 0);
  std::vector<std::vector<size_t>> consumers(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    std::set<const Node*> seen;
    for (const Value* v : nodes_[i]->inputs_) {
      if (!v || !v->producer_ || !seen.insert(v->producer_).second) continue;
      auto it = index.find(v->producer_);
      if (it == index.end()) throw IrError("node '" + nodes_[i]->name() + "' reads a value of a removed node");
      ++pending[i];
      consumers[it->second].push_back(i);
    }
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (pending[i] == 0) ready.push(i);
  std::vector<Node*> out;
  out.reserve(nodes_.size());
  while (!ready.empty()) {
    size_t i = ready.top();
    ready.pop();
    out.push_back(nodes_[i].get());
    for (size_t c : consumers[i])
      if (--pending[c] == 0) ready.push(c);
  }
  if (out.size() != nodes_.size()) throw IrError("graph has a cycle");
  return out;
}

void Graph::sort() {
  std::vector<Node*> order = topo_order();
  std::unordered_map<const Node*, std::unique_ptr<Node>> owned;
  for (auto& n : nodes_) owned[n.get()] = std::move(n);
  nodes_.clear();
  for (Node* n : order) nodes_.push_back(std::move(owned[n]));
}

Graph Graph::clone() const {
  Graph g;
  g.name = name;
  g.next_id_ = next_id_;
  std::unordered_map<const Value*, Value*> map;
  for (const auto& v : values_) {
    auto c = std::make_unique<Value>();
    c->name_ = v->name_;
    c->type_ = v->type_;
    c->constant_ = v->constant_;
    c->known_dims_ = v->known_dims_;
    map[v.get()] = c.get();
    g.by_name_[c->name_] = c.get();
    g.values_.push_back(std::move(c));
  }
  for (const auto& n : nodes_) {
    std::vector<Value*> ins, outs;
    for (Value* v : n->inputs_) ins.push_back(v ? map.at(v) : nullptr);
    for (Value* v : n->outputs_) outs.push_back(map.at(v));
    g.add_node_with_outputs(n->op_, ins, outs, n->attrs_, n->name_, n->domain_);
  }
  for (Value* v : inputs_) g.inputs_.push_back(map.at(v));
  for (Value* v : outputs_) g.outputs_.push_back(map.at(v));
  return g;
}

void verify(const Graph& g, bool require_types) {
  std::set<std::string> value_names;
  std::unordered_set<const Value*> defined;
  for (const Value* v : g.inputs()) {
    if (v->is_constant()) throw IrError("graph input '" + v->name() + "' is a constant");
    defined.insert(v);
  }
  for (const Value* v : g.constants()) defined.insert(v);
  std::set<std::string> node_names;
  for (const Node* n : g.topo_order()) {
    if (!node_names.insert(n->name()).second) throw IrError("duplicate node name '" + n->name() + "'");
    for (const Value* v : n->inputs()) {
      if (v && !defined.count(v))
        throw IrError("node '" + n->name() + "' reads '" + v->name() + "' before it is defined");
    }
    for (const Value* v : n->outputs()) {
      if (v->producer() != n) throw IrError("value '" + v->name() + "' does not name its producer");
      if (!defined.insert(v).second) throw IrError("value '" + v->name() + "' is defined twice");
      if (require_types && !v->type().known)
        throw IrError("value '" + v->name() + "' (output of '" + n->name() + "') has no inferred type");
    }
  }
  for (const Value* v : g.outputs())
    if (!defined.count(v)) throw IrError("graph output '" + v->name() + "' is never defined");
  for (const Value* v : defined)
    if (!value_names.insert(v->name()).second) throw IrError("duplicate value name '" + v->name() + "'");
}

}  // namespace sabre::ir
