// GEMM kernel specifications as data: a config (how the kernel tiles and schedules), the operands
// (dtypes, layout) and an epilogue (what is computed after the accumulation). The generated name
// is the identity of a kernel: cache key, file name, symbol prefix and test name.
// Tests: tests/unit/kernel_spec_test.cpp
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sabre::cutlass_backend {

enum class Family : uint8_t { sm90, sm80, kCount };
// sm90: TMA warp-specialized kernels from the 3.x CollectiveBuilder; sm80: 2.x GemmUniversal,
// whose only schedule is the multistage (or, with 2 stages, register-pipelined) mainloop.
// splitk is the stream-K kernel told to split every tile's K exactly KernelConfig::splits ways; its
// splits add their partials in K order (bitwise reproducible). splitku is the same split with the
// middle splits adding atomically in arrival order: one handoff less per split, not reproducible
// bit for bit.
enum class Schedule : uint8_t { coop, pingpong, streamk, splitk, splitku, multistage, kCount };
constexpr bool is_split_k(Schedule s) { return s == Schedule::splitk || s == Schedule::splitku; }
// f32 operands run on tensor cores as TF32; accumulation is always f32.
enum class Elem : uint8_t { f16, bf16, f32, kCount };
// A is always [M,K] row-major. tn: B is [N,K], K contiguous. tt: B is [K,N], N contiguous.
enum class Layout : uint8_t { tn, tt, kCount };
// relu6 is min(max(x, 0), 6): ONNX Clip(x, 0, 6), how torchvision's MobileNetV2 exports ReLU6.
enum class Act : uint8_t { none, relu, gelu_erf, gelu_tanh, silu, sigmoid, hardswish, relu6, kCount };
enum class Residual : uint8_t { none, before_act, after_act, kCount };

struct Shape3 {
  int m = 0, n = 0, k = 0;
  bool operator==(const Shape3&) const = default;
};

struct KernelConfig {
  Family family = Family::sm90;
  Schedule schedule = Schedule::coop;
  Shape3 tile;             // threadblock (CTA) tile
  int cluster_m = 1, cluster_n = 1;  // sm90 only
  Shape3 warp;             // sm80 only
  int stages = 0;          // sm80 only; sm90 picks its stage count from the shared memory left
  int alignment = 8;       // elements, for A, B, C and D
  int splits = 1;          // splitk and splitku only (2..16): CTAs that share one output tile's K; 1 otherwise
  bool operator==(const KernelConfig&) const = default;
};

struct GemmOperands {
  Elem ab = Elem::f16;  // A and B
  Elem d = Elem::f16;   // D, residual and bias
  Layout layout = Layout::tn;
  bool operator==(const GemmOperands&) const = default;
};

// D = act(alpha·acc + bias[n] + beta·R) or act(alpha·acc + bias[n]) + beta·R, per `residual`.
struct EpilogueSpec {
  Act act = Act::none;
  bool bias = false;
  Residual residual = Residual::none;
  bool operator==(const EpilogueSpec&) const = default;
};

struct KernelSpec {
  KernelConfig config;
  GemmOperands ops;
  EpilogueSpec epi;
  bool operator==(const KernelSpec&) const = default;
};

std::string_view family_name(Family f);      // "sm90"
std::string_view schedule_name(Schedule s);  // "coop"
std::string_view elem_name(Elem e);          // "f16"
std::string_view layout_name(Layout l);      // "tn"
std::string_view act_name(Act a);            // "gelu" (erf), "gelutanh", ...; "" for none
int elem_bytes(Elem e);
std::optional<Elem> parse_elem(std::string_view s);
std::optional<Act> parse_act(std::string_view s);

// "bias_gelu", "bias_res_relu" (residual before act), "gelu_res" (after), "linear" (nothing).
// The tokens are in the order the epilogue applies them.
std::string epilogue_name(const EpilogueSpec& e);
std::optional<EpilogueSpec> parse_epilogue(std::string_view s);

// sm90_ws_coop_tn_f16_f16_f32_128x256x64_c1x2_a8_bias_gelu
// sm90_ws_splitk4_tn_f16_f16_f32_128x64x64_c1x1_a8_bias_res (split-K: the split count follows the schedule)
// sm80_tc_tn_f16_f16_f32_128x128x32_w64x64x32_s3_a8_bias_relu
std::string kernel_name(const KernelSpec& s);
std::optional<KernelSpec> parse_kernel_name(std::string_view name);

// Static filter: why this spec cannot be built or run on a GPU of compute capability target_sm
// (90 for H100/H200, 80 for A100), or nullopt when it can. Checks tile/warp/cluster shapes,
// shared memory per stage against the target's limit, alignment against dtype and mainloop,
// and dtype against the family (TF32 wgmma needs K-major B).
std::optional<std::string> unsupported_reason(const KernelSpec& s, int target_sm);

// Shared memory an sm80 mainloop needs (stages × (A tile + B tile)), bytes.
int64_t sm80_mainloop_smem_bytes(const KernelConfig& c, Elem ab);
// Dynamic shared memory a kernel may use on the target: 227 KiB on sm90, 163 KiB on sm80.
int64_t max_smem_bytes(int target_sm);

}  // namespace sabre::cutlass_backend
