// Kernel specs, names and catalogs. The name is the identity: it must round-trip exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "backends/cutlass/catalog.h"
#include "backends/cutlass/kernel_spec.h"

namespace cb = sabre::cutlass_backend;

namespace {

cb::KernelSpec sm90_spec() {
  cb::KernelSpec s;
  s.config.family = cb::Family::sm90;
  s.config.schedule = cb::Schedule::coop;
  s.config.tile = {128, 256, 64};
  s.config.cluster_m = 1;
  s.config.cluster_n = 2;
  s.config.alignment = 8;
  s.ops = {cb::Elem::f16, cb::Elem::f16, cb::Layout::tn};
  s.epi = {cb::Act::gelu_erf, true, cb::Residual::none};
  return s;
}

cb::KernelSpec sm80_spec() {
  cb::KernelSpec s;
  s.config.family = cb::Family::sm80;
  s.config.schedule = cb::Schedule::multistage;
  s.config.tile = {128, 128, 32};
  s.config.warp = {64, 64, 32};
  s.config.stages = 4;
  s.config.alignment = 8;
  s.ops = {cb::Elem::bf16, cb::Elem::bf16, cb::Layout::tt};
  s.epi = {cb::Act::relu, true, cb::Residual::after_act};
  return s;
}

}  // namespace

TEST(KernelSpec, NamesSayWhatTheKernelIs) {
  EXPECT_EQ(cb::kernel_name(sm90_spec()), "sm90_ws_coop_tn_f16_f16_f32_128x256x64_c1x2_a8_bias_gelu");
  EXPECT_EQ(cb::kernel_name(sm80_spec()), "sm80_tc_tt_bf16_bf16_f32_128x128x32_w64x64x32_s4_a8_bias_relu_res");
  auto sk = sm90_spec();
  sk.config.schedule = cb::Schedule::splitk;
  sk.config.splits = 4;
  sk.config.tile.n = 64;
  sk.config.cluster_n = 1;
  sk.epi = {cb::Act::none, true, cb::Residual::before_act};
  EXPECT_EQ(cb::kernel_name(sk), "sm90_ws_splitk4_tn_f16_f16_f32_128x64x64_c1x1_a8_bias_res");
  auto parsed = cb::parse_kernel_name("sm90_ws_splitk8_tn_bf16_bf16_f32_128x128x64_c1x1_a8_bias_gelu");
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->config.schedule, cb::Schedule::splitk);
  EXPECT_EQ(parsed->config.splits, 8);
  EXPECT_EQ(cb::parse_kernel_name(cb::kernel_name(sm90_spec()))->config.splits, 1);
  // The unordered split is another kernel; its name must not parse as the ordered one.
  sk.config.schedule = cb::Schedule::splitku;
  sk.config.tile.n = 32;
  EXPECT_EQ(cb::kernel_name(sk), "sm90_ws_splitku4_tn_f16_f16_f32_128x32x64_c1x1_a8_bias_res");
  auto pu = cb::parse_kernel_name(cb::kernel_name(sk));
  ASSERT_TRUE(pu.has_value());
  EXPECT_EQ(*pu, sk);
  EXPECT_EQ(cb::parse_kernel_name("sm90_ws_splitk4_tn_f16_f16_f32_128x32x64_c1x1_a8_bias_res")->config.schedule,
            cb::Schedule::splitk);
  for (const char* bad : {"sm90_ws_splitku_tn_f16_f16_f32_128x32x64_c1x1_a8_bias", "sm90_ws_splitku1_tn_f16_f16_f32_128x32x64_c1x1_a8_bias",
                          "sm90_ws_splitkux4_tn_f16_f16_f32_128x32x64_c1x1_a8_bias"})
    EXPECT_FALSE(cb::parse_kernel_name(bad).has_value()) << bad;
}

