// Host-side pieces of running a plan that need no GPU: choosing a GEMM kernel from a step's
// dispatch tables by M, a conv-like step's geometry from its typed params at a call's dims, and
// the DLPack dtype mapping. Tests: tests/unit/runtime_resolve_test.cpp
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backends/native/elementwise.h"
#include "runtime/plan.h"
#include "sabre/kernel_abi.h"
#include "sabre/sabre.h"

namespace sabre::runtime {

// The kernel a gemm or conv step runs at row count m: the first entry of its "dispatch" table with
// m <= max_m (max_m -1: unbounded); `alignment` is what gemm_alignment says of the step's arguments
// (elements), which selects the step's dispatch_aligned table when it has one. Throws PlanError
// when no entry covers m.
std::string select_gemm_kernel(const Step& s, int64_t m, int alignment = 1);
// Every kernel a gemm step may dispatch to (both tables).
std::vector<std::string> gemm_step_kernels(const Step& s);
// The largest of 8, 4, 2, 1 elements that divides N, K, every leading dimension and batch stride,
// and whose byte size divides every operand pointer.
int gemm_alignment(const sabre_gemm_args& a, size_t elem_bytes);

// The sabre_conv_args of a "conv" step at these dims (pointers null, alpha/beta from the params).
// Checks what the ABI cannot say (asymmetric pads, non-2-D lists, dims that disagree with the
// output size) and throws PlanError naming the step. Its kernel is select_gemm_kernel(s, n·p·q).
sabre_conv_args conv_args(const Step& s, const Dims& dims);

// An "im2col" step's geometry at these dims (docs/RUNTIME.md): x [n,c,h,w] NCHW in, a [n·p·q, cols]
// out. Checks what the kernel cannot (pads [4] and strides/dilations [2]; p and q the output size
// the others give; `a_shape` [n·p·q, cols] with cols >= r·s·c) and throws PlanError naming the step.
struct Im2colGeometry {
  int64_t n = 0, c = 0, h = 0, w = 0, r = 1, s = 1, p = 0, q = 0, cols = 0;
  int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
};
Im2colGeometry im2col_geometry(const Step& s, const Dims& dims, const std::vector<int64_t>& a_shape);

// A fused Relu/Clip as the kernels take it, from a step's optional "clamp" param (depthwise_conv,
// grouped_conv, stem_conv; checked when the plan loaded). Absent: no clamp.
struct Clamp {
  bool on = false;
  float lo = -INFINITY, hi = INFINITY;
};
Clamp clamp_of(const std::optional<ClampParam>& c);

// A "stem_conv" step's geometry and clamp at these dims (docs/RUNTIME.md): x [n,c,h,w] NCHW,
// w [k, cols] with cols >= r·s·CP (native::stem_conv_channel_pitch), y [n,p,q,k] NHWC; pads [4]
// alike on both sides of a dim, strides/dilations [2], p and q the output size the others give;
// the clamp from clamp_param. Throws PlanError naming the step where any of it does not hold; what
// the kernel itself refuses (native::stem_conv_unsupported) it says when it runs.
struct StemConvGeometry : Im2colGeometry {
  int64_t k = 0;  // output channels; cols is w's
  Clamp clamp;
};
StemConvGeometry stem_conv_geometry(const Step& s, const Dims& dims, const std::vector<int64_t>& x_shape,
                                    const std::vector<int64_t>& w_shape, const std::vector<int64_t>& y_shape);

sabre_dtype to_dlpack(DType t);
std::optional<DType> from_dlpack(sabre_dtype d);
std::string dlpack_name(sabre_dtype d);  // "float16", "int64", ...

// The step ops this runtime executes (docs/RUNTIME.md section 3).
const std::vector<std::string>& known_ops();
bool is_known_op(const std::string& op);

// "[2,128,768]"
std::string shape_str(const std::vector<int64_t>& s);

}  // namespace sabre::runtime
