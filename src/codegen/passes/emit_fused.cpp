// Emitting fused steps: elementwise chains, attention, softmax, layernorm (plain, with its
// residual, or over embedding gathers).
#include <map>

#include "codegen/passes/emit.h"

namespace sabre::codegen::passes {
namespace {

// A mask right-aligned to [b, h, q, cols]: element strides over b, h, q (size-1 dims broadcast).
std::vector<Dim> mask_strides(const Value* mask) {
  std::vector<Dim> m = mask->shape();
  while (m.size() < 4) m.insert(m.begin(), Dim(1));
  const std::vector<Dim> dense = contiguous_strides(m);
  std::vector<Dim> stride(3, Dim(0));
  for (int i = 0; i < 3; ++i) stride[i] = m[i] == Dim(1) ? Dim(0) : dense[i];
  return stride;
}


}  // namespace

void emit_group(LowerContext& cx, const EwGroup& gr) {
  native::ElementwiseChain ch;
  std::map<const Value*, int> node_of;
  std::vector<int> step_ins;
  const bool in_nhwc = cx.nhwc.count(gr.nodes.back()->output(0)) != 0;
  auto operand = [&](const Value* v) -> int {
    if (auto it = node_of.find(v); it != node_of.end()) return it->second;
    if (scalar_constant(v))  // floats compute in f32; integer and bool constants keep their kind
      return ch.constant(static_cast<float>(v->constant().get_f64(0)), ir::is_float(v->dtype()) ? DType::f32 : v->dtype());
    int slot = static_cast<int>(ch.inputs.size());
    int t = in_nhwc ? cx.tensor_nhwc(v) : cx.tensor(v);
    if (t < 0) throw AfterRefusal{};
    ch.inputs.push_back(cx.out.plan.tensors[t].dtype);
    step_ins.push_back(t);
    return node_of[v] = ch.input(slot);
  };
  using native::EwOp;
  for (Node* m : gr.nodes) {
    EwOp op = ew_ops().at(m->op());
    std::vector<int> a;
    const bool clip = m->op() == "Clip";
    if (clip) a.push_back(operand(m->input(0)));
    else
      for (const Value* v : ew_operands(m)) a.push_back(operand(v));
    DType dt = cx.storage(m->output(0)->dtype());
    int r;
    if (m->op() == "Xor") {
      r = ch.unary(EwOp::logical_not, ch.binary(EwOp::equal, a[0], a[1]));
    } else if (m->op() == "Mean" || (a.size() != 2 && (m->op() == "Sum" || m->op() == "Min" || m->op() == "Max"))) {
      r = a.size() == 1 ? ch.cast(a[0], dt) : ch.binary(op, a[0], a[1]);
      for (size_t i = 2; i < a.size(); ++i) r = ch.binary(op, r, a[i]);
      if (m->op() == "Mean") r = ch.binary(EwOp::div, r, ch.constant(static_cast<float>(a.size()), DType::f32));
    } else if (op == EwOp::cast) {
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
  const bool model_dtype = !in_nhwc && tv->users().empty() && cx.output_needs_model_dtype(tv);
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
  if (!cx.ew_seen.count(kname)) {
    cx.ew_seen.insert(kname);
    cx.out.ew_kernels.push_back({kname, native::generate_elementwise_kernel(ch)});
  }
  std::string name = tail->name();
  if (gr.nodes.size() > 1) name += " (+" + std::to_string(gr.nodes.size() - 1) + " fused)";
  runtime::ElementwiseParams p;
  p.chain = std::move(ch);
  p.kernel = kname;
  cx.step(name, step_ins, {cx.define(tail->output(0), model_dtype ? tv->dtype() : cx.storage(tv->dtype()))},
          std::move(p));
}

void emit_attention(LowerContext& cx, Node* n, const AttentionFusion& a) {
  auto three = [](const Dim (&d)[3]) { return pdims({d[0], d[1], d[2]}); };
  runtime::AttentionParams p;
  p.b = pdim(a.b), p.h = ParamDim(a.heads), p.sq = pdim(a.sq), p.sk = pdim(a.sk), p.d = ParamDim(a.d);
  p.q_stride = three(a.q_stride), p.k_stride = three(a.k_stride);
  p.v_stride = three(a.v_stride), p.o_stride = three(a.o_stride);
  p.scale = a.scale, p.causal = a.causal;
  if (a.kv_group > 1) p.kv_group = ParamDim(a.kv_group);
  if (a.mask_strided) p.mask_stride = three(a.mask_stride);
  else if (a.mask) p.mask_stride = pdims(mask_strides(a.mask));
  if (a.mask_batch_inner) p.mask_batch = pdims({Dim(a.mask_batch_inner), a.mask_batch_outer});
  if (a.select) p.mask_true = a.mask_true, p.mask_false = a.mask_false;
  if (a.offset[0] != Dim(0) || a.offset[1] != Dim(0) || a.offset[2] != Dim(0)) p.offsets = three(a.offset);
  std::vector<int> ins{cx.tensor(a.q), cx.tensor(a.k), cx.tensor(a.v)};
  if (a.folded_mask) {  // constant additive terms summed (fuse_attention_bias.cpp)
    runtime::TensorInfo t;
    t.name = n->name() + ".bias";
    t.kind = runtime::TensorKind::weight;
    for (int64_t d : a.folded_mask->dims()) t.shape.push_back(runtime::DimExpr::parse(std::to_string(d)));
    ins.push_back(cx.add_weight(*a.folded_mask, std::move(t)));
  } else if (a.mask) {
    ins.push_back(cx.tensor(a.mask));
  }
  cx.step(n->name() + " (attention)", ins, {cx.define(n->output(0))}, std::move(p));
}
// (Log)Softmax over another axis: permuted to the last axis and back, around a softmax step.
static void emit_softmax_other_axis(LowerContext& cx, Node* n, int64_t axis) {
  const auto& sh = n->input(0)->shape();
  std::vector<int64_t> perm;  // axis to the end; the same perm maps back with its inverse
  for (int64_t i = 0; i < static_cast<int64_t>(sh.size()); ++i)
    if (i != axis) perm.push_back(i);
  perm.push_back(axis);
  std::vector<int64_t> back(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) back[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  std::vector<Dim> moved;
  for (int64_t p : perm) moved.push_back(sh[static_cast<size_t>(p)]);
  auto temp = [&](const std::string& suffix) {
    runtime::TensorInfo t;
    t.name = n->output(0)->name() + suffix;
    t.dtype = cx.storage(n->output(0)->dtype());
    for (const Dim& d : moved) t.shape.push_back(runtime::DimExpr::parse(d.str()));
    return cx.add_tensor(std::move(t));
  };
  const int x = cx.tensor(n->input(0)), xt = temp(".in_last"), yt = temp(".out_last");
  cx.step(n->name() + " (axis to last)", {x}, {xt}, runtime::PermuteParams{.perm = param_numbers(perm)});
  runtime::SoftmaxParams p;
  p.b = pdim(Dim(1)), p.h = pdim(Dim(1)), p.q = pdim(product(moved, 0, moved.size() - 1)), p.cols = pdim(moved.back());
  p.scale = 1.0, p.causal = false;
  if (n->op() == "LogSoftmax") p.log = true;
  cx.step(n->name(), {xt}, {yt}, std::move(p));
  cx.step(n->name() + " (axis back)", {yt}, {cx.define(n->output(0))}, runtime::PermuteParams{.perm = param_numbers(back)});
}

void emit_softmax(LowerContext& cx, Node* n) {
  SoftmaxFusion f;
  if (auto it = cx.softmax.find(n); it != cx.softmax.end()) f = it->second;
  else f.x = n->input(0);
  const auto& sh = f.x->shape();
  const int64_t axis = sh.empty() ? 0 : norm_axis(n->attr_int("axis", -1), sh.size());
  if (!sh.empty() && axis != static_cast<int64_t>(sh.size()) - 1 && !cx.softmax.count(n))
    return emit_softmax_other_axis(cx, n, axis);
  if (sh.empty() || axis != static_cast<int64_t>(sh.size()) - 1)
    throw UnsupportedError(where(n) + ": softmax over an axis other than the last");
  int x = cx.tensor(f.x);
  int mask = cx.tensor(f.mask);
  Dim b(1), h(1), q = product(sh, 0, sh.size() - 1);
  if (sh.size() == 4) {
    b = sh[0];
    h = sh[1];
    q = sh[2];
  }
  runtime::SoftmaxParams p;
  p.b = pdim(b), p.h = pdim(h), p.q = pdim(q), p.cols = pdim(sh.back()), p.scale = f.scale, p.causal = f.causal;
  if (f.mask) p.mask_stride = pdims(mask_strides(f.mask));
  if (n->op() == "LogSoftmax") p.log = true;
  cx.step(n->name(), {x, mask}, {cx.define(n->output(0))}, std::move(p));
  if (!f.mask) cx.out.plan.steps.back().inputs.pop_back();
}

void emit_layernorm(LowerContext& cx, Node* n) {
  const auto& sh = n->input(0)->shape();
  if (norm_axis(n->attr_int("axis", -1), sh.size()) != static_cast<int64_t>(sh.size()) - 1)
    throw UnsupportedError(where(n) + ": LayerNormalization over more than the last axis");
  if (n->num_outputs() > 1)
    for (size_t i = 1; i < n->num_outputs(); ++i)
      if (!n->output(i)->users().empty() || cx.g.is_graph_output(n->output(i)))
        throw UnsupportedError(where(n) + ": mean/inv-std outputs are not produced on the GPU");
  if (auto it = cx.embedding.find(n); it != cx.embedding.end()) {
    // inputs: gamma, beta (-1 when absent), then each term's table and ids.
    std::vector<int> ins{cx.tensor(n->input(1)), cx.tensor(n->num_inputs() > 2 ? n->input(2) : nullptr)};
    std::vector<Dim> offsets, strides;
    for (const EmbeddingTerm& t : it->second) {
      ins.push_back(cx.tensor(t.table));
      ins.push_back(cx.tensor(t.ids));
      offsets.push_back(t.offset);
      strides.insert(strides.end(), t.strides.begin(), t.strides.end());
    }
    runtime::EmbedLayerNormParams p{.row_dims = pdims(std::vector<Dim>(sh.begin(), sh.end() - 1)),
                                    .offsets = pdims(offsets),
                                    .strides = pdims(strides),
                                    .cols = pdim(sh.back()),
                                    .eps = n->attr_float("epsilon", 1e-5)};
    cx.step(n->name() + " (+" + std::to_string(it->second.size()) + " embedding gathers)", ins,
            {cx.define(n->output(0))}, std::move(p));
    return;
  }
  Value* x = n->input(0);
  Value* res = nullptr;
  if (auto it = cx.ln_residual.find(n); it != cx.ln_residual.end()) {
    x = it->second->input(0);
    res = it->second->input(1);
  }
  std::vector<int> ins{cx.tensor(x), cx.tensor(n->input(1)), cx.tensor(n->input(2)), cx.tensor(res)};
  runtime::LayerNormParams p;
  p.rows = pdim(product(sh, 0, sh.size() - 1)), p.cols = pdim(sh.back()), p.eps = n->attr_float("epsilon", 1e-5);
  std::vector<int> outs{cx.define(n->output(0))};
  // An f32 model output that the plan also reads in the compute dtype (BERT's last_hidden_state,
  // which the pooler reads): the kernel writes it in f32 as well, instead of a cast step after it.
  const Value* y = n->output(0);
  if (y->dtype() == DType::f32 && cx.output_needs_model_dtype(y)) {
    cx.out.plan.tensors[outs[0]].name = y->name() + ".compute";
    outs.push_back(cx.add_tensor(cx.info(y, DType::f32, runtime::TensorKind::activation, y->name())));
    cx.model_output[y] = outs.back();
    p.f32_copy = true;
  }
  cx.step(n->name() + (res ? " (+residual add)" : ""), ins, outs, std::move(p));
}


}  // namespace sabre::codegen::passes
