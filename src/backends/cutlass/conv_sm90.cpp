#include "backends/cutlass/conv_sm90.h"

#include <array>
#include <stdexcept>

#include "backends/cutlass/emit_common.h"

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
  std::string o;
  o += detail::act_functor_definitions(e.act, elem);
  o += "// " + detail::conv_algebra(e) + "\n";
  o += "// The output channel k is the GEMM column (N): bias[k] is a per-column (row-broadcast) vector.\n";
  o += detail::sm90_fusion_op(e, "Element", "bias[k]");
  return o;
}

// The types both schedules declare after their layouts: C's element, the accumulator and epilogue
// math, the alignment, and the tile and cluster shapes.
std::string tile_types(const Sm90ConvSpec& s) {
  const Sm90ConvConfig& c = s.config;
  const bool has_c = s.epi.residual != Residual::none;
  std::string o;
  o += std::string("using ElementC = ") + (has_c ? "Element;  // the source tensor C is the residual R\n"
                                                 : "void;  // no source tensor is read\n");
  o += "using ElementAccumulator = float;\nusing ElementCompute = float;\n";
  o += "constexpr int kAlign = " + i(c.alignment) + ";  // 16 bytes: TMA's alignment of every channel row\n";
  o += "// The conv K mode is (C,S,R): its tile is a one-mode shape of 64 channels; (R,S) are k-iterations.\n";
  o += "using TileShape = Shape<_" + i(c.tile.m) + ", _" + i(c.tile.n) + ", Shape<_" + i(c.tile.k) + ">>;\n";
  o += "using ClusterShape = Shape<_" + i(c.cluster_m) + ", _" + i(c.cluster_n) + ", _1>;\n";
  return o;
}

// The ws kernel: CUTLASS's own sm90 conv, through its conv builder, ConvUniversal and ConvUniversalAdapter.
std::string ws_device_types(const Sm90ConvSpec& s) {
  const Sm90ConvConfig& c = s.config;
  const EpilogueSpec& e = s.epi;
  std::string o;
  o += "namespace {\nusing namespace cute;\n\n";
  o += "using Element = " + detail::cutlass_elem(s.elem) + ";  // X, W, Y, bias, R\n";
  o += "using Layout = cutlass::layout::TensorNHWC;  // X [n,h,w,c], W [k,r,s,c], Y and R [n,p,q,k]\n";
  o += tile_types(s);
  o += "// The only sm90 conv schedule in CUTLASS 4.2 (persistent schedules are refused for conv): one TMA\n"
       "// producer warp and one consumer warpgroup; the matching epilogue is the non-cooperative TMA one.\n";
  o += "using KernelSchedule = cutlass::conv::KernelImplicitTmaWarpSpecializedSm90;\n";
  o += "using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecialized;\n";
  o += "constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;\n\n";
  o += fusion_op(e, s.elem);
  o += "using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<\n"
       "    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,\n"
       "    cutlass::epilogue::collective::EpilogueTileAuto, ElementAccumulator, ElementCompute,\n"
       "    ElementC, Layout, kAlign, Element, Layout, kAlign, EpilogueSchedule, FusionOp>::CollectiveOp;\n\n";
  o += "using CollectiveMainloop = typename cutlass::conv::collective::CollectiveBuilder<\n"
       "    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, cutlass::conv::Operator::kFprop,\n"
       "    Element, Layout, kAlign, Element, Layout, kAlign, ElementAccumulator, TileShape, ClusterShape,\n"
       "    cutlass::conv::collective::StageCountAutoCarveout<static_cast<int>(\n"
       "        sizeof(typename CollectiveEpilogue::SharedStorage))>,\n"
       "    KernelSchedule>::CollectiveOp;\n\n";
  o += "using ProblemShape = cutlass::conv::ConvProblemShape<cutlass::conv::Operator::kFprop,\n"
       "                                                     CollectiveMainloop::NumSpatialDimensions>;\n";
  o += "static_assert(ProblemShape::RankS == 2, \"2-D convolution: NHWC activations, KRSC filters\");\n";
  o += "using ConvKernel = cutlass::conv::kernel::ConvUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue>;\n";
  o += "using Conv = cutlass::conv::device::ConvUniversalAdapter<ConvKernel>;\n";
  o += "constexpr int kTileN = " + i(c.tile.n) + ";\n\n";
  o += "}  // namespace\n\n";
  return o;
}

