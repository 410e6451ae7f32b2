// Compiles kernel sources into shared libraries once, in parallel, cached by content.
//
// Candidates do not depend on the problem shape, so a (config, epilogue, dtype, arch) source is
// compiled once and kept under its key: the hash (support::hash64) of the source text, the
// compiler's version and the flags, with each include directory (-I) standing for the contents
// of the headers under it, not its path, so a cache copied to another machine still hits. Failures are cached too (with their log), so a warm run never retries a known-bad
// candidate. Results are moved into place atomically: a kill mid-compile leaves no half object.
// Tests: tests/unit/compile_cache_test.cpp
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace sabre::tune {

struct CompileJob {
  std::string name;                // the kernel's name: its identity, and the file stem
  std::string source;              // the whole translation unit
  std::vector<std::string> flags;  // compiler flags (arch, includes, defines)
};

struct CompileResult {
  std::string name;
  bool ok = false;
  bool cached = false;  // no compiler ran
  std::string library;  // the .so, when ok
  std::string log;      // the compiler log's path, kept for failures
  double seconds = 0;
};

class CompileCache {
 public:
  // `compiler` is argv[0] of a CUDA-compatible compiler driver ("nvcc"); its `--version` output
  // becomes part of every key.
  explicit CompileCache(std::string dir = default_dir(), std::string compiler = "nvcc");

  // $XDG_CACHE_HOME/sabre/kernels, else ~/.cache/sabre/kernels.
  static std::string default_dir();

  const std::string& dir() const { return dir_; }
  const std::string& compiler_version() const { return compiler_version_; }
  // 16 hex digits: hash of the key's version, source, compiler version and flags (include
  // directories by content).
  std::string key(const CompileJob& job) const;

  // Compiles what is not cached, `parallel` at a time; progress goes to stderr (a bar with ETA on
  // a terminal, plain lines otherwise; nothing when quiet). Results in the order of `jobs`.
  std::vector<CompileResult> compile_all(const std::vector<CompileJob>& jobs, int parallel, bool quiet = false);

  // The cached result of a job, without compiling (ok=false, cached=false when absent).
  CompileResult lookup(const CompileJob& job) const;

 private:
  CompileResult compile_one(const CompileJob& job) const;
  std::string dir_;
  std::string compiler_;
  std::string compiler_version_;
};

// The flags of a compiler command line built with the placeholders @SRC@ (source) and @LIB@
// (library), less what the cache adds itself: the compiler, the source, -o and the library,
// -shared and -Xcompiler -fPIC. Every caller that keys a kernel must use this, so `sabre tune`
// and `sabre compile` find each other's objects.
std::vector<std::string> cache_flags(const std::vector<std::string>& command);

}  // namespace sabre::tune
