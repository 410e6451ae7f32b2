// The native-fusion driver (fusion.h).
#include "codegen/passes/fusion.h"

namespace sabre::codegen::passes {

PassResult run_fusion(const Fusion& f, LowerContext& cx) {
  PassResult r;
  for (Node* n : cx.order) {
    auto m = pattern::match_at(f.structure, n);
    if (!m) continue;
    const Verdict v = f.check(*m, cx);
    switch (v.kind) {
      case Verdict::Kind::fuse:
        f.record(*m, cx);
        ++r.fired;
        break;
      case Verdict::Kind::refuse:
        r.refused.push_back({n->name(), v.reason});
        break;
      case Verdict::Kind::not_mine:
        break;
    }
  }
  return r;
}

}  // namespace sabre::codegen::passes
