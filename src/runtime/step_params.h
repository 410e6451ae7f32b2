// Typed step parameters: one struct per step kind (StepKind), the plan's "params" object of that
// kind field for field (docs/RUNTIME.md section 3). The compiler builds these structs and writes
// them with to_json; the runtime reads them once, when it loads a plan (parse_step_params), and the
// launch functions read the struct. Each struct lists its fields once (`fields`), and the codec in
// step_params.cpp reads, writes and compares every struct through that list.
//
// A field the runtime once defaulted is a std::optional (absent: the default, as before); a field
// it needs has no optional and its absence is a load error naming the step and the field. Keys a
// struct does not list are ignored on load. Adding a kind: its struct here (and its place in
// StepParams), its enumerator and name below, its launch in session_steps.cpp, its emission in the
// compiler (codegen/passes/emit_*.cpp).
// Tests: tests/unit/runtime_step_params_test.cpp
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "backends/native/conv_act.h"
#include "backends/native/elementwise.h"
#include "runtime/plan_dims.h"
#include "support/json.h"

namespace sabre::runtime {

// The kinds, in the order of StepParams' alternatives.
enum class StepKind : uint8_t {
  gemm,
  conv,
  softmax,
  layernorm,
  embed_layernorm,
  elementwise,
  where,
  cast,
  reduce,
  permute,
  slice,
  strided_copy,
  concat,
  split,
  gather,
  pool2d,
  global_average_pool,
  copy,
  reshape,
  fill,
  iota,
  depthwise_conv,
  attention,
  nchw_to_nhwc,
  im2col,
  stem_conv,
  grouped_conv,
  gather_elements,
  trilu,
  cumsum,
  count  // not a kind: the number of kinds
};

inline constexpr size_t kStepKindCount = static_cast<size_t>(StepKind::count);

// The names a plan spells the kinds with, indexed by StepKind (step_kind.h: to_string, step_kind).
inline constexpr std::array<const char*, kStepKindCount> kStepKindNames = {
    "gemm",   "conv",          "softmax",      "layernorm", "embed_layernorm", "elementwise",
    "where",  "cast",          "reduce",       "permute",   "slice",           "strided_copy",
    "concat", "split",         "gather",       "pool2d",    "global_average_pool", "copy",
    "reshape", "fill",         "iota",         "depthwise_conv", "attention",  "nchw_to_nhwc",
    "im2col", "stem_conv",     "grouped_conv", "gather_elements", "trilu", "cumsum"};
static_assert(kStepKindNames.size() == kStepKindCount);
static_assert(kStepKindNames.back() != nullptr, "a StepKind without a name");
const char* to_string(StepKind k);

using Dims = std::map<std::string, int64_t>;

// A dim in a step's params: a dim string ("batch*seq", evaluated per call) or a whole JSON number,
// kept in the form it is written in so that a plan reads and writes back byte for byte.
class ParamDim {
 public:
  ParamDim() = default;  // the number 0
  ParamDim(int64_t v) : number_(v) {}  // NOLINT: written as a JSON number
  // Written as a string; throws PlanError on text that is not a dim.
  static ParamDim text(const std::string& s);
  int64_t eval(const Dims& dims) const { return is_text_ ? expr_.eval(dims) : number_; }
  bool is_text() const { return is_text_; }
  json::Value to_json() const;
  bool operator==(const ParamDim& o) const {
    return is_text_ == o.is_text_ && (is_text_ ? text_ == o.text_ : number_ == o.number_);
  }

