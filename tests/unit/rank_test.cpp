// The analytic model and kernel selection (src/tune/rank.h, src/tune/select.h): sensible tiles for
// big and small problems, no statically unsupported or misaligned kernel, determinism, M buckets
// and dispatch tables, DB winners over the model, and workload collection from a partitioned model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <filesystem>
#include <tuple>

#include "backends/cutlass/conv_sm90.h"
#include "backends/cutlass/conv_spec.h"
#include "backends/cutlass/kernel_spec.h"
#include "backends/cutlass/patterns.h"
#include "frontend/onnx/importer.h"
#include "partition/partitioner.h"
#include "transform/canonicalize.h"
#include "tune/rank.h"
#include "tune/select.h"

using namespace sabre::tune;
namespace cb = sabre::cutlass_backend;

namespace {

GemmProblem problem(const std::string& dtype, int64_t n, int64_t k, int64_t m, const std::string& epi = "bias") {
  GemmProblem p;
  p.dtype = dtype;
  p.layout = "tn";
  p.epilogue = epi;
  p.n = n;
  p.k = k;
  p.m_min = p.m_max = m;
  p.alignment = dtype == "f32" ? 4 : 8;
  return p;
}

Environment h200() { return {"NVIDIA H200", 90, "13.0", "4.2.0", "1"}; }

}  // namespace

TEST(Rank, BigSquareGemmGetsBigTilesOnSm90) {
  for (const char* dt : {"f16", "bf16"}) {
    auto r = rank_candidates(problem(dt, 4096, 4096, 4096), 4096, 90);
    ASSERT_FALSE(r.empty());
    const cb::KernelConfig& c = r[0].spec.config;
    EXPECT_EQ(c.family, cb::Family::sm90) << r[0].name;
    EXPECT_GE(c.tile.m * c.tile.n, 128 * 256) << r[0].name;
    // Predicted time is in the right decade: 137 GFLOP at ~800 TFLOP/s is ~170 us.
    EXPECT_GT(r[0].predicted_us, 120);
    EXPECT_LT(r[0].predicted_us, 260);
  }
}

TEST(Rank, SmallProblemGetsSmallTilesOrStreamK) {
  auto r = rank_candidates(problem("f16", 768, 768, 128), 128, 90);
  ASSERT_FALSE(r.empty());
  const cb::KernelConfig& c = r[0].spec.config;
  EXPECT_TRUE(c.tile.m * c.tile.n <= 128 * 64 || c.schedule == cb::Schedule::streamk ||
              c.schedule == cb::Schedule::splitk)
      << r[0].name;
  // The big-tile kernel that wins 4096^3 leaves most SMs idle here: it must rank below the pick.
  auto big = rank_candidates(problem("f16", 4096, 4096, 4096), 4096, 90)[0];
  for (const Candidate& x : r)
    if (x.name == big.name) {
      EXPECT_GT(x.predicted_us, r[0].predicted_us);
    }
}

TEST(Rank, NeverOffersUnsupportedOrMisalignedKernels) {
  for (const char* dt : {"f16", "bf16", "f32"})
    for (const char* layout : {"tn", "tt"})
      for (int align : {1, 2, 4, 8})
        for (const char* epi : {"linear", "bias_gelu", "bias_res_relu", "gelu_res"}) {
          GemmProblem p = problem(dt, 768, 3072, 1000, epi);
          p.layout = layout;
          p.alignment = align;
          for (int sm : {80, 90})
            for (const Candidate& c : rank_candidates(p, 1000, sm)) {
              EXPECT_FALSE(cb::unsupported_reason(c.spec, sm)) << c.name;
              EXPECT_EQ(align % c.spec.config.alignment, 0) << c.name << " on alignment " << align;
              EXPECT_EQ(c.name, cb::kernel_name(c.spec));
              EXPECT_EQ(cb::epilogue_name(c.spec.epi), epi);
              EXPECT_TRUE(split_k_offered(c.spec.config, {1000, 768, 3072, 1}, GpuModel::for_sm(sm))) << c.name;
            }
        }
}

