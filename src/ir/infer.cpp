// Shape and type inference: the driver, the op table and the helpers the rule files share.
// The rules: infer_elementwise.cpp, infer_shape.cpp, infer_nn.cpp (conv/pool/norm/matmul/resize),
// infer_index.cpp, infer_extra.cpp. Tests: tests/unit/infer_test.cpp
#include "ir/infer.h"

#include <cstdio>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <mutex>
#include <set>
#include <stdexcept>

#include "ir/infer_internal.h"

namespace sabre::ir {
namespace infer_detail {

void fail(const Node& n, const std::string& msg) {
  throw ShapeError("node '" + n.name() + "' (" + n.op() + "): " + msg);
}

void needs_constant(const Node& n, const std::string& what) {
  throw ShapeUnsupported("node '" + n.name() + "' (" + n.op() + "): " + what +
                         " must be a constant for sabre to know the result's shape, but the model computes it at run time");
}

Value* opt_in(const Node& n, size_t i) {
  Value* v = n.input(i);
  if (v && !v->type().known) fail(n, "input " + std::to_string(i) + " '" + v->name() + "' has no inferred type");
  return v;
}

Value* in(const Node& n, size_t i) {
  Value* v = opt_in(n, i);
  if (!v) fail(n, "required input " + std::to_string(i) + " is missing");
  return v;
}

void set_out(Node& n, size_t i, DType d, Shape s) {
  if (i >= n.num_outputs()) return;  // optional outputs the model did not ask for
  n.output(i)->set_type(d, std::move(s));
  n.output(i)->set_known_dims(std::nullopt);
}

void set_known(Node& n, size_t i, std::vector<Dim> kd) {
  if (i >= n.num_outputs() || kd.size() > kMaxKnown) return;
  n.output(i)->set_known_dims(std::move(kd));
}

int64_t norm_axis(const Node& n, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    fail(n, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

Dim unify(const Node& n, const Dim& a, const Dim& b, const std::string& what) {
  if (a == b) return a;
  if (a.is_static() && b.is_static()) fail(n, what + " differ: " + a.str() + " vs " + b.str());
  return a.is_static() ? a : b;  // a symbol must equal the static value at run time
}

Shape broadcast(const Node& n, const std::vector<const Shape*>& shapes) {
  size_t rank = 0;
  for (const Shape* s : shapes) rank = std::max(rank, s->size());
  Shape out(rank, Dim(1));
  for (const Shape* s : shapes) {
    size_t off = rank - s->size();
    for (size_t i = 0; i < s->size(); ++i) {
      const Dim& d = (*s)[i];
      Dim& o = out[off + i];
      if (d == o || d == Dim(1)) continue;
      if (o == Dim(1)) {
        o = d;
      } else if (o.is_static() && d.is_static()) {
        fail(n, "cannot broadcast dims " + o.str() + " and " + d.str() + " (axis " + std::to_string(off + i) + ")");
      } else if (o.is_static() || d.is_static()) {
        o = o.is_static() ? o : d;  // the symbol is 1 or equal to the static dim; the result is the static dim
      } else {
        fail(n, "cannot broadcast symbolic dims " + o.str() + " and " + d.str() +
                    " (axis " + std::to_string(off + i) + "); name them alike in the model's inputs if they are equal");
      }
    }
  }
  return out;
}

namespace {
std::string sanitize(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  return out;
}
}  // namespace

Dim unknown_dim(const Node& n, size_t out, size_t i) {
  std::string base = out < n.num_outputs() ? n.output(out)->name() : n.name();
  return Dim::symbol("unk_" + sanitize(base) + "_" + std::to_string(i));
}

std::optional<std::vector<Dim>> known(const Value* v) {
  if (!v) return std::nullopt;
  return v->known_dims();
}

std::optional<std::vector<int64_t>> known_ints(const Value* v) {
  auto k = known(v);
  if (!k) return std::nullopt;
  std::vector<int64_t> out;
  for (const Dim& d : *k) {
    if (!d.is_static()) return std::nullopt;
    out.push_back(d.value());
  }
  return out;
}

Dim checked_dim(const Node& n, int64_t v, const char* what) {
  if (v < 0 || v > kMaxDim) fail(n, std::string(what) + " " + std::to_string(v) + " is negative or too large");
  return Dim(v);
}

bool is_int(DType d) { return !is_float(d) && d != DType::boolean && d != DType::str; }

// Static dims of a known list, guarded so that arithmetic on them cannot overflow.
bool small_static(const Dim& d) { return d.is_static() && d.value() >= -kMaxDim && d.value() <= kMaxDim; }

// a*b, failing instead of overflowing when both are static.
Dim mul(const Node& n, const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) {
    int64_t r;
    if (__builtin_mul_overflow(a.value(), b.value(), &r) || r > (int64_t{1} << 62)) fail(n, "element count overflows");
    return Dim(r);
  }
  return a * b;
}

// The element count of a shape, without overflow.
Dim numel(const Node& n, const Shape& s) {
  Dim r(1);
  for (const Dim& d : s) r = mul(n, r, d);
  return r;
}

// The element count of a rank<=1 static shape, or -1.
int64_t list_len(const Shape& s) {
  if (s.empty()) return 1;
  if (s.size() == 1 && s[0].is_static()) return s[0].value();
  return -1;
}

// Output 0 carries input 0's list unchanged (Identity, Reshape/Squeeze/Unsqueeze of shape lists).
// Any static rank: exports reshape pad lists to [n,2] and back, in row-major order both ways.
void pass_known(Node& n) {
  auto k = known(n.input(0));
  if (!k || !is_int(n.output(0)->dtype())) return;
  const Shape& s = n.output(0)->shape();
  size_t len = 1;
  for (const Dim& d : s) {
    if (!d.is_static() || d.value() < 0) return;
    len = std::min<size_t>(len * std::min<size_t>(static_cast<size_t>(d.value()), kMaxKnown + 1), kMaxKnown + 1);
  }
  if (len == k->size()) set_known(n, 0, *k);
}

void unary(Node& n) {
  Value* x = in(n, 0);
  set_out(n, 0, x->dtype(), x->shape());
}

void identity(Node& n) {
  if (Value* x = in(n, 0); x->type().sequence) {  // Identity of a sequence is that sequence
    n.output(0)->set_type(x->type());
    n.output(0)->set_known_dims(std::nullopt);
    return;
  }
  unary(n);
  pass_known(n);
}

std::vector<Value*> present_inputs(const Node& n) {
  std::vector<Value*> v;
  for (size_t i = 0; i < n.num_inputs(); ++i)
    if (Value* x = opt_in(n, i)) v.push_back(x);
  return v;
}

void check_same_dtype(const Node& n, const std::vector<Value*>& ins) {
  for (Value* v : ins)
    if (v->dtype() != ins[0]->dtype())
      fail(n, "inputs have different dtypes: " + std::string(name(ins[0]->dtype())) + " and " +
                  std::string(name(v->dtype())));
}

}  // namespace infer_detail

using namespace infer_detail;

namespace {

Table build_table() {
  Table t;
  add_elementwise_ops(t);
  add_shape_ops(t);
  add_nn_ops(t);
  add_index_ops(t);
  add_extra_ops(t);
  add_sequence_ops(t);
  return t;
}

std::mutex& table_mutex() {
  static std::mutex m;
  return m;
}

Table& table() {
  static Table t = build_table();
  return t;
}

InferFn lookup(const std::string& domain, const std::string& op) {
  std::lock_guard<std::mutex> lock(table_mutex());
  auto it = table().find({domain, op});
  return it == table().end() ? nullptr : it->second;
}

}  // namespace

void register_infer(const std::string& domain, const std::string& op, InferFn fn) {
  std::lock_guard<std::mutex> lock(table_mutex());
  table()[{domain, op}] = fn;
}

bool has_infer(const std::string& domain, const std::string& op) { return lookup(domain, op) != nullptr; }

std::vector<std::string> supported_ops() {
  std::lock_guard<std::mutex> lock(table_mutex());
  std::vector<std::string> out;
  for (const auto& [k, f] : table())
    if (k.first.empty()) out.push_back(k.second);
  return out;  // std::map keeps them sorted
}

void infer_node(Node& n) {
  InferFn f = lookup(n.domain(), n.op());
  if (!f)
    fail(n, "no shape inference for op '" + (n.domain().empty() ? "" : n.domain() + ".") + n.op() + "'");
  for (size_t i = 0; i < n.num_inputs(); ++i) {
    const Value* v = opt_in(n, i);  // every present input has a type
    if (!v) continue;
    if (v->type().sequence && !op_takes_sequences(n.domain(), n.op()))
      throw ShapeUnsupported("node '" + n.name() + "' (" + n.op() + "): input '" + v->name() +
                             "' is a sequence, which sabre does not support for this op");
    if (!v->type().sequence && v->dtype() == DType::str && !op_takes_strings(n.domain(), n.op()))
      throw ShapeUnsupported("node '" + n.name() + "' (" + n.op() + "): input '" + v->name() +
                             "' is a string tensor, which sabre does not support for this op");
  }
  try {
    f(n);
  } catch (const std::overflow_error& e) {  // checked Dim arithmetic on a model's extreme values
    fail(n, e.what());
  }
  for (Value* v : n.outputs())
    for (const Dim& d : v->shape())
      if (d.is_static() && (d.value() < 0 || d.value() > kMaxDim))
        fail(n, "output '" + v->name() + "' gets invalid dim " + d.str() + " in " + str(v->shape()));
  for (Value* v : n.outputs()) numel(n, v->shape());  // later products of these dims must not overflow
}

void infer_types(Graph& g) {
  for (Node* n : g.topo_order()) infer_node(*n);
}

}  // namespace sabre::ir
