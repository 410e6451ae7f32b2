// assign_layouts: conv kernels read and write NHWC. Conv outputs are stored NHWC, and so are the
// outputs of pooling and elementwise chains that read an NHWC value (and whose other operands can
// follow: rank-4 activations, constants, scalars); every other reader sees NCHW through one
// conversion per value (LowerContext::tensor), so permutes appear only where the NHWC region ends
// or begins. Layouts are storage orders (physical dim i holds logical dim order[i]: plain, or NHWC),
// and Transposes move between them: a Transpose whose output, read in its input's bytes, is in an
// order the lowering stores is a view of that tensor (no step), after composing the Transposes
// before it that only it reads (a pair that cancels is a view too). So a channels-last block
// (Transpose to [N,H,W,C], LayerNorm and Linear layers over C, Transpose back) keeps the conv's NHWC
// bytes throughout. Reductions of an NHWC value read it in place with remapped axes.
// Tests: tests/golden/lower/assign_layouts/
#include <algorithm>
#include <array>

#include "codegen/passes/pass.h"

namespace sabre::codegen::passes {
namespace {

using Order = std::array<int64_t, 4>;
constexpr Order kPlain = {0, 1, 2, 3};
constexpr Order kNhwc = {kNhwcOrder[0], kNhwcOrder[1], kNhwcOrder[2], kNhwcOrder[3]};

std::string str(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return "[" + s + "]";
}

// Why the elementwise group `gr` that reads an NHWC value stays NCHW ("" where it goes NHWC), or
// nullopt where it reads no NHWC value (nothing to decide).
std::optional<std::string> nchw_reason(const LowerContext& cx, const EwGroup& gr) {
  bool reads_nhwc = false;
  for (const Value* v : gr.inputs) reads_nhwc |= cx.nhwc.count(v) != 0;
  if (!reads_nhwc) return std::nullopt;
  for (const Node* m : gr.nodes)
    if (m->output(0)->shape().size() != 4)
      return "stays NCHW: " + m->name() + " writes rank " + std::to_string(m->output(0)->shape().size());
  for (const Value* v : gr.inputs) {
    if (cx.nhwc.count(v)) continue;
    if (v->is_constant() && !cx.materialized.count(v)) {
      if (v->shape().size() > 4) return "stays NCHW: constant " + v->name() + " has rank above 4";
    } else if (v->shape().size() != 4) {
      return "stays NCHW: it reads " + v->name() + " of rank " + std::to_string(v->shape().size());
    }
  }
  return "";
}

// The order y = Transpose(x, p) (y[j] = x[p[j]]) has in the bytes of x stored in order `px`:
// p[py[i]] = px[i], so py = p⁻¹ ∘ px; nullopt where that is neither plain nor NHWC.
std::optional<Order> view_order(const std::vector<int64_t>& p, const Order& px) {
  Order inv{}, py{};
  for (int64_t j = 0; j < 4; ++j) inv[static_cast<size_t>(p[static_cast<size_t>(j)])] = j;
  for (size_t i = 0; i < 4; ++i) py[i] = inv[static_cast<size_t>(px[i])];
  if (py == kPlain || py == kNhwc) return py;
  return std::nullopt;
}

bool is_transpose(const Node* n) { return n && n->domain().empty() && n->op() == "Transpose"; }

bool is_perm4(const std::vector<int64_t>& p) {
  if (p.size() != 4) return false;
  std::vector<int64_t> s = p;
  std::sort(s.begin(), s.end());
  return s == std::vector<int64_t>{0, 1, 2, 3};
}

// A rank-4 Transpose: its output becomes a view where it can (LowerContext::layout_views), else it
// stays a permute step (which reads an NHWC input in place: emit_steps).
void assign_transpose(LowerContext& cx, Node* n, PassResult& r) {
  const Value* y = n->output(0);
  const std::vector<int64_t> perm = transpose_perm(n);
  if (!is_perm4(perm) || y->shape().size() != 4) return;
  const bool reads_nhwc = cx.nhwc.count(n->input(0)) != 0;
  if (cx.g.is_graph_output(y)) {
    if (reads_nhwc)
      r.refused.push_back({n->name(), "no view: its output is a model output, which gets its own tensor (one "
                                      "permute step reads the NHWC input)"});
    return;
  }
  // Candidate sources, nearest first: the input, then through each Transpose before it that runs as
  // a step and that only this chain reads (composing the perms: y[j] = src[p[j]]).
  struct Source {
    const Value* v;
    std::vector<int64_t> p;
    std::vector<Node*> through;
  };
  std::vector<Source> sources{{n->input(0), perm, {}}};
  while (true) {
    const Source& s = sources.back();
    Node* q = s.v->producer();
    if (!is_transpose(q) || cx.layout_views.count(q) || cx.absorbed.count(q) || cx.sole_user(s.v) != (s.through.empty() ? n : s.through.back()))
      break;
    const std::vector<int64_t> qp = transpose_perm(q);
    if (!is_perm4(qp)) break;
    Source next{q->input(0), {}, s.through};
    for (int64_t j : s.p) next.p.push_back(qp[static_cast<size_t>(j)]);
    next.through.push_back(q);
    sources.push_back(std::move(next));
  }
  for (auto it = sources.rbegin(); it != sources.rend(); ++it) {  // farthest first: it saves the most steps
    const Value* x = it->v;
    if (x->is_constant() || x->shape().size() != 4) continue;
    const std::optional<Order> py = view_order(it->p, cx.nhwc.count(x) ? kNhwc : kPlain);
    if (!py) continue;
    cx.layout_views[n] = x;
    if (*py == kNhwc) cx.nhwc.insert(y);
    for (Node* q : it->through) cx.absorbed.insert(q);
    return;
  }
  if (reads_nhwc)
    r.refused.push_back({n->name(), "no view: perm " + str(perm) +
                                        " of an NHWC value is no NCHW/NHWC swap (one permute step reads the NHWC "
                                        "input)"});
}

bool is_reduction(const std::string& op) {
  return op == "ReduceSum" || op == "ReduceMean" || op == "ReduceMax" || op == "ReduceMin" || op == "ReduceProd" ||
         op == "ReduceSumSquare";
}

// A reduction of an NHWC value reads it in place (axes remapped); its output is NHWC where it keeps
// rank 4, plain where the axes it keeps stay in their order in NHWC storage.
void assign_reduction(LowerContext& cx, Node* n, PassResult& r) {
  const Value* x = n->input(0);
  if (!cx.nhwc.count(x) || x->shape().size() != 4) return;
  std::vector<int64_t> axes;
  if (n->num_inputs() > 1 && n->input(1)) {
    if (!n->input(1)->is_constant()) {
      r.refused.push_back({n->name(), "reads NCHW: its axes are computed at run time (a conversion to NCHW goes before it)"});
      return;
    }
    for (int64_t a : n->input(1)->constant().to_i64_vector()) axes.push_back(norm_axis(a, 4));
  }
  if (axes.empty() && n->attr_int("noop_with_empty_axes", 0)) return;  // a copy
  if (axes.empty()) axes = {0, 1, 2, 3};
  if (n->output(0)->shape().size() == 4) {
    cx.nhwc_reads.insert(n);
    cx.nhwc.insert(n->output(0));
    return;
  }
  int64_t last = -1;
  for (int64_t d = 0; d < 4; ++d) {
    if (std::count(axes.begin(), axes.end(), d)) continue;
    if (kNhwcPos[d] < last) {
      r.refused.push_back({n->name(), "reads NCHW: the axes it keeps are in another order in NHWC storage (a "
                                      "conversion to NCHW goes before it)"});
      return;
    }
    last = kNhwcPos[d];
  }
  cx.nhwc_reads.insert(n);
}

}  // namespace

PassResult assign_layouts(LowerContext& cx) {
  PassResult r;
  if (!cx.o.pick_conv) {  // conv regions are refused: nothing runs NHWC
    r.skipped = "no conv kernel picker (LowerOptions::pick_conv): nothing runs NHWC";
    return r;
  }
  for (Node* n : cx.order) {
    if (!cx.needed.count(n) || cx.absorbed.count(n)) continue;
    if (is_conv_region(n)) {
      if (n->output(0)->shape().size() == 4) cx.nhwc.insert(n->output(0));
      continue;
    }
    if (n->domain() != "") continue;
    const std::string& op = n->op();
    if (op == "Conv" && depthwise_problem(n).empty()) {
      cx.nhwc.insert(n->output(0));
      if (auto it = cx.dw_act.find(n); it != cx.dw_act.end()) cx.nhwc.insert(it->second.node->output(0));
      continue;
    }
    if ((op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool") && n->num_outputs() == 1 &&
        n->input(0)->shape().size() == 4 && cx.nhwc.count(n->input(0))) {
      cx.nhwc.insert(n->output(0));
      continue;
    }
    if (op == "Transpose") {
      assign_transpose(cx, n, r);
      continue;
    }
    if (is_reduction(op)) {
      assign_reduction(cx, n, r);
      continue;
    }
    if (is_ew(n)) {
      auto it = cx.group_of.find(n);
      if (it == cx.group_of.end() || cx.groups[it->second].nodes.back() != n) continue;
      const std::optional<std::string> why = nchw_reason(cx, cx.groups[it->second]);
      if (!why) continue;
      if (!why->empty()) {
        r.refused.push_back({n->name(), "elementwise chain " + *why + " (a conversion to NCHW goes before it)"});
        continue;
      }
      for (Node* m : cx.groups[it->second].nodes) cx.nhwc.insert(m->output(0));
    }
  }
  // A Transpose refused on its own and then cancelled by the one after it runs no step: no refusal.
  std::erase_if(r.refused, [&](const Refusal& f) {
    return std::any_of(cx.absorbed.begin(), cx.absorbed.end(),
                       [&](const Node* q) { return is_transpose(q) && q->name() == f.node; });
  });
  r.fired = static_cast<int>(cx.nhwc.size() + cx.layout_views.size() + cx.nhwc_reads.size());
  return r;
}

}  // namespace sabre::codegen::passes
