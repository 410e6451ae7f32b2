// Shape and type inference of shape-manipulation ops (Shape, Reshape, Transpose, Concat, Slice,
// Gather, Expand, Range, ...), softmax and reductions. Tests: tests/unit/infer_test.cpp
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <set>
#include <stdexcept>

#include "ir/infer_internal.h"

namespace sabre::ir::infer_detail {
namespace {

// Known values of a small integer tensor, rearranged (Transpose, multi-axis Slice): output element
// at multi-index idx comes from x's element at src(idx). Exports build pad lists as [n,2] tensors
// that are reversed and transposed before they reach Pad, so rank-1 lists are not enough.
template <class F>
void rearrange_known(Node& n, const Value* x, const std::vector<int64_t>& out_dims, F src) {
  auto kx = known(x);
  if (!is_int(x->dtype()) || !kx || !is_static(x->shape())) return;
  std::vector<int64_t> xd = static_dims(x->shape());
  auto count = [](const std::vector<int64_t>& dims) {  // capped: the lists are at most kMaxKnown long
    int64_t c = 1;
    for (int64_t d : dims) c = std::min<int64_t>(c * std::min<int64_t>(d, kMaxKnown + 1), kMaxKnown + 1);
    return c;
  };
  int64_t on = count(out_dims);
  if (count(xd) != static_cast<int64_t>(kx->size()) || on > static_cast<int64_t>(kMaxKnown)) return;
  std::vector<Dim> kd;
  std::vector<int64_t> idx(out_dims.size(), 0);
  for (int64_t i = 0; i < on; ++i) {
    std::vector<int64_t> s = src(idx);
    int64_t flat = 0;
    for (size_t a = 0; a < xd.size(); ++a) flat = flat * xd[a] + s[a];
    kd.push_back((*kx)[flat]);
    for (int64_t a = static_cast<int64_t>(idx.size()) - 1; a >= 0 && ++idx[a] == out_dims[a]; --a) idx[a] = 0;
  }
  set_known(n, 0, std::move(kd));
}

void shape_op(Node& n) {
  Value* x = in(n, 0);
  int64_t r = static_cast<int64_t>(x->shape().size());
  int64_t start = n.attr_int("start", 0), end = n.attr_int("end", r);
  auto clampi = [&](int64_t a) { return std::clamp(a < 0 ? a + r : a, int64_t{0}, r); };
  start = clampi(start);
  end = clampi(end);
  std::vector<Dim> dims;
  for (int64_t i = start; i < end; ++i) dims.push_back(x->shape()[i]);
  set_out(n, 0, DType::i64, {Dim(static_cast<int64_t>(dims.size()))});
  set_known(n, 0, std::move(dims));
}

// A rank-1 static-length shape input: its list of dims, or unknown dims of that length.
std::vector<Dim> shape_operand(Node& n, Value* s, size_t out) {
  if (auto k = known(s)) {
    for (const Dim& d : *k)
      if (d.is_static() && (d.value() < -1 || d.value() > kMaxDim)) fail(n, "shape value " + d.str() + " is out of range");
    return *k;
  }
  if (s->shape().size() != 1 || !s->shape()[0].is_static() || s->shape()[0].value() > 64)
    fail(n, "the shape operand '" + s->name() + "' must be 1-D of static length, got " + str(s->shape()));
  std::vector<Dim> out_dims;
  for (int64_t i = 0; i < s->shape()[0].value(); ++i) out_dims.push_back(unknown_dim(n, out, i));
  return out_dims;
}

void reshape(Node& n) {
  Value* x = in(n, 0);
  Value* s = in(n, 1);
  if (is_float(s->dtype())) fail(n, "shape must be an integer tensor");
  bool allowzero = n.attr_int("allowzero", 0) != 0;
  std::vector<Dim> t = shape_operand(n, s, 0);
  Shape out;
  int64_t neg = -1;
  Dim rest(1);
  for (size_t i = 0; i < t.size(); ++i) {
    Dim d = t[i];
    if (d.is_static() && d.value() == 0 && !allowzero) {
      if (i >= x->shape().size()) fail(n, "shape[" + std::to_string(i) + "]=0 copies a dim the input does not have");
      d = x->shape()[i];
    } else if (d.is_static() && d.value() == -1) {
      if (neg >= 0) fail(n, "more than one -1 in the target shape");
      neg = static_cast<int64_t>(i);
      out.push_back(Dim(1));
      continue;
    }
    out.push_back(d);
    rest = mul(n, rest, d);
  }
  Dim total = numel(n, x->shape());
  if (neg >= 0) {
    auto q = total.divide(rest);
    if (q) {
      out[neg] = *q;
    } else if (total.is_static() && rest.is_static()) {
      if (total.value() == 0 && rest.value() == 0) out[neg] = Dim(0);
      else fail(n, "cannot reshape " + str(x->shape()) + " to " + str(out) + ": " + total.str() +
                       " elements are not a multiple of " + rest.str());
    } else {
      out[neg] = unknown_dim(n, 0, neg);
    }
  } else if (total.is_static() && rest.is_static() && total != rest) {
    fail(n, "cannot reshape " + str(x->shape()) + " (" + total.str() + " elements) to " + str(out));
  }
  set_out(n, 0, x->dtype(), out);
  if (is_int(x->dtype())) pass_known(n);
}

void transpose(Node& n) {
  Value* x = in(n, 0);
  int64_t r = static_cast<int64_t>(x->shape().size());
  std::vector<int64_t> perm;
  for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
  perm = n.attr_ints("perm", perm);
  if (static_cast<int64_t>(perm.size()) != r) fail(n, "perm has " + std::to_string(perm.size()) + " entries for rank " + std::to_string(r));
  std::vector<bool> seen(r, false);
  Shape out;
  for (int64_t p : perm) {
    int64_t a = norm_axis(n, p, r);
    if (seen[a]) fail(n, "perm repeats axis " + std::to_string(a));
    seen[a] = true;
    out.push_back(x->shape()[a]);
  }
  set_out(n, 0, x->dtype(), out);
  if (!is_static(out)) return;
  std::vector<int64_t> axes;
  for (int64_t p : perm) axes.push_back(norm_axis(n, p, r));
  rearrange_known(n, x, static_dims(out), [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> s(idx.size());
    for (size_t i = 0; i < idx.size(); ++i) s[axes[i]] = idx[i];
    return s;
  });
}

void flatten(Node& n) {
  Value* x = in(n, 0);
  int64_t r = static_cast<int64_t>(x->shape().size());
  int64_t axis = n.attr_int("axis", 1);
  if (axis < -r || axis > r) fail(n, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
  if (axis < 0) axis += r;
  Dim a(1), b(1);
  for (int64_t i = 0; i < r; ++i) (i < axis ? a : b) = mul(n, i < axis ? a : b, x->shape()[i]);
  set_out(n, 0, x->dtype(), {a, b});
}

std::vector<int64_t> const_axes(Node& n, size_t i, const char* what) {
  Value* a = opt_in(n, i);
  if (!a) return {};
  auto k = known_ints(a);
  if (!k) needs_constant(n, what);
  return *k;
}

// A list operand computed at run time (axes, repeats): its length when its shape is static. The
// result's rank follows from it; its dims become unknown symbols that the reference fills in.
std::optional<int64_t> runtime_list(Node& n, size_t i, const char* what) {
  Value* a = opt_in(n, i);
  if (!a || known_ints(a)) return std::nullopt;
  int64_t len = list_len(a->shape());
  if (len < 0 || a->shape().size() != 1) needs_constant(n, std::string(what) + " (of unknown length)");
  return len;
}

void unknown_shape(Node& n, size_t out, DType dt, int64_t rank) {
  Shape s;
  for (int64_t i = 0; i < rank; ++i) s.push_back(unknown_dim(n, out, static_cast<size_t>(i)));
  set_out(n, out, dt, s);
}

void squeeze(Node& n) {
  Value* x = in(n, 0);
  int64_t r = static_cast<int64_t>(x->shape().size());
  bool has_axes = opt_in(n, 1) != nullptr;
  if (auto len = runtime_list(n, 1, "axes")) return unknown_shape(n, 0, x->dtype(), std::max<int64_t>(0, r - *len));
  std::vector<int64_t> axes = const_axes(n, 1, "axes");
  std::vector<bool> drop(r, false);
  if (!has_axes) {
    for (int64_t i = 0; i < r; ++i) drop[i] = x->shape()[i] == Dim(1);
  }
  for (int64_t a : axes) {
    int64_t ax = norm_axis(n, a, r);
    const Dim& d = x->shape()[ax];
    if (d.is_static() && d.value() != 1) fail(n, "cannot squeeze axis " + std::to_string(ax) + " of size " + d.str());
    drop[ax] = true;
  }
  Shape out;
  for (int64_t i = 0; i < r; ++i)
    if (!drop[i]) out.push_back(x->shape()[i]);
  set_out(n, 0, x->dtype(), out);
  pass_known(n);
}

void unsqueeze(Node& n) {
  Value* x = in(n, 0);
  in(n, 1);
  if (auto len = runtime_list(n, 1, "axes")) {
    if (*len > 64) fail(n, "result rank is too large");
    return unknown_shape(n, 0, x->dtype(), static_cast<int64_t>(x->shape().size()) + *len);
  }
  std::vector<int64_t> axes = const_axes(n, 1, "axes");
  int64_t r = static_cast<int64_t>(x->shape().size() + axes.size());
  if (r > 64) fail(n, "result rank is too large");
  std::vector<bool> ins(r, false);
  for (int64_t a : axes) {
    int64_t ax = norm_axis(n, a, r);
    if (ins[ax]) fail(n, "axes repeat " + std::to_string(ax));
    ins[ax] = true;
  }
  Shape out;
  size_t j = 0;
  for (int64_t i = 0; i < r; ++i) out.push_back(ins[i] ? Dim(1) : x->shape()[j++]);
  set_out(n, 0, x->dtype(), out);
  pass_known(n);
}

void concat(Node& n) {
  auto ins = present_inputs(n);
  if (ins.empty()) fail(n, "expects at least one input");
  check_same_dtype(n, ins);
  int64_t r = static_cast<int64_t>(ins[0]->shape().size());
  if (r == 0) fail(n, "inputs must have rank >= 1");
  int64_t axis = norm_axis(n, n.attr_int("axis"), r);
  Shape out = ins[0]->shape();
  for (size_t k = 1; k < ins.size(); ++k) {
    const Shape& s = ins[k]->shape();
    if (static_cast<int64_t>(s.size()) != r) fail(n, "inputs have different ranks: " + str(ins[0]->shape()) + " vs " + str(s));
    for (int64_t i = 0; i < r; ++i)
      out[i] = i == axis ? out[i] + s[i] : unify(n, out[i], s[i], "dims on axis " + std::to_string(i));
  }
  set_out(n, 0, ins[0]->dtype(), out);
  if (r == 1 && is_int(ins[0]->dtype())) {
    std::vector<Dim> kd;
    for (Value* v : ins) {
      auto k = known(v);
      if (!k) return;
      kd.insert(kd.end(), k->begin(), k->end());
    }
    set_known(n, 0, std::move(kd));
  }
}

void split(Node& n) {
  Value* x = in(n, 0);
  int64_t r = static_cast<int64_t>(x->shape().size());
  int64_t axis = norm_axis(n, n.attr_int("axis", 0), r);
  const Dim& d = x->shape()[axis];
  size_t k = n.num_outputs();
  std::vector<Dim> sizes;
  if (Value* s = opt_in(n, 1)) {
    auto sz = known_ints(s);
    if (!sz) {  // sizes computed at run time: only the split axis is unknown
      for (size_t i = 0; i < k; ++i) {
        Shape o = x->shape();
        o[axis] = unknown_dim(n, i, static_cast<size_t>(axis));
        set_out(n, i, x->dtype(), o);
      }
      return;
    }
    if (sz->size() != k) fail(n, std::to_string(sz->size()) + " split sizes for " + std::to_string(k) + " outputs");
    Dim sum(0);
    for (int64_t v : *sz) {
      sizes.push_back(checked_dim(n, v, "split size"));
      sum = sum + Dim(v);
    }
    if (d.is_static() && sum != d) fail(n, "split sizes sum to " + sum.str() + " but the axis has " + d.str());
  } else {
    int64_t parts = n.attr_int("num_outputs", static_cast<int64_t>(k));
    if (parts != static_cast<int64_t>(k) || k == 0) fail(n, "num_outputs=" + std::to_string(parts) + " but the node has " + std::to_string(k) + " outputs");
    if (d.is_static()) {
      int64_t chunk = (d.value() + parts - 1) / parts;
      for (size_t i = 0; i < k; ++i) sizes.push_back(Dim(std::max<int64_t>(0, std::min(chunk, d.value() - chunk * static_cast<int64_t>(i)))));
    } else {
      auto q = d.divide(Dim(parts));
      for (size_t i = 0; i < k; ++i) sizes.push_back(q ? *q : unknown_dim(n, i, axis));
    }
  }
  for (size_t i = 0; i < k; ++i) {
    Shape s = x->shape();
    s[axis] = sizes[i];
    set_out(n, i, x->dtype(), s);
  }
}

// Slice length along one axis for step 1 when dims are symbolic; nullopt when it can't be expressed.
std::optional<Dim> slice_len_symbolic(const Dim& dim, Dim s, Dim e) {
  constexpr int64_t kBig = int64_t{1} << 31;
  if (s.is_static()) {
    if (s.value() < 0) s = dim + s;
    else if (s.value() >= kBig) return Dim(0);
  }
  if (e.is_static()) {
    if (e.value() >= kBig) e = dim;
    else if (e.value() < 0) e = dim + e;
  }
  return e - s;
}

void slice(Node& n) {
  Value* x = in(n, 0);
  int64_t r = static_cast<int64_t>(x->shape().size());
  auto starts = known(in(n, 1));
  auto ends = known(in(n, 2));
  std::vector<int64_t> axes, steps;
  if (runtime_list(n, 3, "axes") || runtime_list(n, 4, "steps")) return unknown_shape(n, 0, x->dtype(), r);
  if (opt_in(n, 3)) axes = const_axes(n, 3, "axes");
  if (opt_in(n, 4)) steps = const_axes(n, 4, "steps");
  Shape out = x->shape();
  if (!starts || !ends) {
    // Data-dependent bounds: only the sliced axes become unknown, which needs the axes.
    if (!opt_in(n, 3)) {
      for (int64_t i = 0; i < r; ++i) out[i] = unknown_dim(n, 0, i);
    } else {
      for (int64_t a : axes) out[norm_axis(n, a, r)] = unknown_dim(n, 0, norm_axis(n, a, r));
    }
    set_out(n, 0, x->dtype(), out);
    return;
  }
  size_t k = starts->size();
  if (ends->size() != k) fail(n, "starts and ends have different lengths");
  if (axes.empty() && !opt_in(n, 3))
    for (size_t i = 0; i < k; ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty() && !opt_in(n, 4)) steps.assign(k, 1);
  if (axes.size() != k || steps.size() != k) fail(n, "starts, ends, axes and steps have different lengths");
  std::vector<bool> seen(r, false);
  struct Static { int64_t start, step, len; };
  std::vector<std::optional<Static>> plan(r);
  for (size_t i = 0; i < k; ++i) {
    int64_t a = norm_axis(n, axes[i], r);
    if (seen[a]) fail(n, "axis " + std::to_string(a) + " is sliced twice");
    seen[a] = true;
    int64_t st = steps[i];
    if (st == 0) fail(n, "step must not be 0");
    const Dim& dim = x->shape()[a];
    Dim s = (*starts)[i], e = (*ends)[i];
    if (dim.is_static() && small_static(dim) && s.is_static() && e.is_static() && st >= -kMaxDim && st <= kMaxDim) {
      // Bounds past either end (PyTorch writes INT64_MAX for "to the end") clamp like ONNX says.
      int64_t D = dim.value(), S = std::clamp(s.value(), -kMaxDim, kMaxDim), E = std::clamp(e.value(), -kMaxDim, kMaxDim);
      if (S < 0) S += D;
      if (E < 0) E += D;
      if (D == 0) {
        S = E = 0;
      } else if (st > 0) {
        S = std::clamp<int64_t>(S, 0, D);
        E = std::clamp<int64_t>(E, 0, D);
      } else {
        S = std::clamp<int64_t>(S, 0, D - 1);
        E = std::clamp<int64_t>(E, -1, D - 1);
      }
      int64_t len = st > 0 ? (E > S ? (E - S + st - 1) / st : 0) : (S > E ? (S - E - st - 1) / -st : 0);
      out[a] = Dim(len);
      plan[a] = Static{S, st, len};
      continue;
    }
    std::optional<Dim> len;
    if (st == 1) len = slice_len_symbolic(dim, s, e);
    else if (st == -1 && s.is_static() && e.is_static() && (s.value() == -1 || s.value() >= (int64_t{1} << 31)) &&
             e.value() <= -(int64_t{1} << 31))
      len = dim;  // a full reversal
    out[a] = len ? *len : unknown_dim(n, 0, a);
  }
  set_out(n, 0, x->dtype(), out);
  if (!is_static(x->shape())) return;
  std::vector<int64_t> out_dims;
  for (int64_t a = 0; a < r; ++a) {
    if (!plan[a] && !seen[a]) plan[a] = Static{0, 1, x->shape()[a].value()};  // an axis not sliced
    if (!plan[a]) return;
    out_dims.push_back(plan[a]->len);
  }
  rearrange_known(n, x, out_dims, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> s(idx.size());
    for (size_t a = 0; a < idx.size(); ++a) s[a] = plan[a]->start + idx[a] * plan[a]->step;
    return s;
  });
}

void gather(Node& n) {
  Value* x = in(n, 0);
  Value* idx = in(n, 1);
  if (is_float(idx->dtype())) fail(n, "indices must be integers");
  int64_t r = static_cast<int64_t>(x->shape().size());
  if (r == 0) fail(n, "data must have rank >= 1");
  int64_t axis = norm_axis(n, n.attr_int("axis", 0), r);
  Shape out(x->shape().begin(), x->shape().begin() + axis);
  out.insert(out.end(), idx->shape().begin(), idx->shape().end());
  out.insert(out.end(), x->shape().begin() + axis + 1, x->shape().end());
  set_out(n, 0, x->dtype(), out);
  auto kx = known(x);
  auto ki = known_ints(idx);
  if (r != 1 || !kx || !ki || idx->shape().size() > 1 || !is_int(x->dtype())) return;
  int64_t len = static_cast<int64_t>(kx->size());
  std::vector<Dim> kd;
  for (int64_t i : *ki) {
    if (i < -len || i >= len) fail(n, "index " + std::to_string(i) + " is out of range for " + std::to_string(len) + " elements");
    kd.push_back((*kx)[i < 0 ? i + len : i]);
  }
  set_known(n, 0, std::move(kd));
}

DType dtype_of_value_attr(Node& n, const Tensor** t) {
  *t = nullptr;
  if (!n.has_attr("value")) return DType::f32;
  *t = &n.attr_tensor("value");
  if ((*t)->numel() != 1) fail(n, "value must hold exactly one element");
  return (*t)->dtype();
}

void constant_of_shape(Node& n) {
  Value* s = in(n, 0);
  if (is_float(s->dtype())) fail(n, "shape must be an integer tensor");
  std::vector<Dim> dims = shape_operand(n, s, 0);
  for (const Dim& d : dims)
    if (d.is_static() && d.value() < 0) fail(n, "negative dim " + d.str());
  const Tensor* t;
  DType dt = dtype_of_value_attr(n, &t);
  set_out(n, 0, dt, dims);
  if (dims.size() == 1 && dims[0].is_static() && dims[0].value() <= static_cast<int64_t>(kMaxKnown) && is_int(dt)) {
    int64_t v = t ? t->get_i64(0) : 0;
    set_known(n, 0, std::vector<Dim>(dims[0].value(), Dim(v)));
  }
}

void expand(Node& n) {
  Value* x = in(n, 0);
  Value* s = in(n, 1);
  if (is_float(s->dtype())) fail(n, "shape must be an integer tensor");
  bool known_target = known(s).has_value();
  Shape target = shape_operand(n, s, 0);
  if (!known_target) {  // a run-time target: only the rank is known
    Shape out;
    for (size_t i = 0; i < std::max(target.size(), x->shape().size()); ++i) out.push_back(unknown_dim(n, 0, i));
    set_out(n, 0, x->dtype(), out);
    return;
  }
  set_out(n, 0, x->dtype(), broadcast(n, {&x->shape(), &target}));
  pass_known(n);
}

// Scalar operand of Range as a Dim when integral and known.
std::optional<Dim> scalar_dim(Value* v) {
  auto k = known(v);
  if (k && k->size() == 1) return (*k)[0];
  if (v->is_constant() && v->constant().numel() == 1) {
    double d = v->constant().get_f64(0);
    if (d == static_cast<double>(static_cast<int64_t>(d)) && d > -kMaxDim && d < kMaxDim) return Dim(static_cast<int64_t>(d));
  }
  return std::nullopt;
}

void range(Node& n) {
  Value* a = in(n, 0);
  Value* b = in(n, 1);
  Value* c = in(n, 2);
  for (Value* v : {a, b, c})
    if (list_len(v->shape()) != 1) fail(n, "start, limit and delta must be scalars");
  check_same_dtype(n, {a, b, c});
  // Constant operands: refuse a Range that never ends or could not be held, whatever later passes
  // or the reference would do with it. The count is taken wide: limit - start overflows int64.
  if (c->is_constant() && c->constant().numel() == 1 && c->constant().get_f64(0) == 0) fail(n, "delta is 0: the Range never ends");
  if (a->is_constant() && b->is_constant() && c->is_constant() && a->constant().numel() == 1 &&
      b->constant().numel() == 1 && c->constant().numel() == 1) {
    double cnt;
    if (is_float(a->dtype())) {
      cnt = std::ceil((b->constant().get_f64(0) - a->constant().get_f64(0)) / c->constant().get_f64(0));
    } else {
      __int128 span = static_cast<__int128>(b->constant().get_i64(0)) - a->constant().get_i64(0);
      __int128 step = c->constant().get_i64(0);
      cnt = static_cast<double>(step > 0 ? (span + step - 1) / step : (span - step - 1) / step);
    }
    // Models use Range for positions and indices: billions of elements is a hostile or broken file.
    constexpr int64_t kMaxRange = int64_t{1} << 32;
    if (!(cnt <= static_cast<double>(kMaxRange))) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.6g", cnt);
      fail(n, std::string("would have ") + buf + " elements, more than the " + std::to_string(kMaxRange) +
                  " sabre allows in a Range");
    }
  }
  auto s = scalar_dim(a), l = scalar_dim(b), d = scalar_dim(c);
  if ((s && s->is_static() && !small_static(*s)) || (l && l->is_static() && !small_static(*l))) s.reset();  // span may overflow
  Dim len = unknown_dim(n, 0, 0);
  bool exact_float = !is_float(a->dtype()) || (a->is_constant() && b->is_constant() && c->is_constant());
  if (s && l && d && d->is_static() && d->value() != 0 && exact_float) {
    Dim span = *l - *s;
    int64_t step = d->value();
    if (span.is_static() && small_static(span)) {
      int64_t num = span.value();
      len = Dim(std::max<int64_t>(0, step > 0 ? (num + step - 1) / step : (num + step + 1) / step));
    } else if (step == 1) {
      len = span;
    } else if (auto q = span.divide(Dim(step))) {
      len = *q;
    }
  } else if (is_float(a->dtype()) && a->is_constant() && b->is_constant() && c->is_constant()) {
    double x = a->constant().get_f64(0), y = b->constant().get_f64(0), z = c->constant().get_f64(0);
    double cnt = z != 0 ? std::ceil((y - x) / z) : -1;
    if (cnt == cnt && cnt < static_cast<double>(kMaxDim)) len = Dim(std::max<int64_t>(0, static_cast<int64_t>(cnt)));
  }
  set_out(n, 0, a->dtype(), {len});
  if (is_int(a->dtype()) && len.is_static() && len.value() <= static_cast<int64_t>(kMaxKnown) && s && d && d->is_static()) {
    std::vector<Dim> kd;
    for (int64_t i = 0; i < len.value(); ++i) kd.push_back(*s + Dim(i * d->value()));
    set_known(n, 0, std::move(kd));
  }
}

void trilu(Node& n) {
  Value* x = in(n, 0);
  if (x->shape().size() < 2) fail(n, "input must have rank >= 2");
  unary(n);
}

void arg_extreme(Node& n) {  // ArgMax, ArgMin
  Value* x = in(n, 0);
  int64_t r = static_cast<int64_t>(x->shape().size());
  int64_t axis = norm_axis(n, n.attr_int("axis", 0), r);
  Shape out = x->shape();
  if (n.attr_int("keepdims", 1) != 0) out[axis] = Dim(1);
  else out.erase(out.begin() + axis);
  set_out(n, 0, DType::i64, out);
}

void cumsum(Node& n) {
  Value* axis = in(n, 1);
  if (is_float(axis->dtype())) fail(n, "axis must be an integer");
  unary(n);
}

void gather_elements(Node& n) {
  Value* x = in(n, 0);
  Value* idx = in(n, 1);
  if (is_float(idx->dtype())) fail(n, "indices must be integers");
  if (idx->shape().size() != x->shape().size()) fail(n, "indices must have the data's rank");
  norm_axis(n, n.attr_int("axis", 0), static_cast<int64_t>(x->shape().size()));
  set_out(n, 0, x->dtype(), idx->shape());
}

void size_op(Node& n) {  // known from the shape alone: Size(Shape(x)) is x's rank, for shape subgraphs
  Value* x = in(n, 0);
  set_out(n, 0, DType::i64, Shape{});
  Dim count(1);
  for (const Dim& d : x->shape()) count = count * d;
  set_known(n, 0, {count});
}

void depth_space(Node& n) {  // DepthToSpace, SpaceToDepth
  Value* x = in(n, 0);
  if (x->shape().size() != 4) fail(n, "input must be 4-D (NCHW)");
  const int64_t b = n.attr_int("blocksize");
  if (b <= 0) fail(n, "blocksize must be positive");
  const Shape& s = x->shape();
  const bool to_space = n.op() == "DepthToSpace";
  auto div = [&](const Dim& d, int64_t k) {
    auto q = d.divide(Dim(k));
    if (!q) fail(n, "dim " + d.str() + " is not a multiple of " + std::to_string(k));
    return *q;
  };
  Shape out = to_space ? Shape{s[0], div(s[1], b * b), s[2] * Dim(b), s[3] * Dim(b)}
                       : Shape{s[0], s[1] * Dim(b * b), div(s[2], b), div(s[3], b)};
  set_out(n, 0, x->dtype(), out);
}

void tile(Node& n) {
  Value* x = in(n, 0);
  if (runtime_list(n, 1, "repeats")) return unknown_shape(n, 0, x->dtype(), static_cast<int64_t>(x->shape().size()));
  std::vector<int64_t> reps = const_axes(n, 1, "repeats");
  if (reps.size() != x->shape().size()) fail(n, "repeats must have one value per input dim");
  Shape out;
  for (size_t i = 0; i < reps.size(); ++i) {
    if (reps[i] < 0) fail(n, "repeats must not be negative");
    out.push_back(x->shape()[i] * Dim(reps[i]));
  }
  set_out(n, 0, x->dtype(), out);
}

void softmax(Node& n) {
  Value* x = in(n, 0);
  norm_axis(n, n.attr_int("axis", -1), static_cast<int64_t>(x->shape().size()));
  unary(n);
}

void reduce(Node& n) {
  Value* x = in(n, 0);
  int64_t r = static_cast<int64_t>(x->shape().size());
  bool keep = n.attr_int("keepdims", 1) != 0;
  bool noop = n.attr_int("noop_with_empty_axes", 0) != 0;
  if (auto len = runtime_list(n, 1, "axes")) {
    if (*len == 0 && noop) return unary(n);
    return unknown_shape(n, 0, x->dtype(), keep ? r : *len == 0 ? 0 : std::max<int64_t>(0, r - *len));
  }
  std::vector<int64_t> axes = const_axes(n, 1, "axes");
  std::vector<bool> red(r, false);
  if (axes.empty()) {
    if (noop) {
      unary(n);
      return;
    }
    red.assign(r, true);
  }
  for (int64_t a : axes) red[norm_axis(n, a, r)] = true;
  Shape out;
  for (int64_t i = 0; i < r; ++i) {
    if (!red[i]) out.push_back(x->shape()[i]);
    else if (keep) out.push_back(Dim(1));
  }
  set_out(n, 0, x->dtype(), out);
}

}  // namespace

