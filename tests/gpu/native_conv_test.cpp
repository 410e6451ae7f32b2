// Native kernel GPU test (native_kernels_test.cpp runs it): depthwise and grouped conv, pooling,
// im2col and the stem conv, against the reference executor.
#include <cuda_runtime.h>

#include <array>

#include "native_kernels_test.h"

namespace sabre::native_test {

// ---- depthwise conv (NHWC) against the reference executor's grouped Conv --------------------
// ONNX's depthwise filter [c, 1, k, k] as the kernel reads it: [k, k, c].
Tensor depthwise_rsc(const Tensor& w, int64_t c, int64_t k) {
  Tensor rsc(w.dtype(), {k, k, c});
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t i = 0; i < k * k; ++i) rsc.set_f64(i * c + ch, w.get_f64(ch * k * k + i));
  return rsc;
}

// A k x k depthwise conv over n square hw x hw images of c channels: the buffers and the geometry.
native::DepthwiseArgs depthwise_args(DType dt, const Dev& dx, const Dev& dw, const Dev& db, const Dev& dy, int64_t n,
                                     int64_t hw, int64_t c, int64_t k) {
  native::DepthwiseArgs a;
  a.dtype = dt;
  a.x = dx.p, a.w = dw.p, a.bias = db.p, a.y = dy.p;
  a.n = n, a.h = hw, a.w_ = hw, a.c = c, a.r = k, a.s = k;
  return a;
}

// clamp: a fused Relu (hi = +inf) or Clip, checked against the reference's Conv then Clip.
void depthwise_case(DType dt, int64_t n, int64_t c, int64_t hw, int64_t k, int64_t stride, int64_t pad,
                    bool clamp = false, float lo = 0.f, float hi = INFINITY) {
  std::string name = "Depthwise_" + dts(dt) + "_n" + std::to_string(n) + "c" + std::to_string(c) + "_" +
                     std::to_string(hw) + "x" + std::to_string(hw) + "_k" + std::to_string(k) + "s" +
                     std::to_string(stride) + "p" + std::to_string(pad);
  if (clamp) name += std::isinf(hi) ? "_relu" : "_clip0to" + std::to_string(int(hi * 10)) + "tenths";
  if (!selected(name)) return;
  const Tensor x = rnd(dt, {n, c, hw, hw}), w = rnd(dt, {c, 1, k, k}), b = rnd(dt, {c});
  const std::vector<int64_t> pads = {pad, pad, pad, pad}, strides = {stride, stride}, ks = {k, k};
  Tensor conv = ref_op("Conv", {x, w, b}, {{"group", c}, {"pads", pads}, {"strides", strides}, {"kernel_shape", ks}})[0];
  if (clamp)
    conv = std::isinf(hi) ? ref_op("Relu", {conv}, {})[0]
                          : ref_op("Clip", {conv, Tensor::from_f32({lo}, {}).cast(dt), Tensor::from_f32({hi}, {}).cast(dt)}, {})[0];
  const Tensor want = to_nhwc(conv);
  const Tensor xn = to_nhwc(x);
  Dev dx(xn), dw(depthwise_rsc(w, c, k)), db(b), dy(want.nbytes());
  native::DepthwiseArgs a = depthwise_args(dt, dx, dw, db, dy, n, hw, c, k);
  a.p = want.dims()[1], a.q = want.dims()[2];
  a.pad_h = a.pad_w = pad, a.stride_h = a.stride_w = stride;
  a.clamp = clamp, a.clamp_min = lo, a.clamp_max = hi;
  CK(native::depthwise_conv2d(a, nullptr));
  check(name, dy.get(dt, want.dims()), want);
}

