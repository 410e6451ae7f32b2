// The cuBLASLt backend at tuning time: one spec (lt_spec.h) on one cuBLASLt handle, its heuristic
// algorithms listed and each timeable, with the configuration a deployed kernel (emit_lt_kernel)
// rebuilds it from. Tests: tests/gpu/gemm_gpu_test.cpp.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/cublaslt/lt_spec.h"
#include "sabre/kernel_abi.h"

namespace sabre::cublaslt_backend {

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
  // Each is rebuilt from its configuration (lt_matmul.h, make_algo) as a deployed kernel rebuilds
  // it, so what is timed is what would run; one that cannot be rebuilt keeps cuBLASLt's own
  // descriptor and has no config().
  int heuristics(const sabre_gemm_args& args, int max_algos);
  // Runs with algorithm `algo` (an index into the last heuristics() result; heuristics(args, 1)
  // is called first when none is cached for this problem).
  int run(const sabre_gemm_args& args, sabre_stream_t stream, int algo = 0);
  // The configuration of algorithm `algo` of the last heuristics() result, when it was rebuilt.
  std::optional<LtAlgo> config(int algo) const;
  const std::string& last_error() const { return error_; }
  const LtSpec& spec() const { return spec_; }

 private:
  struct Impl;
  LtSpec spec_;
  std::unique_ptr<Impl> impl_;
  std::string error_;
};

}  // namespace sabre::cublaslt_backend
