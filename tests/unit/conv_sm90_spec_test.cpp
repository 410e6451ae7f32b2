// The sm90 conv family (conv_sm90.h): names round-trip, the static filter, the catalog, and the
// emitted text spells each epilogue form with the CUTLASS 3.x builder types it needs, for the ws
// schedule and the persistent pingpong and coop ones. No GPU, no nvcc.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "backends/cutlass/conv_sm90.h"
#include "backends/cutlass/conv_spec.h"
#include "backends/cutlass/kernel_spec.h"
#include "backends/cutlass/nvcc.h"

namespace cb = sabre::cutlass_backend;

namespace {

cb::Sm90ConvSpec f16_bias_relu() {
  cb::Sm90ConvSpec s;
  s.config.tile = {128, 128, 64};
  s.elem = cb::Elem::f16;
  s.epi = {cb::Act::relu, true, cb::Residual::none};
  return s;
}

bool has(const std::string& text, const std::string& want) { return text.find(want) != std::string::npos; }

constexpr cb::Sm90ConvSchedule kSchedules[] = {cb::Sm90ConvSchedule::ws, cb::Sm90ConvSchedule::pingpong,
                                               cb::Sm90ConvSchedule::coop};

// The conv epilogues plus the GELU forms the GEMM family also offers.
std::vector<cb::EpilogueSpec> epilogues() {
  auto out = cb::conv_epilogues();
  for (cb::Act a : {cb::Act::gelu_erf, cb::Act::gelu_tanh})
    for (bool bias : {false, true}) out.push_back({a, bias, cb::Residual::none});
  out.push_back({cb::Act::relu, false, cb::Residual::after_act});
  out.push_back({cb::Act::relu, false, cb::Residual::before_act});
  return out;
}

}  // namespace

TEST(ConvSm90Spec, NameOfF16BiasRelu) {
  EXPECT_EQ(cb::sm90_conv_kernel_name(f16_bias_relu()), "sm90_conv_fprop_nhwc_f16_f16_f32_128x128x64_c1x1_a8_bias_relu");
  cb::Sm90ConvSpec s = f16_bias_relu();
  s.elem = cb::Elem::bf16;
  s.config.cluster_m = 2;
  s.epi.residual = cb::Residual::after_act;
  EXPECT_EQ(cb::sm90_conv_kernel_name(s), "sm90_conv_fprop_nhwc_bf16_bf16_f32_128x128x64_c2x1_a8_bias_relu_res");
}

// ws kernels keep the names they had before the persistent schedules (no token); the persistent ones
// say their schedule with the GEMM family's words.
TEST(ConvSm90Spec, NamesSayThePersistentSchedule) {
  cb::Sm90ConvSpec s = f16_bias_relu();
  s.config.tile = {128, 64, 64};
  EXPECT_EQ(cb::sm90_conv_kernel_name(s), "sm90_conv_fprop_nhwc_f16_f16_f32_128x64x64_c1x1_a8_bias_relu");
  s.config.schedule = cb::Sm90ConvSchedule::pingpong;
  EXPECT_EQ(cb::sm90_conv_kernel_name(s), "sm90_conv_fprop_pingpong_nhwc_f16_f16_f32_128x64x64_c1x1_a8_bias_relu");
  s.config.schedule = cb::Sm90ConvSchedule::coop;
  s.config.tile = {256, 64, 64};
  s.epi.residual = cb::Residual::before_act;
  EXPECT_EQ(cb::sm90_conv_kernel_name(s), "sm90_conv_fprop_coop_nhwc_f16_f16_f32_256x64x64_c1x1_a8_bias_res_relu");
  auto back = cb::parse_sm90_conv_kernel_name("sm90_conv_fprop_coop_nhwc_f16_f16_f32_256x64x64_c1x1_a8_bias_res_relu");
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, s);
  EXPECT_EQ(cb::sm90_conv_schedule_name(cb::Sm90ConvSchedule::ws), "ws");
  EXPECT_EQ(cb::sm90_conv_schedule_name(cb::Sm90ConvSchedule::pingpong), "pingpong");
  EXPECT_EQ(cb::sm90_conv_schedule_name(cb::Sm90ConvSchedule::coop), "coop");
}