// Split-K is for few tiles and long K: offered where the data-parallel grid leaves most SMs idle,
// all its CTAs fit in one wave and every split keeps 2+ k-iterations; never for big problems.
TEST(Rank, SplitKIsOfferedForSmallMAndLongKOnly) {
  const GpuModel g = GpuModel::for_sm(90);
  auto cfg = [](const char* name) { return cb::parse_kernel_name(name)->config; };
  const auto sk2 = cfg("sm90_ws_splitk2_tn_f16_f16_f32_128x64x64_c1x1_a8_bias");
  const auto sk4 = cfg("sm90_ws_splitk4_tn_f16_f16_f32_128x64x64_c1x1_a8_bias");
  const auto sk8 = cfg("sm90_ws_splitk8_tn_f16_f16_f32_128x64x64_c1x1_a8_bias");
  EXPECT_TRUE(split_k_offered(sk8, {16, 768, 3072, 1}, g));    // 12 tiles x 8 = 96 CTAs, 6 k-iterations each
  EXPECT_TRUE(split_k_offered(sk4, {128, 768, 512, 1}, g));    // 8 k-iterations: 2 per split
  EXPECT_FALSE(split_k_offered(sk8, {128, 768, 512, 1}, g));   // 1 per split
  EXPECT_FALSE(split_k_offered(sk2, {1024, 768, 3072, 1}, g)); // 96 tiles: the grid fills the GPU already
  EXPECT_TRUE(split_k_offered(sk2, {16, 3072, 768, 1}, g));    // 48 tiles x 2 = 96 CTAs
  EXPECT_FALSE(split_k_offered(sk4, {16, 3072, 768, 1}, g));   // 192 CTAs: a second wave
  EXPECT_FALSE(split_k_offered(sk2, {16, 768, 768, 8}, g));    // the batch counts as tiles: 96
  EXPECT_TRUE(split_k_offered(cfg("sm90_ws_coop_tn_f16_f16_f32_128x64x64_c1x1_a8_bias"), {1, 8, 64, 1}, g));

  // Each split-K pass hands a lock on through L2 (GpuModel::lock_handoff_us, measured ~2.7 us on the
  // H200), so splitting pays only where it saves more k-iterations than its passes cost. At
  // m=16 n=768 k=3072 (BERT's FFN down-projection at a short sequence) the H200 ran splitk4 in
  // 17.8 us against about 9 us unsplit, and the model agrees; at k=16384 (256 k-iterations a
  // tile unsplit) a split kernel ranks among the 4 the tuner times and beats the same tile unsplit.
  auto unsplit = *cb::parse_kernel_name("sm90_ws_coop_tn_f16_f16_f32_128x64x64_c1x1_a8_bias_res");
  auto split = *cb::parse_kernel_name("sm90_ws_splitk4_tn_f16_f16_f32_128x64x64_c1x1_a8_bias_res");
  EXPECT_GT(predict_us(split, {16, 768, 3072, 1}, 8, g, 90), predict_us(unsplit, {16, 768, 3072, 1}, 8, g, 90));
  EXPECT_LT(predict_us(split, {16, 768, 16384, 1}, 8, g, 90), predict_us(unsplit, {16, 768, 16384, 1}, 8, g, 90));
  GemmProblem deep = problem("f16", 768, 16384, 16, "bias_res");
  auto r = rank_candidates(deep, 16, 90);
  bool split_in_top = false;
  for (size_t i = 0; i < 4 && i < r.size(); ++i) split_in_top |= cb::is_split_k(r[i].spec.config.schedule);
  EXPECT_TRUE(split_in_top) << r[0].name;
  // The reduction is a chain of passes: at short K more splits cost more than they save.
  auto split8 = *cb::parse_kernel_name("sm90_ws_splitk8_tn_f16_f16_f32_128x64x64_c1x1_a8_bias_res");
  EXPECT_GT(predict_us(split8, {16, 768, 1024, 1}, 8, g, 90), predict_us(split, {16, 768, 1024, 1}, 8, g, 90));

  // Ordinary problems: no split-K candidate at all (at M=1024 the 48 tiles of 128x128 would still
  // leave 84 SMs idle: split in two they are offered).
  for (int64_t m : {2048, 4096})
    for (const Candidate& c : rank_candidates(problem("f16", 768, 3072, m, "bias_res"), m, 90))
      EXPECT_FALSE(cb::is_split_k(c.spec.config.schedule)) << c.name << " at M " << m;
  for (const Candidate& c : rank_candidates(problem("f16", 4096, 4096, 4096), 4096, 90))
    EXPECT_FALSE(cb::is_split_k(c.spec.config.schedule)) << c.name;
}

// The unordered split adds its middle partials at once, so its reduction costs about three passes
// whatever the split count, fewer than the ordered turnstile's one a split.
TEST(Rank, UnorderedSplitKCostsFewerPassesThanOrdered) {
  const GpuModel g = GpuModel::for_sm(90);
  auto ordered = *cb::parse_kernel_name("sm90_ws_splitk8_tn_f16_f16_f32_128x64x64_c1x1_a8_bias_res");
  auto unordered = *cb::parse_kernel_name("sm90_ws_splitku8_tn_f16_f16_f32_128x64x64_c1x1_a8_bias_res");
  EXPECT_LT(predict_us(unordered, {128, 768, 3072, 1}, 8, g, 90), predict_us(ordered, {128, 768, 3072, 1}, 8, g, 90));
  auto u2 = *cb::parse_kernel_name("sm90_ws_splitku2_tn_f16_f16_f32_128x64x64_c1x1_a8_bias_res");
  auto o2 = *cb::parse_kernel_name("sm90_ws_splitk2_tn_f16_f16_f32_128x64x64_c1x1_a8_bias_res");
  EXPECT_DOUBLE_EQ(predict_us(u2, {128, 768, 3072, 1}, 8, g, 90), predict_us(o2, {128, 768, 3072, 1}, 8, g, 90))
      << "two splits: a store and a load either way";
}

