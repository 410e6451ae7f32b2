// fuse_row_gather_gemm: a GEMM whose A is one row of each [S, K] matrix of x [B, S, K] (Gather
// along axis 1 by a constant index: BERT's pooler takes the [CLS] row) reads A in place, lda S*K
// from row i*K, so the Gather does not run. Tests: tests/golden/lower/fuse_row_gather_gemm/
#include <variant>

#include "codegen/passes/fusion.h"

namespace sabre::codegen::passes {
namespace {

using namespace pattern;

// A's producer where it is a Gather by a constant scalar, else nullptr.
const Node* row_gather_of_a(const Node* gemm) {
  const std::map<std::string, Value*> role = roles_of(gemm);
  auto it = role.find("A");
  if (it == role.end() || !it->second) return nullptr;
  const Node* g = it->second->producer();
  if (!g || !g->domain().empty() || g->op() != "Gather" || !scalar_constant(g->input(1))) return nullptr;
  return g;
}

// The row A reads, or why it cannot be read in place.
std::variant<int64_t, std::string> row_of(const Node* g, const Value* a, LowerContext& cx) {
  const auto& xs = g->input(0)->shape();
  if (xs.size() != 3 || norm_axis(g->attr_int("axis", 0), 3) != 1 || a->shape().size() != 2)
    return "not one row of each matrix of a rank-3 tensor";
  int64_t i = g->input(1)->constant().get_i64(0);
  if (i < 0) {
    if (!xs[1].is_static()) return "a negative index into a symbolic dim";
    i += xs[1].value();
  }
  if (i < 0 || i >= cx.eval_lo(xs[1]))  // must be inside every S the ranges allow
    return "row " + std::to_string(i) + " is outside some " + xs[1].str() + " the ranges allow";
  return i;
}

Verdict check(const Match& m, LowerContext& cx) {
  const Node* g = row_gather_of_a(m.root);
  if (!g) return Verdict::not_mine();
  const auto row = row_of(g, g->output(0), cx);
  if (const auto* why = std::get_if<std::string>(&row))
    return Verdict::refuse("Gather " + g->name() + " of A not read in place: " + *why);
  return Verdict::fuse().with(std::get<int64_t>(row));
}

void record(const Match& m, const Verdict& v, LowerContext& cx) {
  Node* gemm = m.root;
  const Node* g = row_gather_of_a(gemm);
  // A's operand position in the Composite, so data_inputs can read x in its place.
  for (size_t k = 0; k < gemm->num_inputs(); ++k)
    if (gemm->input(k) == g->output(0)) cx.row_gather[gemm] = {k, g->input(0), std::any_cast<int64_t>(v.decision)};
}

}  // namespace

const Fusion& row_gather_gemm_fusion() {
  static const Fusion f{"fuse_row_gather_gemm", "GEMM(Gather(x [B,S,K], i, axis=1), W) = GEMM over x's row i, lda S*K",
                        op_any("Composite", {attr_eq("kind", std::string("gemm"))}, "sabre"), check, record};
  return f;
}

PassResult fuse_row_gather_gemm(LowerContext& cx) { return run_fusion(row_gather_gemm_fusion(), cx); }

}  // namespace sabre::codegen::passes