TEST(KernelSpec, EpilogueNamesRoundTripAndOrderMeansOrder) {
  for (const auto& e : cb::all_epilogues()) {
    auto n = cb::epilogue_name(e);
    auto p = cb::parse_epilogue(n);
    ASSERT_TRUE(p.has_value()) << n;
    EXPECT_EQ(*p, e) << n;
  }
  EXPECT_EQ(cb::parse_epilogue("bias_res_gelu")->residual, cb::Residual::before_act);
  EXPECT_EQ(cb::parse_epilogue("bias_gelu_res")->residual, cb::Residual::after_act);
  EXPECT_EQ(cb::parse_epilogue("linear"), cb::EpilogueSpec{});
  for (const char* bad : {"", "gelu_bias", "bias_bias", "relu_gelu", "res_res", "bias_", "tanh", "linear_bias"})
    EXPECT_FALSE(cb::parse_epilogue(bad).has_value()) << bad;
}

// relu6 (ONNX Clip(x, 0, 6)) is a token of its own: not relu with a suffix, and "relu" stays relu.
TEST(KernelSpec, Relu6IsItsOwnActivationToken) {
  EXPECT_EQ(cb::act_name(cb::Act::relu6), "relu6");
  EXPECT_EQ(cb::parse_act("relu6"), cb::Act::relu6);
  EXPECT_EQ(cb::parse_act("relu"), cb::Act::relu);
  for (const char* bad : {"relu06", "relu6 ", "Relu6", "relu66", "relu7"}) EXPECT_FALSE(cb::parse_act(bad)) << bad;
  EXPECT_EQ(cb::parse_epilogue("bias_relu6"), (cb::EpilogueSpec{cb::Act::relu6, true, cb::Residual::none}));
  EXPECT_EQ(cb::parse_epilogue("relu6"), (cb::EpilogueSpec{cb::Act::relu6, false, cb::Residual::none}));
  EXPECT_EQ(cb::parse_epilogue("bias_res_relu6")->residual, cb::Residual::before_act);
  EXPECT_EQ(cb::parse_epilogue("relu6_res")->residual, cb::Residual::after_act);
  for (const char* bad : {"relu6_relu", "relu_relu6", "relu6_bias", "bias_relu6_relu6"})
    EXPECT_FALSE(cb::parse_epilogue(bad)) << bad;
  for (const char* name : {"sm90_ws_coop_tn_f16_f16_f32_128x64x64_c1x1_a8_bias_relu6",
                           "sm90_ws_pingpong_tt_bf16_bf16_f32_64x128x64_c1x1_a8_relu6",
                           "sm80_tc_tn_f16_f16_f32_128x128x32_w64x64x32_s4_a8_bias_relu6"}) {
    auto s = cb::parse_kernel_name(name);
    ASSERT_TRUE(s) << name;
    EXPECT_EQ(s->epi.act, cb::Act::relu6) << name;
    EXPECT_EQ(cb::kernel_name(*s), name);
  }
  auto relu = cb::parse_kernel_name("sm90_ws_coop_tn_f16_f16_f32_128x64x64_c1x1_a8_bias_relu");
  ASSERT_TRUE(relu);
  EXPECT_EQ(relu->epi.act, cb::Act::relu);
  // The catalog's epilogues offer it with and without bias, like every activation.
  const auto all = cb::all_epilogues();
  for (bool bias : {false, true})
    EXPECT_NE(std::find(all.begin(), all.end(), cb::EpilogueSpec{cb::Act::relu6, bias, cb::Residual::none}), all.end());
}

TEST(KernelSpec, EveryCatalogNameRoundTrips) {
  std::set<std::string> seen;
  for (int sm : {90, 80})
    for (cb::Family f : {cb::Family::sm90, cb::Family::sm80})
      for (cb::Elem e : {cb::Elem::f16, cb::Elem::bf16, cb::Elem::f32})
        for (cb::Layout l : {cb::Layout::tn, cb::Layout::tt})
          for (const auto& c : cb::catalog(f, {e, e, l}, sm))
            for (const auto& epi : cb::all_epilogues()) {
              cb::KernelSpec s{c, {e, e, l}, epi};
              auto n = cb::kernel_name(s);
              auto p = cb::parse_kernel_name(n);
              ASSERT_TRUE(p.has_value()) << n;
              EXPECT_EQ(*p, s) << n;
              seen.insert(n);
            }
  EXPECT_GT(seen.size(), 1000u);
}

