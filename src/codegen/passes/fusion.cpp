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
      case Verdict::Kind::keep:
        if (!v.reason.empty()) r.refused.push_back({n->name(), v.reason});
        f.record(*m, v, cx);
        r.fired += v.kind == Verdict::Kind::fuse;
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

const std::vector<const Fusion*>& fusion_table() {
  static const std::vector<const Fusion*> table = {
      &row_gather_gemm_fusion(),
      &softmax_fusion(),
      &embed_layernorm_fusion(),
      &layernorm_residual_fusion(),
      &range_gather_fusion(),
      &depthwise_activation_fusion(),
      &attention_fusion(),
      &attention_mask_fusion(),
      &elementwise_chain_fusion(),
      &se_scale_fusion(),
  };
  return table;
}

}  // namespace sabre::codegen::passes
