// Reading files a user names (models, external data, .npy, DB import files, artifact files) and
// writing the files sabre produces, so that hostile paths fail with one clear message: a FIFO, a
// device (/dev/zero), a directory or a socket is refused before any read (no hang, no unbounded
// read), a file past a size cap is refused before it is read, and a write or close that fails
// (ENOSPC, /dev/full) is an error rather than a quiet exit 0. Tests: tests/unit/support_files_test.cpp
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace sabre::support {

// A file that cannot be opened, read or written; what() is the whole message, naming the path
// ("cannot read 'x.npy': No such file or directory").
struct FileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Caps on what one read takes. Models are protobufs (2 GiB at most); the rest are data.
inline constexpr uint64_t kMaxModelBytes = uint64_t{2} << 30;
inline constexpr uint64_t kMaxDataBytes = uint64_t{1} << 40;
inline constexpr uint64_t kMaxTextBytes = uint64_t{1} << 30;

// Throws FileError unless `path` names a regular file (symlinks followed) of at most `max_bytes`
// bytes; returns its size. `what` names the file's role in messages ("model", "external data").
uint64_t check_input_file(const std::string& path, const std::string& what, uint64_t max_bytes);

// An open regular file: stat before open, open with O_NONBLOCK (a FIFO swapped in after the stat
// cannot block), then the descriptor's own fstat checked again. Closes itself.
class InputFile {
 public:
  InputFile(const std::string& path, const std::string& what, uint64_t max_bytes);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  int fd() const { return fd_; }
  uint64_t size() const { return size_; }
  // Reads exactly n bytes at offset; FileError if the file ends first or a read fails.
  void read_at(void* dst, size_t n, uint64_t offset) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// The whole of a regular file of at most `max_bytes`.
std::string read_input_file(const std::string& path, const std::string& what, uint64_t max_bytes);

// Writes `n` bytes to `path` (created or truncated), checking every write and the close:
// FileError "cannot write 'PATH': No space left on device" where one fails.
void write_output_file(const std::string& path, const void* data, size_t n);

// Flushes and checks a stdio stream the CLI printed to; FileError naming `what` ("standard output")
// when any earlier write or the flush failed.
void check_stream(std::FILE* f, const std::string& what);

}  // namespace sabre::support
