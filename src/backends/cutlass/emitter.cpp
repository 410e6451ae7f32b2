#include "backends/cutlass/emitter.h"

#include <stdexcept>

#include "backends/cutlass/emit_common.h"
#include "backends/registry_text.h"

namespace sabre::cutlass_backend {
namespace {

std::string algebra(const EpilogueSpec& e) {
  std::string inner = "alpha*acc";
  if (e.bias) inner += " + bias[n]";
  if (e.residual == Residual::before_act) inner += " + beta*R";
  std::string out = e.act == Act::none ? inner : std::string(act_name(e.act)) + "(" + inner + ")";
  if (e.residual == Residual::after_act) out += " + beta*R";
  return "D = " + out;
}

std::string i(int v) { return std::to_string(v); }

// Whether the kernel waits on the previous grid (griddepcontrol), so it may be launched with
// programmatic dependent launch: the sm90 data-parallel schedules. CUTLASS 4.2's stream-K scheduler
// does not compile with CUTLASS_ENABLE_GDC_FOR_SM90 (is_last_tile binds a const member to a
// non-const reference), so stream-K and split-K kernels launch without it.
bool uses_pdl(const KernelConfig& c) {
  return c.family == Family::sm90 && (c.schedule == Schedule::coop || c.schedule == Schedule::pingpong);
}

// Code shared by both families: error plumbing, argument checks, the C entry points.
// `make_args` (defined per family) builds Gemm::Arguments from sabre_gemm_args.
std::string host_prologue(const KernelSpec& s) {
  const std::string align = i(s.config.alignment);
  const std::string bytes = i(elem_bytes(s.ops.ab));
  const bool tn = s.ops.layout == Layout::tn;
  std::string o;
  o += "namespace {\n\n";
  o += detail::host_error_plumbing();
  o += "constexpr int64_t kAlignment = " + align + ";  // elements, every operand\n";
  o += "constexpr int64_t kElemBytes = " + bytes + ";\n";
  o += "constexpr bool kHasBias = " + std::string(s.epi.bias ? "true" : "false") + ";\n";
  o += "constexpr bool kHasResidual = " + std::string(s.epi.residual != Residual::none ? "true" : "false") + ";\n\n";
  o += "bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % (kAlignment * kElemBytes) == 0; }\n";
  o += "bool divisible(int64_t v) { return v % kAlignment == 0; }\n\n";
  if (uses_pdl(s.config))
    o += detail::pdl_switch();
  o += "// Why this kernel cannot run these arguments, or nullptr. Covers what CUTLASS leaves to the caller:\n"
       "// contiguous extents, row and batch strides and base pointers must all be multiples of the alignment.\n";
  o += "const char* refuse(const sabre_gemm_args* p) {\n";
  o += "  if (!p) return \"args is NULL\";\n";
  o += "  if (p->m < 0 || p->n < 0 || p->k < 1 || p->batch < 0) return \"need m, n, batch >= 0 and k >= 1\";\n";
  o += "  if (p->m > INT32_MAX || p->n > INT32_MAX || p->k > INT32_MAX || p->batch > INT32_MAX) return \"dims exceed int32\";\n";
  o += "  if (!p->a || !p->b || !p->d) return \"a, b and d must be non-NULL\";\n";
  o += "  if (kHasBias && !p->bias) return \"this kernel adds a bias: bias must be non-NULL\";\n";
  o += "  if (kHasResidual && !p->residual) return \"this kernel adds a residual: residual must be non-NULL\";\n";
  o += "  if (p->lda < p->k) return \"lda < k\";\n";
  o += tn ? "  if (p->ldb < p->k) return \"ldb < k (B is [n, k])\";\n" : "  if (p->ldb < p->n) return \"ldb < n (B is [k, n])\";\n";
  o += "  if (p->ldd < p->n) return \"ldd < n\";\n";
  o += "  if (kHasResidual && p->ldr < p->n) return \"ldr < n\";\n";
  o += "  if (!divisible(p->k)) return \"k is not a multiple of the kernel's alignment\";\n";
  o += "  if (!divisible(p->n)) return \"n is not a multiple of the kernel's alignment\";\n";
  o += "  if (!divisible(p->lda) || !divisible(p->ldb) || !divisible(p->ldd) || (kHasResidual && !divisible(p->ldr)))\n"
       "    return \"a leading dimension is not a multiple of the kernel's alignment\";\n";
  o += "  if (p->batch > 1 && (!divisible(p->stride_a) || !divisible(p->stride_b) || !divisible(p->stride_d) ||\n"
       "                       (kHasResidual && !divisible(p->stride_r))))\n"
       "    return \"a batch stride is not a multiple of the kernel's alignment\";\n";
  o += "  if (!aligned(p->a) || !aligned(p->b) || !aligned(p->d) || (kHasBias && !aligned(p->bias)) ||\n"
       "      (kHasResidual && !aligned(p->residual)))\n"
       "    return \"a pointer is not aligned to the kernel's access width\";\n";
  o += "  return nullptr;\n}\n\n";
  return o;
}

std::string host_entry_points(const KernelSpec& s, const EmitOptions& opts, int target_sm) {
  const std::string n = symbol_prefix(s);
  std::string o;
  o += "}  // namespace\n\n";
  o += "extern \"C\" {\n\n";
  o += "const char* " + n + "_last_error(void) { return g_last_error.c_str(); }\n\n";
  o += "int " + n + "_can_implement(const sabre_gemm_args* p) {\n";
  o += "  if (const char* why = refuse(p)) return fail(SABRE_NOT_SUPPORTED, why);\n";
  o += "  if (p->m == 0 || p->n == 0 || p->batch == 0) return SABRE_OK;\n";
  o += "  typename Gemm::Arguments args;\n";
  o += "  if (int st = make_args(p, args)) return st;\n";
  o += "  cutlass::Status st = Gemm::can_implement(args);\n";
  o += "  if (st != cutlass::Status::kSuccess)\n"
       "    return fail(SABRE_NOT_SUPPORTED, std::string(\"Gemm::can_implement: \") + cutlassGetStatusString(st));\n";
  o += "  return SABRE_OK;\n}\n\n";
  o += "size_t " + n + "_workspace_size(const sabre_gemm_args* p) {\n";
  o += "  if (refuse(p) || p->m == 0 || p->n == 0 || p->batch == 0) return 0;\n";
  o += "  typename Gemm::Arguments args;\n";
  o += "  if (make_args(p, args)) return 0;\n";
  o += "  return Gemm::get_workspace_size(args);\n}\n\n";
  o += "int " + n + "_run(const sabre_gemm_args* p, sabre_stream_t stream) {\n";
  o += "  if (const char* why = refuse(p)) return fail(SABRE_NOT_SUPPORTED, why);\n";
  o += "  if (p->m == 0 || p->n == 0 || p->batch == 0) return SABRE_OK;\n";
  o += "  typename Gemm::Arguments args;\n";
  o += "  if (int st = make_args(p, args)) return st;\n";
  o += "  size_t need = Gemm::get_workspace_size(args);\n";
  o += detail::workspace_check();
  o += "  Gemm gemm;\n";
  o += "  SABRE_CHECK_CUTLASS(gemm.can_implement(args));\n";
  o += "  SABRE_CHECK_CUTLASS(gemm.initialize(args, p->workspace, stream));\n";
  o += uses_pdl(s.config) ? "  SABRE_CHECK_CUTLASS(gemm.run(stream, /*cuda_adapter=*/nullptr, pdl_enabled()));\n"
                          : "  SABRE_CHECK_CUTLASS(gemm.run(stream));\n";
  o += "  SABRE_CHECK_CUDA(cudaGetLastError());\n";
  o += "  return SABRE_OK;\n}\n\n";
  o += support::signature_function(n, kernel_signature(s, target_sm));
  if (opts.registry) o += backends::one_kernel_registry("sabre_kernel_entry", "sabre_kernel_registry", n, /*guarded=*/false);
  o += "}  // extern \"C\"\n";
  return o;
}

std::string emit_sm90(const KernelSpec& s) {
  const KernelConfig& c = s.config;
  const EpilogueSpec& e = s.epi;
  const bool has_c = e.residual != Residual::none;
  std::string o;
  if (uses_pdl(c)) {
    o += "// Wait for the previous grid (griddepcontrol) so the kernel can be launched with PDL.\n";
    o += "#define CUTLASS_ENABLE_GDC_FOR_SM90 1\n";
    o += "#include <cstdlib>\n\n";
  }
  o += "#include \"cute/tensor.hpp\"\n";
  o += "#include \"cutlass/epilogue/collective/collective_builder.hpp\"\n";
  o += "#include \"cutlass/epilogue/fusion/operations.hpp\"\n";
  o += "#include \"cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp\"\n";
  o += "#include \"cutlass/epilogue/thread/activation.h\"\n";
  o += "#include \"cutlass/gemm/collective/collective_builder.hpp\"\n";
  o += "#include \"cutlass/gemm/device/gemm_universal_adapter.h\"\n";
  o += "#include \"cutlass/gemm/dispatch_policy.hpp\"\n";
  o += "#include \"cutlass/gemm/kernel/gemm_universal.hpp\"\n";
  o += "#include \"cutlass/gemm/kernel/tile_scheduler.hpp\"\n\n";
  o += "// wgmma and TMA exist only in the arch-specific sm_90a target; a plain sm_90 build compiles these\n"
       "// kernels to stubs that print an error at run time, so refuse it here.\n";
  o += "#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)\n";
  o += "#error \"sm90 kernels need -gencode arch=compute_90a,code=sm_90a\"\n#endif\n\n";
  o += "namespace {\nusing namespace cute;\n\n";
  o += "using ElementA = " + detail::cutlass_elem(s.ops.ab) + ";\nusing LayoutA = cutlass::layout::RowMajor;\n";
  o += "using ElementB = " + detail::cutlass_elem(s.ops.ab) + ";\nusing LayoutB = cutlass::layout::" +
       (s.ops.layout == Layout::tn ? "ColumnMajor;  // B is [n, k], k contiguous\n" : "RowMajor;  // B is [k, n], n contiguous\n");
  o += "using ElementD = " + detail::cutlass_elem(s.ops.d) + ";\nusing LayoutD = cutlass::layout::RowMajor;\n";
  o += std::string("using ElementC = ") + (has_c ? "ElementD;  // C is the residual\n" : "void;  // no source tensor is read\n");
  o += "using ElementAccumulator = float;\nusing ElementCompute = float;\n";
  o += "constexpr int kAlign = " + i(c.alignment) + ";\n";
  o += "using TileShape = Shape<_" + i(c.tile.m) + ", _" + i(c.tile.n) + ", _" + i(c.tile.k) + ">;\n";
  o += "using ClusterShape = Shape<_" + i(c.cluster_m) + ", _" + i(c.cluster_n) + ", _1>;\n";
  if (c.schedule == Schedule::pingpong) {
    o += "using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedPingpong;\n";
    o += "using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecialized;\n";
    o += "using TileScheduler = void;\n";
  } else {
    o += "using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;\n";
    o += "using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;\n";
    const bool sk = c.schedule == Schedule::streamk || is_split_k(c.schedule);
    o += std::string("using TileScheduler = ") + (sk ? "cutlass::gemm::StreamKScheduler;\n" : "void;\n");
  }
  if (is_split_k(c.schedule))
    o += "constexpr int kSplits = " + i(c.splits) + ";  // CTAs per output tile, each over 1/kSplits of K\n";
  o += "constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;\n\n";
  o += detail::act_functor_definitions(e.act, s.ops.d);
  o += "// " + algebra(e) + "\n";
  o += detail::sm90_fusion_op(e, "ElementD", "bias[n]");
  o += "using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<\n"
       "    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,\n"
       "    cutlass::epilogue::collective::EpilogueTileAuto, ElementAccumulator, ElementCompute,\n"
       "    ElementC, LayoutD, kAlign, ElementD, LayoutD, kAlign, EpilogueSchedule, FusionOp>::CollectiveOp;\n\n";
  o += "using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<\n"
       "    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementA, LayoutA, kAlign, ElementB, LayoutB, kAlign,\n"
       "    ElementAccumulator, TileShape, ClusterShape,\n"
       "    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(\n"
       "        sizeof(typename CollectiveEpilogue::SharedStorage))>,\n"
       "    KernelSchedule>::CollectiveOp;\n\n";
  o += "using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop,\n"
       "                                                        CollectiveEpilogue, TileScheduler>;\n";
  o += "using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;\n\n";
  o += "}  // namespace\n\n";
  o += host_prologue(s);
  o += "int make_args(const sabre_gemm_args* p, typename Gemm::Arguments& args) {\n";
  o += "  cutlass::KernelHardwareInfo hw;\n";
  o += "  SABRE_CHECK_CUDA(cudaGetDevice(&hw.device_id));\n";
  o += "  SABRE_CHECK_CUDA(cudaDeviceGetAttribute(&hw.sm_count, cudaDevAttrMultiProcessorCount, hw.device_id));\n";
  o += "  using StrideA = typename Gemm::GemmKernel::StrideA;\n  using StrideB = typename Gemm::GemmKernel::StrideB;\n";
  o += "  using StrideC = typename Gemm::GemmKernel::StrideC;\n  using StrideD = typename Gemm::GemmKernel::StrideD;\n";
  o += "  StrideA sa = cute::make_stride(int64_t(p->lda), cute::Int<1>{}, int64_t(p->stride_a));\n";
  if (s.ops.layout == Layout::tn)
    o += "  StrideB sb = cute::make_stride(int64_t(p->ldb), cute::Int<1>{}, int64_t(p->stride_b));  // (n, k, l)\n";
  else
    o += "  StrideB sb = cute::make_stride(cute::Int<1>{}, int64_t(p->ldb), int64_t(p->stride_b));  // (n, k, l)\n";
  o += has_c ? "  StrideC sc = cute::make_stride(int64_t(p->ldr), cute::Int<1>{}, int64_t(p->stride_r));\n"
             : "  StrideC sc = cute::make_stride(int64_t(p->ldd), cute::Int<1>{}, int64_t(p->stride_d));\n";
  o += "  StrideD sd = cute::make_stride(int64_t(p->ldd), cute::Int<1>{}, int64_t(p->stride_d));\n";
  o += "  args = typename Gemm::Arguments{\n"
       "      cutlass::gemm::GemmUniversalMode::kGemm,\n"
       "      {int(p->m), int(p->n), int(p->k), int(p->batch)},\n"
       "      {static_cast<const ElementA*>(p->a), sa, static_cast<const ElementB*>(p->b), sb},\n";
  o += has_c ? "      {{}, static_cast<const ElementD*>(p->residual), sc, static_cast<ElementD*>(p->d), sd},\n"
             : "      {{}, nullptr, sc, static_cast<ElementD*>(p->d), sd},\n";
  o += "      hw};\n";
  if (is_split_k(c.schedule)) {
    // Left to itself the stream-K scheduler picks a decomposition by its own heuristic (our stream-K
    // kernels ran 2-3x slower than cuBLASLt at small M); split-K asks for one. can_implement,
    // workspace_size and run all build their arguments here, so the workspace reported and checked
    // is the one kSplits-way split-K uses (a partial tile and a lock per output tile).
    o += "  // Split-K: kSplits CTAs per output tile, each over its share of K (CUTLASS lowers kSplits to the\n"
         "  // tile's k-iterations). Partial f32 accumulators meet in the workspace; the CTA of the last split\n"
         "  // adds them to its own and alone runs the epilogue (bias, activation, residual), once per tile.\n"
         + std::string(c.schedule == Schedule::splitk
                           ? "  // Deterministic: the splits add in K order, so results are bitwise the same run to run.\n"
                           : "  // Nondeterministic: once the first split has stored its partial, the middle splits add\n"
                             "  // theirs atomically as they arrive; the f32 sums may differ in the last bits run to run.\n");
    o += "  args.scheduler.splits = kSplits;\n";
    o += "  args.scheduler.decomposition_mode = cutlass::gemm::kernel::detail::DecompositionMode::SplitK;\n";
    o += std::string("  args.scheduler.reduction_mode = cutlass::gemm::kernel::detail::ReductionMode::") +
         (c.schedule == Schedule::splitk ? "Deterministic;\n" : "Nondeterministic;\n");
  }
  o += detail::sm90_epilogue_arguments(e, "ElementD");
  o += "  return SABRE_OK;\n}\n\n";
  return o;
}

std::string emit_sm80(const KernelSpec& s) {
  const KernelConfig& c = s.config;
  const EpilogueSpec& e = s.epi;
  const bool f32 = s.ops.ab == Elem::f32;
  std::string o;
  o += "#include \"cutlass/epilogue/thread/activation.h\"\n";
  o += "#include \"cutlass/epilogue/thread/linear_combination_generic.h\"\n";
  o += "#include \"cutlass/epilogue/thread/linear_combination_residual_block.h\"\n";
  o += "#include \"cutlass/functional.h\"\n";
  o += "#include \"cutlass/gemm/device/gemm_universal.h\"\n";
  o += "#include \"cutlass/gemm/device/gemm_universal_with_broadcast.h\"\n\n";
  o += "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800\n#error \"sm80 kernels need compute capability 8.0 or newer\"\n#endif\n\n";
  o += "namespace {\n\n";
  o += "using ElementA = " + detail::cutlass_elem(s.ops.ab) + ";\nusing LayoutA = cutlass::layout::RowMajor;\n";
  o += "using ElementB = " + detail::cutlass_elem(s.ops.ab) + ";\nusing LayoutB = cutlass::layout::" +
       (s.ops.layout == Layout::tn ? "ColumnMajor;  // B is [n, k], k contiguous\n" : "RowMajor;  // B is [k, n], n contiguous\n");
  o += "using ElementD = " + detail::cutlass_elem(s.ops.d) + ";\nusing LayoutD = cutlass::layout::RowMajor;\n";
  o += "using ElementAccumulator = float;\nusing ElementCompute = float;\n";
  o += "constexpr int kAlign = " + i(c.alignment) + ";\n";
  o += "using ThreadblockShape = cutlass::gemm::GemmShape<" + i(c.tile.m) + ", " + i(c.tile.n) + ", " + i(c.tile.k) + ">;\n";
  o += "using WarpShape = cutlass::gemm::GemmShape<" + i(c.warp.m) + ", " + i(c.warp.n) + ", " + i(c.warp.k) + ">;\n";
  o += std::string("using InstructionShape = cutlass::gemm::GemmShape<16, 8, ") + (f32 ? "8>;  // f32 operands run as TF32\n" : "16>;\n");
  o += "constexpr int kStages = " + i(c.stages) + ";" +
       (c.stages == 2 ? "  // register-pipelined mainloop: no cp.async, any alignment\n" : "\n");
  o += "using Swizzle = cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<8>;\n\n";
  const std::string act = detail::cutlass_act(e.act);
  o += detail::act_functor_definitions(e.act, s.ops.d);
  o += "// " + algebra(e) + "\n";
  if (e.residual == Residual::none) {
    if (e.bias)
      o += "// C is the bias read with row stride 0: D = act(alpha*acc + C), no beta.\n";
    o += "using EpilogueOp = cutlass::epilogue::thread::LinearCombinationGeneric<\n    " + act +
         ", ElementD, kAlign, ElementAccumulator, ElementCompute,\n    cutlass::epilogue::thread::ScaleType::" +
         (e.bias ? "NoBetaScaling" : "OnlyAlphaScaling") + ", cutlass::FloatRoundStyle::round_to_nearest>;\n";
    o += "using Gemm = cutlass::gemm::device::GemmUniversal<\n"
         "    ElementA, LayoutA, ElementB, LayoutB, ElementD, LayoutD, ElementAccumulator,\n"
         "    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80, ThreadblockShape, WarpShape, InstructionShape,\n"
         "    EpilogueOp, Swizzle, kStages, kAlign, kAlign, cutlass::arch::OpMultiplyAdd>;\n\n";
  } else {
    // Z = UnaryOp(BinaryOp(ActivationOp(alpha*acc + bias), beta*R))
    const bool before = e.residual == Residual::before_act;
    o += "// The residual block epilogue: D = Unary(plus(Activation(alpha*acc + bias), beta*R)), bias a broadcast row.\n";
    o += "using EpilogueOp = cutlass::epilogue::thread::LinearCombinationResidualBlock<\n"
         "    ElementD, ElementAccumulator, ElementCompute, ElementD, kAlign,\n    " +
         (before ? std::string("cutlass::epilogue::thread::Identity") : act) + ", cutlass::plus,\n    " +
         (before ? act : std::string("cutlass::epilogue::thread::Identity")) + ">;\n";
    o += "using Gemm = cutlass::gemm::device::GemmUniversalWithBroadcast<\n"
         "    ElementA, LayoutA, ElementB, LayoutB, ElementD, LayoutD, ElementAccumulator,\n"
         "    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80, ThreadblockShape, WarpShape, InstructionShape,\n"
         "    EpilogueOp, Swizzle, kStages, kAlign, kAlign, cutlass::arch::OpMultiplyAdd>;\n\n";
  }
  o += "}  // namespace\n\n";
  o += host_prologue(s);
  o += "int make_args(const sabre_gemm_args* p, typename Gemm::Arguments& args) {\n";
  o += "  auto mode = p->batch > 1 ? cutlass::gemm::GemmUniversalMode::kBatched : cutlass::gemm::GemmUniversalMode::kGemm;\n";
  o += "  cutlass::gemm::GemmCoord problem(int(p->m), int(p->n), int(p->k));\n";
  if (e.residual == Residual::none) {
    if (e.bias) {
      o += "  args = typename Gemm::Arguments(mode, problem, int(p->batch), {p->alpha, 0.0f},\n"
           "      p->a, p->b, p->bias, p->d, p->stride_a, p->stride_b, /*stride C=bias*/ 0, p->stride_d,\n"
           "      p->lda, p->ldb, /*ldc=bias row broadcast*/ 0, p->ldd);\n";
    } else {
      o += "  args = typename Gemm::Arguments(mode, problem, int(p->batch), {p->alpha, 0.0f},\n"
           "      p->a, p->b, nullptr, p->d, p->stride_a, p->stride_b, 0, p->stride_d,\n"
           "      p->lda, p->ldb, 0, p->ldd);\n";
    }
  } else {
    o += std::string("  void* bias = ") + (e.bias ? "const_cast<void*>(p->bias);\n" : "nullptr;  // broadcast reads zeros\n");
    o += "  args = typename Gemm::Arguments(mode, problem, int(p->batch), {p->alpha, p->beta},\n"
         "      p->a, p->b, p->residual, p->d, bias, /*T, not stored*/ nullptr,\n"
         "      p->stride_a, p->stride_b, p->stride_r, p->stride_d, /*bias*/ 0, 0,\n"
         "      p->lda, p->ldb, p->ldr, p->ldd, /*bias*/ 0, 0);\n";
  }
  o += "  return SABRE_OK;\n}\n\n";
  return o;
}

}  // namespace

support::KernelSignature kernel_signature(const KernelSpec& s, int target_sm) {
  return {"gemm", std::string(elem_name(s.ops.ab)), std::string(elem_name(s.ops.d)), std::string(layout_name(s.ops.layout)),
          epilogue_name(s.epi), s.config.alignment,
          s.config.family == Family::sm90 ? "sm_90a" : "sm_" + std::to_string(target_sm)};
}

std::vector<std::string> gencode_flags(Family family, int target_sm) {
  if (family == Family::sm90) return {"-gencode", "arch=compute_90a,code=sm_90a"};
  std::string sm = std::to_string(target_sm);
  return {"-gencode", "arch=compute_" + sm + ",code=sm_" + sm};
}

std::string emit_kernel(const KernelSpec& s, int target_sm, const EmitOptions& opts) {
  if (auto why = unsupported_reason(s, target_sm))
    throw std::invalid_argument("kernel " + kernel_name(s) + " cannot run on sm_" + std::to_string(target_sm) + ": " + *why);
  std::string o;
  o += "// Generated by sabre; do not edit. Regenerate with: sabre kernels emit " + kernel_name(s) + "\n";
  o += "// " + algebra(s.epi) + "; A [m,k] row-major, B " +
       (s.ops.layout == Layout::tn ? "[n,k] k-contiguous" : "[k,n] n-contiguous") + ", D [m,n] row-major.\n";
  o += "// Build: nvcc -std=c++17 -O3 --expt-relaxed-constexpr";
  for (const auto& f : gencode_flags(s.config.family, target_sm)) o += " " + f;
  o += " -I<cutlass>/include -I<sabre>/include -DNDEBUG -Xcompiler -fPIC -shared\n";
  o += "#include <cstdint>\n#include <string>\n#include <utility>\n\n#include <cuda_runtime.h>\n\n";
  o += "#include \"cutlass/cutlass.h\"\n";
  o += "#include \"sabre/kernel_abi.h\"\n";
  o += s.config.family == Family::sm90 ? emit_sm90(s) : emit_sm80(s);
  o += host_entry_points(s, opts, target_sm);
  return o;
}

}  // namespace sabre::cutlass_backend
