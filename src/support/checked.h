// Overflow-safe integer arithmetic for sizes, element counts and FLOP counts that come from model
// files or the command line: signed overflow is undefined behaviour, so every product of
// user-controlled dims goes through these. Tests: tests/unit/support_checked_test.cpp
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

namespace sabre::support {

inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// The product of non-negative dims, or nullopt when a dim is negative or the product overflows.
inline std::optional<int64_t> checked_product(const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) {
    if (d < 0) return std::nullopt;
    auto q = checked_mul(p, d);
    if (!q) return std::nullopt;
    p = *q;
  }
  return p;
}

// a + b and a * b clamped to [INT64_MIN, INT64_MAX].
inline int64_t saturating_add(int64_t a, int64_t b) {
  if (auto r = checked_add(a, b)) return *r;
  return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}

inline int64_t saturating_mul(int64_t a, int64_t b) {
  if (auto r = checked_mul(a, b)) return *r;
  return (a < 0) != (b < 0) ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
}

// Integer division and remainder defined for every operand pair but a zero divisor:
// INT64_MIN / -1 wraps to INT64_MIN (the two's-complement result) and INT64_MIN % -1 is 0.
// Division truncates toward zero; the remainder takes the dividend's sign (C, ONNX Mod fmod=1)
// or, with floor=true, the divisor's sign (ONNX Mod fmod=0, Python). Callers refuse b == 0.
inline int64_t wrapping_div(int64_t a, int64_t b) {
  if (b == -1) return static_cast<int64_t>(0 - static_cast<uint64_t>(a));
  return a / b;
}

inline int64_t wrapping_rem(int64_t a, int64_t b, bool floor = false) {
  if (b == -1) return 0;
  int64_t r = a % b;
  if (floor && r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

}  // namespace sabre::support
