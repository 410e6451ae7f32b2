// Lowering a partitioned graph to the runtime plan. See lower.h; step params follow docs/RUNTIME.md.
#include "codegen/lower.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>

#include "backends/cutlass/conv_spec.h"
#include "backends/cutlass/patterns.h"
#include "backends/native/elementwise.h"
#include "backends/native/stem_conv.h"

namespace sabre::codegen {
namespace {

using ir::Dim;
using ir::DType;
using ir::Node;
using ir::Value;
using JArray = json::Array;
using JObject = json::Object;

json::Value jnum(double v) { return json::Value(v); }
json::Value jstr(const std::string& s) { return json::Value(s); }
json::Value jdim(const Dim& d) { return json::Value(d.str()); }

constexpr int64_t kMaxFillValues = 16;  // values one "fill" step writes (native::kMaxFillValues)
constexpr size_t kMaxEmbedTerms = 4, kMaxEmbedRank = 4;  // an embed_layernorm step's (native::kMaxEmbed*)
json::Value jints(const std::vector<int64_t>& v) {
  JArray a;
  for (int64_t x : v) a.push_back(jnum(static_cast<double>(x)));
  return json::Value(std::move(a));
}
json::Value jdims(const std::vector<Dim>& v) {
  JArray a;
  for (const Dim& d : v) a.push_back(jdim(d));
  return json::Value(std::move(a));
}

Dim product(const std::vector<Dim>& dims, size_t begin, size_t end) {
  Dim p(1);
  for (size_t i = begin; i < end; ++i) p = p * dims[i];
  return p;
}

// Element strides of a dense row-major tensor of `dims`.
std::vector<Dim> contiguous_strides(const std::vector<Dim>& dims) {
  std::vector<Dim> st(dims.size(), Dim(1));
  for (size_t i = dims.size(); i-- > 1;) st[i - 1] = st[i] * dims[i];
  return st;
}

// Elementwise ops the fused chain kernels take (binary ops broadcast).
const std::map<std::string, native::EwOp>& ew_ops() {
  using native::EwOp;
  static const std::map<std::string, EwOp> m = {
      {"Add", EwOp::add},           {"Sub", EwOp::sub},
      {"Mul", EwOp::mul},           {"Div", EwOp::div},
      {"Pow", EwOp::pow},           {"Sqrt", EwOp::sqrt},
      {"Erf", EwOp::erf},           {"Tanh", EwOp::tanh},
      {"Relu", EwOp::relu},         {"Sigmoid", EwOp::sigmoid},
      {"Exp", EwOp::exp},           {"Log", EwOp::log},
      {"Neg", EwOp::neg},           {"Abs", EwOp::abs},
      {"Reciprocal", EwOp::reciprocal}, {"Gelu", EwOp::gelu_erf},
      {"Where", EwOp::where},       {"Cast", EwOp::cast},
      {"Equal", EwOp::equal},       {"Less", EwOp::less},
      {"Greater", EwOp::greater},   {"LessOrEqual", EwOp::less_equal},
      {"GreaterOrEqual", EwOp::greater_equal}, {"And", EwOp::logical_and},
      {"Or", EwOp::logical_or},     {"Not", EwOp::logical_not},
      {"LeakyRelu", EwOp::leaky_relu}, {"HardSigmoid", EwOp::hard_sigmoid},
      {"HardSwish", EwOp::hardswish}, {"Clip", EwOp::clip},
      {"Min", EwOp::min},           {"Max", EwOp::max},
      {"Sin", EwOp::sin},           {"Cos", EwOp::cos},
      {"Tan", EwOp::tan},           {"Asin", EwOp::asin},
      {"Acos", EwOp::acos},         {"Atan", EwOp::atan},
      {"Sinh", EwOp::sinh},         {"Cosh", EwOp::cosh},
      {"Asinh", EwOp::asinh},       {"Acosh", EwOp::acosh},
      {"Atanh", EwOp::atanh},       {"Ceil", EwOp::ceil},
      {"Floor", EwOp::floor},       {"Round", EwOp::round},
      {"Softplus", EwOp::softplus}, {"Softsign", EwOp::softsign},
      {"Mish", EwOp::mish},         {"Elu", EwOp::elu},
      {"Selu", EwOp::selu},         {"Celu", EwOp::celu},
      {"ThresholdedRelu", EwOp::thresholded_relu}, {"Shrink", EwOp::shrink},
      {"Sign", EwOp::sign},         {"IsNaN", EwOp::isnan},
      {"IsInf", EwOp::isinf},       {"Mod", EwOp::mod},
      {"BitShift", EwOp::shl},      {"PRelu", EwOp::prelu},
      {"Sum", EwOp::add},
  };
  return m;
}

bool is_ew(const Node* n) {
  if (n->domain() != "" || !ew_ops().count(n->op())) return false;
  if ((n->op() == "Min" || n->op() == "Max" || n->op() == "Sum") && n->num_inputs() != 2) return false;
  return true;
}

bool is_view(const std::string& op) {
  return op == "Reshape" || op == "Squeeze" || op == "Unsqueeze" || op == "Flatten" || op == "Identity";
}

bool scalar_constant(const Value* v) { return v && v->is_constant() && v->constant().numel() == 1; }

// A Clip's [min, max] (inputs 1 and 2; an absent one is -inf / +inf), or nullopt where a bound is
// not a constant scalar. (The importer reads Clip from opset 11 on, where the bounds are inputs.)
std::optional<std::pair<double, double>> clip_bounds(const ir::Node* clip) {
  double lo = -INFINITY, hi = INFINITY;
  for (auto [i, out] : {std::pair<size_t, double*>{1, &lo}, {2, &hi}}) {
    const Value* b = clip->input(i);
    if (!b) continue;
    if (!scalar_constant(b)) return std::nullopt;
    *out = b->constant().get_f64(0);
  }
  return std::pair{lo, hi};
}

// The only users of `v` are `n` (once per slot it reads), and v is not a model output.
bool only_user(const ir::Graph& g, const Value* v, const Node* n) {
  if (g.is_graph_output(v) || v->users().empty()) return false;
  for (const Node* u : v->users())
    if (u != n) return false;
  return true;
}

int64_t norm_axis(int64_t axis, size_t rank) { return axis < 0 ? axis + static_cast<int64_t>(rank) : axis; }

// Thrown where a step would read a value whose producer was refused (tensor id -1).
struct AfterRefusal {};

struct SoftmaxFusion {
  Value* x = nullptr;
  Value* mask = nullptr;
  double scale = 1.0;
  bool causal = false;
  std::vector<Node*> absorbed;
};

// Softmax(scale·Q·Kᵀ + mask)·V between the Q/K/V projections and the output projection: one
// native attention step reading the [b, s, h·d] projections through strides (LowerOptions::
// fuse_attention). Keyed by the Reshape that ends the pattern.
struct AttentionFusion {
  Value *q = nullptr, *k = nullptr, *v = nullptr, *mask = nullptr;
  // When Q, K and V are the outputs of one last-axis Split (GPT-2's c_attn, or the Q/K/V GEMMs
  // merge_qkv joined): the Split's input, read in place, and each one's column offset.
  Value* packed = nullptr;
  int64_t offset[3] = {0, 0, 0};
  double scale = 1.0;
  bool causal = false;
  // mask is an i64 tensor m read as Where(Cast<bool>(m), mask_true, mask_false) (select_masks).
  bool select = false;
  double mask_true = 0, mask_false = 0;
  Dim b, sq, sk;
  int64_t heads = 0, d = 0;
};

// A grouped Conv the native grouped kernel runs ("" when it can): 2-D, constant weights and bias,
// a static channel count that the group count divides, explicit symmetric pads. Depthwise (one
// filter per channel, group = channels) is the common case and has its own fast kernel.
std::string depthwise_problem(const ir::Node* n) {
  const int64_t group = n->attr_int("group", 1);
  if (group == 1) return "not grouped";
  const ir::Value* x = n->input(0);
  const ir::Value* w = n->input(1);
  const ir::Value* b = n->num_inputs() > 2 ? n->input(2) : nullptr;
  if (x->shape().size() != 4 || !w || !w->is_constant() || w->constant().rank() != 4)
    return "grouped conv: only 2-D convs with constant filters run on the native grouped kernel";
  const auto& wd = w->constant().dims();
  if (!x->shape()[1].is_static()) return "grouped conv: the input channel count must be static";
  if (group < 1 || x->shape()[1].value() % group != 0 || wd[0] % group != 0 || wd[1] * group != x->shape()[1].value())
    return "group=" + std::to_string(group) + ": the channels (" + x->shape()[1].str() + " in, " +
           std::to_string(wd[0]) + " out, " + std::to_string(wd[1]) + " a filter) do not split into the groups";
  if (b && !b->is_constant()) return "grouped conv: the bias must be a constant";
  if (n->attr_string("auto_pad", "NOTSET") != "NOTSET") return "grouped conv: auto_pad (export with explicit pads)";
  auto pads = n->attr_ints("pads", {0, 0, 0, 0});
  if (pads.size() != 4 || pads[0] != pads[2] || pads[1] != pads[3]) return "grouped conv: asymmetric pads";
  return "";
}

// Whether a grouped Conv depthwise_problem accepts is depthwise proper: one input channel and one
// filter per group (group = C = K).
bool is_depthwise(const ir::Node* n) {
  const auto& wd = n->input(1)->constant().dims();
  return wd[1] == 1 && wd[0] == n->attr_int("group", 1);
}


// One Gather of an embedding_fusion: its table and the ids tensor the step reads in place,
// element offset + sum over row dims i of coordinate_i * strides[i].
struct EmbeddingTerm {
  Value* table;
  Value* ids;
  Dim offset;
  std::vector<Dim> strides;
};
// A coordinate of an ids tensor as a function of the row: base + scale * coordinate `row` of the
// LayerNorm's rows (row -1: base alone).
struct IdsCoord {
  int64_t base = 0, scale = 1;
  int row = -1;
};

class Lowerer {
 public:
  Lowerer(const ir::Graph& g, const LowerOptions& o) : g_(g), o_(o) {}

  Lowered run() {
    if (o_.dtype != DType::f16 && o_.dtype != DType::bf16)
      throw std::invalid_argument("compute dtype must be f16 or bf16");
    if (!o_.pick) throw std::logic_error("lower: LowerOptions::pick is required (invariant: a kernel picker is set)");
    order_ = g_.topo_order();
    symbols();
    fusions();
    mark_needed();
    group_elementwise();
    assign_layouts();
    if (!unsupported_.empty()) fail();
    for (const Value* v : g_.inputs()) bind_input(v);
    for (Node* n : order_) {
      if (!needed_.count(n) || absorbed_.count(n)) continue;
      const size_t before = unsupported_.size();
      try {
        emit(n);
      } catch (const UnsupportedError& e) {
        unsupported_.push_back(e.what());
      } catch (const AfterRefusal&) {
        // reads a value whose producer was refused: that refusal is the error
      }
      // Keep going after a refusal so that one error lists every unsupported node.
      if (unsupported_.size() != before)
        for (const Value* v : n->outputs())
          if (!tid_.count(v)) tid_[v] = -1;
    }
    if (!unsupported_.empty()) fail();
    for (const Value* v : g_.outputs()) bind_output(v);
    out_.plan.symbols = symbols_;
    out_.layout_permutes = permutes_;
    out_.im2col_convs = im2col_;
    out_.stem_convs = stem_conv_;
    out_.pointwise_convs = pointwise_;
    if (!nhwc_.empty())
      out_.notes.push_back("NHWC inside conv regions: " + std::to_string(nhwc_.size()) + " values stored NHWC, " +
                           std::to_string(permutes_) + " NCHW<->NHWC conversion" + (permutes_ == 1 ? "" : "s") +
                           " at the region edges" +
                           (im2col_ ? ", " + std::to_string(im2col_) + " conv" + (im2col_ == 1 ? "" : "s") +
                                          " reading NCHW through im2col" : "") +
                           (stem_conv_ ? ", " + std::to_string(stem_conv_) + " conv" + (stem_conv_ == 1 ? "" : "s") +
                                             " reading NCHW in one stem_conv kernel" : "") +
                           (pointwise_ ? ", " + std::to_string(pointwise_) + " 1x1 conv" + (pointwise_ == 1 ? "" : "s") +
                                             " run as GEMMs (--no-pointwise-gemm: conv kernels)" : ""));
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail() {
    std::string msg = "unsupported for GPU (" + std::to_string(unsupported_.size()) + " node" +
                      (unsupported_.size() == 1 ? "" : "s") + "):";
    for (const auto& u : unsupported_) msg += "\n  " + u;
    throw UnsupportedError(msg);
  }
  static std::string where(const Node* n) { return n->name() + " (" + n->op() + ")"; }
  void unsupported(const Node* n, const std::string& why) {
    unsupported_.push_back(where(n) + (why.empty() ? "" : ": " + why));
  }

  // ---- symbols ----------------------------------------------------------------------------
  void symbols() {
    std::vector<std::string> names = g_.symbols();
    for (const auto& [name, r] : o_.ranges)
      if (std::find(names.begin(), names.end(), name) == names.end())
        throw std::invalid_argument("--dynamic names '" + name + "' but the model's inputs have no such dim (they have: " +
                                    join(names) + ")");
    std::vector<std::string> defaulted;
    for (const auto& s : names) {
      runtime::SymbolRange r{s, 1, 1};
      auto it = o_.ranges.find(s);
      auto [lo, hi] = it != o_.ranges.end() ? it->second : default_range(s);
      if (it == o_.ranges.end()) defaulted.push_back(s + "=" + std::to_string(lo) + ".." + std::to_string(hi));
      r.min = lo;
      r.max = hi;
      symbols_.push_back(r);
      lo_[s] = lo;
      hi_[s] = hi;
    }
    if (!defaulted.empty())
      out_.notes.push_back("default dim ranges (set them with --dynamic): " + join(defaulted));
  }
  static std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
    return s;
  }
  int64_t eval_lo(const Dim& d) const { return d.evaluate(lo_).value_or(-1); }
  int64_t eval_hi(const Dim& d) const { return d.evaluate(hi_).value_or(-1); }