// A fused activation (native::ConvAct) after conv + bias, against the reference's ops in their ONNX
// spellings: SiLU as x·Sigmoid(x), Swish(1.5) as x·Sigmoid(1.5·x), Sigmoid, HardSwish, HardSigmoid(0.3, 0.4).
void depthwise_act_case(DType dt, int64_t c, native::ConvAct act, float alpha, float beta) {
  const int64_t n = 2, hw = 9, k = 3;
  const std::string name = "Depthwise_" + dts(dt) + "_c" + std::to_string(c) + "_" +
                           std::string(native::conv_act_name(act)) + (alpha == 1.5f ? "_alpha1p5" : "");
  if (!selected(name)) return;
  const Tensor x = rnd(dt, {n, c, hw, hw}), w = rnd(dt, {c, 1, k, k}), b = rnd(dt, {c});
  const std::vector<int64_t> pads = {1, 1, 1, 1}, ks = {k, k};
  const Tensor conv = ref_op("Conv", {x, w, b}, {{"group", c}, {"pads", pads}, {"kernel_shape", ks}})[0];
  Tensor y;
  switch (act) {
    case native::ConvAct::silu: {
      const Tensor scaled = ref_op("Mul", {conv, Tensor::scalar_f32(alpha).cast(dt)})[0];
      y = ref_op("Mul", {conv, ref_op("Sigmoid", {scaled})[0]})[0];
      break;
    }
    case native::ConvAct::sigmoid: y = ref_op("Sigmoid", {conv})[0]; break;
    case native::ConvAct::hard_swish: y = ref_op("HardSwish", {conv})[0]; break;
    default: y = ref_op("HardSigmoid", {conv}, {{"alpha", double(alpha)}, {"beta", double(beta)}})[0]; break;
  }
  const Tensor want = to_nhwc(y), xn = to_nhwc(x);
  Dev dx(xn), dw(depthwise_rsc(w, c, k)), db(b), dy(want.nbytes());
  native::DepthwiseArgs a = depthwise_args(dt, dx, dw, db, dy, n, hw, c, k);
  a.p = hw, a.q = hw;
  a.pad_h = a.pad_w = 1;
  a.act = act, a.act_alpha = alpha, a.act_beta = beta;
  CK(native::depthwise_conv2d(a, nullptr));
  check(name, dy.get(dt, want.dims()), want);
}

void depthwise_tests() {
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (int64_t c : {32, 5}) {  // the vector kernel and the scalar one
      depthwise_act_case(dt, c, native::ConvAct::silu, 1.f, 0.f);
      depthwise_act_case(dt, c, native::ConvAct::silu, 1.5f, 0.f);
      depthwise_act_case(dt, c, native::ConvAct::sigmoid, 1.f, 0.f);
      depthwise_act_case(dt, c, native::ConvAct::hard_swish, 1.f / 6.f, 0.5f);
      depthwise_act_case(dt, c, native::ConvAct::hard_sigmoid, 0.3f, 0.4f);
    }
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    depthwise_case(dt, 2, 32, 28, 3, 1, 1);   // MobileNetV2 block
    depthwise_case(dt, 1, 96, 56, 3, 2, 1);   // the stride-2 ones
    depthwise_case(dt, 3, 5, 9, 5, 2, 2);     // odd channels, 5x5
    depthwise_case(dt, 2, 144, 14, 3, 1, 1);  // MobileNetV2's 144 channels: the vector kernel, 18 vectors
    depthwise_case(dt, 1, 40, 11, 3, 2, 0);   // 40 channels (5 half vectors), no padding, odd size
    // A fused activation (MobileNetV2's ReLU6 after each depthwise conv); the bound 0.5 is low enough
    // that both ends of the clamp engage on these random values. Vector and scalar kernels.
    depthwise_case(dt, 2, 144, 14, 3, 1, 1, true, 0.f, 0.5f);
    depthwise_case(dt, 3, 5, 9, 5, 2, 2, true, 0.f, 0.5f);
    depthwise_case(dt, 2, 32, 28, 3, 1, 1, true);
  }
}

