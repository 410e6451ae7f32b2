#include "backends/cutlass/conv_spec.h"

#include <array>

#include "backends/cutlass/emit_common.h"

namespace sabre::cutlass_backend {
namespace {

constexpr std::array<std::string_view, size_t(ConvIter::kCount)> kIterNames = {"optimized", "analytic", "few_channels"};
constexpr std::string_view kPrefix = "sm80_conv_fprop_";
constexpr std::string_view kGrouped = "grouped_";

std::string dims(Shape3 s) { return std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k); }

bool is_pow2(int v) { return v > 0 && (v & (v - 1)) == 0; }

std::optional<Shape3> to_dims(std::string_view s) {
  auto d = detail::positive_dims(s, 3);
  if (!d) return std::nullopt;
  return Shape3{(*d)[0], (*d)[1], (*d)[2]};
}

}  // namespace

std::string_view conv_iter_name(ConvIter i) { return kIterNames[size_t(i)]; }

bool is_conv_kernel_name(std::string_view name) { return name.starts_with("sm80_conv_"); }

std::string conv_kernel_name(const ConvSpec& s) {
  const ConvConfig& c = s.config;
  std::string n(kPrefix);
  if (c.grouped) n += kGrouped;
  n += conv_iter_name(c.iter);
  n += "_nhwc_";
  n += elem_name(s.elem);
  n += "_";
  n += elem_name(s.elem);
  n += "_f32_" + dims(c.tile) + "_w" + dims(c.warp) + "_s" + std::to_string(c.stages) + "_a" +
       std::to_string(c.alignment) + "_";
  if (c.split_k > 1)
    n += (c.split_mode == ConvSplitK::parallel ? "splitkp" : "splitk") + std::to_string(c.split_k) + "_";
  n += epilogue_name(s.epi);
  return n;
}

std::optional<ConvSpec> parse_conv_kernel_name(std::string_view name) {
  if (!name.starts_with(kPrefix)) return std::nullopt;
  std::string_view rest = name.substr(kPrefix.size());
  ConvSpec s;
  if (rest.starts_with(kGrouped)) {
    s.config.grouped = true;
    rest.remove_prefix(kGrouped.size());
  }
  // An iterator name may hold '_' (few_channels): match whole names, each followed by '_'.
  bool found = false;
  for (size_t i = 0; i < kIterNames.size() && !found; ++i)
    if (rest.starts_with(kIterNames[i]) && rest.substr(kIterNames[i].size()).starts_with('_')) {
      s.config.iter = ConvIter(i), found = true;
      rest.remove_prefix(kIterNames[i].size() + 1);
    }
  if (!found || detail::take_token(rest) != "nhwc") return std::nullopt;
  auto e = detail::take_operand_types(rest);
  if (!e) return std::nullopt;
  s.elem = *e;
  auto tile = detail::take_token(rest);
  auto td = tile ? to_dims(*tile) : std::nullopt;
  if (!td) return std::nullopt;
  s.config.tile = *td;
  auto w = detail::take_token(rest);
  auto wd = w && w->starts_with('w') ? to_dims(w->substr(1)) : std::nullopt;
  if (!wd) return std::nullopt;
  s.config.warp = *wd;
  auto st = detail::take_token(rest);
  auto sv = st && st->starts_with('s') ? detail::positive_int(st->substr(1)) : std::nullopt;
  if (!sv) return std::nullopt;
  s.config.stages = *sv;
  auto al = detail::take_token(rest);
  auto av = al && al->starts_with('a') ? detail::positive_int(al->substr(1)) : std::nullopt;
  if (!av) return std::nullopt;
  s.config.alignment = *av;
  if (rest.starts_with("splitk")) {
    rest.remove_prefix(6);
    if (rest.starts_with('p')) {
      rest.remove_prefix(1);
      s.config.split_mode = ConvSplitK::parallel;
    }
    auto sk = detail::take_token(rest);
    auto skv = sk ? detail::positive_int(*sk) : std::nullopt;
    if (!skv) return std::nullopt;
    s.config.split_k = *skv;
  }
  auto epi = parse_epilogue(rest);
  if (!epi) return std::nullopt;
  s.epi = *epi;
  if (conv_kernel_name(s) != name) return std::nullopt;  // one spelling per kernel (no leading zeros)
  return s;
}

bool conv_split_k_allowed(const EpilogueSpec& epi) {
  if (epi.residual == Residual::none) return epi.bias;
  return epi.residual == Residual::before_act || epi.act == Act::none;
}