TEST(KernelSpec, MalformedNamesAreRejected) {
  const std::string good = cb::kernel_name(sm90_spec());
  ASSERT_TRUE(cb::parse_kernel_name(good));
  for (std::string bad : {std::string(""), std::string("sm90"), good + "_", good + "_relu", std::string("sm70") + good.substr(4),
                          std::string("sm90_ws_coop_tn_f16_f16_f32_128x256x064_c1x2_a8_bias_gelu"),
                          std::string("sm90_ws_coop_tn_f16_f16_f16_128x256x64_c1x2_a8_bias_gelu"),
                          std::string("sm90_ws_coop_nn_f16_f16_f32_128x256x64_c1x2_a8_bias_gelu"),
                          std::string("sm90_ws_coop_tn_f16_f16_f32_128x256_c1x2_a8_bias_gelu"),
                          std::string("sm80_tc_tn_f16_f16_f32_128x128x32_s4_w64x64x32_a8_bias")})
    EXPECT_FALSE(cb::parse_kernel_name(bad).has_value()) << bad;
  // The split count is part of the schedule token: present, at least 2, one spelling.
  for (const char* sched : {"splitk", "splitk1", "splitk0", "splitk04", "splitkx", "splitk-4", "splitk4x", "streamk4"})
    EXPECT_FALSE(cb::parse_kernel_name(std::string("sm90_ws_") + sched + "_tn_f16_f16_f32_128x64x64_c1x1_a8_bias"))
        << sched;
}

TEST(Catalog, HasEnoughConfigsPerArch) {
  for (cb::Elem e : {cb::Elem::f16, cb::Elem::bf16}) {
    EXPECT_GE(cb::catalog(cb::Family::sm90, {e, e, cb::Layout::tn}, 90).size(), 24u);
    EXPECT_GE(cb::catalog(cb::Family::sm90, {e, e, cb::Layout::tt}, 90).size(), 24u);
    EXPECT_GE(cb::catalog(cb::Family::sm80, {e, e, cb::Layout::tn}, 90).size(), 12u);
    EXPECT_GE(cb::catalog(cb::Family::sm80, {e, e, cb::Layout::tn}, 80).size(), 12u);
  }
  EXPECT_GE(cb::catalog(cb::Family::sm90, {cb::Elem::f32, cb::Elem::f32, cb::Layout::tn}, 90).size(), 24u);
  // The sm90 catalog covers every schedule and cluster shape the issue asks for.
  std::set<std::pair<int, int>> clusters;
  std::set<cb::Schedule> schedules;
  std::set<int> tile_m, tile_n;
  for (const auto& c : cb::catalog(cb::Family::sm90, {cb::Elem::f16, cb::Elem::f16, cb::Layout::tn}, 90)) {
    clusters.insert({c.cluster_m, c.cluster_n});
    schedules.insert(c.schedule);
    tile_m.insert(c.tile.m);
    tile_n.insert(c.tile.n);
  }
  EXPECT_EQ(clusters.size(), 3u);
  EXPECT_EQ(schedules.size(), 5u);
  EXPECT_TRUE(tile_m.count(64) && tile_m.count(256) && tile_n.count(64) && tile_n.count(256));
  // Tiles with N = 96 and 192 for mid-size M, where power-of-two tiles leave a partial wave.
  EXPECT_TRUE(tile_n.count(96) && tile_n.count(192));
}