// Where the bandwidth floor decides (a 64-channel reduction with a residual: ResNet-50's first
// 1x1 convs at batch 32; its stem GEMM over 152 columns), every candidate predicts the floor; the
// tie goes to the kernel with the most slack under it, not to the name order (which put the sm80
// kernels first), and the first sm80 one ranks below every sm90 one at the floor.
TEST(Rank, TiesAtTheBandwidthFloorGoToTheMostSlack) {
  for (auto [m, n, k, epi] : {std::tuple<int64_t, int64_t, int64_t, const char*>{100352, 256, 64, "bias_res_relu"},
                              {401408, 64, 152, "bias_relu"}}) {
    auto r = rank_candidates(problem("f16", n, k, m, epi), m, 90);
    ASSERT_GE(r.size(), 2u);
    EXPECT_DOUBLE_EQ(r[0].predicted_us, r[1].predicted_us) << "not a floor-bound problem any more: " << m;
    EXPECT_EQ(r[0].spec.config.family, cb::Family::sm90) << r[0].name;
    for (size_t i = 1; i < r.size(); ++i)
      if (r[i].predicted_us == r[0].predicted_us) EXPECT_LE(r[i - 1].compute_us, r[i].compute_us) << r[i].name;
  }
}

// At mid-size M the power-of-two tiles quantize badly on 132 SMs (1024x2304 in 128x128 tiles is
// 144 tiles, 1.09 waves); tiles with N = 96 or 192 fill one wave. The H200 ran the old picks 1.2-1.4x
// slower than cuBLASLt there (bench/results/gemm_tune_h200_2026-12-02.txt).
TEST(Rank, MidSizeMTakesTilesThatFillOneWave) {
  struct Case {
    int64_t m, n, k;
    int tile_m, tile_n;
  };
  // 96 tiles of 128x192; 128 tiles of 128x192 (1024x3072 and 4096x768 at both K)
  for (const Case& c : {Case{1024, 2304, 768, 128, 192}, Case{1024, 3072, 768, 128, 192}, Case{4096, 768, 768, 128, 192},
                        Case{4096, 768, 3072, 128, 192}, Case{2048, 768, 768, 128, 96}}) {
    auto r = rank_candidates(problem("f16", c.n, c.k, c.m), c.m, 90, 4);
    ASSERT_FALSE(r.empty());
    EXPECT_EQ(r[0].spec.config.tile.m, c.tile_m) << r[0].name << " at " << c.m << "x" << c.n << "x" << c.k;
    EXPECT_EQ(r[0].spec.config.tile.n, c.tile_n) << r[0].name << " at " << c.m << "x" << c.n << "x" << c.k;
  }
  // 1024x768: 64x96 tiles make 128 (64x128 ones 96); the model rates them even, so the tuner times both.
  auto r = rank_candidates(problem("f16", 768, 768, 1024), 1024, 90, 4);
  bool n96 = false;
  for (const Candidate& c : r) n96 |= c.spec.config.tile.m == 64 && c.spec.config.tile.n == 96;
  EXPECT_TRUE(n96) << r[0].name;
  // Both 128x192 schedules are timed where that tile fills one wave: the pingpong one holds 192
  // accumulators a thread, the cooperative one 96.
  r = rank_candidates(problem("f16", 768, 3072, 4096), 4096, 90, 4);
  ASSERT_GE(r.size(), 2u);
  EXPECT_EQ(r[0].name, "sm90_ws_pingpong_tn_f16_f16_f32_128x192x64_c1x1_a8_bias");
  EXPECT_EQ(r[1].name, "sm90_ws_coop_tn_f16_f16_f32_128x192x64_c1x1_a8_bias");
}

// The 64x32 rows: a 128-row problem with N=768 (BERT-base's two bias+residual GEMMs at batch 1) gets a
// 64x32 tile first (48 tiles, one wave; on the H200 6.78 against 7.58 us for 64x64 at 128x768x3072, and
// 6.04 with the 256-byte K), while N=2304 and 3072 at M=128 keep 64x64 (64x32 would take 144 / 192
// tiles, two waves). A tile with a 256-byte K stands in for its 128-byte twin, which the model rates
// the same: the ranking names one of the two, the longer K.
TEST(Rank, NarrowTileLeadsOnlyWhereItStaysOneWave) {
  const std::string p = "sm90_ws_pingpong_tn_f16_f16_f32_";
  auto has = [](const std::vector<Candidate>& r, const std::string& name) {
    return std::any_of(r.begin(), r.end(), [&](const Candidate& c) { return c.name == name; });
  };
  for (int64_t k : {768, 3072}) {
    auto r = rank_candidates(problem("f16", 768, k, 128, "bias_res"), 128, 90, 4);
    ASSERT_FALSE(r.empty());
    EXPECT_EQ(r[0].spec.config.tile.m, 64) << r[0].name;
    EXPECT_EQ(r[0].spec.config.tile.n, 32) << r[0].name;
    EXPECT_EQ(r[0].name, p + "64x32x128_c1x1_a8_bias_res") << "k=" << k;
    EXPECT_FALSE(has(r, p + "64x32x64_c1x1_a8_bias_res")) << "k=" << k;
    EXPECT_TRUE(has(r, p + "64x64x128_c1x1_a8_bias_res")) << "k=" << k;
  }
  for (int64_t n : {2304, 3072}) {
    auto r = rank_candidates(problem("f16", n, 768, 128), 128, 90, 4);
    ASSERT_FALSE(r.empty());
    EXPECT_EQ(r[0].spec.config.tile.m, 64) << r[0].name;
    EXPECT_EQ(r[0].spec.config.tile.n, 64) << r[0].name;
    EXPECT_EQ(r[0].name, p + "64x64x128_c1x1_a8_bias") << "n=" << n;
    EXPECT_FALSE(has(r, p + "64x64x64_c1x1_a8_bias")) << "n=" << n;
  }
}