 private:
  bool is_text_ = false;
  int64_t number_ = 0;
  std::string text_;
  DimExpr expr_;
};
using ParamDims = std::vector<ParamDim>;
// Each as a JSON number (the compiler's attribute lists: pads, perm, axes, ...).
ParamDims param_numbers(const std::vector<int64_t>& v);
std::vector<int64_t> eval_dims(const ParamDims& v, const Dims& dims);
inline std::vector<int64_t> eval_dims(const std::optional<ParamDims>& v, const Dims& dims) {
  return v ? eval_dims(*v, dims) : std::vector<int64_t>{};
}

// One entry of a gemm or conv step's kernel table: the kernel for M up to max_m (-1: any M).
struct DispatchEntry {
  int64_t max_m = -1;
  std::string kernel;
  bool operator==(const DispatchEntry&) const = default;
};
using DispatchTable = std::vector<DispatchEntry>;

// A fused Relu/Clip (depthwise_conv, grouped_conv, stem_conv): [lo, hi], an infinite bound written
// as null (JSON has no infinity). Loading refuses lo above hi.
struct ClampParam {
  double lo = -INFINITY, hi = INFINITY;
  bool operator==(const ClampParam&) const = default;
};

// A 2-D window (conv, pool, im2col): ONNX's pads [top, left, bottom, right], strides and dilations,
// and the output extent they give. The one place the conv geometry is worked out: the compiler
// checks a conv against it and writes its lists, the runtime checks the step's dims with it.
struct Window2d {
  int64_t pads[4] = {0, 0, 0, 0};
  int64_t strides[2] = {1, 1};
  int64_t dilations[2] = {1, 1};
  // From lists as ONNX and the plan spell them (empty: the default); nullopt where a list is not
  // 2-D (pads [4], strides [2], dilations [2]).
  static std::optional<Window2d> from_lists(const std::vector<int64_t>& pads, const std::vector<int64_t>& strides,
                                            const std::vector<int64_t>& dilations);
  bool symmetric() const { return pads[0] == pads[2] && pads[1] == pads[3]; }
  // The output extent along dim i (0: h, 1: w) of an input extent `in` under a filter extent `f`;
  // -1 where the stride is not positive.
  int64_t out_extent(int i, int64_t in, int64_t f) const {
    return strides[i] > 0 ? (in + pads[i] + pads[i + 2] - dilations[i] * (f - 1) - 1) / strides[i] + 1 : -1;
  }
};

// A fused activation of a native grouped conv, applied before its clamp (native/conv_act.h):
// {"op": silu|sigmoid|hard_swish|hard_sigmoid, "alpha": a, "beta": b}; alpha and beta absent: 1, 0.
struct ActivationParam {
  native::ConvAct op = native::ConvAct::none;
  std::optional<double> alpha, beta;
  bool operator==(const ActivationParam&) const = default;
};

// A reduce step's reduction, by the names plans use; the order is native::ReduceOp's.
enum class ReduceKind : uint8_t {
  sum, mean, max, min, prod, sum_square, l1, l2, log_sum, log_sum_exp, argmax, argmin, argmax_last, argmin_last, count
};
inline constexpr std::array<const char*, static_cast<size_t>(ReduceKind::count)> kReduceKindNames = {
    "sum", "mean", "max",         "min",    "prod",   "sum_square",  "l1",
    "l2",  "log_sum", "log_sum_exp", "argmax", "argmin", "argmax_last", "argmin_last"};
static_assert(kReduceKindNames.back() != nullptr, "a ReduceKind without a name");

// A pool2d step's window reduction and the storage order of a pooled tensor.
enum class PoolMode : uint8_t { max, average, count };
inline constexpr std::array<const char*, static_cast<size_t>(PoolMode::count)> kPoolModeNames = {"max", "average"};
enum class TensorLayout : uint8_t { nchw, nhwc, count };
inline constexpr std::array<const char*, static_cast<size_t>(TensorLayout::count)> kTensorLayoutNames = {"nchw", "nhwc"};

// ---- one struct per kind, in StepKind order ----

// D[m,n] = epilogue(alpha·A[m,k]·B + beta·R + bias) through a kernel library, batched.
struct GemmParams {
  ParamDim m, n, k;
  std::optional<ParamDim> batch, lda, ldb, ldd, ldr, stride_a, stride_b, stride_d, stride_r;
  std::optional<ParamDim> a_offset, b_offset, bias_offset, r_offset, d_offset;
  std::optional<double> alpha, beta;
  std::optional<std::string> dtype, layout, epilogue, pattern;
  DispatchTable dispatch;
  std::optional<DispatchTable> dispatch_aligned;
  std::optional<int64_t> aligned_to;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("m", s.m), v("n", s.n), v("k", s.k), v("batch", s.batch), v("lda", s.lda), v("ldb", s.ldb), v("ldd", s.ldd);
    v("ldr", s.ldr), v("stride_a", s.stride_a), v("stride_b", s.stride_b), v("stride_d", s.stride_d);
    v("stride_r", s.stride_r), v("a_offset", s.a_offset), v("b_offset", s.b_offset), v("bias_offset", s.bias_offset);
    v("r_offset", s.r_offset), v("d_offset", s.d_offset), v("alpha", s.alpha), v("beta", s.beta);
    v("dtype", s.dtype), v("layout", s.layout), v("epilogue", s.epilogue), v("pattern", s.pattern);
    v("dispatch", s.dispatch), v("dispatch_aligned", s.dispatch_aligned), v("aligned_to", s.aligned_to);
  }
  void check(const std::string& where) const;
  bool operator==(const GemmParams&) const = default;
};

