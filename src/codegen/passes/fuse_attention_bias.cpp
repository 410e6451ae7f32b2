// fuse_attention's additive terms (fuse_attention_bias.h): each term is first described as offsets
// over the kernel's scores [b, h, q, k], through the Reshapes between its Add and the Q·Kᵀ product
// (Swin's shift mask [1, nW, 1, Q, K] added to the scores viewed as [B, nW, h, Q, K] reads, over the
// scores' batch axis B·nW, element (b % nW)·Q·K: a batch axis whose index wraps). One term the kernel
// can read (keys contiguous, not scaled after the Add) is read in place; constant terms (a relative
// position bias [h, Q, K] plus a shift mask) are summed into one weight over a period of their
// batch dependence ([nW, h, Q, K] for Swin's shifted windows), read with the batch index wrapping.
#include "codegen/passes/fuse_attention_bias.h"

#include <numeric>

#include "codegen/passes/pass.h"

namespace sabre::codegen::passes {
namespace {

bool is_one(const Dim& d) { return d.is_static() && d.value() == 1; }

// Term element of the scores' (b, h, q, k): batch(b) + h·stride[1] + q·stride[2] + k·stride[3], with
// batch(b) = (b % inner)·stride[0] + (b / inner)·outer where inner > 0, else b·stride[0].
struct TermView {
  Dim stride[4] = {Dim(0), Dim(0), Dim(0), Dim(0)};
  int64_t inner = 0;
  Dim outer{0};
};

// The term broadcast right-aligned to its space, then its axes grouped with the scores' axes of the
// same product (the elements are the same, in the same order): an axis split over several keeps
// its stride on the last; several merged into one must be one stride, except two merged into the
// batch axis, which wrap (inner).
std::optional<TermView> term_view(const BiasTerm& term, const std::vector<Dim>& s, std::string* why) {
  const std::vector<Dim>& ts = term.t->shape();
  const std::vector<Dim>& sp = term.space;
  const std::string name = "the additive term " + term.t->name() + " " + ir::str(ts);
  if (ts.size() > sp.size()) {
    *why = name + " has more axes than the scores " + ir::str(sp) + " it is added to";
    return std::nullopt;
  }
  const std::vector<Dim> dense = contiguous_strides(ts);
  const size_t lead = sp.size() - ts.size();
  std::vector<Dim> st(sp.size(), Dim(0));
  for (size_t k = 0; k < ts.size(); ++k) {
    if (ts[k] == sp[lead + k]) {
      st[lead + k] = is_one(ts[k]) ? Dim(0) : dense[k];
    } else if (!is_one(ts[k])) {
      *why = name + " does not broadcast to the scores " + ir::str(sp);
      return std::nullopt;
    }
  }
  std::vector<size_t> ax, sx;
  for (size_t i = 0; i < sp.size(); ++i)
    if (!is_one(sp[i])) ax.push_back(i);
  for (size_t j = 0; j < s.size(); ++j)
    if (!is_one(s[j])) sx.push_back(j);
  const std::string fail = name + " added to the scores as " + ir::str(sp) + " is not a strided view of them as " +
                           ir::str(s) + " (batch, heads, queries, keys)";
  TermView v;
  size_t i = 0, j = 0;
  while (j < sx.size()) {
    if (i >= ax.size()) break;
    size_t i1 = i + 1, j1 = j + 1;
    Dim a = sp[ax[i]], b = s[sx[j]];
    while (a != b) {
      if (b.divide(a) && i1 < ax.size()) a = a * sp[ax[i1++]];
      else if (a.divide(b) && j1 < sx.size()) b = b * s[sx[j1++]];
      else break;
    }
    if (a != b) break;
    if (i1 - i == 1) {
      Dim x = st[ax[i]];
      for (size_t k = j1; k-- > j;) {
        v.stride[sx[k]] = x;
        x = x * s[sx[k]];
      }
    } else if (j1 - j == 1) {
      bool one_stride = true;
      for (size_t k = i; k + 1 < i1; ++k) one_stride = one_stride && st[ax[k]] == st[ax[k + 1]] * sp[ax[k + 1]];
      if (one_stride) {
        v.stride[sx[j]] = st[ax[i1 - 1]];
      } else if (i1 - i == 2 && sx[j] == 0 && sp[ax[i + 1]].is_static()) {
        v.inner = sp[ax[i + 1]].value();
        v.outer = st[ax[i]];
        v.stride[0] = st[ax[i + 1]];
      } else {
        *why = fail;
        return std::nullopt;
      }
    } else {
      *why = fail;
      return std::nullopt;
    }
    i = i1, j = j1;
  }
  if (i != ax.size() || j != sx.size()) {
    *why = fail;
    return std::nullopt;
  }
  return v;
}

int64_t static_or(const Dim& d, int64_t other) { return d.is_static() ? d.value() : other; }

}  // namespace

std::string attach_bias(const std::vector<BiasTerm>& terms, AttentionFusion& a) {
  const std::vector<Dim> s{a.b, Dim(a.heads), a.sq, a.sk};
  std::vector<TermView> views;
  for (const BiasTerm& t : terms) {
    if (!ir::is_float(t.t->dtype()))
      return "the additive term " + t.t->name() + " is " + std::string(ir::name(t.t->dtype())) + ", not float";
    std::string why;
    auto v = term_view(t, s, &why);
    if (!v) return why;
    views.push_back(*v);
  }
  if (terms.empty()) return "";
  const BiasTerm& t0 = terms[0];
  if (terms.size() == 1 && t0.coef == 1.0 && (views[0].stride[3] == Dim(1) || is_one(a.sk))) {
    a.mask = t0.t;
    a.mask_strided = true;
    for (int k = 0; k < 3; ++k) a.mask_stride[k] = views[0].stride[k];
    a.mask_batch_inner = views[0].inner;
    a.mask_batch_outer = views[0].outer;
    return "";
  }
  // Not readable as it is: fold, where every term is a constant.
  for (const BiasTerm& t : terms) {
    if (t.t->is_constant()) continue;
    if (terms.size() > 1)
      return std::to_string(terms.size()) + " additive terms and " + t.t->name() +
             " is not a constant (the step reads one term as it is, or a sum of constants)";
    return "the additive term " + t.t->name() + " is not a constant and is " +
           (t.coef != 1.0 ? "scaled after it is added" : "broadcast along the keys") + " (the step reads a term as it is)";
  }
  // One period of the terms' batch dependence: a wrapping batch axis repeats every `inner` images; a
  // plain batch stride needs them all.
  int64_t pb = 1;
  bool every_batch = false;
  for (const TermView& v : views) {
    if (v.inner && v.outer == Dim(0)) pb = std::lcm(pb, v.inner);
    else if (v.inner || v.stride[0] != Dim(0)) every_batch = true;
  }
  if (every_batch) {
    if (!a.b.is_static()) return "the additive terms vary with the batch (" + a.b.str() + "), which is not static";
    pb = a.b.value();
  }
  bool by_head = false, by_query = false;
  for (const TermView& v : views) by_head = by_head || v.stride[1] != Dim(0), by_query = by_query || v.stride[2] != Dim(0);
  if (!a.sk.is_static() || (by_query && !a.sq.is_static()))
    return "the additive terms are constants but the scores' queries or keys (" + a.sq.str() + ", " + a.sk.str() +
           ") are not static";
  const int64_t ph = by_head ? a.heads : 1, pq = by_query ? a.sq.value() : 1, pk = a.sk.value();
  constexpr int64_t kMaxFolded = int64_t{1} << 24;  // elements: the folded sum is a weight of the plan
  if (pb * ph * pq * pk > kMaxFolded)
    return "the constant additive terms sum to " + std::to_string(pb * ph * pq * pk) + " elements (at most " +
           std::to_string(kMaxFolded) + " are folded)";
  for (const TermView& v : views) {
    for (const Dim& d : v.stride)
      if (!d.is_static()) return "a constant additive term has a symbolic stride " + d.str();
    if (!v.outer.is_static()) return "a constant additive term has a symbolic stride " + v.outer.str();
  }
  ir::Tensor c(DType::f32, {pb, ph, pq, pk});
  int64_t e = 0;
  for (int64_t b = 0; b < pb; ++b)
    for (int64_t h = 0; h < ph; ++h)
      for (int64_t q = 0; q < pq; ++q)
        for (int64_t k = 0; k < pk; ++k, ++e) {
          double sum = 0;
          for (size_t i = 0; i < terms.size(); ++i) {
            const TermView& v = views[i];
            const int64_t bo = v.inner ? (b % v.inner) * v.stride[0].value() + (b / v.inner) * v.outer.value()
                                       : b * v.stride[0].value();
            const int64_t at = bo + h * v.stride[1].value() + q * v.stride[2].value() + k * v.stride[3].value();
            sum += terms[i].coef * terms[i].t->constant().get_f64(at);
          }
          c.set_f64(e, sum);
        }
  a.mask = nullptr;
  a.folded_mask = std::move(c);
  a.mask_strided = true;
  a.mask_stride[0] = pb > 1 ? Dim(ph * pq * pk) : Dim(0);
  a.mask_stride[1] = ph > 1 ? Dim(pq * pk) : Dim(0);
  a.mask_stride[2] = pq > 1 ? Dim(pk) : Dim(0);
  if (pb > 1 && static_or(a.b, -1) != pb) a.mask_batch_inner = pb, a.mask_batch_outer = Dim(0);
  return "";
}

}  // namespace sabre::codegen::passes