TEST(ConvSm90Spec, NamesRoundTripOverCatalogEpiloguesAndDtypes) {
  std::set<std::string> seen;
  for (cb::Elem e : {cb::Elem::f16, cb::Elem::bf16})
    for (const auto& c : cb::sm90_conv_catalog(e))
      for (const auto& epi : epilogues()) {
        cb::Sm90ConvSpec s{c, e, epi};
        ASSERT_FALSE(cb::sm90_conv_unsupported_reason(s, 90)) << cb::sm90_conv_kernel_name(s);
        const std::string n = cb::sm90_conv_kernel_name(s);
        EXPECT_TRUE(cb::is_sm90_conv_kernel_name(n)) << n;
        EXPECT_FALSE(cb::is_conv_kernel_name(n)) << n;       // not the sm80 family's
        EXPECT_FALSE(cb::parse_conv_kernel_name(n)) << n;
        EXPECT_FALSE(cb::parse_kernel_name(n)) << n;         // nor a GEMM's
        auto back = cb::parse_sm90_conv_kernel_name(n);
        ASSERT_TRUE(back) << n;
        EXPECT_EQ(*back, s) << n;
        EXPECT_TRUE(seen.insert(n).second) << "duplicate name " << n;
      }
  EXPECT_EQ(seen.size(), 2 * cb::sm90_conv_catalog(cb::Elem::f16).size() * epilogues().size());
  // The other families' names are not this family's.
  auto relu6 = cb::parse_sm90_conv_kernel_name("sm90_conv_fprop_nhwc_f16_f16_f32_128x64x64_c1x1_a8_bias_relu6");
  ASSERT_TRUE(relu6);
  EXPECT_EQ(relu6->epi, (cb::EpilogueSpec{cb::Act::relu6, true, cb::Residual::none}));
  EXPECT_FALSE(cb::parse_sm90_conv_kernel_name("sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8_bias_relu"));
  EXPECT_FALSE(cb::is_sm90_conv_kernel_name("sm90_ws_coop_tn_f16_f16_f32_128x128x64_c1x1_a8_bias_gelu"));
}

