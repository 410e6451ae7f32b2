// GPU test of the native grouped and depthwise conv (native::depthwise_conv2d; grouped_conv.cu)
// against the double-precision CPU conv of conv_test_util.h, with numerics.h's per-element bounds.
// Each case: random inputs (never zero), Y poisoned with NaN plus kGuard poisoned elements after it
// that nothing may write. Cases cover groups of 1 to 96 channels in and out (widths that are not
// multiples of 8 included), strides 1 and 2, padding, dilation 2, odd and non-square sizes, f16 and
// bf16, every epilogue the kernel fuses (bias, relu, relu6, silu, the residual before and after the
// activation), and every body of the kernel (the tiled one forced on depthwise convs too, the
// tensor-core one where asked for).
// Exit 77 (ctest: skipped) without a GPU; 1 on any failure.
// Run: build/tests/gpu/grouped_conv_test [substring-filter]
#include <cuda_runtime.h>

#include <cstdio>
#include <string>
#include <vector>

#include "backends/native/native.h"
#include "conv_test_util.h"

using namespace sabre::conv_test;
namespace native = sabre::native;

namespace {

constexpr int kSkip = 77;

struct Problem {
  int64_t n, h, w, c, k, r, s, groups, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
  const char* label = "";
  int64_t p() const { return (h + 2 * pad_h - dil_h * (r - 1) - 1) / stride_h + 1; }
  int64_t q() const { return (w + 2 * pad_w - dil_w * (s - 1) - 1) / stride_w + 1; }
};

struct Case {
  Problem pb;
  cb::EpilogueSpec epi;
  native::GroupedConvKernel kernel = native::GroupedConvKernel::automatic;
};

std::string epi_name(const cb::EpilogueSpec& e) {
  std::string n = e.bias ? "bias" : "nobias";
  if (e.residual == cb::Residual::before_act) n += "_res";
  if (e.act != cb::Act::none) n += e.act == cb::Act::relu ? "_relu" : e.act == cb::Act::relu6 ? "_relu6" : "_silu";
  if (e.residual == cb::Residual::after_act) n += "_res";
  return n;
}

std::string case_name(const Case& cs, cb::Elem e) {
  const Problem& p = cs.pb;
  auto s = [](int64_t v) { return std::to_string(v); };
  return "GroupedConv_" + std::string(e == cb::Elem::f16 ? "f16" : "bf16") + "_n" + s(p.n) + "_" + s(p.h) + "x" + s(p.w) +
         "_c" + s(p.c) + "k" + s(p.k) + "g" + s(p.groups) + "_r" + s(p.r) + "x" + s(p.s) + "s" + s(p.stride_h) + "p" +
         s(p.pad_h) + "d" + s(p.dil_h) + "_" + epi_name(cs.epi) + "_" + native::grouped_conv_kernel_name(cs.kernel);
}

#define CUDA_OR_FAIL(stmt)                                                                       \
  do {                                                                                           \
    cudaError_t e_ = (stmt);                                                                     \
    if (e_ != cudaSuccess) {                                                                     \
      std::printf("FAIL %s: %s at %s:%d: %s | %s\n", name.c_str(), #stmt, __FILE__, __LINE__,     \
                  cudaGetErrorString(e_), native::last_error_message().c_str());                 \
      return false;                                                                              \
    }                                                                                            \
  } while (0)

bool run_case(const Case& cs, cb::Elem e, std::mt19937& rng) {
  const std::string name = case_name(cs, e);
  Problem pb = cs.pb;
  pb.label = name.c_str();
  const int64_t P = pb.p(), Q = pb.q(), cg = pb.c / pb.groups;
  // Filter bits [k, r, s, c/groups] for the reference, [r, s, c/groups, k] for the kernel.
  std::vector<uint16_t> xb, wb, bb, rb;
  std::vector<double> xv, wv, bv, rv;
  random_tensor(e, size_t(pb.n * pb.h * pb.w * pb.c), rng, xb, xv);
  random_tensor(e, size_t(pb.k * pb.r * pb.s * cg), rng, wb, wv);
  random_tensor(e, size_t(pb.k), rng, bb, bv);
  const size_t ycount = size_t(pb.n * P * Q * pb.k);
  random_tensor(e, ycount, rng, rb, rv);
  std::vector<uint16_t> wdev(wb.size());
  for (int64_t k = 0; k < pb.k; ++k)
    for (int64_t rs = 0; rs < pb.r * pb.s; ++rs)
      for (int64_t j = 0; j < cg; ++j) wdev[size_t((rs * cg + j) * pb.k + k)] = wb[size_t((k * pb.r * pb.s + rs) * cg + j)];
  // The reference computes alpha·conv + beta·R: scale its operands so that it computes conv + R.
  std::vector<double> wref = wv, rref = rv;
  for (double& v : wref) v /= kAlpha;
  for (double& v : rref) v /= kBeta;

  DeviceBuf dx, dw, db, dr, dy;
  CUDA_OR_FAIL(cudaMalloc(&dx.p, xb.size() * 2));
  CUDA_OR_FAIL(cudaMalloc(&dw.p, wdev.size() * 2));
  CUDA_OR_FAIL(cudaMalloc(&db.p, bb.size() * 2));
  CUDA_OR_FAIL(cudaMalloc(&dr.p, rb.size() * 2));
  CUDA_OR_FAIL(cudaMalloc(&dy.p, (ycount + kGuard) * 2));
  CUDA_OR_FAIL(cudaMemcpy(dx.p, xb.data(), xb.size() * 2, cudaMemcpyHostToDevice));
  CUDA_OR_FAIL(cudaMemcpy(dw.p, wdev.data(), wdev.size() * 2, cudaMemcpyHostToDevice));
  CUDA_OR_FAIL(cudaMemcpy(db.p, bb.data(), bb.size() * 2, cudaMemcpyHostToDevice));
  CUDA_OR_FAIL(cudaMemcpy(dr.p, rb.data(), rb.size() * 2, cudaMemcpyHostToDevice));
  std::vector<uint16_t> yb(ycount + kGuard, nan_bits(e));
  CUDA_OR_FAIL(cudaMemcpy(dy.p, yb.data(), yb.size() * 2, cudaMemcpyHostToDevice));

  native::DepthwiseArgs a;
  a.dtype = e == cb::Elem::f16 ? sabre::ir::DType::f16 : sabre::ir::DType::bf16;
  a.x = dx.p, a.w = dw.p, a.bias = cs.epi.bias ? db.p : nullptr, a.y = dy.p;
  a.n = pb.n, a.h = pb.h, a.w_ = pb.w, a.c = pb.c, a.r = pb.r, a.s = pb.s, a.p = P, a.q = Q;
  if (!(pb.groups == pb.c && pb.k == pb.c)) a.k = pb.k, a.groups = pb.groups;  // else the depthwise form
  a.pad_h = pb.pad_h, a.pad_w = pb.pad_w, a.stride_h = pb.stride_h, a.stride_w = pb.stride_w;
  a.dil_h = pb.dil_h, a.dil_w = pb.dil_w;
  switch (cs.epi.act) {
    case cb::Act::none: break;
    case cb::Act::relu: a.clamp = true, a.clamp_min = 0.f, a.clamp_max = INFINITY; break;
    case cb::Act::relu6: a.clamp = true, a.clamp_min = 0.f, a.clamp_max = 6.f; break;
    case cb::Act::silu: a.act = native::ConvAct::silu; break;
    default: std::printf("FAIL %s: no such fused activation in the native kernel\n", name.c_str()); return false;
  }
  if (cs.epi.residual != cb::Residual::none) a.residual = dr.p, a.residual_after_act = cs.epi.residual == cb::Residual::after_act;
  a.kernel = cs.kernel;
  CUDA_OR_FAIL(native::depthwise_conv2d(a, nullptr));
  CUDA_OR_FAIL(cudaDeviceSynchronize());
  CUDA_OR_FAIL(cudaMemcpy(yb.data(), dy.p, yb.size() * 2, cudaMemcpyDeviceToHost));
  return check_y("", pb, e, cs.epi, 1, yb, ycount, reference(pb, cs.epi, xv, wref, bv, rref), xv, wref, bv, rref);
}

std::vector<Case> cases() {
  using K = native::GroupedConvKernel;
  const cb::EpilogueSpec lin{cb::Act::none, false, cb::Residual::none}, bias{cb::Act::none, true, cb::Residual::none},
      relu{cb::Act::relu, true, cb::Residual::none}, silu{cb::Act::silu, true, cb::Residual::none},
      relu6{cb::Act::relu6, true, cb::Residual::none}, res_relu{cb::Act::relu, true, cb::Residual::before_act},
      silu_res{cb::Act::silu, true, cb::Residual::after_act}, res{cb::Act::none, true, cb::Residual::before_act};
  //   n   h   w    c    k   r  s   g  pad    stride  dil
  return {
      // 2, 4, 8 and 16 channels a group in and out; 3x3, stride 1 and 2, padding 1.
      {{2, 14, 14, 32, 32, 3, 3, 16, 1, 1, 1, 1, 1, 1}, relu},
      {{1, 28, 28, 128, 128, 3, 3, 32, 1, 1, 2, 2, 1, 1}, relu},   // ResNeXt 32x4d's stride-2 3x3
      {{2, 14, 14, 128, 128, 3, 3, 32, 1, 1, 1, 1, 1, 1}, silu},
      {{2, 13, 11, 48, 48, 3, 3, 6, 1, 1, 1, 1, 1, 1}, relu},      // RegNet's 8 a group, odd groups and size
      {{1, 15, 15, 48, 48, 3, 3, 6, 1, 1, 2, 2, 1, 1}, silu},
      {{2, 9, 10, 64, 64, 3, 3, 4, 2, 2, 1, 1, 2, 2}, res_relu},   // 16 a group, dilation 2
      {{1, 17, 17, 64, 64, 3, 3, 4, 1, 1, 2, 2, 1, 1}, silu_res},
      // Unequal and odd widths: 4 in / 6 out, 3 in / 5 out, 5x5, a channel multiplier of 2.
      {{3, 9, 9, 12, 18, 5, 5, 3, 2, 2, 2, 2, 1, 1}, bias},
      {{2, 7, 12, 9, 15, 3, 3, 3, 1, 1, 1, 1, 1, 1}, relu6},
      {{2, 7, 7, 8, 16, 3, 3, 8, 2, 2, 1, 1, 2, 2}, lin},
      {{2, 10, 10, 16, 8, 1, 1, 2, 0, 0, 1, 1, 1, 1}, res},       // 1x1 in 2 groups (ShuffleNet-like)
      // Wide groups: output channels split into chunks of a block (96 > 64), and 64-channel
      // groups with a 5x5 dilated stride-2 window that stages the input channels in chunks.
      {{1, 12, 12, 48, 192, 3, 3, 2, 1, 1, 1, 1, 1, 1}, relu},
      {{1, 23, 21, 128, 128, 5, 5, 2, 4, 4, 2, 2, 2, 2}, silu},
      // Depthwise: the vector body (C a multiple of 8) and the tiled body, with every epilogue.
      {{2, 14, 14, 32, 32, 3, 3, 32, 1, 1, 1, 1, 1, 1}, relu6, K::depthwise_vec},
      {{2, 14, 14, 32, 32, 3, 3, 32, 1, 1, 1, 1, 1, 1}, relu6, K::tiled},
      {{1, 15, 15, 48, 48, 5, 5, 48, 2, 2, 2, 2, 1, 1}, silu_res, K::depthwise_vec},
      {{1, 15, 15, 48, 48, 5, 5, 48, 2, 2, 2, 2, 1, 1}, silu_res, K::tiled},
      {{2, 11, 9, 40, 40, 3, 3, 40, 2, 2, 1, 1, 2, 2}, res_relu, K::depthwise_vec},
      {{3, 9, 9, 5, 5, 5, 5, 5, 2, 2, 2, 2, 1, 1}, relu},              // C = 5: the tiled body
      {{1, 9, 9, 200, 200, 3, 3, 200, 1, 1, 1, 1, 1, 1}, lin, K::tiled},  // 200 groups: 4 channel tiles
      // The tensor-core body: m32n8k16 fragments (8 and 24 output channels a group), m16n16k16 (16,
      // 64, and 96 split into two chunks of a block), a reduction that ends mid-step (3x3x8 = 72).
      {{2, 13, 11, 48, 48, 3, 3, 6, 1, 1, 1, 1, 1, 1}, relu, K::tensor_core},
      {{1, 15, 15, 48, 48, 3, 3, 6, 1, 1, 2, 2, 1, 1}, silu, K::tensor_core},
      {{2, 9, 10, 64, 64, 3, 3, 4, 2, 2, 1, 1, 2, 2}, res_relu, K::tensor_core},
      {{1, 17, 17, 64, 64, 3, 3, 4, 1, 1, 2, 2, 1, 1}, silu_res, K::tensor_core},
      {{2, 7, 9, 48, 72, 3, 3, 3, 1, 1, 1, 1, 1, 1}, relu6, K::tensor_core},
      {{1, 12, 12, 48, 192, 3, 3, 2, 1, 1, 1, 1, 1, 1}, relu, K::tensor_core},
      {{1, 23, 21, 128, 128, 5, 5, 2, 4, 4, 2, 2, 2, 2}, silu, K::tensor_core},
      {{3, 10, 10, 32, 16, 1, 1, 2, 0, 0, 1, 1, 1, 1}, lin, K::tensor_core},
  };
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string filter = argc > 1 ? argv[1] : "";
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA GPU: grouped conv GPU test skipped\n");
    return kSkip;
  }
  std::mt19937 rng(4321);
  int pass = 0, fail = 0;
  for (const Case& cs : cases())
    for (cb::Elem e : {cb::Elem::f16, cb::Elem::bf16}) {
      if (!filter.empty() && case_name(cs, e).find(filter) == std::string::npos) continue;
      run_case(cs, e, rng) ? ++pass : ++fail;
    }
  // Refusals: the vector body forced where C breaks the vector; groups that do not divide channels;
  // two activations; the tensor-core body forced on 2-channel groups.
  if (filter.empty() || std::string("GroupedConv_refusals").find(filter) != std::string::npos) {
    native::DepthwiseArgs a;
    a.n = 1, a.h = a.w_ = 4, a.c = 6, a.r = a.s = 1, a.p = a.q = 4;
    a.x = a.w = a.y = reinterpret_cast<void*>(256);
    int refused = 0;
    a.kernel = native::GroupedConvKernel::depthwise_vec;
    refused += native::depthwise_conv2d(a, nullptr) == cudaErrorInvalidValue;
    a.kernel = native::GroupedConvKernel::automatic, a.k = 6, a.groups = 4;
    refused += native::depthwise_conv2d(a, nullptr) == cudaErrorInvalidValue;
    a.k = 0, a.groups = 0, a.act = native::ConvAct::kCount;  // no such activation
    refused += native::depthwise_conv2d(a, nullptr) == cudaErrorInvalidValue;
    a.act = native::ConvAct::none, a.k = 6, a.groups = 3, a.kernel = native::GroupedConvKernel::tensor_core;  // 2 a group
    refused += native::depthwise_conv2d(a, nullptr) == cudaErrorInvalidValue;
    cudaGetLastError();
    std::printf("%s GroupedConv_refusals: %d of 4 refused\n", refused == 4 ? "ok  " : "FAIL", refused);
    refused == 4 ? ++pass : ++fail;
  }
  std::printf("%d passed, %d failed\n", pass, fail);
  return fail ? 1 : 0;
}
