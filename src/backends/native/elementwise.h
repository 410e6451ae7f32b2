// Fused elementwise chains: a small expression DAG over N broadcast inputs, run as one kernel.
//
// Two ways to run a chain: generate_elementwise_kernel() writes CUDA C++ for one fused kernel
// (compiled by nvcc when an artifact is built), and the interpreter kernel (native.h,
// elementwise_run) evaluates the same chain from bytecode passed as a kernel parameter (which the
// GPU keeps in its constant bank). Both compute floats in f32 and store f16/bf16; only Cast nodes
// round an intermediate to their dtype. No Graph here: the runtime layer includes this header.
// Tests: tests/unit/native_codegen_test.cpp (CPU, nvcc), tests/gpu/native_elementwise_test.cpp (GPU)
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backends/native/ew_abi.h"
#include "ir/dtype.h"

namespace sabre::native {

using ir::DType;

enum class EwOp : uint8_t {
  input, constant,
  // unary
  neg, abs, exp, log, sqrt, reciprocal, erf, tanh, relu, sigmoid, gelu_erf, gelu_tanh, silu,
  leaky_relu, hard_sigmoid, hardswish, clip, logical_not, cast,
  // binary
  add, sub, mul, div, pow, min, max, equal, less, greater, less_equal, greater_equal, logical_and, logical_or,
  // ternary
  where,
  // Added later, kept after `where` so the earlier ops' numbers (part of kernel names) stay put.
  // unary, float in and out
  sin, cos, tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh, ceil, floor, round, softplus, softsign, mish,
  elu, selu, celu, thresholded_relu, shrink,
  // unary: sign (float or integer), isnan / isinf (float in, bool out)
  sign, isnan, isinf,
  // binary: mod (result takes the divisor's sign), fmod (the dividend's), shifts (integers), prelu (floats)
  mod, fmod, shl, shr, prelu,
  kCount
};
inline constexpr size_t kEwOpCount = static_cast<size_t>(EwOp::kCount);

struct EwOpInfo {
  std::string_view name;
  int arity;  // operands (0 for input/constant)
};
extern const std::array<EwOpInfo, kEwOpCount> kEwOpInfo;
inline const EwOpInfo& info(EwOp op) { return kEwOpInfo[static_cast<size_t>(op)]; }

// One node of a chain. Operands are indices of earlier nodes.
//   input:        value of chain input `a`
//   constant:     alpha (in the node's dtype)
//   leaky_relu:   x < 0 ? alpha*x : x          hard_sigmoid: clamp(alpha*x + beta, 0, 1)
//   clip:         clamp(x, alpha, beta)         cast: to the node's dtype (rounds f16/bf16, truncates to ints)
//   compares:     bool result                   where: a ? b : c
//   elu:          x < 0 ? alpha*(e^x-1) : x     selu: beta * (x <= 0 ? alpha*(e^x-1) : x)
//   celu:         max(0,x) + min(0, alpha*(e^(x/alpha)-1))   thresholded_relu: x > alpha ? x : 0
//   shrink:       x < -alpha ? x+beta : x > alpha ? x-beta : 0   round: half to even
//   isinf:        alpha != 0 detects -inf, beta != 0 detects +inf
//   mod, fmod on integers: a zero divisor gives 0 (as numpy), and so does -1 (INT64_MIN % -1 traps in C)
//   shl, shr:     logical shifts; a shift outside 0..63 gives 0   prelu: a < 0 ? b*a : a
struct EwNode {
  EwOp op = EwOp::input;
  DType dtype = DType::f32;  // result dtype
  int a = -1, b = -1, c = -1;
  float alpha = 0.f, beta = 0.f;
};

struct ElementwiseChain {
  std::vector<DType> inputs;  // dtype of each chain input
  std::vector<EwNode> nodes;  // topological: operands precede users
  std::vector<int> outputs;   // node indices; each output is stored in its node's dtype

  // Builders: return the new node's index.
  int input(int slot);
  int constant(float value, DType dt = DType::f32);
  int unary(EwOp op, int a, float alpha = 0.f, float beta = 0.f);
  int binary(EwOp op, int a, int b);
  int where(int cond, int a, int b);
  int cast(int a, DType to);
};

// Throws std::invalid_argument naming the first problem (operand order, dtype mix, sizes, f64).
void validate(const ElementwiseChain& chain);

// The interpreter's bytecode. Validates first.
SabreEwProgram compile_program(const ElementwiseChain& chain);

// A stable kernel name derived from the chain's structure: "sabre_ew_<hash>".
std::string kernel_name(const ElementwiseChain& chain);

// CUDA C++ source of one fused kernel `extern "C" __global__ void <kernel_name>(SabreEwParams)`,
// self-contained (needs only the CUDA toolkit headers), launched with 256 threads per block and
// ew_grid_size() blocks. Validates first.
std::string generate_elementwise_kernel(const ElementwiseChain& chain);

// Fills the parameter block for output dims `out_dims` and per-input dims (numpy broadcasting,
// right-aligned). Merges dims where possible and enables the vector path when legal for these
// pointers. Throws std::invalid_argument for shapes that do not broadcast or rank > 6 after merging.
SabreEwParams prepare_params(const ElementwiseChain& chain, const std::vector<int64_t>& out_dims,
                             const std::vector<std::vector<int64_t>>& in_dims, const std::vector<const void*>& in,
                             const std::vector<void*>& out);

// Blocks for a launch of 256-thread blocks over `p` (grid-stride loops cap it).
unsigned ew_grid_size(const SabreEwParams& p);

}  // namespace sabre::native
