// fuse_embed_layernorm: a LayerNorm of a sum of embedding Gathers as one embed_layernorm step.
// Tests: tests/unit/codegen_passes_test.cpp
#include <algorithm>
#include <functional>

#include "codegen/passes/fusion.h"

namespace sabre::codegen::passes {
namespace {

using namespace pattern;

// A coordinate of an ids tensor as a function of the row: base + scale * coordinate `row` of the
// LayerNorm's rows (row -1: base alone).
struct IdsCoord {
  int64_t base = 0, scale = 1;
  int row = -1;
};

// When `v` is an Expand or a Slice (constant starts inside static dims, positive steps) of
// another tensor: that tensor, with `c` rewritten to its coordinates; else nullptr.
Value* view_source(const Value* v, std::vector<IdsCoord>& c) {
  Node* p = v->producer();
  if (!p || !p->domain().empty()) return nullptr;
  Value* src = p->input(0);
  const auto& out = v->shape();
  const auto& in = src->shape();
  if (p->op() == "Expand") {
    if (in.size() > out.size()) return nullptr;
    const size_t lead = out.size() - in.size();
    std::vector<IdsCoord> n(in.size());
    for (size_t j = 0; j < in.size(); ++j) {
      if (in[j] == out[lead + j]) n[j] = c[lead + j];
      else if (in[j] == Dim(1)) n[j] = {0, 0, -1};
      else return nullptr;
    }
    c = std::move(n);
    return src;
  }
  if (p->op() != "Slice" || in.size() != out.size() || !p->input(1) || !p->input(1)->is_constant()) return nullptr;
  const std::vector<int64_t> starts = p->input(1)->constant().to_i64_vector();
  std::vector<int64_t> axes, steps(starts.size(), 1);
  for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (p->num_inputs() > 3 && p->input(3)) {
    if (!p->input(3)->is_constant()) return nullptr;
    axes = p->input(3)->constant().to_i64_vector();
  }
  if (p->num_inputs() > 4 && p->input(4)) {
    if (!p->input(4)->is_constant()) return nullptr;
    steps = p->input(4)->constant().to_i64_vector();
  }
  if (axes.size() != starts.size() || steps.size() != starts.size()) return nullptr;
  std::vector<IdsCoord> n = c;
  for (size_t k = 0; k < starts.size(); ++k) {
    const int64_t a = norm_axis(axes[k], in.size());
    if (a < 0 || a >= static_cast<int64_t>(in.size()) || !in[a].is_static()) return nullptr;
    if (starts[k] < 0 || starts[k] >= in[a].value() || steps[k] < 1) return nullptr;
    n[a] = {starts[k] + steps[k] * c[a].base, steps[k] * c[a].scale, c[a].row};
  }
  c = std::move(n);
  return src;
}



// What a fused embedding sum absorbs and the terms its step reads.
struct EmbedSum {
  std::vector<Node*> adds, gathers;
  std::vector<EmbeddingTerm> terms;
};

// LayerNorm of a sum of embedding Gathers (BERT: word, token type and position tables, two Adds):
// one embed_layernorm step reading each table row by its id in place. A term's ids may be an
// Expand or a Slice (static start, positive step) of another tensor, any number deep: the step
// reads that tensor through strides (0 where broadcast) and an offset, so neither runs (BERT's
// position ids are a Slice of a constant buffer). Every Add and Gather must feed only the next
// node of the tree.
Verdict check(const Match& m, LowerContext& cx) {
  Node* ln = m.root;
  Value* x = m.value("x");
  const auto& xs = x->shape();
  const size_t rank = xs.size() ? xs.size() - 1 : 0;
  if (rank < 1 || rank > kMaxEmbedRank || !xs.back().is_static()) return Verdict::not_mine();
  if (norm_axis(ln->attr_int("axis", -1), xs.size()) != static_cast<int64_t>(rank)) return Verdict::not_mine();
  EmbedSum sum;
  std::vector<Node*>& adds = sum.adds;
  std::vector<Node*>& gathers = sum.gathers;
  std::function<bool(Value*, Node*)> walk = [&](Value* v, Node* user) {
    Node* p = v ? v->producer() : nullptr;
    if (!p || !p->domain().empty() || cx.absorbed.count(p) || !only_user(cx.g, v, user)) return false;
    if (p->op() == "Add") {
      adds.push_back(p);
      return walk(p->input(0), p) && walk(p->input(1), p);
    }
    if (p->op() != "Gather") return false;
    gathers.push_back(p);
    return true;
  };
  const bool tree = walk(x, ln);
  if (gathers.empty()) return Verdict::not_mine();  // not a sum of embeddings: nothing to say
  auto refuse = [](const std::string& why) { return Verdict::refuse("embedding sum not fused: " + why); };
  if (!tree)
    return refuse("the tree of Adds over " + std::to_string(gathers.size()) +
                  " Gather(s) has a node that is not an Add or a Gather, or a value read outside it");
  if (gathers.size() < 2 || gathers.size() > kMaxEmbedTerms)
    return refuse(std::to_string(gathers.size()) + " Gather(s), the step takes 2 to " + std::to_string(kMaxEmbedTerms));
  std::sort(gathers.begin(), gathers.end(), [&](Node* a, Node* b) { return cx.pos(a) < cx.pos(b); });
  for (Node* g : gathers) {
    Value* table = g->input(0);
    Value* ids = g->input(1);
    if (!table->is_constant() || !ir::is_float(table->dtype()) || table->shape().size() != 2 ||
        table->shape()[1] != xs.back() || norm_axis(g->attr_int("axis", 0), 2) != 0)
      return refuse(g->name() + " is not a row Gather of a constant float [rows, " + xs.back().str() + "] table");
    if ((ids->dtype() != DType::i64 && ids->dtype() != DType::i32) || ids->shape().size() != rank)
      return refuse("the ids of " + g->name() + " are not i64/i32 of rank " + std::to_string(rank));
    // Coordinate j of the ids tensor read so far: base + scale * (row coordinate `row`), or base.
    std::vector<IdsCoord> c0(rank);
    for (size_t i = 0; i < rank; ++i) {
      const Dim& d = ids->shape()[i];
      if (d == xs[i]) c0[i] = {0, 1, static_cast<int>(i)};
      else if (d == Dim(1)) c0[i] = {0, 0, -1};  // the Adds broadcast it up to x's dim
      else
        return refuse("the ids of " + g->name() + " are " + ir::str(ids->shape()) +
                      ", neither the rows' dims nor broadcast to them");
    }
    auto make = [&](bool through_views) {
      std::vector<IdsCoord> c = c0;
      Value* read = ids;
      if (through_views)
        while (Value* src = view_source(read, c)) read = src;
      EmbeddingTerm t{table, read, Dim(0), std::vector<Dim>(rank, Dim(0))};
      const std::vector<Dim> st = contiguous_strides(read->shape());
      for (size_t j = 0; j < c.size(); ++j) {
        t.offset = t.offset + st[j] * Dim(c[j].base);
        if (c[j].row >= 0) t.strides[c[j].row] = t.strides[c[j].row] + st[j] * Dim(c[j].scale);
      }
      return t;
    };
    EmbeddingTerm t = make(true);
    // A static tensor read in place (BERT's position-id buffer) must hold every id the compiled
    // dim ranges reach; where it may not, the views run as steps (a Slice's ends clamp).
    if (t.ids != ids && ir::is_static(t.ids->shape())) {
      int64_t last = cx.eval_hi(t.offset), size = 1;
      for (size_t i = 0; i < rank; ++i) last += (cx.eval_hi(xs[i]) - 1) * cx.eval_hi(t.strides[i]);
      for (const Dim& d : t.ids->shape()) size *= d.value();
      if (last < 0 || last >= size) t = make(false);
    }
    sum.terms.push_back(std::move(t));
  }
  return Verdict::fuse().with(std::move(sum));
}

void record(const Match& m, const Verdict& v, LowerContext& cx) {
  const auto& sum = std::any_cast<const EmbedSum&>(v.decision);
  for (Node* n : sum.adds) cx.absorbed.insert(n);
  for (Node* n : sum.gathers) cx.absorbed.insert(n);
  cx.embedding[m.root] = sum.terms;
}

Pat structure() {
  const Pat x = wildcard("x");
  return alt({op("LayerNormalization", {x, wildcard(), wildcard()}), op("LayerNormalization", {x, wildcard()})});
}

}  // namespace

const Fusion& embed_layernorm_fusion() {
  static const Fusion f{"fuse_embed_layernorm",
                        "y = LayerNorm(table_1[ids_1] + ... + table_n[ids_n]), 2 <= n <= 4, ids read in place through "
                        "Expand and Slice views",
                        structure(), check, record};
  return f;
}

PassResult fuse_embed_layernorm(LowerContext& cx) { return run_fusion(embed_layernorm_fusion(), cx); }

}  // namespace sabre::codegen::passes
