// Conv kernel specs, names, catalog and emitted text. The name is the identity: it must round-trip.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "backends/cutlass/conv_emitter.h"
#include "backends/cutlass/conv_spec.h"
#include "backends/cutlass/kernel_spec.h"

namespace cb = sabre::cutlass_backend;

namespace {

cb::ConvSpec f16_bias_relu() {
  cb::ConvSpec s;
  s.config = {cb::ConvIter::optimized, {128, 128, 32}, {64, 64, 32}, 3, 8};
  s.elem = cb::Elem::f16;
  s.epi = {cb::Act::relu, true, cb::Residual::none};
  return s;
}

}  // namespace

TEST(ConvSpec, NameOfF16BiasRelu) {
  EXPECT_EQ(cb::conv_kernel_name(f16_bias_relu()),
            "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8_bias_relu");
}

TEST(ConvSpec, NamesRoundTripOverCatalogAndEpilogues) {
  std::set<std::string> seen;
  for (cb::Elem e : {cb::Elem::f16, cb::Elem::bf16})
    for (const auto& c : cb::conv_catalog(e, 90))
      for (const auto& epi : cb::conv_epilogues()) {
        cb::ConvSpec s{c, e, epi};
        std::string n = cb::conv_kernel_name(s);
        EXPECT_TRUE(cb::is_conv_kernel_name(n)) << n;
        auto back = cb::parse_conv_kernel_name(n);
        ASSERT_TRUE(back) << n;
        EXPECT_EQ(*back, s) << n;
        EXPECT_TRUE(seen.insert(n).second) << "duplicate name " << n;
      }
  EXPECT_GT(seen.size(), 100u);
}

TEST(ConvSpec, ResidualSpellingsMatchGemm) {
  cb::ConvSpec s = f16_bias_relu();
  s.epi.residual = cb::Residual::before_act;
  EXPECT_TRUE(cb::conv_kernel_name(s).ends_with("_a8_bias_res_relu"));
  s.epi.residual = cb::Residual::after_act;
  EXPECT_TRUE(cb::conv_kernel_name(s).ends_with("_a8_bias_relu_res"));
  s.epi = {};
  EXPECT_TRUE(cb::conv_kernel_name(s).ends_with("_a8_linear"));
}

// MobileNetV2's Conv -> Clip(0, 6): conv kernels are generated with relu6, with and without bias; the
// name round-trips, split-K treats it like any activation, and the kernel defines the functor.
TEST(ConvSpec, Relu6IsAConvEpilogue) {
  const auto epis = cb::conv_epilogues();
  for (bool bias : {false, true})
    EXPECT_NE(std::find(epis.begin(), epis.end(), cb::EpilogueSpec{cb::Act::relu6, bias, cb::Residual::none}), epis.end());
  cb::ConvSpec s = f16_bias_relu();
  s.epi.act = cb::Act::relu6;
  const std::string n = "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8_bias_relu6";
  EXPECT_EQ(cb::conv_kernel_name(s), n);
  auto back = cb::parse_conv_kernel_name(n);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, s);
  EXPECT_EQ(cb::parse_conv_kernel_name("sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8_bias_relu")->epi.act,
            cb::Act::relu);
  EXPECT_TRUE(cb::conv_split_k_allowed(s.epi));
  const std::string t = cb::emit_conv_kernel(s, 90);
  const size_t def = t.find("struct SabreReLu6<cutlass::Array<T, N>> {"), use = t.find("LinearCombinationGeneric<\n    SabreReLu6,");
  ASSERT_NE(def, std::string::npos);
  ASSERT_NE(use, std::string::npos);
  EXPECT_LT(def, use);
  EXPECT_NE(t.find("// Y = relu6(alpha*conv(X,W) + bias[k])"), std::string::npos);
  EXPECT_EQ(cb::emit_conv_kernel(f16_bias_relu(), 90).find("SabreReLu6"), std::string::npos);
}

