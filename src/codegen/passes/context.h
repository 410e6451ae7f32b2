// What the lowering passes (passes/pass.h) share: the graph and options, each fusion pass's
// decisions, and the plan being emitted with its tensor bookkeeping. The graph is never rewritten:
// a pass records what it decided here and later passes read it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backends/native/conv_act.h"
#include "backends/native/elementwise.h"
#include "codegen/lower.h"

namespace sabre::codegen::passes {

using ir::Dim;
using ir::DType;
using ir::Node;
using ir::Value;
using JArray = json::Array;
using JObject = json::Object;

inline constexpr int64_t kMaxFillValues = 16;  // values one "fill" step writes (native::kMaxFillValues)
inline constexpr size_t kMaxEmbedTerms = 4, kMaxEmbedRank = 4;  // an embed_layernorm step's (native::kMaxEmbed*)

// ---- step params (runtime/step_params.h) ------------------------------------------------------
using runtime::ParamDim;
using runtime::ParamDims;
// A dim of the graph as a step param: its text ("batch*seq", "768").
ParamDim pdim(const Dim& d);
ParamDims pdims(const std::vector<Dim>& v);
// Whole numbers (attribute lists: pads, perm, axes) as numbers.
using runtime::param_numbers;

// ---- graph helpers -------------------------------------------------------------------------
Dim product(const std::vector<Dim>& dims, size_t begin, size_t end);
// Element strides of a dense row-major tensor of `dims`.
std::vector<Dim> contiguous_strides(const std::vector<Dim>& dims);
// Elementwise ops the fused chain kernels take (binary ops broadcast).
const std::map<std::string, native::EwOp>& ew_ops();
bool is_ew(const Node* n);
// The inputs an elementwise node's chain reads (CastLike's second input only gives a dtype).
std::vector<Value*> ew_operands(const Node* n);
// The chain nodes an elementwise node becomes (variadic ops fold; Xor and Mean take more than one).
int ew_chain_nodes(const Node* n);
bool is_view(const std::string& op);
bool scalar_constant(const Value* v);
// A Clip's [min, max] (inputs 1 and 2; an absent one is -inf / +inf), or nullopt where a bound is
// not a constant scalar. (The importer reads Clip from opset 11 on, where the bounds are inputs.)
std::optional<std::pair<double, double>> clip_bounds(const Node* clip);
// The only users of `v` are `n` (once per slot it reads), and v is not a model output.
bool only_user(const ir::Graph& g, const Value* v, const Node* n);
int64_t norm_axis(int64_t axis, size_t rank);
// "" where the native grouped kernel runs the grouped Conv `n`, else why not (lower.h: gpu_route).
std::string depthwise_problem(const Node* n);
// A grouped Conv depthwise_problem accepts with one input channel and one filter per group.
bool is_depthwise(const Node* n);
// A Composite's inputs by role (docs/IR.md: comma-joined when one value plays two roles).
std::map<std::string, Value*> roles_of(const Node* n);
bool is_conv_region(const Node* n);
// A Transpose's perm (its attribute, or the reversal it defaults to).
std::vector<int64_t> transpose_perm(const Node* n);
// NHWC storage: physical dim i holds logical dim kNhwcOrder[i] ([N,C,H,W] -> [N,H,W,C]).
inline constexpr int64_t kNhwcOrder[4] = {0, 2, 3, 1};
inline constexpr int64_t kNhwcPos[4] = {0, 3, 1, 2};  // where NHWC storage puts logical dim d
// [N,C,H,W] -> [N,H,W,C].
template <typename T>
std::vector<T> nhwc_shape(const std::vector<T>& s) {
  return {s[0], s[2], s[3], s[1]};
}
// "name (Op)", how errors and notes name a node.
std::string where(const Node* n);

// Thrown where a step would read a value whose producer was refused (tensor id -1).
struct AfterRefusal {};

// ---- what the fusion passes decide ---------------------------------------------------------
struct SoftmaxFusion {
  Value* x = nullptr;
  Value* mask = nullptr;
  double scale = 1.0;
  bool causal = false;
  std::vector<Node*> absorbed;
};

// Softmax(scale·Q·Kᵀ + mask)·V as one native attention step (LowerOptions::fuse_attention), keyed
// by the last node of the pattern (the output's head merge, or the ·V product). Q, K and V are read
// in place from the tensors steps write (q, k, v: the projections, a packed Q|K|V projection, a
// rotary output), element (b, h, row, col) at offset + b·stride[0] + (h / kv_group)·stride[1] +
// row·stride[2] + col (kv_group applies to K and V only); O is written through o_stride.
struct AttentionFusion {
  Value *q = nullptr, *k = nullptr, *v = nullptr, *mask = nullptr;
  // q, k and v are one tensor (GPT-2's c_attn, or the Q/K/V GEMMs merge_qkv joined).
  Value* packed = nullptr;
  Dim offset[3] = {Dim(0), Dim(0), Dim(0)};  // elements, of q, k and v
  Dim q_stride[3], k_stride[3], v_stride[3], o_stride[3];
  int64_t kv_group = 1;  // query heads sharing one K/V head (grouped- and multi-query attention)
  double scale = 1.0;
  bool causal = false;
  // mask is an i64 tensor m read as Where(Cast<bool>(m), mask_true, mask_false) (fuse_attention_mask).
  bool select = false;
  double mask_true = 0, mask_false = 0;
  // Additive terms the step reads through explicit strides (fuse_attention_bias.cpp) rather than
  // `mask` broadcast right-aligned to [b, h, q, k]: element (b, h, q, k) at mask_offset(b) +
  // h·mask_stride[1] + q·mask_stride[2] + k, mask_offset(b) = (b % mask_batch_inner)·mask_stride[0] +
  // (b / mask_batch_inner)·mask_batch_outer where mask_batch_inner > 0 (a window mask repeating over
  // the images), else b·mask_stride[0]. folded_mask: constant terms summed at compile time, read
  // instead of `mask` (a weight of the step).
  bool mask_strided = false;
  Dim mask_stride[3] = {Dim(0), Dim(0), Dim(0)};
  int64_t mask_batch_inner = 0;
  Dim mask_batch_outer{0};
  std::optional<ir::Tensor> folded_mask;
  Dim b, sq, sk;
  int64_t heads = 0, d = 0;
};

// One Gather of an embed_layernorm (fuse_embed_layernorm): its table and the ids tensor the step reads in place,
// element offset + sum over row dims i of coordinate_i * strides[i].
struct EmbeddingTerm {
  Value* table;
  Value* ids;
  Dim offset;
  std::vector<Dim> strides;
};

// What a depthwise step applies in its store (fuse_depthwise_activation): y = clamp(act(conv + bias)).
struct DwActivation {
  const Node* node;  // the last absorbed node (the Relu, Clip, Sigmoid, or SiLU's Mul): the step writes its output
  double lo, hi;     // the clamp's bounds (Relu, Clip); +-inf where unbounded
  native::ConvAct act = native::ConvAct::none;
  double alpha = 1, beta = 0;  // act's (native/conv_act.h)
};

struct RowGather {
  size_t input;  // the Composite's operand that the Gather wrote
  Value* x;      // what the GEMM reads instead
  int64_t row;
};

struct RangeGather {
  int64_t start;
  Dim limit;
  int64_t delta;
};

// Elementwise nodes that one generated kernel runs.
struct EwGroup {
  std::vector<Node*> nodes;
  std::set<const Value*> inputs;  // external non-scalar inputs
  int chain_nodes = 0;
};

// One site where a pass's pattern began to match and then did not apply, and why.
struct Refusal {
  std::string node;  // the node the pattern is anchored at (its name)
  std::string reason;
};

struct LowerContext {
  LowerContext(const ir::Graph& graph, const LowerOptions& opts);