// An implicit-GEMM conv through a kernel library: x [n,h,w,c] NHWC, filter KRSC, y [n,p,q,k].
struct ConvParams {
  ParamDim n, h, w, c, k, r, s, p, q;
  std::optional<ParamDims> pads, strides, dilations;
  std::optional<ParamDim> groups;
  std::optional<double> alpha, beta;
  std::optional<std::string> dtype, epilogue, pattern;
  DispatchTable dispatch;
  std::optional<DispatchTable> dispatch_aligned;
  std::optional<int64_t> aligned_to;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("n", s.n), v("h", s.h), v("w", s.w), v("c", s.c), v("k", s.k), v("r", s.r), v("s", s.s), v("p", s.p);
    v("q", s.q), v("pads", s.pads), v("strides", s.strides), v("dilations", s.dilations), v("groups", s.groups);
    v("alpha", s.alpha), v("beta", s.beta), v("dtype", s.dtype), v("epilogue", s.epilogue), v("pattern", s.pattern);
    v("dispatch", s.dispatch), v("dispatch_aligned", s.dispatch_aligned), v("aligned_to", s.aligned_to);
  }
  void check(const std::string& where) const;
  bool operator==(const ConvParams&) const = default;
};

// Row softmax of x viewed as [b,h,q,cols], scaled, optionally causal and masked.
struct SoftmaxParams {
  std::optional<ParamDim> b, h, q, cols;
  std::optional<double> scale;
  std::optional<bool> causal, log;  // log: LogSoftmax
  std::optional<ParamDims> mask_stride;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("b", s.b), v("h", s.h), v("q", s.q), v("cols", s.cols), v("scale", s.scale), v("causal", s.causal);
    v("log", s.log), v("mask_stride", s.mask_stride);
  }
  bool operator==(const SoftmaxParams&) const = default;
};

struct LayerNormParams {
  std::optional<ParamDim> rows, cols;
  std::optional<double> eps;
  std::optional<bool> f32_copy;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("rows", s.rows), v("cols", s.cols), v("eps", s.eps), v("f32_copy", s.f32_copy);
  }
  bool operator==(const LayerNormParams&) const = default;
};

// LayerNorm of a sum of embedding rows; strides: one per term and row dim.
struct EmbedLayerNormParams {
  ParamDims row_dims, offsets, strides;
  ParamDim cols;
  std::optional<double> eps;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("row_dims", s.row_dims), v("offsets", s.offsets), v("strides", s.strides), v("cols", s.cols), v("eps", s.eps);
  }
  bool operator==(const EmbedLayerNormParams&) const = default;
};

// A fused elementwise chain, and the generated kernel that runs it (absent: the interpreter).
struct ElementwiseParams {
  native::ElementwiseChain chain;
  std::optional<std::string> kernel, library;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("chain", s.chain), v("kernel", s.kernel), v("library", s.library);
  }
  bool operator==(const ElementwiseParams& o) const;
};

struct WhereParams {
  template <class S, class V>
  static void fields(S&, V&) {}
  bool operator==(const WhereParams&) const = default;
};
struct CastParams {
  template <class S, class V>
  static void fields(S&, V&) {}
  bool operator==(const CastParams&) const = default;
};

struct ReduceParams {
  std::optional<ReduceKind> kind;  // absent: sum
  std::optional<ParamDims> axes;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("kind", s.kind), v("axes", s.axes);
  }
  bool operator==(const ReduceParams&) const = default;
};

struct PermuteParams {
  std::optional<ParamDims> perm;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("perm", s.perm);
  }
  bool operator==(const PermuteParams&) const = default;
};