void add_shape_ops(Table& t) {
  auto add = [&](std::initializer_list<const char*> ops, InferFn f) {
    for (const char* op : ops) t[{"", op}] = f;
  };
  add({"Shape"}, shape_op);
  add({"Reshape"}, reshape);
  add({"Transpose"}, transpose);
  add({"Flatten"}, flatten);
  add({"Squeeze"}, squeeze);
  add({"Unsqueeze"}, unsqueeze);
  add({"Concat"}, concat);
  add({"Split"}, split);
  add({"Slice"}, slice);
  add({"Gather"}, gather);
  add({"ConstantOfShape"}, constant_of_shape);
  add({"Expand"}, expand);
  add({"Range"}, range);
  add({"Trilu"}, trilu);
  add({"Softmax", "LogSoftmax", "Hardmax"}, softmax);
  add({"ArgMax", "ArgMin"}, arg_extreme);
  add({"CumSum"}, cumsum);
  add({"Tile"}, tile);
  add({"GatherElements"}, gather_elements);
  add({"Size"}, size_op);
  add({"DepthToSpace", "SpaceToDepth"}, depth_space);
  add({"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare", "ReduceL1", "ReduceL2",
       "ReduceLogSum", "ReduceLogSumExp"},
      reduce);
}

}  // namespace sabre::ir::infer_detail
