#include "ir/stats.h"

#include <cmath>
#include <cstdio>
#include <set>
#include <stdexcept>

namespace sabre::ir {

namespace {

bool known(const Value* v) { return v && v->type().known; }

// FLOPs of one node as factors whose product it is (each a dim, so each fits int64 while the
// product may not), or nullopt when its operand shapes are not known.
std::optional<std::vector<Dim>> node_flops(const Node& n) {
  const std::string& op = n.op();
  auto with = [](std::vector<Dim> f, const Shape& s, size_t from = 0) {
    for (size_t i = from; i < s.size(); ++i) f.push_back(s[i]);
    return f;
  };
  if (op == "MatMul") {
    const Value *a = n.input(0), *y = n.num_outputs() ? n.output(0) : nullptr;
    if (!known(a) || !known(y) || a->shape().empty()) return std::nullopt;
    return with({Dim(2), a->shape().back()}, y->shape());
  }
  if (op == "Gemm") {
    const Value *a = n.input(0), *y = n.num_outputs() ? n.output(0) : nullptr;
    if (!known(a) || !known(y) || a->shape().size() != 2) return std::nullopt;
    const Dim& k = n.attr_int("transA", 0) ? a->shape()[0] : a->shape()[1];
    return with({Dim(2), k}, y->shape());
  }
  if (op == "Conv") {
    // Each output element is a dot product over (IC / groups) * KH * KW: W is [OC, IC/groups, KH, KW].
    const Value *w = n.input(1), *y = n.num_outputs() ? n.output(0) : nullptr;
    if (!known(w) || !known(y) || w->shape().size() < 2) return std::nullopt;
    return with(with({Dim(2)}, y->shape()), w->shape(), 1);
  }
  if (op == "ConvTranspose") {
    // Each input element scatters into (OC / groups) * KH * KW outputs: W is [IC, OC/groups, KH, KW].
    const Value *x = n.input(0), *w = n.input(1);
    if (!known(x) || !known(w) || w->shape().size() < 2) return std::nullopt;
    return with(with({Dim(2)}, x->shape()), w->shape(), 1);
  }
  return std::nullopt;
}

bool counts_flops(const std::string& op) {
  return op == "MatMul" || op == "Gemm" || op == "Conv" || op == "ConvTranspose";
}

void add_flops(const Graph& g, ModelStats& s, std::set<const Tensor*>& seen_constants) {
  for (const Value* c : g.constants()) {
    if (!seen_constants.insert(c->constant_ptr().get()).second) continue;
    if (!is_float(c->dtype())) continue;
    s.parameter_count += c->constant().numel();
    s.parameter_bytes += static_cast<int64_t>(c->constant().nbytes());
  }
  for (const Node* n : g.nodes()) {
    if (n->domain().empty() && counts_flops(n->op())) {
      OpKindFlops& k = s.flops[n->op()];
      if (auto f = node_flops(*n)) {
        ++k.nodes;
        k.terms.push_back(*f);
        if (k.exact) {
          try {  // the polynomial in int64 where it fits; evaluate() counts in double either way
            Dim p(1);
            for (const Dim& d : *f) p = p * d;
            k.flops = k.flops + p;
          } catch (const std::overflow_error&) {
            k.exact = false;
            k.flops = Dim();
          }
        }
      } else {
        ++k.unknown;
      }
    }
    for (const auto& [key, a] : n->attrs())
      if (const auto* sub = std::get_if<std::shared_ptr<Graph>>(&a); sub && *sub)
        add_flops(**sub, s, seen_constants);
  }
}

}  // namespace

std::optional<double> OpKindFlops::evaluate(const std::map<std::string, int64_t>& bindings) const {
  double total = 0;
  for (const auto& term : terms) {
    double p = 1;
    for (const Dim& d : term) {
      auto v = d.evaluate(bindings);
      if (!v) return std::nullopt;
      p *= static_cast<double>(*v);
    }
    total += p;
  }
  return total;
}

OpKindFlops ModelStats::total_flops() const {
  OpKindFlops t;
  for (const auto& [op, k] : flops) {
    t.nodes += k.nodes;
    t.unknown += k.unknown;
    t.terms.insert(t.terms.end(), k.terms.begin(), k.terms.end());
    t.exact = t.exact && k.exact;
    if (t.exact) {
      try {
        t.flops = t.flops + k.flops;
      } catch (const std::overflow_error&) {
        t.exact = false;
      }
    }
  }
  if (!t.exact) t.flops = Dim();
  return t;
}

ModelStats compute_stats(const Graph& g) {
  ModelStats s;
  s.name = g.name;
  s.inputs.assign(g.inputs().begin(), g.inputs().end());
  s.outputs.assign(g.outputs().begin(), g.outputs().end());
  s.symbols = g.symbols();
  for (const Node* n : g.nodes()) {
    ++s.op_histogram[n->domain().empty() ? n->op() : n->domain() + "." + n->op()];
    ++s.num_nodes;
  }
  s.num_constants = static_cast<int64_t>(g.constants().size());
  std::set<const Tensor*> seen;
  add_flops(g, s, seen);
  return s;
}

std::string human_count(double v) {
  static const char* kUnits[] = {"", "K", "M", "G", "T", "P", "E"};
  char buf[32];
  if (std::fabs(v) >= 1e21) {  // past the largest unit: scientific notation
    std::snprintf(buf, sizeof buf, "%.2e", v);
    return buf;
  }
  int u = 0;
  double a = std::fabs(v);
  while (a >= 1000.0 && u < 6) {
    a /= 1000.0;
    v /= 1000.0;
    ++u;
  }
  if (u == 0) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, "%.2f%s", v, kUnits[u]);
  return buf;
}

}  // namespace sabre::ir
