// The one hash for checksums and cache keys: XXH3-64 (xxHash, Debian libxxhash-dev), inlined so
// nothing links against libxxhash and a machine that builds sabre needs only the header. Its
// output is fixed by the XXH3 format, so values are stable across runs, machines and builds.
// Tests: tests/unit/hash_test.cpp
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>

namespace sabre::support {

// XXH3-64 of `size` bytes.
inline uint64_t hash64(const void* data, size_t size) { return XXH3_64bits(data, size); }
inline uint64_t hash64(std::string_view s) { return hash64(s.data(), s.size()); }

// XXH3-64 of bytes given in pieces: digest() equals hash64 of the pieces concatenated.
class Hasher {
 public:
  Hasher() { XXH3_64bits_reset(&state_); }
  Hasher& update(const void* data, size_t size) {
    XXH3_64bits_update(&state_, data, size);
    return *this;
  }
  Hasher& update(std::string_view s) { return update(s.data(), s.size()); }
  uint64_t digest() const { return XXH3_64bits_digest(&state_); }

 private:
  XXH3_state_t state_;
};

// 16 lowercase hex digits.
inline std::string hex16(uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) out[static_cast<size_t>(i)] = kDigits[v & 15];
  return out;
}

}  // namespace sabre::support
