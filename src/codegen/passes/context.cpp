// LowerContext: the helpers every lowering pass uses, and the emission machinery (tensor ids,
// weights, NHWC conversions, steps). See context.h.
#include "codegen/passes/context.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

namespace sabre::codegen::passes {

ParamDim pdim(const Dim& d) { return ParamDim::text(d.str()); }
ParamDims pdims(const std::vector<Dim>& v) {
  ParamDims out;
  for (const Dim& d : v) out.push_back(pdim(d));
  return out;
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
      // Composed in emit_group: Xor = not(a == b) on bools, Mean = (a + b + ...) / n, CastLike = Cast.
      {"Xor", EwOp::equal},         {"Mean", EwOp::add},
      {"CastLike", EwOp::cast},
  };
  return m;
}

bool is_ew(const Node* n) {
  if (n->domain() != "" || !ew_ops().count(n->op())) return false;
  // Variadic ops fold over their inputs up to what one kernel takes.
  if ((n->op() == "Min" || n->op() == "Max" || n->op() == "Sum" || n->op() == "Mean") &&
      (n->num_inputs() < 1 || n->num_inputs() > SABRE_EW_MAX_INPUTS))
    return false;
  return true;
}

std::vector<Value*> ew_operands(const Node* n) {
  if (n->op() == "CastLike") return {n->input(0)};  // input 1 gives only its dtype
  std::vector<Value*> out;
  for (Value* v : n->inputs())
    if (v) out.push_back(v);
  return out;
}