  // ---- fusions decided before anything is emitted --------------------------------------------
  void fusions() {
    for (Node* n : order_) {
      if (n->domain() == "sabre" && n->op() == "Composite") row_gather_gemm(n);
      if (n->domain() != "") continue;
      if (n->op() == "Softmax") softmax_fusion(n);
      if (n->op() == "LayerNormalization" && !embedding_fusion(n)) layernorm_fusion(n);
      if (n->op() == "Gather") range_gather(n);
      if (n->op() == "Conv" && o_.pick_conv && depthwise_problem(n).empty()) depthwise_activation_fusion(n);
    }
    if (o_.fuse_attention) {
      for (Node* n : order_)
        if (n->domain().empty() && n->op() == "Softmax") attention_fusion(n);
      select_masks();
    }
  }

  // An additive mask Where(Cast<bool>(m), t, f) of an i64 tensor m (scalar t and f: the padding
  // mask HF exports build from attention_mask) that only fused attention steps read: they read m
  // itself and select t or f per element, and the Where and its casts are not emitted (at batch 1
  // BERT-base's mask was a kernel of its own, ahead of the first layer).
  void select_masks() {
    std::map<Value*, std::vector<AttentionFusion*>> readers;
    for (auto& [out, a] : attention_)
      if (a.mask) readers[a.mask].push_back(&a);
    for (auto& [w, fused] : readers) {
      Node* where = w->producer();
      if (!where || !where->domain().empty() || where->op() != "Where" || g_.is_graph_output(w) ||
          w->users().size() != fused.size() || !scalar_constant(where->input(1)) || !scalar_constant(where->input(2)))
        continue;
      // Every reader is a fused softmax's mask Add (absorbed), one per attention step that reads w.
      bool all_fused = true;
      for (const Node* u : w->users()) all_fused = all_fused && absorbed_.count(u) && u->op() == "Add";
      if (!all_fused) continue;
      std::vector<Node*> casts;
      Value* m = where->input(0);
      while (Node* c = m->producer()) {
        if (!c->domain().empty() || c->op() != "Cast" || c->output(0)->dtype() != ir::DType::boolean) break;
        casts.push_back(c);
        m = c->input(0);
      }
      const double t = where->input(1)->constant().get_f64(0), f = where->input(2)->constant().get_f64(0);
      if (casts.empty() || m->dtype() != ir::DType::i64 || !(m->shape() == w->shape()) || !std::isfinite(t) ||
          !std::isfinite(f))  // the plan's JSON has no infinities
        continue;
      for (AttentionFusion* a : fused) {
        a->mask = m;
        a->select = true;
        a->mask_true = t;
        a->mask_false = f;
      }
      absorbed_.insert(where);
      Node* next = where;
      for (Node* c : casts) {  // a cast something else also reads is still computed
        if (!only_user(g_, c->output(0), next)) break;
        absorbed_.insert(c);
        next = c;
      }
    }
  }

  // Depthwise conv -> Relu or Clip with constant bounds: the clamp runs in the depthwise kernel's
  // store (MobileNetV2's ReLU6 after each depthwise conv was a step of its own).
  void depthwise_activation_fusion(Node* conv) {
    Node* u = sole_user(conv->output(0));
    if (!u || !u->domain().empty() || absorbed_.count(u) || u->num_outputs() != 1) return;
    std::pair<double, double> bounds{0.0, INFINITY};  // Relu
    if (u->op() == "Clip") {
      auto b = clip_bounds(u);
      if (!b || b->first > b->second) return;  // min above max: every output is max; not worth a special case
      bounds = *b;
    } else if (u->op() != "Relu") {
      return;
    }
    absorbed_.insert(u);
    dw_act_[conv] = {u, bounds.first, bounds.second};
  }

