// ConvTranspose: every input element scatters its kernel-weighted contributions into the output.
// Output size and padding follow ONNX (pads, or output_shape / auto_pad which derive the pads).
// Tests: tests/unit/reference_index_test.cpp
#include "reference/kernels.h"

namespace sabre::reference::detail {
namespace {

std::vector<Tensor> conv_transpose_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  const Tensor& w = in(n, xs, 1);
  const Tensor* b = opt_in(xs, 2);
  if (x.rank() < 3 || w.rank() != x.rank()) fail(n, "X must be [N, C, d...] and W [C, M/group, k...] of the same rank");
  const int64_t sp = x.rank() - 2, N = x.dims()[0], C = x.dims()[1];
  const int64_t group = n.attr_int("group", 1);
  if (group < 1 || C % group || w.dims()[0] != C) fail(n, "W's first dim must be X's channels, a multiple of group");
  const int64_t Mg = w.dims()[1], M = Mg * group, Cg = C / group;
  Dims kernel(w.dims().begin() + 2, w.dims().end());
  const Dims strides = n.attr_ints("strides", Dims(sp, 1)), dil = n.attr_ints("dilations", Dims(sp, 1));
  const Dims outpad = n.attr_ints("output_padding", Dims(sp, 0));
  if (static_cast<int64_t>(strides.size()) != sp || static_cast<int64_t>(dil.size()) != sp ||
      static_cast<int64_t>(outpad.size()) != sp)
    fail(n, "strides, dilations and output_padding need one entry per spatial axis");
  const std::string ap = n.attr_string("auto_pad", "NOTSET");
  Dims pads = n.attr_ints("pads", {}), out = n.attr_ints("output_shape", {});
  if (!out.empty() && static_cast<int64_t>(out.size()) != sp) {
    if (static_cast<int64_t>(out.size()) != x.rank()) fail(n, "output_shape needs one entry per spatial axis");
    out.erase(out.begin(), out.begin() + 2);
  }
  if (pads.empty() && (ap == "SAME_UPPER" || ap == "SAME_LOWER")) {
    if (out.empty())
      for (int64_t i = 0; i < sp; ++i) out.push_back(x.dims()[i + 2] * strides[i]);
    pads.assign(2 * sp, 0);
    for (int64_t i = 0; i < sp; ++i) {
      const int64_t total = strides[i] * (x.dims()[i + 2] - 1) + outpad[i] + (kernel[i] - 1) * dil[i] + 1 - out[i];
      pads[i] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[i + sp] = total - pads[i];
    }
  }
  if (pads.empty()) pads.assign(2 * sp, 0);
  if (static_cast<int64_t>(pads.size()) != 2 * sp) fail(n, "pads needs two entries per spatial axis");
  if (out.empty())
    for (int64_t i = 0; i < sp; ++i)
      out.push_back(strides[i] * (x.dims()[i + 2] - 1) + outpad[i] + (kernel[i] - 1) * dil[i] + 1 - pads[i] - pads[i + sp]);
  for (int64_t i = 0; i < sp; ++i)
    if (out[i] < 0 || strides[i] < 1 || dil[i] < 1) fail(n, "strides and dilations must be positive and the output non-empty");
  Dims od = {N, M};
  od.insert(od.end(), out.begin(), out.end());
  if (b && b->numel() != M) fail(n, "B must have one entry per output channel");

  const std::vector<double> xv = to_f64(x), wv = to_f64(w);
  std::vector<double> y(static_cast<size_t>(numel(od)), 0.0);
  const int64_t in_sp = numel(Dims(x.dims().begin() + 2, x.dims().end()));
  const int64_t k_sp = numel(kernel), out_sp = numel(out);
  const Dims in_st = strides_of(Dims(x.dims().begin() + 2, x.dims().end())), k_st = strides_of(kernel),
             out_st = strides_of(out);
  // Output spatial offset of (input position, kernel tap), or -1 where it falls outside.
  std::vector<int64_t> dst(static_cast<size_t>(in_sp * k_sp));
  for (int64_t i = 0; i < in_sp; ++i)
    for (int64_t k = 0; k < k_sp; ++k) {
      int64_t off = 0;
      for (int64_t d = 0; d < sp && off >= 0; ++d) {
        const int64_t o = (i / in_st[d]) % x.dims()[d + 2] * strides[d] + (k / k_st[d]) % kernel[d] * dil[d] - pads[d];
        off = o < 0 || o >= out[d] ? -1 : off + o * out_st[d];
      }
      dst[i * k_sp + k] = off;
    }
  for (int64_t nb = 0; nb < N; ++nb)
    for (int64_t c = 0; c < C; ++c) {
      const int64_t g = c / Cg;
      for (int64_t m = 0; m < Mg; ++m) {
        double* yo = &y[static_cast<size_t>((nb * M + g * Mg + m) * out_sp)];
        const double* wk = &wv[static_cast<size_t>((c * Mg + m) * k_sp)];
        const double* xi = &xv[static_cast<size_t>((nb * C + c) * in_sp)];
        for (int64_t i = 0; i < in_sp; ++i)
          for (int64_t k = 0; k < k_sp; ++k)
            if (int64_t o = dst[i * k_sp + k]; o >= 0) yo[o] += xi[i] * wk[k];
      }
    }
  if (b) {
    const std::vector<double> bv = to_f64(*b);
    for (int64_t nb = 0; nb < N; ++nb)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t o = 0; o < out_sp; ++o) y[(nb * M + m) * out_sp + o] += bv[m];
  }
  return {from_f64(y, x.dtype(), od)};
}

}  // namespace

void register_conv_transpose(Table& t) { t[{"", "ConvTranspose"}] = conv_transpose_kernel; }

}  // namespace sabre::reference::detail