// The persistent kernels: the conv mainloop collective in CUTLASS's persistent GEMM kernel, bridged by
// PersistentConvMainloop (what it bridges is spelled out in the emitted comments), launched through
// GemmUniversalAdapter (which can launch with PDL; ConvUniversalAdapter cannot).
std::string persistent_device_types(const Sm90ConvSpec& s) {
  const Sm90ConvConfig& c = s.config;
  const EpilogueSpec& e = s.epi;
  const bool coop = c.schedule == Sm90ConvSchedule::coop;
  std::string o;
  o += "namespace {\nusing namespace cute;\n\n";
  o += "using Element = " + detail::cutlass_elem(s.elem) + ";  // X, W, Y, bias, R\n";
  o += "using LayoutX = cutlass::layout::TensorNHWC;  // X [n,h,w,c] and W [k,r,s,c], read by TMA im2col and tiled loads\n";
  o += "// Y and R are packed [n,p,q,k]: the row-major [M = n*p*q, N = k] matrix of the implicit GEMM, so the\n"
       "// epilogue is the GEMM's, over the linearized M the tile scheduler counts.\n";
  o += "using LayoutY = cutlass::layout::RowMajor;\n";
  o += tile_types(s);
  if (coop) {
    o += "// Persistent cooperative: two consumer warpgroups split each tile's M; the producer warp loads the\n"
         "// next tile while they run the epilogue. The epilogue schedule must be the cooperative one.\n";
    o += "using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;\n";
    o += "using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;\n";
    o += "constexpr int kMmaWarpGroups = 2;\n";
  } else {
    o += "// Persistent pingpong: two consumer warpgroups take alternate tiles, one's epilogue under the other's\n"
         "// mainloop; each warpgroup owns whole tiles, so the epilogue schedule is the non-cooperative one.\n";
    o += "using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedPingpong;\n";
    o += "using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecialized;\n";
    o += "constexpr int kMmaWarpGroups = 1;  // per tile\n";
  }
  o += "constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;\n\n";
  o += fusion_op(e, s.elem);
  o += "using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<\n"
       "    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,\n"
       "    cutlass::epilogue::collective::EpilogueTileAuto, ElementAccumulator, ElementCompute,\n"
       "    ElementC, LayoutY, kAlign, Element, LayoutY, kAlign, EpilogueSchedule, FusionOp>::CollectiveOp;\n\n";
  o += R"(// The mainloop. CUTLASS 4.2's conv CollectiveBuilder takes only its conv schedule tags, and the conv
// dispatch policy static_asserts that its persistent ones are "not supported yet"; the policy takes any
// other schedule type, and GemmUniversal dispatches on the schedule's base. So: the ws builder's operand
// copies (TMA im2col for X, tiled TMA for W), smem layouts and stage count (they depend only on the
// tile, the cluster and the epilogue's smem carveout: the GEMM builder computes the persistent kernels'
// stage count the same way), a TiledMma over the consumer warpgroups of one tile, and the persistent
// GEMM schedule tag in the conv dispatch policy.
using WsBuilder = cutlass::conv::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, cutlass::conv::Operator::kFprop,
    Element, LayoutX, kAlign, Element, LayoutX, kAlign, ElementAccumulator, TileShape, ClusterShape,
    cutlass::conv::collective::StageCountAutoCarveout<static_cast<int>(
        sizeof(typename CollectiveEpilogue::SharedStorage))>,
    cutlass::conv::KernelImplicitTmaWarpSpecializedSm90>;
using TiledMma = decltype(cute::make_tiled_mma(
    cute::GMMA::ss_op_selector<Element, Element, ElementAccumulator, TileShape, cute::GMMA::Major::K,
                               cute::GMMA::Major::K>(),
    Layout<Shape<Int<kMmaWarpGroups>, _1, _1>>{}));
using ConvDispatchPolicy = cutlass::conv::MainloopSm90TmaGmmaWarpSpecializedImplicitGemm<
    cutlass::conv::Operator::kFprop, WsBuilder::PipelineStages, WsBuilder::NumSpatialDimensions, ClusterShape,
    KernelSchedule>;
using ConvMainloop = cutlass::conv::collective::CollectiveConv<
    ConvDispatchPolicy, TileShape, Element, Element, TiledMma,
    cutlass::conv::collective::detail::Sm90ImplicitGemmTileTraits<WsBuilder::GmemTiledCopyA, WsBuilder::SmemLayoutA>,
    cutlass::conv::collective::detail::Sm90ImplicitGemmTileTraits<WsBuilder::GmemTiledCopyB, WsBuilder::SmemLayoutB>>;
using ConvProblem = typename ConvMainloop::ProblemShape;  // cutlass::conv::ConvProblemShape<kFprop, 2>
static_assert(ConvProblem::RankS == 2, "2-D convolution: NHWC activations, KRSC filters");
// The implicit GEMM's problem shape: the conv's linearized (M = n*p*q, N = k, K = (c,s,r)) with L = 1 as
// a dynamic int, as the epilogue's TMA descriptor types are built for an (M, N, L) of ints.
auto gemm_problem_shape(ConvProblem const& problem) {
  return cute::replace<3>(cutlass::conv::detail::get_linearized_problem_shape_MNKL(problem), 1);
}
using GemmProblemShape = decltype(gemm_problem_shape(ConvProblem{}));

// The conv mainloop as the persistent GEMM kernels call it. The kernel body, its pipelines, the mma,
// mma_tail, load_tail and the producer's load are the conv collective's own, unchanged; the adapter
// only bridges what the persistent kernels expect of a GEMM collective and the conv one lacks:
//  - the problem shape is a rank-4 cute tuple (the kernels static_assert it), so the kernel's is the
//    conv's linearized (M = n*p*q, N = k, K = (c,s,r), L = 1), the shape the ws kernel hands the same
//    collective and epilogue on the device; the host side still needs the ConvProblemShape to encode
//    the TMA im2col descriptor, so it travels in the mainloop arguments;
//  - NumProducerThreadEvents (the producer arrivals per stage: one elected lane, as the GEMM collective);
//  - load_init's tensors carry an L mode (the kernels read shape<4> for the batch coordinate): a unit
//    one is appended, and load gets the collective's own tensors back;
//  - rank-3 A/B strides (static_asserted): the conv strides plus a unit batch mode, for those checks
//    and GemmUniversalAdapter's layout tags only (the collective uses its own);
//  - TransformA/B, which GemmUniversalAdapter reads.
struct PersistentConvMainloop : ConvMainloop {
  static constexpr int NumProducerThreadEvents = 1;
  using StrideA = decltype(cute::append(typename ConvMainloop::StrideA{}, cute::Int<0>{}));
  using StrideB = decltype(cute::append(typename ConvMainloop::StrideB{}, cute::Int<0>{}));
  using TransformA = cute::identity;
  using TransformB = cute::identity;
  struct Arguments {
    Element const* ptr_A = nullptr;  // X
    Element const* ptr_B = nullptr;  // W
    ConvProblem problem{};
  };
  using Params = typename ConvMainloop::Params;

  static Params to_underlying_arguments(GemmProblemShape const&, Arguments const& args, void* workspace) {
    return ConvMainloop::to_underlying_arguments(args.problem, {args.ptr_A, args.ptr_B}, workspace);
  }
  static bool can_implement(GemmProblemShape const&, Arguments const& args) {
    return ConvMainloop::can_implement(args.problem, typename ConvMainloop::Arguments{args.ptr_A, args.ptr_B});
  }

  template <class T>
  CUTLASS_DEVICE static auto with_unit_l(T const& t) {  // (BLK,BLK_K,m,k) -> (BLK,BLK_K,m,k,1)
    // append<N> also takes the im2col tensor's ComposedLayout
    return cute::make_tensor(t.data(), cute::append<5>(t.layout(), Layout<_1, _0>{}));
  }
  template <class ProblemShapeMNKL>
  CUTLASS_DEVICE auto load_init(ProblemShapeMNKL const& problem_shape_mnkl, Params const& params) {
    auto in = ConvMainloop::load_init(problem_shape_mnkl, params);
    return cute::make_tuple(with_unit_l(get<0>(in)), with_unit_l(get<1>(in)), get<0>(in), get<1>(in));
  }
  template <class TensorA5, class TensorB5, class TensorA, class TensorB, class KTileIterator, class BlockCoord>
  CUTLASS_DEVICE void load(Params const& params, MainloopPipeline pipeline, PipelineState state,
                           cute::tuple<TensorA5, TensorB5, TensorA, TensorB> const& load_inputs,
                           BlockCoord const& blk_coord, KTileIterator k_tile_iter, int k_tile_count, int thread_idx,
                           uint32_t block_rank_in_cluster, TensorStorage& shared_tensors) {
    ConvMainloop::load(params, pipeline, state, cute::make_tuple(get<2>(load_inputs), get<3>(load_inputs)), blk_coord,
                       k_tile_iter, k_tile_count, thread_idx, block_rank_in_cluster, shared_tensors);
  }
};

// TileScheduler void: the persistent data-parallel scheduler, one CTA per SM at most.
using ConvKernel = cutlass::gemm::kernel::GemmUniversal<GemmProblemShape,
                                                        PersistentConvMainloop, CollectiveEpilogue, void>;
static_assert(ConvKernel::SharedStorageSize <= 232448, "the kernel's smem exceeds the 227 KiB an sm90 CTA may have");
using Conv = cutlass::gemm::device::GemmUniversalAdapter<ConvKernel>;

}  // namespace

)";
  return o;
}