// No ranking names both twins of an sm90 tile (the same but for the tile K), whatever the shape.
TEST(Rank, NamesOneOfEachTilesTwoKs) {
  for (int64_t m : {1, 128, 1024, 4096})
    for (auto [n, k] : {std::pair<int64_t, int64_t>{768, 3072}, {2304, 768}, {768, 768}}) {
      auto r = rank_candidates(problem("f16", n, k, m), m, 90, 0);
      std::set<std::tuple<int, int, int, int, int, int>> seen;
      for (const Candidate& c : r) {
        const auto& g = c.spec.config;
        if (g.family != cb::Family::sm90) continue;
        EXPECT_TRUE(seen.insert({int(g.schedule), g.tile.m, g.tile.n, g.cluster_m, g.cluster_n, g.splits}).second)
            << c.name << " at " << m << "x" << n << "x" << k;
      }
    }
}

// Large problems keep the picks they had before the mid-M tiles: many waves make quantization
// small, and the wider power-of-two tiles feed the tensor cores better.
TEST(Rank, LargeProblemsKeepTheirPowerOfTwoTiles) {
  EXPECT_EQ(rank_candidates(problem("f16", 8192, 8192, 8192), 8192, 90, 1)[0].name,
            "sm90_ws_coop_tn_f16_f16_f32_128x256x64_c1x2_a8_bias");
  EXPECT_EQ(rank_candidates(problem("f16", 4096, 4096, 4096), 4096, 90, 1)[0].name,
            "sm90_ws_coop_tn_f16_f16_f32_128x256x64_c1x2_a8_bias");
  EXPECT_EQ(rank_candidates(problem("f16", 2304, 768, 16384), 16384, 90, 1)[0].name,
            "sm90_ws_pingpong_tn_f16_f16_f32_128x128x64_c1x2_a8_bias");
  EXPECT_EQ(rank_candidates(problem("f16", 11008, 4096, 2048), 2048, 90, 1)[0].name,
            "sm90_ws_pingpong_tn_f16_f16_f32_128x128x64_c1x2_a8_bias");
}

// Stream-K pays a fixed cost (GpuModel::streamk_fixed_us): on the H200 the 128x128 stream-K kernels
// the model ranked first at 1024x768x3072 and 1024x2304x768 ran 19.6-20.2 and 17.7 us against 12.6 and
// 12.2 us for the 64x128 pingpong kernel.
TEST(Rank, StreamKDoesNotWinMidSizeProblems) {
  for (auto [n, k] : {std::pair<int64_t, int64_t>{768, 3072}, {2304, 768}, {3072, 768}, {768, 768}}) {
    auto r = rank_candidates(problem("f16", n, k, 1024), 1024, 90, 1);
    ASSERT_FALSE(r.empty());
    EXPECT_NE(r[0].spec.config.schedule, cb::Schedule::streamk) << r[0].name << " at n=" << n << " k=" << k;
  }
  const GpuModel g = GpuModel::for_sm(90);
  auto sk = *cb::parse_kernel_name("sm90_ws_streamk_tn_f16_f16_f32_128x128x64_c1x1_a8_bias");
  auto pp = *cb::parse_kernel_name("sm90_ws_pingpong_tn_f16_f16_f32_64x128x64_c1x2_a8_bias");
  EXPECT_GT(predict_us(sk, {1024, 768, 3072, 1}, 8, g, 90), predict_us(pp, {1024, 768, 3072, 1}, 8, g, 90));
}

TEST(Rank, UnalignedProblemFallsBackToNarrowAccessKernels) {
  GemmProblem p = problem("f16", 91, 3, 77);
  p.alignment = 1;
  auto r = rank_candidates(p, 77, 90);
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(r[0].spec.config.alignment, 1);
  EXPECT_EQ(r[0].spec.config.family, cb::Family::sm80);
}

TEST(Rank, IsDeterministicAndSorted) {
  GemmProblem p = problem("bf16", 2304, 768, 1024, "bias_gelu");
  auto a = rank_candidates(p, 1024, 90), b = rank_candidates(p, 1024, 90);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_GT(a.size(), 10u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    if (i) {
      EXPECT_LE(a[i - 1].predicted_us, a[i].predicted_us);
    }
  }
  EXPECT_EQ(rank_candidates(p, 1024, 90, 3).size(), 3u);
}

TEST(Rank, MoreWorkTakesLongerForTheSameKernel) {
  auto k = rank_candidates(problem("f16", 768, 768, 1024), 1024, 90)[0].spec;
  const GpuModel g = GpuModel::for_sm(90);
  double prev = 0;
  for (int64_t m : {128, 1024, 4096, 16384}) {
    double t = predict_us(k, {m, 768, 768, 1}, 8, g, 90);
    EXPECT_GE(t, prev) << m;
    prev = t;
  }
  // An alignment the kernel needs but the problem lacks: cannot run.
  EXPECT_TRUE(std::isinf(predict_us(k, {128, 768, 768, 1}, 2, g, 90)));
}

