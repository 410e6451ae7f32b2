#include "backends/cutlass/conv_emitter.h"

#include <stdexcept>

#include "backends/cutlass/emit_common.h"

namespace sabre::cutlass_backend {
namespace {

std::string i(int v) { return std::to_string(v); }

// The kIterator definition's value (after "IteratorAlgorithm::") and its comment.
std::string iterator_text(ConvIter it) {
  switch (it) {
    case ConvIter::optimized: return "kOptimized;\n";
    case ConvIter::analytic: return "kAnalytic;  // recomputes (r,s,c) per access: any alignment\n";
    case ConvIter::few_channels:
      return "kFewChannels;\n"
             "// The GEMM K runs over (r,s,c) packed, c innermost: each access is one filter tap's kAlign channels,\n"
             "// so K = R*S*C with no padding of C to the tile's K (the small-C stem). Past R*S*C the filter\n"
             "// iterator reads zeros.\n";
    case ConvIter::kCount: break;
  }
  throw std::logic_error("conv emitter: ConvIter " + std::to_string(int(it)) + " has no CUTLASS iterator (invariant: kIterNames)");
}

// Programmatic dependent launch for the emitted kernels, as sabre's native kernels do it
// (backends/native/common.cuh): every kernel launched with the attribute first waits for the one
// before it (griddepcontrol.wait, in every thread, before any early return) and then lets its own
// successor launch. SABRE_PDL=0 launches without the attribute.
std::string pdl_text() {
  std::string o;
  o += "__device__ __forceinline__ void pdl_enter() {\n"
       "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900\n"
       "  asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n"
       "  asm volatile(\"griddepcontrol.launch_dependents;\" ::: \"memory\");\n"
       "#endif\n}\n\n";
  o += detail::pdl_switch();
  o += "// kernel<<<grid, block, smem, stream>>>(args...), with the PDL attribute when pdl_enabled() and `pdl`.\n"
       "template <class... P, class... A>\n"
       "cudaError_t launch(bool pdl, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, A... args) {\n"
       "  cudaLaunchAttribute attr[1];\n"
       "  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;\n"
       "  attr[0].val.programmaticStreamSerializationAllowed = 1;\n"
       "  cudaLaunchConfig_t cfg{};\n"
       "  cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = stream;\n"
       "  cfg.attrs = attr, cfg.numAttrs = pdl && pdl_enabled() ? 1 : 0;\n"
       "  return cudaLaunchKernelEx(&cfg, kernel, args...);\n"
       "}\n\n";
  return o;
}

// Parallel split-K: the conv writes f32 partial sums, one slice after another in the workspace, and
// reduce_slices adds them in slice order and applies the epilogue (conv_algebra) with `act`.
std::string parallel_split_k_types(const ConvSpec& s, const std::string& act) {
  const EpilogueSpec& e = s.epi;
  std::string o;
  o += "// Parallel split-K: kSplits CTAs per output tile, each over every kSplits-th k-tile of R*S*C, store their\n"
       "// f32 partial sums (no scaling) in the workspace, slice after slice ([slice][n*p*q][k]); reduce_slices\n"
       "// then adds the slices in order and applies the epilogue once, to the sum.\n";
  o += "constexpr int kSplits = " + i(s.config.split_k) + ";\n";
  o += "using PartialOp = cutlass::epilogue::thread::LinearCombination<\n"
       "    ElementAccumulator, 4, ElementAccumulator, ElementCompute, cutlass::epilogue::thread::ScaleType::Nothing>;\n";
  o += "using ConvKernel = typename cutlass::conv::kernel::DefaultConv2dFprop<\n"
       "    Element, Layout, Element, Layout, ElementAccumulator, Layout, ElementAccumulator,\n"
       "    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80, ThreadblockShape, WarpShape, InstructionShape,\n"
       "    PartialOp, Swizzle, kStages, cutlass::arch::OpMultiplyAdd, kIterator, kStrides, kAlign, kAlign>::Kernel;\n\n";
  o += "constexpr int kReduceThreads = 128;\n";
  o += "// One thread per 4 consecutive outputs of one pixel (k is a multiple of kAlign, so of 4).\n";
  o += "__global__ void __launch_bounds__(kReduceThreads) reduce_slices(\n"
       "    const float* __restrict__ partials, int64_t count, int64_t k, float alpha, float beta,\n"
       "    const Element* __restrict__ bias, const Element* __restrict__ residual, Element* __restrict__ y) {\n";
  o += "  pdl_enter();\n";
  o += "  const int64_t i = (int64_t(blockIdx.x) * kReduceThreads + threadIdx.x) * 4;\n";
  o += "  if (i >= count) return;\n";
  o += "  float4 part[kSplits];\n";
  o += "  #pragma unroll\n  for (int sl = 0; sl < kSplits; ++sl)\n"
       "    part[sl] = __ldg(reinterpret_cast<const float4*>(partials + sl * count + i));\n";
  o += "  float acc[4] = {part[0].x, part[0].y, part[0].z, part[0].w};\n";
  o += "  #pragma unroll\n  for (int sl = 1; sl < kSplits; ++sl) {\n"
       "    acc[0] += part[sl].x, acc[1] += part[sl].y, acc[2] += part[sl].z, acc[3] += part[sl].w;\n  }\n";
  o += "  " + act + "<ElementCompute> act;\n";
  o += "  const int64_t ch = i % k;\n";
  o += "  cutlass::Array<Element, 4> out;\n";
  if (e.residual != Residual::none)
    o += "  const cutlass::Array<Element, 4> r = *reinterpret_cast<const cutlass::Array<Element, 4>*>(residual + i);\n";
  o += "  #pragma unroll\n  for (int j = 0; j < 4; ++j) {\n";
  o += std::string("    float v = alpha * acc[j]") + (e.bias ? " + float(bias[ch + j])" : "") + ";\n";
  if (e.residual == Residual::before_act)
    o += "    v = act(v + beta * float(r[j]));\n";
  else if (e.residual == Residual::after_act)
    o += "    v = act(v) + beta * float(r[j]);\n";
  else
    o += "    v = act(v);\n";
  o += "    out[j] = Element(v);\n  }\n";
  o += "  *reinterpret_cast<cutlass::Array<Element, 4>*>(y + i) = out;\n";
  o += "}\n\n";
  return o;
}

std::string device_types(const ConvSpec& s) {
  const ConvConfig& c = s.config;
  const EpilogueSpec& e = s.epi;
  std::string o;
  o += "namespace {\n\n";
  o += pdl_text();
  o += "using Element = " + detail::cutlass_elem(s.elem) + ";  // X, W, Y, bias, R\n";
  o += "using Layout = cutlass::layout::TensorNHWC;  // X [n,h,w,c], W [k,r,s,c], Y and R [n,p,q,k]\n";
  o += "using ElementAccumulator = float;\nusing ElementCompute = float;\n";
  o += "constexpr int kAlign = " + i(c.alignment) + ";\n";
  o += "using ThreadblockShape = cutlass::gemm::GemmShape<" + i(c.tile.m) + ", " + i(c.tile.n) + ", " + i(c.tile.k) + ">;\n";
  o += "using WarpShape = cutlass::gemm::GemmShape<" + i(c.warp.m) + ", " + i(c.warp.n) + ", " + i(c.warp.k) + ">;\n";
  o += "using InstructionShape = cutlass::gemm::GemmShape<16, 8, 16>;\n";
  o += "constexpr int kStages = " + i(c.stages) + ";" +
       (c.stages == 2 ? "  // register-pipelined mainloop: no cp.async, any alignment\n" : "\n");
  o += "using Swizzle = cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<4>;\n";
  o += std::string("constexpr auto kIterator = cutlass::conv::IteratorAlgorithm::") + iterator_text(c.iter);
  o += "constexpr auto kStrides = cutlass::conv::StrideSupport::kStrided;  // any stride, not only 1\n\n";
  const std::string act = detail::cutlass_act(e.act);
  o += detail::act_functor_definitions(e.act, s.elem);
  o += "// " + detail::conv_algebra(e) + "\n";
  if (c.split_mode == ConvSplitK::parallel) {
    o += parallel_split_k_types(s, act);
  } else if (e.residual == Residual::none) {
    if (e.bias) o += "// The source tensor C is the bias with all strides 0 (one row, broadcast): Y = act(alpha*acc + C).\n";
    o += "using EpilogueOp = cutlass::epilogue::thread::LinearCombinationGeneric<\n    " + act +
         ", Element, kAlign, ElementAccumulator, ElementCompute,\n    cutlass::epilogue::thread::ScaleType::" +
         (e.bias ? "NoBetaScaling" : "OnlyAlphaScaling") + ", cutlass::FloatRoundStyle::round_to_nearest>;\n";
    o += c.grouped ? "using ConvKernel = typename cutlass::conv::kernel::DefaultConv2dGroupFprop<\n"
                   : "using ConvKernel = typename cutlass::conv::kernel::DefaultConv2dFprop<\n";
  } else {
    const bool before = e.residual == Residual::before_act;
    o += "// The residual block epilogue: Y = Unary(plus(Activation(alpha*acc + bias), beta*R)); the source\n"
         "// tensor C is R, the bias the broadcast vector (read as zeros when absent).\n";
    o += "using EpilogueOp = cutlass::epilogue::thread::LinearCombinationResidualBlock<\n"
         "    Element, ElementAccumulator, ElementCompute, Element, kAlign,\n    " +
         (before ? std::string("cutlass::epilogue::thread::Identity") : act) + ", cutlass::plus,\n    " +
         (before ? act : std::string("cutlass::epilogue::thread::Identity")) + ">;\n";
    o += "using ConvKernel = typename cutlass::conv::kernel::DefaultConv2dFpropWithBroadcast<\n";
  }
  if (c.split_mode != ConvSplitK::parallel)
    o += std::string("    Element, Layout, Element, Layout, Element, Layout, ElementAccumulator,\n"
                     "    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80, ThreadblockShape, WarpShape, InstructionShape,\n"
                     "    EpilogueOp, Swizzle, kStages, cutlass::arch::OpMultiplyAdd, ") +
         (c.grouped ? "\n    cutlass::conv::GroupMode::kSingleGroup,  // each CTA's N tile inside one group\n    " : "") +
         "kIterator, kStrides, kAlign, kAlign>::Kernel;\n";
  o += "using Conv = cutlass::conv::device::ImplicitGemmConvolution<ConvKernel>;\n\n";
  o += "// CUTLASS's cutlass::Kernel<ConvKernel>, entered through pdl_enter: launched with PDL it may start while\n"
       "// the kernel before it drains, and waits for it before touching memory.\n";
  o += "__global__ void conv_kernel(typename ConvKernel::Params params) {\n"
       "  pdl_enter();\n"
       "  extern __shared__ int smem[];\n"
       "  ConvKernel op;\n"
       "  op(params, *reinterpret_cast<typename ConvKernel::SharedStorage*>(smem));\n"
       "}\n\n";
  o += "}  // namespace\n\n";
  return o;
}

std::string host_code(const ConvSpec& s, const EmitOptions& opts, int target_sm) {
  const EpilogueSpec& e = s.epi;
  const bool res = e.residual != Residual::none;
  const std::string n = conv_kernel_name(s);
  std::string o;
  o += "namespace {\n\n";
  o += detail::host_error_plumbing();
  o += "constexpr bool kHasBias = " + std::string(e.bias ? "true" : "false") + ";\n";
  o += "constexpr bool kHasResidual = " + std::string(res ? "true" : "false") + ";\n\n";
  o += "bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % (kAlign * sizeof(Element)) == 0; }\n";
  o += "bool fits(int64_t v) { return v <= INT32_MAX; }\n\n";
  o += "// Why this kernel cannot run these arguments, or nullptr. Covers what CUTLASS leaves to the caller.\n";
  o += "const char* refuse(const sabre_conv_args* p) {\n";
  o += detail::conv_refuse_shape_checks(s.config.grouped);
  o += "  if (!fits(p->n * p->p * p->q) || !fits(p->r * p->s * p->c)) return \"implicit GEMM M = n*p*q or K = r*s*c exceeds int32\";\n";
  if (s.config.iter == ConvIter::few_channels)
    o += "  // The few-channels iterators compute each access's element offset in int32.\n"
         "  if (!fits(p->n * p->h * p->w * p->c) || !fits(p->k * p->r * p->s * p->c))\n"
         "    return \"x or the filter has more than INT32_MAX elements: few_channels offsets are 32-bit\";\n";
  o += detail::conv_refuse_pointer_checks();
  if (s.config.grouped)
    o += "  if ((p->c / p->groups) % kAlign) return \"a group's input channels are not a multiple of the kernel's alignment\";\n"
         "  if ((p->k / p->groups) % ThreadblockShape::kN)\n"
         "    return \"a group's output channels are not a multiple of the tile's N (each CTA works inside one group)\";\n";
  o += "  if (p->c % kAlign) return \"c (input channels) is not a multiple of the kernel's alignment\";\n";
  if (s.config.iter == ConvIter::few_channels)
    o += "  if (p->c > " + std::to_string(kFewChannelsMaxC) +
         ") return \"few_channels kernels are for c <= " + std::to_string(kFewChannelsMaxC) +
         " (one tap's channels per access); wider C runs on the optimized iterator\";\n";
  o += "  if (p->k % kAlign) return \"k (output channels) is not a multiple of the kernel's alignment\";\n";
  o += "  if (!aligned(p->x) || !aligned(p->filter) || !aligned(p->y) || (kHasBias && !aligned(p->bias)) ||\n"
       "      (kHasResidual && !aligned(p->residual)))\n"
       "    return \"a pointer is not aligned to the kernel's access width\";\n";
  o += "  return nullptr;\n}\n\n";
  o += "typename Conv::Arguments make_args(const sabre_conv_args* p) {\n";
  o += "  cutlass::conv::Conv2dProblemSize problem(\n"
       "      int(p->n), int(p->h), int(p->w), int(p->c), int(p->k), int(p->r), int(p->s), int(p->p), int(p->q),\n"
       "      int(p->pad_h), int(p->pad_w), int(p->stride_h), int(p->stride_w), int(p->dil_h), int(p->dil_w),\n"
       "      cutlass::conv::Mode::kCrossCorrelation, /*split_k_slices=*/" + i(s.config.split_k) +
       (s.config.grouped ? ", int(p->groups));\n" : ", /*groups=*/1);\n");
  const bool parallel = s.config.split_mode == ConvSplitK::parallel;
  if (s.config.split_k > 1 && !parallel)
    o += "  // Serial split-K: " + i(s.config.split_k) + " CTAs per output tile over interleaved k-tiles of R*S*C; each adds\n"
         "  // its partial into Y after the one before (a semaphore per tile in the workspace, zeroed by\n"
         "  // initialize), the last applies bias, activation and residual. Deterministic: fixed order.\n";
  o += "  using Ref = cutlass::TensorRef<Element, Layout>;\n";
  o += "  Ref x(static_cast<Element*>(const_cast<void*>(p->x)), Layout::packed({int(p->n), int(p->h), int(p->w), int(p->c)}));\n";
  o += std::string("  Ref w(static_cast<Element*>(const_cast<void*>(p->filter)), Layout::packed({int(p->k), int(p->r), int(p->s), ") +
       (s.config.grouped ? "int(p->c / p->groups)}));  // [k, r, s, c/groups]\n" : "int(p->c)}));\n");
  if (parallel) {
    o += "  // The conv's D is the workspace: kSplits slices of f32 partial sums, each [n,p,q,k]. Its C is not read.\n";
    o += "  using PartialRef = cutlass::TensorRef<ElementAccumulator, Layout>;\n";
    o += "  PartialRef d(static_cast<ElementAccumulator*>(p->workspace), Layout::packed({int(p->n), int(p->p), int(p->q), int(p->k)}));\n";
    o += "  return typename Conv::Arguments(problem, x, w, d, d, {1.0f, 0.0f}, cutlass::conv::SplitKMode::kParallel);\n";
  } else {
    o += "  Ref y(static_cast<Element*>(p->y), Layout::packed({int(p->n), int(p->p), int(p->q), int(p->k)}));\n";
    if (!res) {
      if (e.bias)
        o += "  Ref c(static_cast<Element*>(const_cast<void*>(p->bias)), Layout::packed({0, 0, 0, 0}));  // strides 0: broadcast\n";
      else
        o += "  Ref c(nullptr, Layout::packed({int(p->n), int(p->p), int(p->q), int(p->k)}));  // not read (beta unused)\n";
      o += "  return typename Conv::Arguments(problem, x, w, c, y, {p->alpha, 0.0f});\n";
    } else {
      o += "  Ref r(static_cast<Element*>(const_cast<void*>(p->residual)), Layout::packed({int(p->n), int(p->p), int(p->q), int(p->k)}));\n";
      o += std::string("  void* bias = ") + (e.bias ? "const_cast<void*>(p->bias);\n" : "nullptr;  // broadcast reads zeros\n");
      o += "  return typename Conv::Arguments(problem, x, w, r, y, {p->alpha, p->beta}, cutlass::conv::SplitKMode::kSerial,\n"
           "                                  bias, /*T, not stored*/ nullptr, /*ldr: bias row broadcast*/ 0, 0);\n";
    }
  }
  o += "}\n\n";
  o += "}  // namespace\n\n";
  o += "extern \"C\" {\n\n";
  o += "const char* " + n + "_last_error(void) { return g_last_error.c_str(); }\n\n";
  o += "int " + n + "_can_implement(const sabre_conv_args* p) {\n";
  o += "  if (const char* why = refuse(p)) return fail(SABRE_NOT_SUPPORTED, why);\n";
  o += "  if (p->n == 0) return SABRE_OK;\n";
  o += "  cutlass::Status st = Conv::can_implement(make_args(p));\n";
  o += "  if (st != cutlass::Status::kSuccess)\n"
       "    return fail(SABRE_NOT_SUPPORTED, std::string(\"ImplicitGemmConvolution::can_implement: \") + cutlassGetStatusString(st));\n";
  o += "  return SABRE_OK;\n}\n\n";
  o += "size_t " + n + "_workspace_size(const sabre_conv_args* p) {\n";
  o += "  if (refuse(p) || p->n == 0) return 0;\n";
  o += "  return Conv::get_workspace_size(make_args(p));\n}\n\n";
  o += "int " + n + "_run(const sabre_conv_args* p, sabre_stream_t stream) {\n";
  o += "  if (const char* why = refuse(p)) return fail(SABRE_NOT_SUPPORTED, why);\n";
  o += "  if (p->n == 0) return SABRE_OK;\n";
  o += "  typename Conv::Arguments args = make_args(p);\n";
  o += "  size_t need = Conv::get_workspace_size(args);\n";
  o += detail::workspace_check();
  if (parallel)
    o += "  if (reinterpret_cast<uintptr_t>(p->workspace) % 16)\n"
         "    return fail(SABRE_BAD_ARGS, \"the workspace must be 16-byte aligned (f32 partials are read 4 at a time)\");\n";
  o += "  SABRE_CHECK_CUTLASS(Conv::can_implement(args));\n";
  o += "  // Launched here, not through Conv::initialize and run: the kernel goes through conv_kernel (PDL) and\n"
       "  // initialize would clear the whole workspace, which only serial split-K's semaphores need.\n";
  o += "  typename ConvKernel::Params params(args, static_cast<int*>(p->workspace));\n";
  if (s.config.split_k > 1 && !parallel)
    o += "  SABRE_CHECK_CUDA(cudaMemsetAsync(p->workspace, 0, need, stream));  // the semaphores, one per output tile\n";
  o += "  const dim3 grid = Swizzle().get_grid_shape(params.grid_tiled_shape);\n";
  o += "  const int smem = int(sizeof(typename ConvKernel::SharedStorage));\n";
  o += "  if (smem >= (48 << 10))\n"
       "    SABRE_CHECK_CUDA(cudaFuncSetAttribute(conv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));\n";
  // After serial split-K's memset the kernel waits as it always did (a programmatic edge is between kernels).
  o += std::string("  SABRE_CHECK_CUDA(launch(/*pdl=*/") + (s.config.split_k > 1 && !parallel ? "false" : "true") +
       ", conv_kernel, grid, dim3(32 * Conv::kWarpCount), smem, stream, params));\n";
  if (parallel) {
    o += "  const int64_t count = p->n * p->p * p->q * p->k;\n";
    o += "  const int64_t blocks = (count / 4 + kReduceThreads - 1) / kReduceThreads;\n";
    o += "  SABRE_CHECK_CUDA(launch(/*pdl=*/true, reduce_slices, dim3(unsigned(blocks)), dim3(kReduceThreads), 0, stream,\n"
         "      static_cast<const float*>(p->workspace), count, p->k, p->alpha, p->beta, static_cast<const Element*>(p->bias),\n"
         "      static_cast<const Element*>(p->residual), static_cast<Element*>(p->y)));\n";
  }
  o += "  return SABRE_OK;\n}\n\n";
  o += support::signature_function(n, conv_kernel_signature(s, target_sm));
  if (opts.registry) o += detail::conv_registry(n);
  o += "}  // extern \"C\"\n";
  return o;
}

}  // namespace

support::KernelSignature conv_kernel_signature(const ConvSpec& s, int target_sm) {
  const std::string e(elem_name(s.elem));
  // Grouped kernels share the plain ones' signature: both read the same tensors, and what tells them
  // apart (groups) each kernel's refuse() checks at run time.
  return {"conv", e, e, "nhwc", epilogue_name(s.epi), s.config.alignment, "sm_" + std::to_string(target_sm)};
}

std::vector<std::string> conv_gencode_flags(int target_sm) {
  std::string sm = std::to_string(target_sm);
  return {"-gencode", "arch=compute_" + sm + ",code=sm_" + sm};
}

std::string emit_conv_kernel(const ConvSpec& s, int target_sm, const EmitOptions& opts) {
  if (auto why = conv_unsupported_reason(s, target_sm))
    throw std::invalid_argument("kernel " + conv_kernel_name(s) + " cannot run on sm_" + std::to_string(target_sm) +
                                ": " + *why);
  std::string o;
  o += "// Generated by sabre; do not edit. Kernel: " + conv_kernel_name(s) + "\n";
  o += "// " + detail::conv_algebra(s.epi) + "; X [n,h,w,c] NHWC, W [k,r,s,c] KRSC, Y and R [n,p,q,k] NHWC.\n";
  o += "// Build: nvcc -std=c++17 -O3 --expt-relaxed-constexpr";
  for (const auto& f : conv_gencode_flags(target_sm)) o += " " + f;
  o += " -I<cutlass>/include -I<sabre>/include -DNDEBUG -Xcompiler -fPIC -shared\n";
  o += "#include <cstdint>\n#include <cstdlib>\n#include <string>\n#include <utility>\n\n#include <cuda_runtime.h>\n\n";
  o += "#include \"cutlass/cutlass.h\"\n";
  o += "#include \"cutlass/conv/conv2d_problem_size.h\"\n";
  o += "#include \"cutlass/conv/device/implicit_gemm_convolution.h\"\n";
  const bool parallel = s.config.split_mode == ConvSplitK::parallel;
  const bool broadcast = s.epi.residual != Residual::none && !parallel;  // the residual block epilogue
  o += broadcast           ? "#include \"cutlass/conv/kernel/default_conv2d_fprop_with_broadcast.h\"\n"
       : s.config.grouped ? "#include \"cutlass/conv/kernel/default_conv2d_group_fprop.h\"\n"
                          : "#include \"cutlass/conv/kernel/default_conv2d_fprop.h\"\n";
  o += "#include \"cutlass/epilogue/thread/activation.h\"\n";
  o += parallel ? "#include \"cutlass/epilogue/thread/linear_combination.h\"\n"
      : broadcast ? "#include \"cutlass/epilogue/thread/linear_combination_residual_block.h\"\n"
                  : "#include \"cutlass/epilogue/thread/linear_combination_generic.h\"\n";
  o += "#include \"cutlass/functional.h\"\n";
  o += "#include \"cutlass/gemm/threadblock/threadblock_swizzle.h\"\n";
  o += "#include \"sabre/kernel_abi.h\"\n\n";
  o += "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800\n#error \"sm80 conv kernels need compute capability 8.0 or newer\"\n#endif\n\n";
  o += device_types(s);
  o += host_code(s, opts, target_sm);
  return o;
}

}  // namespace sabre::cutlass_backend
