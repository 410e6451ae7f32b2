// The small-channel conv at the NCHW graph boundary (the RGB stem: C = 3) as one native kernel
// (stem_conv.cu): what the "stem_conv" plan step runs. Plain C++ (no CUDA headers), so the lowering
// can ask stem_conv_unsupported() at compile time what the kernel will refuse at run time, and pack
// the filter with stem_conv_column().
//
// y[n, p, q, k] = act(bias[k] + sum_{r,s,c} x[n, c, p·stride_h - pad_h + r·dil_h, q·stride_w - pad_w + s·dil_w]
//                                         · w[k, stem_conv_column(r, s, c)])
// x [n, c, h, w] dense NCHW in x_dtype (f32, f16 or bf16: the model's images, read as they are and
// rounded to `dtype` as cast() rounds, so the fused input Cast costs nothing); taps outside x read 0.
// w [k, cols] in `dtype`, row-major: filter tap (r, s) of channel c in column (r·S + s)·CP + c, CP =
// stem_conv_channel_pitch(C) (C = 3: 4), zeros in the other columns (c >= C, and from R·S·CP to
// cols = stem_conv_cols()). bias [k] in `dtype` or null. y [n, p, q, k] dense NHWC in `dtype`
// (f16 or bf16). Products on tensor cores, sums in f32; act on the f32 sum: none, or
// min(max(v, clamp_min), clamp_max) when `clamp` (Relu: 0, +inf; ReLU6: 0, 6), as depthwise_conv2d.
#pragma once

#include <cstdint>
#include <string>

#include "ir/dtype.h"

namespace sabre::native {

// The kernel keeps a block's filter [64 output channels, cols] and the input rows of a tile of
// kStemConvTile output pixels along one output row (every filter row, channels interleaved) in
// shared memory, and reduces over cols in 16-column steps.
inline constexpr int64_t kStemConvMaxCols = 256;
inline constexpr int64_t kStemConvMaxChannels = 8;   // C < 8 (what channel_padding pads)
inline constexpr int64_t kStemConvTile = 128;        // output pixels a tile
inline constexpr int64_t kStemConvMaxPatch = 16384;  // elements of a tile's input rows and zero slot (32 KB in f16)

// Channels of one input position in shared memory and in the filter's columns: C rounded up to 4
// or 8, so that filter columns 2j and 2j + 1 are one 4-byte load for every pixel.
inline int64_t stem_conv_channel_pitch(int64_t c) { return c <= 4 ? 4 : 8; }
// The filter column of tap (r, s) of channel c for a filter of C channels and S columns, and the
// columns of the packed filter [K, cols].
inline int64_t stem_conv_column(int64_t C, int64_t S, int64_t r, int64_t s, int64_t c) {
  return (r * S + s) * stem_conv_channel_pitch(C) + c;
}
inline int64_t stem_conv_cols(int64_t c, int64_t r, int64_t s) {
  return (r * s * stem_conv_channel_pitch(c) + 15) / 16 * 16;
}

// Where a tile's input rows lie in shared memory (elements): input position j of the tile's filter
// row rr (rr = r·dil_h) at rr·row_pitch + j·CP, its CP channels contiguous (zeros past C);
// ww = (tile - 1)·stride_w + (s - 1)·dil_w + 1 positions a row, rh = (r - 1)·dil_h + 1 rows. Then a
// zero slot of zero_len elements that the columns past R·S·CP read for every pixel.
struct StemConvLayout {
  int64_t cp = 0, rh = 0, ww = 0, row_pitch = 0, rows = 0, zero_len = 0, elems = 0;
};
inline StemConvLayout stem_conv_layout(int64_t c, int64_t r, int64_t s, int64_t stride_w, int64_t dil_h, int64_t dil_w) {
  StemConvLayout l;
  l.cp = stem_conv_channel_pitch(c);
  l.rh = (r - 1) * dil_h + 1;
  l.ww = (kStemConvTile - 1) * stride_w + (s - 1) * dil_w + 1;
  l.row_pitch = (l.ww * l.cp + 7) / 8 * 8;
  if (l.row_pitch % 64 == 0) l.row_pitch += 8;  // successive rows' gathers on other banks
  l.rows = l.rh * l.row_pitch;
  l.zero_len = ((kStemConvTile - 1) * stride_w * l.cp + 2 + 7) / 8 * 8;
  l.elems = l.rows + l.zero_len;
  return l;
}

struct StemConvArgs {
  ir::DType x_dtype = ir::DType::f32, dtype = ir::DType::f16;
  const void *x = nullptr, *w = nullptr, *bias = nullptr;
  void* y = nullptr;
  int64_t n = 0, c = 0, h = 0, w_ = 0, k = 0, r = 1, s = 1, p = 0, q = 0, cols = 0;
  int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  bool clamp = false;
  float clamp_min = 0.f, clamp_max = 0.f;
};

// The shape rules of stem_conv() (pointers and dims past int32 aside, which it checks itself):
// "" where it takes the conv, else why not. The lowering emits a "stem_conv" step only where
// this is "" at every dim the ranges allow: the rules depend on c, r, s, k, cols, strides and
// dilations, not on n, h, w.
inline std::string stem_conv_unsupported(ir::DType x_dtype, ir::DType dtype, int64_t c, int64_t r, int64_t s, int64_t k,
                                         int64_t cols, int64_t stride_h, int64_t stride_w, int64_t dil_h,
                                         int64_t dil_w) {
  using ir::DType;
  if (dtype != DType::f16 && dtype != DType::bf16) return "stem_conv: y must be f16 or bf16";
  if (x_dtype != DType::f32 && x_dtype != DType::f16 && x_dtype != DType::bf16)
    return "stem_conv: x must be f32, f16 or bf16";
  if (c < 1 || c >= kStemConvMaxChannels) return "stem_conv: C = " + std::to_string(c) + ", it takes 1..7 channels";
  if (r < 1 || s < 1 || r > 11 || s > 11) return "stem_conv: filters up to 11x11";
  if (k < 8 || k % 8) return "stem_conv: K = " + std::to_string(k) + " output channels, it takes multiples of 8";
  if (cols < r * s * stem_conv_channel_pitch(c) || cols % 16 || cols > kStemConvMaxCols)
    return "stem_conv: " + std::to_string(cols) + " filter columns for R*S*CP = " +
           std::to_string(r * s * stem_conv_channel_pitch(c)) + ", it takes a multiple of 16 up to " +
           std::to_string(kStemConvMaxCols);
  if (stride_h < 1 || stride_w < 1 || stride_h > 4 || stride_w > 4) return "stem_conv: strides 1..4";
  if (dil_h < 1 || dil_w < 1 || dil_h > 2 || dil_w > 2) return "stem_conv: dilations 1..2";
  if (const int64_t e = stem_conv_layout(c, r, s, stride_w, dil_h, dil_w).elems; e > kStemConvMaxPatch)
    return "stem_conv: a tile's input rows take " + std::to_string(e) + " elements of shared memory, at most " +
           std::to_string(kStemConvMaxPatch);
  return "";
}

}  // namespace sabre::native