// ---- grouped conv (NHWC, several channels per group) against the reference's grouped Conv ------
// The filter as the lowering packs it: ONNX's [K, C/G, R, S] as [R, S, C/G, K].
void grouped_case(DType dt, int64_t n, int64_t c, int64_t k, int64_t groups, int64_t hw, int64_t ks, int64_t stride,
                  int64_t pad, int64_t dil = 1, bool bias = true, bool clamp = false, float hi = INFINITY) {
  std::string name = "GroupedConv_" + dts(dt) + "_n" + std::to_string(n) + "c" + std::to_string(c) + "k" +
                     std::to_string(k) + "g" + std::to_string(groups) + "_" + std::to_string(hw) + "x" +
                     std::to_string(hw) + "_r" + std::to_string(ks) + "s" + std::to_string(stride) + "p" +
                     std::to_string(pad) + "d" + std::to_string(dil) + (bias ? "" : "_nobias");
  if (clamp) name += std::isinf(hi) ? "_relu" : "_clip0to" + std::to_string(int(hi * 10)) + "tenths";
  if (!selected(name)) return;
  const int64_t cg = c / groups;
  const Tensor x = rnd(dt, {n, c, hw, hw}), w = rnd(dt, {k, cg, ks, ks}), b = rnd(dt, {k});
  const std::vector<int64_t> pads = {pad, pad, pad, pad}, strides = {stride, stride}, dils = {dil, dil}, kk = {ks, ks};
  std::vector<Tensor> ins = {x, w};
  if (bias) ins.push_back(b);
  Tensor conv = ref_op("Conv", ins, {{"group", groups}, {"pads", pads}, {"strides", strides}, {"dilations", dils},
                                     {"kernel_shape", kk}})[0];
  if (clamp)
    conv = std::isinf(hi) ? ref_op("Relu", {conv}, {})[0]
                          : ref_op("Clip", {conv, Tensor::from_f32({0.f}, {}).cast(dt), Tensor::from_f32({hi}, {}).cast(dt)}, {})[0];
  const Tensor want = to_nhwc(conv);
  Tensor rsck(dt, {ks, ks, cg, k});
  for (int64_t o = 0; o < k; ++o)
    for (int64_t j = 0; j < cg; ++j)
      for (int64_t t = 0; t < ks * ks; ++t) rsck.set_f64((t * cg + j) * k + o, w.get_f64((o * cg + j) * ks * ks + t));
  Dev dx(to_nhwc(x)), dw(rsck), db(b), dy(want.nbytes());
  native::DepthwiseArgs a;
  a.dtype = dt;
  a.x = dx.p, a.w = dw.p, a.bias = bias ? db.p : nullptr, a.y = dy.p;
  a.n = n, a.h = hw, a.w_ = hw, a.c = c, a.r = ks, a.s = ks, a.k = k, a.groups = groups;
  a.p = want.dims()[1], a.q = want.dims()[2];
  a.pad_h = a.pad_w = pad, a.stride_h = a.stride_w = stride, a.dil_h = a.dil_w = dil;
  a.clamp = clamp, a.clamp_min = 0.f, a.clamp_max = hi;
  CK(native::depthwise_conv2d(a, nullptr));
  check(name, dy.get(dt, want.dims()), want);
}

void grouped_tests() {
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    grouped_case(dt, 2, 64, 64, 32, 14, 3, 1, 1);          // ResNeXt-50's 32x4d 3x3 (C/G = 2 here)
    grouped_case(dt, 1, 128, 128, 32, 28, 3, 2, 1);        // 4 channels a group, stride 2
    grouped_case(dt, 3, 12, 18, 3, 9, 5, 2, 2);            // 4 in and 6 out a group, 5x5, odd size
    grouped_case(dt, 2, 8, 16, 8, 7, 3, 1, 2, 2, false);   // depthwise with a multiplier of 2, dilation 2, no bias
    grouped_case(dt, 2, 16, 8, 2, 10, 1, 1, 0);            // 1x1 in 2 groups (ShuffleNet-like)
    grouped_case(dt, 2, 64, 64, 32, 14, 3, 1, 1, 1, true, true, 0.5f);  // a fused clamp
  }
  // Refusals: groups that do not divide the channels, a k without groups.
  native::DepthwiseArgs a;
  a.n = 1, a.h = a.w_ = 4, a.c = 6, a.r = a.s = 1, a.p = a.q = 4;
  a.x = a.w = a.y = reinterpret_cast<void*>(256);
  int refused = 0;
  a.k = 6, a.groups = 4;
  refused += native::depthwise_conv2d(a, nullptr) == cudaErrorInvalidValue;
  a.k = 6, a.groups = 0;
  refused += native::depthwise_conv2d(a, nullptr) == cudaErrorInvalidValue;
  a.k = 9, a.groups = 2;
  refused += native::depthwise_conv2d(a, nullptr) == cudaErrorInvalidValue;
  cudaGetLastError();
  const std::string name = "GroupedConv_refusals";
  if (selected(name)) {
    std::printf("%s %-66s %d of 3 refused\n", refused == 3 ? "PASS" : "FAIL", name.c_str(), refused);
    refused == 3 ? ++g_pass : ++g_fail;
  }
}