TEST(Rank, BadProblemsAreClearErrors) {
  EXPECT_THROW(rank_candidates(problem("i8", 768, 768, 128), 128, 90), std::invalid_argument);
  EXPECT_THROW(rank_candidates(problem("f16", 768, 768, 128, "bias_wobble"), 128, 90), std::invalid_argument);
  GemmProblem p = problem("f16", 768, 768, 128);
  p.layout = "nn";
  EXPECT_THROW(rank_candidates(p, 128, 90), std::invalid_argument);
}

TEST(Select, BucketsArePowersOfTwoUpToTheMaximum) {
  EXPECT_EQ(m_buckets(1, 1), (std::vector<int64_t>{1}));
  EXPECT_EQ(m_buckets(1, 384), (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 128, 256, 384}));
  EXPECT_EQ(m_buckets(100, 512), (std::vector<int64_t>{128, 256, 512}));
  EXPECT_EQ(m_buckets(4096, 4096), (std::vector<int64_t>{4096}));
  EXPECT_THROW(m_buckets(0, 4), std::invalid_argument);
  EXPECT_THROW(m_buckets(8, 4), std::invalid_argument);
}

TEST(Select, AnalyticDispatchCoversTheRangeAndMergesEqualPicks) {
  GemmProblem p = problem("f16", 3072, 768, 1, "bias_gelu");
  p.m_min = 1;
  p.m_max = 16384;
  auto d = pick_kernels(p, PickOptions{});
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(d.back().max_m, 16384);
  for (size_t i = 0; i < d.size(); ++i) {
    EXPECT_TRUE(cb::parse_kernel_name(d[i].kernel)) << d[i].kernel;
    if (i) {
      EXPECT_GT(d[i].max_m, d[i - 1].max_m);
      EXPECT_NE(d[i].kernel, d[i - 1].kernel) << "neighbouring buckets with one kernel must merge";
    }
  }
  // Small and large M should not share a kernel under the model (tile/wave quantization differs).
  EXPECT_GT(d.size(), 1u);
  // Each entry's kernel is the model's pick at that bucket's representative.
  for (const auto& e : d) EXPECT_EQ(e.kernel, rank_candidates(p, e.max_m, 90, 1)[0].name);
  // Static M: one entry.
  auto s = pick_kernels(problem("f16", 768, 768, 128), PickOptions{});
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].max_m, 128);
}

TEST(Select, DatabaseWinnerOverridesTheModelButCublasltDoesNot) {
  TuningDb db(":memory:");
  GemmProblem p = problem("f16", 768, 768, 1024);
  const std::string w = workload_key(p, 1024);
  EXPECT_EQ(w, "gemm f16 tn bias m=1024 n=768 k=768 b=1 a=8");
  auto ranked = rank_candidates(p, 1024, 90);
  ASSERT_GT(ranked.size(), 5u);
  const std::string fifth = ranked[4].name;
  db.record(h200(), {w, ranked[0].name, Status::ok, 30.0, 1e-4, ""});
  db.record(h200(), {w, fifth, Status::ok, 20.0, 1e-4, ""});
  db.record(h200(), {w, "cublaslt_tn_f16_f16_f32_bias#algo0", Status::ok, 10.0, 1e-4, ""});
  db.record(h200(), {w, ranked[1].name, Status::wrong_result, 5.0, 1, "bad"});
  PickOptions o;
  o.db = &db;
  o.env = h200();
  auto d = pick_kernels(p, o);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].kernel, fifth);
  // Another environment's measurements do not count.
  o.env.gpu = "NVIDIA A100";
  EXPECT_EQ(pick_kernels(p, o)[0].kernel, ranked[0].name);
}

TEST(Select, CublasltWinnerDeploysWhereItsAlgorithmIsKnown) {
  TuningDb db(":memory:");
  GemmProblem p = problem("f16", 768, 3072, 1024, "bias_res");
  const std::string w = workload_key(p, 1024);
  const std::string cutlass = rank_candidates(p, 1024, 90)[0].name;
  const std::string lt = "cublaslt_tn_f16_f16_f32_bias_res_algo66_t20_s8_k1_r0_w0_o0_i0_c0";
  db.record(h200(), {w, cutlass, Status::ok, 12.0, 1e-4, ""});
  db.record(h200(), {w, "cublaslt_tn_f16_f16_f32_bias_res#algo0", Status::ok, 10.9, 1e-4, "deploy " + lt});
  db.record(h200(), {w, "cublaslt_tn_f16_f16_f32_bias_res#algo1", Status::ok, 10.0, 1e-4, ""});  // no algorithm kept
  PickOptions o;
  o.db = &db;
  o.env = h200();
  auto d = pick_kernels(p, o);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].kernel, lt);
  o.cublaslt = false;  // sabre compile --no-cublaslt
  EXPECT_EQ(pick_kernels(p, o)[0].kernel, cutlass);
}