TEST(ConvSm90Spec, ParseRefusesMalformedNames) {
  const std::string good = "sm90_conv_fprop_nhwc_f16_f16_f32_128x128x64_c1x1_a8_bias_relu";
  ASSERT_TRUE(cb::parse_sm90_conv_kernel_name(good));
  for (const char* bad : {
           "sm90_ws_coop_tn_f16_f16_f32_128x128x64_c1x1_a8_bias_relu",         // a GEMM name
           "sm90_conv_dgrad_nhwc_f16_f16_f32_128x128x64_c1x1_a8_bias_relu",    // not fprop
           "sm90_conv_fprop_nchw_f16_f16_f32_128x128x64_c1x1_a8_bias_relu",    // layout
           "sm90_conv_fprop_nhwc_f16_bf16_f32_128x128x64_c1x1_a8_bias_relu",   // mixed dtypes
           "sm90_conv_fprop_nhwc_f16_f16_f16_128x128x64_c1x1_a8_bias_relu",    // f16 accumulation
           "sm90_conv_fprop_nhwc_f8_f8_f32_128x128x64_c1x1_a8_bias_relu",      // unknown dtype
           "sm90_conv_fprop_nhwc_f16_f16_f32_128x128_c1x1_a8_bias_relu",       // two tile dims
           "sm90_conv_fprop_nhwc_f16_f16_f32_128x128x64x1_c1x1_a8_bias_relu",  // four tile dims
           "sm90_conv_fprop_nhwc_f16_f16_f32_128x0128x64_c1x1_a8_bias_relu",   // leading zero
           "sm90_conv_fprop_nhwc_f16_f16_f32_128x128x64_c01x1_a8_bias_relu",   // leading zero
           "sm90_conv_fprop_nhwc_f16_f16_f32_128x128x64_c1_a8_bias_relu",      // one cluster dim
           "sm90_conv_fprop_nhwc_f16_f16_f32_128x128x64_c1x1x1_a8_bias_relu",  // three cluster dims
           "sm90_conv_fprop_nhwc_f16_f16_f32_128x128x64_1x1_a8_bias_relu",     // no 'c'
           "sm90_conv_fprop_nhwc_f16_f16_f32_128x128x64_c0x1_a8_bias_relu",    // zero cluster
           "sm90_conv_fprop_nhwc_f16_f16_f32_128x128x64_c1x1_8_bias_relu",     // no 'a'
           "sm90_conv_fprop_nhwc_f16_f16_f32_128x128x64_c1x1_a-8_bias_relu",
           "sm90_conv_fprop_nhwc_f16_f16_f32_128x128x64_c1x1_a8",              // no epilogue
           "sm90_conv_fprop_nhwc_f16_f16_f32_128x128x64_c1x1_a8_bias_relu_",   // trailing '_'
           "sm90_conv_fprop_nhwc_f16_f16_f32_128x128x64_c1x1_a8_bias_tanh",    // unknown activation
           "sm90_conv_fprop_nhwc_f16_f16_f32_128x128x64_c1x1_a8_relu_bias",    // bias after act
           "sm90_conv_fprop_nhwc_f16_f16_f32_128x128x64_c1x1_s4_a8_bias_relu", // an sm80 token
           "sm90_conv_fprop__nhwc_f16_f16_f32_128x128x64_c1x1_a8_bias_relu",
           "sm90_conv_fprop_nhwc_f16_f16_f32_128x128x64_c1x1_a8_bias_relu ",
           "sm90_conv_fprop_",
           "",
           // Schedule tokens: ws is unnamed, one token only, before the layout, the GEMM family's words.
           "sm90_conv_fprop_ws_nhwc_f16_f16_f32_128x128x64_c1x1_a8_bias_relu",
           "sm90_conv_fprop_pingpong_pingpong_nhwc_f16_f16_f32_128x128x64_c1x1_a8_bias_relu",
           "sm90_conv_fprop_pingpong_coop_nhwc_f16_f16_f32_128x128x64_c1x1_a8_bias_relu",
           "sm90_conv_fprop_nhwc_pingpong_f16_f16_f32_128x128x64_c1x1_a8_bias_relu",
           "sm90_conv_fprop_pp_nhwc_f16_f16_f32_128x128x64_c1x1_a8_bias_relu",
           "sm90_conv_fprop_cooperative_nhwc_f16_f16_f32_128x128x64_c1x1_a8_bias_relu",
           "sm90_conv_fprop_pingpong_",
       })
    EXPECT_FALSE(cb::parse_sm90_conv_kernel_name(bad)) << bad;
}