  const ir::Graph& g;
  const LowerOptions& o;
  Lowered out;
  std::vector<Node*> order;  // topological

  // bind_symbols
  std::vector<runtime::SymbolRange> symbols;
  std::map<std::string, int64_t> lo, hi;
  // fusion passes: absorbed nodes emit nothing; the node a fusion is keyed by emits the fused step
  std::set<const Node*> absorbed;
  std::map<const Node*, DwActivation> dw_act;
  std::map<const Node*, SoftmaxFusion> softmax;
  std::map<const Node*, Node*> ln_residual;
  std::map<const Node*, std::vector<EmbeddingTerm>> embedding;  // LayerNorm -> its embedding terms
  std::map<const Node*, RowGather> row_gather;                  // GEMM Composite -> its A read in place
  std::map<const Node*, RangeGather> range_gather;
  std::map<const Node*, AttentionFusion> attention;
  // eliminate_dead_code
  std::set<const Node*> needed;
  std::set<const Value*> materialized;  // written by a fill step from their known dims
  // group_elementwise
  std::vector<EwGroup> groups;
  std::map<const Node*, int> group_of;
  // fuse_se_scale: the squeeze-excite scale's Mul -> its feature map and gate
  std::map<const Node*, std::pair<Value*, Value*>> se_scale;
  // assign_layouts
  std::set<const Value*> nhwc;  // values stored NHWC
  // Transposes whose output is the tensor of a value before them (its input, or the input of the
  // Transposes it cancels, which are absorbed): the storage orders agree, so no step runs.
  std::map<const Node*, const Value*> layout_views;
  std::set<const Node*> nhwc_reads;  // reductions that read their NHWC input in place, axes remapped
  bool emitted = false;         // emit_steps ran (the dump shows the plan)