  // The single reader of `v`'s data (Shape/Size readers only see its dims), or nullptr.
  Node* sole_user(const Value* v) const {
    if (!v || g_.is_graph_output(v)) return nullptr;
    Node* only = nullptr;
    for (Node* u : v->users()) {
      if (u->domain().empty() && (u->op() == "Shape" || u->op() == "Size")) continue;
      if (only) return nullptr;
      only = u;
    }
    return only;
  }
  static bool perm_is(const Node* n, std::vector<int64_t> want) {
    return n && n->domain().empty() && n->op() == "Transpose" && n->attr_ints("perm", {}) == want;
  }
  static bool linear_batched(const Node* n) {
    return n && n->domain() == "sabre" && n->op() == "Composite" && n->attr_string("kind", "") == "batched_gemm" &&
           n->attr_string("epilogue", "linear") == "linear" && n->num_outputs() == 1;
  }
  // x4 = Reshape(x3 [b, s, h·d] -> [b, s, h, d]) read only through `t`: x3, else nullptr.
  Value* heads_source(const Node* t, int64_t* heads, int64_t* d) const {
    Value* x4 = t->input(0);
    const Node* r = x4->producer();
    if (!r || r->op() != "Reshape" || !r->domain().empty() || sole_user(x4) != t) return nullptr;
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
  Node* packed_split(AttentionFusion& a, std::initializer_list<const Node*> heads) const {
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
      if (!readers.count(sole_user(o)) || !o->shape()[2].is_static() || col % 8) return nullptr;
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

  void attention_fusion(Node* s) {
    auto it = softmax_.find(s);
    if (it == softmax_.end()) return;
    const SoftmaxFusion& f = it->second;
    Node* qk = f.x->producer();
    if (!linear_batched(qk) || f.x->users().size() != 1) return;
    Node* pv = sole_user(s->output(0));
    Node* cast = nullptr;  // GPT-2 casts the probabilities to the model's float type: a no-op here
    if (pv && pv->domain().empty() && pv->op() == "Cast" && ir::is_float(pv->output(0)->dtype())) {
      cast = pv;
      pv = sole_user(cast->output(0));
    }
    if (!linear_batched(pv)) return;
    auto rq = roles_of(qk), rv = roles_of(pv);
    if (!rq.count("A") || !rq.count("B") || !rv.count("A") || !rv.count("B") ||
        rv["A"] != (cast ? cast->output(0) : s->output(0)))
      return;
    Node* tq = rq["A"]->producer();
    Node* tk = rq["B"]->producer();
    Node* tv = rv["B"]->producer();
    // K reaches the product as Kᵀ [b,h,d,s] ("tt") or, when the partitioner absorbed the last
    // transpose into the region, as K [b,h,s,d] ("tn").
    const bool kt = qk->attr_string("layout", "tt") == "tt";
    if (!perm_is(tq, {0, 2, 1, 3}) || !perm_is(tk, kt ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 2, 1, 3}) ||
        !perm_is(tv, {0, 2, 1, 3}) || pv->attr_string("layout", "tt") != "tt")
      return;
    if (sole_user(tq->output(0)) != qk || sole_user(tk->output(0)) != qk || sole_user(tv->output(0)) != pv) return;
    AttentionFusion a;
    int64_t hk = 0, dk = 0, hv = 0, dv = 0;
    a.q = heads_source(tq, &a.heads, &a.d);
    a.k = heads_source(tk, &hk, &dk);
    a.v = heads_source(tv, &hv, &dv);
    if (!a.q || !a.k || !a.v || hk != a.heads || hv != a.heads || dk != a.d || dv != a.d) return;
    Node* split = packed_split(a, {tq, tk, tv});
    Node* to = sole_user(pv->output(0));
    if (!perm_is(to, {0, 2, 1, 3})) return;
    Node* out = sole_user(to->output(0));
    if (!out || out->op() != "Reshape" || !out->domain().empty() || !(out->output(0)->shape() == a.q->shape())) return;
    // What the native kernel takes (native::attention_unsupported): head dim 32 or 64, at most
    // 512 keys over the declared ranges, 16-byte rows.
    a.b = a.q->shape()[0];
    a.sq = a.q->shape()[1];
    a.sk = a.k->shape()[1];
    const int64_t sk_hi = eval_hi(a.sk);
    if ((a.d != 32 && a.d != 64) || sk_hi < 1 || sk_hi > 512 || (a.heads * a.d) % 8) return;
    if (f.mask && (f.mask->shape().size() > 4 || !ir::is_float(f.mask->dtype()))) return;
    a.mask = f.mask;
    a.scale = f.scale;
    a.causal = f.causal;
    for (Node* n : {qk, s, pv, tq, tk, tv, to, tq->input(0)->producer(), tk->input(0)->producer(), tv->input(0)->producer()})
      absorbed_.insert(n);
    if (cast) absorbed_.insert(cast);
    if (split) absorbed_.insert(split);
    attention_[out] = a;
  }

  // Softmax(Where(causal, Div(x, c) | Mul(x, c), fill) + mask): one native softmax.
  void softmax_fusion(Node* s) {
    SoftmaxFusion f;
    f.x = s->input(0);
    const size_t rank = f.x->shape().size();
    if (rank == 0 || norm_axis(s->attr_int("axis", -1), rank) != static_cast<int64_t>(rank) - 1) return;
    const Dim cols = f.x->shape().back();
    Node* p = f.x->producer();
    if (p && p->op() == "Where" && only_user(g_, f.x, s) && is_causal(p->input(0)) && scalar_constant(p->input(2)) &&
        p->input(1)->shape() == f.x->shape()) {
      f.causal = true;
      f.absorbed.push_back(p);
      f.x = p->input(1);
      p = f.x->producer();
    }
    if (p && p->op() == "Add" && only_user(g_, f.x, f.absorbed.empty() ? s : f.absorbed.back()) && rank == 4) {
      for (int side = 0; side < 2; ++side) {
        Value* a = p->input(side);
        Value* m = p->input(1 - side);
        if (a->shape() == f.x->shape() && m->shape().size() <= 4 && !m->shape().empty() && m->shape().back() == cols &&
            ir::is_float(m->dtype()) && m->shape() != f.x->shape()) {
          f.mask = m;
          f.absorbed.push_back(p);
          f.x = a;
          p = f.x->producer();
          break;
        }
      }
    }
    if (p && (p->op() == "Div" || p->op() == "Mul") && scalar_constant(p->input(1)) &&
        p->input(0)->shape() == f.x->shape() && only_user(g_, f.x, f.absorbed.empty() ? s : f.absorbed.back())) {
      double c = p->input(1)->constant().get_f64(0);
      if (p->op() == "Div" ? c != 0 : true) {
        f.scale = p->op() == "Div" ? 1.0 / c : c;
        f.absorbed.push_back(p);
        f.x = p->input(0);
      }
    }
    for (Node* a : f.absorbed) absorbed_.insert(a);
    softmax_[s] = f;
  }

  // Trilu(ConstantOfShape(true), k=0) {upper=0} of a square [S,S]: the causal mask.
  bool is_causal(const Value* cond) const {
    const Node* t = cond ? cond->producer() : nullptr;
    if (!t || t->op() != "Trilu" || t->attr_int("upper", 1) != 0) return false;
    if (t->input(1) && !(scalar_constant(t->input(1)) && t->input(1)->constant().get_i64(0) == 0)) return false;
    const Node* c = t->input(0)->producer();
    if (!c || c->op() != "ConstantOfShape" || !c->has_attr("value")) return false;
    const ir::Tensor& v = c->attr_tensor("value");
    const auto& sh = cond->shape();
    return v.numel() == 1 && v.get_f64(0) != 0 && sh.size() == 2 && sh[0] == sh[1];
  }

  // LayerNorm of a sum of embedding Gathers (BERT: word, token type and position tables, two Adds):
  // one embed_layernorm step reading each table row by its id in place. A term's ids may be an
  // Expand or a Slice (static start, positive step) of another tensor, any number deep: the step
  // reads that tensor through strides (0 where broadcast) and an offset, so neither runs (BERT's
  // position ids are a Slice of a constant buffer). Every Add and Gather must feed only the next
  // node of the tree.
  bool embedding_fusion(Node* ln) {
    Value* x = ln->input(0);
    const auto& xs = x->shape();
    const size_t rank = xs.size() ? xs.size() - 1 : 0;
    if (rank < 1 || rank > kMaxEmbedRank || !xs.back().is_static()) return false;
    if (norm_axis(ln->attr_int("axis", -1), xs.size()) != static_cast<int64_t>(rank)) return false;
    std::vector<Node*> adds, gathers;
    std::function<bool(Value*, Node*)> walk = [&](Value* v, Node* user) {
      Node* p = v ? v->producer() : nullptr;
      if (!p || !p->domain().empty() || absorbed_.count(p) || !only_user(g_, v, user)) return false;
      if (p->op() == "Add") {
        adds.push_back(p);
        return walk(p->input(0), p) && walk(p->input(1), p);
      }
      if (p->op() != "Gather") return false;
      gathers.push_back(p);
      return true;
    };
    if (!walk(x, ln) || gathers.size() < 2 || gathers.size() > kMaxEmbedTerms) return false;
    std::sort(gathers.begin(), gathers.end(), [&](Node* a, Node* b) { return pos(a) < pos(b); });
    std::vector<EmbeddingTerm> terms;
    for (Node* g : gathers) {
      Value* table = g->input(0);
      Value* ids = g->input(1);
      if (!table->is_constant() || !ir::is_float(table->dtype()) || table->shape().size() != 2 ||
          table->shape()[1] != xs.back() || norm_axis(g->attr_int("axis", 0), 2) != 0)
        return false;
      if ((ids->dtype() != DType::i64 && ids->dtype() != DType::i32) || ids->shape().size() != rank) return false;
      // Coordinate j of the ids tensor read so far: base + scale * (row coordinate `row`), or base.
      std::vector<IdsCoord> c0(rank);
      for (size_t i = 0; i < rank; ++i) {
        const Dim& d = ids->shape()[i];
        if (d == xs[i]) c0[i] = {0, 1, static_cast<int>(i)};
        else if (d == Dim(1)) c0[i] = {0, 0, -1};  // the Adds broadcast it up to x's dim
        else return false;
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
        int64_t last = eval_hi(t.offset), size = 1;
        for (size_t i = 0; i < rank; ++i) last += (eval_hi(xs[i]) - 1) * eval_hi(t.strides[i]);
        for (const Dim& d : t.ids->shape()) size *= d.value();
        if (last < 0 || last >= size) t = make(false);
      }
      terms.push_back(std::move(t));
    }
    for (Node* n : adds) absorbed_.insert(n);
    for (Node* n : gathers) absorbed_.insert(n);
    embedding_[ln] = std::move(terms);
    return true;
  }
  // When `v` is an Expand or a Slice (constant starts inside static dims, positive steps) of
  // another tensor: that tensor, with `c` rewritten to its coordinates; else nullptr.
  static Value* view_source(const Value* v, std::vector<IdsCoord>& c) {
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

  void layernorm_fusion(Node* ln) {
    Value* x = ln->input(0);
    Node* p = x->producer();
    if (!p || p->op() != "Add" || p->domain() != "" || !only_user(g_, x, ln) || absorbed_.count(p)) return;
    if (p->input(0)->shape() != x->shape() || p->input(1)->shape() != x->shape()) return;
    if (p->input(0)->is_constant() || p->input(1)->is_constant()) return;
    absorbed_.insert(p);
    ln_residual_[ln] = p;
  }

  // A GEMM whose A is one row of each [S, K] matrix of x [B, S, K] (Gather along axis 1 by a
  // constant index: BERT's pooler takes the [CLS] row): A is read in place, lda S*K from row i*K,
  // so the Gather does not run.
  void row_gather_gemm(Node* n) {
    if (n->attr_string("kind", "") != "gemm") return;
    const std::map<std::string, Value*> role = roles_of(n);
    auto it = role.find("A");
    if (it == role.end() || !it->second) return;
    Value* a = it->second;
    const Node* g = a->producer();
    if (!g || !g->domain().empty() || g->op() != "Gather" || !scalar_constant(g->input(1))) return;
    const Value* x = g->input(0);
    const auto& xs = x->shape();
    if (xs.size() != 3 || norm_axis(g->attr_int("axis", 0), 3) != 1 || a->shape().size() != 2) return;
    int64_t i = g->input(1)->constant().get_i64(0);
    if (i < 0) {
      if (!xs[1].is_static()) return;
      i += xs[1].value();
    }
    if (i < 0 || i >= eval_lo(xs[1])) return;  // must be inside every S the ranges allow
    // A's operand position in the Composite, so data_inputs can read x in its place.
    for (size_t k = 0; k < n->num_inputs(); ++k)
      if (n->input(k) == a) row_gather_[n] = {k, g->input(0), i};
  }

  // Gather(data, Range(start, limit, delta)) along an axis is a slice: no index tensor needed.
  void range_gather(Node* g) {
    const Node* r = g->input(1)->producer();
    if (!r || r->op() != "Range" || !scalar_constant(r->input(0)) || !scalar_constant(r->input(2))) return;
    auto limit = dims_of(r->input(1));
    if (!limit || limit->size() != 1) return;
    range_gather_[g] = {r->input(0)->constant().get_i64(0), (*limit)[0], r->input(2)->constant().get_i64(0)};
  }

  // A shape-like value as dims: a constant, or a value shape folding knows (possibly symbolic).
  std::optional<std::vector<Dim>> dims_of(const Value* v) const {
    if (!v) return std::nullopt;
    if (v->is_constant()) {
      std::vector<Dim> d;
      for (int64_t x : v->constant().to_i64_vector()) d.push_back(Dim(x));
      return d;
    }
    if (v->known_dims()) return *v->known_dims();
    return std::nullopt;
  }

  // An integer value shape folding knows (Shape(x), a Gather of it, ...) that a data op reads:
  // the runtime writes it from the evaluated dims (step "fill") instead of running its producer.
  bool materializable(const Value* v) const {
    if (!v || v->is_constant() || !v->producer() || !v->known_dims() || (v->dtype() != DType::i64 && v->dtype() != DType::i32)) return false;
    if (v->producer()->op() == "Range") return false;
    int64_t numel = 1;
    for (const Dim& d : v->shape()) {
      if (!d.is_static()) return false;
      numel *= d.value();
    }
    return numel == static_cast<int64_t>(v->known_dims()->size()) && numel >= 1 && numel <= kMaxFillValues;
  }
  // Range(start, limit, delta) whose operands are known scalars: (start, delta) as dims.
  std::optional<std::pair<Dim, Dim>> range_operands(const Node* n) const {
    auto start = dims_of(n->input(0)), delta = dims_of(n->input(2));
    if (!start || !delta || start->size() != 1 || delta->size() != 1 || !dims_of(n->input(1))) return std::nullopt;
    return std::make_pair((*start)[0], (*delta)[0]);
  }

  // ---- which nodes must run: walk back from the outputs through data inputs ------------------
  std::vector<Value*> data_inputs(Node* n) const {
    const std::string& op = n->op();
    if (n->domain() == "sabre") {
      std::vector<Value*> v = n->inputs();
      if (auto it = row_gather_.find(n); it != row_gather_.end()) v[it->second.input] = it->second.x;
      return v;
    }
    if (is_view(op) || op == "Expand" || op == "Slice" || op == "Transpose" || op == "Split" ||
        op.rfind("Reduce", 0) == 0 || op == "Clip")
      return {n->input(0)};
    if (op == "Softmax") {
      auto it = softmax_.find(n);
      if (it == softmax_.end()) return {n->input(0)};
      std::vector<Value*> v{it->second.x};
      if (it->second.mask) v.push_back(it->second.mask);
      return v;
    }
    if (op == "LayerNormalization" && embedding_.count(n)) {
      std::vector<Value*> v{n->input(1)};
      if (n->num_inputs() > 2 && n->input(2)) v.push_back(n->input(2));
      for (const EmbeddingTerm& t : embedding_.at(n)) {
        v.push_back(t.table);
        v.push_back(t.ids);
      }
      return v;
    }
    if (op == "LayerNormalization") {
      std::vector<Value*> v(n->inputs());
      if (auto it = ln_residual_.find(n); it != ln_residual_.end()) {
        v[0] = it->second->input(0);
        v.push_back(it->second->input(1));
      }
      return v;
    }
    if (op == "Gather" && range_gather_.count(n)) return {n->input(0)};
    if (auto it = attention_.find(n); it != attention_.end()) {
      std::vector<Value*> v{it->second.q, it->second.k, it->second.v};
      if (it->second.mask) v.push_back(it->second.mask);
      return v;
    }
    if (op == "Range" && range_operands(n)) return {};
    std::vector<Value*> v;
    for (Value* x : n->inputs())
      if (x) v.push_back(x);
    return v;
  }

  void mark_needed() {
    std::vector<Node*> work;
    for (const Value* v : g_.outputs())
      if (v->producer()) work.push_back(v->producer());
    while (!work.empty()) {
      Node* n = work.back();
      work.pop_back();
      if (!needed_.insert(n).second) continue;
      for (Value* v : data_inputs(n)) {
        if (materializable(v)) {
          materialized_.insert(v);  // written by a fill step from its known dims; its producer need not run
          continue;
        }
        if (v && v->producer() && !needed_.count(v->producer())) work.push_back(v->producer());
      }
    }
  }

  // ---- elementwise groups ------------------------------------------------------------------
  struct Group {
    std::vector<Node*> nodes;
    std::set<const Value*> inputs;  // external non-scalar inputs
    int chain_nodes = 0;
  };

  void group_elementwise() {
    for (Node* n : order_) {
      if (!needed_.count(n) || absorbed_.count(n) || !is_ew(n)) continue;
      std::set<const Value*> ext;
      int own = 1;
      for (Value* v : n->inputs()) {
        if (!v) continue;
        if (scalar_constant(v)) ++own;
        else ext.insert(v);
      }
      // Producer groups that only n reads: merge them into one.
      std::vector<int> merge;
      for (Value* v : n->inputs()) {
        Node* p = v ? v->producer() : nullptr;
        if (!p || !group_of_.count(p) || !only_user(g_, v, n)) continue;
        int gi = group_of_[p];
        if (groups_[gi].nodes.back() != p || std::count(merge.begin(), merge.end(), gi)) continue;
        merge.push_back(gi);
      }
      std::set<const Value*> inputs;
      int count = own;
      for (int gi : merge) {
        inputs.insert(groups_[gi].inputs.begin(), groups_[gi].inputs.end());
        count += groups_[gi].chain_nodes;
      }
      for (const Value* v : ext) {
        bool internal = false;
        for (int gi : merge) internal |= groups_[gi].nodes.back()->output(0) == v;
        if (!internal) inputs.insert(v);
      }
      // Input nodes count once per external input; keep within the kernel ABI's limits.
      int input_nodes_before = 0;
      for (int gi : merge) input_nodes_before += static_cast<int>(groups_[gi].inputs.size());
      int total = count - input_nodes_before + static_cast<int>(inputs.size());
      if (merge.empty() || inputs.size() > SABRE_EW_MAX_INPUTS || total > SABRE_EW_MAX_NODES) {
        Group gr;
        gr.nodes = {n};
        gr.inputs = ext;
        gr.chain_nodes = own + static_cast<int>(ext.size());
        groups_.push_back(std::move(gr));
        group_of_[n] = static_cast<int>(groups_.size()) - 1;
        continue;
      }
      int into = merge[0];
      std::vector<Node*> nodes;
      for (int gi : merge) nodes.insert(nodes.end(), groups_[gi].nodes.begin(), groups_[gi].nodes.end());
      std::sort(nodes.begin(), nodes.end(), [&](Node* a, Node* b) { return pos(a) < pos(b); });
      nodes.push_back(n);
      for (size_t i = 1; i < merge.size(); ++i) groups_[merge[i]].nodes.clear();
      groups_[into].nodes = nodes;
      groups_[into].inputs = inputs;
      groups_[into].chain_nodes = total;
      for (Node* m : nodes) group_of_[m] = into;
    }
  }
  size_t pos(const Node* n) {
    if (pos_.empty())
      for (size_t i = 0; i < order_.size(); ++i) pos_[order_[i]] = i;
    return pos_.at(n);
  }

  // ---- tensors -------------------------------------------------------------------------------
  DType storage(DType model) const { return ir::is_float(model) ? o_.dtype : model; }

  runtime::TensorInfo info(const Value* v, DType dt, runtime::TensorKind kind, const std::string& name) {
    runtime::TensorInfo t;
    t.name = name;
    t.dtype = dt;
    t.kind = kind;
    for (const Dim& d : v->shape()) {
      for (const auto& s : d.symbols())
        if (!lo_.count(s))
          throw UnsupportedError(v->name() + ": dim '" + d.str() + "' uses '" + s +
                                 "', which no model input declares (shape inference could not tie it to the inputs)");
      t.shape.push_back(runtime::DimExpr::parse(d.str()));
    }
    return t;
  }
  int add_tensor(runtime::TensorInfo t) {
    out_.plan.tensors.push_back(std::move(t));
    return static_cast<int>(out_.plan.tensors.size()) - 1;
  }

  // The tensor id of a value read by a step in the model's layout (weights are created on first
  // use; a value stored NHWC is converted back to NCHW once).
  int tensor(const Value* v) {
    if (!v) return -1;
    if (nhwc_.count(v)) return convert(v, false);
    if (auto it = tid_.find(v); it != tid_.end()) return it->second;
    if (auto it = pending_cast_.find(v); it != pending_cast_.end()) {
      const int raw = it->second;
      pending_cast_.erase(it);
      const int c = add_tensor(info(v, storage(v->dtype()), runtime::TensorKind::activation, v->name() + ".compute"));
      step("cast", v->name() + ".cast", {raw}, {c}, JObject{});
      return tid_[v] = c;
    }
    if (materialized_.count(v)) {
      JArray values;
      for (const Dim& d : *v->known_dims()) values.push_back(jdim(d));
      int t = define(v);
      step("fill", v->name(), {}, {t}, JObject{{"values", json::Value(values)}});
      return t;
    }
    if (!v->is_constant()) {
      // Its producer was unsupported (already reported): a placeholder lets lowering go on and
      // report every unsupported node at once; no plan is written then.
      if (!unsupported_.empty()) return define(v);
      throw std::logic_error("lower: value '" + v->name() + "' read before its producer ran (invariant: topological steps)");
    }
    return tid_[v] = add_weight(v->constant(), info(v, v->dtype(), runtime::TensorKind::weight, v->name()));
  }
  // Appends constant `c` (converted to the compute dtype when float) to the weights blob as `t`.
  int add_weight(ir::Tensor c, runtime::TensorInfo t) {
    const ir::DType dt = ir::is_float(c.dtype()) ? o_.dtype : c.dtype();
    size_t bytes = ir::size_of(dt);
    for (int64_t d : c.dims()) bytes *= static_cast<size_t>(d);
    const size_t off = (weights_size_ + 255) / 256 * 256;
    weights_size_ = off + bytes;
    if (o_.weights) {
      if (dt != c.dtype()) c = c.cast(dt);
      out_.weights.resize(weights_size_, 0);
      if (bytes) std::memcpy(out_.weights.data() + off, c.bytes(), bytes);
    }
    t.dtype = dt;
    t.weight_offset = off;
    t.weight_bytes = bytes;
    return add_tensor(std::move(t));
  }
  // The tensor a step writes for `v` (an activation in the storage dtype; [N,H,W,C] when NHWC).
  int define(const Value* v) { return define(v, storage(v->dtype())); }
  int define(const Value* v, DType dt) {
    if (tid_.count(v)) throw std::logic_error("lower: '" + v->name() + "' defined twice (invariant: SSA)");
    runtime::TensorInfo t = info(v, dt, runtime::TensorKind::activation, v->name());
    if (nhwc_.count(v)) {
      t.shape = nhwc(t.shape);
      t.name += ".nhwc";  // the name without suffix is the NCHW tensor, where one is needed
    }
    return tid_[v] = add_tensor(std::move(t));
  }

  // ---- layout: NHWC inside conv regions --------------------------------------------------------
  // Conv kernels read and write NHWC. Conv outputs are stored NHWC, and so are the outputs of
  // pooling and elementwise chains that read an NHWC value (and whose other operands can follow:
  // rank-4 activations, constants, scalars); every other reader sees NCHW through one conversion
  // per value (tensor()), so permutes appear only where the NHWC region ends or begins.
  template <typename T>
  static std::vector<T> nhwc(const std::vector<T>& s) {
    return {s[0], s[2], s[3], s[1]};
  }
  static bool is_conv_region(const Node* n) {
    return n->domain() == "sabre" && n->op() == "Composite" && n->attr_string("kind", "") == "conv2d_fprop";
  }

  void assign_layouts() {
    if (!o_.pick_conv) return;  // conv regions are refused: nothing runs NHWC
    for (Node* n : order_) {
      if (!needed_.count(n) || absorbed_.count(n)) continue;
      if (is_conv_region(n)) {
        if (n->output(0)->shape().size() == 4) nhwc_.insert(n->output(0));
        continue;
      }
      if (n->domain() != "") continue;
      const std::string& op = n->op();
      if (op == "Conv" && depthwise_problem(n).empty()) {
        nhwc_.insert(n->output(0));
        if (auto it = dw_act_.find(n); it != dw_act_.end()) nhwc_.insert(it->second.node->output(0));
        continue;
      }
      if ((op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool") && n->num_outputs() == 1 &&
          n->input(0)->shape().size() == 4 && nhwc_.count(n->input(0))) {
        nhwc_.insert(n->output(0));
        continue;
      }
      if (is_ew(n)) {
        auto it = group_of_.find(n);
        if (it == group_of_.end() || groups_[it->second].nodes.back() != n || !nhwc_group(groups_[it->second])) continue;
        for (Node* m : groups_[it->second].nodes) nhwc_.insert(m->output(0));
      }
    }
  }

  bool nhwc_group(const Group& gr) const {
    for (const Node* m : gr.nodes)
      if (m->output(0)->shape().size() != 4) return false;
    bool reads_nhwc = false;
    for (const Value* v : gr.inputs) {
      if (nhwc_.count(v)) reads_nhwc = true;
      else if (v->is_constant() && !materialized_.count(v)) {
        if (v->shape().size() > 4) return false;
      } else if (v->shape().size() != 4) {
        return false;
      }
    }
    return reads_nhwc;
  }

  // `v` stored NHWC: its own tensor, a constant transposed at compile time (rank <= 4, right-aligned
  // to 4 first: a [C,1,1] bias becomes [1,1,1,C]; a filter [K,C,R,S] becomes KRSC), or an NCHW
  // activation converted once. c_pad > 0: the channels (the last dim) padded with zeros to c_pad,
  // for a conv whose C breaks the 16-byte access (emit_conv); only NCHW values and constants can
  // be padded, since the padding happens in their conversion.
  int tensor_nhwc(const Value* v, int64_t c_pad = 0) {
    if (!v) return -1;
    if (nhwc_.count(v)) {
      if (c_pad)
        throw std::logic_error("lower: NHWC value '" + v->name() +
                               "' asked for padded channels (invariant: channel_padding pads only values it converts)");
      auto it = tid_.find(v);
      if (it == tid_.end())
        throw std::logic_error("lower: value '" + v->name() + "' read before its producer ran (invariant: topological steps)");
      return it->second;
    }
    if (!v->is_constant() || materialized_.count(v)) return convert(v, true, c_pad);
    auto& cache = c_pad ? padded_[c_pad] : other_;
    if (auto it = cache.find(v); it != cache.end()) return it->second;
    const ir::Tensor& c = v->constant();
    std::vector<int64_t> d = c.dims();
    if (d.size() > 4) throw std::logic_error("lower: NHWC constant '" + v->name() + "' has rank > 4 (invariant: nhwc_group)");
    while (d.size() < 4) d.insert(d.begin(), 1);
    const int64_t N = d[0], C = d[1], H = d[2], W = d[3], CP = std::max(C, c_pad);
    const size_t es = ir::size_of(c.dtype());
    ir::Tensor t(c.dtype(), {N, H, W, CP});
    std::memset(t.mutable_bytes(), 0, t.nbytes());  // the padding channels: zero taps
    for (int64_t n = 0; n < N; ++n)
      for (int64_t ch = 0; ch < C; ++ch)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t w = 0; w < W; ++w)
            std::memcpy(t.mutable_bytes() + static_cast<size_t>(((n * H + h) * W + w) * CP + ch) * es,
                        c.bytes() + static_cast<size_t>(((n * C + ch) * H + h) * W + w) * es, es);
    runtime::TensorInfo ti;
    ti.name = v->name() + ".nhwc" + (c_pad ? "_c" + std::to_string(c_pad) : "");
    ti.kind = runtime::TensorKind::weight;
    for (int64_t x : t.dims()) ti.shape.push_back(runtime::DimExpr::parse(std::to_string(x)));
    return cache[v] = add_weight(std::move(t), std::move(ti));
  }

  // `v` in the other layout than its own: a view where the permutation moves no bytes (at most one
  // of C, H, W is not 1, e.g. a GlobalAveragePool output before Flatten), else a permute step to
  // NCHW or an nchw_to_nhwc step to NHWC. The latter also pads the channels with zeros to c_pad
  // (> 0: emit_conv) and, for a float model input whose compute-dtype copy nothing has read yet,
  // reads the input itself and casts on the way: the cast step and its pass over the input go.
  int convert(const Value* v, bool to_nhwc, int64_t c_pad = 0) {
    auto& cache = c_pad ? padded_[c_pad] : other_;
    if (auto it = cache.find(v); it != cache.end()) return it->second;
    const auto& s = v->shape();
    int moved = 0;
    for (size_t i = 1; i < 4; ++i) moved += !(s[i] == Dim(1));
    const bool view = moved <= 1 && !c_pad;
    int src;
    bool fused_cast = false;
    if (to_nhwc) {
      auto raw = pending_cast_.find(v);
      fused_cast = !view && raw != pending_cast_.end();
      src = fused_cast ? raw->second : tensor(v);
    } else {
      auto it = tid_.find(v);
      if (it == tid_.end())
        throw std::logic_error("lower: value '" + v->name() + "' read before its producer ran (invariant: topological steps)");
      src = it->second;
    }
    if (src < 0) return -1;  // its producer was refused; the error lists it
    runtime::TensorInfo t = info(v, fused_cast ? storage(v->dtype()) : out_.plan.tensors[src].dtype,
                                 runtime::TensorKind::activation, v->name());
    if (to_nhwc) {
      t.shape = nhwc(t.shape);
      t.name += ".nhwc";
      if (c_pad) {
        t.shape[3] = runtime::DimExpr::parse(std::to_string(c_pad));
        t.name += "_c" + std::to_string(c_pad);
      }
    }
    int id = add_tensor(std::move(t));
    if (view) {
      step("reshape", v->name() + (to_nhwc ? " (to NHWC)" : " (to NCHW)"), {src}, {id}, JObject{});
    } else if (to_nhwc) {
      std::string what;
      if (fused_cast)
        what += ", cast " + std::string(ir::name(v->dtype())) + " -> " + std::string(ir::name(storage(v->dtype())));
      if (c_pad) what += ", channels padded " + s[1].str() + " -> " + std::to_string(c_pad);
      step("nchw_to_nhwc", v->name() + " (to NHWC" + what + ")", {src}, {id}, JObject{});
      ++permutes_;
    } else {
      step("permute", v->name() + " (to NCHW)", {src}, {id}, JObject{{"perm", jints({0, 3, 1, 2})}});
      ++permutes_;
    }
    return cache[v] = id;
  }

  void bind_input(const Value* v) {
    int t = add_tensor(info(v, v->dtype(), runtime::TensorKind::input, v->name()));
    out_.plan.inputs.push_back(t);
    if (storage(v->dtype()) == v->dtype()) {
      tid_[v] = t;
      return;
    }
    // The compute-dtype copy is made where something first reads it (tensor()); an input that
    // only enters NHWC conv regions is cast by its conversion instead (convert()).
    pending_cast_[v] = t;
  }

  // A float model output (listed once) that the plan computes in another dtype: the step that
  // computes it can write it in the model's dtype itself, instead of a cast step after it.
  bool output_needs_model_dtype(const Value* v) const {
    return g_.is_graph_output(v) && ir::is_float(v->dtype()) && storage(v->dtype()) != v->dtype() &&
           std::count(g_.outputs().begin(), g_.outputs().end(), v) == 1;
  }

  void bind_output(const Value* v) {
    if (auto it = model_output_.find(v); it != model_output_.end()) {  // written in its dtype by its step
      out_.plan.tensors[it->second].kind = runtime::TensorKind::output;
      out_.plan.outputs.push_back(it->second);
      return;
    }
    int t = tensor(v);
    // Copies, not a reference: add_tensor below grows plan.tensors and would leave one dangling.
    const DType t_dtype = out_.plan.tensors[t].dtype;
    const runtime::TensorKind t_kind = out_.plan.tensors[t].kind;
    bool reused = std::count(out_.plan.outputs.begin(), out_.plan.outputs.end(), t) > 0;
    if (t_dtype == v->dtype() && t_kind == runtime::TensorKind::activation && !reused) {
      out_.plan.tensors[t].kind = runtime::TensorKind::output;
      out_.plan.outputs.push_back(t);
      return;
    }
    int o = add_tensor(info(v, v->dtype(), runtime::TensorKind::output, v->name()));
    if (t_kind == runtime::TensorKind::activation) out_.plan.tensors[t].name = v->name() + ".compute";
    step(t_dtype == v->dtype() ? "copy" : "cast", v->name() + ".out", {t}, {o}, JObject{});
    out_.plan.outputs.push_back(o);
  }

  void step(const std::string& op, const std::string& name, std::vector<int> ins, std::vector<int> outs, JObject params) {
    runtime::Step s;
    s.op = op;
    s.name = name;
    s.inputs = std::move(ins);
    s.outputs = std::move(outs);
    s.params = json::Value(std::move(params));
    out_.plan.steps.push_back(std::move(s));
  }

  // ---- emitting one node -------------------------------------------------------------------
  void emit(Node* n) {
    const std::string& op = n->op();
    if (n->domain() == "sabre" && op == "Composite") return emit_composite(n);
    if (op == "MatMul" || op == "Gemm" || op == "MatMulTransB")
      return unsupported(n, "a GEMM the CUTLASS pattern table refused (`sabre partition` says why); sabre has no "
                            "other GEMM path");
    if (n->domain() != "") return unsupported(n, "no GPU lowering for domain '" + n->domain() + "'");
    if (is_ew(n)) {
      auto it = group_of_.find(n);
      // A Cast between float types that store alike (f32 -> f32 softmax casts in an f16 plan): a view.
      if (op == "Cast" && it != group_of_.end() && groups_[it->second].nodes.size() == 1 &&
          storage(n->input(0)->dtype()) == storage(n->output(0)->dtype())) {
        step("reshape", n->name(), {tensor(n->input(0))}, {define(n->output(0))}, JObject{});
        return;
      }
      if (it != group_of_.end() && groups_[it->second].nodes.back() == n) emit_group(groups_[it->second]);
      return;
    }
    if (attention_.count(n)) return emit_attention(n, attention_.at(n));
    if (is_view(op)) {
      int x = tensor(n->input(0));
      step("reshape", n->name(), {x}, {define(n->output(0))}, JObject{});
      return;
    }
    if (op == "Softmax") return emit_softmax(n);
    if (op == "LayerNormalization") return emit_layernorm(n);
    if (op == "Transpose") {
      std::vector<int64_t> perm = n->attr_ints("perm", {});
      if (perm.empty())
        for (int64_t i = static_cast<int64_t>(n->input(0)->shape().size()) - 1; i >= 0; --i) perm.push_back(i);
      int x = tensor(n->input(0));
      step("permute", n->name(), {x}, {define(n->output(0))}, JObject{{"perm", jints(perm)}});
      return;
    }
    if (op == "Gather") return emit_gather(n);
    if (op == "Slice") return emit_slice(n);
    if (op == "Concat") {
      std::vector<int> ins;
      for (Value* v : n->inputs()) ins.push_back(tensor(v));
      int64_t axis = norm_axis(n->attr_int("axis"), n->output(0)->shape().size());
      step("concat", n->name(), ins, {define(n->output(0))}, JObject{{"axis", jnum(double(axis))}});
      return;
    }
    if (op == "Split") {
      int x = tensor(n->input(0));
      std::vector<int> outs;
      for (Value* v : n->outputs()) outs.push_back(define(v));
      int64_t axis = norm_axis(n->attr_int("axis", 0), n->input(0)->shape().size());
      step("split", n->name(), {x}, outs, JObject{{"axis", jnum(double(axis))}});
      return;
    }
    if (op == "Expand") return emit_expand(n);
    if (op.rfind("Reduce", 0) == 0) return emit_reduce(n);
    if (op == "MaxPool" || op == "AveragePool") return emit_pool(n);
    if (op == "GlobalAveragePool" && n->input(0)->shape().size() == 4) {
      const bool in_nhwc = nhwc_.count(n->output(0)) != 0;
      int x = in_nhwc ? tensor_nhwc(n->input(0)) : tensor(n->input(0));
      step("global_average_pool", n->name(), {x}, {define(n->output(0))},
           JObject{{"layout", jstr(in_nhwc ? "nhwc" : "nchw")}});
      return;
    }
    if (op == "Conv") {
      if (!o_.pick_conv) return unsupported(n, "conv offload is not implemented yet (issue 7)");
      if (n->attr_int("group", 1) != 1) {
        if (std::string why = depthwise_problem(n); !why.empty()) return unsupported(n, why);
        return emit_depthwise(n);
      }
      return unsupported(n, "a Conv the CUTLASS pattern table refused (`sabre partition` says why); sabre has no "
                            "other conv path");
    }
    if (op == "Range" && range_operands(n)) {
      auto [start, delta] = *range_operands(n);
      step("iota", n->name(), {}, {define(n->output(0))}, JObject{{"start", jdim(start)}, {"delta", jdim(delta)}});
      return;
    }
    if (op == "Shape" || op == "Range" || op == "ConstantOfShape" || op == "Size")
      return unsupported(n, "a shape computation whose value the model uses as data at run time");
    unsupported(n, "no GPU lowering for this op");
  }

  void emit_group(const Group& gr) {
    native::ElementwiseChain ch;
    std::map<const Value*, int> node_of;
    std::vector<int> step_ins;
    const bool in_nhwc = nhwc_.count(gr.nodes.back()->output(0)) != 0;
    auto operand = [&](const Value* v) -> int {
      if (auto it = node_of.find(v); it != node_of.end()) return it->second;
      if (scalar_constant(v))  // floats compute in f32; integer and bool constants keep their kind
        return ch.constant(static_cast<float>(v->constant().get_f64(0)), ir::is_float(v->dtype()) ? DType::f32 : v->dtype());
      int slot = static_cast<int>(ch.inputs.size());
      int t = in_nhwc ? tensor_nhwc(v) : tensor(v);
      if (t < 0) throw AfterRefusal{};
      ch.inputs.push_back(out_.plan.tensors[t].dtype);
      step_ins.push_back(t);
      return node_of[v] = ch.input(slot);
    };
    using native::EwOp;
    for (Node* m : gr.nodes) {
      EwOp op = ew_ops().at(m->op());
      std::vector<int> a;
      const bool clip = m->op() == "Clip";
      for (size_t i = 0; i < (clip ? 1 : m->num_inputs()); ++i) a.push_back(operand(m->input(i)));
      DType dt = storage(m->output(0)->dtype());
      int r;
      if (op == EwOp::cast) {
        r = ch.cast(a[0], dt);
      } else if (op == EwOp::where) {
        r = ch.where(a[0], a[1], a[2]);
      } else if (native::info(op).arity == 2) {
        if (op == EwOp::mod && m->attr_int("fmod", 0) != 0) op = EwOp::fmod;
        if (op == EwOp::shl && m->attr_string("direction", "") == "RIGHT") op = EwOp::shr;
        r = ch.binary(op, a[0], a[1]);
      } else {
        float alpha = 0, beta = 0;
        if (op == EwOp::gelu_erf && m->attr_string("approximate", "none") == "tanh") op = EwOp::gelu_tanh;
        if (op == EwOp::leaky_relu) alpha = static_cast<float>(m->attr_float("alpha", 0.01));
        if (op == EwOp::elu || op == EwOp::celu || op == EwOp::thresholded_relu)
          alpha = static_cast<float>(m->attr_float("alpha", 1.0));
        if (op == EwOp::selu) {
          alpha = static_cast<float>(m->attr_float("alpha", 1.67326319217681884765625));
          beta = static_cast<float>(m->attr_float("gamma", 1.05070102214813232421875));
        }
        if (op == EwOp::shrink) {
          alpha = static_cast<float>(m->attr_float("lambd", 0.5));
          beta = static_cast<float>(m->attr_float("bias", 0.0));
        }
        if (op == EwOp::isinf) {
          alpha = static_cast<float>(m->attr_int("detect_negative", 1));
          beta = static_cast<float>(m->attr_int("detect_positive", 1));
        }
        if (op == EwOp::hard_sigmoid) {
          alpha = static_cast<float>(m->attr_float("alpha", 0.2));
          beta = static_cast<float>(m->attr_float("beta", 0.5));
        }
        if (clip) {
          auto b = clip_bounds(m);
          if (!b) throw UnsupportedError(where(m) + ": Clip bounds must be constants");
          alpha = static_cast<float>(b->first);
          beta = static_cast<float>(b->second);
        }
        r = ch.unary(op, a[0], alpha, beta);
      }
      ch.nodes[r].dtype = dt;
      node_of[m->output(0)] = r;
    }
    const Node* tail = gr.nodes.back();
    ch.outputs = {node_of.at(tail->output(0))};
    // A float model output that nothing else reads is written in the model's dtype by the chain
    // itself, so no cast step follows it (BERT's pooler Tanh writes pooler_output in f32).
    const Value* tv = tail->output(0);
    const bool model_dtype = !in_nhwc && tv->users().empty() && output_needs_model_dtype(tv);
    if (model_dtype) {
      const int r = ch.cast(ch.outputs[0], tv->dtype());
      ch.nodes[r].dtype = tv->dtype();
      ch.outputs = {r};
    }
    try {
      native::validate(ch);
    } catch (const std::invalid_argument& e) {
      throw UnsupportedError(where(tail) + ": the fused elementwise chain is invalid: " + e.what());
    }
    std::string kname = native::kernel_name(ch);
    if (!ew_seen_.count(kname)) {
      ew_seen_.insert(kname);
      out_.ew_kernels.push_back({kname, native::generate_elementwise_kernel(ch)});
    }
    JArray inputs, nodes, outputs;
    for (DType d : ch.inputs) inputs.push_back(jstr(std::string(ir::name(d))));
    for (const auto& nd : ch.nodes)
      nodes.push_back(json::Value(JObject{{"op", jstr(std::string(native::info(nd.op).name))},
                                          {"dtype", jstr(std::string(ir::name(nd.dtype)))},
                                          {"a", jnum(nd.a)},
                                          {"b", jnum(nd.b)},
                                          {"c", jnum(nd.c)},
                                          {"alpha", jnum(nd.alpha)},
                                          {"beta", jnum(nd.beta)}}));
    for (int o : ch.outputs) outputs.push_back(jnum(o));
    JObject chain{{"inputs", json::Value(inputs)}, {"nodes", json::Value(nodes)}, {"outputs", json::Value(outputs)}};
    std::string name = tail->name();
    if (gr.nodes.size() > 1) name += " (+" + std::to_string(gr.nodes.size() - 1) + " fused)";
    step("elementwise", name, step_ins, {define(tail->output(0), model_dtype ? tv->dtype() : storage(tv->dtype()))},
         JObject{{"chain", json::Value(chain)}, {"kernel", jstr(kname)}});
  }

  void emit_attention(Node* n, const AttentionFusion& a) {
    const Dim hd(a.heads * a.d), dd(a.d);
    // Rows of the packed Q|K|V projection are as wide as all three.
    const Dim row = a.packed ? a.packed->shape()[2] : hd;
    JObject p{{"b", jdim(a.b)}, {"h", jnum(double(a.heads))}, {"sq", jdim(a.sq)}, {"sk", jdim(a.sk)},
              {"d", jnum(double(a.d))}, {"scale", jnum(a.scale)}, {"causal", json::Value(a.causal)},
              {"q_stride", jdims({a.sq * row, dd, row})}, {"k_stride", jdims({a.sk * row, dd, row})},
              {"v_stride", jdims({a.sk * row, dd, row})}, {"o_stride", jdims({a.sq * hd, dd, hd})}};
    if (a.mask) p["mask_stride"] = jdims(mask_strides(a.mask));
    if (a.select) p["mask_true"] = jnum(a.mask_true), p["mask_false"] = jnum(a.mask_false);
    if (a.packed)
      p["offsets"] = jdims({Dim(a.offset[0]), Dim(a.offset[1]), Dim(a.offset[2])});
    std::vector<int> ins = a.packed ? std::vector<int>(3, tensor(a.packed))
                                    : std::vector<int>{tensor(a.q), tensor(a.k), tensor(a.v)};
    if (a.mask) ins.push_back(tensor(a.mask));
    step("attention", n->name() + " (attention)", ins, {define(n->output(0))}, p);
  }
  // A mask right-aligned to [b, h, q, cols]: element strides over b, h, q (size-1 dims broadcast).
  static std::vector<Dim> mask_strides(const Value* mask) {
    std::vector<Dim> m = mask->shape();
    while (m.size() < 4) m.insert(m.begin(), Dim(1));
    const std::vector<Dim> dense = contiguous_strides(m);
    std::vector<Dim> stride(3, Dim(0));
    for (int i = 0; i < 3; ++i) stride[i] = m[i] == Dim(1) ? Dim(0) : dense[i];
    return stride;
  }

  void emit_softmax(Node* n) {
    SoftmaxFusion f;
    if (auto it = softmax_.find(n); it != softmax_.end()) f = it->second;
    else f.x = n->input(0);
    const auto& sh = f.x->shape();
    if (sh.empty() || norm_axis(n->attr_int("axis", -1), sh.size()) != static_cast<int64_t>(sh.size()) - 1)
      throw UnsupportedError(where(n) + ": softmax over an axis other than the last");
    int x = tensor(f.x);
    int mask = tensor(f.mask);
    Dim b(1), h(1), q = product(sh, 0, sh.size() - 1);
    if (sh.size() == 4) {
      b = sh[0];
      h = sh[1];
      q = sh[2];
    }
    JObject p{{"b", jdim(b)}, {"h", jdim(h)}, {"q", jdim(q)}, {"cols", jdim(sh.back())},
              {"scale", jnum(f.scale)}, {"causal", json::Value(f.causal)}};
    if (f.mask) p["mask_stride"] = jdims(mask_strides(f.mask));
    step("softmax", n->name(), {x, mask}, {define(n->output(0))}, p);
    if (!f.mask) out_.plan.steps.back().inputs.pop_back();
  }

  void emit_layernorm(Node* n) {
    const auto& sh = n->input(0)->shape();
    if (norm_axis(n->attr_int("axis", -1), sh.size()) != static_cast<int64_t>(sh.size()) - 1)
      throw UnsupportedError(where(n) + ": LayerNormalization over more than the last axis");
    if (n->num_outputs() > 1)
      for (size_t i = 1; i < n->num_outputs(); ++i)
        if (!n->output(i)->users().empty() || g_.is_graph_output(n->output(i)))
          throw UnsupportedError(where(n) + ": mean/inv-std outputs are not produced on the GPU");
    if (auto it = embedding_.find(n); it != embedding_.end()) {
      // inputs: gamma, beta (-1 when absent), then each term's table and ids.
      std::vector<int> ins{tensor(n->input(1)), tensor(n->num_inputs() > 2 ? n->input(2) : nullptr)};
      std::vector<Dim> offsets, strides;
      for (const EmbeddingTerm& t : it->second) {
        ins.push_back(tensor(t.table));
        ins.push_back(tensor(t.ids));
        offsets.push_back(t.offset);
        strides.insert(strides.end(), t.strides.begin(), t.strides.end());
      }
      JObject p{{"row_dims", jdims(std::vector<Dim>(sh.begin(), sh.end() - 1))}, {"cols", jdim(sh.back())},
                {"eps", jnum(n->attr_float("epsilon", 1e-5))}, {"offsets", jdims(offsets)}, {"strides", jdims(strides)}};
      step("embed_layernorm", n->name() + " (+" + std::to_string(it->second.size()) + " embedding gathers)", ins,
           {define(n->output(0))}, p);
      return;
    }
    Value* x = n->input(0);
    Value* res = nullptr;
    if (auto it = ln_residual_.find(n); it != ln_residual_.end()) {
      x = it->second->input(0);
      res = it->second->input(1);
    }
    std::vector<int> ins{tensor(x), tensor(n->input(1)), tensor(n->input(2)), tensor(res)};
    JObject p{{"rows", jdim(product(sh, 0, sh.size() - 1))}, {"cols", jdim(sh.back())},
              {"eps", jnum(n->attr_float("epsilon", 1e-5))}};
    std::vector<int> outs{define(n->output(0))};
    // An f32 model output that the plan also reads in the compute dtype (BERT's last_hidden_state,
    // which the pooler reads): the kernel writes it in f32 as well, instead of a cast step after it.
    const Value* y = n->output(0);
    if (y->dtype() == DType::f32 && output_needs_model_dtype(y)) {
      out_.plan.tensors[outs[0]].name = y->name() + ".compute";
      outs.push_back(add_tensor(info(y, DType::f32, runtime::TensorKind::activation, y->name())));
      model_output_[y] = outs.back();
      p["f32_copy"] = json::Value(true);
    }
    step("layernorm", n->name() + (res ? " (+residual add)" : ""), ins, outs, p);
  }

  void emit_gather(Node* n) {
    int64_t axis = norm_axis(n->attr_int("axis", 0), n->input(0)->shape().size());
    if (auto it = range_gather_.find(n); it != range_gather_.end()) {
      auto [start, limit, delta] = it->second;
      int x = tensor(n->input(0));
      step("slice", n->name() + " (gather of a range)", {x}, {define(n->output(0))},
           JObject{{"starts", jints({start})}, {"ends", jdims({limit})}, {"axes", jints({axis})},
                   {"steps", jints({delta})}});
      return;
    }
    int x = tensor(n->input(0));
    int idx = tensor(n->input(1));
    step("gather", n->name(), {x, idx}, {define(n->output(0))}, JObject{{"axis", jnum(double(axis))}});
  }

  void emit_slice(Node* n) {
    auto starts = dims_of(n->input(1)), ends = dims_of(n->input(2));
    std::optional<std::vector<Dim>> axes, steps;
    if (n->input(3)) axes = dims_of(n->input(3));
    if (n->input(4)) steps = dims_of(n->input(4));
    if (!starts || !ends || (n->input(3) && !axes) || (n->input(4) && !steps))
      throw UnsupportedError(where(n) + ": starts/ends/axes/steps computed from data at run time");
    const size_t rank = n->input(0)->shape().size();
    std::vector<Dim> ax;
    if (axes) {
      for (const Dim& a : *axes) {
        if (!a.is_static()) throw UnsupportedError(where(n) + ": symbolic axes");
        ax.push_back(Dim(norm_axis(a.value(), rank)));
      }
    } else {
      for (size_t i = 0; i < starts->size(); ++i) ax.push_back(Dim(static_cast<int64_t>(i)));
    }
    std::vector<Dim> st = steps ? *steps : std::vector<Dim>(starts->size(), Dim(1));
    int x = tensor(n->input(0));
    step("slice", n->name(), {x}, {define(n->output(0))},
         JObject{{"starts", jdims(*starts)}, {"ends", jdims(*ends)}, {"axes", jdims(ax)}, {"steps", jdims(st)}});
  }

  // Depthwise conv -> native "depthwise_conv": NHWC in and out, the filter [C,1,R,S] as [R,S,C].
  // Other grouped convs -> native "grouped_conv", the same kernel entry with `k` and `groups`: the
  // filter [K,C/G,R,S] as [R,S,C/G,K] (for depthwise the same bytes as [R,S,C]).
  void emit_depthwise(Node* n) {
    const Value* w = n->input(1);
    const ir::Tensor wc = w->constant().dtype() == o_.dtype || !ir::is_float(w->constant().dtype())
                              ? w->constant() : w->constant().cast(o_.dtype);
    const auto& wd = wc.dims();
    const int64_t K = wd[0], CG = wd[1], R = wd[2], S = wd[3];
    const bool depthwise = is_depthwise(n);
    const size_t es = ir::size_of(wc.dtype());
    ir::Tensor rsc(wc.dtype(), depthwise ? std::vector<int64_t>{R, S, K} : std::vector<int64_t>{R, S, CG, K});
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < CG; ++j)
        for (int64_t r = 0; r < R; ++r)
          for (int64_t q = 0; q < S; ++q)
            std::memcpy(rsc.mutable_bytes() + static_cast<size_t>(((r * S + q) * CG + j) * K + k) * es,
                        wc.bytes() + static_cast<size_t>(((k * CG + j) * R + r) * S + q) * es, es);
    const int64_t C = CG * n->attr_int("group", 1);  // input channels
    runtime::TensorInfo ti;
    ti.name = w->name() + (depthwise ? ".rsc" : ".rsck");
    ti.kind = runtime::TensorKind::weight;
    for (int64_t d : rsc.dims()) ti.shape.push_back(runtime::DimExpr::parse(std::to_string(d)));
    int wt = add_weight(std::move(rsc), std::move(ti));
    int x = tensor_nhwc(n->input(0));
    int b = n->num_inputs() > 2 ? tensor(n->input(2)) : -1;
    // A fused Relu/Clip (depthwise_activation_fusion) writes its output from this step.
    const auto act = dw_act_.find(n);
    const Value* y = act != dw_act_.end() ? act->second.node->output(0) : n->output(0);
    if (!nhwc_.count(y)) throw std::logic_error("lower: depthwise output not NHWC (invariant: assign_layouts)");
    const auto& xs = n->input(0)->shape();
    const auto& ys = n->output(0)->shape();
    auto pads = n->attr_ints("pads", {0, 0, 0, 0});
    JObject p{{"n", jdim(xs[0])}, {"h", jdim(xs[2])}, {"w", jdim(xs[3])}, {"c", jnum(double(C))},
              {"r", jnum(double(R))}, {"s", jnum(double(S))}, {"p", jdim(ys[2])}, {"q", jdim(ys[3])},
              {"pads", jints({pads[0], pads[1]})},
              {"strides", jints(n->attr_ints("strides", {1, 1}))},
              {"dilations", jints(n->attr_ints("dilations", {1, 1}))}};
    if (!depthwise) p["k"] = jnum(double(K)), p["groups"] = jnum(double(n->attr_int("group", 1)));
    std::string name = n->name();
    if (act != dw_act_.end()) {
      const DwActivation& a = act->second;
      p["clamp"] = clamp_json(a.lo, a.hi);
      name += " + " + a.node->op() + " " + a.node->name();
    }
    step(depthwise ? "depthwise_conv" : "grouped_conv", name, {x, wt, b}, {define(y)}, std::move(p));
  }

  // MaxPool / AveragePool, NCHW or (inside a conv region) NHWC, explicit pads only.
  void emit_pool(Node* n) {
    if (n->input(0)->shape().size() != 4) throw UnsupportedError(where(n) + ": only 2-D pooling (NCHW) runs on the GPU");
    if (n->attr_string("auto_pad", "NOTSET") != "NOTSET" && n->attr_string("auto_pad", "NOTSET") != "VALID")
      throw UnsupportedError(where(n) + ": auto_pad " + n->attr_string("auto_pad", "") + " (export with explicit pads)");
    if (n->num_outputs() > 1 && (!n->output(1)->users().empty() || g_.is_graph_output(n->output(1))))
      throw UnsupportedError(where(n) + ": the Indices output is not produced on the GPU");
    auto pads = n->attr_ints("pads", {0, 0, 0, 0});
    const bool in_nhwc = nhwc_.count(n->output(0)) != 0;
    int x = in_nhwc ? tensor_nhwc(n->input(0)) : tensor(n->input(0));
    step("pool2d", n->name(), {x}, {define(n->output(0))},
         JObject{{"kind", jstr(n->op() == "MaxPool" ? "max" : "average")},
                 {"layout", jstr(in_nhwc ? "nhwc" : "nchw")},
                 {"kernel", jints(n->attr_ints("kernel_shape"))},
                 {"stride", jints(n->attr_ints("strides", {1, 1}))},
                 {"dilation", jints(n->attr_ints("dilations", {1, 1}))},
                 {"pads", jints(pads)},
                 {"ceil_mode", json::Value(n->attr_int("ceil_mode", 0) != 0)},
                 {"count_include_pad", json::Value(n->attr_int("count_include_pad", 0) != 0)}});
  }

  // Expand: a strided read with stride 0 on the broadcast dims.
  void emit_expand(Node* n) {
    const auto& in = n->input(0)->shape();
    const auto& out = n->output(0)->shape();
    std::vector<Dim> strides(out.size(), Dim(0));
    const std::vector<Dim> dense = contiguous_strides(in);
    for (size_t i = 0; i < in.size(); ++i) {
      size_t ii = in.size() - 1 - i, oi = out.size() - 1 - i;
      strides[oi] = (in[ii] == Dim(1) && out[oi] != Dim(1)) ? Dim(0) : dense[ii];
    }
    int x = tensor(n->input(0));
    step("strided_copy", n->name() + " (expand)", {x}, {define(n->output(0))},
         JObject{{"offset", jstr("0")}, {"strides", jdims(strides)}});
  }

  void emit_reduce(Node* n) {
    static const std::map<std::string, std::string> kinds = {
        {"ReduceSum", "sum"}, {"ReduceMean", "mean"}, {"ReduceMax", "max"},
        {"ReduceMin", "min"}, {"ReduceProd", "prod"}, {"ReduceSumSquare", "sum_square"}};
    auto k = kinds.find(n->op());
    if (k == kinds.end()) throw UnsupportedError(where(n) + ": no GPU lowering for this op");
    std::vector<int64_t> axes;
    if (n->input(1)) {
      if (!n->input(1)->is_constant()) throw UnsupportedError(where(n) + ": axes computed at run time");
      for (int64_t a : n->input(1)->constant().to_i64_vector())
        axes.push_back(norm_axis(a, n->input(0)->shape().size()));
    }
    if (axes.empty() && n->attr_int("noop_with_empty_axes", 0)) {
      int x = tensor(n->input(0));
      step("copy", n->name(), {x}, {define(n->output(0))}, JObject{});
      return;
    }
    int x = tensor(n->input(0));
    step("reduce", n->name(), {x}, {define(n->output(0))}, JObject{{"kind", jstr(k->second)}, {"axes", jints(axes)}});
  }

  // ---- GEMM regions --------------------------------------------------------------------------
  static Dim attr_dim(const Node* n, const std::string& k) {
    const auto& v = n->attrs().at(k);
    if (auto i = std::get_if<int64_t>(&v)) return Dim(*i);
    if (auto s = std::get_if<std::string>(&v))
      if (auto d = Dim::parse(*s)) return *d;
    throw std::logic_error("lower: Composite attribute '" + k + "' is not a dim (invariant: docs/IR.md Composite attrs)");
  }

  // A Composite's inputs by role (docs/IR.md: comma-joined when one value plays two roles).
  static std::map<std::string, Value*> roles_of(const Node* n) {
    std::map<std::string, Value*> role;
    std::vector<std::string> roles;
    if (auto it = n->attrs().find("roles"); it != n->attrs().end())
      if (auto r = std::get_if<std::vector<std::string>>(&it->second)) roles = *r;
    for (size_t i = 0; i < roles.size() && i < n->num_inputs(); ++i) {
      std::stringstream ss(roles[i]);
      std::string r;
      while (std::getline(ss, r, ',')) role[r] = n->input(i);
    }
    return role;
  }

  // Channels that break the 16-byte access (the RGB stem's C=3) would put the conv on alignment-1
  // analytic kernels: ResNet-50's 7x7 stem took 2.0 of its 4.1 ms at batch 32 on the H200 so.
  // Where X enters NHWC through a conversion (an NCHW activation: the model's images), that
  // conversion writes C rounded up to the access width, zeros in the new channels, and the filter
  // gets zero taps there: the same sums, on the aligned kernels. Returns that width, or 0 where
  // X is already NHWC (a conv's or pool's output: padding would cost a pass), C and K are not
  // both static, or K breaks the access too. Where this pads, a small conv (the stem) runs as
  // im2col + GEMM (emit_im2col_gemm) or one stem_conv step (emit_stem_conv) instead when
  // LowerOptions::stem says so.
  int64_t channel_padding(const Value* X, const Value* W) const {
    if (nhwc_.count(X) || X->is_constant() || !W->is_constant()) return 0;
    const auto& xs = X->shape();
    const auto& ws = W->shape();
    if (!xs[1].is_static() || !ws[0].is_static() || !ws[1].is_static() || ws[1].value() != xs[1].value()) return 0;
    const int64_t c = xs[1].value();
    const int64_t full = cutlass_backend::max_alignment(o_.dtype);
    const int64_t cp = (c + full - 1) / full * full;
    if (cp == c || cutlass_backend::static_alignment(o_.dtype, {{"C", Dim(cp)}, {"K", ws[0]}}) != full) return 0;
    return cp;
  }

  // A conv region -> one "conv" step: X and the residual NHWC, the filter KRSC (transposed here,
  // once), Y NHWC; the kernel from LowerOptions::pick_conv.
  void emit_conv(Node* n) {
    const std::string pattern = n->attr_string("pattern", "");
    if (!o_.pick_conv)
      throw UnsupportedError(where(n) + " [" + pattern + "]: conv offload is not implemented yet (issue 7): no conv "
                             "kernel picker in this build");
    std::map<std::string, Value*> role = roles_of(n);
    Value* X = role["X"];
    Value* W = role["W"];
    Value* bias = role.count("bias") ? role["bias"] : nullptr;
    Value* res = role.count("residual") ? role["residual"] : nullptr;
    if (!X || !W) throw std::logic_error("lower: Composite " + n->name() + " lacks an X or W role (invariant: docs/IR.md)");
    const ir::Node* conv = nullptr;
    if (const auto& body = n->attr_graph("body"))
      for (const ir::Node* b : body->nodes())
        if (b->op() == "Conv") conv = b;
    if (!conv) throw std::logic_error("lower: conv Composite " + n->name() + " has no Conv in its body (invariant: docs/IR.md)");
    const auto& xs = X->shape();
    const auto& ws = W->shape();
    const Value* Y = n->output(0);
    const auto& ys = Y->shape();
    if (xs.size() != 4 || ws.size() != 4 || ys.size() != 4)
      throw std::logic_error("lower: conv Composite " + n->name() + " is not 2-D (invariant: check_conv)");
    auto pads = conv->attr_ints("pads", {0, 0, 0, 0});
    auto strides = conv->attr_ints("strides", {1, 1});
    auto dil = conv->attr_ints("dilations", {1, 1});
    const int64_t groups = conv->attr_int("group", 1);
    if (pads.size() != 4 || strides.size() != 2 || dil.size() != 2)
      throw UnsupportedError(where(n) + " [" + pattern + "]: pads/strides/dilations are not 2-D");
    if (pads[0] != pads[2] || pads[1] != pads[3])
      throw UnsupportedError(where(n) + " [" + pattern + "]: asymmetric pads [" + std::to_string(pads[0]) + "," + std::to_string(pads[1]) + "," +
                             std::to_string(pads[2]) + "," + std::to_string(pads[3]) + "]" +
                             ": the conv kernels pad both sides of a dim alike");
    const std::string epilogue = n->attr_string("epilogue", "linear");
    const std::string dt(ir::name(o_.dtype));
    const int64_t c_pad = channel_padding(X, W);
    if (c_pad && o_.stem == Stem::direct && emit_stem_conv(n, conv, X, W, bias, res, groups, epilogue)) return;
    if (c_pad && o_.stem != Stem::conv && !res && groups == 1 && emit_im2col_gemm(n, conv, X, W, bias, c_pad, epilogue))
      return;
    if (!c_pad && o_.pointwise_gemm && groups == 1 && emit_pointwise_gemm(n, conv, X, W, bias, res, epilogue)) return;
    ConvProblem prob;
    prob.dtype = dt;
    prob.epilogue = epilogue;
    prob.n = eval_hi(xs[0]);
    prob.c = c_pad ? c_pad : eval_hi(xs[1]);
    prob.h = eval_hi(xs[2]);
    prob.w = eval_hi(xs[3]);
    prob.k = eval_hi(ws[0]);
    prob.r = eval_hi(ws[2]);
    prob.s = eval_hi(ws[3]);
    prob.p = eval_hi(ys[2]);
    prob.q = eval_hi(ys[3]);
    prob.pad_h = pads[0];
    prob.pad_w = pads[1];
    prob.stride_h = strides[0];
    prob.stride_w = strides[1];
    prob.dil_h = dil[0];
    prob.dil_w = dil[1];
    prob.groups = groups;
    // A symbolic channel count can be anything, so it allows only 1.
    const Dim c_dim = c_pad ? Dim(c_pad) : xs[1];
    // A grouped conv's kernel reads each group's channels: their counts set the access width.
    prob.alignment = !c_dim.is_static() || !ws[0].is_static() ? 1
                     : groups > 1 ? cutlass_backend::static_alignment(o_.dtype, {{"C/group", Dim(c_dim.value() / groups)},
                                                                                 {"K/group", Dim(ws[0].value() / groups)}})
                                  : cutlass_backend::static_alignment(o_.dtype, {{"C", c_dim}, {"K", ws[0]}});
    for (int64_t v : {prob.n, prob.c, prob.h, prob.w, prob.k, prob.r, prob.s, prob.p, prob.q})
      if (v <= 0) throw UnsupportedError(where(n) + " [" + pattern + "]: conv dims do not evaluate over the symbol ranges");
    // One pick per batch bucket (powers of two over the batch range, as GEMM M buckets): a batch-1
    // layer leaves most SMs idle where batch 32 fills them, so they want other tiles and splits. The
    // runtime reads the table at M = n·p·q (resolve.h), so each entry ends at its batch times p·q.
    const int64_t n_lo = std::max<int64_t>(1, eval_lo(xs[0]));
    JArray dispatch;
    std::string last;
    for (int64_t nb : tune::m_buckets(std::min(n_lo, prob.n), prob.n)) {
      ConvProblem at = prob;
      at.n = nb;
      std::string kernel;
      try {
        kernel = o_.pick_conv(at);
      } catch (const std::invalid_argument& e) {
        throw UnsupportedError(where(n) + " [" + pattern + "]: no conv kernel: " + e.what());
      }
      if (kernel.empty()) throw UnsupportedError(where(n) + " [" + pattern + "]: the conv kernel picker returned no kernel");
      if (conv_seen_.insert(kernel).second) out_.conv_kernels.push_back(kernel);
      const double max_m = double(nb * prob.p * prob.q);
      if (kernel == last)
        dispatch.back() = json::Value(JObject{{"max_m", jnum(max_m)}, {"kernel", jstr(kernel)}});
      else
        dispatch.push_back(json::Value(JObject{{"max_m", jnum(max_m)}, {"kernel", jstr(kernel)}}));
      last = kernel;
    }
    dispatch.back() = json::Value(JObject{{"max_m", jnum(-1)}, {"kernel", jstr(last)}});  // the last covers any m
    if (c_pad) {
      // Which path the stem took and on what: the kernels of the dispatch table, and whether they
      // walk K = R·S·C packed (few_channels) or pad C to the tile's K at every tap.
      std::string kernels;
      bool few = true;
      for (const auto& e : dispatch) {
        const std::string k = e.obj().at("kernel").str();
        kernels += (kernels.empty() ? "" : ", ") + k;
        auto spec = cutlass_backend::parse_conv_kernel_name(k);
        few = few && spec && spec->config.iter == cutlass_backend::ConvIter::few_channels;
      }
      out_.notes.push_back("conv " + n->name() + ": input channels padded " + xs[1].str() + " -> " + std::to_string(c_pad) +
                           " at the NHWC boundary (zero channels, zero filter taps): alignment-" +
                           std::to_string(prob.alignment) + " kernels instead of alignment-" +
                           std::to_string(cutlass_backend::static_alignment(o_.dtype, {{"C", xs[1]}, {"K", ws[0]}})) +
                           "; runs as a conv step (" +
                           (o_.stem == Stem::conv ? "--stem conv" : "im2col + GEMM does not take it") +
                           ") on " + kernels +
                           (few ? " (few_channels: GEMM K = R*S*C = " + std::to_string(prob.r * prob.s * c_pad) +
                                      ", no padding to the tile's K)"
                                : ""));
    }
    JObject p{{"n", jdim(xs[0])}, {"h", jdim(xs[2])}, {"w", jdim(xs[3])}, {"c", jdim(c_dim)},
              {"k", jdim(ws[0])}, {"r", jdim(ws[2])}, {"s", jdim(ws[3])}, {"p", jdim(ys[2])}, {"q", jdim(ys[3])},
              {"pads", jints(pads)}, {"strides", jints(strides)}, {"dilations", jints(dil)},
              {"groups", jnum(double(groups))}, {"alpha", jnum(1)}, {"beta", jnum(res ? 1 : 0)},
              {"dtype", jstr(dt)}, {"epilogue", jstr(epilogue)}, {"pattern", jstr(pattern)},
              {"dispatch", json::Value(dispatch)}};
    std::vector<int> ins{tensor_nhwc(X, c_pad), tensor_nhwc(W, c_pad), tensor(bias), tensor_nhwc(res)};
    if (!nhwc_.count(Y)) throw std::logic_error("lower: conv output '" + Y->name() + "' is not NHWC (invariant: assign_layouts)");
    step("conv", n->name(), ins, {define(Y)}, p);
  }

  // The small-channel conv at the NCHW boundary (the RGB stem; emit_conv calls this where
  // channel_padding pads X) as im2col + GEMM (LowerOptions::stem): an "im2col" step reads X
  // as the graph has it (NCHW; a float model input itself, cast on the way) and writes
  // A [n·p·q, kp], column (r·S + s)·C + c, kp = R·S·C rounded up to the 16-byte access; the filter
  // [K,C,R,S] is repacked once to B [K, kp] with the same columns (zeros past R·S·C); a gemm step
  // ("tn", the conv's bias and epilogue) writes D [n·p·q, K], which is Y in NHWC. Padding C instead
  // reduces over R·S·8 (392 for ResNet's 147) with one tap per 16-byte load: the stem took 268 of
  // ResNet-50's 1665 us at batch 32 on the H200 so, and its NHWC conversion 49 more. Returns false
  // (the padded conv runs then) where the shape does not qualify (im2col_shape) or, with a note,
  // where no GEMM kernel fits.
  bool emit_im2col_gemm(const Node* n, const Node* conv, Value* X, Value* W, Value* bias, int64_t c_pad,
                        const std::string& epilogue) {
    const auto& xs = X->shape();
    const auto& ys = n->output(0)->shape();
    const ir::Tensor& wc = W->constant();  // [K, C, R, S]
    const int64_t K = wc.dims()[0], C = wc.dims()[1], R = wc.dims()[2], S = wc.dims()[3];
    const int64_t rsc = R * S * C;
    if (!cutlass_backend::im2col_shape(C, R, S)) return false;
    const int64_t vec = cutlass_backend::max_alignment(o_.dtype);
    const int64_t kp = (rsc + vec - 1) / vec * vec;
    const Dim m = xs[0] * ys[2] * ys[3];
    std::optional<JObject> p = conv_gemm_params(n, conv, m, Dim(K), Dim(kp), epilogue, false, "not run as im2col + GEMM",
                                                "its channels are padded instead");
    if (!p) return false;
    const int x = nchw_source(X);
    const int wt = packed_filter(W, kp, "im2col");
    runtime::TensorInfo at;
    at.name = conv->name() + ".im2col";
    at.dtype = o_.dtype;
    at.kind = runtime::TensorKind::activation;
    at.shape = {runtime::DimExpr::parse(m.str()), runtime::DimExpr::parse(std::to_string(kp))};
    const int a = add_tensor(std::move(at));
    const std::string cols = std::to_string(rsc) + " -> " + std::to_string(kp) + " columns";
    step("im2col", conv->name() + " (im2col, " + cols + ")", {x}, {a}, nchw_window_params(n, conv, X, C, R, S));
    step("gemm", n->name() + " (" + conv->name() + " on its im2col)", {a, wt, tensor(bias), -1}, {define(n->output(0))}, *p);
    ++im2col_;
    out_.notes.push_back("conv " + conv->name() + " (" + n->name() + "): im2col (" + cols +
                         ") + GEMM instead of a C-padded (" + std::to_string(C) + " -> " + std::to_string(c_pad) +
                         ") implicit-GEMM conv, reading " + X->name() + " in NCHW (--stem conv: the padded conv)");
    return true;
  }

  // The small-channel conv at the NCHW boundary as one native kernel (Stem::direct; emit_conv calls
  // this where channel_padding pads X): a "stem_conv" step reads X as the graph has it (NCHW; a
  // float model input itself, cast on the way) and the filter packed as im2col's B with the columns
  // rounded up to the kernel's 16-column steps, and writes Y in NHWC, bias and clamp (relu, relu6)
  // applied to the f32 sums: no A [n·p·q, cols] through memory and no GEMM, so nothing to tune.
  // Returns false, with a note saying why (it then runs as Stem::im2col has it), where the conv does
  // not qualify as for im2col, the epilogue is not one the kernel applies, or
  // native::stem_conv_unsupported refuses the shape.
  bool emit_stem_conv(const Node* n, const Node* conv, Value* X, Value* W, Value* bias, const Value* res,
                      int64_t groups, const std::string& epilogue) {
    const ir::Tensor& wc = W->constant();  // [K, C, R, S]
    const int64_t K = wc.dims()[0], C = wc.dims()[1], R = wc.dims()[2], S = wc.dims()[3];
    const int64_t rsc = R * S * C;
    // Each tap's channels padded to 4 (C = 3) or 8, the columns rounded up to the kernel's 16-column steps.
    const int64_t cols = native::stem_conv_cols(C, R, S);
    const auto strides = conv->attr_ints("strides", {1, 1});
    const auto dil = conv->attr_ints("dilations", {1, 1});
    // What the step will read: the model's float input itself while nothing has cast it (nchw_source).
    const DType x_dtype = pending_cast_.count(X) ? X->dtype() : storage(X->dtype());
    using cutlass_backend::Act;
    const std::optional<cutlass_backend::EpilogueSpec> epi = cutlass_backend::parse_epilogue(epilogue);
    std::string why;
    if (res) why = "a residual, which the kernel does not add";
    else if (groups != 1) why = "groups = " + std::to_string(groups);
    else if (!cutlass_backend::im2col_shape(C, R, S))
      why = "C = " + std::to_string(C) + ", R*S*C = " + std::to_string(rsc) + ": im2col_shape refuses it";
    else if (!epi || epi->residual != cutlass_backend::Residual::none ||
             (epi->act != Act::none && epi->act != Act::relu && epi->act != Act::relu6))
      why = "epilogue " + epilogue + ": the kernel applies a bias and relu or relu6 only";
    else why = native::stem_conv_unsupported(x_dtype, o_.dtype, C, R, S, K, cols, strides[0], strides[1], dil[0], dil[1]);
    if (!why.empty()) {
      out_.notes.push_back("conv " + conv->name() + " (" + n->name() + "): not one stem_conv kernel (" + why +
                           "); it runs as with --stem im2col");
      return false;
    }
    if (!nhwc_.count(n->output(0)))
      throw std::logic_error("lower: conv output '" + n->output(0)->name() + "' is not NHWC (invariant: assign_layouts)");
    JObject p = nchw_window_params(n, conv, X, C, R, S);
    p["k"] = jnum(double(K));
    p["dtype"] = jstr(std::string(ir::name(o_.dtype)));
    p["epilogue"] = jstr(epilogue);
    if (epi->act != Act::none) p["clamp"] = clamp_json(0, epi->act == Act::relu6 ? 6 : INFINITY);
    const int x = nchw_source(X);
    const int wt = packed_filter(W, cols, "stem_conv", [&](int64_t r, int64_t s, int64_t c) {
      return native::stem_conv_column(C, S, r, s, c);
    });
    const int b = tensor(bias);
    const std::string cols_text = "R*S*C = " + std::to_string(rsc) + " in " + std::to_string(cols) + " columns, " +
                                  std::to_string(native::stem_conv_channel_pitch(C)) + " a tap";
    step("stem_conv", n->name() + " (" + conv->name() + ", one stem_conv kernel, " + cols_text + ")", {x, wt, b},
         {define(n->output(0))}, std::move(p));
    ++stem_conv_;
    out_.notes.push_back("conv " + conv->name() + " (" + n->name() +
                         "): one stem_conv kernel (im2col in shared memory + tensor-core MMA, " + cols_text +
                         ") reading " + X->name() + " in NCHW (--stem im2col: im2col + GEMM; --stem conv: the padded conv)");
    return true;
  }

  // A fused Relu/Clip as a step's "clamp" param (depthwise_conv, stem_conv): [lo, hi], an infinite
  // bound as null (JSON has no infinity).
  static json::Value clamp_json(double lo, double hi) {
    auto bound = [](double v) { return std::isinf(v) ? json::Value() : jnum(v); };
    return json::Value(JArray{bound(lo), bound(hi)});
  }

  // X as a step that reads NCHW takes it (im2col, stem_conv): a float model input nothing has cast
  // yet is read itself (the step casts on the way), anything else through tensor().
  int nchw_source(const Value* X) {
    auto raw = pending_cast_.find(X);
    const int x = raw != pending_cast_.end() ? raw->second : tensor(X);
    if (x < 0) throw AfterRefusal{};
    return x;
  }

  // The filter W [K, C, R, S] as the matrix [K, cols] the stem's steps read (im2col's B,
  // stem_conv's w): [k, column(r, s, c)] = W[k, c, r, s], zeros in every other column. im2col's
  // columns are (r·S + s)·C + c (the default); stem_conv pads each tap's channels (stem_conv_column).
  // A weight named <W>.<suffix>.
  int packed_filter(const Value* W, int64_t cols, const std::string& suffix,
                    const std::function<int64_t(int64_t, int64_t, int64_t)>& column = {}) {
    const ir::Tensor& wc = W->constant();
    const int64_t K = wc.dims()[0], C = wc.dims()[1], R = wc.dims()[2], S = wc.dims()[3];
    const size_t es = ir::size_of(wc.dtype());
    ir::Tensor b(wc.dtype(), {K, cols});
    std::memset(b.mutable_bytes(), 0, b.nbytes());
    for (int64_t k = 0; k < K; ++k)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t r = 0; r < R; ++r)
          for (int64_t q = 0; q < S; ++q)
            std::memcpy(b.mutable_bytes() + static_cast<size_t>(k * cols + (column ? column(r, q, c) : (r * S + q) * C + c)) * es,
                        wc.bytes() + static_cast<size_t>(((k * C + c) * R + r) * S + q) * es, es);
    runtime::TensorInfo bt;
    bt.name = W->name() + "." + suffix;
    bt.kind = runtime::TensorKind::weight;
    bt.shape = {runtime::DimExpr::parse(std::to_string(K)), runtime::DimExpr::parse(std::to_string(cols))};
    return add_weight(std::move(b), std::move(bt));
  }

