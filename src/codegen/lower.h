// Lowering: a canonical, partitioned graph -> the runtime's Plan (docs/RUNTIME.md section 3), the
// weights blob it points into, and the kernels an artifact must contain.
//
// Float activations and weights are stored in the compute dtype (f16 or bf16); integer tensors
// keep theirs; model inputs and outputs keep the model's dtypes with a cast step at the boundary.
// Every sabre.Composite gemm/batched_gemm becomes a "gemm" step with a dispatch table from the
// kernel picker; maximal single-consumer chains of elementwise ops become one "elementwise" step
// (a generated kernel each); Softmax absorbs a preceding scale, additive mask and causal Where;
// LayerNormalization absorbs its residual Add; shape ops become views; shape subgraphs whose
// values only feed shapes disappear. Conv regions run NHWC: conv outputs, and the pooling and
// elementwise ops that read them, are stored NHWC (filters KRSC, transposed at compile time);
// a conversion (nchw_to_nhwc in, permute out) appears only where a region begins or ends. The
// conversion in casts a float model input on the way (no separate cast step) and, for a conv whose
// C breaks the 16-byte access (the RGB stem's 3), writes C padded with zero channels so that the
// conv runs on the aligned kernels (filter padded with zero taps; a note says so). Such a conv
// with a small reduction (R·S·C <= 1024, C < 8: the stem) instead becomes an "im2col" step reading
// X in NCHW and a "gemm" step whose output is already NHWC, or with Stem::direct one "stem_conv"
// step reading X in NCHW and writing Y in NHWC (LowerOptions::stem); a 1x1
// stride-1 conv is a "gemm" step over its NHWC tensors (LowerOptions::pointwise_gemm). Anything
// the runtime cannot run is reported all at once. Each of these is a pass (codegen/passes/pass.h)
// that can be dumped after (LowerOptions::dump_after).
// Tests: tests/unit/codegen_lower_test.cpp, tests/unit/codegen_passes_test.cpp
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "runtime/plan.h"
#include "tune/select.h"

