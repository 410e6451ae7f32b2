// fuse_attention: Softmax(scale·Q·Kᵀ + mask)·V between the Q/K/V projections' head reshapes and
// the output projection as one native attention step (LowerOptions::fuse_attention), keyed by the
// Reshape that ends the pattern. Tests: tests/unit/codegen_passes_test.cpp
#include <set>

#include "codegen/passes/pass.h"

namespace sabre::codegen::passes {
namespace {

bool perm_is(const Node* n, std::vector<int64_t> want) {
  return n && n->domain().empty() && n->op() == "Transpose" && n->attr_ints("perm", {}) == want;
}
bool linear_batched(const Node* n) {
  return n && n->domain() == "sabre" && n->op() == "Composite" && n->attr_string("kind", "") == "batched_gemm" &&
         n->attr_string("epilogue", "linear") == "linear" && n->num_outputs() == 1;
}
// x4 = Reshape(x3 [b, s, h·d] -> [b, s, h, d]) read only through `t`: x3, else nullptr.
Value* heads_source(const LowerContext& cx, const Node* t, int64_t* heads, int64_t* d) {
  Value* x4 = t->input(0);
  const Node* r = x4->producer();
  if (!r || r->op() != "Reshape" || !r->domain().empty() || cx.sole_user(x4) != t) return nullptr;
  Value* x3 = r->input(0);
  const auto& s3 = x3->shape();
  const auto& s4 = x4->shape();
  if (s3.size() != 3 || s4.size() != 4 || !(s3[0] == s4[0]) || !(s3[1] == s4[1]) || !s4[2].is_static() ||
      !s4[3].is_static() || !s3[2].is_static() || s3[2].value() != s4[2].value() * s4[3].value())
    return nullptr;
  *heads = s4[2].value();
  *d = s4[3].value();
  return x3;
}

// Q, K and V as the three outputs of one Split over the last axis, each read only by its heads
// Reshape (one of `heads`' inputs): the Split, with AttentionFusion::packed and the offsets set,
// so the kernel reads the projections in place; else nullptr and nothing set.
Node* packed_split(const LowerContext& cx, AttentionFusion& a, std::initializer_list<const Node*> heads) {
  Node* sp = a.q->producer();
  if (!sp || sp->op() != "Split" || !sp->domain().empty() || sp->num_outputs() != 3 || a.k->producer() != sp ||
      a.v->producer() != sp)
    return nullptr;
  Value* x = sp->input(0);
  const auto& xs = x->shape();
  if (xs.size() != 3 || norm_axis(sp->attr_int("axis", 0), 3) != 2 || !xs[2].is_static()) return nullptr;
  std::set<const Node*> readers;
  for (const Node* t : heads) readers.insert(t->input(0)->producer());
  // Column offsets in output order; each a multiple of 8 and the row too (16-byte rows and starts).
  int64_t off[3], col = 0;
  for (int i = 0; i < 3; ++i) {
    const Value* o = sp->output(static_cast<size_t>(i));
    if (!readers.count(cx.sole_user(o)) || !o->shape()[2].is_static() || col % 8) return nullptr;
    off[i] = col;
    col += o->shape()[2].value();
  }
  if (col != xs[2].value() || col % 8) return nullptr;
  a.packed = x;
  for (int i = 0; i < 3; ++i) {
    const Value* o = sp->output(static_cast<size_t>(i));
    a.offset[o == a.q ? 0 : o == a.k ? 1 : 2] = off[i];
  }
  return sp;
}

constexpr const char* kNotAttention = "-";

// "" where the softmax `s` became part of an attention step, kNotAttention where it does not
// begin to look like one (its scores are no Q·Kᵀ batched GEMM region), else why it was refused.
std::string attention_fusion(LowerContext& cx, Node* s) {
  auto it = cx.softmax.find(s);
  if (it == cx.softmax.end()) return kNotAttention;
  const SoftmaxFusion& f = it->second;
  Node* qk = f.x->producer();
  const bool batched = qk && qk->domain() == "sabre" && qk->op() == "Composite" &&
                       qk->attr_string("kind", "") == "batched_gemm";
  if (!batched) return kNotAttention;
  if (!linear_batched(qk)) return "Q·Kᵀ region " + qk->name() + " has epilogue " + qk->attr_string("epilogue", "linear");
  if (f.x->users().size() != 1) return "the scores are read outside the softmax";
  Node* pv = cx.sole_user(s->output(0));
  Node* cast = nullptr;  // GPT-2 casts the probabilities to the model's float type: a no-op here
  if (pv && pv->domain().empty() && pv->op() == "Cast" && ir::is_float(pv->output(0)->dtype())) {
    cast = pv;
    pv = cx.sole_user(cast->output(0));
  }
  if (!linear_batched(pv)) return "the probabilities are not read by one linear batched GEMM region (·V)";
  auto rq = roles_of(qk), rv = roles_of(pv);
  if (!rq.count("A") || !rq.count("B") || !rv.count("A") || !rv.count("B") ||
      rv["A"] != (cast ? cast->output(0) : s->output(0)))
    return "the GEMM regions' operand roles are not Q·Kᵀ and P·V";
  Node* tq = rq["A"]->producer();
  Node* tk = rq["B"]->producer();
  Node* tv = rv["B"]->producer();
  // K reaches the product as Kᵀ [b,h,d,s] ("tt") or, when the partitioner absorbed the last
  // transpose into the region, as K [b,h,s,d] ("tn").
  const bool kt = qk->attr_string("layout", "tt") == "tt";
  if (!perm_is(tq, {0, 2, 1, 3}) || !perm_is(tk, kt ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 2, 1, 3}) ||
      !perm_is(tv, {0, 2, 1, 3}) || pv->attr_string("layout", "tt") != "tt")
    return "Q, K or V do not reach the GEMMs through the head transposes [0,2,1,3] (K: [0,2,3,1])";
  if (cx.sole_user(tq->output(0)) != qk || cx.sole_user(tk->output(0)) != qk || cx.sole_user(tv->output(0)) != pv)
    return "a head transpose has another reader";
  AttentionFusion a;
  int64_t hk = 0, dk = 0, hv = 0, dv = 0;
  a.q = heads_source(cx, tq, &a.heads, &a.d);
  a.k = heads_source(cx, tk, &hk, &dk);
  a.v = heads_source(cx, tv, &hv, &dv);
  if (!a.q || !a.k || !a.v)
    return "Q, K or V is not a [b, s, h·d] projection reshaped to [b, s, h, d] and read only by its transpose";
  if (hk != a.heads || hv != a.heads || dk != a.d || dv != a.d)
    return "Q, K and V differ in heads or head dim (grouped-query attention is not fused yet)";
  Node* split = packed_split(cx, a, {tq, tk, tv});
  Node* to = cx.sole_user(pv->output(0));
  if (!perm_is(to, {0, 2, 1, 3})) return "the output is not transposed back [0,2,1,3] by its only reader";
  Node* out = cx.sole_user(to->output(0));
  if (!out || out->op() != "Reshape" || !out->domain().empty() || !(out->output(0)->shape() == a.q->shape()))
    return "the output is not reshaped back to Q's [b, s, h·d]";
  // What the native kernel takes (native::attention_unsupported): head dim 32 or 64, at most
  // 512 keys over the declared ranges, 16-byte rows.
  a.b = a.q->shape()[0];
  a.sq = a.q->shape()[1];
  a.sk = a.k->shape()[1];
  const int64_t sk_hi = cx.eval_hi(a.sk);
  if (a.d != 32 && a.d != 64) return "head dim " + std::to_string(a.d) + " (the kernel takes 32 or 64)";
  if (sk_hi < 1 || sk_hi > 512) return "up to " + std::to_string(sk_hi) + " keys (" + a.sk.str() + "; the kernel takes 1..512)";
  if ((a.heads * a.d) % 8) return "rows of " + std::to_string(a.heads * a.d) + " elements are not 16-byte aligned";
  if (f.mask && f.mask->shape().size() > 4) return "the mask has rank " + std::to_string(f.mask->shape().size());
  if (f.mask && !ir::is_float(f.mask->dtype())) return "the mask is " + std::string(ir::name(f.mask->dtype()));
  a.mask = f.mask;
  a.scale = f.scale;
  a.causal = f.causal;
  for (Node* n : {qk, s, pv, tq, tk, tv, to, tq->input(0)->producer(), tk->input(0)->producer(), tv->input(0)->producer()})
    cx.absorbed.insert(n);
  if (cast) cx.absorbed.insert(cast);
  if (split) cx.absorbed.insert(split);
  cx.attention[out] = a;
  return "";
}


}  // namespace

PassResult fuse_attention(LowerContext& cx) {
  PassResult r;
  if (!cx.o.fuse_attention) {
    r.skipped = "attention fusion is off (LowerOptions::fuse_attention; sabre compile --no-fuse-attention)";
    return r;
  }
  for (Node* n : cx.order) {
    if (!n->domain().empty() || n->op() != "Softmax") continue;
    const std::string why = attention_fusion(cx, n);
    if (why.empty()) ++r.fired;
    else if (why != kNotAttention) r.refused.push_back({n->name(), "attention not fused: " + why});
  }
  return r;
}

}  // namespace sabre::codegen::passes