// ---- pooling -------------------------------------------------------------------------------
// C a multiple of 8 (f16/bf16) or 4 (f32) in NHWC takes the 16-byte vector kernel; misalign
// shifts x and y one element off 16-byte alignment, which must send it to the scalar kernel.
void pool_case(DType dt, bool max, int k, int s, int pad, int dil, bool include_pad, native::Layout layout,
               int64_t C = 3, int64_t H = 17, int64_t W = 19, bool misalign = false) {
  const bool nhwc = layout == native::Layout::nhwc;
  const std::string name = std::string(max ? "Pool_max_" : "Pool_avg_") + dts(dt) + "_k" + std::to_string(k) + "s" +
                           std::to_string(s) + "p" + std::to_string(pad) + "d" + std::to_string(dil) +
                           (include_pad ? "_incpad" : "") + (nhwc ? "_nhwc" : "_nchw") +
                           (C != 3 ? "_c" + std::to_string(C) + "_" + std::to_string(H) + "x" + std::to_string(W) : "") +
                           (misalign ? "_misaligned" : "");
  if (!selected(name)) return;
  const int64_t N = 2;
  const Tensor x = rnd(dt, {N, C, H, W});
  std::map<std::string, ir::AttrValue> at = {{"kernel_shape", std::vector<int64_t>{k, k}},
                                             {"strides", std::vector<int64_t>{s, s}},
                                             {"pads", std::vector<int64_t>{pad, pad, pad, pad}}};
  if (max) at["dilations"] = std::vector<int64_t>{dil, dil};
  else at["count_include_pad"] = int64_t{include_pad};
  Tensor want = ref_op(max ? "MaxPool" : "AveragePool", {x}, at)[0];
  native::PoolArgs a;
  a.kind = max ? native::PoolKind::max : native::PoolKind::average;
  a.layout = layout;
  a.dtype = dt;
  a.n = N, a.c = C, a.h = H, a.w = W;
  a.kernel[0] = a.kernel[1] = k;
  a.stride[0] = a.stride[1] = s;
  a.dilation[0] = a.dilation[1] = max ? dil : 1;
  a.pad_begin[0] = a.pad_begin[1] = a.pad_end[0] = a.pad_end[1] = pad;
  a.count_include_pad = include_pad;
  native::pool_output_dims(a, false);
  const Tensor xin = nhwc ? to_nhwc(x) : x;
  if (nhwc) want = to_nhwc(want);
  const size_t off = misalign ? ir::size_of(dt) : 0;
  Dev dx(xin.nbytes() + off), dy(want.nbytes() + off);
  CK(cudaMemcpy(static_cast<char*>(dx.p) + off, xin.bytes(), xin.nbytes(), cudaMemcpyHostToDevice));
  a.x = static_cast<char*>(dx.p) + off;
  a.y = static_cast<char*>(dy.p) + off;
  CK(native::pool2d(a, nullptr));
  CK(cudaDeviceSynchronize());
  Tensor got(dt, want.dims());
  CK(cudaMemcpy(got.mutable_bytes(), a.y, got.nbytes(), cudaMemcpyDeviceToHost));
  check(name, got, want);
}