TEST(Catalog, SplitKRowsSplitTwoFourAndEightWays) {
  for (cb::Elem e : {cb::Elem::f16, cb::Elem::bf16, cb::Elem::f32}) {
    std::set<int> splits;
    for (const auto& c : cb::catalog(cb::Family::sm90, {e, e, cb::Layout::tn}, 90)) {
      if (!cb::is_split_k(c.schedule)) {
        EXPECT_EQ(c.splits, 1);
        continue;
      }
      splits.insert(c.splits);
      // Cooperative tiles (pingpong has no stream-K scheduler), no cluster: small M has no tile to share.
      EXPECT_EQ(c.tile.m, 128);
      EXPECT_EQ(c.cluster_m * c.cluster_n, 1);
    }
    EXPECT_EQ(splits, (std::set<int>{2, 4, 8})) << cb::elem_name(e);
  }
  for (const auto& c : cb::catalog(cb::Family::sm80, {cb::Elem::f16, cb::Elem::f16, cb::Layout::tn}, 90))
    EXPECT_EQ(c.splits, 1);
}

TEST(Catalog, HasAnAlignmentOneFallbackForEveryDtype) {
  for (cb::Elem e : {cb::Elem::f16, cb::Elem::bf16, cb::Elem::f32}) {
    bool a1 = false;
    for (const auto& c : cb::catalog(cb::Family::sm80, {e, e, cb::Layout::tn}, 90)) a1 |= c.alignment == 1;
    EXPECT_TRUE(a1) << cb::elem_name(e);
  }
  EXPECT_TRUE(cb::catalog(cb::Family::sm90, {cb::Elem::f16, cb::Elem::f16, cb::Layout::tn}, 80).empty());
}

