#include "backends/cutlass/catalog.h"

namespace sabre::cutlass_backend {
namespace {

// sm90 rows: schedule, tile M×N, cluster, split count (split-K rows only), tile K in bytes (128 unless
// the row says 256). The builder picks the stage count.
struct Sm90Row {
  Schedule schedule;
  int m, n, cm, cn;
  int splits = 1;
  int k_bytes = 128;
};
constexpr Sm90Row kSm90[] = {
    // cooperative: two consumer warpgroups split the tile's M
    {Schedule::coop, 128, 64, 1, 1},      {Schedule::coop, 128, 64, 2, 1},      {Schedule::coop, 128, 64, 1, 2},
    {Schedule::coop, 128, 128, 1, 1},     {Schedule::coop, 128, 128, 2, 1},     {Schedule::coop, 128, 128, 1, 2},
    {Schedule::coop, 128, 256, 1, 1},     {Schedule::coop, 128, 256, 2, 1},     {Schedule::coop, 128, 256, 1, 2},
    {Schedule::coop, 256, 64, 1, 1},      {Schedule::coop, 256, 64, 2, 1},      {Schedule::coop, 256, 64, 1, 2},
    {Schedule::coop, 256, 128, 1, 1},     {Schedule::coop, 256, 128, 2, 1},     {Schedule::coop, 256, 128, 1, 2},
    // pingpong: two consumer warpgroups alternate whole tiles (mainloop of one overlaps epilogue of other)
    {Schedule::pingpong, 64, 64, 1, 1},   {Schedule::pingpong, 64, 128, 1, 1},  {Schedule::pingpong, 64, 128, 1, 2},
    {Schedule::pingpong, 64, 256, 1, 1},  {Schedule::pingpong, 64, 256, 2, 1},  {Schedule::pingpong, 128, 64, 1, 1},
    {Schedule::pingpong, 128, 128, 1, 1}, {Schedule::pingpong, 128, 128, 1, 2},
    // Tile N of 96 and 192: wave quantization at mid-size M on 132 SMs, where power-of-two tiles give
    // 1.1-1.5 waves (1024x2304 in 128x128 tiles: 144 tiles). 128x192 gives 1024x2304 96 tiles and
    // 1024x3072, 4096x768 128 (one wave); 64x96 gives 1024x768 128 tiles; 128x96 gives 2048x768 128.
    // The cooperative 128x192 is the same tile with half the accumulators per warpgroup.
    {Schedule::pingpong, 64, 96, 1, 2},   {Schedule::pingpong, 128, 96, 1, 1},  {Schedule::pingpong, 128, 192, 1, 1},
    {Schedule::coop, 128, 192, 1, 1},
    // 64x32: a 128-row problem with N=768 (BERT's projections at batch 1) gets 48 CTAs instead of 24, each
    // loading 96 rows of operands a k-step instead of 128. Of the small tiles tried (64x16, 64x32, 64x48,
    // 64x64, also in 1x2 clusters) only 64x32 beat 64x64 there (bench/results/small_tile_*).
    {Schedule::pingpong, 64, 32, 1, 1},
    // 256-byte K (128 f16 a k-step: half the k-steps and pipeline handoffs) for the small tiles that
    // were faster with it than with the 128-byte K (bench/results/ktile_*); 64x128 c1x2 was not, so it
    // has no such row. The model rates a 256-byte K the same as its 128-byte twin where K is a
    // multiple of 128, and the ranking then keeps it alone (tune/rank.cpp).
    {Schedule::pingpong, 64, 32, 1, 1, 1, 256},  {Schedule::pingpong, 64, 64, 1, 1, 1, 256},
    {Schedule::pingpong, 64, 96, 1, 2, 1, 256},
    // stream-K: cooperative mainloop, K split across CTAs to fill the machine on few tiles
    {Schedule::streamk, 128, 128, 1, 1},  {Schedule::streamk, 128, 256, 1, 1},  {Schedule::streamk, 256, 128, 1, 1},
    {Schedule::streamk, 128, 128, 2, 1},
    // split-K: the stream-K kernel with every tile's K split S ways, for small M (few tiles, long K)
    // where the data-parallel grid leaves most SMs idle. Cooperative tiles only (pingpong has no
    // stream-K scheduler), 1x1 clusters (a small M has no second tile to multicast to); the tuner
    // offers them only to problems with few tiles and long K (tune/rank.h, split_k_offered).
    {Schedule::splitk, 128, 64, 1, 1, 2},   {Schedule::splitk, 128, 64, 1, 1, 4},   {Schedule::splitk, 128, 64, 1, 1, 8},
    {Schedule::splitk, 128, 128, 1, 1, 2},  {Schedule::splitk, 128, 128, 1, 1, 4},  {Schedule::splitk, 128, 128, 1, 1, 8},
    // unordered split-K: the same split with the middle splits adding atomically as they arrive,
    // so a tile's reduction costs about three handoffs whatever the split count (the ordered
    // turnstile costs one a split: GpuModel::lock_handoff_us). The 128x32 tile gives a 128-row problem
    // with N=768 (BERT's projections at batch 1) 24 tiles, 96 CTAs at 4 splits.
    {Schedule::splitku, 128, 32, 1, 1, 4},  {Schedule::splitku, 128, 32, 1, 1, 8},  {Schedule::splitku, 128, 64, 1, 1, 2},
    {Schedule::splitku, 128, 64, 1, 1, 4},  {Schedule::splitku, 128, 64, 1, 1, 8},  {Schedule::splitku, 128, 128, 1, 1, 2},
    {Schedule::splitku, 128, 128, 1, 1, 4},
};

// sm80 rows, written for 16-bit operands: tile, warp tile (K as the tile's), stages, alignment in
// bytes. f32 (TF32) rows halve K so a stage spans the same bytes.
struct Sm80Row {
  int m, n, k, wm, wn, stages, align_bytes;
};
constexpr Sm80Row kSm80[] = {
    {128, 256, 32, 64, 64, 3, 16}, {256, 128, 32, 64, 64, 3, 16}, {128, 128, 32, 64, 64, 4, 16},
    {128, 128, 32, 64, 64, 5, 16}, {128, 128, 64, 64, 64, 3, 16}, {128, 64, 32, 64, 32, 4, 16},
    {64, 128, 32, 32, 64, 4, 16},  {64, 64, 32, 32, 32, 5, 16},   {64, 64, 64, 32, 32, 4, 16},
    {64, 256, 32, 64, 64, 4, 16},  {256, 64, 32, 64, 64, 4, 16},  {128, 256, 64, 64, 64, 3, 16},
    {256, 128, 64, 64, 64, 3, 16},
    // alignment fallbacks: rows not a multiple of 16 bytes (N=91, K=3, ...)
    {128, 128, 32, 64, 64, 4, 8},  {64, 64, 32, 32, 32, 4, 4},
    {128, 128, 32, 64, 64, 2, 2},  {64, 64, 32, 32, 32, 2, 2},  // 2 stages: register-pipelined, any alignment
};

}  // namespace

std::vector<KernelConfig> catalog(Family family, const GemmOperands& ops, int target_sm) {
  std::vector<KernelConfig> out;
  const int bytes = elem_bytes(ops.ab);
  auto keep = [&](const KernelConfig& c) {
    KernelSpec s{c, ops, EpilogueSpec{}};
    if (!unsupported_reason(s, target_sm)) out.push_back(c);
  };
  if (family == Family::sm90) {
    for (const auto& r : kSm90) {
      KernelConfig c;
      c.family = Family::sm90;
      c.schedule = r.schedule;
      c.tile = {r.m, r.n, r.k_bytes / bytes};
      c.cluster_m = r.cm;
      c.cluster_n = r.cn;
      c.alignment = 16 / bytes;
      c.splits = r.splits;
      keep(c);
    }
  } else {
    for (const auto& r : kSm80) {
      if (r.align_bytes < bytes) continue;  // 2-byte fallback rows are the 1-element row for f16 only
      KernelConfig c;
      c.family = Family::sm80;
      c.schedule = Schedule::multistage;
      int k = r.k * 2 / bytes;
      c.tile = {r.m, r.n, k};
      c.warp = {r.wm, r.wn, k};
      c.stages = r.stages;
      c.alignment = r.align_bytes / bytes;
      keep(c);
    }
  }
  return out;
}

std::vector<EpilogueSpec> all_epilogues() {
  std::vector<EpilogueSpec> out;
  for (size_t a = 0; a < size_t(Act::kCount); ++a)
    for (bool bias : {false, true}) out.push_back({Act(a), bias, Residual::none});
  for (Act a : {Act::none, Act::relu, Act::gelu_erf})
    for (bool bias : {false, true}) {
      out.push_back({a, bias, Residual::before_act});
      if (a != Act::none) out.push_back({a, bias, Residual::after_act});
    }
  return out;
}

}  // namespace sabre::cutlass_backend