void pool_tests() {
  // 16-byte vectors of bf16; f32's 4-wide vector where C = 4 but not 8; pointers off alignment.
  pool_case(DType::bf16, true, 3, 2, 1, 1, false, native::Layout::nhwc, 32, 15, 15);
  pool_case(DType::bf16, false, 3, 2, 1, 1, true, native::Layout::nhwc, 16, 9, 8);
  pool_case(DType::f32, true, 3, 2, 1, 1, false, native::Layout::nhwc, 4, 11, 13);
  pool_case(DType::f16, true, 3, 2, 1, 1, false, native::Layout::nhwc, 64, 23, 21, true);
  pool_case(DType::f32, false, 3, 2, 1, 1, false, native::Layout::nhwc, 8, 10, 9, true);
  // ResNet-50's stem pool (3x3/2, pad 1) at odd sizes: C = 64 (16-byte vectors, unrolled 3x3),
  // C = 12 (8-byte vectors of halves, 16-byte of floats), 6 (4-byte), 5 (one element); the tap
  // loop (2x2, 5x5) at the same channel counts; a 3x3 window with dilation 2.
  for (DType dt : {DType::f16, DType::bf16, DType::f32}) {
    for (int64_t c : {64, 12, 6, 5}) {
      pool_case(dt, true, 3, 2, 1, 1, false, native::Layout::nhwc, c, 23, 25);
      pool_case(dt, false, 3, 2, 1, 1, false, native::Layout::nhwc, c, 23, 25);
      pool_case(dt, false, 3, 2, 1, 1, true, native::Layout::nhwc, c, 15, 17);
      pool_case(dt, true, 2, 2, 0, 1, false, native::Layout::nhwc, c, 13, 11);
      pool_case(dt, false, 5, 3, 2, 1, false, native::Layout::nhwc, c, 13, 11);
    }
    pool_case(dt, true, 3, 1, 2, 2, false, native::Layout::nhwc, 64, 9, 11);
    pool_case(dt, true, 3, 2, 1, 1, false, native::Layout::nhwc, 64, 56, 56);
  }
  pool_case(DType::f16, true, 3, 2, 1, 1, false, native::Layout::nhwc, 12, 23, 21, true);  // 2-byte offset: one element
  for (DType dt : {DType::f32, DType::f16}) {
    for (auto lay : {native::Layout::nchw, native::Layout::nhwc}) {
      pool_case(dt, true, 3, 2, 1, 1, false, lay);
      pool_case(dt, true, 2, 1, 0, 2, false, lay);
      pool_case(dt, false, 3, 2, 1, 1, false, lay);
      pool_case(dt, false, 3, 2, 1, 1, true, lay);
      // Channel counts the NHWC vector kernel takes (and, in NCHW, the scalar one still does).
      pool_case(dt, true, 3, 2, 1, 1, false, lay, 64, 23, 21);  // ResNet's stem pool, small
      pool_case(dt, true, 2, 1, 0, 2, false, lay, 16, 9, 10);
      pool_case(dt, false, 3, 2, 1, 1, false, lay, 8, 17, 19);
      pool_case(dt, false, 3, 2, 1, 1, true, lay, 24, 7, 6);
      // [n, c, h, w]: odd channels (the general reduction), ResNet-50's head (the NHWC vector kernel:
      // 256 vectors, 8 blocks of 32 per image), a channel count that leaves a block partly idle, 1x1.
      for (auto [n, c, h, w] : std::vector<std::array<int64_t, 4>>{{2, 5, 7, 9}, {2, 2048, 7, 7}, {3, 264, 5, 3}, {2, 64, 1, 1}}) {
        const std::string name = "GlobalAveragePool_" + dts(dt) + (lay == native::Layout::nhwc ? "_nhwc" : "_nchw") +
                                 "_" + std::to_string(n) + "x" + std::to_string(c) + "x" + std::to_string(h) + "x" +
                                 std::to_string(w);
        if (!selected(name)) continue;
        const Tensor x = rnd(dt, {n, c, h, w});
        const Tensor want = ref_op("GlobalAveragePool", {x})[0];
        const Tensor xin = lay == native::Layout::nhwc ? to_nhwc(x) : x;
        Dev dx(xin), dy(want.nbytes());
        CK(native::global_average_pool(dt, lay, dx.p, n, c, h, w, dy.p, nullptr));
        check(name, dy.get(dt, want.dims()), want);
      }
    }
  }
}

// ---- im2col (the stem conv's GEMM operand) ------------------------------------------------------
// The reference: Cast to a's dtype on the reference executor (the rounding cast() does), then a host
// im2col: a[(n·P + p)·Q + q, (r·S + s)·C + c] = x[n, c, p·sh - ph + r·dh, q·sw - pw + s·dw], 0 in
// the padding and in the columns from R·S·C to cols. A gather and one rounding: the kernel must
// match it bit for bit (poisoned NaNs show unwritten elements). cols 0: R·S·C rounded up to 8
// (what the lowering asks); misalign shifts a one element off 16-byte alignment (scalar stores).
struct Im2colCase {
  std::vector<int64_t> x;  // [n, c, h, w]
  int64_t r, s, stride_h, stride_w, pad_h, pad_w, dil_h = 1, dil_w = 1, cols = 0;
  bool misalign = false;
};
void im2col_case(DType xt, DType at, const Im2colCase& k) {
  const int64_t N = k.x[0], C = k.x[1], H = k.x[2], W = k.x[3], rsc = k.r * k.s * C;
  const int64_t cols = k.cols ? k.cols : (rsc + 7) / 8 * 8;
  const int64_t P = (H + 2 * k.pad_h - k.dil_h * (k.r - 1) - 1) / k.stride_h + 1;
  const int64_t Q = (W + 2 * k.pad_w - k.dil_w * (k.s - 1) - 1) / k.stride_w + 1;
  const std::string name = "Im2col_" + dts(xt) + "_to_" + dts(at) + "_" + shp(k.x) + "_" + std::to_string(k.r) + "x" +
                           std::to_string(k.s) + "_s" + std::to_string(k.stride_h) + std::to_string(k.stride_w) + "_p" +
                           std::to_string(k.pad_h) + std::to_string(k.pad_w) + "_d" + std::to_string(k.dil_h) +
                           std::to_string(k.dil_w) + "_cols" + std::to_string(cols) + (k.misalign ? "_misaligned" : "");
  if (!selected(name)) return;
  const Tensor x = rnd(xt, k.x);
  const Tensor xc = xt == at ? x : ref_op("Cast", {x}, {{"to", dts(at)}})[0];
  Tensor want(at, {N * P * Q, cols});
  for (int64_t row = 0; row < N * P * Q; ++row)
    for (int64_t col = 0; col < cols; ++col) {
      double v = 0;
      if (col < rsc) {
        const int64_t c = col % C, sw = (col / C) % k.s, rh = col / C / k.s;
        const int64_t n = row / (P * Q), ih = (row / Q) % P * k.stride_h - k.pad_h + rh * k.dil_h,
                      iw = row % Q * k.stride_w - k.pad_w + sw * k.dil_w;
        if (ih >= 0 && ih < H && iw >= 0 && iw < W) v = xc.get_f64(((n * C + c) * H + ih) * W + iw);
      }
      want.set_f64(row * cols + col, v);
    }
  const size_t off = k.misalign ? ir::size_of(at) : 0;
  Dev dx(x), da(want.nbytes() + off);
  native::Im2colArgs a;
  a.x_dtype = xt, a.a_dtype = at, a.x = dx.p, a.a = static_cast<char*>(da.p) + off;
  a.n = N, a.c = C, a.h = H, a.w = W, a.r = k.r, a.s = k.s, a.p = P, a.q = Q, a.cols = cols;
  a.pad_h = k.pad_h, a.pad_w = k.pad_w, a.stride_h = k.stride_h, a.stride_w = k.stride_w, a.dil_h = k.dil_h, a.dil_w = k.dil_w;
  CK(native::im2col(a, nullptr));
  CK(cudaDeviceSynchronize());
  Tensor got(at, want.dims());
  CK(cudaMemcpy(got.mutable_bytes(), a.a, got.nbytes(), cudaMemcpyDeviceToHost));
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < got.numel(); ++i)
    if (!(got.get_f64(i) == want.get_f64(i))) {
      if (first < 0) first = i;
      ++bad;
    }
  if (bad) {
    std::printf("FAIL %-60s %lld of %lld elements differ (first at row %lld col %lld: got %g want %g)\n", name.c_str(),
                (long long)bad, (long long)got.numel(), (long long)(first / cols), (long long)(first % cols),
                got.get_f64(first), want.get_f64(first));
    ++g_fail;
  } else {
    std::printf("PASS %-60s exact\n", name.c_str());
    ++g_pass;
  }
}

