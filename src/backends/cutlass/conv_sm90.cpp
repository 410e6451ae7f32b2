#include "backends/cutlass/conv_sm90.h"

#include <array>
#include <initializer_list>
#include <stdexcept>

#include "backends/cutlass/emit_common.h"
#include "backends/cutlass/kernel_template.h"

namespace sabre::cutlass_backend {
namespace {

constexpr std::string_view kPrefix = "sm90_conv_fprop_";

std::string i(int v) { return std::to_string(v); }

std::string dims(Shape3 s) { return i(s.m) + "x" + i(s.n) + "x" + i(s.k); }

constexpr std::array<std::string_view, size_t(Sm90ConvSchedule::kCount)> kScheduleNames = {"ws", "pingpong", "coop"};
static_assert(kScheduleNames.size() == size_t(Sm90ConvSchedule::kCount));

bool persistent(Sm90ConvSchedule s) { return s != Sm90ConvSchedule::ws; }

// Rows for 16-bit operands (tile K is always 64: 128 bytes, one swizzled TMA row).
struct Row {
  Sm90ConvSchedule schedule;
  int m, n, cm, cn;
};
using S = Sm90ConvSchedule;
constexpr Row kRows[] = {
    // The workhorse: large N·P·Q with K >= 128 (ResNet-50 stages 2-4 at batch 32); 128 accumulator
    // registers per thread, the most one consumer warpgroup holds without spilling.
    {S::ws, 128, 128, 1, 1},
    // The same tile in a 2x1 cluster: both CTAs of a column pair get each filter tile by one TMA
    // multicast, halving the filter's L2 traffic on deep R·S·C layers (CUTLASS's own sm90 conv
    // library uses 2x1 and 1x2 clusters).
    {S::ws, 128, 128, 2, 1},
    // K = 64 layers (ResNet-50 stage 1, 1x1 and 3x3 with 64 output channels): an N tile of 64 wastes
    // no half tile; M 128 keeps the CTA count sane on 32x56x56 outputs.
    {S::ws, 128, 64, 1, 1},
    // Small N·P·Q (7x7 and 14x14 maps at small batch): half the M tile doubles the CTAs that fill the
    // 132 SMs. CUTLASS prefers 64x128 to 128x64 on sm90 for such shapes.
    {S::ws, 64, 128, 1, 1},
    // Persistent pingpong: the ws kernel runs a large-M, small-N conv (ResNet-50's layer1 3x3) in many
    // waves of CTAs each running its epilogue alone, well under its FLOP and byte rate; here one
    // warpgroup's epilogue hides under the other's mainloop. The same
    // three tiles as ws, so each ws kernel has a persistent twin to be timed against.
    {S::pingpong, 128, 64, 1, 1},
    {S::pingpong, 128, 128, 1, 1},
    {S::pingpong, 64, 128, 1, 1},
    // Persistent cooperative: two warpgroups on one tile, so twice ws's tile at the same 64-128
    // registers per thread: 256x64 for the K = 64 layers, 256x128 for large maps with K >= 128,
    // 128x128 (64 rows per warpgroup) for the mid-size ones, and its 2x1 cluster as ws has.
    {S::coop, 128, 128, 1, 1},
    {S::coop, 128, 128, 2, 1},
    {S::coop, 256, 64, 1, 1},
    {S::coop, 256, 128, 1, 1},
};
// Not offered: 128x256 in one warpgroup (ws, pingpong) would need 256 f32 accumulator registers per
// thread, past the 255-register limit: it spills. coop 128x256 fits (128 registers per thread) and is
// left out to keep the catalog, and the tuner's compiles, small until a layer shows it wants it.

// ---- emitted text ----------------------------------------------------------------------------

// The fusion op (or EVT tree) of `e`, with its comments; the same text for every schedule.
std::string fusion_op(const EpilogueSpec& e, Elem elem) {
  return fill_template("conv_sm90_fusion.cu.in", {{"act_functors", detail::act_functor_definitions(e.act, elem)},
                                                  {"algebra", detail::conv_algebra(e)},
                                                  {"fusion_op", detail::sm90_fusion_op(e, "Element", "bias[k]")}});
}

// The types both schedules declare after their layouts: C's element, the accumulator and epilogue
// math, the alignment, and the tile and cluster shapes.
std::string tile_types(const Sm90ConvSpec& s) {
  const Sm90ConvConfig& c = s.config;
  const bool has_c = s.epi.residual != Residual::none;
  return fill_template("conv_sm90_tile_types.cu.in",
                       {{"element_c", has_c ? "Element" : "void"},
                        {"element_c_note", has_c ? "the source tensor C is the residual R" : "no source tensor is read"},
                        {"alignment", i(c.alignment)},
                        {"tile_m", i(c.tile.m)},
                        {"tile_n", i(c.tile.n)},
                        {"tile_k", i(c.tile.k)},
                        {"cluster_m", i(c.cluster_m)},
                        {"cluster_n", i(c.cluster_n)}});
}

// The ws kernel: CUTLASS's own sm90 conv, through its conv builder, ConvUniversal and ConvUniversalAdapter.
// The persistent kernels: the conv mainloop collective in CUTLASS's persistent GEMM kernel, bridged by
// PersistentConvMainloop (what it bridges is spelled out in the emitted comments), launched through
// GemmUniversalAdapter (which can launch with PDL; ConvUniversalAdapter cannot).
std::string device_types(const Sm90ConvSpec& s) {
  const Sm90ConvSchedule sch = s.config.schedule;
  if (!persistent(sch))
    return fill_template("conv_sm90_ws.cu.in", {{"element", detail::cutlass_elem(s.elem)},
                                                {"tile_types", tile_types(s)},
                                                {"fusion", fusion_op(s.epi, s.elem)},
                                                {"tile_n", i(s.config.tile.n)}});
  return fill_template(
      "conv_sm90_persistent.cu.in",
      {{"element", detail::cutlass_elem(s.elem)},
       {"tile_types", tile_types(s)},
       {"schedule", kernel_template(sch == Sm90ConvSchedule::coop ? "conv_sm90_coop.cu.in" : "conv_sm90_pingpong.cu.in")},
       {"fusion", fusion_op(s.epi, s.elem)}});
}

std::string includes(std::initializer_list<const char*> headers) {
  std::string o;
  for (const char* h : headers) o += std::string("#include \"") + h + "\"\n";
  return o;
}

}  // namespace

bool is_sm90_conv_kernel_name(std::string_view name) { return name.starts_with("sm90_conv_"); }

std::string_view sm90_conv_schedule_name(Sm90ConvSchedule s) { return kScheduleNames.at(size_t(s)); }

std::string sm90_conv_kernel_name(const Sm90ConvSpec& s) {
  const Sm90ConvConfig& c = s.config;
  std::string n(kPrefix);
  if (persistent(c.schedule)) {  // ws kernels keep the names they had before the persistent schedules
    n += sm90_conv_schedule_name(c.schedule);
    n += "_";
  }
  n += "nhwc_";
  n += elem_name(s.elem);
  n += "_";
  n += elem_name(s.elem);
  n += "_f32_" + dims(c.tile) + "_c" + i(c.cluster_m) + "x" + i(c.cluster_n) + "_a" + i(c.alignment) + "_";
  n += epilogue_name(s.epi);
  return n;
}

std::optional<Sm90ConvSpec> parse_sm90_conv_kernel_name(std::string_view name) {
  if (!name.starts_with(kPrefix)) return std::nullopt;
  std::string_view rest = name.substr(kPrefix.size());
  Sm90ConvSpec s;
  auto layout = detail::take_token(rest);
  for (Sm90ConvSchedule x : {Sm90ConvSchedule::pingpong, Sm90ConvSchedule::coop})
    if (layout == sm90_conv_schedule_name(x)) s.config.schedule = x, layout = detail::take_token(rest);
  if (layout != "nhwc") return std::nullopt;
  auto e = detail::take_operand_types(rest);
  if (!e) return std::nullopt;
  s.elem = *e;
  auto tile = detail::take_token(rest);
  auto td = tile ? detail::positive_dims(*tile, 3) : std::nullopt;
  if (!td) return std::nullopt;
  s.config.tile = {(*td)[0], (*td)[1], (*td)[2]};
  auto cl = detail::take_token(rest);
  auto cd = cl && cl->starts_with('c') ? detail::positive_dims(cl->substr(1), 2) : std::nullopt;
  if (!cd) return std::nullopt;
  s.config.cluster_m = (*cd)[0], s.config.cluster_n = (*cd)[1];
  auto al = detail::take_token(rest);
  auto av = al && al->starts_with('a') ? detail::positive_int(al->substr(1)) : std::nullopt;
  if (!av) return std::nullopt;
  s.config.alignment = *av;
  auto epi = parse_epilogue(rest);
  if (!epi) return std::nullopt;
  s.epi = *epi;
  if (sm90_conv_kernel_name(s) != name) return std::nullopt;  // one spelling per kernel (no leading zeros)
  return s;
}

std::optional<std::string> sm90_conv_unsupported_reason(const Sm90ConvSpec& s, int target_sm) {
  const Sm90ConvConfig& c = s.config;
  if (target_sm != 90)
    return "sm90 conv kernels (wgmma, TMA im2col) run only on compute capability 9.0 (sm_90a); use the sm80 conv family";
  if (s.elem != Elem::f16 && s.elem != Elem::bf16) return "sm90 conv kernels take f16 or bf16 operands";
  const int bytes = elem_bytes(s.elem);
  if (c.alignment * bytes != 16)
    return "TMA needs 16-byte aligned channel rows: alignment must be " + i(16 / bytes) + " (C and K multiples of it)";
  if (c.tile.m <= 0 || c.tile.n <= 0 || c.tile.k <= 0) return "tile dims must be positive";
  if (c.tile.k * bytes != 128)
    return "tile K must be " + i(128 / bytes) + " channels (128 bytes: one swizzled TMA im2col row, 4 wgmma k-steps)";
  if (c.schedule >= Sm90ConvSchedule::kCount) return "invalid schedule";
  const bool coop = c.schedule == Sm90ConvSchedule::coop;
  if (coop && c.tile.m != 128 && c.tile.m != 256)
    return "tile M must be 128 or 256 for coop: its two consumer warpgroups split M into halves of 64-row wgmma "
           "(CUTLASS's cooperative kernel needs M >= 128)";
  if (!coop && c.tile.m != 64 && c.tile.m != 128)
    return "tile M must be 64 or 128: the one consumer warpgroup of a " + std::string(sm90_conv_schedule_name(c.schedule)) +
           " tile issues 64-row wgmma";
  if (c.tile.n % 16 || c.tile.n < 16 || c.tile.n > 256) return "tile N must be a multiple of 16 in 16..256";
  const int mma_threads = coop ? 256 : 128;
  if (c.tile.m * c.tile.n > mma_threads * 128)
    return "tile " + dims(c.tile) + " needs " + i(c.tile.m * c.tile.n / mma_threads) + " f32 accumulator registers per thread in " +
           (coop ? "two warpgroups" : "one warpgroup") + " (at most 128 without spilling)";
  if (c.cluster_m < 1 || c.cluster_n < 1 || c.cluster_m * c.cluster_n > 2) return "cluster must be 1x1, 2x1 or 1x2";
  if (s.epi.act == Act::kCount || s.epi.residual == Residual::kCount) return "invalid epilogue";
  if (s.epi.residual == Residual::after_act && s.epi.act == Act::none)
    return "a residual after no activation is the residual-before-activation form (one name per kernel)";
  return std::nullopt;
}

std::vector<Sm90ConvConfig> sm90_conv_catalog(Elem elem) {
  std::vector<Sm90ConvConfig> out;
  if (elem != Elem::f16 && elem != Elem::bf16) return out;
  const int bytes = elem_bytes(elem);
  for (const Row& r : kRows) {
    Sm90ConvConfig c;
    c.schedule = r.schedule;
    c.tile = {r.m, r.n, 128 / bytes};
    c.cluster_m = r.cm, c.cluster_n = r.cn;
    c.alignment = 16 / bytes;
    if (sm90_conv_unsupported_reason(Sm90ConvSpec{c, elem, EpilogueSpec{}}, 90))
      throw std::logic_error("invariant: every sm90 conv catalog row passes the static filter");
    out.push_back(c);
  }
  return out;
}

std::vector<std::string> sm90_conv_gencode_flags() { return {"-gencode", "arch=compute_90a,code=sm_90a"}; }

support::KernelSignature sm90_conv_kernel_signature(const Sm90ConvSpec& s) {
  const std::string e(elem_name(s.elem));
  return {"conv", e, e, "nhwc", epilogue_name(s.epi), s.config.alignment, "sm_90a"};
}

std::string emit_sm90_conv_kernel(const Sm90ConvSpec& s, int target_sm, const EmitOptions& opts) {
  if (auto why = sm90_conv_unsupported_reason(s, target_sm))
    throw std::invalid_argument("kernel " + sm90_conv_kernel_name(s) + " cannot run on sm_" + std::to_string(target_sm) +
                                ": " + *why);
  const EpilogueSpec& e = s.epi;
  const bool res = e.residual != Residual::none;
  const bool pers = persistent(s.config.schedule);
  const std::string n = sm90_conv_kernel_name(s);
  const std::string c_ptr = res ? "static_cast<const Element*>(p->residual)" : "nullptr";
  const detail::EntryPoints entry{
      .name = n,
      .args_type = "sabre_conv_args",
      .empty = "p->n == 0",
      .op = "Conv",
      .op_name = pers ? "GemmUniversalAdapter" : "ConvUniversalAdapter",
      .refusal_note = " +\n                                         \" (TMA alignment, im2col padding, corner or filter-offset limits)\"",
      .make_args = detail::MakeArgs::status,
      .launch = detail::adapter_launch("Conv", "conv", pers, "  // builds the TMA descriptors"),
      .signature = support::signature_function(n, sm90_conv_kernel_signature(s)),
      .registry = opts.registry ? detail::conv_registry(n) : ""};
  return fill_template(
      "conv_sm90.cu.in",
      {{"name", n},
       {"algebra", detail::conv_algebra(e)},
       {"gencode", detail::joined(sm90_conv_gencode_flags())},
       {"pdl_define", pers ? fill_template("conv_sm90_pdl.cu.in", {}) : ""},
       {"cstdlib", pers ? "#include <cstdlib>\n" : ""},
       {"conv_includes", pers ? includes({"cutlass/conv/collective/collective_builder.hpp", "cutlass/conv/detail.hpp",
                                          "cutlass/conv/dispatch_policy.hpp"})
                              : includes({"cutlass/conv/device/conv_universal_adapter.hpp",
                                          "cutlass/conv/kernel/conv_universal.hpp",
                                          "cutlass/conv/collective/collective_builder.hpp",
                                          "cutlass/conv/dispatch_policy.hpp"})},
       {"gemm_includes", pers ? includes({"cutlass/gemm/device/gemm_universal_adapter.h", "cutlass/gemm/dispatch_policy.hpp",
                                          "cutlass/gemm/kernel/gemm_universal.hpp", "cutlass/gemm/kernel/tile_scheduler.hpp"})
                              : ""},
       {"device_code", device_types(s)},
       {"error_plumbing", detail::host_error_plumbing()},
       {"pdl_switch", pers ? detail::pdl_switch() : ""},
       {"has_bias", e.bias ? "true" : "false"},
       {"has_residual", res ? "true" : "false"},
       {"shape_checks", detail::conv_refuse_shape_checks()},
       // The persistent grid is at most one CTA per SM whatever the tile count; ws launches one per tile.
       {"grid_check",
        pers ? "" : "  if ((p->k + kTileN - 1) / kTileN > 65535) return \"k (output channels) needs more than 65535 CTA columns\";\n"},
       {"pointer_checks", detail::conv_refuse_pointer_checks()},
       {"hardware_info", pers ? fill_template("conv_sm90_hardware_info.cu.in", {}) : ""},
       {"problem_type", pers ? "ConvProblem" : "ProblemShape"},
       {"arguments", fill_template(pers ? "conv_sm90_args_persistent.cu.in" : "conv_sm90_args_ws.cu.in", {{"c_ptr", c_ptr}})},
       {"epilogue_arguments", detail::sm90_epilogue_arguments(e, "Element")},
       {"entry_points", detail::entry_points(entry)}});
}

}  // namespace sabre::cutlass_backend
