// Command-line helpers shared by the subcommands: flag tables parsed by CLI11 (--flag value,
// --flag=value, -j4, repeated flags, aliases), the options every command spells the same way (dims,
// arch, dtype, output, jobs, model), NAME=VALUE pairs (--dim batch=4, --input ids=ids.npy),
// per-command --help, and one place that turns exceptions into one-line errors and exit codes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "codegen/lower.h"

namespace sabre::cli {

// A bad command line: reported as one line, exit code kExitUsage.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct FlagSpec {
  std::string name;        // "--dim": the key in ParsedArgs
  std::string alias;       // other spellings, comma-separated ("-o", "--dynamic,--shapes"), or empty
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

// Parses `args` (everything after the subcommand name) with CLI11. "--" ends flags. A value given
// to --onnx (the trtexec spelling of the model path) becomes the first positional argument. Throws
// UsageError for an unknown flag (naming the closest known one), a missing value, a value given to a
// switch, or a non-repeated flag given twice.
ParsedArgs parse_args(const std::vector<std::string>& args, const std::vector<FlagSpec>& flags);

// "  --dim, --dynamic NAME=VALUE   bind a symbolic dim (repeatable)" lines for --help.
std::string flags_help(const std::vector<FlagSpec>& flags);

// ---- One vocabulary: the options several subcommands share, spelled and parsed the same way ----
FlagSpec dim_flag(const std::string& help);      // --dim (aliases --dynamic, --shapes), repeatable
FlagSpec output_flag(const std::string& help);   // -o, --output (alias --out)
FlagSpec jobs_flag(const std::string& help);     // -j, --jobs: -j4, -j 4, --jobs 4, --jobs=4
FlagSpec arch_flag(const std::string& help);     // --arch sm_90a|sm90a|sm90|90
FlagSpec dtype_flag(const std::string& help);    // --dtype f16|fp16|float16|bf16|bfloat16|f32|fp32|float32
FlagSpec onnx_flag();                            // --onnx MODEL.onnx (trtexec): the positional model
FlagSpec json_flag();                            // --json: one JSON document on stdout

// Every value of --dim (and its aliases), each split at commas: "batch=4,seq=128" is two.
std::vector<std::string> dim_texts(const ParsedArgs& args);
// The architecture in one spelling: "sm_90a", "sm90a", "sm_90", "sm90" and "90" are "sm_90a" (sabre's
// Hopper kernels use its arch-specific features), "80"/"sm80"/"sm_80" is "sm_80". UsageError otherwise.
std::string normalize_arch(const std::string& text, const std::string& flag = "--arch");
int arch_number(const std::string& normalized);  // "sm_90a" -> 90
// A dtype name in any accepted spelling -> "f16", "bf16" or "f32"; UsageError naming `allowed` otherwise.
std::string normalize_dtype(const std::string& text, const std::vector<std::string>& allowed,
                            const std::string& flag = "--dtype");
// --dtype, or the trtexec switches --fp16/--bf16 (contradicting each other is an error); `def` when none.
std::string dtype_choice(const ParsedArgs& args, const std::vector<std::string>& allowed, const std::string& def);
// -j/--jobs as a positive count, `def` when absent.
int jobs_value(const ParsedArgs& args, int def);
// --gpus all|N|LIST (tune and compile: the GPUs that time candidates, one worker each).
FlagSpec gpus_flag(const std::string& help);
// --gpus as tune::parse_gpus reads it (empty when absent: GPU 0); UsageError for a bad list. Ids past
// the machine's GPU count are found where the GPUs are probed.
std::vector<int> gpus_value(const ParsedArgs& args);

// The first keys of every --json document: {"schema": "sabre.COMMAND/1", "sabre_version": ...}.
// The schema number changes only when a key changes meaning or goes away (docs/USAGE.md).
nlohmann::ordered_json json_header(const std::string& command);
// The document on stdout, indented, one trailing newline; invalid UTF-8 in names becomes U+FFFD.
void print_json(const nlohmann::ordered_json& doc);

// sabre's version: the CMake project version and, where the build knew it, the git commit.
std::string version_text();

// "batch=4" -> {"batch", "4"}; UsageError naming `flag` and showing `example` otherwise.
std::pair<std::string, std::string> split_assignment(const std::string& text, const std::string& flag,
                                                     const std::string& example);
// Every --dim NAME=VALUE (each text may hold several, comma-separated): a positive integer for a
// symbol name; given twice with different values is an error.
std::map<std::string, int64_t> parse_dims(const std::vector<std::string>& texts);

// trtexec's --shapes form among the --dim texts: "input_ids:2x16" gives an input's whole shape, so
// its symbolic dims take those values (batch=2, seq=16). parse_dims skips these texts; a command
// that knows its inputs adds them with add_input_shape_dims, which checks the name, the rank and
// every static dim, and that a dim gets one value.
bool is_input_shape(const std::string& text);
using InputDims = std::vector<std::pair<std::string, std::vector<std::string>>>;  // name, dims as text
void add_input_shape_dims(std::map<std::string, int64_t>& dims, const ParsedArgs& args, const InputDims& inputs);
InputDims graph_input_dims(const ir::Graph& g);

// A file name from a tensor name: [A-Za-z0-9_.-] kept, the rest '_' ("/enc/out:0" -> "_enc_out_0").
std::string sanitize_filename(const std::string& name);

// An exception as one line a user can act on, never a C++ type name: filesystem_error ->
// "cannot access 'PATH': REASON", bad_alloc/length_error -> "out of memory: ...", a bare library
// message -> "internal error (...)"; others their what().
std::string describe(const std::exception& e);
// The same for a message that arrived as text (a status's message from the compile API).
std::string describe_message(const std::string& what);

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
