// The size check every host tensor passes before its storage is allocated, so a hostile shape
// (a declared [1<<40] input, --dim batch=3000000000, a huge Range) is an error naming it, not a
// std::bad_alloc or an OOM kill. Tests: tests/unit/hostile_inputs_test.cpp
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace sabre::ir {

// A tensor too large to hold: its element count overflows, passes kMaxElements, or its bytes pass
// this machine's memory. what() names the tensor, its shape and the limit.
struct TensorSizeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The most elements sabre accepts in one tensor (the largest dim shape inference admits).
inline constexpr int64_t kMaxElements = int64_t{1} << 40;

// Throws TensorSizeError unless a `dtype` tensor of `dims` can be allocated on this host: dims
// non-negative, their product (overflow-checked) at most kMaxElements and its bytes at most the
// machine's physical memory. `what` opens the message ("input 'x'", "a tensor").
void check_tensor_size(DType dtype, const std::vector<int64_t>& dims, const std::string& what);

}  // namespace sabre::ir