  // The params of a step that slides the conv's window over X in NCHW (im2col, stem_conv): x's
  // n, c, h, w, the filter's r and s, Y's p and q, and the conv's pads, strides and dilations.
  static JObject nchw_window_params(const Node* n, const Node* conv, const Value* X, int64_t C, int64_t R, int64_t S) {
    const auto& xs = X->shape();
    const auto& ys = n->output(0)->shape();
    return JObject{{"n", jdim(xs[0])}, {"c", jnum(double(C))}, {"h", jdim(xs[2])}, {"w", jdim(xs[3])},
                   {"r", jnum(double(R))}, {"s", jnum(double(S))}, {"p", jdim(ys[2])}, {"q", jdim(ys[3])},
                   {"pads", jints(conv->attr_ints("pads", {0, 0, 0, 0}))},
                   {"strides", jints(conv->attr_ints("strides", {1, 1}))},
                   {"dilations", jints(conv->attr_ints("dilations", {1, 1}))}};
  }

  // A 1x1 conv with stride 1, no padding, dilation 1 and one group (ResNet's bottleneck ends,
  // MobileNetV2's expand and project convs) as a "gemm" step (LowerOptions::pointwise_gemm): X in
  // NHWC is A [n·h·w, C] and Y in NHWC is D [n·h·w, K] as they lie, the KRSC filter is B [K, C]
  // ("tn"), and the residual (NHWC) is R [n·h·w, K]; the conv's bias and epilogue carry over.
  // The GEMM kernels are persistent (an SM90 pingpong CTA overlaps one tile's epilogue with the
  // next tile's mainloop, which a reduction of 64 channels needs: ResNet-50's first-stage 64 -> 256
  // residual convs ran 75-78 us each on the H200 as non-persistent implicit-GEMM convs at batch
  // 32, three times their bytes' time), launch with PDL and are tuned over more tiles. Returns
  // false (the conv step runs) where the shape does not qualify or, with a note, where no GEMM
  // kernel takes the epilogue.
  bool emit_pointwise_gemm(const Node* n, const Node* conv, Value* X, Value* W, Value* bias, Value* res,
                           const std::string& epilogue) {
    const auto& xs = X->shape();
    const auto& ws = W->shape();
    const auto& ys = n->output(0)->shape();
    auto all = [](const std::vector<int64_t>& v, int64_t x) {
      return std::all_of(v.begin(), v.end(), [x](int64_t e) { return e == x; });
    };
    if (!(ws[2] == Dim(1)) || !(ws[3] == Dim(1)) || !all(conv->attr_ints("strides", {1, 1}), 1) ||
        !all(conv->attr_ints("pads", {0, 0, 0, 0}), 0) || !all(conv->attr_ints("dilations", {1, 1}), 1))
      return false;
    if (!(xs[2] == ys[2]) || !(xs[3] == ys[3])) return false;  // shape inference agrees: 1x1, stride 1
    std::optional<JObject> p = conv_gemm_params(n, conv, xs[0] * xs[2] * xs[3], ws[0], xs[1], epilogue, res != nullptr,
                                                "1x1, but not run as a GEMM", "the conv kernels run it");
    if (!p) return false;
    step("gemm", n->name() + " (" + conv->name() + ", 1x1 as a GEMM)",
         {tensor_nhwc(X), tensor_nhwc(W), tensor(bias), tensor_nhwc(res)}, {define(n->output(0))}, *p);
    ++pointwise_;
    return true;
  }

