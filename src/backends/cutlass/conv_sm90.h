// Hopper convolution kernels (the sm90 conv family): 2-D forward convolution on NHWC activations and
// KRSC filters as an implicit GEMM (M = N·P·Q, N = K, K = R·S·C) built from CUTLASS 4.2's 3.x
// conv CollectiveBuilder: TMA im2col loads of X, TMA loads of W, warp-specialized wgmma, and a TMA
// epilogue from the 3.x epilogue CollectiveBuilder with fusion ops (or an EVT tree). The epilogue is
// the GEMM's (EpilogueSpec): the output channel k is the GEMM column, so bias[k] is a per-column bias.
// Y = act(alpha·acc + bias[k] + beta·R) or act(alpha·acc + bias[k]) + beta·R.
// Same C ABI as the sm80 conv kernels (sabre_conv_args, sabre_conv_registry in kernel_abi.h).
// The generated name is the identity of a kernel: cache key, file name, symbol prefix, test name.
// Tests: tests/unit/conv_sm90_spec_test.cpp (names, filter, text), tests/gpu/conv_sm90_gpu_test.cpp (numerics).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cutlass/emitter.h"
#include "backends/cutlass/kernel_spec.h"

namespace sabre::cutlass_backend {

// One schedule only: CUTLASS 4.2 builds sm90 conv mainloops with KernelImplicitTmaWarpSpecializedSm90
// (one TMA producer warp, one consumer warpgroup per CTA, one tile per CTA); its dispatch policy
// static_asserts that the persistent cooperative and pingpong schedules are not supported for conv.
// So the name carries no schedule token.
struct Sm90ConvConfig {
  Shape3 tile;                       // CTA tile of the implicit GEMM (M = N·P·Q, N = K, K = 64 channels)
  int cluster_m = 1, cluster_n = 1;  // 2x1 multicasts each filter tile to both CTAs; 1x2 each X tile
  int alignment = 8;                 // elements: 16 bytes, TMA's row alignment (C and K multiples of 8)
  bool operator==(const Sm90ConvConfig&) const = default;
};

struct Sm90ConvSpec {
  Sm90ConvConfig config;
  Elem elem = Elem::f16;  // X, W, Y, bias and residual; accumulation and epilogue math are f32
  EpilogueSpec epi;
  bool operator==(const Sm90ConvSpec&) const = default;
};

// sm90_conv_fprop_nhwc_f16_f16_f32_128x128x64_c1x1_a8_bias_relu
std::string sm90_conv_kernel_name(const Sm90ConvSpec& s);
// The spec of a name sm90_conv_kernel_name made, or nullopt (one spelling per kernel: no leading zeros).
std::optional<Sm90ConvSpec> parse_sm90_conv_kernel_name(std::string_view name);
// True for names of this family ("sm90_conv_"), to tell them from sm80 conv and GEMM names.
bool is_sm90_conv_kernel_name(std::string_view name);

// Static filter: why `s` cannot be built or run on a GPU of compute capability target_sm, or nullopt.
// Needs sm 90 exactly (wgmma and TMA im2col exist only in sm_90a code), f16 or bf16, alignment 8
// (16 bytes), tile K 64, tile M 64 or 128 with at most 128 accumulator registers per thread, tile N a
// multiple of 16 in 16..256, cluster 1x1, 2x1 or 1x2.
std::optional<std::string> sm90_conv_unsupported_reason(const Sm90ConvSpec& s, int target_sm);

// The tile/cluster rows for `elem` (empty for types other than f16 and bf16). Every row passes the
// static filter for sm 90; alignment is always 8, so C = 3 stems stay with the sm80 family (or pad C).
std::vector<Sm90ConvConfig> sm90_conv_catalog(Elem elem);

// The .cu text for `s`, with the conv C ABI (NAME_can_implement, _workspace_size, _run, _last_error and,
// unless opts.registry is false, sabre_conv_registry under #ifndef SABRE_NO_REGISTRY). Throws
// std::invalid_argument when the spec fails sm90_conv_unsupported_reason for target_sm.
std::string emit_sm90_conv_kernel(const Sm90ConvSpec& s, int target_sm = 90, const EmitOptions& opts = {});

// nvcc -gencode flags of this family: sm_90a, as the sm90 GEMMs (a plain sm_90 build compiles the
// wgmma/TMA templates to stubs; the emitted TU has an #error that stops such a build).
std::vector<std::string> sm90_conv_gencode_flags();

}  // namespace sabre::cutlass_backend
