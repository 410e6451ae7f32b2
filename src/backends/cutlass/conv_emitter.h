// Writes the CUDA C++ of one convolution kernel: a standalone translation unit that instantiates
// CUTLASS 4.2's 2.x implicit-GEMM fprop (DefaultConv2dFprop, or DefaultConv2dFpropWithBroadcast for
// the residual forms) behind the conv C ABI of include/sabre/kernel_abi.h (sabre_conv_args).
// Tests: tests/unit/conv_spec_test.cpp (text), tests/kernels/ (nvcc), tests/gpu/conv_gpu_test.cpp (numerics).
#pragma once

#include <string>
#include <vector>

#include "backends/cutlass/conv_spec.h"
#include "backends/cutlass/emitter.h"

namespace sabre::cutlass_backend {

// The .cu text for `s`. Throws std::invalid_argument when the spec fails conv_unsupported_reason for
// target_sm (the message says why). opts.registry adds sabre_conv_registry (one kernel per .so).
std::string emit_conv_kernel(const ConvSpec& s, int target_sm = 90, const EmitOptions& opts = {});

// What the kernel built from `s` for target_sm computes (its library's NAME_signature text).
support::KernelSignature conv_kernel_signature(const ConvSpec& s, int target_sm);

// nvcc -gencode flags: the target's own SASS (the 2.x templates need no arch-specific features).
std::vector<std::string> conv_gencode_flags(int target_sm);

}  // namespace sabre::cutlass_backend
