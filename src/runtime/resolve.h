// Host-side pieces of running a plan that need no GPU: reading dims out of step params,
// choosing a GEMM kernel from a dispatch table by M, elementwise chains from JSON, and the
// DLPack dtype mapping. Tests: tests/unit/runtime_resolve_test.cpp
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backends/native/conv_act.h"
#include "backends/native/elementwise.h"
#include "runtime/plan.h"
#include "sabre/kernel_abi.h"
#include "sabre/sabre.h"

namespace sabre::runtime {

using Dims = std::map<std::string, int64_t>;

// params[key] as a dim (a dim string or a JSON number) evaluated at `dims`; `def` when absent
// (nullopt: required, throws PlanError naming the step).
int64_t param_dim(const Step& s, const char* key, const Dims& dims, std::optional<int64_t> def = std::nullopt);
// params[key] as a list of dims (absent: empty).
std::vector<int64_t> param_dims(const Step& s, const char* key, const Dims& dims);
double param_num(const Step& s, const char* key, double def);
bool param_bool(const Step& s, const char* key, bool def);
std::string param_str(const Step& s, const char* key, const std::string& def);

// The kernel of a gemm step's "dispatch" table for this M: the first entry with m <= max_m
// (max_m -1: unbounded). Throws PlanError when the table is missing or no entry covers m.
// The kernel a gemm step runs at row count m; `alignment` is what gemm_alignment says of the
// step's arguments (elements), which selects the step's dispatch_aligned table when it has one.
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

// A fused Relu/Clip as a step's optional "clamp" param (depthwise_conv, stem_conv): [min, max],
// each a number or null (unbounded: JSON has no infinity). Absent: no clamp. Throws PlanError naming
// the step where it is not such a pair or min is above max.
struct Clamp {
  bool on = false;
  float lo = -INFINITY, hi = INFINITY;
};
Clamp clamp_param(const Step& s);

// A fused activation as a depthwise_conv step's optional "activation" param, applied before the
// clamp: {"op": NAME, "alpha": a, "beta": b}, NAME one of native::ConvAct's (conv_act.h: silu,
// sigmoid, hard_swish, hard_sigmoid), alpha and beta numbers (absent: 1 and 0). Absent: none.
// Throws PlanError naming the step where it is not such an object.
struct ConvActivation {
  native::ConvAct act = native::ConvAct::none;
  float alpha = 1.f, beta = 0.f;
};
ConvActivation activation_param(const Step& s);

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

// An elementwise step's "chain" param as a native chain; throws PlanError on unknown op names,
// bad operands or dtypes (what native::validate rejects).
native::ElementwiseChain parse_chain(const Step& s);
// Inverse, for writers and tests.
json::Value chain_to_json(const native::ElementwiseChain& c);

sabre_dtype to_dlpack(DType t);
std::optional<DType> from_dlpack(sabre_dtype d);
std::string dlpack_name(sabre_dtype d);  // "float16", "int64", ...

// The step ops this runtime executes (docs/RUNTIME.md section 3).
const std::vector<std::string>& known_ops();
bool is_known_op(const std::string& op);

// "[2,128,768]"
std::string shape_str(const std::vector<int64_t>& s);

}  // namespace sabre::runtime
