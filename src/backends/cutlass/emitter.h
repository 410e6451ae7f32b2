// Writes the CUDA C++ of one kernel: a standalone translation unit that instantiates CUTLASS 4.2
// (sm90: 3.x CollectiveBuilder with fusion ops or an EVT tree; sm80: 2.x GemmUniversal with
// LinearCombination epilogues) behind the C ABI of include/sabre/kernel_abi.h.
// Tests: tests/unit/kernel_emitter_test.cpp (text), tests/kernels/ (nvcc), tests/gpu/ (numerics).
#pragma once

#include <string>
#include <vector>

#include "backends/cutlass/kernel_spec.h"
#include "support/kernel_signature.h"

namespace sabre::cutlass_backend {

struct EmitOptions {
  // Also export sabre_kernel_registry (one kernel per .so). The artifact writer, which links many
  // kernels together, turns it off and writes its own registry.
  bool registry = true;
};

// The .cu text for `s`. Throws std::invalid_argument when the spec fails the static filter for
// target_sm (the message says why).
std::string emit_kernel(const KernelSpec& s, int target_sm = 90, const EmitOptions& opts = {});

// nvcc -gencode flags for a kernel of `family` running on target_sm. sm90 kernels need sm_90a:
// built for plain sm_90 they compile to stubs that only print an error, and the emitted TU has an
// #error that stops such a build. sm80 kernels (2.x templates) build for the target's own SASS.
std::vector<std::string> gencode_flags(Family family, int target_sm);

// What the kernel built from `s` for target_sm computes (its library's NAME_signature text).
support::KernelSignature kernel_signature(const KernelSpec& s, int target_sm);

// The symbol prefix of a kernel's C functions: its name (names are valid C identifiers).
inline std::string symbol_prefix(const KernelSpec& s) { return kernel_name(s); }

}  // namespace sabre::cutlass_backend