  // ---- analysis helpers ----
  int64_t eval_lo(const Dim& d) const { return d.evaluate(lo).value_or(-1); }
  int64_t eval_hi(const Dim& d) const { return d.evaluate(hi).value_or(-1); }
  size_t pos(const Node* n);
  // The single reader of `v`'s data (Shape/Size readers only see its dims), or nullptr.
  Node* sole_user(const Value* v) const;
  // A shape-like value as dims: a constant, or a value shape folding knows (possibly symbolic).
  std::optional<std::vector<Dim>> dims_of(const Value* v) const;
  // An integer value shape folding knows (Shape(x), a Gather of it, ...) that a data op reads:
  // the runtime writes it from the evaluated dims (step "fill") instead of running its producer.
  bool materializable(const Value* v) const;
  // Range(start, limit, delta) whose operands are known scalars: (start, delta) as dims.
  std::optional<std::pair<Dim, Dim>> range_operands(const Node* n) const;

  // ---- emission helpers (context.cpp) ----
  DType storage(DType model) const { return ir::is_float(model) ? o.dtype : model; }
  runtime::TensorInfo info(const Value* v, DType dt, runtime::TensorKind kind, const std::string& name);
  int add_tensor(runtime::TensorInfo t);
  // The tensor id of a value read by a step in the model's layout (weights are created on first
  // use; a value stored NHWC is converted back to NCHW once).
  int tensor(const Value* v);
  // Appends constant `c` (converted to the compute dtype when float) to the weights blob as `t`.
  int add_weight(ir::Tensor c, runtime::TensorInfo t);
  // The tensor a step writes for `v` (an activation in the storage dtype; [N,H,W,C] when NHWC).
  int define(const Value* v) { return define(v, storage(v->dtype())); }
  int define(const Value* v, DType dt);
  // `v` stored NHWC (see context.cpp); c_pad > 0 pads the channels with zeros to c_pad.
  int tensor_nhwc(const Value* v, int64_t c_pad = 0);
  // `v` in the other layout than its own, converted once.
  int convert(const Value* v, bool to_nhwc, int64_t c_pad = 0);
  void bind_input(const Value* v);
  void bind_output(const Value* v);
  // A float model output (listed once) that the plan computes in another dtype: the step that
  // computes it can write it in the model's dtype itself, instead of a cast step after it.
  bool output_needs_model_dtype(const Value* v) const;
  // Appends a step of the kind its params are (runtime/step_params.h).
  void step(const std::string& name, std::vector<int> ins, std::vector<int> outs, runtime::StepParams params);
  void unsupported(const Node* n, const std::string& why) {
    unsupported_nodes.push_back(where(n) + (why.empty() ? "" : ": " + why));
  }
  [[noreturn]] void fail() const;

  // emission state
  size_t weights_size = 0;  // the weights blob's size so far (also when LowerOptions::weights is off)
  std::map<const Value*, int> tid;
  std::map<const Value*, int> model_output;  // model output -> the tensor its step writes in the model's dtype
  std::set<std::string> ew_seen, gemm_seen, conv_seen;
  std::vector<std::string> unsupported_nodes;
  std::map<const Value*, int> other;  // value -> its tensor in the other layout (one conversion each)
  std::map<int64_t, std::map<const Value*, int>> padded;  // c_pad -> value -> its NHWC tensor padded to c_pad channels
  std::map<const Value*, int> pending_cast;  // float model input -> its tensor, while no cast to the compute dtype exists
  int permutes = 0;
  int im2col = 0;     // conv regions lowered to im2col + gemm
  int stem_conv = 0;  // conv regions lowered to one stem_conv step (Stem::direct)
  int pointwise = 0;  // 1x1 conv regions lowered to gemm (emit_pointwise_gemm)

 private:
  std::map<const Node*, size_t> pos_;
};

}  // namespace sabre::codegen::passes
