// Shape inference for sequence values (ONNX seq(tensor): SequenceEmpty/Construct/Insert/Erase/At/Length,
// SplitToSequence, ConcatFromSequence) and STRING tensors (StringNormalizer). A sequence's type is
// its elements' dtype and the shape they share (fresh symbols where they differ); its length is not
// typed. Both kinds reach only the ops listed in takes_sequences/takes_strings: every other rule
// assumes a numeric tensor. Tests: tests/unit/sequence_test.cpp
#include "ir/infer_internal.h"

#include <set>

namespace sabre::ir {

bool op_takes_sequences(const std::string& domain, const std::string& op) {
  static const std::set<std::string> ops = {"SequenceAt", "SequenceInsert", "SequenceErase", "SequenceLength",
                                            "ConcatFromSequence", "Identity"};
  return domain.empty() && ops.count(op);
}

bool op_takes_strings(const std::string& domain, const std::string& op) {
  static const std::set<std::string> ops = {"StringNormalizer", "Identity", "Equal", "Cast", "CastLike",
                                            "SequenceConstruct", "SequenceInsert", "SequenceAt", "SequenceErase",
                                            "SequenceLength", "Shape", "Size"};
  return domain.empty() && ops.count(op);
}

namespace infer_detail {
namespace {

void set_seq_out(Node& n, size_t i, DType d, Shape s, bool rank_known = true) {
  if (i >= n.num_outputs()) return;
  TensorType t{d, std::move(s), true, true};
  t.elem_rank_known = rank_known;
  n.output(i)->set_type(std::move(t));
  n.output(i)->set_known_dims(std::nullopt);
}

Value* seq_in(const Node& n, size_t i) {
  Value* v = in(n, i);
  if (!v->type().sequence) fail(n, "input " + std::to_string(i) + " '" + v->name() + "' must be a sequence");
  return v;
}

Value* tensor_in(const Node& n, size_t i) {
  Value* v = in(n, i);
  if (v->type().sequence) fail(n, "input " + std::to_string(i) + " '" + v->name() + "' must be a tensor, not a sequence");
  return v;
}

void check_position(const Node& n, size_t i) {
  Value* p = opt_in(n, i);
  if (!p) return;
  // A scalar per the spec; ONNX's own test data also gives [1], which runtimes take.
  const bool one = p->shape().empty() || (p->shape().size() == 1 && p->shape()[0] == Dim(1));
  if (p->type().sequence || (p->dtype() != DType::i64 && p->dtype() != DType::i32) || !one)
    fail(n, "position '" + p->name() + "' must be an int32 or int64 scalar");
}

// The shape elements of both shapes have: equal dims stay, differing ones become fresh symbols.
Shape join(const Node& n, const Shape& a, const Shape& b) {
  Shape out = a;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i])) out[i] = unknown_dim(n, 0, i);
  return out;
}

// Merges one more element type into a sequence's (dtype, shape, rank known).
void merge_elem(const Node& n, const TensorType& seq, const Value* x, Shape& shape, bool& rank_known) {
  if (x->dtype() != seq.dtype)
    fail(n, "tensor '" + x->name() + "' is " + std::string(name(x->dtype())) + " but the sequence holds " +
                std::string(name(seq.dtype)));
  if (!rank_known) return;
  if (x->shape().size() != shape.size()) {
    rank_known = false;
    shape.clear();
    return;
  }
  shape = join(n, shape, x->shape());
}

void sequence_empty(Node& n) {
  DType d = DType::f32;
  if (n.has_attr("dtype")) {
    auto p = parse_dtype(n.attr_string("dtype"));
    if (!p) fail(n, "unknown dtype '" + n.attr_string("dtype") + "'");
    d = *p;
  }
  set_seq_out(n, 0, d, {}, false);
}

void sequence_construct(Node& n) {
  if (n.num_inputs() == 0) fail(n, "needs at least one tensor");
  Value* x0 = tensor_in(n, 0);
  TensorType t{x0->dtype(), x0->shape(), true, true};
  Shape shape = x0->shape();
  bool rank_known = true;
  for (size_t i = 1; i < n.num_inputs(); ++i) merge_elem(n, t, tensor_in(n, i), shape, rank_known);
  set_seq_out(n, 0, x0->dtype(), shape, rank_known);
}

void sequence_insert(Node& n) {
  Value* s = seq_in(n, 0);
  Value* x = tensor_in(n, 1);
  check_position(n, 2);
  if (x->dtype() != s->dtype())
    fail(n, "tensor '" + x->name() + "' is " + std::string(name(x->dtype())) + " but the sequence holds " +
                std::string(name(s->dtype())));
  // Into a SequenceEmpty the tensor's shape is the elements' shape; into a sequence whose elements
  // nothing describes (a graph input without an element shape) nothing is known after either.
  const bool empty = s->producer() && s->producer()->op() == "SequenceEmpty" && s->producer()->domain().empty();
  if (!s->type().elem_rank_known) {
    set_seq_out(n, 0, s->dtype(), empty ? x->shape() : Shape{}, empty);
    return;
  }
  Shape shape = s->shape();
  bool rank_known = true;
  merge_elem(n, s->type(), x, shape, rank_known);
  set_seq_out(n, 0, s->dtype(), shape, rank_known);
}