TEST(ConvSpec, ParseRefusesMalformedNames) {
  const std::string good = "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8_bias_relu";
  ASSERT_TRUE(cb::parse_conv_kernel_name(good));
  for (const char* bad : {
           "sm80_tc_tn_f16_f16_f32_128x128x32_w64x64x32_s3_a8_bias_relu",              // a GEMM name
           "sm80_conv_fprop_fast_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8_bias_relu",  // unknown iterator
           "sm80_conv_fprop_optimized_nchw_f16_f16_f32_128x128x32_w64x64x32_s3_a8_bias_relu",
           "sm80_conv_fprop_optimized_nhwc_f16_bf16_f32_128x128x32_w64x64x32_s3_a8_bias_relu",  // mixed dtypes
           "sm80_conv_fprop_optimized_nhwc_f16_f16_f16_128x128x32_w64x64x32_s3_a8_bias_relu",   // f16 accumulation
           "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128_w64x64x32_s3_a8_bias_relu",
           "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128x32_w64x64x32_s03_a8_bias_relu",  // leading zero
           "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8",             // no epilogue
           "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8_bias_relu_",
           "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8_bias_tanh",
           "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8_splitk1_bias_relu",  // 1 is unnamed
           "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8_splitk04_bias_relu",
           "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8_splitk0_bias_relu",
           "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8_splitk_bias_relu",
           "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8_bias_relu_splitk4",
       })
    EXPECT_FALSE(cb::parse_conv_kernel_name(bad)) << bad;
}

TEST(ConvSpec, StaticFilter) {
  cb::ConvSpec s = f16_bias_relu();
  EXPECT_FALSE(cb::conv_unsupported_reason(s, 90));
  EXPECT_FALSE(cb::conv_unsupported_reason(s, 80));
  EXPECT_TRUE(cb::conv_unsupported_reason(s, 75));
  auto t = s;
  t.elem = cb::Elem::f32;
  EXPECT_TRUE(cb::conv_unsupported_reason(t, 90));
  t = s;
  t.config.alignment = 1;  // 2-byte accesses: no cp.async, and not the optimized iterator
  EXPECT_TRUE(cb::conv_unsupported_reason(t, 90));
  t.config.iter = cb::ConvIter::analytic;
  EXPECT_TRUE(cb::conv_unsupported_reason(t, 90));  // still 3 stages
  t.config.stages = 2;
  EXPECT_FALSE(cb::conv_unsupported_reason(t, 90));
  t = s;
  t.config.warp = {64, 64, 16};
  EXPECT_TRUE(cb::conv_unsupported_reason(t, 90));
  t = s;
  t.config.tile = {256, 256, 64};
  t.config.warp = {64, 64, 64};
  t.config.stages = 7;
  EXPECT_TRUE(cb::conv_unsupported_reason(t, 80));  // shared memory
}

// Split-K is in the name (after the alignment) only when it splits, and only epilogues whose
// non-final slices store a plain partial sum allow it.
TEST(ConvSpec, SplitKNamesAndEpilogues) {
  cb::ConvSpec s = f16_bias_relu();
  s.config.split_k = 4;
  const std::string n = cb::conv_kernel_name(s);
  EXPECT_EQ(n, "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8_splitk4_bias_relu");
  auto back = cb::parse_conv_kernel_name(n);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, s);
  EXPECT_FALSE(cb::conv_unsupported_reason(s, 90));
  EXPECT_TRUE(cb::emit_conv_kernel(s, 90).find("/*split_k_slices=*/4") != std::string::npos);
  EXPECT_TRUE(cb::emit_conv_kernel(f16_bias_relu(), 90).find("/*split_k_slices=*/1") != std::string::npos);
  for (const auto& epi : cb::conv_epilogues()) {
    s.epi = epi;
    // Without a residual the last slice applies the activation (needs the bias as the source); the
    // residual block applies its inner activation in every slice, so only an identity one splits.
    const bool want = epi.residual == cb::Residual::none
                          ? epi.bias
                          : epi.residual == cb::Residual::before_act || epi.act == cb::Act::none;
    EXPECT_EQ(cb::conv_split_k_allowed(epi), want) << cb::epilogue_name(epi);
    auto why = cb::conv_unsupported_reason(s, 90);
    EXPECT_EQ(!why, cb::conv_split_k_allowed(epi)) << cb::epilogue_name(epi);
    if (why) {
      EXPECT_NE(why->find(cb::epilogue_name(epi)), std::string::npos) << *why;
    }
  }
  s = f16_bias_relu();
  s.config.split_k = cb::kMaxConvSplitK + 1;
  EXPECT_TRUE(cb::conv_unsupported_reason(s, 90));
  s.config.split_k = 0;
  EXPECT_TRUE(cb::conv_unsupported_reason(s, 90));
}