  // The gemm step params of a conv region run as one unbatched "tn" GEMM (emit_im2col_gemm,
  // emit_pointwise_gemm), its output Y already NHWC; nullopt, with a note saying `refused` and
  // `instead`, where no GEMM kernel takes the problem.
  std::optional<JObject> conv_gemm_params(const Node* n, const Node* conv, const Dim& m, const Dim& nn, const Dim& k,
                                          const std::string& epilogue, bool residual, const std::string& refused,
                                          const std::string& instead) {
    if (!nhwc_.count(n->output(0)))
      throw std::logic_error("lower: conv output '" + n->output(0)->name() + "' is not NHWC (invariant: assign_layouts)");
    JObject p{{"stride_a", jstr("0")}, {"stride_b", jstr("0")}, {"stride_d", jstr("0")}, {"stride_r", jstr("0")}};
    try {
      p = gemm_params(n, std::move(p), m, nn, k, Dim(1), "tn", epilogue, residual);
    } catch (const UnsupportedError& e) {
      out_.notes.push_back("conv " + conv->name() + " (" + n->name() + "): " + refused + " (" + e.what() + "); " + instead);
      return std::nullopt;
    }
    p["pattern"] = jstr(n->attr_string("pattern", ""));
    return p;
  }

  // A gemm step's params for D[m,n] = epilogue(A[m,k]·B + bias, residual) (docs/RUNTIME.md): dims,
  // leading dimensions, dtype, layout and the dispatch table(s) LowerOptions::pick gives the problem;
  // `p` brings the batch strides. Throws UnsupportedError when no kernel fits.
  JObject gemm_params(const Node* n, JObject p, const Dim& m, const Dim& nn, const Dim& k, const Dim& batch,
                      const std::string& layout, const std::string& epilogue, bool residual) {
    p["m"] = jdim(m);
    p["n"] = jdim(nn);
    p["k"] = jdim(k);
    p["batch"] = jdim(batch);
    p["lda"] = jdim(k);
    p["ldb"] = jdim(layout == "tn" ? k : nn);
    p["ldd"] = jdim(nn);
    p["ldr"] = jdim(nn);
    p["alpha"] = jnum(1);
    p["beta"] = jnum(residual ? 1 : 0);
    const std::string dt(ir::name(o_.dtype));
    p["dtype"] = jstr(dt);
    p["layout"] = jstr(layout);
    p["epilogue"] = jstr(epilogue);

    // The problem the picker sees: symbolic N/K/batch at their largest value; alignment from the
    // extents (a symbolic contiguous extent can be anything, so it allows only 1).
    tune::GemmProblem prob;
    prob.dtype = dt;
    prob.layout = layout;
    prob.epilogue = epilogue;
    prob.n = eval_hi(nn);
    prob.k = eval_hi(k);
    prob.batch = eval_hi(batch);
    prob.m_min = eval_lo(m);
    prob.m_max = eval_hi(m);
    const int static_align = cutlass_backend::static_alignment(o_.dtype, {{"N", nn}, {"K", k}});
    const int align = nn.is_static() && k.is_static() ? static_align : 1;
    prob.alignment = align;
    if (prob.n <= 0 || prob.k <= 0 || prob.m_max <= 0 || prob.batch <= 0)
      throw UnsupportedError(where(n) + ": GEMM dims do not evaluate over the symbol ranges");
    std::vector<tune::DispatchEntry> table;
    try {
      table = o_.pick(prob);
    } catch (const std::invalid_argument& e) {
      throw UnsupportedError(where(n) + ": no GEMM kernel for " + tune::workload_key(prob, prob.m_max) + ": " + e.what());
    }
    if (table.empty()) throw UnsupportedError(where(n) + ": the kernel picker returned no kernel");
    auto dispatch = [&](const std::vector<tune::DispatchEntry>& t) {
      JArray disp;
      for (size_t i = 0; i < t.size(); ++i) {
        const auto& e = t[i];
        int64_t max_m = i + 1 == t.size() ? -1 : e.max_m;  // the last entry covers any m
        disp.push_back(json::Value(JObject{{"max_m", jnum(double(max_m))}, {"kernel", jstr(e.kernel)}}));
        if (!gemm_seen_.count(e.kernel)) {
          gemm_seen_.insert(e.kernel);
          out_.gemm_kernels.push_back(e.kernel);
        }
      }
      return json::Value(disp);
    };
    p["dispatch"] = dispatch(table);
    // A symbolic N or K (attention's sequence length) forces alignment-1 kernels, slow on every
    // length; add a second table the runtime takes when the actual extents are aligned.
    if (align < static_align) {
      tune::GemmProblem aligned = prob;
      aligned.alignment = static_align;
      try {
        auto t = o_.pick(aligned);
        if (!t.empty()) {
          p["dispatch_aligned"] = dispatch(t);
          p["aligned_to"] = jnum(static_align);
        }
      } catch (const std::invalid_argument&) {
        // no kernel for the aligned case: the alignment-1 table serves every length
      }
    }
    return p;
  }