TEST(Select, BertTinyWorkloadsAreCollectedOncePerShape) {
  std::string path;
  for (const std::string& dir : {std::string(SABRE_SOURCE_DIR) + "/models", std::string(SABRE_BINARY_DIR) + "/models"})
    if (std::filesystem::exists(dir + "/bert_tiny.onnx")) path = dir + "/bert_tiny.onnx";
  ASSERT_FALSE(path.empty()) << "models/bert_tiny.onnx is bundled with the source tree";
  sabre::ir::Graph g = sabre::transform::canonicalize(sabre::onnx_frontend::import_model(path));
  auto r = sabre::partition::partition(std::move(g), sabre::cutlass_backend::pattern_table());
  auto probs = gemm_problems(r.graph, 4096);
  ASSERT_FALSE(probs.empty());
  int composites = 0;
  for (const auto* n : r.graph.nodes())
    if (n->op() == "Composite" && n->attr_string("kind", "") == "gemm") ++composites;
  // Layers repeat: far fewer unique workloads than GEMM regions, and no duplicates.
  EXPECT_LT(int(probs.size()), composites);
  for (size_t i = 0; i < probs.size(); ++i) {
    for (size_t j = 0; j < i; ++j) EXPECT_FALSE(probs[i] == probs[j]);
    EXPECT_GT(probs[i].n, 0);
    EXPECT_GT(probs[i].k, 0);
    EXPECT_GE(probs[i].m_max, probs[i].m_min);
    EXPECT_TRUE(cb::parse_epilogue(probs[i].epilogue)) << probs[i].epilogue;
    EXPECT_FALSE(pick_kernels(probs[i], PickOptions{}).empty());
  }
  // Declared dim ranges bound a symbolic M: batch*seq over [1*1, 4*64].
  auto ranged = gemm_problems(r.graph, 4096, {{"batch", {1, 4}}, {"seq", {1, 64}}});
  bool saw_range = false;
  for (const auto& p : ranged) {
    EXPECT_LE(p.m_max, 256) << workload_key(p, p.m_max);
    saw_range = saw_range || p.m_max == 256;
  }
  EXPECT_TRUE(saw_range);
  // The FFN's first GEMM is fused with its GELU.
  bool gelu = false;
  for (const auto& p : probs) gelu = gelu || p.epilogue.find("gelu") != std::string::npos;
  EXPECT_TRUE(gelu);
}

// The sm90 conv schedules on the GEMM model: pingpong as pingpong (its epilogue under the other
// warpgroup's mainloop, so less grid time than ws of the same tile), coop and the non-persistent ws
// as coop (the same prediction for the same tile), and at that tie the persistent kernel first.
// ResNet-50's layer1 3x3 at batch 32 (M = 100352, N = 64, K = 576), the layer the ws kernels ran at a
// third of its rate on the H200, gets a persistent kernel first. (There every candidate predicts the
// HBM floor, which counts A as the M x K im2col matrix, so the grid time, compute_us, decides.)
TEST(Rank, ConvSm90SchedulesMapOntoTheGemmModel) {
  ConvProblem p;
  p.dtype = "f16";
  p.epilogue = "bias_relu";
  p.n = 32, p.h = p.w = p.p = p.q = 56, p.c = p.k = 64, p.r = p.s = 3, p.pad_h = p.pad_w = 1;
  p.alignment = 8;
  const auto r = rank_conv_candidates(p, 90, ConvKernels::sm90);
  std::map<std::string, size_t> at;
  std::map<std::string, double> us, grid_us;
  std::set<cb::Sm90ConvSchedule> schedules;
  for (size_t i = 0; i < r.size(); ++i) {
    auto s = cb::parse_sm90_conv_kernel_name(r[i].name);
    ASSERT_TRUE(s) << r[i].name;
    schedules.insert(s->config.schedule);
    at[r[i].name] = i, us[r[i].name] = r[i].predicted_us, grid_us[r[i].name] = r[i].compute_us;
  }
  EXPECT_EQ(schedules.size(), 3u);
  EXPECT_EQ(r.size(), cb::sm90_conv_catalog(cb::Elem::f16).size());
  auto first = cb::parse_sm90_conv_kernel_name(r[0].name);
  EXPECT_NE(first->config.schedule, cb::Sm90ConvSchedule::ws) << r[0].name;

  const std::string ws = "sm90_conv_fprop_nhwc_f16_f16_f32_128x128x64_c1x1_a8_bias_relu";
  const std::string coop = "sm90_conv_fprop_coop_nhwc_f16_f16_f32_128x128x64_c1x1_a8_bias_relu";
  const std::string pp = "sm90_conv_fprop_pingpong_nhwc_f16_f16_f32_128x128x64_c1x1_a8_bias_relu";
  ASSERT_TRUE(at.count(ws) && at.count(coop) && at.count(pp));
  EXPECT_EQ(us[ws], us[coop]);
  EXPECT_EQ(grid_us[ws], grid_us[coop]);
  EXPECT_LT(at[coop], at[ws]);
  EXPECT_LE(us[pp], us[ws]);
  EXPECT_LT(grid_us[pp], grid_us[ws]);
  EXPECT_LT(at[pp], at[ws]);
  const std::string ws64 = "sm90_conv_fprop_nhwc_f16_f16_f32_128x64x64_c1x1_a8_bias_relu";
  const std::string pp64 = "sm90_conv_fprop_pingpong_nhwc_f16_f16_f32_128x64x64_c1x1_a8_bias_relu";
  EXPECT_LE(us[pp64], us[ws64]);
  EXPECT_LT(grid_us[pp64], grid_us[ws64]);
  EXPECT_LT(at[pp64], at[ws64]);
  // The automatic families rank the persistent kernels among the sm80 ones, deterministically.
  const auto all = rank_conv_candidates(p, 90, ConvKernels::automatic);
  EXPECT_TRUE(std::any_of(all.begin(), all.end(), [&](const ConvCandidate& c) { return c.name == pp64; }));
  const auto again = rank_conv_candidates(p, 90, ConvKernels::automatic);
  ASSERT_EQ(all.size(), again.size());
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].name, again[i].name);
  // Never on sm 80.
  for (const auto& c : rank_conv_candidates(p, 80, ConvKernels::automatic))
    EXPECT_FALSE(cb::is_sm90_conv_kernel_name(c.name)) << c.name;
}