std::optional<std::string> conv_unsupported_reason(const ConvSpec& s, int target_sm) {
  const ConvConfig& c = s.config;
  if (s.elem != Elem::f16 && s.elem != Elem::bf16) return "conv kernels take f16 or bf16 operands";
  const int bytes = elem_bytes(s.elem);
  if (target_sm < 80) return "sm80 conv kernels need compute capability 8.0 or newer";
  if (!is_pow2(c.alignment) || c.alignment * bytes > 16) return "alignment must be a power of two of at most 16 bytes";
  if (c.stages < 2 || c.stages > 7) return "stages must be 2..7";
  if (c.stages > 2 && c.alignment * bytes < 4)
    return "cp.async needs 4-byte accesses: alignment below 4 bytes needs the 2-stage mainloop";
  if (c.iter == ConvIter::optimized && c.alignment * bytes < 4)
    return "alignment below 4 bytes is the analytic iterator's fallback";
  if (c.split_k < 1 || c.split_k > kMaxConvSplitK)
    return "split_k must be 1.." + std::to_string(kMaxConvSplitK);
  // CUTLASS counts a few-channels kernel's k-iterations over all of R·S·C whatever the split
  // (implicit_gemm_k_iterations), so every slice would walk the whole reduction.
  if (c.split_k > 1 && c.iter == ConvIter::few_channels)
    return "few_channels kernels have no split-K: CUTLASS gives each slice all R*S*C k-iterations";
  if (c.split_mode == ConvSplitK::parallel) {
    if (c.split_k < 2) return "parallel split-K needs 2 or more slices";
    if (c.iter != ConvIter::optimized) return "parallel split-K is built on the optimized iterator only";
    if (c.alignment * bytes != 16)
      return "parallel split-K needs 16-byte accesses (its f32 partials are stored and summed 4 at a time)";
  } else if (c.split_k > 1 && !conv_split_k_allowed(s.epi))
    return "split-K needs an epilogue that stays linear until the last slice and reads a source (bias or residual); " +
           epilogue_name(s.epi) + " does not";
  if (c.grouped) {
    // CUTLASS's group fprop: the optimized iterator exists for the single-group mode only, and its
    // default kernel has no broadcast (residual) epilogue and refuses split-K.
    if (c.iter != ConvIter::optimized) return "grouped kernels use the optimized iterator";
    if (c.stages < 3) return "grouped kernels use the multistage (cp.async) mainloop";
    if (c.split_k != 1) return "grouped kernels have no split-K";
    if (s.epi.residual != Residual::none) return "grouped kernels have no residual epilogue";
  }
  if (c.tile.m <= 0 || c.tile.n <= 0 || c.tile.k <= 0) return "tile dims must be positive";
  if (c.warp.k != c.tile.k) return "warp tile K must equal the threadblock tile K";
  if (c.warp.m <= 0 || c.warp.n <= 0 || c.tile.m % c.warp.m || c.tile.n % c.warp.n)
    return "warp tile must divide the threadblock tile";
  const int warps = (c.tile.m / c.warp.m) * (c.tile.n / c.warp.n);
  if (warps != 2 && warps != 4 && warps != 8) return "a threadblock must have 2, 4 or 8 warps";
  if (c.warp.m % 16 || c.warp.n % 8 || c.tile.k % 16) return "warp tile must be a multiple of the 16x8x16 mma";
  KernelConfig g;
  g.tile = c.tile;
  g.stages = c.stages;
  if (sm80_mainloop_smem_bytes(g, s.elem) > max_smem_bytes(target_sm))
    return "mainloop needs " + std::to_string(sm80_mainloop_smem_bytes(g, s.elem) / 1024) +
           " KiB of shared memory, more than the target's " + std::to_string(max_smem_bytes(target_sm) / 1024) + " KiB";
  return std::nullopt;
}

std::optional<std::string> conv_channels_unsupported_reason(const ConvConfig& c, int64_t channels) {
  if (channels < 1 || channels % c.alignment) return "c (input channels) is not a multiple of the kernel's alignment";
  if (c.iter == ConvIter::few_channels && channels > kFewChannelsMaxC)
    return "few_channels kernels are for c <= " + std::to_string(kFewChannelsMaxC) +
           " (one tap's channels per access); wider C runs on the optimized iterator";
  return std::nullopt;
}

