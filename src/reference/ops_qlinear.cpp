// Integer and quantized linear ops (MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv): the
// zero points come off exactly in f64, the float MatMul/Conv kernels do the sums (exact for these
// integer ranges), and the QLinear forms requantize with round-half-even and saturation.
// Tests: tests/unit/reference_index_test.cpp
#include <cmath>

#include "reference/kernels.h"

namespace sabre::reference::detail {
namespace {

// x - zp as f64, zp a scalar or one per entry along `axis` (rows of A, columns of B, output channels).
Tensor centered(const ir::Node& n, const Tensor& x, const Tensor* zp, int64_t axis) {
  if (ir::is_float(x.dtype())) fail(n, "inputs must be quantized integers");
  std::vector<double> v = to_f64(x);
  if (zp && zp->numel() > 0) {
    const std::vector<double> z = to_f64(*zp);
    if (z.size() == 1) {
      for (double& e : v) e -= z[0];
    } else {
      if (axis < 0 || axis >= x.rank() || static_cast<int64_t>(z.size()) != x.dims()[axis])
        fail(n, "a zero point must be a scalar or have one entry per row/column/channel");
      const Dims st = strides_of(x.dims());
      for (size_t e = 0; e < v.size(); ++e) v[e] -= z[(static_cast<int64_t>(e) / st[axis]) % x.dims()[axis]];
    }
  }
  return from_f64(v, DType::f64, x.dims());
}

// Runs the float kernel of `op` (with `n`'s attributes) on f64 tensors.
Tensor run_float(const ir::Node& n, const std::string& op, const std::vector<const Tensor*>& ins) {
  ir::Graph g;
  ir::Node* m = g.add_node(op, {}, 1, n.attrs(), n.name());
  return eval_node(*m, ins)[0];
}

Tensor requantize(const ir::Node& n, const Tensor& acc, double scale_in, const Tensor& y_scale, const Tensor* y_zp) {
  if (y_scale.numel() != 1) fail(n, "only a scalar output scale is supported");
  const double s = scale_in / y_scale.get_f64(0);
  const DType od = y_zp ? y_zp->dtype() : DType::u8;
  const double lo = od == DType::i8 ? -128 : 0, hi = od == DType::i8 ? 127 : 255;
  if (od != DType::i8 && od != DType::u8) fail(n, "the output must be u8 or i8");
  const double z = y_zp && y_zp->numel() ? y_zp->get_f64(0) : 0;
  std::vector<double> v = to_f64(acc);
  std::vector<int64_t> out(v.size());
  for (size_t e = 0; e < v.size(); ++e)
    out[e] = static_cast<int64_t>(std::clamp(std::nearbyint(static_cast<double>(static_cast<float>(v[e] * s))) + z, lo, hi));
  return from_i64(out, od, acc.dims());
}

double scalar_scale(const ir::Node& n, const Tensor& s) {
  if (s.numel() != 1) fail(n, "only scalar input scales are supported");
  return s.get_f64(0);
}

std::vector<Tensor> matmul_integer(const ir::Node& n, const Inputs& xs) {
  const Tensor& a = in(n, xs, 0);
  const Tensor& b = in(n, xs, 1);
  Tensor ca = centered(n, a, opt_in(xs, 2), a.rank() - 2), cb = centered(n, b, opt_in(xs, 3), b.rank() - 1);
  Tensor y = run_float(n, "MatMul", {&ca, &cb});
  return {y.cast(DType::i32)};
}

std::vector<Tensor> conv_integer(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  const Tensor& w = in(n, xs, 1);
  Tensor cx = centered(n, x, opt_in(xs, 2), 1), cw = centered(n, w, opt_in(xs, 3), 0);
  Tensor y = run_float(n, "Conv", {&cx, &cw});
  return {y.cast(DType::i32)};
}

std::vector<Tensor> qlinear_matmul(const ir::Node& n, const Inputs& xs) {
  const Tensor& a = in(n, xs, 0);
  const Tensor& b = in(n, xs, 3);
  Tensor ca = centered(n, a, opt_in(xs, 2), a.rank() - 2), cb = centered(n, b, opt_in(xs, 5), b.rank() - 1);
  Tensor acc = run_float(n, "MatMul", {&ca, &cb});
  return {requantize(n, acc, scalar_scale(n, in(n, xs, 1)) * scalar_scale(n, in(n, xs, 4)), in(n, xs, 6), opt_in(xs, 7))};
}

std::vector<Tensor> qlinear_conv(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  const Tensor& w = in(n, xs, 3);
  Tensor cx = centered(n, x, opt_in(xs, 2), 1), cw = centered(n, w, opt_in(xs, 5), 0);
  Tensor bias;
  std::vector<const Tensor*> ins = {&cx, &cw};
  if (const Tensor* b = opt_in(xs, 8); b && b->numel()) {
    bias = b->cast(DType::f64);
    ins.push_back(&bias);
  }
  Tensor acc = run_float(n, "Conv", ins);
  return {requantize(n, acc, scalar_scale(n, in(n, xs, 1)) * scalar_scale(n, in(n, xs, 4)), in(n, xs, 6), opt_in(xs, 7))};
}

}  // namespace

void register_qlinear_ops(Table& t) {
  t[{"", "MatMulInteger"}] = matmul_integer;
  t[{"", "ConvInteger"}] = conv_integer;
  t[{"", "QLinearMatMul"}] = qlinear_matmul;
  t[{"", "QLinearConv"}] = qlinear_conv;
}

}  // namespace sabre::reference::detail