  void emit_composite(Node* n) {
    const std::string kind = n->attr_string("kind", "");
    if (kind == "conv2d_fprop") return emit_conv(n);
    if (kind != "gemm" && kind != "batched_gemm")
      throw UnsupportedError(where(n) + ": unknown Composite kind '" + kind + "'");
    std::map<std::string, Value*> role = roles_of(n);
    Value* A = role["A"];
    Value* B = role["B"];
    if (!A || !B) throw std::logic_error("lower: Composite " + n->name() + " lacks an A or B role (invariant: docs/IR.md)");
    const std::string layout = n->attr_string("layout", "tn");
    const std::string epilogue = n->attr_string("epilogue", "linear");
    const Value* D = n->output(0);
    const auto& dsh = D->shape();
    Dim m, nn = attr_dim(n, "n"), k = attr_dim(n, "k"), batch(1);
    JObject p;
    if (kind == "gemm") {
      m = product(dsh, 0, dsh.size() - 1);
      p["stride_a"] = jstr("0");
      p["stride_b"] = jstr("0");
      p["stride_d"] = jstr("0");
      p["stride_r"] = jstr("0");
    } else {
      m = attr_dim(n, "m");
      batch = attr_dim(n, "batch");
      auto stride = [&](const Value* v, const Dim& mat) -> Dim {
        const auto& s = v->shape();
        Dim lead = product(s, 0, s.size() - 2);
        if (lead == Dim(1)) return Dim(0);
        if (lead == batch) return mat;
        throw UnsupportedError(where(n) + ": operand '" + v->name() + "' broadcasts over part of the batch dims " +
                               ir::str(s));
      };
      p["stride_a"] = jdim(stride(A, m * k));
      p["stride_b"] = jdim(stride(B, k * nn));
      p["stride_d"] = jdim(m * nn);
      p["stride_r"] = jdim(role.count("residual") && role["residual"] ? stride(role["residual"], m * nn) : Dim(0));
    }
    p = gemm_params(n, std::move(p), m, nn, k, batch, layout, epilogue, role.count("residual") && role["residual"]);
    p["pattern"] = jstr(n->attr_string("pattern", ""));
    if (auto it = row_gather_.find(n); it != row_gather_.end()) {
      const auto& xs = it->second.x->shape();
      p["lda"] = jdim(xs[1] * k);
      p["a_offset"] = jdim(Dim(it->second.row) * k);
      A = it->second.x;
    }
    std::vector<int> ins{tensor(A), tensor(B), tensor(role.count("bias") ? role["bias"] : nullptr),
                         tensor(role.count("residual") ? role["residual"] : nullptr)};
    step("gemm", n->name(), ins, {define(D)}, p);
  }

