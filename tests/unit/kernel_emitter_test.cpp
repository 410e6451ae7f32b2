// The emitter's text: each epilogue kind spelled with the CUTLASS types that compute it. Whether the
// text compiles is tests/kernels/ (label nvcc); whether it computes the right numbers, tests/gpu/.
#include <gtest/gtest.h>

#include <stdexcept>

#include "backends/cutlass/catalog.h"
#include "backends/cutlass/emitter.h"

namespace cb = sabre::cutlass_backend;

namespace {

cb::KernelSpec first(cb::Family f, cb::Elem e, cb::EpilogueSpec epi, cb::Layout l = cb::Layout::tn) {
  auto cat = cb::catalog(f, {e, e, l}, 90);
  if (cat.empty()) throw std::logic_error("empty catalog");
  return {cat.front(), {e, e, l}, epi};
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

}  // namespace

// Without a source term (no residual) the epilogue is an EVT tree act(alpha*acc + bias): LinComb*'s
// beta*C would cost an FMA a value for C = 0. With the residual before the activation, LinComb*.
TEST(Emitter, Sm90EpiloguesWithoutASourceAreEvtTrees) {
  auto t = cb::emit_kernel(first(cb::Family::sm90, cb::Elem::f16, {cb::Act::gelu_erf, true, cb::Residual::none}));
  EXPECT_TRUE(has(t, "using FusionOp = Sm90EVT<Sm90Compute<SabreGeluErf, ElementD, ElementCompute, kRound>, Linear>;"));
  EXPECT_TRUE(has(t, "Sm90RowBroadcast<0, TileShape, ElementD, ElementCompute"));
  EXPECT_TRUE(has(t, "args.epilogue.thread = {{{{p->alpha}, {nullptr}, {}}, {}, {static_cast<const ElementD*>(p->bias), ElementD(0), {}}, {}}, {}};"));
  EXPECT_FALSE(has(t, "LinComb"));
  EXPECT_FALSE(has(t, "p->beta"));
  EXPECT_TRUE(has(t, "using ElementC = void;"));
  EXPECT_TRUE(has(t, "KernelTmaWarpSpecializedCooperative"));
  EXPECT_TRUE(has(t, "#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)"));
  EXPECT_TRUE(has(t, "extern \"C\""));
  EXPECT_TRUE(has(t, "sabre_kernel_registry"));
  auto n = cb::kernel_name(first(cb::Family::sm90, cb::Elem::f16, {cb::Act::gelu_erf, true, cb::Residual::none}));
  for (const char* fn : {"_can_implement(", "_workspace_size(", "_run(", "_last_error("}) EXPECT_TRUE(has(t, n + fn)) << fn;

  t = cb::emit_kernel(first(cb::Family::sm90, cb::Elem::bf16, {cb::Act::silu, false, cb::Residual::none}));
  EXPECT_TRUE(has(t, "using FusionOp = Sm90EVT<Sm90Compute<cutlass::epilogue::thread::SiLu, ElementD,"));
  EXPECT_TRUE(has(t, "Sm90Compute<cutlass::multiplies, ElementCompute, ElementCompute, kRound>"));
  EXPECT_TRUE(has(t, "args.epilogue.thread = {{{{p->alpha}, {nullptr}, {}}, {}, {}}, {}};"));
  EXPECT_FALSE(has(t, "Sm90RowBroadcast"));
  EXPECT_TRUE(has(t, "cutlass::bfloat16_t"));
  t = cb::emit_kernel(first(cb::Family::sm90, cb::Elem::f16, {cb::Act::none, true, cb::Residual::none}));
  EXPECT_TRUE(has(t, "Sm90Compute<cutlass::homogeneous_multiply_add, ElementD, ElementCompute, kRound>"));
  EXPECT_TRUE(has(t, "using FusionOp = Linear;"));
  EXPECT_FALSE(has(t, "thread::Identity"));
  t = cb::emit_kernel(first(cb::Family::sm90, cb::Elem::f16, {cb::Act::relu, true, cb::Residual::before_act}));
  EXPECT_TRUE(has(t, "LinCombPerColBiasEltAct<\n    cutlass::epilogue::thread::ReLu,"));
  EXPECT_TRUE(has(t, "using ElementC = ElementD;"));
  EXPECT_TRUE(has(t, "args.epilogue.thread.beta = p->beta;"));
}

TEST(Emitter, Sm90ResidualAfterActIsAnEvtTree) {
  auto t = cb::emit_kernel(first(cb::Family::sm90, cb::Elem::f16, {cb::Act::gelu_tanh, true, cb::Residual::after_act}));
  EXPECT_TRUE(has(t, "Sm90EVT<Sm90Compute<cutlass::epilogue::thread::GELU_taylor"));
  EXPECT_TRUE(has(t, "Sm90RowBroadcast<"));
  EXPECT_TRUE(has(t, "Sm90SrcFetch<ElementD>"));
  EXPECT_FALSE(has(t, "LinComb"));
  t = cb::emit_kernel(first(cb::Family::sm90, cb::Elem::f16, {cb::Act::relu, false, cb::Residual::after_act}));
  EXPECT_FALSE(has(t, "Sm90RowBroadcast<"));
}

TEST(Emitter, Sm90SchedulesAndLayouts) {
  for (const auto& c : cb::catalog(cb::Family::sm90, {cb::Elem::f16, cb::Elem::f16, cb::Layout::tt}, 90)) {
    auto t = cb::emit_kernel({c, {cb::Elem::f16, cb::Elem::f16, cb::Layout::tt}, {}});
    EXPECT_TRUE(has(t, "using LayoutB = cutlass::layout::RowMajor;"));
    if (c.schedule == cb::Schedule::pingpong) {
      EXPECT_TRUE(has(t, "KernelTmaWarpSpecializedPingpong"));
    }
    if (c.schedule == cb::Schedule::streamk || cb::is_split_k(c.schedule)) {
      EXPECT_TRUE(has(t, "using TileScheduler = cutlass::gemm::StreamKScheduler;"));
    }
    if (c.schedule == cb::Schedule::coop) {
      EXPECT_TRUE(has(t, "using TileScheduler = void;"));
    }
    // Only split-K overrides the scheduler's own decomposition.
    EXPECT_EQ(has(t, "args.scheduler."), cb::is_split_k(c.schedule)) << cb::kernel_name({c, {}, {}});
    // Programmatic dependent launch where the kernel waits on the previous grid: the data-parallel
    // schedules (CUTLASS's stream-K scheduler does not compile with GDC on).
    const bool pdl = c.schedule == cb::Schedule::coop || c.schedule == cb::Schedule::pingpong;
    EXPECT_EQ(has(t, "#define CUTLASS_ENABLE_GDC_FOR_SM90 1"), pdl) << cb::kernel_name({c, {}, {}});
    EXPECT_EQ(has(t, "gemm.run(stream, /*cuda_adapter=*/nullptr, pdl_enabled())"), pdl) << cb::kernel_name({c, {}, {}});
    EXPECT_EQ(has(t, "gemm.run(stream));"), !pdl) << cb::kernel_name({c, {}, {}});
    if (cb::is_split_k(c.schedule)) {
      EXPECT_TRUE(has(t, c.schedule == cb::Schedule::splitk ? "ReductionMode::Deterministic;" : "ReductionMode::Nondeterministic;"))
          << cb::kernel_name({c, {}, {}});
    }
  }
}

// Split-K is the stream-K kernel with the decomposition forced. The arguments are set in make_args,
// which can_implement, workspace_size and run all build their Gemm::Arguments with, so the
// workspace the caller is told to provide is the one split-K uses.
TEST(Emitter, Sm90SplitKForcesTheSplitKDecomposition) {
  for (const cb::EpilogueSpec& epi : {cb::EpilogueSpec{}, cb::EpilogueSpec{cb::Act::gelu_erf, true, cb::Residual::none},
                                      cb::EpilogueSpec{cb::Act::none, true, cb::Residual::before_act},
                                      cb::EpilogueSpec{cb::Act::gelu_erf, true, cb::Residual::after_act}}) {
    auto spec = cb::parse_kernel_name("sm90_ws_splitk4_tn_f16_f16_f32_128x64x64_c1x1_a8_" + cb::epilogue_name(epi));
    ASSERT_TRUE(spec.has_value());
    const std::string t = cb::emit_kernel(*spec);
    EXPECT_TRUE(has(t, "KernelTmaWarpSpecializedCooperative"));
    EXPECT_TRUE(has(t, "using TileScheduler = cutlass::gemm::StreamKScheduler;"));
    EXPECT_TRUE(has(t, "constexpr int kSplits = 4;"));
    const size_t make_args = t.find("int make_args("), body_end = t.find("  return SABRE_OK;\n}", make_args);
    ASSERT_NE(make_args, std::string::npos);
    for (const char* line : {"  args.scheduler.splits = kSplits;\n",
                             "  args.scheduler.decomposition_mode = cutlass::gemm::kernel::detail::DecompositionMode::SplitK;\n",
                             "  args.scheduler.reduction_mode = cutlass::gemm::kernel::detail::ReductionMode::Deterministic;\n"}) {
      const size_t at = t.find(line);
      EXPECT_TRUE(at > make_args && at < body_end) << line << " inside make_args";
    }
    const std::string n = cb::kernel_name(*spec);
    for (const char* fn : {"_can_implement(", "_workspace_size(", "_run("}) {
      const size_t entry = t.find(n + fn);
      ASSERT_NE(entry, std::string::npos) << fn;
      EXPECT_NE(t.find("make_args(p, args)", entry), std::string::npos) << fn;
    }
    // run refuses a workspace smaller than CUTLASS asks for, then lets CUTLASS clear its locks.
    EXPECT_TRUE(has(t, "size_t need = Gemm::get_workspace_size(args);"));
    EXPECT_TRUE(has(t, "SABRE_CHECK_CUTLASS(gemm.initialize(args, p->workspace, stream));"));
  }
  auto two = cb::parse_kernel_name("sm90_ws_splitk2_tn_bf16_bf16_f32_128x128x64_c1x1_a8_bias");
  ASSERT_TRUE(two.has_value());
  EXPECT_TRUE(has(cb::emit_kernel(*two), "constexpr int kSplits = 2;"));
}

TEST(Emitter, Sm80EpiloguesUseLinearCombinations) {
  auto t = cb::emit_kernel(first(cb::Family::sm80, cb::Elem::f16, {cb::Act::hardswish, true, cb::Residual::none}));
  EXPECT_TRUE(has(t, "LinearCombinationGeneric<\n    cutlass::epilogue::thread::HardSwish,"));
  EXPECT_TRUE(has(t, "ScaleType::NoBetaScaling"));
  EXPECT_TRUE(has(t, "cutlass::gemm::device::GemmUniversal<"));
  EXPECT_FALSE(has(t, "__CUDA_ARCH_FEAT_SM90_ALL"));
  t = cb::emit_kernel(first(cb::Family::sm80, cb::Elem::f32, {cb::Act::sigmoid, false, cb::Residual::none}));
  EXPECT_TRUE(has(t, "ScaleType::OnlyAlphaScaling"));
  EXPECT_TRUE(has(t, "GemmShape<16, 8, 8>"));
  t = cb::emit_kernel(first(cb::Family::sm80, cb::Elem::bf16, {cb::Act::gelu_erf, true, cb::Residual::before_act}));
  EXPECT_TRUE(has(t, "LinearCombinationResidualBlock<"));
  EXPECT_TRUE(has(t, "cutlass::epilogue::thread::Identity, cutlass::plus,\n    SabreGeluErf>"));
  EXPECT_TRUE(has(t, "GemmUniversalWithBroadcast<"));
  t = cb::emit_kernel(first(cb::Family::sm80, cb::Elem::bf16, {cb::Act::gelu_erf, true, cb::Residual::after_act}));
  EXPECT_TRUE(has(t, "SabreGeluErf, cutlass::plus,\n    cutlass::epilogue::thread::Identity>"));
}

namespace {

// An activation functor the kernel defines (functor F, for relu6 and gelu_erf): the scalar and
// Array<> forms stand once, ahead of the epilogue that names F, in every epilogue form. The residual
// block calls its activation without arguments, so what F computes must be in F.
void expect_functor_defined_in_every_epilogue_form(cb::Act act, const std::string& f) {
  const struct {
    cb::Family family;
    cb::Elem elem;
    cb::EpilogueSpec epi;
    std::string use;
  } forms[] = {
      {cb::Family::sm90, cb::Elem::f16, {act, true, cb::Residual::none}, "Sm90EVT<Sm90Compute<" + f + ", ElementD,"},
      {cb::Family::sm90, cb::Elem::bf16, {act, false, cb::Residual::none}, "Sm90EVT<Sm90Compute<" + f + ", ElementD,"},
      {cb::Family::sm90, cb::Elem::f16, {act, true, cb::Residual::before_act}, "LinCombPerColBiasEltAct<\n    " + f + ","},
      {cb::Family::sm90, cb::Elem::f16, {act, true, cb::Residual::after_act}, "Sm90EVT<Sm90Compute<" + f + ", ElementCompute"},
      {cb::Family::sm80, cb::Elem::f16, {act, true, cb::Residual::none}, "LinearCombinationGeneric<\n    " + f + ","},
      {cb::Family::sm80, cb::Elem::bf16, {act, true, cb::Residual::before_act},
       "cutlass::epilogue::thread::Identity, cutlass::plus,\n    " + f + ">"},
  };
  for (const auto& form : forms) {
    const std::string t = cb::emit_kernel(first(form.family, form.elem, form.epi));
    const size_t def = t.find("struct " + f + " {"), arr = t.find("struct " + f + "<cutlass::Array<T, N>> {");
    const size_t at = t.find(form.use);
    EXPECT_NE(def, std::string::npos) << form.use;
    EXPECT_NE(arr, std::string::npos) << form.use;
    EXPECT_NE(at, std::string::npos) << form.use;
    EXPECT_LT(def, at) << form.use;
    EXPECT_LT(arr, at) << form.use;
    EXPECT_EQ(t.find("struct " + f + " {", def + 1), std::string::npos) << "defined once";
  }
}

}  // namespace

// relu6 is not a CUTLASS functor: the kernel defines SabreReLu6; other activations' text carries no
// such definition.
TEST(Emitter, Relu6IsAFunctorTheKernelDefines) {
  expect_functor_defined_in_every_epilogue_form(cb::Act::relu6, "SabreReLu6");
  const std::string t = cb::emit_kernel(first(cb::Family::sm80, cb::Elem::f16, {cb::Act::relu6, false, cb::Residual::none}));
  EXPECT_TRUE(has(t, "return mn(mx(x, T(0)), T(6));"));
  EXPECT_TRUE(has(t, "// D = relu6(alpha*acc)"));
  for (cb::Family f : {cb::Family::sm90, cb::Family::sm80})
    for (cb::Act a : {cb::Act::none, cb::Act::relu, cb::Act::hardswish})
      EXPECT_FALSE(has(cb::emit_kernel(first(f, cb::Elem::f16, {a, true, cb::Residual::none})), "SabreReLu6"));
}

// gelu_erf runs through SabreGeluErf, defined after the text of backends/gelu_erf.h (pasted once,
// without its #pragma once); CUTLASS's GELU (erff) is gone, and other activations' text carries
// neither.
TEST(Emitter, GeluErfIsAFunctorTheKernelDefines) {
  expect_functor_defined_in_every_epilogue_form(cb::Act::gelu_erf, "SabreGeluErf");
  const std::string t = cb::emit_kernel(first(cb::Family::sm80, cb::Elem::f16, {cb::Act::gelu_erf, false, cb::Residual::none}));
  const size_t math = t.find("namespace sabre_gelu {");
  EXPECT_LT(math, t.find("struct SabreGeluErf {"));
  EXPECT_EQ(t.find("namespace sabre_gelu {", math + 1), std::string::npos) << "pasted once";
  EXPECT_FALSE(has(t, "#pragma once"));
  EXPECT_FALSE(has(t, "cutlass::epilogue::thread::GELU"));
  EXPECT_TRUE(has(t, "y[i] = T(sabre_gelu::gelu_erf16(float(x[i])));")) << "f16 results: the 16-bit form";
  const std::string f32 = cb::emit_kernel(first(cb::Family::sm80, cb::Elem::f32, {cb::Act::gelu_erf, false, cb::Residual::none}));
  EXPECT_TRUE(has(f32, "y[i] = T(sabre_gelu::gelu_erf(float(x[i])));")) << "f32 results: the f32-accurate form";
  EXPECT_TRUE(has(t, "asm(\"ex2.approx.ftz.f32 %0, %1;\""));
  EXPECT_TRUE(has(t, "// D = gelu(alpha*acc)"));
  for (cb::Family f : {cb::Family::sm90, cb::Family::sm80})
    for (cb::Act a : {cb::Act::none, cb::Act::relu, cb::Act::gelu_tanh, cb::Act::relu6}) {
      const std::string other = cb::emit_kernel(first(f, cb::Elem::f16, {a, true, cb::Residual::none}));
      EXPECT_FALSE(has(other, "SabreGeluErf"));
      EXPECT_FALSE(has(other, "sabre_gelu"));
    }
}

TEST(Emitter, RefusesSpecsTheTargetCannotRun) {
  auto s = first(cb::Family::sm90, cb::Elem::f16, {});
  EXPECT_THROW(cb::emit_kernel(s, 80), std::invalid_argument);
  s.config.cluster_m = 4;
  EXPECT_THROW(cb::emit_kernel(s, 90), std::invalid_argument);
}

TEST(Emitter, GencodeFlagsNeverPlainSm90ForWgmma) {
  EXPECT_EQ(cb::gencode_flags(cb::Family::sm90, 90), (std::vector<std::string>{"-gencode", "arch=compute_90a,code=sm_90a"}));
  EXPECT_EQ(cb::gencode_flags(cb::Family::sm80, 90), (std::vector<std::string>{"-gencode", "arch=compute_90,code=sm_90"}));
  EXPECT_EQ(cb::gencode_flags(cb::Family::sm80, 80), (std::vector<std::string>{"-gencode", "arch=compute_80,code=sm_80"}));
}