TEST(ConvSm90Spec, StaticFilter) {
  const cb::Sm90ConvSpec s = f16_bias_relu();
  EXPECT_FALSE(cb::sm90_conv_unsupported_reason(s, 90));
  for (int sm : {80, 86, 89, 100, 120}) {
    auto why = cb::sm90_conv_unsupported_reason(s, sm);
    ASSERT_TRUE(why) << sm;
    EXPECT_TRUE(has(*why, "9.0")) << *why;
  }
  auto reason = [&](auto edit) {
    cb::Sm90ConvSpec t = s;
    edit(t);
    auto why = cb::sm90_conv_unsupported_reason(t, 90);
    return why ? *why : std::string();
  };
  EXPECT_TRUE(has(reason([](auto& t) { t.elem = cb::Elem::f32; }), "f16 or bf16"));
  EXPECT_TRUE(has(reason([](auto& t) { t.config.alignment = 4; }), "16-byte"));
  EXPECT_TRUE(has(reason([](auto& t) { t.config.alignment = 1; }), "16-byte"));
  EXPECT_TRUE(has(reason([](auto& t) { t.config.tile.k = 32; }), "tile K"));
  EXPECT_TRUE(has(reason([](auto& t) { t.config.tile.k = 128; }), "tile K"));
  EXPECT_TRUE(has(reason([](auto& t) { t.config.tile.m = 256; }), "tile M"));
  EXPECT_TRUE(has(reason([](auto& t) { t.config.tile.m = 96; }), "tile M"));
  EXPECT_TRUE(has(reason([](auto& t) { t.config.tile.n = 120; }), "tile N"));
  EXPECT_TRUE(has(reason([](auto& t) { t.config.tile.n = 512; }), "tile N"));
  EXPECT_TRUE(has(reason([](auto& t) { t.config.tile.n = 0; }), "positive"));
  EXPECT_TRUE(has(reason([](auto& t) { t.config.tile.n = 256; }), "registers"));  // 128x256: one warpgroup spills
  EXPECT_EQ(reason([](auto& t) { t.config.tile = {64, 256, 64}; }), "");          // 128 registers: fits
  EXPECT_TRUE(has(reason([](auto& t) { t.config.cluster_m = 2, t.config.cluster_n = 2; }), "cluster"));
  EXPECT_TRUE(has(reason([](auto& t) { t.config.cluster_n = 0; }), "cluster"));
  EXPECT_EQ(reason([](auto& t) { t.config.cluster_n = 2; }), "");
  EXPECT_TRUE(has(reason([](auto& t) { t.epi = {cb::Act::none, true, cb::Residual::after_act}; }), "one name"));
  EXPECT_EQ(reason([](auto& t) { t.elem = cb::Elem::bf16; }), "");
  // pingpong: one consumer warpgroup per tile, as ws.
  using S = cb::Sm90ConvSchedule;
  EXPECT_EQ(reason([](auto& t) { t.config.schedule = S::pingpong; }), "");
  EXPECT_EQ(reason([](auto& t) { t.config.schedule = S::pingpong, t.config.tile = {64, 128, 64}; }), "");
  EXPECT_TRUE(has(reason([](auto& t) { t.config.schedule = S::pingpong, t.config.tile.m = 256; }), "tile M"));
  EXPECT_TRUE(has(reason([](auto& t) { t.config.schedule = S::pingpong, t.config.tile.n = 256; }), "registers"));
  // coop: two warpgroups split M, so M is 128 or 256 (CUTLASS needs >= 128) and twice the registers fit.
  EXPECT_EQ(reason([](auto& t) { t.config.schedule = S::coop; }), "");
  EXPECT_EQ(reason([](auto& t) { t.config.schedule = S::coop, t.config.tile = {256, 128, 64}; }), "");
  EXPECT_EQ(reason([](auto& t) { t.config.schedule = S::coop, t.config.tile = {128, 256, 64}; }), "");
  EXPECT_TRUE(has(reason([](auto& t) { t.config.schedule = S::coop, t.config.tile.m = 64; }), "128 or 256"));
  EXPECT_TRUE(has(reason([](auto& t) { t.config.schedule = S::coop, t.config.tile = {256, 256, 64}; }), "two warpgroups"));
  EXPECT_TRUE(has(reason([](auto& t) { t.config.schedule = S::coop, t.config.tile.k = 32; }), "tile K"));
  EXPECT_TRUE(has(reason([](auto& t) { t.config.schedule = S::kCount; }), "schedule"));
}