// Parallel split-K (f32 partials in the workspace, then a reduction kernel applies the epilogue):
// "splitkp" in the name, every conv epilogue (the epilogue runs once, on the sum), the optimized
// iterator with 16-byte accesses only, and 2 or more slices.
TEST(ConvSpec, ParallelSplitKNamesEpiloguesAndRules) {
  cb::ConvSpec s = f16_bias_relu();
  s.config.split_k = 8;
  s.config.split_mode = cb::ConvSplitK::parallel;
  const std::string n = cb::conv_kernel_name(s);
  EXPECT_EQ(n, "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8_splitkp8_bias_relu");
  auto back = cb::parse_conv_kernel_name(n);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, s);
  for (const auto& epi : cb::conv_epilogues()) {
    s.epi = epi;
    EXPECT_FALSE(cb::conv_unsupported_reason(s, 90)) << cb::epilogue_name(epi);
    const std::string src = cb::emit_conv_kernel(s, 90);
    EXPECT_NE(src.find("SplitKMode::kParallel"), std::string::npos);
    EXPECT_NE(src.find("launch(/*pdl=*/true, reduce_slices"), std::string::npos);
    EXPECT_NE(src.find("constexpr int kSplits = 8;"), std::string::npos);
    // The conv stores plain sums; the reduction applies bias, activation and residual as named.
    EXPECT_EQ(src.find("LinearCombinationResidualBlock"), std::string::npos);
    EXPECT_EQ(src.find("float(bias[ch + j])") != std::string::npos, epi.bias) << cb::epilogue_name(epi);
    EXPECT_EQ(src.find("v = act(v + beta * float(r[j]));") != std::string::npos,
              epi.residual == cb::Residual::before_act) << cb::epilogue_name(epi);
    EXPECT_EQ(src.find("v = act(v) + beta * float(r[j]);") != std::string::npos,
              epi.residual == cb::Residual::after_act) << cb::epilogue_name(epi);
  }
  for (const char* bad : {
           "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8_splitkp1_bias_relu",  // 1 slice
           "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8_splitkp_bias_relu",
           "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8_splitkp08_bias_relu",
       })
    EXPECT_FALSE(cb::parse_conv_kernel_name(bad)) << bad;
  s = f16_bias_relu();
  s.config.split_k = 4;
  s.config.split_mode = cb::ConvSplitK::parallel;
  auto t = s;
  t.config.iter = cb::ConvIter::few_channels;
  EXPECT_TRUE(cb::conv_unsupported_reason(t, 90));
  t = s;
  t.config.iter = cb::ConvIter::analytic, t.config.alignment = 2, t.config.stages = 4;
  EXPECT_TRUE(cb::conv_unsupported_reason(t, 90));
  t = s;
  t.config.alignment = 4;  // 8-byte accesses
  EXPECT_TRUE(cb::conv_unsupported_reason(t, 90));
  t = s;
  t.config.split_k = 1;  // a parallel split of one (unnamed): not a kernel
  EXPECT_TRUE(cb::conv_unsupported_reason(t, 90));
}

TEST(ConvSpec, CatalogHasAlignedTilesAndFallbacks) {
  for (cb::Elem e : {cb::Elem::f16, cb::Elem::bf16}) {
    auto cat = cb::conv_catalog(e, 90);
    ASSERT_GE(cat.size(), 5u);
    bool a8 = false, a1 = false;
    for (const auto& c : cat) {
      EXPECT_FALSE(cb::conv_unsupported_reason({c, e, {}}, 90));
      a8 |= c.alignment == 8 && c.iter == cb::ConvIter::optimized;
      a1 |= c.alignment == 1 && c.iter == cb::ConvIter::analytic && c.stages == 2;  // C = 3
    }
    EXPECT_TRUE(a8);
    EXPECT_TRUE(a1);
  }
  EXPECT_TRUE(cb::conv_catalog(cb::Elem::f32, 90).empty());
}