struct SliceParams {
  std::optional<ParamDims> starts, ends, axes, steps;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("starts", s.starts), v("ends", s.ends), v("axes", s.axes), v("steps", s.steps);
  }
  bool operator==(const SliceParams&) const = default;
};

struct StridedCopyParams {
  std::optional<ParamDim> offset;
  std::optional<ParamDims> strides;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("offset", s.offset), v("strides", s.strides);
  }
  bool operator==(const StridedCopyParams&) const = default;
};

struct ConcatParams {
  ParamDim axis;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("axis", s.axis);
  }
  bool operator==(const ConcatParams&) const = default;
};
struct SplitParams {
  ParamDim axis;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("axis", s.axis);
  }
  bool operator==(const SplitParams&) const = default;
};
struct GatherParams {
  std::optional<ParamDim> axis;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("axis", s.axis);
  }
  bool operator==(const GatherParams&) const = default;
};

// Max or average pooling over a 2-D window, NCHW or NHWC.
struct Pool2dParams {
  std::optional<PoolMode> kind;        // absent: max
  std::optional<TensorLayout> layout;  // absent: nchw
  std::optional<ParamDims> kernel, stride, dilation, pads;
  std::optional<bool> ceil_mode, count_include_pad;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("kind", s.kind), v("layout", s.layout), v("kernel", s.kernel), v("stride", s.stride), v("dilation", s.dilation);
    v("pads", s.pads), v("ceil_mode", s.ceil_mode), v("count_include_pad", s.count_include_pad);
  }
  bool operator==(const Pool2dParams&) const = default;
};
struct GlobalAveragePoolParams {
  std::optional<TensorLayout> layout;  // absent: nchw
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("layout", s.layout);
  }
  bool operator==(const GlobalAveragePoolParams&) const = default;
};

struct CopyParams {
  template <class S, class V>
  static void fields(S&, V&) {}
  bool operator==(const CopyParams&) const = default;
};
struct ReshapeParams {
  template <class S, class V>
  static void fields(S&, V&) {}
  bool operator==(const ReshapeParams&) const = default;
};

struct FillParams {
  std::optional<ParamDims> values;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("values", s.values);
  }
  bool operator==(const FillParams&) const = default;
};
struct IotaParams {
  std::optional<ParamDim> start, delta;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("start", s.start), v("delta", s.delta);
  }
  bool operator==(const IotaParams&) const = default;
};

// A native grouped conv, NHWC: depthwise_conv (k and groups absent) and grouped_conv (both given).
struct DepthwiseConvParams {
  ParamDim n, h, w, c, r, s, p, q;
  std::optional<ParamDim> k, groups;
  std::optional<ParamDims> pads, strides, dilations;  // pads: [top, left]
  std::optional<ClampParam> clamp;
  std::optional<ActivationParam> activation;  // before the clamp
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("n", s.n), v("h", s.h), v("w", s.w), v("c", s.c), v("r", s.r), v("s", s.s), v("p", s.p), v("q", s.q);
    v("k", s.k), v("groups", s.groups), v("pads", s.pads), v("strides", s.strides), v("dilations", s.dilations);
    v("clamp", s.clamp), v("activation", s.activation);
  }
  bool operator==(const DepthwiseConvParams&) const = default;
};
struct GroupedConvParams : DepthwiseConvParams {
  void check(const std::string& where) const;
  bool operator==(const GroupedConvParams&) const = default;
};

// Fused multi-head attention over strided Q, K, V (and an optional mask).
struct AttentionParams {
  ParamDim b, h, sq, sk, d;
  std::optional<ParamDim> kv_group;
  ParamDims q_stride, k_stride, v_stride, o_stride;
  // mask element (b, h, q, k) at mask_offset(b) + h·mask_stride[1] + q·mask_stride[2] + k, where
  // mask_offset(b) = (b % inner)·mask_stride[0] + (b / inner)·outer with mask_batch [inner, outer]
  // (a window mask wrapping over the images), else b·mask_stride[0].
  std::optional<ParamDims> mask_stride, mask_batch, offsets;
  std::optional<double> scale, mask_true, mask_false;
  std::optional<bool> causal;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("b", s.b), v("h", s.h), v("sq", s.sq), v("sk", s.sk), v("d", s.d), v("kv_group", s.kv_group);
    v("q_stride", s.q_stride), v("k_stride", s.k_stride), v("v_stride", s.v_stride), v("o_stride", s.o_stride);
    v("mask_stride", s.mask_stride), v("mask_batch", s.mask_batch), v("offsets", s.offsets), v("scale", s.scale);
    v("mask_true", s.mask_true), v("mask_false", s.mask_false), v("causal", s.causal);
  }
  void check(const std::string& where) const;
  bool operator==(const AttentionParams&) const = default;
};