int ew_chain_nodes(const Node* n) {
  const int k = static_cast<int>(n->num_inputs());
  if (n->op() == "Xor") return 2;
  if (n->op() == "Mean") return std::max(k - 1, 0) + 2;  // the adds, the constant n, the division
  if (n->op() == "Min" || n->op() == "Max" || n->op() == "Sum") return std::max(k - 1, 1);
  return 1;
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


// A Composite's inputs by role (docs/IR.md: comma-joined when one value plays two roles).
std::map<std::string, Value*> roles_of(const Node* n) {
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

bool is_conv_region(const Node* n) {
  return n->domain() == "sabre" && n->op() == "Composite" && n->attr_string("kind", "") == "conv2d_fprop";
}

std::vector<int64_t> transpose_perm(const Node* n) {
  std::vector<int64_t> perm = n->attr_ints("perm", {});
  if (perm.empty())
    for (int64_t i = static_cast<int64_t>(n->input(0)->shape().size()) - 1; i >= 0; --i) perm.push_back(i);
  return perm;
}

std::string where(const Node* n) { return n->name() + " (" + n->op() + ")"; }

LowerContext::LowerContext(const ir::Graph& graph, const LowerOptions& opts) : g(graph), o(opts), order(graph.topo_order()) {}

size_t LowerContext::pos(const Node* n) {
  if (pos_.empty())
    for (size_t i = 0; i < order.size(); ++i) pos_[order[i]] = i;
  return pos_.at(n);
}

// The single reader of `v`'s data (Shape/Size readers only see its dims), or nullptr.
Node* LowerContext::sole_user(const Value* v) const {
  if (!v || g.is_graph_output(v)) return nullptr;
  Node* only = nullptr;
  for (Node* u : v->users()) {
    if (u->domain().empty() && (u->op() == "Shape" || u->op() == "Size")) continue;
    if (only) return nullptr;
    only = u;
  }
  return only;
}

// A shape-like value as dims: a constant, or a value shape folding knows (possibly symbolic).
std::optional<std::vector<Dim>> LowerContext::dims_of(const Value* v) const {
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
bool LowerContext::materializable(const Value* v) const {
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
std::optional<std::pair<Dim, Dim>> LowerContext::range_operands(const Node* n) const {
  auto start = dims_of(n->input(0)), delta = dims_of(n->input(2));
  if (!start || !delta || start->size() != 1 || delta->size() != 1 || !dims_of(n->input(1))) return std::nullopt;
  return std::make_pair((*start)[0], (*delta)[0]);
}

runtime::TensorInfo LowerContext::info(const Value* v, DType dt, runtime::TensorKind kind, const std::string& name) {
  runtime::TensorInfo t;
  t.name = name;
  t.dtype = dt;
  t.kind = kind;
  for (const Dim& d : v->shape()) {
    for (const auto& s : d.symbols())
      if (!lo.count(s))
        throw UnsupportedError(v->name() + ": dim '" + d.str() + "' uses '" + s +
                               "', which no model input declares (shape inference could not tie it to the inputs)");
    t.shape.push_back(runtime::DimExpr::parse(d.str()));
  }
  return t;
}
int LowerContext::add_tensor(runtime::TensorInfo t) {
  out.plan.tensors.push_back(std::move(t));
  return static_cast<int>(out.plan.tensors.size()) - 1;
}

// The tensor id of a value read by a step in the model's layout (weights are created on first
// use; a value stored NHWC is converted back to NCHW once).
int LowerContext::tensor(const Value* v) {
  if (!v) return -1;
  if (nhwc.count(v)) return convert(v, false);
  if (auto it = tid.find(v); it != tid.end()) return it->second;
  if (auto it = pending_cast.find(v); it != pending_cast.end()) {
    const int raw = it->second;
    pending_cast.erase(it);
    const int c = add_tensor(info(v, storage(v->dtype()), runtime::TensorKind::activation, v->name() + ".compute"));
    step(v->name() + ".cast", {raw}, {c}, runtime::CastParams{});
    return tid[v] = c;
  }
  if (materialized.count(v)) {
    int t = define(v);
    step(v->name(), {}, {t}, runtime::FillParams{.values = pdims(*v->known_dims())});
    return t;
  }
  if (!v->is_constant()) {
    // Its producer was unsupported (already reported): a placeholder lets lowering go on and
    // report every unsupported node at once; no plan is written then.
    if (!unsupported_nodes.empty()) return define(v);
    throw std::logic_error("lower: value '" + v->name() + "' read before its producer ran (invariant: topological steps)");
  }
  return tid[v] = add_weight(v->constant(), info(v, v->dtype(), runtime::TensorKind::weight, v->name()));
}
// Appends constant `c` (converted to the compute dtype when float) to the weights blob as `t`.
int LowerContext::add_weight(ir::Tensor c, runtime::TensorInfo t) {
  const ir::DType dt = ir::is_float(c.dtype()) ? o.dtype : c.dtype();
  size_t bytes = ir::size_of(dt);
  for (int64_t d : c.dims()) bytes *= static_cast<size_t>(d);
  const size_t off = (weights_size + 255) / 256 * 256;
  weights_size = off + bytes;
  if (o.weights) {
    if (dt != c.dtype()) c = c.cast(dt);
    out.weights.resize(weights_size, 0);
    if (bytes) std::memcpy(out.weights.data() + off, c.bytes(), bytes);
  }
  t.dtype = dt;
  t.weight_offset = off;
  t.weight_bytes = bytes;
  return add_tensor(std::move(t));
}
int LowerContext::define(const Value* v, DType dt) {
  if (tid.count(v)) throw std::logic_error("lower: '" + v->name() + "' defined twice (invariant: SSA)");
  runtime::TensorInfo t = info(v, dt, runtime::TensorKind::activation, v->name());
  if (nhwc.count(v)) {
    t.shape = nhwc_shape(t.shape);
    t.name += ".nhwc";  // the name without suffix is the NCHW tensor, where one is needed
  }
  return tid[v] = add_tensor(std::move(t));
}


// `v` stored NHWC: its own tensor, a constant transposed at compile time (rank <= 4, right-aligned
// to 4 first: a [C,1,1] bias becomes [1,1,1,C]; a filter [K,C,R,S] becomes KRSC), or an NCHW
// activation converted once. c_pad > 0: the channels (the last dim) padded with zeros to c_pad,
// for a conv whose C breaks the 16-byte access (emit_conv); only NCHW values and constants can
// be padded, since the padding happens in their conversion.
int LowerContext::tensor_nhwc(const Value* v, int64_t c_pad) {
  if (!v) return -1;
  if (nhwc.count(v)) {
    if (c_pad)
      throw std::logic_error("lower: NHWC value '" + v->name() +
                             "' asked for padded channels (invariant: channel_padding pads only values it converts)");
    auto it = tid.find(v);
    if (it == tid.end())
      throw std::logic_error("lower: value '" + v->name() + "' read before its producer ran (invariant: topological steps)");
    return it->second;
  }
  if (!v->is_constant() || materialized.count(v)) return convert(v, true, c_pad);
  auto& cache = c_pad ? padded[c_pad] : other;
  if (auto it = cache.find(v); it != cache.end()) return it->second;
  const ir::Tensor& c = v->constant();
  std::vector<int64_t> d = c.dims();
  if (d.size() > 4) throw std::logic_error("lower: NHWC constant '" + v->name() + "' has rank > 4 (invariant: assign_layouts)");
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
int LowerContext::convert(const Value* v, bool to_nhwc, int64_t c_pad) {
  auto& cache = c_pad ? padded[c_pad] : other;
  if (auto it = cache.find(v); it != cache.end()) return it->second;
  const auto& s = v->shape();
  int moved = 0;
  for (size_t i = 1; i < 4; ++i) moved += !(s[i] == Dim(1));
  const bool view = moved <= 1 && !c_pad;
  int src;
  bool fused_cast = false;
  if (to_nhwc) {
    auto raw = pending_cast.find(v);
    fused_cast = !view && raw != pending_cast.end();
    src = fused_cast ? raw->second : tensor(v);
  } else {
    auto it = tid.find(v);
    if (it == tid.end())
      throw std::logic_error("lower: value '" + v->name() + "' read before its producer ran (invariant: topological steps)");
    src = it->second;
  }
  if (src < 0) return -1;  // its producer was refused; the error lists it
  runtime::TensorInfo t = info(v, fused_cast ? storage(v->dtype()) : out.plan.tensors[src].dtype,
                               runtime::TensorKind::activation, v->name());
  if (to_nhwc) {
    t.shape = nhwc_shape(t.shape);
    t.name += ".nhwc";
    if (c_pad) {
      t.shape[3] = runtime::DimExpr::parse(std::to_string(c_pad));
      t.name += "_c" + std::to_string(c_pad);
    }
  }
  int id = add_tensor(std::move(t));
  if (view) {
    step(v->name() + (to_nhwc ? " (to NHWC)" : " (to NCHW)"), {src}, {id}, runtime::ReshapeParams{});
  } else if (to_nhwc) {
    std::string what;
    if (fused_cast)
      what += ", cast " + std::string(ir::name(v->dtype())) + " -> " + std::string(ir::name(storage(v->dtype())));
    if (c_pad) what += ", channels padded " + s[1].str() + " -> " + std::to_string(c_pad);
    step(v->name() + " (to NHWC" + what + ")", {src}, {id}, runtime::NchwToNhwcParams{});
    ++permutes;
  } else {
    step(v->name() + " (to NCHW)", {src}, {id}, runtime::PermuteParams{.perm = param_numbers({0, 3, 1, 2})});
    ++permutes;
  }
  return cache[v] = id;
}

void LowerContext::bind_input(const Value* v) {
  int t = add_tensor(info(v, v->dtype(), runtime::TensorKind::input, v->name()));
  out.plan.inputs.push_back(t);
  if (storage(v->dtype()) == v->dtype()) {
    tid[v] = t;
    return;
  }
  // The compute-dtype copy is made where something first reads it (tensor()); an input that
  // only enters NHWC conv regions is cast by its conversion instead (convert()).
  pending_cast[v] = t;
}

// A float model output (listed once) that the plan computes in another dtype: the step that
// computes it can write it in the model's dtype itself, instead of a cast step after it.
bool LowerContext::output_needs_model_dtype(const Value* v) const {
  return g.is_graph_output(v) && ir::is_float(v->dtype()) && storage(v->dtype()) != v->dtype() &&
         std::count(g.outputs().begin(), g.outputs().end(), v) == 1;
}

void LowerContext::bind_output(const Value* v) {
  if (auto it = model_output.find(v); it != model_output.end()) {  // written in its dtype by its step
    out.plan.tensors[it->second].kind = runtime::TensorKind::output;
    out.plan.outputs.push_back(it->second);
    return;
  }
  int t = tensor(v);
  // Copies, not a reference: add_tensor below grows plan.tensors and would leave one dangling.
  const DType t_dtype = out.plan.tensors[t].dtype;
  const runtime::TensorKind t_kind = out.plan.tensors[t].kind;
  bool reused = std::count(out.plan.outputs.begin(), out.plan.outputs.end(), t) > 0;
  if (t_dtype == v->dtype() && t_kind == runtime::TensorKind::activation && !reused) {
    out.plan.tensors[t].kind = runtime::TensorKind::output;
    out.plan.outputs.push_back(t);
    return;
  }
  int o = add_tensor(info(v, v->dtype(), runtime::TensorKind::output, v->name()));
  if (t_kind == runtime::TensorKind::activation) out.plan.tensors[t].name = v->name() + ".compute";
  step(v->name() + ".out", {t}, {o},
       t_dtype == v->dtype() ? runtime::StepParams(runtime::CopyParams{}) : runtime::StepParams(runtime::CastParams{}));
  out.plan.outputs.push_back(o);
}

void LowerContext::step(const std::string& name, std::vector<int> ins, std::vector<int> outs, runtime::StepParams params) {
  runtime::Step s;
  s.op = runtime::to_string(runtime::kind_of(params));
  s.name = name;
  s.inputs = std::move(ins);
  s.outputs = std::move(outs);
  s.params = std::move(params);
  out.plan.steps.push_back(std::move(s));
}


void LowerContext::fail() const {
  std::string msg = "unsupported for GPU (" + std::to_string(unsupported_nodes.size()) + " node" +
                    (unsupported_nodes.size() == 1 ? "" : "s") + "):";
  for (const auto& u : unsupported_nodes) msg += "\n  " + u;
  throw UnsupportedError(msg);
}

}  // namespace sabre::codegen::passes