TEST(ConvEmitter, TextNamesTheTemplatesAndTheAbi) {
  cb::ConvSpec s = f16_bias_relu();
  std::string n = cb::conv_kernel_name(s);
  std::string t = cb::emit_conv_kernel(s, 90);
  for (const std::string& want : std::vector<std::string>{"DefaultConv2dFprop<", "IteratorAlgorithm::kOptimized", "StrideSupport::kStrided", "cutlass::half_t",
        "LinearCombinationGeneric<", "cutlass::epilogue::thread::ReLu", "ScaleType::NoBetaScaling",
        "Layout::packed({0, 0, 0, 0})", "int " + n + "_can_implement(const sabre_conv_args* p)",
        "size_t " + n + "_workspace_size(const sabre_conv_args* p)",
        "int " + n + "_run(const sabre_conv_args* p, sabre_stream_t stream)", "const char* " + n + "_last_error(void)",
        "sabre_conv_registry", "#ifndef SABRE_NO_REGISTRY", "groups != 1", "SABRE_CHECK_CUTLASS(Conv::can_implement(args))",
        // CUTLASS's kernel body behind pdl_enter, launched with the PDL attribute (SABRE_PDL=0: without)
        "__global__ void conv_kernel(typename ConvKernel::Params params) {\n  pdl_enter();",
        "griddepcontrol.wait;", "cudaLaunchAttributeProgrammaticStreamSerialization", "SABRE_PDL",
        "SABRE_CHECK_CUDA(launch(/*pdl=*/true, conv_kernel, grid", "kCrossCorrelation"})
    EXPECT_NE(t.find(want), std::string::npos) << want;
  EXPECT_EQ(t.find("sabre_kernel_registry"), std::string::npos);  // the conv registry, not the GEMM one
  EXPECT_EQ(t.find("cudaMemsetAsync"), std::string::npos);  // only serial split-K clears a workspace
  // Serial split-K clears its semaphores first, and its kernel then launches without PDL (the edge
  // after a memset is not between kernels).
  s.config.split_k = 4;
  t = cb::emit_conv_kernel(s, 90);
  EXPECT_NE(t.find("cudaMemsetAsync(p->workspace, 0, need, stream)"), std::string::npos);
  EXPECT_NE(t.find("launch(/*pdl=*/false, conv_kernel"), std::string::npos);
}

TEST(ConvEmitter, ResidualUsesTheBroadcastEpilogue) {
  cb::ConvSpec s = f16_bias_relu();
  s.elem = cb::Elem::bf16;
  s.config = {cb::ConvIter::analytic, {64, 64, 32}, {32, 32, 32}, 2, 1};
  s.epi.residual = cb::Residual::before_act;
  std::string t = cb::emit_conv_kernel(s, 90);
  for (const char* want : {"DefaultConv2dFpropWithBroadcast<", "LinearCombinationResidualBlock<", "cutlass::bfloat16_t",
                           "IteratorAlgorithm::kAnalytic", "kStages = 2", "{p->alpha, p->beta}"})
    EXPECT_NE(t.find(want), std::string::npos) << want;
  cb::EmitOptions no_reg;
  no_reg.registry = false;
  EXPECT_EQ(cb::emit_conv_kernel(s, 90, no_reg).find("sabre_conv_registry"), std::string::npos);
}

TEST(ConvEmitter, RefusesUnsupportedSpec) {
  cb::ConvSpec s = f16_bias_relu();
  s.elem = cb::Elem::f32;
  EXPECT_THROW(cb::emit_conv_kernel(s, 90), std::invalid_argument);
}

namespace {

cb::ConvSpec few_channels_stem() {
  cb::ConvSpec s;
  s.config = {cb::ConvIter::few_channels, {128, 64, 32}, {64, 32, 32}, 4, 8};
  s.elem = cb::Elem::f16;
  s.epi = {cb::Act::relu, true, cb::Residual::none};
  return s;
}

}  // namespace

// The few-channels iterator's name holds an underscore; it round-trips whole and near misses do not parse.
TEST(ConvSpec, FewChannelsNameRoundTrips) {
  const cb::ConvSpec s = few_channels_stem();
  const std::string n = "sm80_conv_fprop_few_channels_nhwc_f16_f16_f32_128x64x32_w64x32x32_s4_a8_bias_relu";
  EXPECT_EQ(cb::conv_kernel_name(s), n);
  EXPECT_EQ(cb::conv_iter_name(cb::ConvIter::few_channels), "few_channels");
  EXPECT_TRUE(cb::is_conv_kernel_name(n));
  auto back = cb::parse_conv_kernel_name(n);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, s);
  for (const char* bad : {
           "sm80_conv_fprop_few_nhwc_f16_f16_f32_128x64x32_w64x32x32_s4_a8_bias_relu",
           "sm80_conv_fprop_fewchannels_nhwc_f16_f16_f32_128x64x32_w64x32x32_s4_a8_bias_relu",
           "sm80_conv_fprop_few_channels_f16_f16_f32_128x64x32_w64x32x32_s4_a8_bias_relu",  // no layout
           "sm80_conv_fprop_few_channels",
           "sm80_conv_fprop_few_channels_",
       })
    EXPECT_FALSE(cb::parse_conv_kernel_name(bad)) << bad;
}