  const ir::Graph& g_;
  const LowerOptions& o_;
  Lowered out_;
  size_t weights_size_ = 0;  // the weights blob's size so far (also when LowerOptions::weights is off)
  std::vector<Node*> order_;
  std::map<const Node*, size_t> pos_;
  std::vector<runtime::SymbolRange> symbols_;
  std::map<std::string, int64_t> lo_, hi_;
  std::set<const Node*> needed_, absorbed_;
  struct DwActivation {
    const Node* node;  // the absorbed Relu or Clip
    double lo, hi;     // its bounds; +-inf where unbounded
  };
  std::map<const Node*, DwActivation> dw_act_;
  std::map<const Node*, SoftmaxFusion> softmax_;
  std::map<const Node*, Node*> ln_residual_;
  std::map<const Node*, std::vector<EmbeddingTerm>> embedding_;  // LayerNorm -> its embedding terms
  std::map<const Value*, int> model_output_;  // model output -> the tensor its step writes in the model's dtype
  struct RowGather {
    size_t input;  // the Composite's operand that the Gather wrote
    Value* x;      // what the GEMM reads instead
    int64_t row;
  };
  std::map<const Node*, RowGather> row_gather_;  // GEMM Composite -> its A read in place
  std::map<const Node*, std::tuple<int64_t, Dim, int64_t>> range_gather_;
  std::vector<Group> groups_;
  std::map<const Node*, int> group_of_;
  std::map<const Value*, int> tid_;
  std::set<std::string> ew_seen_, gemm_seen_;
  std::set<const Value*> materialized_;
  std::map<const Node*, AttentionFusion> attention_;
  std::vector<std::string> unsupported_;
  std::set<const Value*> nhwc_;         // values stored NHWC
  std::map<const Value*, int> other_;   // value -> its tensor in the other layout (one conversion each)
  std::map<int64_t, std::map<const Value*, int>> padded_;  // c_pad -> value -> its NHWC tensor padded to c_pad channels
  std::map<const Value*, int> pending_cast_;  // float model input -> its tensor, while no cast to the compute dtype exists
  int permutes_ = 0;
  int im2col_ = 0;  // conv regions lowered to im2col + gemm
  int stem_conv_ = 0;  // conv regions lowered to one stem_conv step (Stem::direct)
  int pointwise_ = 0;  // 1x1 conv regions lowered to gemm (emit_pointwise_gemm)
  std::set<std::string> conv_seen_;
};

}  // namespace

std::string_view stem_name(Stem s) {
  switch (s) {
    case Stem::im2col: return "im2col";
    case Stem::conv: return "conv";
    case Stem::direct: return "direct";
  }
  return "?";
}

Stem parse_stem(const std::string& text) {
  for (Stem s : {Stem::im2col, Stem::conv, Stem::direct})
    if (text == stem_name(s)) return s;
  throw std::invalid_argument("--stem '" + text +
                              "': give im2col (an im2col step and a GEMM), conv (the channel-padded conv) or direct "
                              "(one stem_conv kernel reading the NCHW images)");
}

std::pair<int64_t, int64_t> default_range(const std::string& symbol) {
  std::string s = symbol;
  std::transform(s.begin(), s.end(), s.begin(), ::tolower);
  return {1, s.find("batch") != std::string::npos ? kDefaultBatchMax : kDefaultOtherMax};
}

DimRanges parse_dynamic(const std::string& text) {
  const std::string form = " (expected NAME=MIN..MAX[,NAME=MIN..MAX...], e.g. batch=1..256,seq=1..512)";
  DimRanges out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) throw std::invalid_argument("bad --dynamic entry '" + item + "'" + form);
    std::string name = item.substr(0, eq), range = item.substr(eq + 1);
    auto dots = range.find("..");
    auto num = [&](const std::string& s) {
      if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 12)
        throw std::invalid_argument("bad --dynamic entry '" + item + "': '" + s + "' is not a positive integer" + form);
      return std::stoll(s);
    };
    int64_t lo = num(dots == std::string::npos ? range : range.substr(0, dots));
    int64_t hi = dots == std::string::npos ? lo : num(range.substr(dots + 2));
    if (lo < 1 || hi < lo)
      throw std::invalid_argument("bad --dynamic entry '" + item + "': needs 1 <= MIN <= MAX" + form);
    if (out.count(name)) throw std::invalid_argument("--dynamic names '" + name + "' twice");
    out[name] = {lo, hi};
  }
  if (out.empty()) throw std::invalid_argument("empty --dynamic" + form);
  return out;
}

Lowered lower(const ir::Graph& g, const LowerOptions& opts) { return Lowerer(g, opts).run(); }

std::string gpu_route(const ir::Node& n, std::string* why) {
  std::string problem = n.op() == "Conv" ? depthwise_problem(&n) : "";
  if (n.op() == "Conv" && problem.empty())
    return is_depthwise(&n) ? "sabre's native NHWC depthwise kernel (depthwise_conv step)"
                            : "sabre's native NHWC grouped-conv kernel (grouped_conv step)";
  if (why) *why = n.op() == "Conv" && problem != "not grouped" ? problem : "GEMMs and convs have no GPU path outside the regions";
  return "";
}

}  // namespace sabre::codegen
