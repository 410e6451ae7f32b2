#include "pattern/pattern.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace sabre::pattern {

namespace {

bool near(double a, double b, double rel_tol) {
  return std::fabs(a - b) <= rel_tol * std::max(std::fabs(a), std::fabs(b));
}

std::string ints_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

Pat make(PatternNode n) { return Pat(std::make_shared<const PatternNode>(std::move(n))); }

}  // namespace

AttrConstraint attr_eq(const std::string& name, int64_t v, std::optional<int64_t> def) {
  return {name + "=" + std::to_string(v), [=](const ir::Node& n) {
            if (!n.has_attr(name)) return def && *def == v;
            const auto* p = std::get_if<int64_t>(&n.attrs().at(name));
            return p && *p == v;
          }};
}

AttrConstraint attr_eq(const std::string& name, const std::string& v, std::optional<std::string> def) {
  return {name + "=\"" + v + "\"", [=](const ir::Node& n) {
            if (!n.has_attr(name)) return def && *def == v;
            const auto* p = std::get_if<std::string>(&n.attrs().at(name));
            return p && *p == v;
          }};
}

AttrConstraint attr_eq(const std::string& name, const std::vector<int64_t>& v) {
  return {name + "=" + ints_text(v), [=](const ir::Node& n) {
            if (!n.has_attr(name)) return false;
            const auto* p = std::get_if<std::vector<int64_t>>(&n.attrs().at(name));
            return p && *p == v;
          }};
}

AttrConstraint attr_near(const std::string& name, double v, std::optional<double> def, double rel_tol) {
  std::ostringstream t;
  t << name << "~" << v;
  return {t.str(), [=](const ir::Node& n) {
            if (!n.has_attr(name)) return def && near(*def, v, rel_tol);
            const auto& a = n.attrs().at(name);
            if (const auto* d = std::get_if<double>(&a)) return near(*d, v, rel_tol);
            if (const auto* i = std::get_if<int64_t>(&a)) return near(static_cast<double>(*i), v, rel_tol);
            return false;
          }};
}

AttrConstraint attr_test(const std::string& text, std::function<bool(const ir::Node&)> f) {
  return {text, std::move(f)};
}

Pat Pat::as(const std::string& name) const {
  PatternNode n = *node_;
  n.capture = name;
  return make(std::move(n));
}

std::string Pat::str() const {
  const PatternNode& n = *node_;
  std::string cap = n.capture.empty() ? "" : n.capture;
  switch (n.kind) {
    case PatternNode::Kind::wildcard:
      return cap.empty() ? "_" : cap;
    case PatternNode::Kind::constant: {
      std::string s = cap.empty() ? "" : cap + ":";
      if (n.scalar) {
        std::ostringstream o;
        o << *n.scalar;
        return s + o.str();
      }
      return s + "const";
    }
    case PatternNode::Kind::alternatives: {
      std::string s = "(";
      for (size_t i = 0; i < n.inputs.size(); ++i) s += (i ? " | " : "") + Pat(n.inputs[i]).str();
      return s + ")" + (cap.empty() ? "" : ":" + cap);
    }
    case PatternNode::Kind::op: {
      std::string s = (n.domain.empty() ? "" : n.domain + ".") + n.op + "(" + (n.any_operands ? "..." : "");
      for (size_t i = 0; i < n.inputs.size(); ++i) s += (i ? ", " : "") + Pat(n.inputs[i]).str();
      for (const auto& a : n.attrs) s += ", " + a.text;
      return s + ")" + (cap.empty() ? "" : ":" + cap);
    }
  }
  return "?";
}

Pat op(const std::string& name, std::vector<Pat> inputs, std::vector<AttrConstraint> attrs, const std::string& domain) {
  PatternNode n;
  n.kind = PatternNode::Kind::op;
  n.op = name;
  n.domain = domain;
  // Keep sharing: store the handles' nodes, not copies (GELU's x appears three times).
  for (auto& p : inputs) n.inputs.push_back(p.shared());
  n.attrs = std::move(attrs);
  return make(std::move(n));
}

Pat op_any(const std::string& name, std::vector<AttrConstraint> attrs, const std::string& domain) {
  PatternNode n = *op(name, {}, std::move(attrs), domain);
  n.any_operands = true;
  return make(std::move(n));
}

Pat commutative(const std::string& name, Pat a, Pat b) {
  PatternNode n = *op(name, {a, b});
  n.inputs = {a.shared(), b.shared()};
  n.commutative = true;
  return make(std::move(n));
}

Pat wildcard(const std::string& capture) {
  PatternNode n;
  n.kind = PatternNode::Kind::wildcard;
  n.capture = capture;
  return make(std::move(n));
}