void im2col_tests() {
  // The stem at toy size (7x7/2 pad 3, 147 -> 152 columns): f32 and f16 images, f16 and bf16 A.
  for (auto [xt, at] : std::vector<std::pair<DType, DType>>{
           {DType::f32, DType::f16}, {DType::f16, DType::f16}, {DType::f32, DType::bf16}, {DType::bf16, DType::bf16}})
    im2col_case(xt, at, {{2, 3, 37, 41}, 7, 7, 2, 2, 3, 3});
  im2col_case(DType::f32, DType::f16, {{4, 3, 224, 224}, 7, 7, 2, 2, 3, 3});          // ResNet-50's at batch 4
  im2col_case(DType::f32, DType::f16, {{2, 4, 19, 23}, 3, 3, 1, 1, 1, 1});            // C = 4: 36 -> 40 columns
  im2col_case(DType::f16, DType::f16, {{2, 3, 21, 17}, 3, 3, 1, 1, 2, 2, 2, 2});      // dilation 2
  im2col_case(DType::f32, DType::f16, {{3, 5, 13, 11}, 5, 3, 2, 1, 2, 1, 1, 2});      // R != S, stride 2x1, dilation 1x2
  im2col_case(DType::f32, DType::f16, {{1, 3, 9, 9}, 7, 7, 2, 2, 3, 3, 1, 1, 160});   // extra zero columns
  im2col_case(DType::f32, DType::f16, {{2, 3, 37, 41}, 7, 7, 2, 2, 3, 3, 1, 1, 147}); // cols not a multiple of 8: scalar
  im2col_case(DType::f32, DType::f16, {{2, 3, 17, 19}, 7, 7, 2, 2, 3, 3, 1, 1, 0, true});  // a off alignment: scalar
  im2col_case(DType::f32, DType::f32, {{2, 3, 10, 11}, 3, 3, 1, 1, 1, 1});            // f32 A: 4 columns per store
  im2col_case(DType::f32, DType::f16, {{1, 1, 1, 1}, 1, 1, 1, 1, 0, 0});              // one pixel, 1 -> 8 columns
}

