#include "partition/report.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <stdexcept>

#include "ir/printer.h"

namespace sabre::partition {

namespace {

ir::Dim prod(const ir::Shape& s, size_t b, size_t e) {
  ir::Dim p(1);
  for (size_t i = b; i < e; ++i) p = p * s[i];
  return p;
}

// numpy-broadcast batch dims of two MatMul operands (the larger where one is 1).
ir::Dim batch_of(const ir::Shape& a, const ir::Shape& b) {
  size_t ra = a.size() - 2, rb = b.size() >= 2 ? b.size() - 2 : 0, r = std::max(ra, rb);
  ir::Dim p(1);
  for (size_t i = 0; i < r; ++i) {
    const ir::Dim* da = i + ra >= r ? &a[i + ra - r] : nullptr;
    const ir::Dim* db = i + rb >= r ? &b[i + rb - r] : nullptr;
    if (da && *da != ir::Dim(1)) p = p * *da;
    else if (db) p = p * *db;
  }
  return p;
}

bool is_composite(const ir::Node* n) { return n->op() == "Composite" && n->domain() == "sabre"; }

void walk(const ir::Graph& g, bool inside, ir::Dim& total, ir::Dim& off,
          std::vector<const ir::Node*>* outside) {
  for (const ir::Node* n : g.nodes()) {
    if (is_composite(n) && n->has_attr("body")) {
      walk(*n->attr_graph("body"), true, total, off, nullptr);
      continue;
    }
    if (auto f = gemm_flops(*n)) {
      total = total + *f;
      if (inside) off = off + *f;
      else if (outside) outside->push_back(n);
    }
  }
}

// The GEMMs and convs outside regions, without counting FLOPs.
void walk_outside(const ir::Graph& g, std::vector<const ir::Node*>& outside) {
  for (const ir::Node* n : g.nodes()) {
    if (is_composite(n)) continue;
    bool known = true;
    for (const ir::Value* v : n->inputs()) known = known && (!v || v->type().known);
    const std::string& op = n->op();
    if (known && ((n->domain().empty() && (op == "MatMul" || op == "Gemm" || op == "Conv")) ||
                  (n->domain() == "sabre" && op == "MatMulTransB")))
      outside.push_back(n);
  }
}

double eval(const ir::Dim& d, const std::map<std::string, int64_t>& b) {
  auto v = d.evaluate(b);
  return v ? static_cast<double>(*v) : 0.0;
}

bool batch_like(const std::string& s) {
  std::string l = s;
  std::transform(l.begin(), l.end(), l.begin(), ::tolower);
  return l.find("batch") != std::string::npos || l == "n" || l == "b";
}

std::string operands_text(const ir::Node& n) {
  std::string s;
  for (const ir::Value* v : n.inputs()) {
    if (!v) continue;
    if (!s.empty()) s += " x ";
    s += ir::print_type(v->type());
  }
  return s;
}

}  // namespace

std::optional<ir::Dim> gemm_flops(const ir::Node& n) {
  for (const ir::Value* v : n.inputs())
    if (v && !v->type().known) return std::nullopt;
  const std::string& op = n.op();
  if ((op == "MatMul" && n.domain().empty()) || (op == "MatMulTransB" && n.domain() == "sabre")) {
    if (n.num_inputs() < 2 || !n.input(0) || !n.input(1)) return std::nullopt;
    const ir::Shape& a = n.input(0)->shape();
    const ir::Shape& b = n.input(1)->shape();
    if (a.size() < 2 || b.size() < 2) return std::nullopt;
    bool tb = op == "MatMulTransB";
    ir::Dim m = a[a.size() - 2], k = a.back(), nn = tb ? b[b.size() - 2] : b.back();
    return ir::Dim(2) * batch_of(a, b) * m * nn * k;
  }
  if (op == "Gemm" && n.domain().empty()) {
    if (!n.input(0) || !n.input(1)) return std::nullopt;
    const ir::Shape& a = n.input(0)->shape();
    const ir::Shape& b = n.input(1)->shape();
    if (a.size() != 2 || b.size() != 2) return std::nullopt;
    bool ta = n.attr_int("transA", 0), tb = n.attr_int("transB", 0);
    return ir::Dim(2) * (ta ? a[1] : a[0]) * (ta ? a[0] : a[1]) * (tb ? b[0] : b[1]);
  }
  if (op == "Conv" && n.domain().empty()) {
    if (!n.input(0) || !n.input(1) || n.num_outputs() < 1 || !n.output(0)->type().known) return std::nullopt;
    const ir::Shape& w = n.input(1)->shape();
    const ir::Shape& y = n.output(0)->shape();
    if (w.size() < 3 || y.size() != w.size()) return std::nullopt;
    // y = [N, OC, spatial...], w = [OC, IC/group, kernel...]
    return ir::Dim(2) * prod(y, 0, y.size()) * prod(w, 1, w.size());
  }
  return std::nullopt;
}

PartitionReport make_report(const PartitionResult& r, const std::map<std::string, int64_t>& bindings) {
  PartitionReport rep;
  const ir::Graph& g = r.graph;

  // Regions, in the order they were cut.
  std::map<std::string, const ir::Node*> comps;
  for (const ir::Node* n : g.nodes())
    if (is_composite(n)) comps[n->name()] = n;
  for (const RegionInfo& ri : r.regions) {
    std::string s = ri.composite + "  " + ri.pattern + "\n    nodes: ";
    for (size_t i = 0; i < ri.nodes.size(); ++i) s += (i ? ", " : "") + ri.nodes[i];
    auto it = comps.find(ri.composite);
    if (it != comps.end()) {
      const ir::Node* c = it->second;
      std::vector<std::string> roles;
      if (c->has_attr("roles")) roles = std::get<std::vector<std::string>>(c->attrs().at("roles"));
      s += "\n    ";
      for (size_t i = 0; i < c->num_inputs(); ++i) {
        std::string role = i < roles.size() && !roles[i].empty() ? roles[i] : "in" + std::to_string(i);
        s += role + ": " + ir::print_type(c->input(i)->type()) + "  ";
      }
      s += "-> " + ir::print_type(c->output(0)->type());
      std::string extra;
      for (const char* k : {"kind", "layout", "epilogue", "alignment", "groups"}) {
        if (!c->has_attr(k)) continue;
        const auto& a = c->attrs().at(k);
        if (const auto* sv = std::get_if<std::string>(&a)) extra += std::string(k) + "=" + *sv + " ";
        if (const auto* iv = std::get_if<int64_t>(&a)) extra += std::string(k) + "=" + std::to_string(*iv) + " ";
      }
      if (c->has_attr("alignment_note")) extra += "(" + c->attr_string("alignment_note") + ") ";
      if (c->has_attr("runtime_alignment")) {
        extra += "runtime-alignment(";
        const auto& v = std::get<std::vector<std::string>>(c->attrs().at("runtime_alignment"));
        for (size_t i = 0; i < v.size(); ++i) extra += (i ? "," : "") + v[i];
        extra += ") ";
      }
      if (!extra.empty()) s += "\n    " + extra;
    }
    rep.region_lines.push_back(s);
  }

  // FLOPs and what was left out.
  ir::Dim total, off;
  std::vector<const ir::Node*> outside;
  try {  // the dims polynomials are int64: a model whose FLOPs pass that gets no share, not an error
    walk(g, false, total, off, &outside);
    rep.flops.total = total;
    rep.flops.offloaded = off;
    std::map<std::string, int64_t> b = bindings, b2;
    for (const ir::Value* v : g.inputs())
      for (const ir::Dim& d : v->shape())
        for (const auto& s : d.symbols())
          if (!b.count(s)) b[s] = batch_like(s) ? 1 : 128;
    for (const auto& [k, v] : b) b2[k] = v * 2 + 3;
    rep.flops.bindings = b;
    rep.flops.total_at = eval(total, b);
    rep.flops.offloaded_at = eval(off, b);
    double t2 = eval(total, b2), o2 = eval(off, b2);
    rep.flops.exact = b.empty() || (t2 > 0 && rep.flops.total_at > 0 &&
                                    std::abs(o2 / t2 - rep.flops.offloaded_at / rep.flops.total_at) < 1e-12);
  } catch (const std::overflow_error&) {
    rep.flops = FlopShare{};
    rep.flops.overflow = true;
    outside.clear();
    walk_outside(g, outside);
  }

  for (const ir::Node* n : outside) {
    LeftOut lo{n->name(), n->op(), operands_text(*n), ""};
    for (const Refusal& f : r.refusals)
      if (std::find(f.nodes.begin(), f.nodes.end(), n->name()) != f.nodes.end() &&
          (f.nodes.size() == 1 || lo.reason.empty()))
        lo.reason = f.reason + " (" + f.pattern + ")";  // the most basic entry's word wins
    if (lo.reason.empty()) lo.reason = "no pattern in the table has this form";
    rep.left_out.push_back(lo);
  }
  return rep;
}

std::string format_report(const PartitionReport& rep, const std::string& backend) {
  std::string s;
  char buf[512];
  std::snprintf(buf, sizeof buf, "%zu %s regions\n", rep.region_lines.size(), backend.c_str());
  s += buf;
  for (const auto& l : rep.region_lines) s += "  " + l + "\n";
  std::string at;
  for (const auto& [k, v] : rep.flops.bindings) at += (at.empty() ? "" : ", ") + k + "=" + std::to_string(v);
  std::snprintf(buf, sizeof buf, "GEMM+conv FLOPs offloaded to %s: %.3f%% (%s of %s)", backend.c_str(),
                100.0 * rep.flops.share(), rep.flops.offloaded.str().c_str(), rep.flops.total.str().c_str());
  if (rep.flops.overflow)
    std::snprintf(buf, sizeof buf, "GEMM+conv FLOPs offloaded to %s: not counted (the FLOPs pass int64)", backend.c_str());
  s += buf;
  if (rep.flops.overflow)
    s += "\n";
  else if (rep.flops.exact)
    s += at.empty() ? "\n" : "; exact: the share does not depend on the symbolic dims\n";
  else
    s += "; symbolic dims evaluated at " + at + "\n";
  if (rep.left_out.empty()) {
    s += "every GEMM and conv is in a region\n";
  } else {
    s += "left out:\n";
    for (const auto& lo : rep.left_out)
      s += "  " + lo.node + " (" + lo.op + " " + lo.operands + "): " + lo.reason +
           (lo.runs_on.empty() ? "" : "\n    -> " + lo.runs_on) + "\n";
  }
  return s;
}

}  // namespace sabre::partition