TEST(ConvSm90Spec, CatalogRowsAreAlignedHopperTiles) {
  for (cb::Elem e : {cb::Elem::f16, cb::Elem::bf16}) {
    auto cat = cb::sm90_conv_catalog(e);
    ASSERT_GE(cat.size(), 3u);
    bool workhorse = false;
    std::set<std::string> names;
    std::map<cb::Sm90ConvSchedule, std::vector<std::string>> tiles;
    for (const auto& c : cat) {
      EXPECT_EQ(c.alignment, 8);
      EXPECT_EQ(c.tile.k, 64);
      EXPECT_FALSE(cb::sm90_conv_unsupported_reason({c, e, {}}, 90));
      EXPECT_TRUE(cb::sm90_conv_unsupported_reason({c, e, {}}, 80));
      workhorse |= c.tile == cb::Shape3{128, 128, 64} && c.cluster_m == 1 && c.cluster_n == 1 &&
                   c.schedule == cb::Sm90ConvSchedule::ws;
      EXPECT_TRUE(names.insert(cb::sm90_conv_kernel_name({c, e, {}})).second);
      tiles[c.schedule].push_back(std::to_string(c.tile.m) + "x" + std::to_string(c.tile.n) + "_c" +
                                  std::to_string(c.cluster_m) + "x" + std::to_string(c.cluster_n));
    }
    EXPECT_TRUE(workhorse);
    // The ws rows are the ones the family had before the persistent schedules, in their order (the
    // model's ties and the tuner's top-k see them as before); each ws tile has a pingpong twin.
    EXPECT_EQ(tiles[cb::Sm90ConvSchedule::ws],
              (std::vector<std::string>{"128x128_c1x1", "128x128_c2x1", "128x64_c1x1", "64x128_c1x1"}));
    EXPECT_EQ(tiles[cb::Sm90ConvSchedule::pingpong], (std::vector<std::string>{"128x64_c1x1", "128x128_c1x1", "64x128_c1x1"}));
    EXPECT_EQ(tiles[cb::Sm90ConvSchedule::coop],
              (std::vector<std::string>{"128x128_c1x1", "128x128_c2x1", "256x64_c1x1", "256x128_c1x1"}));
  }
  EXPECT_TRUE(cb::sm90_conv_catalog(cb::Elem::f32).empty());
}

// Each epilogue form: the fusion op (or EVT tree) it needs and how the residual reaches it.
TEST(ConvSm90Emitter, TextSpellsEachEpilogueForm) {
  struct Form {
    cb::EpilogueSpec epi;
    std::vector<std::string> want, not_want;
  };
  const std::vector<Form> forms = {
      // No residual: an EVT tree without LinComb's beta*C term (an FMA a value where the epilogue shows).
      {{cb::Act::relu, true, cb::Residual::none},
       {"using FusionOp = Sm90EVT<Sm90Compute<cutlass::epilogue::thread::ReLu, Element, ElementCompute",
        "Sm90RowBroadcast<0, TileShape, Element, ElementCompute", "using ElementC = void;", "{{}, nullptr, sc,",
        "args.epilogue.thread = {{{{p->alpha}, {nullptr}, {}}, {}, {static_cast<const Element*>(p->bias), Element(0), {}}, {}}, {}};"},
       {"LinComb", "p->beta", "static_cast<const Element*>(p->residual)"}},
      {{cb::Act::silu, false, cb::Residual::none},
       {"using FusionOp = Sm90EVT<Sm90Compute<cutlass::epilogue::thread::SiLu, Element,",
        "Sm90Compute<cutlass::multiplies, ElementCompute, ElementCompute", "using ElementC = void;"},
       {"static_cast<const Element*>(p->bias)", "Sm90RowBroadcast", "LinComb"}},
      {{cb::Act::none, false, cb::Residual::none},
       {"Sm90Compute<cutlass::multiplies, Element, ElementCompute", "using FusionOp = Linear;",
        "args.epilogue.thread = {{{p->alpha}, {nullptr}, {}}, {}, {}};"},
       {"static_cast<const Element*>(p->bias)", "LinComb", "thread::Identity"}},
      // relu6 (MobileNetV2's Clip(0, 6)): the functor the kernel defines, the same tree.
      {{cb::Act::relu6, true, cb::Residual::none},
       {"struct SabreReLu6 {", "struct SabreReLu6<cutlass::Array<T, N>> {",
        "using FusionOp = Sm90EVT<Sm90Compute<SabreReLu6, Element,", "Sm90RowBroadcast<"},
       {"LinComb", "cutlass::epilogue::thread::ReLu"}},
      {{cb::Act::relu6, false, cb::Residual::none},
       {"struct SabreReLu6 {", "using FusionOp = Sm90EVT<Sm90Compute<SabreReLu6, Element,"},
       {"static_cast<const Element*>(p->bias)", "Sm90RowBroadcast", "LinComb"}},
      // Residual before the activation: the fusion op's source term, C = R.
      {{cb::Act::relu, true, cb::Residual::before_act},
       {"LinCombPerColBiasEltAct<\n    cutlass::epilogue::thread::ReLu", "using ElementC = Element;",
        "args.epilogue.thread.beta = p->beta;", "static_cast<const Element*>(p->residual), sc,", "bias_ptr"},
       {"Sm90EVT"}},
      {{cb::Act::relu, false, cb::Residual::before_act},
       {"LinCombEltAct<\n    cutlass::epilogue::thread::ReLu", "using ElementC = Element;", "p->beta"},
       {"bias_ptr", "Sm90EVT"}},
      // Residual after the activation: an EVT tree, the bias a row broadcast over the output channels.
      {{cb::Act::relu, true, cb::Residual::after_act},
       {"Sm90EVT<Sm90Compute<cutlass::epilogue::thread::ReLu", "Sm90RowBroadcast<0, TileShape, Element, ElementCompute",
        "Sm90SrcFetch<Element>", "Sm90ScalarBroadcast", "using ElementC = Element;", "{{p->beta}, {nullptr}, {}}",
        "static_cast<const Element*>(p->bias), Element(0), {}"},
       {"LinCombPerColBiasEltAct", "bias_ptr"}},
      {{cb::Act::gelu_erf, false, cb::Residual::after_act},
       {"Sm90EVT<Sm90Compute<SabreGeluErf,", "struct SabreGeluErf {", "Sm90Compute<cutlass::multiplies",
        "Sm90SrcFetch<Element>"},
       {"Sm90RowBroadcast", "LinComb", "cutlass::epilogue::thread::GELU"}},
  };
  for (cb::Sm90ConvSchedule sch : kSchedules)
    for (const auto& f : forms) {
      cb::Sm90ConvSpec s = f16_bias_relu();
      s.config.schedule = sch;
      s.epi = f.epi;
      const std::string t = cb::emit_sm90_conv_kernel(s, 90);
      const std::string n = cb::sm90_conv_kernel_name(s);
      for (const auto& w : f.want) EXPECT_TRUE(has(t, w)) << n << " lacks: " << w;
      for (const auto& w : f.not_want) EXPECT_FALSE(has(t, w)) << n << " has: " << w;
    }
}