TEST(StaticFilter, RefusesWhatCannotRun) {
  auto s = sm90_spec();
  EXPECT_FALSE(cb::unsupported_reason(s, 90));
  EXPECT_TRUE(cb::unsupported_reason(s, 80)) << "sm90 kernels need an sm_90 GPU";
  auto t = s;
  t.config.alignment = 4;
  EXPECT_TRUE(cb::unsupported_reason(t, 90)) << "TMA needs 16-byte alignment";
  t = s;
  t.config.tile.m = 64;
  EXPECT_TRUE(cb::unsupported_reason(t, 90)) << "cooperative needs tile M >= 128";
  t.config.schedule = cb::Schedule::pingpong;
  EXPECT_FALSE(cb::unsupported_reason(t, 90));
  // Tile N need not be a power of two (wgmma N is any multiple of 8; the epilogue tile is 32 wide).
  // A pingpong warpgroup holds its whole tile's accumulators: 128x192 (192 a thread) is the most.
  t = s;
  t.config.schedule = cb::Schedule::pingpong;
  for (cb::Shape3 tile : {cb::Shape3{64, 96, 64}, cb::Shape3{128, 96, 64}, cb::Shape3{128, 192, 64}}) {
    t.config.tile = tile;
    EXPECT_FALSE(cb::unsupported_reason(t, 90)) << cb::kernel_name(t);
  }
  // Tile K spans 128 bytes, or 256 for the small tiles (half the k-steps; 48 KiB a stage at most).
  for (cb::Shape3 tile : {cb::Shape3{64, 32, 128}, cb::Shape3{64, 128, 128}}) {
    t.config.tile = tile;
    EXPECT_FALSE(cb::unsupported_reason(t, 90)) << cb::kernel_name(t);
  }
  for (cb::Shape3 tile : {cb::Shape3{64, 32, 32}, cb::Shape3{64, 32, 256}, cb::Shape3{128, 128, 128}}) {
    t.config.tile = tile;
    EXPECT_TRUE(cb::unsupported_reason(t, 90)) << cb::kernel_name(t);
  }
  t.config.tile = {128, 256, 64};
  EXPECT_TRUE(cb::unsupported_reason(t, 90)) << "256 accumulators a thread spill";
  t.config.tile = {64, 200, 64};
  EXPECT_TRUE(cb::unsupported_reason(t, 90)) << "tile N must be a multiple of 16";
  t.config.schedule = cb::Schedule::coop;
  t.config.tile = {128, 192, 64};
  EXPECT_FALSE(cb::unsupported_reason(t, 90));
  t.config.tile = {256, 192, 64};
  EXPECT_TRUE(cb::unsupported_reason(t, 90)) << "more than 256x128 leaves too little shared memory";
  t = s;
  t.ops = {cb::Elem::f32, cb::Elem::f32, cb::Layout::tt};
  t.config.tile.k = 32;
  t.config.alignment = 4;
  EXPECT_TRUE(cb::unsupported_reason(t, 90)) << "TF32 wgmma needs K-major B";
  t.ops.layout = cb::Layout::tn;
  EXPECT_FALSE(cb::unsupported_reason(t, 90));
  t = s;
  t.ops.d = cb::Elem::bf16;
  EXPECT_TRUE(cb::unsupported_reason(t, 90));
  t = s;
  t.config.schedule = cb::Schedule::splitk;
  t.config.splits = 4;
  EXPECT_FALSE(cb::unsupported_reason(t, 90));
  t.config.splits = 1;
  EXPECT_TRUE(cb::unsupported_reason(t, 90)) << "split-K needs at least 2 splits";
  t.config.splits = 17;
  EXPECT_TRUE(cb::unsupported_reason(t, 90));
  t.config.splits = 4;
  t.config.tile.m = 64;
  EXPECT_TRUE(cb::unsupported_reason(t, 90)) << "split-K runs the cooperative mainloop: tile M >= 128";
  t = s;
  t.config.splits = 2;
  EXPECT_TRUE(cb::unsupported_reason(t, 90)) << "only the split-K schedule splits";

  auto a = sm80_spec();
  EXPECT_FALSE(cb::unsupported_reason(a, 80));
  a.config.stages = 6;
  a.config.tile = {256, 128, 64};
  a.config.warp = {64, 64, 64};
  // 6 × (256+128) × 64 × 2 B = 288 KiB: over both limits.
  EXPECT_EQ(cb::sm80_mainloop_smem_bytes(a.config, a.ops.ab), 6 * 384 * 64 * 2);
  EXPECT_TRUE(cb::unsupported_reason(a, 90));
  a.config.stages = 4;  // 192 KiB: fits the H100/H200's 227 KiB, not the A100's 163 KiB
  EXPECT_FALSE(cb::unsupported_reason(a, 90));
  EXPECT_TRUE(cb::unsupported_reason(a, 80));
  a = sm80_spec();
  a.config.alignment = 1;
  EXPECT_TRUE(cb::unsupported_reason(a, 90)) << "2-byte cp.async does not exist";
  a.config.stages = 2;
  EXPECT_FALSE(cb::unsupported_reason(a, 90));
  a.config.warp = {48, 64, 32};
  EXPECT_TRUE(cb::unsupported_reason(a, 90));
  a = sm80_spec();
  a.config.splits = 2;
  EXPECT_TRUE(cb::unsupported_reason(a, 90)) << "sm80 kernels have no split-K schedule";
  a = sm80_spec();
  a.config.alignment = 16;
  EXPECT_TRUE(cb::unsupported_reason(a, 90)) << "more than 16 bytes per access";
}

TEST(KernelSpec, ClustersUpToTwoByTwo) {
  // 2x2 multicasts both operands; larger or longer clusters are not offered.
  auto s = *cb::parse_kernel_name("sm90_ws_pingpong_tn_f16_f16_f32_64x96x64_c2x2_a8_bias");
  EXPECT_EQ(s.config.cluster_m, 2);
  EXPECT_EQ(s.config.cluster_n, 2);
  EXPECT_FALSE(cb::unsupported_reason(s, 90).has_value());
  for (auto [cm, cn] : {std::pair{4, 1}, std::pair{1, 4}, std::pair{2, 4}}) {
    s.config.cluster_m = cm, s.config.cluster_n = cn;
    auto why = cb::unsupported_reason(s, 90);
    ASSERT_TRUE(why.has_value()) << cm << "x" << cn;
    EXPECT_NE(why->find("1x1, 1x2, 2x1 or 2x2"), std::string::npos) << *why;
  }
}
