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

// How the CTAs walk the output tiles of the implicit GEMM.
//  ws: CUTLASS 4.2's own sm90 conv kernel (KernelImplicitTmaWarpSpecializedSm90 through ConvUniversal,
//      i.e. the non-persistent warp-specialized GEMM kernel): one CTA per output tile, one TMA producer
//      warp and one consumer warpgroup; the epilogue follows the mainloop with nothing overlapping it.
//  pingpong, coop: the same conv mainloop collective (TMA im2col + wgmma) run by CUTLASS's persistent
//      GEMM kernels (sm90_gemm_tma_warpspecialized_pingpong / _cooperative.hpp) through a small adapter
//      in the generated source (conv_sm90.cpp says what it bridges). A grid of at most one CTA per SM
//      walks the tiles; pingpong's two consumer warpgroups take alternate tiles, so one's epilogue runs
//      under the other's mainloop; coop's two split each tile's M, and the producer loads the next tile
//      during the epilogue. CUTLASS 4.2's conv builder and dispatch policy refuse its own persistent
//      conv tags ("not supported yet"), so these kernels are assembled from the builder's parts.
//      They launch with programmatic dependent launch, as the persistent GEMMs do.
enum class Sm90ConvSchedule : uint8_t { ws, pingpong, coop, kCount };
std::string_view sm90_conv_schedule_name(Sm90ConvSchedule s);  // "ws", "pingpong", "coop"

struct Sm90ConvConfig {
  Shape3 tile;                       // CTA tile of the implicit GEMM (M = N·P·Q, N = K, K = 64 channels)
  int cluster_m = 1, cluster_n = 1;  // 2x1 multicasts each filter tile to both CTAs; 1x2 each X tile
  int alignment = 8;                 // elements: 16 bytes, TMA's row alignment (C and K multiples of 8)
  Sm90ConvSchedule schedule = Sm90ConvSchedule::ws;
  bool operator==(const Sm90ConvConfig&) const = default;
};

struct Sm90ConvSpec {
  Sm90ConvConfig config;
  Elem elem = Elem::f16;  // X, W, Y, bias and residual; accumulation and epilogue math are f32
  EpilogueSpec epi;
  bool operator==(const Sm90ConvSpec&) const = default;
};

// sm90_conv_fprop_nhwc_f16_f16_f32_128x128x64_c1x1_a8_bias_relu (ws: no schedule token, the names the
// family had before the persistent schedules), sm90_conv_fprop_pingpong_nhwc_..., sm90_conv_fprop_coop_nhwc_...
std::string sm90_conv_kernel_name(const Sm90ConvSpec& s);
// The spec of a name sm90_conv_kernel_name made, or nullopt (one spelling per kernel: no leading zeros).
std::optional<Sm90ConvSpec> parse_sm90_conv_kernel_name(std::string_view name);
// True for names of this family ("sm90_conv_"), to tell them from sm80 conv and GEMM names.
bool is_sm90_conv_kernel_name(std::string_view name);

// Static filter: why `s` cannot be built or run on a GPU of compute capability target_sm, or nullopt.
// Needs sm 90 exactly (wgmma and TMA im2col exist only in sm_90a code), f16 or bf16, alignment 8
// (16 bytes), tile K 64, tile N a multiple of 16 in 16..256, cluster 1x1, 2x1 or 1x2, and at most 128
// accumulator registers per thread: tile M 64 or 128 for ws and pingpong (one consumer warpgroup per
// tile), 128 or 256 for coop (two warpgroups split M; CUTLASS's cooperative kernel needs M >= 128).
std::optional<std::string> sm90_conv_unsupported_reason(const Sm90ConvSpec& s, int target_sm);

// The tile/cluster rows for `elem` (empty for types other than f16 and bf16). Every row passes the
// static filter for sm 90; alignment is always 8, so C = 3 stems stay with the sm80 family (or pad C).
std::vector<Sm90ConvConfig> sm90_conv_catalog(Elem elem);

// The .cu text for `s`, with the conv C ABI (NAME_can_implement, _workspace_size, _run, _last_error and,
// unless opts.registry is false, sabre_conv_registry under #ifndef SABRE_NO_REGISTRY). Throws
// std::invalid_argument when the spec fails sm90_conv_unsupported_reason for target_sm.
std::string emit_sm90_conv_kernel(const Sm90ConvSpec& s, int target_sm = 90, const EmitOptions& opts = {});
// What the kernel built from `s` computes (its library's NAME_signature text); sm_90a code.
support::KernelSignature sm90_conv_kernel_signature(const Sm90ConvSpec& s);

// nvcc -gencode flags of this family: sm_90a, as the sm90 GEMMs (a plain sm_90 build compiles the
// wgmma/TMA templates to stubs; the emitted TU has an #error that stops such a build).
std::vector<std::string> sm90_conv_gencode_flags();

}  // namespace sabre::cutlass_backend