void sequence_erase(Node& n) {
  Value* s = seq_in(n, 0);
  check_position(n, 1);
  set_seq_out(n, 0, s->dtype(), s->shape(), s->type().elem_rank_known);
}

void sequence_at(Node& n) {
  Value* s = seq_in(n, 0);
  check_position(n, 1);
  if (!s->type().elem_rank_known)
    throw ShapeUnsupported("node '" + n.name() + "' (SequenceAt): the rank of the elements of '" + s->name() +
                           "' is not known (give the sequence's element shape in the model)");
  // Elements may differ where the sequence's shape has symbols: each SequenceAt gets its own.
  Shape out = s->shape();
  for (size_t i = 0; i < out.size(); ++i)
    if (!out[i].is_static()) out[i] = unknown_dim(n, 0, i);
  set_out(n, 0, s->dtype(), out);
}

void sequence_length(Node& n) {
  seq_in(n, 0);
  set_out(n, 0, DType::i64, {});
}

void split_to_sequence(Node& n) {
  Value* x = tensor_in(n, 0);
  if (x->dtype() == DType::str) fail(n, "does not take string tensors");
  Shape xs = x->shape();
  const int64_t r = static_cast<int64_t>(xs.size());
  if (r == 0) fail(n, "input must have rank >= 1");
  const int64_t axis = norm_axis(n, n.attr_int("axis", 0), r);
  Value* split = opt_in(n, 1);
  if (split && !is_int(split->dtype())) fail(n, "split must be integers");
  Shape out = xs;
  if (!split) {
    if (n.attr_int("keepdims", 1) == 0) out.erase(out.begin() + axis);
    else out[axis] = Dim(1);
  } else if (auto k = known_ints(split); k && split->shape().empty()) {
    out[axis] = checked_dim(n, (*k)[0], "split size");  // the last chunk may be shorter
    if (!(xs[axis].is_static() && xs[axis].value() % (*k)[0] == 0)) out[axis] = unknown_dim(n, 0, axis);
  } else {
    out[axis] = unknown_dim(n, 0, static_cast<size_t>(axis));
  }
  set_seq_out(n, 0, x->dtype(), out);
}

void concat_from_sequence(Node& n) {
  Value* s = seq_in(n, 0);
  if (s->dtype() == DType::str) fail(n, "does not take string tensors");
  if (!s->type().elem_rank_known)
    throw ShapeUnsupported("node '" + n.name() + "' (ConcatFromSequence): the rank of the elements of '" + s->name() +
                           "' is not known (give the sequence's element shape in the model)");
  Shape out = s->shape();
  const bool new_axis = n.attr_int("new_axis", 0) != 0;
  const int64_t r = static_cast<int64_t>(out.size()) + (new_axis ? 1 : 0);
  const int64_t axis = norm_axis(n, n.attr_int("axis"), r);
  // The concatenated length depends on the sequence's length; other symbolic dims get fresh names too.
  if (new_axis) out.insert(out.begin() + axis, unknown_dim(n, 0, static_cast<size_t>(axis)));
  for (size_t i = 0; i < out.size(); ++i)
    if (!out[i].is_static() || static_cast<int64_t>(i) == axis) out[i] = unknown_dim(n, 0, i);
  set_out(n, 0, s->dtype(), out);
}

void string_normalizer(Node& n) {
  Value* x = tensor_in(n, 0);
  if (x->dtype() != DType::str) fail(n, "input must be a string tensor, got " + std::string(name(x->dtype())));
  const Shape& xs = x->shape();
  if (xs.size() != 1 && !(xs.size() == 2 && xs[0] == Dim(1)))
    fail(n, "input must be [C] or [1,C], got " + str(xs));
  Shape out = xs;
  out.back() = unknown_dim(n, 0, xs.size() - 1);  // stopwords removed: the count depends on the data
  set_out(n, 0, DType::str, out);
}

}  // namespace

void add_sequence_ops(Table& t) {
  t[{"", "SequenceEmpty"}] = sequence_empty;
  t[{"", "SequenceConstruct"}] = sequence_construct;
  t[{"", "SequenceInsert"}] = sequence_insert;
  t[{"", "SequenceErase"}] = sequence_erase;
  t[{"", "SequenceAt"}] = sequence_at;
  t[{"", "SequenceLength"}] = sequence_length;
  t[{"", "SplitToSequence"}] = split_to_sequence;
  t[{"", "ConcatFromSequence"}] = concat_from_sequence;
  t[{"", "StringNormalizer"}] = string_normalizer;
}

}  // namespace infer_detail
}  // namespace sabre::ir