std::optional<std::string> conv_group_unsupported_reason(const ConvConfig& c, int64_t groups, int64_t channels,
                                                         int64_t out_channels) {
  if (groups < 1 || channels % groups || out_channels % groups)
    return "groups must divide the input and output channels";
  if (!c.grouped) {
    if (groups != 1) return "groups > 1 needs a grouped kernel";
    return std::nullopt;
  }
  if (groups == 1) return "a dense conv runs on the plain kernels";
  if ((channels / groups) % c.alignment) return "a group's input channels are not a multiple of the kernel's alignment";
  if ((out_channels / groups) % c.tile.n)
    return "a group's output channels are not a multiple of the tile's N (one CTA inside one group)";
  return std::nullopt;
}

namespace {

// Rows for 16-bit operands: iterator, tile, warp tile (K as the tile's), stages, alignment in bytes.
struct ConvRow {
  ConvIter iter;
  int m, n, k, wm, wn, stages, align_bytes;
  bool grouped = false;
};
constexpr ConvRow kConvRows[] = {
    {ConvIter::optimized, 128, 128, 32, 64, 64, 3, 16},  // large K (channels) and N·P·Q
    {ConvIter::optimized, 128, 64, 32, 64, 32, 4, 16},   // K = 64 layers
    {ConvIter::optimized, 64, 64, 32, 32, 32, 4, 16},    // small channel counts, small images
    {ConvIter::optimized, 128, 128, 64, 64, 64, 3, 16},  // deep R·S·C reductions
    // fallbacks for channel counts that are not a multiple of 8
    {ConvIter::analytic, 64, 64, 32, 32, 32, 4, 4},  // even C
    {ConvIter::analytic, 64, 64, 32, 32, 32, 2, 2},  // any C (3): register-pipelined, 1-element accesses
    // The RGB stem padded to 8 channels (7x7: GEMM K = 392, 13 k-tiles of 32; N = K = 64 output
    // channels; M = n·112·112 = 401408 at batch 32, 12544 at batch 1): one tap of 8 channels per
    // 16-byte access. 256x64 and 128x64 for the big batches, 64x64 to fill the SMs at batch 1.
    {ConvIter::few_channels, 256, 64, 32, 64, 32, 3, 16},
    {ConvIter::few_channels, 128, 64, 32, 64, 32, 4, 16},
    {ConvIter::few_channels, 64, 64, 32, 32, 32, 4, 16},
    // Grouped convs, regrouped to groups of 32, 64 or 128 output channels (ResNeXt's 32x4d widths
    // all become groups of 32): N is one group's channels, M the pixels.
    {ConvIter::optimized, 128, 32, 32, 64, 32, 4, 16, true},
    {ConvIter::optimized, 64, 32, 32, 32, 32, 4, 16, true},
    {ConvIter::optimized, 128, 64, 32, 64, 32, 4, 16, true},
    {ConvIter::optimized, 128, 128, 32, 64, 64, 3, 16, true},
};

}  // namespace

std::vector<ConvConfig> conv_catalog(Elem elem, int target_sm) {
  std::vector<ConvConfig> out;
  if (elem != Elem::f16 && elem != Elem::bf16) return out;
  const int bytes = elem_bytes(elem);
  for (const auto& r : kConvRows) {
    ConvConfig c;
    c.iter = r.iter;
    c.tile = {r.m, r.n, r.k};
    c.warp = {r.wm, r.wn, r.k};
    c.stages = r.stages;
    c.alignment = r.align_bytes / bytes;
    c.grouped = r.grouped;
    if (!conv_unsupported_reason(ConvSpec{c, elem, EpilogueSpec{}}, target_sm)) out.push_back(c);
  }
  return out;
}

std::vector<EpilogueSpec> conv_epilogues() {
  std::vector<EpilogueSpec> out;
  // relu6: MobileNetV2's Conv -> Clip(0, 6) after BatchNorm folding.
  for (Act a : {Act::none, Act::relu, Act::silu, Act::hardswish, Act::sigmoid, Act::relu6})
    for (bool bias : {false, true}) out.push_back({a, bias, Residual::none});
  // ResNet blocks: y = relu(conv + bias + x) and the variants with the add before or without relu.
  out.push_back({Act::none, true, Residual::before_act});
  out.push_back({Act::relu, true, Residual::before_act});
  out.push_back({Act::relu, true, Residual::after_act});
  return out;
}

}  // namespace sabre::cutlass_backend