std::string device_types(const Sm90ConvSpec& s) {
  return persistent(s.config.schedule) ? persistent_device_types(s) : ws_device_types(s);
}

std::string host_code(const Sm90ConvSpec& s, const EmitOptions& opts) {
  const EpilogueSpec& e = s.epi;
  const bool res = e.residual != Residual::none;
  const bool pers = persistent(s.config.schedule);
  const std::string n = sm90_conv_kernel_name(s);
  std::string o;
  o += "namespace {\n\n";
  o += detail::host_error_plumbing();
  if (pers)
    o += detail::pdl_switch();
  o += "constexpr bool kHasBias = " + std::string(e.bias ? "true" : "false") + ";\n";
  o += "constexpr bool kHasResidual = " + std::string(res ? "true" : "false") + ";\n";
  o += "constexpr int64_t kElemBytes = int64_t(sizeof(Element));\n\n";
  o += "bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % (kAlign * kElemBytes) == 0; }\n";
  o += "bool fits(int64_t v) { return v <= INT32_MAX; }\n";
  o += "// a*b*c <= limit for non-negative factors, without overflow.\n";
  o += "bool product_at_most(int64_t a, int64_t b, int64_t c, int64_t limit) {\n"
       "  if (a == 0 || b == 0 || c == 0) return true;\n"
       "  return a <= limit / b && a * b <= limit / c;\n}\n\n";
  o += "// End padding u >= 0 with which CUTLASS's output extent 1 + (in + pad + u - span) / stride (span =\n"
       "// (filt-1)*dil + 1) is `out`: the begin padding when that gives it (symmetric, the common case), else the\n"
       "// smallest that does (the extent floors, so it may be below the exact (out-1)*stride + span - in - pad);\n"
       "// -1 when none does (out below what zero end padding gives, or the filter not fitting).\n"
       "// Only the extent depends on it: inputs outside [0, in) read as zero either way.\n";
  o += "int64_t end_padding(int64_t in, int64_t filt, int64_t out, int64_t pad, int64_t dil, int64_t stride) {\n"
       "  const int64_t span = (filt - 1) * dil + 1;\n"
       "  auto extent = [&](int64_t u) {\n"
       "    const int64_t room = in + pad + u - span;\n"
       "    return room < 0 ? int64_t(-1) : 1 + room / stride;\n"
       "  };\n"
       "  if (extent(pad) == out) return pad;\n"
       "  int64_t u = (out - 1) * stride + span - in - pad;\n"
       "  if (u < 0) u = 0;\n"
       "  return extent(u) == out ? u : -1;\n}\n\n";
  o += "// Why this kernel cannot run these arguments, or nullptr. Covers what CUTLASS leaves to the caller,\n"
       "// and the TMA im2col limits (cuTensorMapEncodeIm2col, rank-4 tensor) that a release build would not\n"
       "// report: CUTLASS only asserts the encode's result, so a descriptor out of range would be garbage.\n";
  o += "const char* refuse(const sabre_conv_args* p) {\n";
  o += detail::conv_refuse_shape_checks();
  o += "  if (!product_at_most(p->n, p->p, p->q, INT32_MAX) || !product_at_most(p->r, p->s, p->c, INT32_MAX))\n"
       "    return \"implicit GEMM M = n*p*q or K = r*s*c exceeds int32\";\n";
  // The persistent grid is at most one CTA per SM whatever the tile count; ws launches one per tile.
  if (!pers)
    o += "  if ((p->k + kTileN - 1) / kTileN > 65535) return \"k (output channels) needs more than 65535 CTA columns\";\n";
  o += detail::conv_refuse_pointer_checks();
  o += "  if (p->c % kAlign) return \"c (input channels) is not a multiple of the kernel's alignment (TMA rows are 16-byte aligned)\";\n";
  o += "  if (p->k % kAlign) return \"k (output channels) is not a multiple of the kernel's alignment (TMA rows are 16-byte aligned)\";\n";
  o += "  if (!aligned(p->x) || !aligned(p->filter) || !aligned(p->y) || (kHasBias && !aligned(p->bias)) ||\n"
       "      (kHasResidual && !aligned(p->residual)))\n"
       "    return \"a pointer is not aligned to 16 bytes (TMA)\";\n";
  o += "  const int64_t up_h = end_padding(p->h, p->r, p->p, p->pad_h, p->dil_h, p->stride_h);\n";
  o += "  const int64_t up_w = end_padding(p->w, p->s, p->q, p->pad_w, p->dil_w, p->stride_w);\n";
  o += "  if (up_h < 0 || up_w < 0)\n"
       "    return \"p or q is not an output extent of h or w with these pads, strides and dilations (no end padding >= 0 gives it)\";\n";
  o += "  if (p->stride_h > 8 || p->stride_w > 8) return \"stride above 8: TMA im2col traverses with element strides of at most 8\";\n";
  o += "  if ((p->r - 1) * p->dil_h > 254 || (p->s - 1) * p->dil_w > 254)\n"
       "    return \"(r-1)*dil_h or (s-1)*dil_w above 254: TMA im2col filter offsets are 8-bit\";\n";
  o += "  if (p->pad_h > 128 || p->pad_w > 128) return \"padding above 128: TMA im2col box corners are 8-bit signed\";\n";
  o += "  const int64_t corner_h = up_h - (p->r - 1) * p->dil_h, corner_w = up_w - (p->s - 1) * p->dil_w;\n";
  o += "  if (corner_h < -128 || corner_h > 127 || corner_w < -128 || corner_w > 127)\n"
       "    return \"end padding minus the dilated filter extent is outside [-128, 127]: TMA im2col box corners are 8-bit signed\";\n";
  o += "  if (!product_at_most(p->h, p->w, p->c * kElemBytes, (int64_t(1) << 40) - 1) ||\n"
       "      !product_at_most(p->p, p->q, p->k * kElemBytes, (int64_t(1) << 40) - 1) ||\n"
       "      !product_at_most(p->r, p->s, p->c * kElemBytes, (int64_t(1) << 40) - 1))\n"
       "    return \"an image or a filter exceeds 2^40 bytes (TMA stride limit)\";\n";
  o += "  return nullptr;\n}\n\n";
  o += "// Builds the CUTLASS arguments of an unrefused problem: NHWC, KRSC and NPQK tensors, all packed.\n";
  o += "int make_args(const sabre_conv_args* p, typename Conv::Arguments& args) {\n";
  if (pers) {
    o += "  cutlass::KernelHardwareInfo hw;  // the persistent grid's size: one CTA per SM at most\n";
    o += "  SABRE_CHECK_CUDA(cudaGetDevice(&hw.device_id));\n";
    o += "  SABRE_CHECK_CUDA(cudaDeviceGetAttribute(&hw.sm_count, cudaDevAttrMultiProcessorCount, hw.device_id));\n";
  }
  o += "  const int up_h = int(end_padding(p->h, p->r, p->p, p->pad_h, p->dil_h, p->stride_h));\n";
  o += "  const int up_w = int(end_padding(p->w, p->s, p->q, p->pad_w, p->dil_w, p->stride_w));\n";
  o += std::string("  ") + (pers ? "ConvProblem" : "ProblemShape") + " problem(cutlass::conv::Mode::kCrossCorrelation,\n"
       "                       {int(p->n), int(p->h), int(p->w), int(p->c)},   // activation nhwc\n"
       "                       {int(p->k), int(p->r), int(p->s), int(p->c)},   // filter krsc\n"
       "                       {int(p->pad_h), int(p->pad_w)},                 // lower padding\n"
       "                       {up_h, up_w},                                   // upper padding\n"
       "                       {int(p->stride_h), int(p->stride_w)},           // traversal stride\n"
       "                       {int(p->dil_h), int(p->dil_w)},                 // dilation\n"
       "                       /*groups=*/1);\n";
  o += "  if (problem.shape_C[1] != p->p || problem.shape_C[2] != p->q)  // invariant of end_padding\n"
       "    return fail(SABRE_NOT_SUPPORTED, \"output extent \" + std::to_string(problem.shape_C[1]) + \"x\" +\n"
       "                                         std::to_string(problem.shape_C[2]) + \" differs from p x q\");\n";
  if (pers) {
    o += "  // Y and R as the row-major [n*p*q, k] matrix the epilogue writes (and reads R from).\n";
    o += "  const int64_t rows = p->n * p->p * p->q;\n";
    o += "  using StrideC = typename Conv::GemmKernel::StrideC;\n";
    o += "  using StrideD = typename Conv::GemmKernel::StrideD;\n";
    o += "  StrideC sc = cute::make_stride(int64_t(p->k), cute::Int<1>{}, rows * p->k);\n";
    o += "  StrideD sd = cute::make_stride(int64_t(p->k), cute::Int<1>{}, rows * p->k);\n";
    o += "  args = typename Conv::Arguments{\n"
         "      cutlass::gemm::GemmUniversalMode::kGemm,\n"
         "      gemm_problem_shape(problem),  // (n*p*q, k, (c,s,r), 1)\n"
         "      {static_cast<const Element*>(p->x), static_cast<const Element*>(p->filter), problem},\n";
    o += res ? "      {{}, static_cast<const Element*>(p->residual), sc, static_cast<Element*>(p->y), sd},\n"
             : "      {{}, nullptr, sc, static_cast<Element*>(p->y), sd},\n";
    o += "      hw};\n";
  } else {
    o += "  // Y and R are (m = (q,p,n), k): strides of q, p and n in elements, k contiguous.\n";
    o += "  using StrideD = typename Conv::ConvKernel::StrideD;\n";
    o += "  StrideD sd{};\n";
    o += "  cute::get<0, 0>(sd) = problem.stride_C[2];\n"
         "  cute::get<0, 1>(sd) = problem.stride_C[1];\n"
         "  cute::get<0, 2>(sd) = problem.stride_C[0];\n";
    o += "  using StrideC = typename Conv::ConvKernel::StrideC;\n";
    o += "  StrideC sc{};\n";
    o += "  cute::get<0, 0>(sc) = problem.stride_C[2];\n"
         "  cute::get<0, 1>(sc) = problem.stride_C[1];\n"
         "  cute::get<0, 2>(sc) = problem.stride_C[0];\n";
    o += "  args = typename Conv::Arguments(\n"
         "      problem,\n"
         "      {static_cast<const Element*>(p->x), static_cast<const Element*>(p->filter)},\n";
    o += res ? "      {{}, static_cast<const Element*>(p->residual), sc, static_cast<Element*>(p->y), sd});\n"
             : "      {{}, nullptr, sc, static_cast<Element*>(p->y), sd});\n";
  }
  o += detail::sm90_epilogue_arguments(e, "Element");
  o += "  return SABRE_OK;\n}\n\n";
  o += "}  // namespace\n\n";
  o += "extern \"C\" {\n\n";
  o += "const char* " + n + "_last_error(void) { return g_last_error.c_str(); }\n\n";
  o += "int " + n + "_can_implement(const sabre_conv_args* p) {\n";
  o += "  if (const char* why = refuse(p)) return fail(SABRE_NOT_SUPPORTED, why);\n";
  o += "  if (p->n == 0) return SABRE_OK;\n";
  o += "  typename Conv::Arguments args;\n";
  o += "  if (int st = make_args(p, args)) return st;\n";
  o += "  cutlass::Status st = Conv::can_implement(args);\n";
  o += "  if (st != cutlass::Status::kSuccess)\n"
       "    return fail(SABRE_NOT_SUPPORTED, std::string(\"" + std::string(pers ? "GemmUniversalAdapter" : "ConvUniversalAdapter") +
       "::can_implement: \") + cutlassGetStatusString(st) +\n"
       "                                         \" (TMA alignment, im2col padding, corner or filter-offset limits)\");\n";
  o += "  return SABRE_OK;\n}\n\n";
  o += "size_t " + n + "_workspace_size(const sabre_conv_args* p) {\n";
  o += "  if (refuse(p) || p->n == 0) return 0;\n";
  o += "  typename Conv::Arguments args;\n";
  o += "  if (make_args(p, args)) return 0;\n";
  o += "  return Conv::get_workspace_size(args);\n}\n\n";
  o += "int " + n + "_run(const sabre_conv_args* p, sabre_stream_t stream) {\n";
  o += "  if (const char* why = refuse(p)) return fail(SABRE_NOT_SUPPORTED, why);\n";
  o += "  if (p->n == 0) return SABRE_OK;\n";
  o += "  typename Conv::Arguments args;\n";
  o += "  if (int st = make_args(p, args)) return st;\n";
  o += "  size_t need = Conv::get_workspace_size(args);\n";
  o += detail::workspace_check();
  o += "  Conv conv;\n";
  o += "  SABRE_CHECK_CUTLASS(conv.can_implement(args));\n";
  o += "  SABRE_CHECK_CUTLASS(conv.initialize(args, p->workspace, stream));  // builds the TMA descriptors\n";
  o += pers ? "  SABRE_CHECK_CUTLASS(conv.run(stream, /*cuda_adapter=*/nullptr, pdl_enabled()));\n"
              : "  SABRE_CHECK_CUTLASS(conv.run(stream));\n";
  o += "  SABRE_CHECK_CUDA(cudaGetLastError());\n";
  o += "  return SABRE_OK;\n}\n\n";
  o += support::signature_function(n, sm90_conv_kernel_signature(s));
  if (opts.registry) o += detail::conv_registry(n);
  o += "}  // extern \"C\"\n";
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
  std::string o;
  o += "// Generated by sabre; do not edit. Kernel: " + sm90_conv_kernel_name(s) + "\n";
  o += "// " + detail::conv_algebra(s.epi) + "; X [n,h,w,c] NHWC, W [k,r,s,c] KRSC, Y and R [n,p,q,k] NHWC.\n";
  o += "// Implicit GEMM on Hopper: M = n*p*q output pixels, N = k, K = r*s*c; TMA im2col loads X, wgmma multiplies.\n";
  o += "// Build: nvcc -std=c++17 -O3 --expt-relaxed-constexpr";
  for (const auto& f : sm90_conv_gencode_flags()) o += " " + f;
  o += " -I<cutlass>/include -I<sabre>/include -DNDEBUG -Xcompiler -fPIC -shared\n";
  const bool pers = persistent(s.config.schedule);
  if (pers) {
    o += "// The persistent GEMM kernels wait for the previous grid (griddepcontrol) before their first global\n"
         "// load and signal the next one as their last tiles drain, so the kernel can be launched with PDL.\n";
    o += "#define CUTLASS_ENABLE_GDC_FOR_SM90 1\n";
  }
  o += "#include <cstdint>\n";
  if (pers) o += "#include <cstdlib>\n";
  o += "#include <string>\n#include <utility>\n\n#include <cuda_runtime.h>\n\n";
  o += "#include \"cute/tensor.hpp\"\n";
  o += "#include \"cutlass/cutlass.h\"\n";
  o += "// Before the conv collectives: their sm100 header names KernelHardwareInfo without including it.\n";
  o += "#include \"cutlass/kernel_hardware_info.hpp\"\n";
  o += "#include \"cutlass/conv/convnd_problem_shape.hpp\"\n";
  if (pers) {
    o += "#include \"cutlass/conv/collective/collective_builder.hpp\"\n";
    o += "#include \"cutlass/conv/detail.hpp\"\n";
    o += "#include \"cutlass/conv/dispatch_policy.hpp\"\n";
  } else {
    o += "#include \"cutlass/conv/device/conv_universal_adapter.hpp\"\n";
    o += "#include \"cutlass/conv/kernel/conv_universal.hpp\"\n";
    o += "#include \"cutlass/conv/collective/collective_builder.hpp\"\n";
    o += "#include \"cutlass/conv/dispatch_policy.hpp\"\n";
  }
  o += "#include \"cutlass/epilogue/collective/collective_builder.hpp\"\n";
  o += "#include \"cutlass/epilogue/fusion/operations.hpp\"\n";
  o += "#include \"cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp\"\n";
  o += "#include \"cutlass/epilogue/thread/activation.h\"\n";
  if (pers) {
    o += "#include \"cutlass/gemm/device/gemm_universal_adapter.h\"\n";
    o += "#include \"cutlass/gemm/dispatch_policy.hpp\"\n";
    o += "#include \"cutlass/gemm/kernel/gemm_universal.hpp\"\n";
    o += "#include \"cutlass/gemm/kernel/tile_scheduler.hpp\"\n";
  }
  o += "#include \"sabre/kernel_abi.h\"\n\n";
  o += "// wgmma and TMA exist only in the arch-specific sm_90a target; a plain sm_90 build compiles these\n"
       "// kernels to stubs that print an error at run time, so refuse it here.\n";
  o += "#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)\n";
  o += "#error \"sm90 conv kernels need -gencode arch=compute_90a,code=sm_90a\"\n#endif\n\n";
  o += device_types(s);
  o += host_code(s, opts);
  return o;
}

}  // namespace sabre::cutlass_backend
