// sabre's own CUDA kernels for every op the CUTLASS pattern table does not take.
//
// A plain host API over device pointers: no Graph, no Node, only dtypes, dims as int64 arrays
// and a stream, so the runtime layer can call it. Every function enqueues work on `stream`,
// never synchronizes, and returns cudaSuccess, cudaErrorInvalidValue / cudaErrorNotSupported for
// arguments it cannot take (last_error_message() says why), or the launch's CUDA error.
// Storage is f32/f16/bf16 (plus integers and bool where noted); math is f32.
// Tests: tests/gpu/native_kernels_test.cpp (against the CPU reference executor)
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backends/native/conv_act.h"
#include "backends/native/elementwise.h"
#include "backends/native/stem_conv.h"
#include "ir/dtype.h"

namespace sabre::native {

using ir::DType;

// The message of the last failing call on this thread: what was wrong, or which CUDA
// statement failed where (statement, file, line).
const std::string& last_error_message();

// ---- Elementwise chains (elementwise.h builds them) -------------------------------------
// Runs `chain` with the interpreter kernel. Shapes broadcast like numpy; outputs are dense
// with `out_dims`. Use it where no generated kernel was compiled for the chain.
cudaError_t elementwise_run(const ElementwiseChain& chain, const std::vector<int64_t>& out_dims,
                            const std::vector<std::vector<int64_t>>& in_dims, const std::vector<const void*>& in,
                            const std::vector<void*>& out, cudaStream_t stream);
// Same, with bytecode and parameters prepared ahead (what a runtime plan stores).
cudaError_t elementwise_run(const SabreEwProgram& program, const SabreEwParams& params, cudaStream_t stream);

// Where(cond, a, b) and Cast: one-node chains through the interpreter.
cudaError_t where(DType dt, const void* cond, const std::vector<int64_t>& cond_dims, const void* a,
                  const std::vector<int64_t>& a_dims, const void* b, const std::vector<int64_t>& b_dims, void* y,
                  const std::vector<int64_t>& y_dims, cudaStream_t stream);
cudaError_t cast(DType from, DType to, const void* x, void* y, int64_t n, cudaStream_t stream);

// ---- Run-time values (fill.cu) ------------------------------------------------------------
// y[i] = values[i] (or values[0] for every i when one value is given); integer or bool y.
constexpr int kMaxFillValues = 16;
cudaError_t fill_values(DType dt, void* y, int64_t n, const std::vector<int64_t>& values, cudaStream_t stream);
// y[i] = start + i * delta, i < n (ONNX Range); y is i64, i32 or f32.
cudaError_t iota(DType dt, void* y, int64_t n, double start, double delta, cudaStream_t stream);

// ---- Softmax over the last axis ----------------------------------------------------------
// x, y: [rows, cols] with rows = b * h * q (the leading dims of a [B, H, Q, K] score tensor; any
// other shape passes b = h = 1, q = rows). y = softmax(scale * x + mask) along cols, where the
// additive mask (optional) element for (b, h, q, k) is mask[b*mask_stride[0] + h*mask_stride[1] +
// q*mask_stride[2] + k]: strides 0 broadcast, so [B,1,1,K] is {K, 0, 0}, [B,1,Q,K] is {Q*K, 0, K}
// and [Q,K] is {0, 0, K}. causal: k > q + (cols - q_len) is masked out. Rows that are fully masked
// give zeros. mask_dtype: the x dtype or f32.
struct SoftmaxArgs {
  DType dtype = DType::f16;
  const void* x = nullptr;
  void* y = nullptr;
  int64_t b = 1, h = 1, q = 1, cols = 0;
  float scale = 1.f;
  const void* mask = nullptr;
  DType mask_dtype = DType::f32;
  int64_t mask_stride[3] = {0, 0, 0};
  bool causal = false;
  bool log = false;  // LogSoftmax: y = (scale * x + mask) - log(sum of exp) along cols
};
cudaError_t softmax(const SoftmaxArgs& a, cudaStream_t stream);

// ---- Grouped and depthwise convolution (grouped_conv.cu) -------------------------------------
// y[n,p,q,c] = bias[c] + sum_{r,s} x[n, p*stride_h - pad_h + r*dil_h, q*stride_w - pad_w + s*dil_w, c]
// * w[r,s,c]: NHWC x and y, the filter [R,S,C] (ONNX's [C,1,R,S] transposed at compile time),
// out-of-range taps zero, f32 accumulation. Bias optional.
// Grouped (`groups` G, `k` K output channels; 0 for both: depthwise, G = K = C): output channel k of
// group g = k / (K/G) sums over the group's C/G input channels g*C/G + j,
// y[n,p,q,k] = bias[k] + sum_{r,s,j} x[n, ih, iw, g*C/G + j] * w[r,s,j,k], the filter [R,S,C/G,K]
// (ONNX's [K,C/G,R,S] transposed at compile time; for depthwise the same bytes as [R,S,C]).
// Epilogue on the f32 sum v: y = act(v + residual) or, with residual_after_act, act(v) + residual;
// residual (optional) is NHWC [n,p,q,K] in the same dtype.
// One kernel template runs both: a tiled body for every shape (a block stages an input window and
// its groups' filter slice in shared memory and reuses them over a tile of output pixels x output
// channels) and, specialised from it, a vector body for depthwise convs whose C is a multiple of
// 16 bytes with aligned pointers.
// tensor_core: the implicit GEMM of one group on WMMA fragments (f16/bf16, multiples of 8 channels a
// group in and out); only where asked for (here, or SABRE_GROUPED_TC=1 in the environment for
// automatic) until it has passed its GPU tests.
enum class GroupedConvKernel { automatic, depthwise_vec, tiled, tensor_core };
const char* grouped_conv_kernel_name(GroupedConvKernel k);  // "auto", "depthwise_vec", "tiled", "tensor_core"
struct DepthwiseArgs {
  DType dtype = DType::f16;
  const void *x = nullptr, *w = nullptr, *bias = nullptr;
  void* y = nullptr;
  int64_t n = 0, h = 0, w_ = 0, c = 0, r = 1, s = 1, p = 0, q = 0;
  int64_t k = 0, groups = 0;  // 0: depthwise (k = groups = c)
  int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  // A fused activation y = min(max(conv + bias, clamp_min), clamp_max) (Relu: 0, +inf; ReLU6: 0, 6),
  // applied only when `clamp` is set (so an unfused conv passes NaN through as the reference does);
  // or silu: v * sigmoid(v). At most one of the two.
  bool clamp = false;
  float clamp_min = 0.f, clamp_max = 0.f;
  // A fused activation of v = conv + bias, applied before the clamp: SiLU/Swish v·sigmoid(alpha·v),
  // sigmoid(v), hard_swish v·clamp(alpha·v + beta, 0, 1), hard_sigmoid clamp(alpha·v + beta, 0, 1).
  ConvAct act = ConvAct::none;
  float act_alpha = 1.f, act_beta = 0.f;
  const void* residual = nullptr;
  bool residual_after_act = false;
  // automatic: the vector body where it applies, else the tiled one. The others force one (tests,
  // benchmarks); depthwise_vec where it does not apply is refused.
  GroupedConvKernel kernel = GroupedConvKernel::automatic;
};
cudaError_t depthwise_conv2d(const DepthwiseArgs& a, cudaStream_t stream);

// ---- Fused attention (attention.cu; emitted by sabre compile --fuse-attention) ---------------
// O[b,h,i,:] = sum_j softmax_j(scale * Q[b,h,i,:]·K[b,g,j,:] + mask[b,h,i,j]) V[b,g,j,:] with g = h / kv_group
// (grouped-query attention: kv_group query heads share each K/V head; 1 without), element
// (b, h, row, col) of X at X[b*x_stride[0] + h*x_stride[1] + row*x_stride[2] + col] (BERT's
// [batch, seq, heads*64] GEMM outputs read directly: {seq*768, 64, 768}). Mask as softmax's
// (strides over b, h, q; keys contiguous); causal as softmax's; fully masked rows give zeros.
// An i64 mask selects instead of adding its value: mask_true where the element is nonzero, else
// mask_false (ONNX Where(Cast<bool>(mask), t, f), the additive mask HF models build from their
// attention_mask input, read from that input as it is: the elementwise step before it goes).
// A window mask that repeats over a batch of images (Swin's [nW, Q, K] shift mask under scores
// [B·nW, h, Q, K]): mask_batch_inner = nW makes the batch offset (b % nW)·mask_stride[0] +
// (b / nW)·mask_batch_outer instead of b·mask_stride[0].
// Head dim a multiple of 4 up to kMaxAttentionHeadDim, f16/bf16, Q/K/V 8-byte aligned with strides in
// multiples of 4 (head dims 32 and 64 16-byte aligned with strides in multiples of 8 take the
// unpadded kernels; the others are padded in shared memory to 48, 64, 96 or 128); keys up to
// kMaxAttentionKeys, walked in tiles with an online softmax (key indices are ints);
// attention_unsupported says why not ("" when supported).
constexpr int64_t kMaxAttentionKeys = int64_t{1} << 20;
constexpr int64_t kMaxAttentionHeadDim = 128;
// Which kernel attention() runs. automatic: attention.cu's, its block shape by grid size; the plan
// and the runtime always ask for it. The others force one, for tests and benchmarks: rowsN_splitS a
// block of N query rows whose warps split each key tile S ways. SABRE_ATTN=r16x4|r32x2|r64|r128|r128w4 in the
// environment makes automatic mean that shape (an A/B switch for whole models; read once).
// rows128_w4: 128 rows in 4 warps of 32 (two MMA row tiles a warp).
enum class AttentionKernel { automatic, rows16_split4, rows32_split2, rows64, rows128, rows128_w4 };
// Each kernel's short name, as the GPU tests, native_bench and SABRE_ATTN spell it.
inline constexpr std::pair<AttentionKernel, const char*> kAttentionKernelNames[] = {
    {AttentionKernel::automatic, "auto"},   {AttentionKernel::rows16_split4, "r16x4"},
    {AttentionKernel::rows32_split2, "r32x2"}, {AttentionKernel::rows64, "r64"},
    {AttentionKernel::rows128, "r128"}, {AttentionKernel::rows128_w4, "r128w4"}};
struct AttentionArgs {
  DType dtype = DType::f16;
  const void *q = nullptr, *k = nullptr, *v = nullptr;
  void* o = nullptr;
  int64_t b = 1, h = 1, sq = 0, sk = 0, d = 64;
  int64_t kv_group = 1;  // query heads a K/V head serves; h is a multiple of it
  int64_t q_stride[3] = {0, 0, 0}, k_stride[3] = {0, 0, 0}, v_stride[3] = {0, 0, 0}, o_stride[3] = {0, 0, 0};
  float scale = 1.f;
  const void* mask = nullptr;
  DType mask_dtype = DType::f32;  // f32, the dtype, or i64 (a select mask)
  int64_t mask_stride[3] = {0, 0, 0};
  int64_t mask_batch_inner = 0, mask_batch_outer = 0;  // a window mask repeating over the batch (above)
  float mask_true = 0.f, mask_false = 0.f;  // an i64 mask's values where it is nonzero / zero
  bool causal = false;
  AttentionKernel kernel = AttentionKernel::automatic;
};
std::string attention_unsupported(const AttentionArgs& a);
cudaError_t attention(const AttentionArgs& a, cudaStream_t stream);

// ---- LayerNormalization over the last axis -------------------------------------------------
// y = (s - mean(s)) / sqrt(var(s) + eps) * gamma + beta with s = x + residual (residual optional;
// BERT always adds one). Statistics in f32. gamma/beta: [cols] in `dtype` (beta optional).
// sum_out (optional) receives s, for the next residual branch.
struct LayerNormArgs {
  DType dtype = DType::f16;
  const void* x = nullptr;
  const void* residual = nullptr;
  const void* gamma = nullptr;
  const void* beta = nullptr;
  void* y = nullptr;
  void* sum_out = nullptr;
  float* y_f32 = nullptr;  // optional: y again in f32 (a model output; the cast step it replaces)
  int64_t rows = 0, cols = 0;
  float eps = 1e-5f;
};
cudaError_t layernorm(const LayerNormArgs& a, cudaStream_t stream);

// ---- Embedding sum + LayerNormalization (BERT's embeddings) ----------------------------------
// y[r] = LayerNorm(sum over terms t of table_t[id_t(r)]) * gamma + beta, one kernel for what the
// graph spells as Gathers of embedding tables, Adds and a LayerNorm. Rows are the row-major
// multi-index c over row_dims; term t's id is ids_t[offset_t + sum_i c_i * strides_t[i]] (strides
// in elements, 0 broadcasts: BERT's position ids [1, seq] are a slice of a constant buffer read in
// place). Negative ids count from the end of the table; ids outside it add zeros (as Gather's).
// The sum and the statistics stay in f32. Tables, gamma, beta and y in `dtype`; ids i64 or i32.
constexpr int kMaxEmbedTerms = 4, kMaxEmbedRank = 4;
struct EmbedTerm {
  const void* table = nullptr;  // [vocab, cols]
  const void* ids = nullptr;
  DType ids_dtype = DType::i64;
  int64_t vocab = 0;
  int64_t offset = 0;
  int64_t strides[kMaxEmbedRank] = {0, 0, 0, 0};
};
struct EmbedLayerNormArgs {
  DType dtype = DType::f16;
  EmbedTerm terms[kMaxEmbedTerms];
  int num_terms = 0;
  int64_t row_dims[kMaxEmbedRank] = {1, 1, 1, 1};
  int rank = 0;
  int64_t cols = 0;
  const void* gamma = nullptr;
  const void* beta = nullptr;  // optional
  void* y = nullptr;
  float eps = 1e-5f;
};
cudaError_t embed_layernorm(const EmbedLayerNormArgs& a, cudaStream_t stream);

// ---- Reductions ----------------------------------------------------------------------------
// l1 = sum |x|, l2 = sqrt(sum x^2), log_sum = log(sum x), log_sum_exp = log(sum e^x) (shifted by the max).
// argmax / argmin (one axis; *_last: the last of equal extremes) write y as int64 indices.
enum class ReduceOp : uint8_t {
  sum, mean, max, min, prod, sum_square, l1, l2, log_sum, log_sum_exp, argmax, argmin, argmax_last, argmin_last, kCount
};
// Reduces x (dense, `dims`) over `axes` (any order, negative allowed; empty = all) into a dense
// y whose dims are x's without the reduced axes (keepdims changes no bytes). f32/f16/bf16.
cudaError_t reduce(ReduceOp op, DType dt, const void* x, const std::vector<int64_t>& dims,
                   const std::vector<int64_t>& axes, void* y, cudaStream_t stream);

// ---- Data movement (dtype-agnostic: element size only) ------------------------------------
// y = x transposed by `perm` (ONNX Transpose). Tiled through shared memory when the innermost
// axis moves; row copies, vectorized, when it stays.
cudaError_t permute(size_t elem_size, const void* x, const std::vector<int64_t>& dims,
                    const std::vector<int64_t>& perm, void* y, cudaStream_t stream);
// The NCHW -> NHWC conversion at a conv region's edge (layout.cu): y[n,h,w,k] = x[n,k,h,w] for
// k < c and 0 for c <= k < c_pad, converted from x_dtype to y_dtype (f32/f16/bf16, rounded as
// cast() rounds, so the result equals cast then permute bit for bit). x [n,c,h,w] and y
// [n,h,w,c_pad] dense. Zero padding lets a conv whose C breaks the 16-byte access (C = 3) run on
// the aligned kernels with zero filter taps in the new channels.
cudaError_t nchw_to_nhwc(DType x_dtype, DType y_dtype, const void* x, int64_t n, int64_t c, int64_t h, int64_t w,
                         int64_t c_pad, void* y, cudaStream_t stream);
// im2col at the NCHW boundary (im2col.cu): the A operand of the GEMM a small-channel conv (the RGB
// stem) runs as. a [n·p·q, cols] row-major, row (n·P + p)·Q + q, column (r·S + s)·C + c:
// a[row, col] = x[n, c, p·stride_h - pad_h + r·dil_h, q·stride_w - pad_w + s·dil_w] converted from
// x_dtype to a_dtype (f32/f16/bf16, rounded as cast()), 0 where the tap falls in the padding and in
// the columns from r·S·C to cols (cols >= r·s·c: the row rounded up to the 16-byte access, so the
// GEMM's K is aligned). x [n,c,h,w] dense, read as it is; p and q are the caller's (any tap outside
// x reads 0).
struct Im2colArgs {
  DType x_dtype = DType::f32, a_dtype = DType::f16;
  const void* x = nullptr;
  void* a = nullptr;
  int64_t n = 0, c = 0, h = 0, w = 0, r = 1, s = 1, p = 0, q = 0, cols = 0;
  int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
};
cudaError_t im2col(const Im2colArgs& a, cudaStream_t stream);
// The small-channel conv at the NCHW boundary in one kernel (stem_conv.cu; StemConvArgs and the
// rules in stem_conv.h): im2col in shared memory, tensor-core products, bias and clamp, NHWC out.
cudaError_t stem_conv(const StemConvArgs& a, cudaStream_t stream);
// Asks the L2 to fetch [p, p + bytes) from memory (a hint: reads nothing back, writes nothing);
// p 16-byte aligned. The runtime prefetches a GEMM's weights this way (docs/RUNTIME.md section 5).
cudaError_t l2_prefetch(const void* p, size_t bytes, cudaStream_t stream);
// Any strided read into a dense output: y[i...] = x[offset + sum_k i_k * strides[k]] (elements,
// strides may be 0 or negative). Slice, Expand and general permutes reduce to this.
cudaError_t strided_copy(size_t elem_size, const void* x, int64_t offset, const std::vector<int64_t>& out_dims,
                         const std::vector<int64_t>& strides, void* y, cudaStream_t stream);
// ONNX Slice with steps: starts/ends/axes/steps as in the op after clamping rules are applied
// here. `out_dims` receives the result shape (callers size y with it beforehand via
// slice_shape()).
std::vector<int64_t> slice_shape(const std::vector<int64_t>& dims, const std::vector<int64_t>& starts,
                                 const std::vector<int64_t>& ends, const std::vector<int64_t>& axes,
                                 const std::vector<int64_t>& steps);
cudaError_t slice(size_t elem_size, const void* x, const std::vector<int64_t>& dims,
                  const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                  const std::vector<int64_t>& axes, const std::vector<int64_t>& steps, void* y,
                  cudaStream_t stream);
// Concat along `axis` of inputs with equal dims except on that axis.
cudaError_t concat(size_t elem_size, const std::vector<const void*>& xs, const std::vector<std::vector<int64_t>>& dims,
                   int64_t axis, void* y, cudaStream_t stream);
// Split x along `axis` into parts of `sizes` (summing to dims[axis]).
cudaError_t split(size_t elem_size, const void* x, const std::vector<int64_t>& dims, int64_t axis,
                  const std::vector<int64_t>& sizes, const std::vector<void*>& ys, cudaStream_t stream);
// ONNX Gather: y = x indexed along `axis` by `indices` (i64 or i32, negatives count from the
// end; out-of-range indices give zeros, a GPU cannot throw). y dims: x[:axis] + idx + x[axis+1:].
cudaError_t gather(size_t elem_size, const void* x, const std::vector<int64_t>& dims, int64_t axis,
                   const void* indices, DType index_dtype, int64_t num_indices, void* y, cudaStream_t stream);

// ---- Pooling (2-D) -------------------------------------------------------------------------
enum class PoolKind : uint8_t { max, average };
enum class Layout : uint8_t { nchw, nhwc };
struct PoolArgs {
  PoolKind kind = PoolKind::max;
  Layout layout = Layout::nchw;
  DType dtype = DType::f16;
  const void* x = nullptr;
  void* y = nullptr;
  int64_t n = 1, c = 1, h = 1, w = 1;  // input
  int64_t out_h = 1, out_w = 1;         // from pool_output_dims()
  int64_t kernel[2] = {1, 1}, stride[2] = {1, 1}, dilation[2] = {1, 1};
  int64_t pad_begin[2] = {0, 0}, pad_end[2] = {0, 0};
  bool count_include_pad = false;  // AveragePool only
};
// ONNX output size (floor or ceil mode); fills a.out_h/out_w.
void pool_output_dims(PoolArgs& a, bool ceil_mode);
cudaError_t pool2d(const PoolArgs& a, cudaStream_t stream);
// Mean over H and W: y is [N, C] (NCHW or NHWC x).
cudaError_t global_average_pool(DType dt, Layout layout, const void* x, int64_t n, int64_t c, int64_t h, int64_t w,
                                void* y, cudaStream_t stream);

}  // namespace sabre::native