// Static filter: few_channels takes the aligned tiles as the optimized iterator does, but no split-K
// (CUTLASS gives every slice all R·S·C k-iterations).
TEST(ConvSpec, FewChannelsStaticFilterRefusesSplitK) {
  cb::ConvSpec s = few_channels_stem();
  EXPECT_FALSE(cb::conv_unsupported_reason(s, 90));
  EXPECT_FALSE(cb::conv_unsupported_reason(s, 80));
  EXPECT_TRUE(cb::conv_unsupported_reason(s, 75));
  s.config.split_k = 2;
  auto why = cb::conv_unsupported_reason(s, 90);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("few_channels kernels have no split-K"), std::string::npos) << *why;
}

// The channel rule: every iterator needs C a multiple of its alignment; few_channels only up to
// kFewChannelsMaxC (16) channels, so ordinary convs (C >= 32) never take it.
TEST(ConvSpec, ChannelsRule) {
  const cb::ConvConfig few = few_channels_stem().config;
  const cb::ConvConfig opt = f16_bias_relu().config;
  EXPECT_EQ(cb::kFewChannelsMaxC, 16);
  for (int64_t c : {8, 16}) {
    EXPECT_FALSE(cb::conv_channels_unsupported_reason(few, c)) << c;
    EXPECT_FALSE(cb::conv_channels_unsupported_reason(opt, c)) << c;
  }
  for (int64_t c : {24, 32, 64, 512}) {
    auto why = cb::conv_channels_unsupported_reason(few, c);
    ASSERT_TRUE(why) << c;
    EXPECT_NE(why->find("few_channels kernels are for c <= 16"), std::string::npos) << *why;
    EXPECT_FALSE(cb::conv_channels_unsupported_reason(opt, c)) << c;
  }
  for (int64_t c : {3, 6, 0}) {
    EXPECT_TRUE(cb::conv_channels_unsupported_reason(few, c)) << c;
    EXPECT_TRUE(cb::conv_channels_unsupported_reason(opt, c)) << c;
  }
  cb::ConvConfig a1 = opt;
  a1.iter = cb::ConvIter::analytic, a1.alignment = 1, a1.stages = 2;
  EXPECT_FALSE(cb::conv_channels_unsupported_reason(a1, 3));
}

// The catalog has 16-byte few_channels tiles for the padded stem in both dtypes, each passing the filter.
TEST(ConvSpec, CatalogHasFewChannelsStemTiles) {
  for (cb::Elem e : {cb::Elem::f16, cb::Elem::bf16}) {
    std::set<std::string> tiles;
    for (const auto& c : cb::conv_catalog(e, 90)) {
      if (c.iter != cb::ConvIter::few_channels) continue;
      EXPECT_EQ(c.alignment, 8);
      EXPECT_EQ(c.split_k, 1);
      EXPECT_FALSE(cb::conv_unsupported_reason({c, e, {}}, 80));
      tiles.insert(std::to_string(c.tile.m) + "x" + std::to_string(c.tile.n) + "x" + std::to_string(c.tile.k) + "_s" +
                   std::to_string(c.stages));
    }
    EXPECT_EQ(tiles, (std::set<std::string>{"256x64x32_s3", "128x64x32_s4", "64x64x32_s4"}));
  }
}

// The emitter spells the iterator kFewChannels, and the kernel refuses what the channel rule
// refuses (c > 16) and offsets past int32; the other iterators' kernels say nothing of it.
TEST(ConvEmitter, FewChannelsUsesTheFewChannelsIterator) {
  for (bool res : {false, true}) {
    cb::ConvSpec s = few_channels_stem();
    if (res) s.epi.residual = cb::Residual::before_act;
    const std::string t = cb::emit_conv_kernel(s, 90);
    for (const char* want : {"constexpr auto kIterator = cutlass::conv::IteratorAlgorithm::kFewChannels;",
                             res ? "DefaultConv2dFpropWithBroadcast<" : "DefaultConv2dFprop<", "kStages = 4",
                             "if (p->c > 16) return \"few_channels kernels are for c <= 16",
                             "few_channels offsets are 32-bit", "/*split_k_slices=*/1"})
      EXPECT_NE(t.find(want), std::string::npos) << want;
  }
  for (const cb::ConvSpec& other : {f16_bias_relu()}) {
    const std::string t = cb::emit_conv_kernel(other, 90);
    EXPECT_EQ(t.find("kFewChannels"), std::string::npos);
    EXPECT_EQ(t.find("few_channels"), std::string::npos);
  }
}

