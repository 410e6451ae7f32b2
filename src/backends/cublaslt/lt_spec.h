// cuBLASLt kernels as data, without linking cuBLASLt: the spec surface shared with the CUTLASS
// kernels (operands, layouts and the epilogues cuBLASLt has: bias, relu, gelu (tanh form), residual
// before the activation through beta·C), the candidate names the tuner times
// ("cublaslt_tn_f16_f16_f32_bias#algo3") and the deployable kernels: one cuBLASLt algorithm fixed
// by its configuration, named by it and emitted as a kernel library with the ABI of
// include/sabre/kernel_abi.h. Tests: tests/unit/lt_spec_test.cpp, tests/gpu/gemm_gpu_test.cpp
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cutlass/kernel_spec.h"
#include "support/kernel_signature.h"

namespace sabre::cublaslt_backend {

struct LtSpec {
  cutlass_backend::GemmOperands ops;
  cutlass_backend::EpilogueSpec epi;
  bool operator==(const LtSpec&) const = default;
};

// "cublaslt_tn_f16_f16_f32_bias_gelutanh": the kernel-name form, so results tables and the tuning
// DB key cuBLASLt candidates like CUTLASS ones.
std::string lt_name(const LtSpec& s);
std::optional<LtSpec> parse_lt_name(std::string_view name);

// Why cuBLASLt cannot compute this spec (gelu_erf, silu, residual after the activation, ...), or nullopt.
std::optional<std::string> unsupported_reason(const LtSpec& s);

// The configuration attributes of one cuBLASLt algorithm (CUBLASLT_ALGO_CONFIG_*, lt_matmul.h's
// AlgoConfig): algorithm id, tile, stages, split-K count, reduction scheme, CTA swizzling, custom
// option, inner shape and cluster shape ids.
struct LtAlgo {
  int64_t id = 0, tile = 0, stages = 0, splitk = 1, reduction = 0, swizzle = 0, custom = 0, inner = 0, cluster = 0;
  bool operator==(const LtAlgo&) const = default;
};

// A deployable cuBLASLt kernel: a spec and the algorithm the tuner timed for it.
struct LtKernelSpec {
  LtSpec spec;
  LtAlgo algo;
  bool operator==(const LtKernelSpec&) const = default;
};

// cublaslt_tn_f16_f16_f32_bias_res_algo66_t20_s8_k1_r0_w0_o0_i0_c0: the spec's name, then the
// algorithm's id, tile, stages, split-K, reduction, swizzle, custom option, inner and cluster shape.
std::string lt_kernel_name(const LtKernelSpec& s);
std::optional<LtKernelSpec> parse_lt_kernel_name(std::string_view name);

// The kernel library's source: the kernel ABI's four entry points and registry on cuBLASLt, the
// algorithm rebuilt from the name's configuration and checked (cublasLtMatmulAlgoCheck) at each
// problem shape; where cuBLASLt refuses it at a shape (another M of the same dispatch bucket), the
// heuristic's first algorithm for that shape runs instead. Build with lt_kernel_flags; the library
// needs libcublasLt at run time. Throws std::invalid_argument for a spec cuBLASLt cannot compute.
std::string emit_lt_kernel(const LtKernelSpec& s);
// What the library emit_lt_kernel writes computes (its NAME_signature text): cuBLASLt needs no
// alignment of its own beyond the element and runs on any arch the library supports ("any").
support::KernelSignature lt_kernel_signature(const LtKernelSpec& s);
// Compiler flags of emit_lt_kernel's source, less the include directory of sabre/kernel_abi.h.
std::vector<std::string> lt_kernel_flags();

}  // namespace sabre::cublaslt_backend
