// The one codec of step params: every struct of step_params.h is read, written and compared
// through its `fields` list by the visitors here.
#include "runtime/step_params.h"

#include <array>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "ir/dtype.h"

namespace sabre::runtime {

ParamDim ParamDim::text(const std::string& s) {
  ParamDim d;
  d.is_text_ = true;
  d.text_ = s;
  try {
    d.expr_ = DimExpr::parse(s);
  } catch (const PlanError&) {
    // Text the dim grammar refuses (ONNX's INT64_MAX "to the end" slice bound, which the compiler
    // writes as it is) is kept as written, so plans holding it load as before; it is refused if
    // it is ever evaluated, through a symbol no input binds.
    d.expr_ = DimExpr::parse("unparsable_dim_text");
  }
  return d;
}

json::Value ParamDim::to_json() const {
  return is_text_ ? json::Value(text_) : json::Value(static_cast<double>(number_));
}

ParamDims param_numbers(const std::vector<int64_t>& v) { return ParamDims(v.begin(), v.end()); }

std::vector<int64_t> eval_dims(const ParamDims& v, const Dims& dims) {
  std::vector<int64_t> out;
  out.reserve(v.size());
  for (const ParamDim& d : v) out.push_back(d.eval(dims));
  return out;
}

std::optional<Window2d> Window2d::from_lists(const std::vector<int64_t>& pads, const std::vector<int64_t>& strides,
                                             const std::vector<int64_t>& dilations) {
  Window2d w;
  if ((!pads.empty() && pads.size() != 4) || (!strides.empty() && strides.size() != 2) ||
      (!dilations.empty() && dilations.size() != 2))
    return std::nullopt;
  for (size_t i = 0; i < pads.size(); ++i) w.pads[i] = pads[i];
  for (size_t i = 0; i < strides.size(); ++i) w.strides[i] = strides[i];
  for (size_t i = 0; i < dilations.size(); ++i) w.dilations[i] = dilations[i];
  return w;
}

const std::string& pick_kernel(const DispatchTable& t, int64_t m, const std::string& where, const char* table) {
  if (t.empty()) throw PlanError("plan: " + where + " has no '" + table + "' table of kernels");
  for (const DispatchEntry& e : t)
    if (e.max_m < 0 || m <= e.max_m) return e.kernel;
  throw PlanError(where + ": no kernel in its " + table + " table covers m=" + std::to_string(m) +
                  "; recompile with a --dynamic range that includes this shape");
}

namespace {

// ---- reading one field ----

struct FieldError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void read_value(const json::Value& v, ParamDim& out) {
  if (v.is_number()) {
    out = ParamDim(whole_number(v, INT64_MIN / 2, INT64_MAX / 2, "a dim"));
  } else if (v.is_string()) {
    out = ParamDim::text(v.str());
  } else {
    throw FieldError("is neither a dim string nor a number");
  }
}

void read_value(const json::Value& v, ParamDims& out) {
  if (!v.is_array()) throw FieldError("must be a list");
  out.clear();
  for (const json::Value& x : v.arr()) read_value(x, out.emplace_back());
}

void read_value(const json::Value& v, double& out) {
  if (!v.is_number()) throw FieldError("must be a number");
  out = v.num();
}

void read_value(const json::Value& v, bool& out) {
  if (v.is_number()) out = v.num() != 0;
  else if (v.is_string() || v.is_array() || v.is_object()) throw FieldError("must be true or false");
  else out = v.boolean();
}

void read_value(const json::Value& v, std::string& out) {
  if (!v.is_string()) throw FieldError("must be a string");
  out = v.str();
}

void read_value(const json::Value& v, int64_t& out) {  // aligned_to: an element count
  if (!v.is_number() || !(v.num() >= 0 && v.num() <= 1024) || v.num() != static_cast<double>(static_cast<int>(v.num())))
    throw FieldError("is " + v.dump() + ", not an element count");
  out = static_cast<int64_t>(v.num());
}

void read_value(const json::Value& v, DispatchTable& out) {
  if (!v.is_array() || v.arr().empty()) throw FieldError("must be a non-empty table of kernels");
  out.clear();
  for (const json::Value& e : v.arr()) {
    const json::Value* mm = e.get("max_m");
    const json::Value* k = e.get("kernel");
    if (!mm || !k || !mm->is_number() || !k->is_string()) throw FieldError("has an entry without max_m or kernel");
    out.push_back({whole_number(*mm, -1, INT64_MAX / 2, "a dispatch entry's max_m"), k->str()});
  }
}

void read_value(const json::Value& v, ClampParam& out) {
  if (!v.is_array() || v.arr().size() != 2) throw FieldError("must be [min, max] (a number or null each)");
  auto bound = [](const json::Value& b, double unbounded) {
    if (b.is_null()) return unbounded;
    if (!b.is_number()) throw FieldError("must hold numbers or null");
    return b.num();
  };
  out.lo = bound(v.arr()[0], -INFINITY);
  out.hi = bound(v.arr()[1], INFINITY);
  if (!(static_cast<float>(out.lo) <= static_cast<float>(out.hi)))
    throw FieldError("[" + std::to_string(static_cast<float>(out.lo)) + ", " + std::to_string(static_cast<float>(out.hi)) +
                     "] has its min above its max");
}

// An enum field: one of `names`, stored as its index.
template <class E, size_t N>
void read_name(const json::Value& v, E& out, const std::array<const char*, N>& names, const char* what) {
  std::string list;
  for (size_t i = 0; i < N; ++i) {
    if (v.is_string() && v.str() == names[i]) {
      out = static_cast<E>(i);
      return;
    }
    list += (i ? ", " : "") + std::string(names[i]);
  }
  throw FieldError("is " + v.dump() + ", not " + what + " (" + list + ")");
}
void read_value(const json::Value& v, ReduceKind& out) { read_name(v, out, kReduceKindNames, "a reduce kind"); }
void read_value(const json::Value& v, PoolMode& out) { read_name(v, out, kPoolModeNames, "a pool kind"); }
void read_value(const json::Value& v, TensorLayout& out) { read_name(v, out, kTensorLayoutNames, "a layout"); }

void read_value(const json::Value& v, ActivationParam& out) {
  const FieldError form("must be {\"op\": silu|sigmoid|hard_swish|hard_sigmoid, \"alpha\": number, \"beta\": number}");
  const json::Value* op = v.is_object() ? v.get("op") : nullptr;
  const std::optional<native::ConvAct> act = op && op->is_string() ? native::parse_conv_act(op->str()) : std::nullopt;
  if (!act) throw form;
  out = ActivationParam{.op = *act};
  for (auto [key, field] : {std::pair{"alpha", &out.alpha}, {"beta", &out.beta}})
    if (const json::Value* x = v.get(key); x && !x->is_null()) {
      if (!x->is_number()) throw form;
      *field = x->num();
    }
}

void read_value(const json::Value& c, native::ElementwiseChain& ch) {
  try {
    ch = native::ElementwiseChain{};
    for (const auto& d : c.get("inputs")->arr()) {
      auto dt = ir::parse_dtype(d.str());
      if (!dt) throw PlanError("unknown dtype '" + d.str() + "'");
      ch.inputs.push_back(*dt);
    }
    for (const auto& n : c.get("nodes")->arr()) {
      native::EwNode node;
      const std::string& op = n.get("op")->str();
      size_t i = 0;
      while (i < native::kEwOpCount && native::kEwOpInfo[i].name != op) ++i;
      if (i == native::kEwOpCount) throw PlanError("unknown elementwise op '" + op + "'");
      node.op = static_cast<native::EwOp>(i);
      auto dt = ir::parse_dtype(n.get("dtype")->str());
      if (!dt) throw PlanError("unknown dtype '" + n.get("dtype")->str() + "'");
      node.dtype = *dt;
      auto geti = [&](const char* k) { const json::Value* v = n.get(k); return v ? static_cast<int>(v->num()) : -1; };
      auto getf = [&](const char* k) {
        const json::Value* v = n.get(k);
        if (!v) return 0.f;
        if (v->is_string()) {  // a non-finite constant or bound (write_value: JSON has no infinity)
          if (v->str() == "inf") return INFINITY;
          if (v->str() == "-inf") return -INFINITY;
          if (v->str() == "nan") return NAN;
          throw PlanError(std::string("node param '") + k + "' is \"" + v->str() + "\", not a number, inf, -inf or nan");
        }
        return static_cast<float>(v->num());
      };
      node.a = geti("a");
      node.b = geti("b");
      node.c = geti("c");
      node.alpha = getf("alpha");
      node.beta = getf("beta");
      ch.nodes.push_back(node);
    }
    for (const auto& o : c.get("outputs")->arr()) ch.outputs.push_back(static_cast<int>(o.num()));
    native::validate(ch);
  } catch (const PlanError& e) {
    throw FieldError(std::string("is not a chain this runtime runs: ") + e.what());
  } catch (const std::exception& e) {
    throw FieldError(std::string("is malformed: ") + e.what());
  }
}

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

struct Reader {
  const json::Value& obj;
  const std::string& where;
  template <class T>
  void operator()(const char* key, T& field) {
    const json::Value* v = obj.get(key);
    if constexpr (is_optional<T>::value) {
      if (!v || v->is_null()) {
        field.reset();
        return;
      }
      read(key, *v, field.emplace());
    } else {
      if (!v || v->is_null()) throw PlanError("plan: " + where + " has no param '" + key + "'");
      read(key, *v, field);
    }
  }
  template <class T>
  void read(const char* key, const json::Value& v, T& field) {
    try {
      read_value(v, field);
    } catch (const FieldError& e) {
      throw PlanError("plan: " + where + " param '" + key + "' " + e.what());
    } catch (const PlanError& e) {  // a bad dim string
      throw PlanError("plan: " + where + " param '" + key + "': " + e.what());
    }
  }
};

// ---- writing one field ----

json::Value write_value(const ParamDim& d) { return d.to_json(); }
json::Value write_value(const ParamDims& v) {
  json::Array a;
  for (const ParamDim& d : v) a.push_back(d.to_json());
  return json::Value(std::move(a));
}
json::Value write_value(double d) { return json::Value(d); }
json::Value write_value(bool b) { return json::Value(b); }
json::Value write_value(const std::string& s) { return json::Value(s); }
json::Value write_value(int64_t n) { return json::Value(static_cast<double>(n)); }
json::Value write_value(const DispatchTable& t) {
  json::Array a;
  for (const DispatchEntry& e : t)
    a.push_back(json::Value(json::Object{{"max_m", json::Value(static_cast<double>(e.max_m))},
                                         {"kernel", json::Value(e.kernel)}}));
  return json::Value(std::move(a));
}
json::Value write_value(const ClampParam& c) {
  auto bound = [](double v) { return std::isinf(v) ? json::Value() : json::Value(v); };
  return json::Value(json::Array{bound(c.lo), bound(c.hi)});
}
json::Value write_value(ReduceKind k) { return json::Value(std::string(kReduceKindNames[static_cast<size_t>(k)])); }
json::Value write_value(PoolMode k) { return json::Value(std::string(kPoolModeNames[static_cast<size_t>(k)])); }
json::Value write_value(TensorLayout k) { return json::Value(std::string(kTensorLayoutNames[static_cast<size_t>(k)])); }
json::Value write_value(const ActivationParam& a) {
  json::Object o{{"op", json::Value(std::string(native::conv_act_name(a.op)))}};
  if (a.alpha) o["alpha"] = json::Value(*a.alpha);
  if (a.beta) o["beta"] = json::Value(*a.beta);
  return json::Value(std::move(o));
}
// A chain node's alpha or beta: a number, or "inf", "-inf", "nan" where it is not finite (a Clip
// without a bound, a -inf mask constant), which JSON would otherwise write as an unreadable null.
json::Value chain_number(float v) {
  if (std::isnan(v)) return json::Value(std::string("nan"));
  if (std::isinf(v)) return json::Value(std::string(v > 0 ? "inf" : "-inf"));
  return json::Value(static_cast<double>(v));
}
json::Value write_value(const native::ElementwiseChain& c) {
  json::Array ins, nodes, outs;
  for (ir::DType d : c.inputs) ins.push_back(json::Value(std::string(ir::name(d))));
  for (const auto& n : c.nodes)
    nodes.push_back(json::Value(json::Object{{"op", json::Value(std::string(native::info(n.op).name))},
                                             {"dtype", json::Value(std::string(ir::name(n.dtype)))},
                                             {"a", json::Value(static_cast<double>(n.a))},
                                             {"b", json::Value(static_cast<double>(n.b))},
                                             {"c", json::Value(static_cast<double>(n.c))},
                                             {"alpha", chain_number(n.alpha)},
                                             {"beta", chain_number(n.beta)}}));
  for (int o : c.outputs) outs.push_back(json::Value(static_cast<double>(o)));
  return json::Value(json::Object{{"inputs", json::Value(std::move(ins))},
                                  {"nodes", json::Value(std::move(nodes))},
                                  {"outputs", json::Value(std::move(outs))}});
}

struct Writer {
  json::Object& out;
  template <class T>
  void operator()(const char* key, const T& field) {
    if constexpr (is_optional<T>::value) {
      if (field) out[key] = write_value(*field);
    } else {
      out[key] = write_value(field);
    }
  }
};

template <class P>
StepParams parse_as(const json::Value& params, const std::string& where) {
  if (!params.is_object()) throw PlanError("plan: " + where + " has params that are not an object");
  P p;
  Reader r{params, where};
  P::fields(p, r);
  if constexpr (requires { p.check(where); }) p.check(where);
  return p;
}

using Parser = StepParams (*)(const json::Value&, const std::string&);
template <size_t... I>
constexpr std::array<Parser, sizeof...(I)> parsers(std::index_sequence<I...>) {
  return {&parse_as<std::variant_alternative_t<I, StepParams>>...};
}
constexpr auto kParsers = parsers(std::make_index_sequence<kStepKindCount>{});

template <size_t... I>
StepParams default_of(size_t k, std::index_sequence<I...>) {
  StepParams out;
  ((k == I ? (out.template emplace<I>(), 0) : 0), ...);
  return out;
}

}  // namespace

json::Value chain_to_json(const native::ElementwiseChain& c) { return write_value(c); }

StepParams parse_step_params(StepKind kind, const json::Value& params, const std::string& where) {
  return kParsers.at(static_cast<size_t>(kind))(params, where);
}

StepParams default_step_params(StepKind kind) {
  return default_of(static_cast<size_t>(kind), std::make_index_sequence<kStepKindCount>{});
}

json::Value to_json(const StepParams& p) {
  json::Object out;
  std::visit(
      [&](const auto& s) {
        Writer w{out};
        std::decay_t<decltype(s)>::fields(s, w);
      },
      p);
  return json::Value(std::move(out));
}

bool ElementwiseParams::operator==(const ElementwiseParams& o) const {
  return kernel == o.kernel && library == o.library && write_value(chain).dump() == write_value(o.chain).dump();
}

// ---- the checks of one kind's fields together ----

namespace {
void check_dispatch(const std::string& where, const std::optional<DispatchTable>& aligned,
                    const std::optional<int64_t>& aligned_to) {
  if (aligned_to && *aligned_to > 0 && !aligned)
    throw PlanError("plan: " + where + " has aligned_to but no 'dispatch_aligned' table of kernels");
}
}  // namespace

void GemmParams::check(const std::string& where) const { check_dispatch(where, dispatch_aligned, aligned_to); }
void ConvParams::check(const std::string& where) const { check_dispatch(where, dispatch_aligned, aligned_to); }

void GroupedConvParams::check(const std::string& where) const {
  if (!k) throw PlanError("plan: " + where + " has no param 'k'");
  if (!groups) throw PlanError("plan: " + where + " has no param 'groups'");
}

void AttentionParams::check(const std::string& where) const {
  for (const auto& [key, v] : {std::pair{"q_stride", &q_stride}, {"k_stride", &k_stride}, {"v_stride", &v_stride},
                               {"o_stride", &o_stride}})
    if (v->size() != 3) throw PlanError("plan: " + where + " param '" + key + "' needs 3 strides");
  if (mask_stride && mask_stride->size() != 3)
    throw PlanError("plan: " + where + " param 'mask_stride' needs 3 strides");
  if (offsets && offsets->size() != 3) throw PlanError("plan: " + where + " param 'offsets' needs 3 column offsets");
  if (mask_batch && (mask_batch->size() != 2 || (!(*mask_batch)[0].is_text() && (*mask_batch)[0].eval({}) < 1)))
    throw PlanError("plan: " + where + " param 'mask_batch' needs [inner >= 1, outer stride]");
}

}  // namespace sabre::runtime
