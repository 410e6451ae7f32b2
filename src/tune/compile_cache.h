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
#include <optional>
#include <string>
#include <vector>

namespace sabre::tune {

struct CompileJob {
  std::string name;                // the kernel's name: its identity, and the file stem
  std::string source;              // the whole translation unit
  std::vector<std::string> flags;  // compiler flags (arch, includes, defines)
  // Jobs of one family with equal flags and preprocessor preamble may be compiled in one
  // translation unit (compile_batch.h); empty: always alone. Not part of the key.
  std::string batch_family = {};
};

struct CompileResult {
  std::string name;
  bool ok = false;
  bool cached = false;  // no compiler ran
  std::string library;  // the .so, when ok
  std::string log;      // the compiler log's path, kept for failures
  double seconds = 0;    // compiler wall time; a batch's is shared among its kernels
  std::string batch = {};  // built in one translation unit with these kernels (comma-separated); empty: alone
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

  // Compiles what is not cached, `parallel` compiler processes at a time, kernels of one family
  // batched up to max_batch() a unit (compile_batch.h); a batch that fails is built again one kernel
  // at a time, so a failure names its kernel. Progress goes to stderr (a bar with ETA on a terminal,
  // plain lines otherwise; nothing when quiet). Results in the order of `jobs`.
  std::vector<CompileResult> compile_all(const std::vector<CompileJob>& jobs, int parallel, bool quiet = false);

  // The cached result of a job, without compiling (ok=false, cached=false when absent).
  CompileResult lookup(const CompileJob& job) const;

  // At most this many kernels a translation unit (1: each alone). Default: $SABRE_KERNEL_BATCH, else 4.
  int max_batch() const { return max_batch_; }
  // Throws std::invalid_argument outside 1..kMaxBatch.
  void set_max_batch(int n);
  static constexpr int kMaxBatch = 16;

 private:
  CompileResult compile_one(const CompileJob& job) const;
  // Compiles the jobs in one translation unit and links each one's library; nullopt when the
  // compiler failed (the caller builds them one by one).
  std::optional<std::vector<CompileResult>> compile_batch(const std::vector<const CompileJob*>& batch) const;
  std::string dir_;
  std::string compiler_;
  std::string compiler_version_;
  int max_batch_ = 4;
};

// The flags of a compiler command line built with the placeholders @SRC@ (source) and @LIB@
// (library), less what the cache adds itself: the compiler, the source, -o and the library,
// -shared and -Xcompiler -fPIC. Every caller that keys a kernel must use this, so `sabre tune`
// and `sabre compile` find each other's objects.
std::vector<std::string> cache_flags(const std::vector<std::string>& command);

}  // namespace sabre::tune
