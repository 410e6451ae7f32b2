// fuse_attention: softmax(s·Q·Kᵀ + mask)·V as one native attention step (LowerOptions::fuse_attention),
// matched by its math rather than one exporter's graph. From each softmax that fuse_softmax took
// (the scale, mask and causal Where it absorbed), the scores must be a Q·Kᵀ product and the
// probabilities (through any float Casts) the A of a ·V product; Q, K and V are then followed back
// through the ops of kViewRules (head-split Reshapes, Transposes, Splits, Slices, Gathers, KV-head
// Expands, scalings) to the tensors a step writes, and read from those in place through strides
// (from the furthest back the kernel can read; view ops left out of the step still run); the
// output is followed forward through its head merge the same way. Whatever the exporter put
// between, only the kernel's contract is checked (native::attention_unsupported): head dim a
// multiple of 4 up to 128, keys up to 2^20, the head dim contiguous, 16-byte strides and offsets
// (8-byte where the head dim is not 32 or 64: the padded kernels), K/V heads shared by groups of
// query heads. The scores may pass Reshapes, Adds of terms that broadcast to them and constant
// scalings on their way to the softmax (Swin's shifted windows): fuse_attention_bias.cpp makes the
// terms one mask the step reads. An attention-shaped softmax that does not fuse says why. Tests: tests/golden/lower/fuse_attention/, tests/unit/codegen_passes_test.cpp,
// tests/unit/codegen_plan_interp_test.cpp (FusedAttentionForms*)
#include <set>

#include "codegen/passes/fuse_attention_bias.h"
#include "codegen/passes/pass.h"

