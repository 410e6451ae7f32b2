// Paths a model or an artifact names, resolved and confined to its own folder before anything is
// opened (docs/TRUST.md), and byte ranges checked without overflow. Tests: tests/unit/confine_test.cpp
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace sabre::support {

// A path that is absolute, climbs out with "..", or resolves (through symlinks) outside its folder.
struct ConfineError : std::runtime_error {
  explicit ConfineError(const std::string& m, bool missing_file = false) : std::runtime_error(m), missing(missing_file) {}
  bool missing;  // the name is acceptable but no file is there
};

// Resolves `rel`, a relative name read from a file in `root` (an external-data location, a
// manifest entry), to the file it names and returns that file's canonical path. Refuses, with a
// ConfineError whose message begins with `what` and names `rel`: an empty or absolute name, a ".."
// component, a name whose canonical path (every symlink followed) lies outside canonical(root),
// and one that does not name an existing regular file (a FIFO, a device, a folder).
std::filesystem::path confine(const std::filesystem::path& root, const std::string& rel, const std::string& what);

// True when the canonical path `p` is `root` or lies under it (both canonical).
bool is_within(const std::filesystem::path& root, const std::filesystem::path& p);

// True when [offset, offset + size) lies inside a file of `file_size` bytes, checked without
// wrapping: offset <= file_size and size <= file_size - offset.
constexpr bool range_inside(uint64_t offset, uint64_t size, uint64_t file_size) {
  return offset <= file_size && size <= file_size - offset;
}
// The same for signed values read from a file: negative ones are outside.
constexpr bool range_inside_signed(int64_t offset, int64_t size, uint64_t file_size) {
  return offset >= 0 && size >= 0 && range_inside(static_cast<uint64_t>(offset), static_cast<uint64_t>(size), file_size);
}

}  // namespace sabre::support