// ---- stem_conv (the small-channel conv read from NCHW, one kernel) ------------------------------
// The reference executor's Conv on the images rounded to y's dtype (the cast the kernel folds in)
// with the filter and bias in that dtype, then Relu or Clip, transposed to NHWC. The kernel takes
// the filter packed [K, cols] (native::stem_conv_column, zeros elsewhere): packed here from the
// KCRS tensor the reference gets. cols 0: native::stem_conv_cols (what the lowering asks).
struct StemCase {
  std::vector<int64_t> x;  // [n, c, h, w]
  int64_t k, r, s, stride_h, stride_w, pad_h, pad_w, dil_h = 1, dil_w = 1, cols = 0;
  bool bias = true, clamp = false;
  float lo = 0.f, hi = INFINITY;
};
void stem_case(DType xt, DType dt, const StemCase& k) {
  const int64_t N = k.x[0], C = k.x[1], H = k.x[2], W = k.x[3];
  const int64_t cols = k.cols ? k.cols : native::stem_conv_cols(C, k.r, k.s);
  std::string name = "StemConv_" + dts(xt) + "_to_" + dts(dt) + "_" + shp(k.x) + "_k" + std::to_string(k.k) + "_" +
                     std::to_string(k.r) + "x" + std::to_string(k.s) + "_s" + std::to_string(k.stride_h) +
                     std::to_string(k.stride_w) + "_p" + std::to_string(k.pad_h) + std::to_string(k.pad_w) + "_d" +
                     std::to_string(k.dil_h) + std::to_string(k.dil_w) + "_cols" + std::to_string(cols) +
                     (k.bias ? "_bias" : "");
  if (k.clamp) name += std::isinf(k.hi) ? "_relu" : "_clip0to" + std::to_string(int(k.hi * 10)) + "tenths";
  if (!selected(name)) return;
  const Tensor x = rnd(xt, k.x);
  const Tensor xc = xt == dt ? x : ref_op("Cast", {x}, {{"to", dts(dt)}})[0];
  const Tensor w = rnd(dt, {k.k, C, k.r, k.s}, -0.5, 0.5), b = rnd(dt, {k.k});
  const std::vector<int64_t> pads = {k.pad_h, k.pad_w, k.pad_h, k.pad_w}, strides = {k.stride_h, k.stride_w},
                             dil = {k.dil_h, k.dil_w}, ks = {k.r, k.s};
  std::vector<Tensor> ins = {xc, w};
  if (k.bias) ins.push_back(b);
  Tensor conv = ref_op("Conv", ins, {{"pads", pads}, {"strides", strides}, {"dilations", dil}, {"kernel_shape", ks}})[0];
  if (k.clamp)
    conv = std::isinf(k.hi) ? ref_op("Relu", {conv}, {})[0]
                            : ref_op("Clip", {conv, Tensor::from_f32({k.lo}, {}).cast(dt), Tensor::from_f32({k.hi}, {}).cast(dt)}, {})[0];
  const Tensor want = to_nhwc(conv);
  Tensor packed(dt, {k.k, cols});
  for (int64_t i = 0; i < packed.numel(); ++i) packed.set_f64(i, 0);
  for (int64_t o = 0; o < k.k; ++o)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t r = 0; r < k.r; ++r)
        for (int64_t q = 0; q < k.s; ++q)
          packed.set_f64(o * cols + native::stem_conv_column(C, k.s, r, q, c), w.get_f64(((o * C + c) * k.r + r) * k.s + q));
  Dev dx(x), dw(packed), db(b), dy(want.nbytes());
  native::StemConvArgs a;
  a.x_dtype = xt, a.dtype = dt, a.x = dx.p, a.w = dw.p, a.bias = k.bias ? db.p : nullptr, a.y = dy.p;
  a.n = N, a.c = C, a.h = H, a.w_ = W, a.k = k.k, a.r = k.r, a.s = k.s, a.p = want.dims()[1], a.q = want.dims()[2];
  a.cols = cols, a.pad_h = k.pad_h, a.pad_w = k.pad_w, a.stride_h = k.stride_h, a.stride_w = k.stride_w;
  a.dil_h = k.dil_h, a.dil_w = k.dil_w, a.clamp = k.clamp, a.clamp_min = k.lo, a.clamp_max = k.hi;
  CK(native::stem_conv(a, nullptr));
  check(name, dy.get(dt, want.dims()), want);
}