namespace sabre::codegen::passes {
namespace {

// A value read as a strided view of `base`, a tensor some step writes densely: element (i_0, i_1, ...)
// at offset + sum_a (i_a / group_a)·stride_a. group_a > 1 where a Reshape merged an axis with a
// broadcast one after it (K/V heads repeated for grouped-query attention). scale: constant factors
// the walk passed (Q and K only).
struct View {
  Value* base = nullptr;
  Dim offset{0};
  std::vector<Dim> size, stride;
  std::vector<int64_t> group;
  double scale = 1.0;
  std::vector<Node*> nodes;  // the ops between base and value
};

View dense(Value* v) {
  View w;
  w.base = v;
  w.size = v->shape();
  w.stride = contiguous_strides(w.size);
  w.group.assign(w.size.size(), 1);
  return w;
}

bool is_one(const Dim& d) { return d.is_static() && d.value() == 1; }

// ---- the view rules: how an op's output is a view of its input's -----------------------------

using Rule = std::optional<View> (*)(const LowerContext&, const Node*, const Value* out, View in);

// y = Transpose(x, perm): axis i of y is axis perm[i] of x.
std::optional<View> permute(const LowerContext&, const Node* n, const Value*, View in) {
  const size_t r = in.size.size();
  std::vector<int64_t> perm = n->attr_ints("perm", {});
  if (perm.empty())
    for (size_t i = r; i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  if (perm.size() != r) return std::nullopt;
  View v = in;
  for (size_t i = 0; i < r; ++i) {
    const auto a = static_cast<size_t>(norm_axis(perm[i], r));
    v.size[i] = in.size[a], v.stride[i] = in.stride[a], v.group[i] = in.group[a];
  }
  return v;
}

// The same elements under the dims `to` (Reshape, Flatten, Squeeze, Unsqueeze): axes of `in` (size-1
// ones dropped) are grouped with axes of `to` of the same product; a group of several input axes must
// be contiguous, except an axis followed by one broadcast axis (stride 0), which becomes one grouped
// axis. Nullopt where the elements are not a strided view.
std::optional<View> regroup(View in, const std::vector<Dim>& to) {
  std::vector<size_t> ax;
  for (size_t i = 0; i < in.size.size(); ++i)
    if (!is_one(in.size[i])) ax.push_back(i);
  View v = in;
  v.size = to;
  v.stride.assign(to.size(), Dim(0));
  v.group.assign(to.size(), 1);
  size_t i = 0, j = 0;
  while (j < to.size()) {
    if (is_one(to[j])) {
      ++j;
      continue;
    }
    if (i >= ax.size()) return std::nullopt;
    size_t i1 = i + 1, j1 = j + 1;
    Dim acc_in = in.size[ax[i]], acc_out = to[j];
    while (acc_in != acc_out) {
      auto grow = acc_out.divide(acc_in);
      if (grow && i1 < ax.size()) {
        acc_in = acc_in * in.size[ax[i1++]];
      } else if (acc_in.divide(acc_out) && j1 < to.size()) {
        acc_out = acc_out * to[j1++];
      } else {
        return std::nullopt;
      }
    }
    Dim st;
    int64_t grp = 1;
    if (i1 - i == 1) {
      st = in.stride[ax[i]], grp = in.group[ax[i]];
    } else if (i1 - i == 2 && in.stride[ax[i + 1]] == Dim(0) && in.size[ax[i + 1]].is_static() &&
               in.group[ax[i]] == 1 && in.group[ax[i + 1]] == 1) {
      st = in.stride[ax[i]], grp = in.size[ax[i + 1]].value();  // [heads, repeats] -> heads·repeats
    } else {
      for (size_t k = i; k + 1 < i1; ++k)
        if (in.group[ax[k]] != 1 || in.stride[ax[k]] != in.stride[ax[k + 1]] * in.size[ax[k + 1]]) return std::nullopt;
      st = in.stride[ax[i1 - 1]];
    }
    if (j1 - j > 1 && grp != 1) return std::nullopt;
    for (size_t k = j1; k-- > j;) {
      v.stride[k] = st, v.group[k] = grp;
      st = st * to[k];
    }
    i = i1, j = j1;
  }
  if (i != ax.size()) return std::nullopt;
  return v;
}

std::optional<View> reshape(const LowerContext&, const Node*, const Value* out, View in) {
  return regroup(std::move(in), out->shape());
}

// Expand(x, shape): size-1 axes (and new leading ones) broadcast, read with stride 0.
std::optional<View> expand(const LowerContext&, const Node*, const Value* out, View in) {
  const auto& to = out->shape();
  if (to.size() < in.size.size()) return std::nullopt;
  const size_t lead = to.size() - in.size.size();
  View v = in;
  v.size = to;
  v.stride.assign(to.size(), Dim(0));
  v.group.assign(to.size(), 1);
  for (size_t k = 0; k < in.size.size(); ++k) {
    if (in.size[k] == to[lead + k]) {
      v.stride[lead + k] = in.stride[k], v.group[lead + k] = in.group[k];
    } else if (!is_one(in.size[k])) {
      return std::nullopt;
    }
  }
  return v;
}

// Split: each output is a range of the axis, starting where the outputs before it end.
std::optional<View> split(const LowerContext&, const Node* n, const Value* out, View in) {
  const size_t r = in.size.size();
  const auto a = static_cast<size_t>(norm_axis(n->attr_int("axis", 0), r));
  if (in.group[a] != 1 || out->shape().size() != r) return std::nullopt;
  Dim start(0);
  for (size_t k = 0; k < n->num_outputs() && n->output(k) != out; ++k) start = start + n->output(k)->shape()[a];
  in.offset = in.offset + start * in.stride[a];
  in.size = out->shape();
  return in;
}

// Slice with constant starts (non-negative or on static axes) and unit steps.
std::optional<View> slice(const LowerContext&, const Node* n, const Value* out, View in) {
  const size_t r = in.size.size();
  auto ints = [&](size_t i) -> std::optional<std::vector<int64_t>> {
    if (n->num_inputs() <= i || !n->input(i)) return std::vector<int64_t>{};
    if (!n->input(i)->is_constant()) return std::nullopt;
    return n->input(i)->constant().to_i64_vector();
  };
  auto starts = ints(1), axes = ints(3), steps = ints(4);
  if (!starts || !axes || !steps || out->shape().size() != r) return std::nullopt;
  for (size_t k = 0; k < starts->size(); ++k) {
    const auto a = static_cast<size_t>(norm_axis(axes->empty() ? int64_t(k) : (*axes)[k], r));
    if ((!steps->empty() && (*steps)[k] != 1) || in.group[a] != 1) return std::nullopt;
    int64_t s = (*starts)[k];
    if (s < 0 && !in.size[a].is_static()) return std::nullopt;
    if (s < 0) s = std::max<int64_t>(0, s + in.size[a].value());
    if (in.size[a].is_static()) s = std::min(s, in.size[a].value());
    in.offset = in.offset + Dim(s) * in.stride[a];
  }
  in.size = out->shape();
  return in;
}

// Gather of one constant index (a scalar) along an axis: that index, the axis dropped.
std::optional<View> gather(const LowerContext&, const Node* n, const Value*, View in) {
  const Value* idx = n->input(1);
  if (!idx->is_constant() || !idx->shape().empty()) return std::nullopt;
  const size_t r = in.size.size();
  const auto a = static_cast<size_t>(norm_axis(n->attr_int("axis", 0), r));
  int64_t i = idx->constant().get_i64(0);
  if (i < 0 && !in.size[a].is_static()) return std::nullopt;
  if (i < 0) i += in.size[a].value();
  if (in.group[a] != 1) return std::nullopt;
  in.offset = in.offset + Dim(i) * in.stride[a];
  in.size.erase(in.size.begin() + static_cast<std::ptrdiff_t>(a));
  in.stride.erase(in.stride.begin() + static_cast<std::ptrdiff_t>(a));
  in.group.erase(in.group.begin() + static_cast<std::ptrdiff_t>(a));
  return in;
}

// A Cast between float types the plan stores alike (all floats are stored in the compute dtype).
std::optional<View> same(const LowerContext& cx, const Node* n, const Value* out, View in) {
  if (n->op() == "Cast" && cx.storage(n->input(0)->dtype()) != cx.storage(out->dtype())) return std::nullopt;
  return in;
}

// x·c or x/c for a constant scalar c: the scores scale by it (read by Q·Kᵀ only).
std::optional<View> scaled(const LowerContext&, const Node* n, const Value*, View in) {
  const Value* c = n->input(1);
  if (n->op() == "Mul" && !scalar_constant(c)) c = n->input(0);
  const double x = c->constant().get_f64(0);
  if (n->op() == "Div" && x == 0) return std::nullopt;
  in.scale *= n->op() == "Div" ? 1.0 / x : x;
  return in;
}

// Which operand of `n` carries the data (the other operands are constants or shapes), or -1.
int data_operand(const Node* n) {
  if (n->op() == "Mul") return scalar_constant(n->input(1)) ? 0 : scalar_constant(n->input(0)) ? 1 : -1;
  if (n->op() == "Div") return scalar_constant(n->input(1)) ? 0 : -1;
  if (n->op() == "Cast") return ir::is_float(n->input(0)->dtype()) && ir::is_float(n->output(0)->dtype()) ? 0 : -1;
  return 0;
}

struct ViewRule {
  const char* op;
  const char* algebra;  // what the output is, as a view of the input
  Rule apply;
  bool scales;  // changes values: only on the way to Q·Kᵀ
};

// What a Q, K or V operand may pass through on its way from the tensor a step writes.
const ViewRule kViewRules[] = {
    {"Transpose", "y[i_perm[0], ...] = x[i_0, ...]", permute, false},
    {"Reshape", "the same elements under other dims", reshape, false},
    {"Flatten", "the same elements under other dims", reshape, false},
    {"Squeeze", "the same elements under other dims", reshape, false},
    {"Unsqueeze", "the same elements under other dims", reshape, false},
    {"Identity", "y = x", same, false},
    {"Cast", "y = x, between float types stored alike", same, false},
    {"Expand", "size-1 axes broadcast (KV heads repeated)", expand, false},
    {"Split", "y = a range of x along the axis", split, false},
    {"Slice", "y = a range of x along each axis, unit steps", slice, false},
    {"Gather", "y = x at one constant index of the axis", gather, false},
    {"Mul", "y = c·x, c a constant scalar: into the scale", scaled, true},
    {"Div", "y = x / c, c a constant scalar: into the scale", scaled, true},
};

const ViewRule* rule_for(const Node* n) {
  if (!n || !n->domain().empty()) return nullptr;
  for (const ViewRule& r : kViewRules)
    if (n->op() == r.op) return data_operand(n) >= 0 ? &r : nullptr;
  return nullptr;
}

// `x` as views of the tensors steps write, one for each value along its chain of rule ops that
// could be the base, the one reading furthest back first and `x` itself last: from the base,
// forward through the ops; where one does not give a view, the base moves to that op's output.
std::vector<View> views_of(const LowerContext& cx, Value* x, bool scales) {
  std::vector<std::pair<Node*, Value*>> chain;  // (op, its output on the path), from x back
  Value* cur = x;
  while (Node* p = cur->producer()) {
    const ViewRule* r = rule_for(p);
    if (!r || (r->scales && !scales)) break;
    chain.push_back({p, cur});
    cur = p->input(static_cast<size_t>(data_operand(p)));
  }
  std::vector<View> out;
  for (size_t start = chain.size() + 1; start-- > 0;) {  // ops applied: chain[start - 1] .. chain[0]
    View v = dense(start == chain.size() ? cur : chain[start].second);
    for (size_t i = start; i-- > 0;) {
      auto [op, y] = chain[i];
      std::optional<View> next = rule_for(op)->apply(cx, op, y, v);
      if (next && next->size.size() == y->shape().size()) {
        v = std::move(*next);
        v.size = y->shape();
        v.nodes.push_back(op);
      } else {
        v = dense(y);
      }
    }
    out.push_back(std::move(v));
  }
  return out;
}

// ---- the attention pattern ---------------------------------------------------------------------

// A product X·Y the attention is made of: a linear batched GEMM region, or a MatMul no region took
// (broadcast batch dims). Its A and B operands and whether B is given transposed ("tn").
struct Product {
  Node* node = nullptr;
  Value *a = nullptr, *b = nullptr;
  bool b_transposed = false;
};

std::optional<Product> product_at(Node* n, std::string* why) {
  if (!n) return std::nullopt;
  if (n->domain().empty() && n->op() == "MatMul") return Product{n, n->input(0), n->input(1), false};
  if (n->domain() != "sabre" || n->op() != "Composite" || n->attr_string("kind", "") != "batched_gemm") return std::nullopt;
  if (n->attr_string("epilogue", "linear") != "linear" || n->num_outputs() != 1) {
    *why = "region " + n->name() + " has epilogue " + n->attr_string("epilogue", "linear");
    return std::nullopt;
  }
  auto roles = roles_of(n);
  if (!roles.count("A") || !roles.count("B")) {
    *why = "region " + n->name() + " has no A and B operands";
    return std::nullopt;
  }
  return Product{n, roles["A"], roles["B"], n->attr_string("layout", "tt") == "tn"};
}

// `v` broadcast to the batch dims of a product's output `out` (a MatMul's batch broadcasting), the
// last two axes kept; 3-D [b·h, s, d] operands get a head axis of one.
std::optional<View> as_heads(View v, const std::vector<Dim>& out) {
  if (v.size.size() < 2 || out.size() < 3 || out.size() > 4) return std::nullopt;
  std::vector<Dim> to(out.begin(), out.end() - 2);
  to.push_back(v.size[v.size.size() - 2]);
  to.push_back(v.size.back());
  if (v.size.size() > to.size()) return std::nullopt;
  const size_t lead = to.size() - v.size.size();
  View b = v;
  b.size = to;
  b.stride.assign(to.size(), Dim(0));
  b.group.assign(to.size(), 1);
  for (size_t k = 0; k < v.size.size(); ++k) {
    if (v.size[k] == to[lead + k]) b.stride[lead + k] = v.stride[k], b.group[lead + k] = v.group[k];
    else if (!is_one(v.size[k])) return std::nullopt;
  }
  if (b.size.size() == 3) {
    b.size.insert(b.size.begin() + 1, Dim(1));
    b.stride.insert(b.stride.begin() + 1, Dim(0));
    b.group.insert(b.group.begin() + 1, 1);
  }
  return b;
}

View swap_last(View v) {
  const size_t r = v.size.size();
  std::swap(v.size[r - 1], v.size[r - 2]);
  std::swap(v.stride[r - 1], v.stride[r - 2]);
  std::swap(v.group[r - 1], v.group[r - 2]);
  return v;
}

bool multiple_of(const Dim& d, int64_t n) { return d == Dim(0) || d.divide(Dim(n)).has_value(); }

// "" where Q, K or V (`what`) is read as the kernel reads it (head dim contiguous, 16-byte strides
// and offset, grouping only on K/V heads), else why not.
std::string operand_problem(const char* what, const View& v, bool grouped_heads, int64_t align) {
  const std::string w = what;
  if (v.stride[3] != Dim(1))
    return w + "'s head dim is not contiguous in " + v.base->name() + " (stride " + v.stride[3].str() + ")";
  for (int a = 0; a < 3; ++a)
    if (!multiple_of(v.stride[static_cast<size_t>(a)], align))
      return w + " is read from " + v.base->name() + " with stride " + v.stride[static_cast<size_t>(a)].str() +
             ", not a multiple of " + std::to_string(align) + " elements (" + std::to_string(2 * align) + " bytes)";
  if (!multiple_of(v.offset, align))
    return w + " starts at element " + v.offset.str() + " of " + v.base->name() + ", not " + std::to_string(2 * align) + "-byte aligned";
  for (size_t a = 0; a < 4; ++a)
    if (v.group[a] != 1 && !(a == 1 && grouped_heads))
      return w + " repeats axis " + std::to_string(a) + " of " + v.base->name() + " (only K/V heads may be shared)";
  return "";
}

constexpr const char* kNotAttention = "-";
// The kernel's limits (native::kMaxAttentionKeys, native::kMaxAttentionHeadDim; codegen does not
// include the CUDA headers native.h needs).
constexpr int64_t kMaxKeys = int64_t{1} << 20, kMaxHeadDim = 128;

bool is_reshape(const std::string& op) {
  return op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze";
}

// The scores between the Q·Kᵀ product and the softmax: the product, the scale on it, the additive
// terms on the way (fuse_softmax's mask, and Adds the walk passed) and the ops walked.
struct ScoresPath {
  std::optional<Product> qk;
  Value* scores = nullptr;  // the product's output
  double scale = 1.0;
  std::vector<BiasTerm> terms;
  std::vector<Node*> nodes;
  Node* stopped = nullptr;  // where the walk found neither a product nor an op it passes
};

// From the softmax's input (after what fuse_softmax absorbed) back to a product, through Reshapes
// (the scores' elements keep their order), Adds of a term that broadcasts to them, and constant
// scalings, each read only on this path (Shape/Size readers aside). "" when it reached a product.
std::string scores_path(const LowerContext& cx, Node* s, const SoftmaxFusion& f, ScoresPath& sp) {
  sp.scale = f.scale;
  double coef = f.scale;  // what a term added before this point is multiplied by on its way
  if (f.mask) sp.terms.push_back({f.mask, f.x->shape(), 1.0});
  Value* v = f.x;
  const Node* reader = f.absorbed.empty() ? s : f.absorbed.back();
  auto only_reader = [&](const Value* x, const Node* r) {
    if (cx.g.is_graph_output(x)) return false;
    for (const Node* u : x->users())
      if (u != r && !(u->domain().empty() && (u->op() == "Shape" || u->op() == "Size"))) return false;
    return true;
  };
  for (;;) {
    Node* p = v->producer();
    std::string why;
    if (auto pr = product_at(p, &why)) {
      sp.qk = pr;
      sp.scores = v;
      return "";
    }
    if (!why.empty()) return "Q·Kᵀ " + why;
    if (!p || !p->domain().empty()) return kNotAttention;
    Value* next = nullptr;
    if (is_reshape(p->op())) {
      next = p->input(0);
    } else if (p->op() == "Add") {
      // The operand carrying the scores has their full shape; the other broadcasts to it. Where both
      // do, the scores are the one that comes from a product.
      auto broadcasts = [&](const Value* m) {
        const auto& ms = m->shape();
        if (ms.size() > v->shape().size()) return false;
        for (size_t k = 0; k < ms.size(); ++k)
          if (!(ms[k] == v->shape()[v->shape().size() - ms.size() + k]) && !(ms[k] == Dim(1))) return false;
        return true;
      };
      auto from_product = [&](Value* x) {
        for (int depth = 0; depth < 8 && x->producer(); ++depth) {
          Node* q = x->producer();
          std::string w;
          if (product_at(q, &w)) return true;
          if (!q->domain().empty() || !(is_reshape(q->op()) || q->op() == "Add" || q->op() == "Mul" || q->op() == "Div"))
            return false;
          x = q->input(0);
        }
        return false;
      };
      int side = -1;
      for (int i = 0; i < 2 && side < 0; ++i)
        if (p->input(i)->shape() == v->shape() && broadcasts(p->input(1 - i)) &&
            (!(p->input(1 - i)->shape() == v->shape()) || from_product(p->input(i))))
          side = i;
      if (side < 0) {
        sp.stopped = p;
        return kNotAttention;
      }
      sp.terms.push_back({p->input(1 - side), v->shape(), coef});
      next = p->input(side);
    } else if ((p->op() == "Mul" || p->op() == "Div") && data_operand(p) >= 0 &&
               p->input(static_cast<size_t>(data_operand(p)))->shape() == v->shape()) {
      const Value* c = p->input(static_cast<size_t>(1 - data_operand(p)));
      const double x = c->constant().get_f64(0);
      if (p->op() == "Div" && x == 0) return "the scores are divided by zero at " + where(p);
      coef *= p->op() == "Div" ? 1.0 / x : x;
      sp.scale *= p->op() == "Div" ? 1.0 / x : x;
      next = p->input(static_cast<size_t>(data_operand(p)));
    } else {
      sp.stopped = p;
      return kNotAttention;
    }
    if (!only_reader(v, reader))
      return "the scores' " + where(p) + " output is read outside the attention";
    sp.nodes.push_back(p);
    reader = p;
    v = next;
  }
}

// "" where the softmax `s` became part of an attention step, kNotAttention where it does not
// begin to look like one (its scores are no Q·Kᵀ product), else why it was refused.
std::string attention_fusion(LowerContext& cx, Node* s) {
  auto it = cx.softmax.find(s);
  if (it == cx.softmax.end()) return kNotAttention;
  const SoftmaxFusion& f = it->second;
  std::string why;
  ScoresPath sp;
  const std::string walk = scores_path(cx, s, f, sp);
  // The probabilities, through Casts between float types (ViT, CLIP and Llama exports cast twice).
  std::vector<Node*> casts;
  Value* p = s->output(0);
  Node* pv_node = cx.sole_user(p);
  while (pv_node && pv_node->domain().empty() && pv_node->op() == "Cast" && ir::is_float(pv_node->output(0)->dtype())) {
    casts.push_back(pv_node);
    p = pv_node->output(0);
    pv_node = cx.sole_user(p);
  }
  auto pv = product_at(pv_node, &why);
  if (walk == kNotAttention && pv && pv->a == p && sp.stopped)  // attention-shaped but for the scores' path
    return "the scores reach the softmax through " + where(sp.stopped) +
           ", not through Reshapes, Adds of a broadcast term or constant scalings of a Q·Kᵀ product";
  if (!walk.empty()) return walk;
  const std::optional<Product>& qk = sp.qk;
  if (sp.scores->users().size() != 1) return "the scores are read outside the softmax";
  if (!pv || pv->a != p) {
    if (!why.empty()) return "·V " + why;
    return "the probabilities are not the A of one product with V (" +
           (pv_node ? "read by " + where(pv_node) : std::string(p->users().empty() ? "unread" : "read more than once")) + ")";
  }
  if (pv->b_transposed) return "V reaches the ·V product transposed";
  const std::vector<Dim>& sc = sp.scores->shape();
  const std::vector<Dim>& os = pv->node->output(0)->shape();
  // Candidate views of each operand, reading furthest back first (K as [b, h, keys, d]).
  auto candidates = [&](Value* x, bool scales, const std::vector<Dim>& batch, bool swap) {
    std::vector<View> c;
    for (View& w : views_of(cx, x, scales))
      if (auto hw = as_heads(std::move(w), batch)) c.push_back(swap ? swap_last(std::move(*hw)) : std::move(*hw));
    return c;
  };
  const std::vector<View> qs = candidates(qk->a, true, sc, false), ks = candidates(qk->b, true, sc, !qk->b_transposed),
                          vs = candidates(pv->b, false, os, false);
  if (qs.empty() || ks.empty() || vs.empty()) return "Q, K or V does not broadcast to the products' batch dims";
  const View &q0 = qs.back(), &k0 = ks.back(), &v0 = vs.back();  // the operands as the graph has them
  const Dim b = q0.size[0], h = q0.size[1];
  if (!(k0.size[0] == b) || !(v0.size[0] == b) || !(k0.size[1] == h) || !(v0.size[1] == h))
    return "Q, K and V differ in batch or heads";
  if (!(k0.size[2] == v0.size[2])) return "K and V differ in keys (" + k0.size[2].str() + " vs " + v0.size[2].str() + ")";
  if (!(q0.size[3] == k0.size[3]) || !(v0.size[3] == q0.size[3]) || !q0.size[3].is_static())
    return "Q, K and V differ in head dim";
  // What the native kernel takes (native::attention_unsupported).
  const int64_t d = q0.size[3].value(), sk_hi = cx.eval_hi(k0.size[2]);
  if (d % 4 || d < 4 || d > kMaxHeadDim)
    return "head dim " + std::to_string(d) + " (the kernel takes multiples of 4 up to " +
           std::to_string(kMaxHeadDim) + ")";
  if (sk_hi < 1 || sk_hi > kMaxKeys)
    return "up to " + std::to_string(sk_hi) + " keys (" + k0.size[2].str() + "; the kernel takes 1.." +
           std::to_string(kMaxKeys) + ")";
  // Head dims 32 and 64 keep the unpadded kernels' 16-byte alignment (a view they cannot read is left
  // out, to run as a step); the padded kernels read 8-byte aligned rows.
  const int64_t align = d == 32 || d == 64 ? 8 : 4;
  if (!h.is_static()) return "the number of heads (" + h.str() + ") is not static";
  // The view reading furthest back that the kernel can read (what is left out of it still runs);
  // K and V with their heads shared alike. Else the reason of the one reading furthest back.
  const View* q = nullptr;
  for (const View& w : qs)
    if (!q && operand_problem("Q", w, false, align).empty()) q = &w;
  if (!q) return operand_problem("Q", qs.front(), false, align);
  const View *kp = nullptr, *vp = nullptr;
  for (const View& kw : ks)
    for (const View& vw : vs)
      if (!kp && kw.group[1] == vw.group[1] && operand_problem("K", kw, true, align).empty() &&
          operand_problem("V", vw, true, align).empty())
        kp = &kw, vp = &vw;
  if (!kp) {
    for (auto [what, w] : {std::pair{"K", &ks.front()}, {"V", &vs.front()}})
      if (std::string pr = operand_problem(what, *w, true, align); !pr.empty()) return pr;
    return "K and V share their heads in different groups";
  }
  const View &k = *kp, *v = vp;

  // The output: forward through its head merge (a Transpose and Reshape) as far as it stays a view.
  std::vector<Node*> out_chain;
  for (Value* o = pv->node->output(0); Node* u = cx.sole_user(o);) {
    if (!u->domain().empty() || (u->op() != "Transpose" && !is_view(u->op()))) break;
    out_chain.push_back(u);
    o = u->output(0);
  }
  std::optional<View> ov;
  size_t len = out_chain.size() + 1;
  while (!ov && len-- > 0) {
    // O's [b, h, sq, d] as a view of the last value of the chain's first len ops, stored densely.
    Value* last = len ? out_chain[len - 1]->output(0) : pv->node->output(0);
    std::optional<View> w = dense(last);
    for (size_t i = len; w && i-- > 0;) {
      const Node* n = out_chain[i];
      const Value* in = n->input(0);
      if (n->op() == "Transpose") {
        std::vector<int64_t> perm = n->attr_ints("perm", {}), inv(in->shape().size());
        if (perm.empty())
          for (size_t a = inv.size(); a-- > 0;) perm.push_back(static_cast<int64_t>(a));
        if (perm.size() != inv.size()) w.reset();
        else {
          for (size_t a = 0; a < perm.size(); ++a) inv[static_cast<size_t>(norm_axis(perm[a], perm.size()))] = int64_t(a);
          View t = *w;
          for (size_t a = 0; a < perm.size(); ++a)
            t.size[a] = w->size[inv[a]], t.stride[a] = w->stride[inv[a]], t.group[a] = w->group[inv[a]];
          w = t;
        }
      } else {
        w = regroup(*w, in->shape());
      }
    }
    if (w) w = as_heads(*w, os);
    if (w && (w->stride[3] != Dim(1) || w->group != std::vector<int64_t>(4, 1) || w->offset != Dim(0))) w.reset();
    if (w) ov = w;
  }
  if (!ov) return "the output is not written densely with its head dim contiguous";
  Node* key = len ? out_chain[len - 1] : pv->node;

  AttentionFusion a;
  a.b = b;
  a.heads = h.value();
  a.d = d;
  a.sq = q->size[2];
  a.sk = k.size[2];
  if (sp.nodes.empty()) {  // the mask fuse_softmax took, broadcast right-aligned (emit_attention)
    if (f.mask && f.mask->shape().size() > 4) return "the mask has rank " + std::to_string(f.mask->shape().size());
    if (f.mask && !ir::is_float(f.mask->dtype())) return "the mask is " + std::string(ir::name(f.mask->dtype()));
    if (f.mask && sc.size() != 4) return "a mask on " + std::to_string(sc.size()) + "-D scores";
    a.mask = f.mask;
  } else if (std::string bias = attach_bias(sp.terms, a); !bias.empty()) {
    return bias;
  }
  a.kv_group = k.group[1];
  if (a.heads % a.kv_group) return std::to_string(a.heads) + " heads do not share K/V heads in groups of " + std::to_string(a.kv_group);
  a.q = q->base, a.k = k.base, a.v = v->base;
  if (a.q == a.k && a.q == a.v) a.packed = a.q;
  const View* ops[3] = {q, &k, v};
  Dim* strides[3] = {a.q_stride, a.k_stride, a.v_stride};
  for (int i = 0; i < 3; ++i) {
    a.offset[i] = ops[i]->offset;
    for (size_t x = 0; x < 3; ++x) strides[i][x] = ops[i]->stride[x];
  }
  for (size_t x = 0; x < 3; ++x) a.o_stride[x] = ov->stride[x];
  a.scale = sp.scale * q->scale * k.scale;
  a.causal = f.causal;

  // Absorbed: the products, the softmax, the casts, the output chain before the key, and each view
  // op whose outputs only nodes absorbed here read (the others still run for their other readers),
  // never one that writes a tensor the step reads.
  std::set<Node*> core{qk->node, s, pv->node};
  core.insert(sp.nodes.begin(), sp.nodes.end());
  core.insert(casts.begin(), casts.end());
  for (size_t i = 0; i + 1 < len; ++i) core.insert(out_chain[i]);
  if (key != pv->node) core.insert(pv->node);
  std::set<Node*> views;
  for (const View* w : ops)
    for (Node* n : w->nodes) views.insert(n);
  for (bool changed = true; changed;) {
    changed = false;
    for (auto vi = views.begin(); vi != views.end();) {
      bool read_outside = false;
      for (const Value* o : (*vi)->outputs()) {
        read_outside = read_outside || o == a.q || o == a.k || o == a.v;
        read_outside = read_outside || cx.g.is_graph_output(o);
        for (Node* u : o->users())
          if (!(u->domain().empty() && (u->op() == "Shape" || u->op() == "Size")) && !core.count(u) && !views.count(u))
            read_outside = true;
      }
      if (read_outside) {
        vi = views.erase(vi);
        changed = true;
      } else {
        ++vi;
      }
    }
  }
  core.erase(key);
  for (Node* n : core) cx.absorbed.insert(n);
  for (Node* n : views) cx.absorbed.insert(n);
  cx.attention[key] = a;
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
