// Comparing an engine's outputs with the reference's: the error measures `sabre run
// --compare-reference` prints and the tolerance that decides its exit code.
// Tests: tests/unit/reference_compare_test.cpp
#pragma once

#include <cstdint>
#include <optional>

#include "ir/tensor.h"

namespace sabre::reference {

// An output passes when its relative L2 error is at most rtol, or when every element is within
// atol of the reference (for outputs near zero, where a relative error means little).
struct Tolerance {
  double rtol = 0;
  double atol = 0;
};

// Defaults by the output's dtype: float outputs allow an artifact's f16/bf16 compute (1e-2 and
// 5e-2 relative L2, 1e-3 absolute); integer and bool outputs must match exactly.
Tolerance default_tolerance(ir::DType dt);

struct Comparison {
  double max_abs = 0;       // largest |got - want|; inf where finiteness differs
  double rel_l2 = 0;        // ||got - want|| / ||want|| (||got - want|| when want is all zero)
  int64_t nonfinite = 0;    // elements where exactly one side is NaN/inf, or both are but differ
  bool within = true;       // passes `tol` (never with a finiteness mismatch or a shape mismatch)
};

// got and want must have the same element count; otherwise within is false and the errors are inf.
Comparison compare(const ir::Tensor& got, const ir::Tensor& want, Tolerance tol);

}  // namespace sabre::reference
