// What grouped_conv.cu's kernel bodies share: the parameter block and the epilogue. Included by
// grouped_conv.cu only (hence the unnamed namespace).
#pragma once

#include "backends/native/common.cuh"

namespace sabre::native {
namespace {

using namespace detail;

// Dims fit int32 (checked on the host); global offsets are formed in 64 bits.
struct GcParams {
  const void *x, *w, *bias, *res;
  void* y;
  int n, h, w_, c, r, s, p, q, k, groups, cg, kg;
  int pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
  ConvAct act;  // conv_act.h, applied before the clamp
  int clamp, res_after;
  float alpha, beta, lo, hi;
  // The block's tile (choose_tile; launch_tensor sets bkc and kchunks).
  int gpb;       // whole groups a block (1 where a group's channels are split into chunks)
  int bkc;       // output channels a block: gpb·kg, or a chunk of one group
  int kchunks;   // channel chunks a group (1 where gpb > 1)
  int th, tw;    // output rows and columns a block
  int cch;       // input channels a group staged at once
  int win_h, win_w, xs;  // the input window and its shared-memory pitch a position (odd: no bank conflicts)
  int tiles_p, tiles_q;
  DivMod by_cch, by_gpb, by_win_w, by_bkc, by_kg;  // the staging loops' divisors
};

// The fused activation (conv_act.h), then the clamp (Relu, Clip).
__device__ __forceinline__ float activate(float v, const GcParams& a) {
  switch (a.act) {
    case ConvAct::silu: v = v / (1.f + __expf(-a.alpha * v)); break;
    case ConvAct::sigmoid: v = 1.f / (1.f + __expf(-v)); break;
    case ConvAct::hard_swish: v = v * fminf(fmaxf(a.alpha * v + a.beta, 0.f), 1.f); break;
    case ConvAct::hard_sigmoid: v = fminf(fmaxf(a.alpha * v + a.beta, 0.f), 1.f); break;
    default: break;
  }
  return a.clamp ? fminf(fmaxf(v, a.lo), a.hi) : v;
}

// y = act(acc + bias [+ res]) [+ res] with v = acc + bias: the epilogue both bodies share.
__device__ __forceinline__ float finish(float v, float res, const GcParams& a) {
  if (!a.res_after) v += res;
  v = activate(v, a);
  return a.res_after ? v + res : v;
}

}  // namespace
}  // namespace sabre::native