Pat constant(const std::string& capture) {
  PatternNode n;
  n.kind = PatternNode::Kind::constant;
  n.capture = capture;
  return make(std::move(n));
}

Pat scalar(double v, double rel_tol) {
  PatternNode n;
  n.kind = PatternNode::Kind::constant;
  n.scalar = v;
  n.rel_tol = rel_tol;
  return make(std::move(n));
}

Pat alt(std::vector<Pat> choices) {
  PatternNode n;
  n.kind = PatternNode::Kind::alternatives;
  for (auto& p : choices) n.inputs.push_back(p.shared());
  return make(std::move(n));
}

Pat optional_tail(Pat inner, const Tail& tail) { return alt({tail(inner), inner}); }

Pat operator+(Pat a, Pat b) { return commutative("Add", std::move(a), std::move(b)); }
Pat operator*(Pat a, Pat b) { return commutative("Mul", std::move(a), std::move(b)); }
Pat operator>>(Pat a, const Tail& tail) { return tail(std::move(a)); }

ir::Value* Match::value(const std::string& c) const {
  auto it = values.find(c);
  if (it == values.end()) throw std::logic_error("match has no capture '" + c + "'");
  return it->second;
}

namespace {

struct State {
  std::map<const PatternNode*, ir::Value*> bound;
  Match m;
};
using Cont = std::function<bool(State&)>;

bool match_node(const PatternNode* p, ir::Value* v, State st, const Cont& k);

void bind(const PatternNode* p, ir::Value* v, State& st) {
  st.bound[p] = v;
  if (!p->capture.empty()) st.m.values[p->capture] = v;
}

bool match_operands(const PatternNode* p, ir::Node* n, const std::vector<size_t>& order, size_t i, State st,
                    const Cont& done) {
  if (i == order.size()) return done(st);
  return match_node(p->inputs[i].get(), n->input(order[i]), std::move(st),
                    [&](State& s) { return match_operands(p, n, order, i + 1, s, done); });
}

bool scalar_near(const ir::Tensor& t, double v, double rel_tol) {
  if (t.numel() != 1 || !ir::is_float(t.dtype())) return false;
  return near(t.get_f64(0), v, rel_tol);
}

bool match_node(const PatternNode* p, ir::Value* v, State st, const Cont& k) {
  if (!v) return false;
  if (auto it = st.bound.find(p); it != st.bound.end()) return it->second == v && k(st);
  switch (p->kind) {
    case PatternNode::Kind::wildcard:
      bind(p, v, st);
      return k(st);
    case PatternNode::Kind::constant:
      if (!v->is_constant()) return false;
      if (p->scalar && !scalar_near(v->constant(), *p->scalar, p->rel_tol)) return false;
      bind(p, v, st);
      return k(st);
    case PatternNode::Kind::alternatives:
      for (const auto& c : p->inputs) {
        bool ok = match_node(c.get(), v, st, [&](State& s) {
          bind(p, v, s);
          return k(s);
        });
        if (ok) return true;
      }
      return false;
    case PatternNode::Kind::op: {
      ir::Node* n = v->producer();
      if (!n || (p->op != "*" && n->op() != p->op) || n->domain() != p->domain || n->output(0) != v) return false;
      size_t present = n->num_inputs();
      while (present > 0 && !n->input(present - 1)) --present;  // trailing absent optionals
      if (!p->any_operands && present != p->inputs.size()) return false;
      for (const auto& a : p->attrs)
        if (!a.holds(*n)) return false;
      // A node already in the region under another pattern node cannot play a second role.
      if (std::find(st.m.region.begin(), st.m.region.end(), n) != st.m.region.end()) return false;
      auto finish = [&](State& s) {
        bind(p, v, s);
        if (!p->capture.empty()) s.m.nodes[p->capture] = n;
        s.m.region.push_back(n);  // post-order: producers before consumers
        return k(s);
      };
      std::vector<size_t> order(p->inputs.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      if (match_operands(p, n, order, 0, st, finish)) return true;
      if (p->commutative && order.size() == 2) {
        std::reverse(order.begin(), order.end());
        return match_operands(p, n, order, 0, st, finish);
      }
      return false;
    }
  }
  return false;
}

}  // namespace

std::optional<Match> match(const Pat& p, ir::Value* v) {
  std::optional<Match> out;
  match_node(p.get(), v, State{}, [&](State& s) {
    out = s.m;
    return true;
  });
  if (out && !out->region.empty()) out->root = out->region.back();
  return out;
}

std::optional<Match> match_at(const Pat& p, ir::Node* n) {
  if (n->num_outputs() == 0) return std::nullopt;
  return match(p, n->output(0));
}

}  // namespace sabre::pattern
