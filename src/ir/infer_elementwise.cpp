// Shape and type inference of elementwise ops: unary, arithmetic (with known integer values for
// shape subgraphs), comparisons, logic, Where, Cast, Clip. Tests: tests/unit/infer_test.cpp
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <set>
#include <stdexcept>

#include "ir/infer_internal.h"

namespace sabre::ir::infer_detail {
namespace {

// Elementwise known_dims: each input's list broadcasts (length 1 or the output's length).
template <class F>
void elementwise_known(Node& n, const std::vector<Value*>& ins, F f) {
  if (n.num_outputs() < 1) return;
  int64_t len = list_len(n.output(0)->shape());
  if (len < 0 || len > static_cast<int64_t>(kMaxKnown)) return;
  std::vector<std::vector<Dim>> lists;
  for (Value* v : ins) {
    auto k = known(v);
    if (!k || (k->size() != 1 && static_cast<int64_t>(k->size()) != len)) return;
    lists.push_back(*k);
  }
  std::vector<Dim> out;
  for (int64_t i = 0; i < len; ++i) {
    std::vector<Dim> args;
    for (const auto& l : lists) args.push_back(l.size() == 1 ? l[0] : l[i]);
    std::optional<Dim> r = f(args);
    if (!r) return;
    out.push_back(*r);
  }
  set_known(n, 0, std::move(out));
}

void not_op(Node& n) {
  Value* x = in(n, 0);
  if (x->dtype() != DType::boolean) fail(n, "input must be bool, got " + std::string(name(x->dtype())));
  set_out(n, 0, DType::boolean, x->shape());
}

Shape broadcast_inputs(Node& n, const std::vector<Value*>& ins) {
  std::vector<const Shape*> shapes;
  for (Value* v : ins) shapes.push_back(&v->shape());
  return broadcast(n, shapes);
}

std::optional<Dim> arith(const std::string& op, const Dim& a, const Dim& b) {
  if (!a.is_static() || !b.is_static()) {
    if (op == "Add") return a + b;
    if (op == "Sub") return a - b;
    if (op == "Mul") return a * b;
    if (op == "Div") return a.divide(b);
    return std::nullopt;
  }
  if (!small_static(a) || !small_static(b)) return std::nullopt;
  int64_t x = a.value(), y = b.value();
  if (op == "Add") return Dim(x + y);
  if (op == "Sub") return Dim(x - y);
  if (op == "Mul") {
    int64_t r;
    if (__builtin_mul_overflow(x, y, &r)) return std::nullopt;
    return Dim(r);
  }
  if (op == "Div") return y == 0 ? std::nullopt : std::optional<Dim>(Dim(x / y));  // ONNX integer Div truncates
  return std::nullopt;
}

void binary_arith(Node& n) {
  auto ins = present_inputs(n);
  if (ins.size() != 2) fail(n, "expects 2 inputs");
  if (n.op() != "Pow") check_same_dtype(n, ins);
  set_out(n, 0, ins[0]->dtype(), broadcast_inputs(n, ins));
  if (!is_int(ins[0]->dtype())) return;
  std::string op = n.op();
  elementwise_known(n, ins, [&](const std::vector<Dim>& a) { return arith(op, a[0], a[1]); });
}

void variadic_minmax(Node& n) {
  auto ins = present_inputs(n);
  if (ins.empty()) fail(n, "expects at least one input");
  check_same_dtype(n, ins);
  set_out(n, 0, ins[0]->dtype(), broadcast_inputs(n, ins));
  if (!is_int(ins[0]->dtype())) return;
  bool is_max = n.op() == "Max";
  elementwise_known(n, ins, [&](const std::vector<Dim>& a) -> std::optional<Dim> {
    Dim best = a[0];
    for (const Dim& d : a) {
      if (d == best) continue;
      if (!d.is_static() || !best.is_static()) return std::nullopt;
      if (is_max ? d.value() > best.value() : d.value() < best.value()) best = d;
    }
    return best;
  });
}

void compare(Node& n) {
  auto ins = present_inputs(n);
  if (ins.size() != 2) fail(n, "expects 2 inputs");
  check_same_dtype(n, ins);
  set_out(n, 0, DType::boolean, broadcast_inputs(n, ins));
  std::string op = n.op();
  elementwise_known(n, ins, [&](const std::vector<Dim>& a) -> std::optional<Dim> {
    if (op == "Equal" && a[0] == a[1]) return Dim(1);
    // A dim symbol is never negative: PyTorch's Equal(shape, -1) is decidable.
    auto negative = [](const Dim& d) { return d.is_static() && d.value() < 0; };
    if (op == "Equal" && ((a[0].is_symbol() && negative(a[1])) || (a[1].is_symbol() && negative(a[0])))) return Dim(0);
    if (!a[0].is_static() || !a[1].is_static()) return std::nullopt;
    int64_t x = a[0].value(), y = a[1].value();
    bool r = op == "Equal" ? x == y : op == "Less" ? x < y : op == "Greater" ? x > y : op == "LessOrEqual" ? x <= y : x >= y;
    return Dim(r ? 1 : 0);
  });
}

void logical(Node& n) {
  auto ins = present_inputs(n);
  if (ins.size() != 2) fail(n, "expects 2 inputs");
  for (Value* v : ins)
    if (v->dtype() != DType::boolean) fail(n, "inputs must be bool, got " + std::string(name(v->dtype())));
  set_out(n, 0, DType::boolean, broadcast_inputs(n, ins));
  std::string op = n.op();
  elementwise_known(n, ins, [&](const std::vector<Dim>& a) -> std::optional<Dim> {
    if (!a[0].is_static() || !a[1].is_static()) return std::nullopt;
    bool x = a[0].value() != 0, y = a[1].value() != 0;
    return Dim(op == "And" ? (x && y) : op == "Or" ? (x || y) : (x != y));
  });
}

// Neg keeps known integer values (ONNX's expanded LayerNormalization negates its axis to size a shape).
void neg(Node& n) {
  unary(n);
  Value* x = in(n, 0);
  auto k = known(x);
  if (!is_int(x->dtype()) || !k) return;
  std::vector<Dim> out;
  for (const Dim& d : *k) {
    if (!d.is_static() || !small_static(d)) return;
    out.push_back(Dim(-d.value()));
  }
  set_known(n, 0, std::move(out));
}

void float_to_bool(Node& n) {  // IsNaN, IsInf
  Value* x = in(n, 0);
  if (!is_float(x->dtype())) fail(n, "input must be a float, got " + std::string(name(x->dtype())));
  set_out(n, 0, DType::boolean, x->shape());
}

void same_dtype_binary(Node& n) {  // Mod, BitShift
  auto ins = present_inputs(n);
  if (ins.size() != 2) fail(n, "expects 2 inputs");
  check_same_dtype(n, ins);
  if (ins[0]->dtype() == DType::boolean) fail(n, "does not take bool");
  set_out(n, 0, ins[0]->dtype(), broadcast_inputs(n, ins));
}

// Integer Mod keeps known values: window-attention exports pad by (w - H % w) % w, and a static H
// must give a static padded shape. Only static operands: a symbol's remainder is unknown.
void mod(Node& n) {
  same_dtype_binary(n);
  auto ins = present_inputs(n);
  if (!is_int(ins[0]->dtype())) return;
  bool c_style = n.attr_int("fmod", 0) != 0;  // fmod=1: the sign of the dividend (C); 0: of the divisor
  elementwise_known(n, ins, [&](const std::vector<Dim>& a) -> std::optional<Dim> {
    if (!a[0].is_static() || !a[1].is_static() || !small_static(a[0]) || !small_static(a[1])) return std::nullopt;
    int64_t x = a[0].value(), y = a[1].value();
    if (y == 0) return std::nullopt;
    int64_t r = x % y;
    if (!c_style && r != 0 && ((r < 0) != (y < 0))) r += y;
    return Dim(r);
  });
}

void prelu(Node& n) {  // the slope broadcasts to X: the output has X's shape
  Value* x = in(n, 0);
  Value* slope = in(n, 1);
  check_same_dtype(n, {x, slope});
  if (!(broadcast_inputs(n, {x, slope}) == x->shape()))
    fail(n, "slope " + str(slope->shape()) + " does not broadcast to X " + str(x->shape()));
  set_out(n, 0, x->dtype(), x->shape());
}

void sum(Node& n) {
  auto ins = present_inputs(n);
  if (ins.empty()) fail(n, "expects at least one input");
  check_same_dtype(n, ins);
  set_out(n, 0, ins[0]->dtype(), broadcast_inputs(n, ins));
}

void where(Node& n) {
  Value* c = in(n, 0);
  Value* x = in(n, 1);
  Value* y = in(n, 2);
  if (c->dtype() != DType::boolean) fail(n, "condition must be bool");
  check_same_dtype(n, {x, y});
  set_out(n, 0, x->dtype(), broadcast_inputs(n, {c, x, y}));
  elementwise_known(n, {c, x, y}, [](const std::vector<Dim>& a) -> std::optional<Dim> {
    if (!a[0].is_static()) return std::nullopt;
    return a[0].value() ? a[1] : a[2];
  });
}

void cast(Node& n) {
  Value* x = in(n, 0);
  std::string to = n.attr_string("to");
  auto d = parse_dtype(to);
  if (!d) fail(n, "unknown target dtype '" + to + "'");
  set_out(n, 0, *d, x->shape());
  if (is_int(*d) && is_int(x->dtype())) pass_known(n);
}

void clip(Node& n) {
  Value* x = in(n, 0);
  for (size_t i = 1; i < 3; ++i)
    if (Value* b = opt_in(n, i); b && b->shape().size() != 0 && !(b->shape().size() == 1 && b->shape()[0] == Dim(1)))
      fail(n, "min/max must be scalars, got " + str(b->shape()));
  unary(n);
  (void)x;
}

}  // namespace

void add_elementwise_ops(Table& t) {
  auto add = [&](std::initializer_list<const char*> ops, InferFn f) {
    for (const char* op : ops) t[{"", op}] = f;
  };
  add({"Neg"}, neg);
  add({"Sqrt", "Reciprocal", "Exp", "Log", "Erf", "Tanh", "Relu", "Sigmoid", "Gelu", "LeakyRelu",
       "HardSigmoid", "HardSwish", "Abs", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh",
       "Acosh", "Atanh", "Ceil", "Floor", "Round", "Sign", "Softplus", "Softsign", "Mish", "Elu", "Selu", "Celu",
       "ThresholdedRelu", "Shrink"},
      unary);
  add({"IsNaN", "IsInf"}, float_to_bool);
  add({"Mod"}, mod);
  add({"BitShift"}, same_dtype_binary);
  add({"PRelu"}, prelu);
  add({"Sum", "Mean"}, sum);
  add({"InstanceNormalization"}, unary);
  add({"Identity", "Dropout"}, identity);
  add({"Not"}, not_op);
  add({"Add", "Sub", "Mul", "Div", "Pow"}, binary_arith);
  add({"Min", "Max"}, variadic_minmax);
  add({"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}, compare);
  add({"And", "Or", "Xor"}, logical);
  add({"Where"}, where);
  add({"Cast"}, cast);
  add({"Clip"}, clip);
}

}  // namespace sabre::ir::infer_detail
