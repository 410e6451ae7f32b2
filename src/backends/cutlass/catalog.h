// Per-arch catalogs: the kernel configs the tuner may choose from, as rows of a table.
// Tests: tests/unit/kernel_spec_test.cpp (sizes, filters), tests/gpu/gemm_gpu_test.cpp (numerics).
#pragma once

#include <vector>

#include "backends/cutlass/kernel_spec.h"

namespace sabre::cutlass_backend {

// Configs of `family` that pass the static filter for operands `ops` on a GPU of compute
// capability target_sm. Tile K and alignment are scaled to the dtype (a row of the sm90 table is
// 128 bytes of K; 16-byte alignment). Includes the sm80 alignment fallbacks (4, 2 and 1 elements).
std::vector<KernelConfig> catalog(Family family, const GemmOperands& ops, int target_sm);

// Every epilogue sabre generates: each activation with and without bias, and the residual forms.
std::vector<EpilogueSpec> all_epilogues();

}  // namespace sabre::cutlass_backend
