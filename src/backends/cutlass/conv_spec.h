// Convolution kernel specifications as data (issue 7): 2-D forward convolution on NHWC activations
// and KRSC filters as an implicit GEMM (M = N·P·Q, N = K, K = R·S·C), built from CUTLASS 2.x
// DefaultConv2dFprop on mma.sync (sm80; runs on sm90 too). The epilogue reuses the GEMM spelling
// (EpilogueSpec, epilogue_name): Y = act(alpha·acc + bias[k] + beta·R) or act(...) + beta·R.
// The generated name is the identity of a kernel: cache key, file name, symbol prefix, test name.
// Tests: tests/unit/conv_spec_test.cpp
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cutlass/kernel_spec.h"

namespace sabre::cutlass_backend {

// How the mainloop walks the activation: optimized precomputes the filter offsets (the fast path,
// needs C a multiple of the alignment); analytic recomputes each (R,S,C) coordinate and is the
// fallback for alignments too small for cp.async (C = 3 with 2 stages). Both walk C in chunks of
// the tile's K at each filter tap, so a C below it (the stem padded to 8 against a K of 32) leaves
// most of every k-tile masked. few_channels (CUTLASS's kFewChannels) runs the GEMM K over (r,s,c)
// packed, c innermost, one tap's `alignment` channels per access: R·S·C of useful work with no
// padding to the tile (392 for the 7x7 stem padded to 8 channels, against 7·7·32 = 1568). For
// C <= kFewChannelsMaxC only (conv_channels_unsupported_reason), and without split-K.
enum class ConvIter : uint8_t { optimized, analytic, few_channels, kCount };

// The widest C few_channels kernels take: past it one tap's channels fill a good part of the K
// tile and the optimized iterator's precomputed offsets win.
constexpr int64_t kFewChannelsMaxC = 16;

enum class ConvSplitK : uint8_t { serial, parallel };

struct ConvConfig {
  ConvIter iter = ConvIter::optimized;
  Shape3 tile;     // threadblock tile of the implicit GEMM (M = N·P·Q, N = K, K = R·S·C)
  Shape3 warp;     // warp tile; K equals the tile's
  int stages = 3;  // 2: register-pipelined mainloop (any alignment); >2: cp.async multistage
  int alignment = 8;  // elements, for C (input channels) and K (output channels) and every pointer
  // Split-K slices (1: none): CTAs that share one output tile, each over every split_k-th k-tile of
  // R·S·C. For problems whose output tiles cannot fill the GPU (small batch, 7x7 and 14x14 layers).
  // Not a catalog row: the picker chooses it per problem. How the slices' partial sums meet:
  // serial: they add into Y in slice order (a semaphore per tile), the last one applies the bias,
  // activation and residual; only epilogues that stay linear until the last slice allow it
  // (conv_split_k_allowed), and each hand-over costs a pass through Y.
  // parallel: each stores its f32 partial sums in the workspace ([slice][n·p·q][k]) at once, and
  // a second kernel adds them in slice order and applies the whole epilogue: any epilogue, no
  // hand-over, at the cost of the partials' round trip through memory and one more launch.
  int split_k = 1;
  ConvSplitK split_mode = ConvSplitK::serial;
  // A grouped conv (CUTLASS's single-group mode): the filter is [k, r, s, c/groups] and each CTA's
  // tile N lies inside one group, so K/groups must be a multiple of the tile's N and C/groups of the
  // alignment (conv_group_unsupported_reason). Optimized iterator, no split-K, no residual. Such a
  // kernel runs groups = 1 too, but the plain ones are faster there: the ranking keeps them apart.
  bool grouped = false;
  bool operator==(const ConvConfig&) const = default;
};

struct ConvSpec {
  ConvConfig config;
  Elem elem = Elem::f16;  // X, W, Y, bias and residual; accumulation is f32
  EpilogueSpec epi;
  bool operator==(const ConvSpec&) const = default;
};

std::string_view conv_iter_name(ConvIter i);  // "optimized", "analytic", "few_channels"

// sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8_bias_relu, grouped
// sm80_conv_fprop_grouped_optimized_nhwc_f16_f16_f32_128x32x32_w64x32x32_s4_a8_bias_relu, with split-K
// sm80_conv_fprop_optimized_nhwc_f16_f16_f32_64x64x32_w32x32x32_s4_a8_splitk4_bias_relu (serial) or
// sm80_conv_fprop_optimized_nhwc_f16_f16_f32_64x64x32_w32x32x32_s4_a8_splitkp8_bias_relu (parallel), and the
// stem's sm80_conv_fprop_few_channels_nhwc_f16_f16_f32_128x64x32_w64x32x32_s4_a8_bias_relu
std::string conv_kernel_name(const ConvSpec& s);
std::optional<ConvSpec> parse_conv_kernel_name(std::string_view name);
// True for names of the conv family ("sm80_conv_"), so a caller can tell them from GEMM names.
bool is_conv_kernel_name(std::string_view name);

// Whether serial split-K computes `epi` right. Slices but the last store alpha·acc plus what they
// read (the first: the bias or R; the others: the partial sum in Y). Without a residual the
// activation waits for the last slice, and the bias must be there to make Y the source (the
// no-bias epilogue reads none); the residual block applies its inner activation in every slice,
// so it splits only with the residual before the activation or no activation.
// (Serial split-K only: parallel split-K applies the epilogue once, to the sum.)
bool conv_split_k_allowed(const EpilogueSpec& epi);
constexpr int kMaxConvSplitK = 16;

// Static filter: why `s` cannot be built or run on a GPU of compute capability target_sm, or nullopt.
std::optional<std::string> conv_unsupported_reason(const ConvSpec& s, int target_sm);

// Problem filter on the input channels C, beyond the static one: why a kernel of config `c` does
// not run a conv with `channels` input channels, or nullopt. Every iterator needs C a multiple of
// the alignment; few_channels is for C <= kFewChannelsMaxC. The kernels refuse the same problems
// (their can_implement), and the ranking offers a kernel only where this is nullopt.
std::optional<std::string> conv_channels_unsupported_reason(const ConvConfig& c, int64_t channels);

// Problem filter on the groups, beyond the static one: why a kernel of config `c` does not run a conv
// of `groups` groups over `channels` input and `out_channels` output channels, or nullopt. Plain
// kernels take groups = 1 only; grouped ones need each group's input channels a multiple of the
// alignment and its output channels a multiple of the tile's N.
std::optional<std::string> conv_group_unsupported_reason(const ConvConfig& c, int64_t groups, int64_t channels,
                                                         int64_t out_channels);

// Configs for `elem` on target_sm that pass the static filter: a few aligned (16-byte) tiles, the
// 4-byte and 2-byte (alignment 2 and 1 for 16-bit types) analytic fallbacks for channel counts
// such as 3 (RGB stems), 16-byte few_channels tiles for the stem padded to 8 channels, and grouped
// tiles of N 32, 64 and 128 (groups of that many output channels; transform/regroup_convs.h).
std::vector<ConvConfig> conv_catalog(Elem elem, int target_sm);

// The epilogues conv kernels are generated with: each activation of {none, relu, silu, hardswish,
// sigmoid, relu6} with and without bias, and the residual (ResNet) forms bias_res, bias_res_relu,
// bias_relu_res (not for grouped kernels).
std::vector<EpilogueSpec> conv_epilogues();

}  // namespace sabre::cutlass_backend