TEST(ConvSm90Emitter, TextNamesTheBuildersAndTheAbi) {
  cb::Sm90ConvSpec s = f16_bias_relu();
  s.elem = cb::Elem::bf16;
  s.config.cluster_m = 2;
  const std::string n = cb::sm90_conv_kernel_name(s);
  const std::string t = cb::emit_sm90_conv_kernel(s, 90);
  for (const std::string& want : std::vector<std::string>{
           "cutlass::conv::collective::CollectiveBuilder<\n    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, "
           "cutlass::conv::Operator::kFprop",
           "cutlass::epilogue::collective::CollectiveBuilder<\n    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp",
           "cutlass::conv::KernelImplicitTmaWarpSpecializedSm90", "cutlass::epilogue::TmaWarpSpecialized;",
           "cutlass::conv::ConvProblemShape<cutlass::conv::Operator::kFprop",
           "cutlass::conv::kernel::ConvUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue>",
           "cutlass::conv::device::ConvUniversalAdapter<ConvKernel>", "cutlass::layout::TensorNHWC",
           "using TileShape = Shape<_128, _128, Shape<_64>>;", "using ClusterShape = Shape<_2, _1, _1>;",
           "StageCountAutoCarveout", "cutlass::bfloat16_t", "kCrossCorrelation",
           "#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)", "#error",
           "int " + n + "_can_implement(const sabre_conv_args* p)",
           "size_t " + n + "_workspace_size(const sabre_conv_args* p)",
           "int " + n + "_run(const sabre_conv_args* p, sabre_stream_t stream)", "const char* " + n + "_last_error(void)",
           "sabre_conv_registry", "#ifndef SABRE_NO_REGISTRY", "groups != 1", "stride above 8",
           "Conv::can_implement(args)", "SABRE_CHECK_CUTLASS(conv.can_implement(args))",
           "SABRE_CHECK_CUTLASS(conv.initialize(args, p->workspace, stream))", "SABRE_CHECK_CUTLASS(conv.run(stream))",
           "SABRE_CHECK_CUDA(cudaGetLastError())", "end_padding("})
    EXPECT_TRUE(has(t, want)) << want;
  EXPECT_FALSE(has(t, "sabre_kernel_registry"));  // the conv registry, not the GEMM one
  EXPECT_FALSE(has(t, "DefaultConv2dFprop"));     // not the 2.x templates
  // ws is CUTLASS's own kernel, launched without PDL (ConvUniversalAdapter cannot).
  for (const char* persistent_only : {"CUTLASS_ENABLE_GDC_FOR_SM90", "pdl_enabled", "GemmUniversalAdapter",
                                      "PersistentConvMainloop", "KernelTmaWarpSpecializedPingpong"})
    EXPECT_FALSE(has(t, persistent_only)) << persistent_only;
  cb::EmitOptions no_reg;
  no_reg.registry = false;
  EXPECT_FALSE(has(cb::emit_sm90_conv_kernel(s, 90, no_reg), "sabre_conv_registry"));
}