namespace {

// ResNet's RGB stem as sabre compile lowers it with --stem conv: 224x224 images, C padded 3 -> 8,
// 7x7 stride 2 pad 3 to 64 channels (P = Q = 112), bias and relu.
ConvProblem padded_stem(int64_t batch) {
  ConvProblem p;
  p.dtype = "f16";
  p.epilogue = "bias_relu";
  p.n = batch, p.h = p.w = 224, p.c = 8, p.k = 64, p.r = p.s = 7, p.p = p.q = 112;
  p.pad_h = p.pad_w = 3, p.stride_h = p.stride_w = 2;
  p.alignment = 8;
  return p;
}

bool few_channels(const std::string& name) {
  auto s = cb::parse_conv_kernel_name(name);
  return s && s->config.iter == cb::ConvIter::few_channels;
}

}  // namespace

// The padded stem (C = 8): the optimized iterator walks C in 32-wide k-tiles at each of the 49
// taps (K = 1568, three quarters masked), few_channels packs K = 7·7·8 = 392, so the model ranks a
// few_channels kernel first at batch 32 (M = 401408) and at batch 1 (M = 12544), on sm 90 (against
// the sm90 family's K padded to 64 channels too) and sm 80, in both dtypes. Its prediction beats the
// optimized kernel of the same tile by the ratio of the walked K (4) over the slowdown the H200
// measured for its per-access gathers (GpuModel::few_channels_slowdown): 204.5 us against 270 there.
TEST(Rank, PaddedStemRanksFewChannelsFirst) {
  for (int64_t batch : {1, 32})
    for (int sm : {80, 90})
      for (const char* dt : {"f16", "bf16"}) {
        ConvProblem p = padded_stem(batch);
        p.dtype = dt;
        const auto r = rank_conv_candidates(p, sm, ConvKernels::automatic);
        ASSERT_FALSE(r.empty());
        EXPECT_TRUE(few_channels(r.front().name)) << "batch " << batch << " sm" << sm << " " << dt << ": " << r.front().name;
      }
  const auto r = rank_conv_candidates(padded_stem(32), 90, ConvKernels::sm80);
  std::map<std::string, double> us;
  for (const auto& c : r) us[c.name] = c.predicted_us;
  const std::string few = "sm80_conv_fprop_few_channels_nhwc_f16_f16_f32_128x64x32_w64x32x32_s4_a8_bias_relu";
  const std::string opt = "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x64x32_w64x32x32_s4_a8_bias_relu";
  ASSERT_TRUE(us.count(few) && us.count(opt));
  EXPECT_GT(us[opt], 1.2 * us[few]) << us[opt] << " vs " << us[few];
  EXPECT_LT(us[opt], 1.6 * us[few]) << us[opt] << " vs " << us[few];
}

// Ordinary convs (C >= 32, and C = 24 past the few_channels limit) are never offered few_channels;
// C = 16 is, and C = 8 after a pool (an NHWC conv, not the stem) too; at this small 3x3 (K = 72 or
// 144 walked as 288) the few_channels gathers (GpuModel::few_channels_slowdown) cost more than the
// optimized iterator's masked k-tiles, so an optimized kernel leads there.
TEST(Rank, FewChannelsOnlyForSmallC) {
  ConvProblem p;
  p.dtype = "f16";
  p.epilogue = "bias_relu";
  p.n = 8, p.h = p.w = p.p = p.q = 56, p.r = p.s = 3, p.pad_h = p.pad_w = 1, p.k = 64;
  p.alignment = 8;
  for (int64_t c : {24, 32, 64, 256, 512}) {
    p.c = c;
    for (int sm : {80, 90})
      for (const auto& cand : rank_conv_candidates(p, sm, ConvKernels::automatic))
        EXPECT_FALSE(few_channels(cand.name)) << "C=" << c << ": " << cand.name;
  }
  for (int64_t c : {8, 16}) {
    p.c = c;
    const auto r = rank_conv_candidates(p, 90, ConvKernels::automatic);
    EXPECT_TRUE(std::any_of(r.begin(), r.end(), [](const ConvCandidate& x) { return few_channels(x.name); })) << "C=" << c;
    EXPECT_FALSE(few_channels(r.front().name)) << "C=" << c << ": " << r.front().name;
  }
  // An unaligned C (3, as a conv on an NHWC input keeps it) has only the alignment-1 analytic kernels.
  p.c = 3;
  p.alignment = 1;
  const auto unaligned = rank_conv_candidates(p, 90, ConvKernels::automatic);
  ASSERT_FALSE(unaligned.empty()) << "C=3 has the analytic kernels";
  for (const auto& cand : unaligned) EXPECT_FALSE(few_channels(cand.name)) << cand.name;
}

