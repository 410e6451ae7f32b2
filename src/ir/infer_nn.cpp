// Shape inference for the neural-network ops: matmul, gemm, conv, pooling, normalization, pad, resize.
// Tests: tests/unit/infer_test.cpp
#include <algorithm>
#include <cmath>

#include "ir/infer_internal.h"

namespace sabre::ir::infer_detail {
namespace {

void matmul(Node& n) {
  Value* a = in(n, 0);
  Value* b = in(n, 1);
  if (a->dtype() != b->dtype()) fail(n, "inputs have different dtypes");
  Shape sa = a->shape(), sb = b->shape();
  if (sa.empty() || sb.empty()) fail(n, "inputs must have rank >= 1");
  bool va = sa.size() == 1, vb = sb.size() == 1;
  if (va) sa.insert(sa.begin(), Dim(1));
  if (vb) sb.push_back(Dim(1));
  Dim k = unify(n, sa[sa.size() - 1], sb[sb.size() - 2], "inner dims " + str(a->shape()) + " x " + str(b->shape()));
  (void)k;
  Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  Shape out = broadcast(n, {&ba, &bb});
  if (!va) out.push_back(sa[sa.size() - 2]);
  if (!vb) out.push_back(sb.back());
  set_out(n, 0, a->dtype(), out);
}

void gemm(Node& n) {
  Value* a = in(n, 0);
  Value* b = in(n, 1);
  if (a->shape().size() != 2 || b->shape().size() != 2) fail(n, "A and B must be 2-D, got " + str(a->shape()) + " and " + str(b->shape()));
  bool ta = n.attr_int("transA", 0) != 0, tb = n.attr_int("transB", 0) != 0;
  Dim m = a->shape()[ta ? 1 : 0], ka = a->shape()[ta ? 0 : 1];
  Dim kb = b->shape()[tb ? 1 : 0], nn = b->shape()[tb ? 0 : 1];
  unify(n, ka, kb, "inner dims");
  Shape out = {m, nn};
  if (Value* c = opt_in(n, 2)) {
    Shape bc = broadcast(n, {&out, &c->shape()});
    if (bc.size() != 2) fail(n, "C " + str(c->shape()) + " does not broadcast to " + str(out));
    out = {unify(n, bc[0], m, "C rows"), unify(n, bc[1], nn, "C columns")};
  }
  set_out(n, 0, a->dtype(), out);
}

std::vector<int64_t> ints_attr(const Node& n, const char* k, size_t count, int64_t def) {
  auto v = n.attr_ints(k, std::vector<int64_t>(count, def));
  if (v.size() != count) fail(n, std::string(k) + " has " + std::to_string(v.size()) + " entries, expected " + std::to_string(count));
  return v;
}

// Output size of a sliding window along one axis (conv and pooling share it).
Dim window_out(const Node& n, size_t axis, const Dim& in_dim, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe,
               bool ceil_mode, const std::string& auto_pad) {
  if (k < 1 || s < 1 || d < 1 || pb < 0 || pe < 0 || k > kMaxDim || s > kMaxDim || d > kMaxDim || pb > kMaxDim || pe > kMaxDim)
    fail(n, "kernel, stride, dilation and pads must be positive (pads non-negative)");
  int64_t ek;
  if (__builtin_mul_overflow(d, k - 1, &ek) || ek >= kMaxDim) fail(n, "dilated kernel is too large");
  ek += 1;
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    if (in_dim.is_static()) return Dim((in_dim.value() + s - 1) / s);
    if (s == 1) return in_dim;
    auto q = in_dim.divide(Dim(s));
    return q ? *q : unknown_dim(n, 0, axis);
  }
  if (auto_pad == "VALID") pb = pe = 0;
  else if (auto_pad != "NOTSET" && !auto_pad.empty()) fail(n, "unknown auto_pad '" + auto_pad + "'");
  Dim num = in_dim + Dim(pb + pe - ek);
  if (num.is_static()) {
    int64_t v = num.value();
    if (v < 0) fail(n, "window " + std::to_string(ek) + " is larger than the padded input " + (in_dim + Dim(pb + pe)).str());
    int64_t o = (ceil_mode ? (v + s - 1) / s : v / s) + 1;
    if (ceil_mode && (o - 1) * s >= in_dim.value() + pb) --o;  // the last window must start inside the input
    return Dim(o);
  }
  if (s == 1) return num + Dim(1);
  auto q = num.divide(Dim(s));
  return q ? *q + Dim(1) : unknown_dim(n, 0, axis);
}

// Conv, MaxPool, AveragePool: spatial output dims from attributes.
Shape spatial(const Node& n, const Shape& x, const std::vector<int64_t>& kernel, bool ceil_mode) {
  size_t sp = x.size() - 2;
  auto strides = ints_attr(n, "strides", sp, 1);
  auto dil = ints_attr(n, "dilations", sp, 1);
  auto pads = ints_attr(n, "pads", 2 * sp, 0);
  std::string ap = n.attr_string("auto_pad", "NOTSET");
  Shape out = {x[0], x[1]};
  for (size_t i = 0; i < sp; ++i)
    out.push_back(window_out(n, i + 2, x[i + 2], kernel[i], strides[i], dil[i], pads[i], pads[i + sp], ceil_mode, ap));
  return out;
}

void conv(Node& n) {
  Value* x = in(n, 0);
  Value* w = in(n, 1);
  const Shape& xs = x->shape();
  const Shape& ws = w->shape();
  if (xs.size() < 3 || ws.size() != xs.size()) fail(n, "X " + str(xs) + " and W " + str(ws) + " must have the same rank >= 3");
  int64_t group = n.attr_int("group", 1);
  if (group < 1 || group > kMaxDim) fail(n, "group must be >= 1");
  if (ws[1].is_static() && ws[1].value() * group > kMaxDim) fail(n, "group is too large");
  unify(n, xs[1], ws[1] * Dim(group), "input channels and W channels*group");
  std::vector<int64_t> kernel;
  for (size_t i = 2; i < ws.size(); ++i) {
    if (!ws[i].is_static()) fail(n, "kernel dims must be static, W is " + str(ws));
    kernel.push_back(ws[i].value());
  }
  if (n.has_attr("kernel_shape") && n.attr_ints("kernel_shape") != kernel)
    fail(n, "kernel_shape does not match the weight's dims " + str(ws));
  Shape out = spatial(n, xs, kernel, false);
  out[1] = ws[0];
  if (Value* b = opt_in(n, 2)) {
    if (b->shape().size() != 1) fail(n, "B must be 1-D");
    unify(n, b->shape()[0], ws[0], "bias size and output channels");
  }
  set_out(n, 0, x->dtype(), out);
}

void pool(Node& n) {
  Value* x = in(n, 0);
  const Shape& xs = x->shape();
  if (xs.size() < 3) fail(n, "input must have rank >= 3, got " + str(xs));
  if (!n.has_attr("kernel_shape")) fail(n, "kernel_shape is required");
  auto kernel = n.attr_ints("kernel_shape");
  if (kernel.size() != xs.size() - 2) fail(n, "kernel_shape has the wrong length");
  set_out(n, 0, x->dtype(), spatial(n, xs, kernel, n.attr_int("ceil_mode", 0) != 0));
}

void global_pool(Node& n) {
  Value* x = in(n, 0);
  if (x->shape().size() < 3) fail(n, "input must have rank >= 3");
  Shape out = {x->shape()[0], x->shape()[1]};
  out.resize(x->shape().size(), Dim(1));
  set_out(n, 0, x->dtype(), out);
}

void batchnorm(Node& n) {
  Value* x = in(n, 0);
  if (x->shape().size() < 2) fail(n, "input must have rank >= 2");
  for (size_t i = 1; i < 5; ++i) {
    Value* p = in(n, i);
    if (p->shape().size() != 1) fail(n, "parameter " + std::to_string(i) + " must be 1-D, got " + str(p->shape()));
    unify(n, p->shape()[0], x->shape()[1], "parameter size and channels");
  }
  set_out(n, 0, x->dtype(), x->shape());
}

void layernorm(Node& n) {
  Value* x = in(n, 0);
  int64_t r = static_cast<int64_t>(x->shape().size());
  int64_t axis = norm_axis(n, n.attr_int("axis", -1), r);
  Shape norm(x->shape().begin() + axis, x->shape().end());
  for (size_t i = 1; i < 3; ++i)
    if (Value* p = opt_in(n, i)) broadcast(n, {&norm, &p->shape()});
  set_out(n, 0, x->dtype(), x->shape());
  Shape stat(x->shape().begin(), x->shape().begin() + axis);
  stat.resize(r, Dim(1));
  set_out(n, 1, DType::f32, stat);
  set_out(n, 2, DType::f32, stat);
}

void pad(Node& n) {
  Value* x = in(n, 0);
  int64_t r = static_cast<int64_t>(x->shape().size());
  auto pads = known(in(n, 1));
  std::vector<int64_t> axes;
  if (Value* a = opt_in(n, 3)) {
    auto k = known_ints(a);
    if (!k) needs_constant(n, "axes");
    for (int64_t v : *k) axes.push_back(norm_axis(n, v, r));
  } else {
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  }
  Shape out = x->shape();
  if (!pads) {
    for (int64_t a : axes) out[a] = unknown_dim(n, 0, a);
  } else {
    if (pads->size() != 2 * axes.size()) fail(n, "pads has " + std::to_string(pads->size()) + " entries for " + std::to_string(axes.size()) + " axes");
    for (size_t i = 0; i < axes.size(); ++i) {
      const Dim& b = (*pads)[i];
      const Dim& e = (*pads)[i + axes.size()];
      for (const Dim& p : {b, e})
        if (p.is_static() && (p.value() < -kMaxDim || p.value() > kMaxDim)) fail(n, "pad " + p.str() + " is out of range");
      out[axes[i]] = out[axes[i]] + b + e;
    }
  }
  set_out(n, 0, x->dtype(), out);
}

void resize(Node& n) {
  Value* x = in(n, 0);
  int64_t r = static_cast<int64_t>(x->shape().size());
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  if (n.has_attr("axes")) {
    axes.clear();
    for (int64_t a : n.attr_ints("axes")) axes.push_back(norm_axis(n, a, r));
  }
  Shape out = x->shape();
  Value* scales = opt_in(n, 2);
  Value* sizes = opt_in(n, 3);
  if (scales && scales->shape().size() == 1 && scales->shape()[0] == Dim(0)) scales = nullptr;  // an empty placeholder
  if (sizes) {
    auto k = known(sizes);
    if (!k) {
      for (int64_t a : axes) out[a] = unknown_dim(n, 0, a);
    } else {
      if (k->size() != axes.size()) fail(n, "sizes has " + std::to_string(k->size()) + " entries for " + std::to_string(axes.size()) + " axes");
      for (size_t i = 0; i < axes.size(); ++i) {
        if ((*k)[i].is_static()) checked_dim(n, (*k)[i].value(), "size");
        out[axes[i]] = (*k)[i];
      }
    }
  } else if (scales) {
    if (!scales->is_constant()) {
      for (int64_t a : axes) out[a] = unknown_dim(n, 0, a);
    } else {
      const Tensor& t = scales->constant();
      if (t.numel() != static_cast<int64_t>(axes.size())) fail(n, "scales has " + std::to_string(t.numel()) + " entries for " + std::to_string(axes.size()) + " axes");
      for (size_t i = 0; i < axes.size(); ++i) {
        double s = t.get_f64(static_cast<int64_t>(i));
        if (!(s > 0) || s > 1e6) fail(n, "scale " + std::to_string(s) + " must be positive");
        const Dim& d = x->shape()[axes[i]];
        if (d.is_static()) {
          out[axes[i]] = checked_dim(n, static_cast<int64_t>(std::floor(static_cast<double>(d.value()) * s)), "output size");
        } else if (s == std::floor(s)) {
          out[axes[i]] = d * Dim(static_cast<int64_t>(s));
        } else {
          out[axes[i]] = unknown_dim(n, 0, axes[i]);
        }
      }
    }
  } else {
    fail(n, "needs scales or sizes");
  }
  set_out(n, 0, x->dtype(), out);
}

}  // namespace

void add_nn_ops(Table& t) {
  t[{"", "MatMul"}] = matmul;
  t[{"", "Gemm"}] = gemm;
  t[{"", "Conv"}] = conv;
  t[{"", "MaxPool"}] = pool;
  t[{"", "AveragePool"}] = pool;
  t[{"", "GlobalAveragePool"}] = global_pool;
  t[{"", "GlobalMaxPool"}] = global_pool;
  t[{"", "BatchNormalization"}] = batchnorm;
  t[{"", "LayerNormalization"}] = layernorm;
  t[{"", "Pad"}] = pad;
  t[{"", "Resize"}] = resize;
}

}  // namespace sabre::ir::infer_detail