// The persistent kernels: the conv mainloop collective (from the ws builder's parts) in CUTLASS's
// persistent GEMM kernel through sabre's adapter, the GEMM epilogue on the row-major [n*p*q, k]
// output, GemmUniversalAdapter, PDL as the persistent GEMMs have it.
TEST(ConvSm90Emitter, PersistentTextNamesTheGemmKernelAndTheAdapter) {
  for (cb::Sm90ConvSchedule sch : {cb::Sm90ConvSchedule::pingpong, cb::Sm90ConvSchedule::coop}) {
    cb::Sm90ConvSpec s = f16_bias_relu();
    s.config.schedule = sch;
    s.epi.residual = cb::Residual::before_act;
    const bool coop = sch == cb::Sm90ConvSchedule::coop;
    const std::string n = cb::sm90_conv_kernel_name(s);
    const std::string t = cb::emit_sm90_conv_kernel(s, 90);
    std::vector<std::string> want = {
        "#define CUTLASS_ENABLE_GDC_FOR_SM90 1", "#include <cstdlib>",
        coop ? "using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;"
             : "using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedPingpong;",
        coop ? "using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;"
             : "using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecialized;",
        coop ? "constexpr int kMmaWarpGroups = 2;" : "constexpr int kMmaWarpGroups = 1;",
        "Layout<Shape<Int<kMmaWarpGroups>, _1, _1>>",
        // the mainloop from the ws builder's parts, with the persistent tag in the conv dispatch policy
        "using WsBuilder = cutlass::conv::collective::CollectiveBuilder<", "cutlass::conv::KernelImplicitTmaWarpSpecializedSm90>;",
        "cutlass::conv::MainloopSm90TmaGmmaWarpSpecializedImplicitGemm<", "WsBuilder::PipelineStages",
        "cutlass::conv::collective::CollectiveConv<", "Sm90ImplicitGemmTileTraits<WsBuilder::GmemTiledCopyA, WsBuilder::SmemLayoutA>",
        "StageCountAutoCarveout",
        // the adapter
        "struct PersistentConvMainloop : ConvMainloop {", "static constexpr int NumProducerThreadEvents = 1;",
        "cute::append<5>(t.layout(), Layout<_1, _0>{})", "get_linearized_problem_shape_MNKL(problem)",
        "cute::replace<3>(", "ConvMainloop::load(params, pipeline, state, cute::make_tuple(get<2>(load_inputs), get<3>(load_inputs))",
        "ConvMainloop::to_underlying_arguments(args.problem, {args.ptr_A, args.ptr_B}, workspace)",
        "using TransformA = cute::identity;",
        // the kernel, its smem bound, the GEMM epilogue on Y and R as [n*p*q, k]
        "cutlass::gemm::kernel::GemmUniversal<GemmProblemShape,", "PersistentConvMainloop, CollectiveEpilogue, void>;",
        "static_assert(ConvKernel::SharedStorageSize <= 232448",
        "cutlass::gemm::device::GemmUniversalAdapter<ConvKernel>", "using LayoutY = cutlass::layout::RowMajor;",
        "ElementC, LayoutY, kAlign, Element, LayoutY, kAlign, EpilogueSchedule, FusionOp>",
        "using LayoutX = cutlass::layout::TensorNHWC;", "using TileShape = Shape<_128, _128, Shape<_64>>;",
        "StrideC sc = cute::make_stride(int64_t(p->k), cute::Int<1>{}, rows * p->k);",
        "cutlass::gemm::GemmUniversalMode::kGemm", "gemm_problem_shape(problem)",
        "{static_cast<const Element*>(p->x), static_cast<const Element*>(p->filter), problem}",
        "cudaDevAttrMultiProcessorCount", "      hw};",
        // PDL as the GEMMs: SABRE_PDL=0 turns it off
        "bool pdl_enabled()", "SABRE_PDL", "SABRE_CHECK_CUTLASS(conv.run(stream, /*cuda_adapter=*/nullptr, pdl_enabled()));",
        "GemmUniversalAdapter::can_implement", "int " + n + "_run(const sabre_conv_args* p, sabre_stream_t stream)",
        "sabre_conv_registry", "stride above 8", "end_padding(", "kCrossCorrelation"};
    for (const auto& w : want) EXPECT_TRUE(has(t, w)) << n << " lacks: " << w;
    for (const char* w : {"ConvUniversalAdapter<", "cutlass::conv::kernel::ConvUniversal<", "65535 CTA columns",
                          "KernelImplicitTmaWarpSpecializedSm90Pingpong", "KernelImplicitTmaWarpSpecializedSm90Cooperative",
                          "get<0, 0>(sd)"})
      EXPECT_FALSE(has(t, w)) << n << " has: " << w;
    // The GDC define comes before every include (CUTLASS reads it in its headers).
    EXPECT_LT(t.find("#define CUTLASS_ENABLE_GDC_FOR_SM90"), t.find("#include"));
  }
}