namespace {

// ResNet-50's last 3x3 layer (7x7x512 -> 512, bias + relu) at `batch`.
ConvProblem deep3x3(int64_t batch) {
  ConvProblem p;
  p.dtype = "f16";
  p.epilogue = "bias_relu";
  p.n = batch, p.h = p.w = p.p = p.q = 7, p.c = p.k = 512, p.r = p.s = 3, p.pad_h = p.pad_w = 1;
  p.alignment = 8;
  return p;
}

std::optional<cb::ConvSpec> sm80_spec(const std::string& name) { return cb::parse_conv_kernel_name(name); }

}  // namespace

// At batch 1 the 3x3 layers' output tiles fill a few SMs and each CTA walks 36-72 k-tiles at the
// latency-bound rate (GpuModel::conv_cta_iter_us): parallel split-K ranks first, as the H200 measured
// (splitkp16 6.5 us against 12.9 for the sm90 pingpong). Parallel split-K is offered for epilogues
// serial split-K refuses (no bias), and not where the tiles fill the GPU (28x28 at batch 32).
TEST(Rank, ParallelSplitKLeadsWhereFewTilesWalkADeepReduction) {
  const GpuModel gpu = GpuModel::for_sm(90);
  for (const char* epi : {"bias_relu", "relu", "bias_relu_res"}) {
    ConvProblem p = deep3x3(1);
    p.epilogue = epi;
    const auto r = rank_conv_candidates(p, 90, ConvKernels::automatic);
    ASSERT_FALSE(r.empty());
    auto first = sm80_spec(r.front().name);
    ASSERT_TRUE(first) << epi << ": " << r.front().name;
    EXPECT_EQ(first->config.split_mode, cb::ConvSplitK::parallel) << epi << ": " << r.front().name;
    EXPECT_GE(first->config.split_k, 8) << r.front().name;
    // Every unsplit candidate is held to its latency floor: one CTA an SM over 72 (sm80, 32 wide) or
    // 72 (sm90, 64 wide over 4608 padded) k-tiles.
    for (const auto& c : r) {
      auto s80 = sm80_spec(c.name);
      if (s80 && s80->config.split_k == 1) {
        const int64_t k_tiles = 9 * 512 / s80->config.tile.k;
        EXPECT_GE(c.predicted_us, k_tiles * gpu.conv_cta_iter_us + gpu.launch_us - 1e-9) << c.name;
      }
      if (auto s90 = cb::parse_sm90_conv_kernel_name(c.name))
        EXPECT_GE(c.predicted_us, 9 * 512 / s90->config.tile.k * gpu.conv_cta_iter_us + gpu.launch_us - 1e-9) << c.name;
    }
  }
  // ResNet-50's 28x28x128 3x3 layer at batch 32: M = 25088, hundreds of tiles of every size.
  ConvProblem wide = deep3x3(32);
  wide.h = wide.w = wide.p = wide.q = 28, wide.c = wide.k = 128;
  for (const auto& c : rank_conv_candidates(wide, 90, ConvKernels::automatic)) {
    auto s = sm80_spec(c.name);
    EXPECT_FALSE(s && s->config.split_mode == cb::ConvSplitK::parallel) << c.name;
  }
}

// A grouped conv ranks grouped kernels only (tile N inside one group), a dense one never does, and
// a group's narrow GEMM predicts faster than the same conv made dense (regrouped to one group).
TEST(Rank, GroupedConvsRankGroupedKernels) {
  ConvProblem p;
  p.dtype = "f16";
  p.epilogue = "bias_relu";
  p.n = 32, p.h = p.w = p.p = p.q = 56, p.c = p.k = 128, p.r = p.s = 3, p.pad_h = p.pad_w = 1;
  p.groups = 4;  // ResNeXt 32x4d's first stage regrouped: 4 groups of 32
  p.alignment = 8;
  const auto g = rank_conv_candidates(p, 90, ConvKernels::automatic);
  ASSERT_FALSE(g.empty());
  for (const auto& c : g) {
    auto s = cb::parse_conv_kernel_name(c.name);
    ASSERT_TRUE(s) << c.name;
    EXPECT_TRUE(s->config.grouped) << c.name;
    EXPECT_EQ(32 % s->config.tile.n, 0) << c.name;
  }
  ConvProblem dense = p;
  dense.groups = 1;
  const auto d = rank_conv_candidates(dense, 90, ConvKernels::sm80);
  for (const auto& c : d) {
    auto s = cb::parse_conv_kernel_name(c.name);
    ASSERT_TRUE(s) << c.name;
    EXPECT_FALSE(s->config.grouped) << c.name;
  }
  EXPECT_LT(g.front().predicted_us, d.front().predicted_us);
  ConvProblem odd = p;
  odd.groups = 3;
  EXPECT_THROW(rank_conv_candidates(odd, 90, ConvKernels::automatic), std::invalid_argument);
  ConvProblem narrow = p;
  narrow.groups = 32;  // 4 channels a group: no grouped kernel
  EXPECT_THROW(rank_conv_candidates(narrow, 90, ConvKernels::automatic), std::invalid_argument);
}