namespace sabre::codegen {

// Valid ONNX the GPU path cannot run yet; the message lists every offending node at once.
struct UnsupportedError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using DimRanges = std::map<std::string, std::pair<int64_t, int64_t>>;

// "batch=1..256,seq=1..512" (a single value "batch=8" means 8..8). Throws std::invalid_argument
// with a message that shows the expected form.
DimRanges parse_dynamic(const std::string& text);

// The range a symbol gets when --dynamic does not name it: batch-like names (containing "batch")
// 1..kDefaultBatchMax, every other symbol 1..kDefaultOtherMax.
inline constexpr int64_t kDefaultBatchMax = 64;
inline constexpr int64_t kDefaultOtherMax = 512;
std::pair<int64_t, int64_t> default_range(const std::string& symbol);

using KernelPicker = std::function<std::vector<tune::DispatchEntry>(const tune::GemmProblem&)>;

// One 2-D forward convolution as the conv kernels see it (tune/select.h), at one batch bucket.
using ConvProblem = tune::ConvProblem;
// The conv kernel's name for a problem; throws std::invalid_argument (with why) when no kernel fits.
using ConvKernelPicker = std::function<std::string(const ConvProblem&)>;

// How a conv runs whose channels channel_padding pads at the NCHW boundary (the RGB stem: C < 8),
// sabre compile and sabre tune --stem. Both read the images as the model has them (NCHW).
enum class Stem : uint8_t {
  // With R·S·C <= 1024 (cutlass_backend::im2col_shape), groups 1 and no residual: an "im2col" step
  // (X read in NCHW, cast on the way) and a "gemm" step on [n·p·q, R·S·C rounded up to 8] x
  // [K, same]ᵀ whose D is Y in NHWC. Other such convs run as `conv` does.
  im2col,
  // nchw_to_nhwc writes C zero-padded to 8 and a conv step reduces over R·S·8 (the filter gets zero
  // taps); the ranking puts it on few_channels kernels (conv_spec.h), whose K is R·S·8 with no
  // padding to the tile (392 for the 7x7 stem).
  conv,
  // Where im2col applies and the native kernel takes the conv (native::stem_conv_unsupported: K a
  // multiple of 8, R·S·C rounded up to 16 at most 256 columns, strides 1..4, dilations 1..2) with
  // no activation, relu or relu6 (bias or not): one "stem_conv" step, X read in NCHW (cast on the
  // way), the filter as [K, R·S·C rounded up to 16], Y written in NHWC; no GEMM, nothing to tune.
  // Other such convs run as `im2col` does, with a note saying why.
  direct,
};
std::string_view stem_name(Stem s);  // "im2col", "conv", "direct"
// "im2col", "conv" or "direct"; std::invalid_argument saying what to give otherwise.
Stem parse_stem(const std::string& text);

struct LowerOptions {
  ir::DType dtype = ir::DType::f16;  // compute dtype: f16 or bf16
  DimRanges ranges;                  // symbol ranges; unnamed symbols get default_range()
  KernelPicker pick;                 // required: usually tune::pick_kernels with fixed options
  // Conv kernels. Unset: conv regions are refused ("conv offload is not implemented yet") and the
  // graph stays NCHW. Set: conv regions become "conv" steps and the NHWC layout assignment runs.
  ConvKernelPicker pick_conv;
  // Attention (Q·Kᵀ, scale, mask, softmax, ·V between the head reshapes) as one native
  // "attention" step where the kernel takes its head dim (a multiple of 4 up to 128; fuse_attention.cpp).
  // sabre compile sets it unless --no-fuse-attention (CompileOptions); off here so a bare lowering
  // keeps every op as the graph has it.
  bool fuse_attention = false;
  // The RGB stem's path (Stem). direct by default: one native kernel reads the NCHW images and
  // writes NHWC, with no im2col buffer or channel padding (the measurements that chose it are in
  // CHANGELOG.md, 2026-12-03). A stem the kernel does not take runs as im2col does.
  Stem stem = Stem::direct;
  // A 1x1 conv with stride 1, no padding, dilation 1 and one group runs as a "gemm" step over its
  // NHWC tensors (A = X [n·h·w, C], B = the filter [K, C], D = Y [n·h·w, K], R = the residual) on
  // the GEMM kernels (persistent, PDL, tuned as GEMMs) where one takes its epilogue; else the conv
  // step. On by default (sabre compile --no-pointwise-gemm: off, the conv kernels).
  bool pointwise_gemm = true;
  // false: lay the weights out (offsets, sizes, dtypes in the plan) without converting or copying
  // them; Lowered::weights stays empty. For a lowering that only collects the GEMM problems.
  bool weights = true;
  // Passes after which a readable dump of the lowering state is written (the graph in topological
  // order with each node's decisions, and once emit_steps ran, the plan's tensors and steps):
  // "PASS[,PASS...]" (lowering_pass_names()) or "all"; "" reads $SABRE_DUMP_AFTER; "none" dumps
  // nothing. An unknown name is std::invalid_argument listing the passes.
  std::string dump_after;
  // Where dumps go: appended to this file; "" reads $SABRE_DUMP_FILE, and without it stderr.
  std::string dump_file;
  // Receives each dump instead of dump_file (pass name, text); for tests and tools.
  std::function<void(const std::string& pass, const std::string& text)> dump_sink;
};

// The lowering's passes in the order they run (codegen/passes/pass.h), for --dump-after.
std::vector<std::string> lowering_pass_names();
// The passes a dump_after text names ("" and "none": none; "all": every one). Throws
// std::invalid_argument listing the passes for an unknown name, `what` naming the setting.
std::vector<std::string> parse_dump_after(const std::string& text, const std::string& what = "--dump-after");

struct ElementwiseKernel {
  std::string name;    // native::kernel_name(chain): the __global__ symbol
  std::string source;  // native::generate_elementwise_kernel(chain)
};

// What one lowering pass did (codegen/passes/pass.h): fired at `fired` sites, refused at others
// ("node: reason" each), or skipped (why; an option is off).
struct PassReport {
  std::string name;
  int fired = 0;
  std::vector<std::string> refused;
  std::string skipped;
};

struct Lowered {
  runtime::Plan plan;
  std::vector<uint8_t> weights;                 // weights.bin
  std::vector<std::string> gemm_kernels;        // kernel names from every dispatch table, unique
  std::vector<ElementwiseKernel> ew_kernels;    // unique by name
  std::vector<std::string> conv_kernels;        // conv kernel names from every conv step, unique
  int layout_permutes = 0;                      // NCHW<->NHWC conversion steps (nchw_to_nhwc, permute) the layout assignment added
  int im2col_convs = 0;                         // conv regions lowered to im2col + gemm (LowerOptions::stem)
  int stem_convs = 0;                           // conv regions lowered to one stem_conv step (Stem::direct)
  int pointwise_convs = 0;                      // 1x1 conv regions lowered to gemm (LowerOptions::pointwise_gemm)
  // What the user should know: default ranges, how convs run, and every fusion that did not fire
  // with its reason ("fuse_attention: at Softmax_3: attention not fused: head dim 96 ...").
  std::vector<std::string> notes;
  std::vector<PassReport> passes;  // one per pass, in the order they ran
};

// For the partition report: how the GPU lowering runs a GEMM or conv node that no backend region
// took. A depthwise Conv runs on the native depthwise kernel, another grouped one on the native
// grouped-conv kernel (returns its description); anything
// else has no GPU path (returns "", and *why says so) and makes sabre compile refuse the model.
std::string gpu_route(const ir::Node& n, std::string* why = nullptr);

/** Lowers `g` (canonicalized and partitioned). Throws UnsupportedError listing every node the
    runtime cannot run. Tests: tests/unit/codegen_lower_test.cpp */
Lowered lower(const ir::Graph& g, const LowerOptions& opts);

}  // namespace sabre::codegen
