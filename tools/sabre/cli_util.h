// Command-line helpers shared by the subcommands: flag parsing (--flag value, --flag=value,
// repeated flags, -o), NAME=VALUE pairs (--dim batch=4, --input ids=ids.npy), per-command --help,
// and one place that turns exceptions into one-line errors and exit codes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "codegen/lower.h"

namespace sabre::cli {

// A bad command line: reported as one line, exit code kExitUsage.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct FlagSpec {
  std::string name;        // "--dim"
  std::string alias;       // "-o", or empty
  std::string metavar;     // "NAME=VALUE"; empty for a boolean switch
  std::string help;        // one line
  bool repeated = false;   // may be given more than once
};

struct ParsedArgs {
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>> values;  // by FlagSpec::name; switches hold "1"
  bool help = false;

  bool has(const std::string& flag) const { return values.count(flag) != 0; }
  std::optional<std::string> value(const std::string& flag) const;
  std::vector<std::string> all(const std::string& flag) const;
};

// Parses `args` (everything after the subcommand name). "--" ends flags. Throws UsageError for an
// unknown flag (naming the closest known one), a missing value, or a non-repeated flag given twice.
ParsedArgs parse_args(const std::vector<std::string>& args, const std::vector<FlagSpec>& flags);

// "  --dim NAME=VALUE   bind a symbolic dim (repeatable)" lines for --help.
std::string flags_help(const std::vector<FlagSpec>& flags);

// "batch=4" -> {"batch", "4"}; UsageError naming `flag` and showing `example` otherwise.
std::pair<std::string, std::string> split_assignment(const std::string& text, const std::string& flag,
                                                     const std::string& example);
// Every --dim NAME=VALUE: a positive integer for a symbol name; given twice with different values is an error.
std::map<std::string, int64_t> parse_dims(const std::vector<std::string>& texts);

// A file name from a tensor name: [A-Za-z0-9_.-] kept, the rest '_' ("/enc/out:0" -> "_enc_out_0").
std::string sanitize_filename(const std::string& name);

// An exception as one line a user can act on, never a C++ type name: filesystem_error ->
// "cannot access 'PATH': REASON", bad_alloc/length_error -> "out of memory: ...", a bare library
// message -> "internal error (...)"; others their what().
std::string describe(const std::exception& e);

// Runs `body`, then checks that standard output took everything printed (a full disk, /dev/full:
// exit 1, not 0), mapping UsageError to "sabre CMD: error: MSG (see sabre CMD --help)" and exit 2, and
// any other exception to "sabre CMD: error: MSG" and exit 1.
int guarded(const char* command, const std::function<int()>& body);

// The default value chosen for a dim symbol nobody bound: 1 for batch-like names, else 8.
int64_t default_dim(const std::string& symbol);

// The value of an unsigned integer flag (at most max_digits digits), or `def` when absent;
// UsageError "bad FLAG 'TEXT': expected EXPECTED" otherwise.
uint64_t unsigned_flag(const ParsedArgs& args, const std::string& flag, uint64_t def, size_t max_digits,
                       const std::string& expected);

// The stem path of sabre compile and sabre tune: --stem direct|im2col|conv (default direct), and
// --no-im2col-stem, the older spelling of --stem conv. UsageError for another value or for
// --no-im2col-stem with --stem im2col or direct.
codegen::Stem stem_flag(const ParsedArgs& args);

#if SABRE_RUNTIME_HAVE_CUDA
// The device copies of the inputs sabre run and sabre bench hand a Session: upload allocates and
// copies one (throwing, with the input's name, where either fails); the destructor frees them all,
// saying on stderr where a free fails.
class DeviceInputs {
 public:
  DeviceInputs() = default;
  DeviceInputs(const DeviceInputs&) = delete;
  DeviceInputs& operator=(const DeviceInputs&) = delete;
  ~DeviceInputs();
  void* upload(const std::string& name, const void* host, size_t bytes);

 private:
  std::vector<void*> ptrs_;
};
#endif

// Levenshtein distance, for "did you mean" suggestions.
size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace sabre::cli