// Grouped kernels (CUTLASS's single-group fprop): their own names, round-tripping; the emitted code
// uses the group fprop with the groups from the arguments and a [k, r, s, c/groups] filter, and
// refuses what a group's CTA tile cannot cover; the static filter keeps them to what CUTLASS builds.
TEST(ConvSpec, GroupedKernelsNameEmitAndRefuse) {
  cb::ConvSpec s = f16_bias_relu();
  s.config = {cb::ConvIter::optimized, {128, 32, 32}, {64, 32, 32}, 4, 8};
  s.config.grouped = true;
  const std::string n = cb::conv_kernel_name(s);
  EXPECT_EQ(n, "sm80_conv_fprop_grouped_optimized_nhwc_f16_f16_f32_128x32x32_w64x32x32_s4_a8_bias_relu");
  auto back = cb::parse_conv_kernel_name(n);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, s);
  EXPECT_FALSE(cb::conv_unsupported_reason(s, 90)) << *cb::conv_unsupported_reason(s, 90);
  const std::string t = cb::emit_conv_kernel(s, 90);
  EXPECT_NE(t.find("DefaultConv2dGroupFprop<"), std::string::npos);
  EXPECT_NE(t.find("cutlass::conv::GroupMode::kSingleGroup"), std::string::npos);
  EXPECT_NE(t.find("int(p->groups));"), std::string::npos);
  EXPECT_NE(t.find("int(p->c / p->groups)}));"), std::string::npos);
  EXPECT_NE(t.find("(p->k / p->groups) % ThreadblockShape::kN"), std::string::npos);
  EXPECT_EQ(t.find("groups != 1 (grouped or depthwise convolution) is not supported"), std::string::npos);
  EXPECT_NE(t.find("groups = 1: a dense conv runs on the plain conv kernels"), std::string::npos);
  // The plain kernels keep refusing groups and a dense filter.
  const std::string plain = cb::emit_conv_kernel(f16_bias_relu(), 90);
  EXPECT_NE(plain.find("groups != 1 (grouped or depthwise convolution) is not supported"), std::string::npos);
  EXPECT_EQ(plain.find("DefaultConv2dGroupFprop"), std::string::npos);

  cb::ConvSpec bad = s;
  bad.epi.residual = cb::Residual::before_act;
  EXPECT_TRUE(cb::conv_unsupported_reason(bad, 90));
  bad = s, bad.config.split_k = 2;
  EXPECT_TRUE(cb::conv_unsupported_reason(bad, 90));
  bad = s, bad.config.iter = cb::ConvIter::analytic;
  EXPECT_TRUE(cb::conv_unsupported_reason(bad, 90));

  // Problem filter: ResNeXt's groups regrouped to 32 channels fit tile N 32, not 64.
  EXPECT_FALSE(cb::conv_group_unsupported_reason(s.config, 4, 128, 128));
  cb::ConvConfig n64 = s.config;
  n64.tile.n = 64, n64.warp.n = 32;
  EXPECT_TRUE(cb::conv_group_unsupported_reason(n64, 4, 128, 128));
  EXPECT_FALSE(cb::conv_group_unsupported_reason(n64, 2, 128, 128));
  EXPECT_TRUE(cb::conv_group_unsupported_reason(s.config, 1, 128, 128));        // dense: the plain kernels
  EXPECT_TRUE(cb::conv_group_unsupported_reason(s.config, 32, 128, 1024));      // 4 input channels a group
  EXPECT_TRUE(cb::conv_group_unsupported_reason(f16_bias_relu().config, 4, 128, 128));  // plain: groups 1 only
  EXPECT_FALSE(cb::conv_group_unsupported_reason(f16_bias_relu().config, 1, 128, 128));
  EXPECT_TRUE(cb::conv_group_unsupported_reason(s.config, 3, 128, 128));        // groups must divide
}

TEST(ConvSpec, CatalogHasGroupedTilesForEachDtype) {
  for (cb::Elem e : {cb::Elem::f16, cb::Elem::bf16}) {
    std::set<int> ns;
    for (const auto& c : cb::conv_catalog(e, 90))
      if (c.grouped) {
        ns.insert(c.tile.n);
        EXPECT_EQ(c.alignment, 8);
        EXPECT_EQ(c.iter, cb::ConvIter::optimized);
      }
    EXPECT_EQ(ns, (std::set<int>{32, 64, 128}));
    EXPECT_EQ(*ns.begin(), 32);  // the grouped pattern check's kGroupedConvOutMultiple
  }
}
