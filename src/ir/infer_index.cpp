// Shape inference for the indexing ops: scatter, GatherND, TopK, OneHot and the ops whose output
// size depends on the data (NonZero, Compress, Unique): those get fresh unknown dims, which only the
// reference executor can fill in. Tests: tests/unit/infer_index_test.cpp
#include "ir/infer_internal.h"

namespace sabre::ir::infer_detail {
namespace {

bool int_dtype(DType d) { return !is_float(d) && d != DType::boolean; }

void check_indices(const Node& n, const Value* v, const char* what) {
  if (!int_dtype(v->dtype())) fail(n, std::string(what) + " must be integers, got " + std::string(name(v->dtype())));
}

void same_as_data(Node& n) {
  Value* x = in(n, 0);
  check_indices(n, in(n, 1), "indices");
  Value* u = in(n, 2);
  if (u->dtype() != x->dtype()) fail(n, "updates must have the data's dtype");
  set_out(n, 0, x->dtype(), x->shape());
}

void gather_nd(Node& n) {
  Value* x = in(n, 0);
  Value* idx = in(n, 1);
  check_indices(n, idx, "indices");
  const Shape& xs = x->shape();
  const Shape& is = idx->shape();
  const int64_t b = n.attr_int("batch_dims", 0);
  if (is.empty() || !is.back().is_static()) fail(n, "indices need a static last dim (the index tuple length)");
  const int64_t q = is.back().value();
  if (b < 0 || q < 1 || b + q > static_cast<int64_t>(xs.size()) || b >= static_cast<int64_t>(is.size()))
    fail(n, "index tuples of length " + std::to_string(q) + " with batch_dims " + std::to_string(b) +
                " do not fit data of rank " + std::to_string(xs.size()));
  Shape out(is.begin(), is.end() - 1);
  out.insert(out.end(), xs.begin() + b + q, xs.end());
  set_out(n, 0, x->dtype(), out);
}

void topk(Node& n) {
  Value* x = in(n, 0);
  Value* k = in(n, 1);
  check_indices(n, k, "K");
  int64_t r = static_cast<int64_t>(x->shape().size());
  int64_t axis = norm_axis(n, n.attr_int("axis", -1), r);
  Shape out = x->shape();
  auto kv = known(k);
  out[axis] = kv && kv->size() == 1 ? (*kv)[0] : unknown_dim(n, 0, static_cast<size_t>(axis));
  if (out[axis].is_static()) checked_dim(n, out[axis].value(), "K");
  set_out(n, 0, x->dtype(), out);
  set_out(n, 1, DType::i64, out);
}

void onehot(Node& n) {
  Value* idx = in(n, 0);
  Value* depth = in(n, 1);
  Value* vals = in(n, 2);
  int64_t r = static_cast<int64_t>(idx->shape().size()) + 1;
  int64_t axis = norm_axis(n, n.attr_int("axis", -1), r);
  Dim d = unknown_dim(n, 0, static_cast<size_t>(axis));
  if (depth->is_constant() && depth->constant().numel() == 1)
    d = checked_dim(n, static_cast<int64_t>(depth->constant().get_f64(0)), "depth");
  Shape out = idx->shape();
  out.insert(out.begin() + axis, d);
  set_out(n, 0, vals->dtype(), out);
}

void nonzero(Node& n) {
  Value* x = in(n, 0);
  set_out(n, 0, DType::i64, {Dim(std::max<int64_t>(1, static_cast<int64_t>(x->shape().size()))), unknown_dim(n, 0, 1)});
}

void compress(Node& n) {
  Value* x = in(n, 0);
  in(n, 1);
  if (!n.has_attr("axis")) return set_out(n, 0, x->dtype(), {unknown_dim(n, 0, 0)});
  int64_t axis = norm_axis(n, n.attr_int("axis"), static_cast<int64_t>(x->shape().size()));
  Shape out = x->shape();
  out[axis] = unknown_dim(n, 0, static_cast<size_t>(axis));
  set_out(n, 0, x->dtype(), out);
}

void unique(Node& n) {
  Value* x = in(n, 0);
  Dim u = unknown_dim(n, 0, 0);
  Shape y = {u};
  Dim len = Dim(1);
  if (n.has_attr("axis")) {
    int64_t axis = norm_axis(n, n.attr_int("axis"), static_cast<int64_t>(x->shape().size()));
    y = x->shape();
    len = y[axis];
    y[axis] = u;
  } else {
    for (const Dim& d : x->shape()) len = len * d;
  }
  set_out(n, 0, x->dtype(), y);
  set_out(n, 1, DType::i64, {u});
  set_out(n, 2, DType::i64, {len});
  set_out(n, 3, DType::i64, {u});
}

void eyelike(Node& n) {
  Value* x = in(n, 0);
  if (x->shape().size() != 2) fail(n, "input must be 2-D");
  DType d = x->dtype();
  if (n.has_attr("dtype")) {
    auto p = parse_dtype(n.attr_string("dtype"));
    if (!p) fail(n, "unknown dtype '" + n.attr_string("dtype") + "'");
    d = *p;
  }
  set_out(n, 0, d, x->shape());
}

void reverse_sequence(Node& n) {
  Value* x = in(n, 0);
  check_indices(n, in(n, 1), "sequence_lens");
  set_out(n, 0, x->dtype(), x->shape());
}

void cast_like(Node& n) { set_out(n, 0, in(n, 1)->dtype(), in(n, 0)->shape()); }

}  // namespace

void add_index_ops(Table& t) {
  t[{"", "ScatterElements"}] = same_as_data;
  t[{"", "ScatterND"}] = same_as_data;
  t[{"", "GatherND"}] = gather_nd;
  t[{"", "TopK"}] = topk;
  t[{"", "OneHot"}] = onehot;
  t[{"", "NonZero"}] = nonzero;
  t[{"", "Compress"}] = compress;
  t[{"", "Unique"}] = unique;
  t[{"", "EyeLike"}] = eyelike;
  t[{"", "ReverseSequence"}] = reverse_sequence;
  t[{"", "CastLike"}] = cast_like;
}

}  // namespace sabre::ir::infer_detail