struct NchwToNhwcParams {
  template <class S, class V>
  static void fields(S&, V&) {}
  bool operator==(const NchwToNhwcParams&) const = default;
};

// A conv window slid over an NCHW x (im2col; stem_conv adds k and its own fields).
struct Im2colParams {
  ParamDim n, c, h, w, r, s, p, q;
  std::optional<ParamDims> pads, strides, dilations;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("n", s.n), v("c", s.c), v("h", s.h), v("w", s.w), v("r", s.r), v("s", s.s), v("p", s.p), v("q", s.q);
    v("pads", s.pads), v("strides", s.strides), v("dilations", s.dilations);
  }
  bool operator==(const Im2colParams&) const = default;
};
struct StemConvParams : Im2colParams {
  ParamDim k;
  std::optional<std::string> dtype, epilogue;
  std::optional<ClampParam> clamp;
  template <class S, class V>
  static void fields(S& s, V& v) {
    Im2colParams::fields(s, v);
    v("k", s.k), v("dtype", s.dtype), v("epilogue", s.epilogue), v("clamp", s.clamp);
  }
  bool operator==(const StemConvParams&) const = default;
};

// y[i] = x[i with index[i] along axis] (ONNX GatherElements); x, then the indices.
struct GatherElementsParams {
  std::optional<ParamDim> axis;  // absent: 0
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("axis", s.axis);
  }
  bool operator==(const GatherElementsParams&) const = default;
};
// The upper (default) or lower triangle of the last two dims from diagonal k (ONNX Trilu).
struct TriluParams {
  std::optional<ParamDim> k;
  std::optional<bool> upper;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("k", s.k), v("upper", s.upper);
  }
  bool operator==(const TriluParams&) const = default;
};
// Running sums along axis (ONNX CumSum).
struct CumsumParams {
  std::optional<ParamDim> axis;
  std::optional<bool> exclusive, reverse;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("axis", s.axis), v("exclusive", s.exclusive), v("reverse", s.reverse);
  }
  bool operator==(const CumsumParams&) const = default;
};

// Indexed by StepKind: a step's params are the alternative of its kind.
using StepParams =
    std::variant<GemmParams, ConvParams, SoftmaxParams, LayerNormParams, EmbedLayerNormParams, ElementwiseParams,
                 WhereParams, CastParams, ReduceParams, PermuteParams, SliceParams, StridedCopyParams, ConcatParams,
                 SplitParams, GatherParams, Pool2dParams, GlobalAveragePoolParams, CopyParams, ReshapeParams, FillParams,
                 IotaParams, DepthwiseConvParams, AttentionParams, NchwToNhwcParams, Im2colParams, StemConvParams,
                 GroupedConvParams, GatherElementsParams, TriluParams, CumsumParams>;
static_assert(std::variant_size_v<StepParams> == kStepKindCount, "a StepKind without its params struct");

inline StepKind kind_of(const StepParams& p) { return static_cast<StepKind>(p.index()); }
// A plan's "params" object of a step of kind `kind`; throws PlanError naming `where` (the step) and
// the field that is missing or has the wrong type.
StepParams parse_step_params(StepKind kind, const json::Value& params, const std::string& where);
json::Value to_json(const StepParams& p);
// The params of a kind with every field at its default (hand-built plans: make_step).
StepParams default_step_params(StepKind kind);

// The kernel of a dispatch table for row count m: the first entry with m <= max_m (max_m -1: any).
// Throws PlanError naming `where` and the table when the table is empty or no entry covers m.
const std::string& pick_kernel(const DispatchTable& t, int64_t m, const std::string& where,
                               const char* table = "dispatch");
// An elementwise step's chain as the plan writes it (for writers and tests).
json::Value chain_to_json(const native::ElementwiseChain& c);

}  // namespace sabre::runtime
