// fuse_row_gather_gemm: a GEMM whose A is one row of each [S, K] matrix of x [B, S, K] (Gather
// along axis 1 by a constant index: BERT's pooler takes the [CLS] row) reads A in place, lda S*K
// from row i*K, so the Gather does not run. Tests: tests/unit/codegen_passes_test.cpp
#include "codegen/passes/pass.h"

namespace sabre::codegen::passes {

PassResult fuse_row_gather_gemm(LowerContext& cx) {
  PassResult r;
  for (Node* n : cx.order) {
    if (n->domain() != "sabre" || n->op() != "Composite" || n->attr_string("kind", "") != "gemm") continue;
    const std::map<std::string, Value*> role = roles_of(n);
    auto it = role.find("A");
    if (it == role.end() || !it->second) continue;
    Value* a = it->second;
    const Node* g = a->producer();
    if (!g || !g->domain().empty() || g->op() != "Gather" || !scalar_constant(g->input(1))) continue;
    auto refuse = [&](const std::string& why) { r.refused.push_back({n->name(), "Gather " + g->name() + " of A not read in place: " + why}); };
    const Value* x = g->input(0);
    const auto& xs = x->shape();
    if (xs.size() != 3 || norm_axis(g->attr_int("axis", 0), 3) != 1 || a->shape().size() != 2) {
      refuse("not one row of each matrix of a rank-3 tensor");
      continue;
    }
    int64_t i = g->input(1)->constant().get_i64(0);
    if (i < 0) {
      if (!xs[1].is_static()) {
        refuse("a negative index into a symbolic dim");
        continue;
      }
      i += xs[1].value();
    }
    if (i < 0 || i >= cx.eval_lo(xs[1])) {  // must be inside every S the ranges allow
      refuse("row " + std::to_string(i) + " is outside some " + xs[1].str() + " the ranges allow");
      continue;
    }
    // A's operand position in the Composite, so data_inputs can read x in its place.
    for (size_t k = 0; k < n->num_inputs(); ++k)
      if (n->input(k) == a) cx.row_gather[n] = {k, g->input(0), i};
    ++r.fired;
  }
  return r;
}

}  // namespace sabre::codegen::passes
