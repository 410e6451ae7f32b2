// The cuBLASLt backend: the same spec surface as the CUTLASS kernels (operands, layouts and the
// epilogues cuBLASLt has: bias, relu, gelu (tanh form), residual before the activation through
// beta·C), the same sabre_gemm_args. It competes with CUTLASS in tuning (heuristic top-k
// algorithms, each timeable) and is the fallback. Tests: tests/gpu/gemm_gpu_test.cpp.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/cutlass/kernel_spec.h"
#include "sabre/kernel_abi.h"

namespace sabre::cublaslt_backend {

struct LtSpec {
  cutlass_backend::GemmOperands ops;
  cutlass_backend::EpilogueSpec epi;
};

// "cublaslt_tn_f16_f16_f32_bias_gelutanh": the kernel-name form, so results tables and the tuning
// DB key cuBLASLt candidates like CUTLASS ones.
std::string lt_name(const LtSpec& s);
std::optional<LtSpec> parse_lt_name(std::string_view name);

// Why cuBLASLt cannot compute this spec (gelu_erf, silu, residual after the activation, ...), or nullopt.
std::optional<std::string> unsupported_reason(const LtSpec& s);

// One GEMM spec on one cuBLASLt handle. Every cuBLASLt and CUDA status is checked; failures
// return a sabre_status and leave the message in last_error().
class LtGemm {
 public:
  explicit LtGemm(LtSpec spec);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // Asks cuBLASLt's heuristic for up to max_algos algorithms for this problem (the tuner times
  // them); returns how many it found (0 with last_error set when it cannot implement the problem).
  int heuristics(const sabre_gemm_args& args, int max_algos);
  // Runs with algorithm `algo` (an index into the last heuristics() result; heuristics(args, 1)
  // is called first when none is cached for this problem).
  int run(const sabre_gemm_args& args, sabre_stream_t stream, int algo = 0);
  const std::string& last_error() const { return error_; }
  const LtSpec& spec() const { return spec_; }

 private:
  struct Impl;
  LtSpec spec_;
  std::unique_ptr<Impl> impl_;
  std::string error_;
};

}  // namespace sabre::cublaslt_backend