void stem_conv_tests() {
  // ResNet's stem (7x7/2 pad 3, 64 channels, 147 -> 160 columns) at toy size: every x/y dtype pair.
  for (auto [xt, dt] : std::vector<std::pair<DType, DType>>{
           {DType::f32, DType::f16}, {DType::f16, DType::f16}, {DType::f32, DType::bf16}, {DType::bf16, DType::bf16}})
    stem_case(xt, dt, {{2, 3, 37, 41}, 64, 7, 7, 2, 2, 3, 3, 1, 1, 0, true, true});
  stem_case(DType::f32, DType::f16, {{2, 3, 224, 224}, 64, 7, 7, 2, 2, 3, 3, 1, 1, 0, true, true});  // ResNet-50's, batch 2
  // MobileNetV2's (3x3/2 pad 1, 32 channels: half a channel block, ReLU6 whose bound 0.5 engages).
  stem_case(DType::f32, DType::f16, {{2, 3, 67, 45}, 32, 3, 3, 2, 2, 1, 1, 1, 1, 0, true, true, 0.f, 0.5f});
  // A row longer than a tile (q = 300: three tiles, the last partial) and K = 200 (four channel
  // blocks, the last of 8 channels): the persistent loop reloads the filter.
  stem_case(DType::f16, DType::f16, {{1, 3, 5, 300}, 200, 3, 3, 1, 1, 1, 1});
  // More tiles than the persistent grid has blocks (64 images of 8 output rows; 40 x 5 rows x 3
  // tiles x 2 channel blocks): each block walks several, across rows, images and a filter reload.
  stem_case(DType::f32, DType::f16, {{64, 3, 16, 16}, 64, 7, 7, 2, 2, 3, 3, 1, 1, 0, true, true});
  stem_case(DType::f32, DType::bf16, {{40, 3, 5, 300}, 72, 3, 3, 1, 1, 1, 1});
  stem_case(DType::f32, DType::bf16, {{2, 4, 19, 23}, 16, 3, 3, 1, 1, 1, 1, 1, 1, 0, false});     // C = 4, no bias, linear
  stem_case(DType::f16, DType::f16, {{2, 3, 21, 17}, 24, 3, 3, 1, 1, 2, 2, 2, 2});                // dilation 2
  stem_case(DType::f32, DType::f16, {{3, 5, 13, 11}, 40, 5, 3, 2, 1, 2, 1, 1, 2});                // R != S, stride 2x1, dilation 1x2
  stem_case(DType::f32, DType::f16, {{1, 3, 9, 9}, 64, 7, 7, 2, 2, 3, 3, 1, 1, 224, true, true}); // extra zero columns
  stem_case(DType::f32, DType::f16, {{1, 1, 1, 1}, 8, 1, 1, 1, 1, 0, 0});                         // one pixel, 1 -> 16 columns
  stem_case(DType::f32, DType::f16, {{1, 7, 12, 12}, 8, 3, 3, 2, 2, 0, 0});                       // C = 7: 8 channels a tap
  stem_case(DType::f16, DType::f16, {{2, 5, 30, 31}, 16, 5, 5, 2, 2, 2, 2});                      // C = 5: 200 -> 208 columns

  // Refusals: C = 8 (the aligned kernels take it), K = 12, cols past 256 (9x9 taps of 4 channels),
  // input rows past the shared-memory limit (11 rows of 511 positions), and y off 16-byte alignment.
  int refused = 0;
  void* p16 = reinterpret_cast<void*>(256);
  native::StemConvArgs a;
  a.x = a.w = a.y = p16;
  a.n = 1, a.c = 3, a.h = a.w_ = 8, a.k = 64, a.r = a.s = 3, a.p = a.q = 8, a.cols = 48, a.pad_h = a.pad_w = 1;
  auto refuses = [&](native::StemConvArgs b, cudaError_t e, const char* what) {
    const bool ok = native::stem_conv(b, nullptr) == e && native::last_error_message().find(what) != std::string::npos;
    if (!ok) std::printf("     stem_conv did not refuse with '%s': %s\n", what, native::last_error_message().c_str());
    refused += ok;
  };
  native::StemConvArgs b = a;
  b.c = 8;
  refuses(b, cudaErrorNotSupported, "1..7 channels");
  b = a, b.k = 12;
  refuses(b, cudaErrorNotSupported, "multiples of 8");
  b = a, b.cols = 272, b.r = b.s = 9;
  refuses(b, cudaErrorNotSupported, "up to 256");
  b = a, b.r = 11, b.s = 3, b.cols = 144, b.stride_w = 4, b.dil_h = 2;
  refuses(b, cudaErrorNotSupported, "shared memory");
  b = a, b.y = static_cast<char*>(p16) + 2;
  refuses(b, cudaErrorInvalidValue, "16-byte aligned");
  if (selected("StemConv_refusals")) {
    std::printf("%s %-66s %d of 5 refused\n", refused == 5 ? "PASS" : "FAIL", "StemConv_refusals", refused);
    refused == 5 ? ++g_pass : ++g_fail;
  }
}

}  // namespace sabre::native_test
