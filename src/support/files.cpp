#include "support/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sabre::support {

namespace {

std::string kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO (named pipe)";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

std::string prefix(const std::string& path, const std::string& what) {
  return "cannot read " + (what.empty() ? "" : what + " ") + "'" + path + "': ";
}

uint64_t check_stat(const struct stat& st, const std::string& path, const std::string& what, uint64_t max_bytes) {
  if (!S_ISREG(st.st_mode)) throw FileError(prefix(path, what) + "it is " + kind_of(st.st_mode) + ", not a regular file");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes)
    throw FileError(prefix(path, what) + "it is " + std::to_string(size) + " bytes, more than the " +
                    std::to_string(max_bytes) + "-byte limit for this kind of file");
  return size;
}

}  // namespace

uint64_t check_input_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
  struct stat st {};
  if (path.empty()) throw FileError("cannot read " + (what.empty() ? "" : what + " ") + "'': the path is empty");
  if (::stat(path.c_str(), &st) != 0) throw FileError(prefix(path, what) + std::strerror(errno));
  return check_stat(st, path, what, max_bytes);
}

InputFile::InputFile(const std::string& path, const std::string& what, uint64_t max_bytes) : path_(path) {
  check_input_file(path, what, max_bytes);
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) throw FileError(prefix(path, what) + std::strerror(errno));
  struct stat st {};
  try {
    if (::fstat(fd_, &st) != 0) throw FileError(prefix(path, what) + std::strerror(errno));
    size_ = check_stat(st, path, what, max_bytes);
    // Regular files never block; clearing the flag keeps reads plain.
    int fl = ::fcntl(fd_, F_GETFL);
    if (fl >= 0) ::fcntl(fd_, F_SETFL, fl & ~O_NONBLOCK);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void InputFile::read_at(void* dst, size_t n, uint64_t offset) const {
  auto* p = static_cast<char*>(dst);
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd_, p + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw FileError("cannot read '" + path_ + "': " + std::strerror(errno));
    if (r == 0)
      throw FileError("cannot read '" + path_ + "': it ended after " + std::to_string(offset + done) +
                      " bytes (it changed while being read?)");
    done += static_cast<size_t>(r);
  }
}

std::string read_input_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
  InputFile f(path, what, max_bytes);
  std::string out(static_cast<size_t>(f.size()), '\0');
  f.read_at(out.data(), out.size(), 0);
  return out;
}

void write_output_file(const std::string& path, const void* data, size_t n) {
  if (path.empty()) throw FileError("cannot write '': the path is empty");
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw FileError("cannot write '" + path + "': " + std::strerror(errno));
  const auto* p = static_cast<const char*>(data);
  size_t done = 0;
  while (done < n) {
    ssize_t w = ::write(fd, p + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int e = w < 0 ? errno : EIO;
      ::close(fd);
      throw FileError("cannot write '" + path + "': " + std::strerror(e));
    }
    done += static_cast<size_t>(w);
  }
  if (::close(fd) != 0) throw FileError("cannot write '" + path + "': " + std::strerror(errno));
}

void check_stream(std::FILE* f, const std::string& what) {
  errno = 0;
  if (std::fflush(f) != 0 || std::ferror(f)) {
    int e = errno;
    std::clearerr(f);
    throw FileError("cannot write " + what + (e ? std::string(": ") + std::strerror(e) : std::string()));
  }
}

}  // namespace sabre::support