TEST(ConvSm90Emitter, RefusesWhatTheFilterRefuses) {
  cb::Sm90ConvSpec s = f16_bias_relu();
  EXPECT_THROW(cb::emit_sm90_conv_kernel(s, 80), std::invalid_argument);
  s.config.tile.n = 256;
  EXPECT_THROW(cb::emit_sm90_conv_kernel(s, 90), std::invalid_argument);
  s.config.tile = {64, 128, 64};
  s.config.schedule = cb::Sm90ConvSchedule::coop;  // coop needs M >= 128
  EXPECT_THROW(cb::emit_sm90_conv_kernel(s, 90), std::invalid_argument);
}

TEST(ConvSm90Emitter, NvccBuildsSm90a) {
  EXPECT_EQ(cb::sm90_conv_gencode_flags(), (std::vector<std::string>{"-gencode", "arch=compute_90a,code=sm_90a"}));
  cb::NvccOptions o;
  o.nvcc = "nvcc";
  o.cutlass_dir = "/cutlass";
  o.sabre_include = "/sabre/include";
  auto cmd = cb::nvcc_sm90_conv_command("k.cu", "k.so", o);
  std::string line;
  for (const auto& a : cmd) line += a + " ";
  for (const char* want : {"arch=compute_90a,code=sm_90a", "-I/cutlass/include", "-I/sabre/include", "-DNDEBUG", "-shared",
                           "-o k.so k.cu"})
    EXPECT_TRUE(has(line, want)) << line;
  o.target_sm = 80;
  EXPECT_THROW(cb::compile_sm90_conv_kernel(f16_bias_relu(), "/tmp/sabre_conv_sm90_unused", o), std::invalid_argument);
}
