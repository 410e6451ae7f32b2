// Test inputs: f32 tensors of uniform random values in [-1, 1) (never zeros), shared by the unit tests.
#pragma once

#include <random>
#include <vector>

#include "ir/tensor.h"

namespace sabre::test_util {

inline ir::Tensor random_f32(std::vector<int64_t> dims, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1, 1);
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(rng);
  return ir::Tensor::from_f32(v, std::move(dims));
}

}  // namespace sabre::test_util
