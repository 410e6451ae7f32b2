#include "cli_util.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <new>
#include <stdexcept>

#include <CLI/CLI.hpp>

#include "command.h"
#include "support/files.h"
#include "tune/gpu_pool.h"

#if SABRE_RUNTIME_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace sabre::cli {

namespace {

std::string one_line(std::string s) {
  // Messages end without a trailing newline so the error stays one printf line.
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

uint64_t unsigned_flag(const ParsedArgs& args, const std::string& flag, uint64_t def, size_t max_digits,
                       const std::string& expected) {
  auto v = args.value(flag);
  if (!v) return def;
  bool ok = !v->empty() && v->size() <= max_digits;
  for (char c : *v) ok = ok && std::isdigit(static_cast<unsigned char>(c));
  if (!ok) throw UsageError("bad " + flag + " '" + *v + "': expected " + expected);
  return std::stoull(*v);
}

#if SABRE_RUNTIME_HAVE_CUDA
DeviceInputs::~DeviceInputs() {
  for (void* p : ptrs_)
    if (cudaError_t e = cudaFree(p); e != cudaSuccess)
      std::fprintf(stderr, "sabre: warning: freeing an input on the GPU: %s\n", cudaGetErrorString(e));
}

void* DeviceInputs::upload(const std::string& name, const void* host, size_t bytes) {
  void* p = nullptr;
  if (cudaMalloc(&p, std::max<size_t>(bytes, 1)) != cudaSuccess)
    throw std::runtime_error("cannot allocate " + std::to_string(bytes) + " bytes on the GPU for input '" + name + "'");
  ptrs_.push_back(p);
  if (cudaError_t e = cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice); e != cudaSuccess)
    throw std::runtime_error("cannot copy input '" + name + "' to the GPU: " + cudaGetErrorString(e));
  return p;
}
#endif

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::optional<std::string> ParsedArgs::value(const std::string& flag) const {
  auto it = values.find(flag);
  if (it == values.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> ParsedArgs::all(const std::string& flag) const {
  auto it = values.find(flag);
  return it == values.end() ? std::vector<std::string>{} : it->second;
}

namespace {

// "-o,--output" -> {"-o", "--output"}.
std::vector<std::string> spellings(const FlagSpec& f) {
  std::vector<std::string> out = {f.name};
  std::string rest = f.alias;
  while (!rest.empty()) {
    auto comma = rest.find(',');
    out.push_back(rest.substr(0, comma));
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
  }
  return out;
}

// CLI11's name list for `f`, the canonical long name first (CLI11 reports an option by its first
// long name, so its errors name the flag as the help does).
std::string cli11_names(const FlagSpec& f) {
  std::string names;
  for (const auto& s : spellings(f)) names += (names.empty() ? "" : ",") + s;
  return names;
}

const FlagSpec* find_spec(const std::vector<FlagSpec>& flags, const std::string& spelled) {
  for (const auto& f : flags)
    for (const auto& s : spellings(f))
      if (s == spelled) return &f;
  return nullptr;
}

[[noreturn]] void unknown_option(const std::string& arg, const std::vector<FlagSpec>& flags) {
  const std::string key = arg.substr(0, arg.find('='));
  std::string best;
  size_t best_d = 3;  // suggest only close matches
  for (const auto& f : flags)
    for (const auto& s : spellings(f))
      if (size_t d = edit_distance(key, s); d < best_d) {
        best_d = d;
        best = f.name;
      }
  throw UsageError("unknown option '" + key + "'" + (best.empty() ? "" : "; did you mean '" + best + "'?"));
}

}  // namespace

ParsedArgs parse_args(const std::vector<std::string>& args, const std::vector<FlagSpec>& flags) {
  CLI::App app;
  app.set_help_flag("-h,--help");
  app.allow_extras(true);  // unknown options come back in remaining(), reported below with a suggestion
  std::vector<std::string> positional;
  app.add_option("positional", positional)->expected(0, -1);
  // Values land in std::map nodes, which stay put while CLI11 holds references to them.
  std::map<std::string, std::vector<std::string>> values;
  std::map<std::string, CLI::Option*> switches;
  for (const auto& f : flags) {
    if (f.metavar.empty()) {
      switches[f.name] = app.add_flag(cli11_names(f), f.help)->disable_flag_override();
    } else {
      app.add_option(cli11_names(f), values[f.name], f.help)
          ->type_name(f.metavar)
          ->expected(1)
          ->allow_extra_args(false)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    }
  }
  // CLI11 parses a reversed vector (it pops from the back).
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  ParsedArgs out;
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    out.help = true;
    return out;
  } catch (const CLI::ArgumentMismatch& e) {
    // "--output: 1 required DIR missing" (no value) or "--plan-only: ..." (a value given to a switch).
    // "--output: 1 required DIR missing", or "plan-only was given a disallowed flag override".
    const std::string what = e.what();
    std::string name = what.substr(0, what.find_first_of(": "));
    if (name.rfind("-", 0) != 0) name = (name.size() == 1 ? "-" : "--") + name;
    const FlagSpec* f = find_spec(flags, name);
    if (f && f->metavar.empty()) throw UsageError(f->name + " takes no value");
    if (f) throw UsageError(f->name + " needs a value: " + f->name + " " + f->metavar);
    throw UsageError(one_line(what));
  } catch (const CLI::ParseError& e) {
    throw UsageError(one_line(e.what()));
  }
  for (const auto& r : app.remaining())
    if (r != "--") unknown_option(r, flags);
  out.positional = std::move(positional);
  for (const auto& f : flags) {
    std::vector<std::string> v;
    if (f.metavar.empty()) {
      v.assign(switches[f.name]->count(), "1");
    } else {
      v = values[f.name];
      // An empty value is never meant: -o '' would write into the working directory.
      for (const auto& x : v)
        if (x.empty()) throw UsageError(f.name + " is given an empty value: " + f.name + " " + f.metavar);
    }
    if (v.size() > 1 && !f.repeated)
      throw UsageError(f.name + " is given twice ('" + v[v.size() - 2] + "' and '" + v.back() + "')");
    if (!v.empty()) out.values[f.name] = std::move(v);
  }
  if (auto m = out.value("--onnx")) {
    if (!out.positional.empty())
      throw UsageError("the model is given twice ('" + *m + "' with --onnx and '" + out.positional[0] + "'): give one");
    out.positional.insert(out.positional.begin(), *m);
  }
  return out;
}

std::string flags_help(const std::vector<FlagSpec>& flags) {
  std::vector<std::string> left;
  size_t width = 10;  // "-h, --help"
  for (const auto& f : flags) {
    // Short spellings first, as CLI tools list them: "-o, --output, --out DIR".
    std::vector<std::string> names = spellings(f);
    std::stable_partition(names.begin(), names.end(), [](const std::string& n) { return n.size() == 2; });
    std::string l;
    for (const auto& n : names) l += (l.empty() ? "" : ", ") + n;
    if (!f.metavar.empty()) l += " " + f.metavar;
    width = std::max(width, l.size());
    left.push_back(l);
  }
  std::string out;
  for (size_t i = 0; i < flags.size(); ++i) {
    out += "  " + left[i] + std::string(width - left[i].size() + 3, ' ') + flags[i].help;
    if (flags[i].repeated) out += " (repeatable)";
    out += "\n";
  }
  out += "  -h, --help" + std::string(width - 10 + 3, ' ') + "show this help\n";
  return out;
}

FlagSpec dim_flag(const std::string& help) {
  return {"--dim", "--dynamic,--shapes", "NAME=VALUE",
          help + "; several may go in one, comma-separated (batch=8,seq=128); --dynamic and --shapes "
                 "(trtexec) are other spellings, and where a command takes dim values, INPUT:AxB (trtexec's "
                 "--shapes=input_ids:8x128) sets the dims of that input's shape",
          true};
}
FlagSpec output_flag(const std::string& help) { return {"--output", "-o,--out", "PATH", help, false}; }
FlagSpec jobs_flag(const std::string& help) { return {"--jobs", "-j", "N", help + "; -j4, -j 4 and --jobs 4 alike", false}; }
FlagSpec arch_flag(const std::string& help) {
  return {"--arch", "", "ARCH", help + "; spellings: sm_90a = sm90a = sm90 = 90, sm_80 = sm80 = 80", false};
}
FlagSpec dtype_flag(const std::string& help) {
  return {"--dtype", "", "DTYPE", help + "; spellings: f16 = fp16 = float16, bf16 = bfloat16, f32 = fp32 = float32", false};
}
FlagSpec onnx_flag() { return {"--onnx", "", "MODEL.onnx", "the model, as trtexec spells it (the same as giving MODEL.onnx)", false}; }
FlagSpec json_flag() { return {"--json", "", "", "print one JSON document on stdout instead of the text report (docs/USAGE.md)", false}; }

std::vector<std::string> dim_texts(const ParsedArgs& args) {
  std::vector<std::string> out;
  for (const auto& t : args.all("--dim")) {
    size_t start = 0;
    for (;;) {
      size_t comma = t.find(',', start);
      out.push_back(t.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return out;
}

std::string normalize_arch(const std::string& text, const std::string& flag) {
  std::string s = text;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s.rfind("sm_", 0) == 0) s = s.substr(3);
  else if (s.rfind("sm", 0) == 0) s = s.substr(2);
  const bool arch_specific = !s.empty() && s.back() == 'a';
  if (arch_specific) s.pop_back();
  if (s.empty() || s.size() > 3 || s.find_first_not_of("0123456789") != std::string::npos || s[0] == '0')
    throw UsageError("bad " + flag + " '" + text + "': expected an SM architecture such as sm_90a, sm90, 90 or sm_80");
  const int n = std::stoi(s);
  return "sm_" + s + (arch_specific || n == 90 ? "a" : "");
}

int arch_number(const std::string& normalized) {
  std::string s = normalized.substr(3);
  if (!s.empty() && s.back() == 'a') s.pop_back();
  return std::stoi(s);
}

std::string normalize_dtype(const std::string& text, const std::vector<std::string>& allowed, const std::string& flag) {
  std::string s = text;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  std::string d = s == "f16" || s == "fp16" || s == "float16" || s == "half" ? "f16"
                  : s == "bf16" || s == "bfloat16"                          ? "bf16"
                  : s == "f32" || s == "fp32" || s == "float32" || s == "float" ? "f32"
                                                                               : "";
  if (d.empty() || std::find(allowed.begin(), allowed.end(), d) == allowed.end()) {
    std::string list;
    for (size_t i = 0; i < allowed.size(); ++i)
      list += (i == 0 ? "" : i + 1 == allowed.size() ? " or " : ", ") + allowed[i];
    throw UsageError("bad " + flag + " '" + text + "': use " + list);
  }
  return d;
}

std::string dtype_choice(const ParsedArgs& args, const std::vector<std::string>& allowed, const std::string& def) {
  std::vector<std::pair<std::string, std::string>> given;  // (spelling, dtype)
  if (auto v = args.value("--dtype")) given.push_back({"--dtype " + *v, normalize_dtype(*v, allowed)});
  if (args.has("--fp16")) given.push_back({"--fp16", "f16"});
  if (args.has("--bf16")) given.push_back({"--bf16", "bf16"});
  for (const auto& g : given)
    if (g.second != given[0].second)
      throw UsageError(given[0].first + " and " + g.first + " contradict each other: give one");
  return given.empty() ? def : given[0].second;
}

int jobs_value(const ParsedArgs& args, int def) {
  auto v = args.value("--jobs");
  if (!v) return def;
  if (v->find_first_not_of("0123456789") != std::string::npos || v->size() > 4 || std::stoi(*v) < 1)
    throw UsageError("bad --jobs '" + *v + "': give a positive number of processes, like -j4");
  return std::stoi(*v);
}

FlagSpec gpus_flag(const std::string& help) {
  return {"--gpus", "", "all|N|LIST",
          help + ": all, the first N (--gpus 2), or ids (--gpus 0,2,3; one GPU by id: --gpus device=1); default GPU 0",
          false};
}

std::vector<int> gpus_value(const ParsedArgs& args) {
  auto v = args.value("--gpus");
  if (!v) return {};
  try {
    return tune::parse_gpus(*v);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

nlohmann::ordered_json json_header(const std::string& command) {
  nlohmann::ordered_json j;
  j["schema"] = "sabre." + command + "/1";
  j["sabre_version"] = SABRE_VERSION;
  return j;
}

void print_json(const nlohmann::ordered_json& doc) {
  const std::string text = doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
}

std::pair<std::string, std::string> split_assignment(const std::string& text, const std::string& flag,
                                                     const std::string& example) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw UsageError("bad " + flag + " '" + text + "': expected " + example);
  return {text.substr(0, eq), text.substr(eq + 1)};
}

std::map<std::string, int64_t> parse_dims(const std::vector<std::string>& given) {
  std::map<std::string, int64_t> out;
  ParsedArgs split;
  split.values["--dim"] = given;
  for (const auto& t : dim_texts(split)) {
    if (is_input_shape(t)) continue;  // NAME:AxB, once the inputs are known (add_input_shape_dims)
    auto [name, value] = split_assignment(t, "--dim", "NAME=VALUE with a positive integer, like batch=4");
    bool ident = std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_';
    for (char c : name) ident = ident && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    if (!ident) throw UsageError("bad --dim '" + t + "': '" + name + "' is not a dim name (letters, digits, _)");
    int64_t v = 0;
    bool ok = !value.empty() && value.size() <= 12;
    for (char c : value) ok = ok && std::isdigit(static_cast<unsigned char>(c));
    if (ok) v = std::stoll(value);
    if (!ok || v <= 0) throw UsageError("bad --dim '" + t + "': the value must be a positive integer, like batch=4");
    auto [it, fresh] = out.emplace(name, v);
    if (!fresh && it->second != v)
      throw UsageError("--dim " + name + " is given twice with different values (" + std::to_string(it->second) +
                       " and " + std::to_string(v) + ")");
  }
  return out;
}

bool is_input_shape(const std::string& text) {
  return text.find('=') == std::string::npos && text.find(':') != std::string::npos;
}

void add_input_shape_dims(std::map<std::string, int64_t>& dims, const ParsedArgs& args, const InputDims& inputs) {
  std::string names;
  for (const auto& [n, d] : inputs) names += (names.empty() ? "" : ", ") + n;
  std::map<std::string, std::string> source;  // dim -> the text that set it
  for (const auto& t : dim_texts(args)) {
    if (!is_input_shape(t)) continue;
    const size_t colon = t.rfind(':');  // an input's name may hold ':' ("input:0")
    const std::string name = t.substr(0, colon), shape = t.substr(colon + 1);
    auto in = std::find_if(inputs.begin(), inputs.end(), [&](const auto& i) { return i.first == name; });
    if (in == inputs.end()) throw UsageError("--shapes '" + t + "': the model has no input '" + name + "'; its inputs are: " + names);
    std::vector<std::string> extents;
    for (size_t start = 0;;) {
      size_t x = shape.find('x', start);
      extents.push_back(shape.substr(start, x == std::string::npos ? std::string::npos : x - start));
      if (x == std::string::npos) break;
      start = x + 1;
    }
    if (extents.size() != in->second.size())
      throw UsageError("--shapes '" + t + "': input '" + name + "' has " + std::to_string(in->second.size()) +
                       " dims, the shape gives " + std::to_string(extents.size()) + " (write them as AxBxC)");
    for (size_t i = 0; i < extents.size(); ++i) {
      const std::string& e = extents[i];
      const std::string& d = in->second[i];
      if (e.empty() || e.size() > 12 || e.find_first_not_of("0123456789") != std::string::npos || std::stoll(e) < 1)
        throw UsageError("--shapes '" + t + "': '" + e + "' is not a positive integer (write the shape as AxBxC)");
      const int64_t v = std::stoll(e);
      const bool symbol = !d.empty() && (std::isalpha(static_cast<unsigned char>(d[0])) || d[0] == '_') &&
                          d.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == std::string::npos;
      if (!symbol) {
        if (d.find_first_not_of("0123456789") == std::string::npos && !d.empty() && std::stoll(d) != v)
          throw UsageError("--shapes '" + t + "': dim " + std::to_string(i) + " of input '" + name + "' is " + d +
                           ", not " + e);
        continue;  // an expression (seq*2) follows from the symbols
      }
      auto [it, fresh] = dims.emplace(d, v);
      if (!fresh && it->second != v)
        throw UsageError("--shapes '" + t + "' gives " + d + "=" + e + " but " +
                         (source.count(d) ? "'" + source[d] + "'" : std::string("--dim")) + " gives " + d + "=" +
                         std::to_string(it->second));
      source.emplace(d, t);
    }
  }
}

InputDims graph_input_dims(const ir::Graph& g) {
  InputDims out;
  for (const ir::Value* v : g.inputs()) {
    out.push_back({v->name(), {}});
    if (v->type().known)
      for (const auto& d : v->shape()) out.back().second.push_back(d.str());
  }
  return out;
}

std::string sanitize_filename(const std::string& name) {
  std::string out;
  for (char c : name) {
    bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
    out += keep ? c : '_';
  }
  if (out.empty() || out == "." || out == "..") out = "_" + out;
  return out;
}

std::string describe(const std::exception& e) {
  if (const auto* fe = dynamic_cast<const std::filesystem::filesystem_error*>(&e)) {
    // "filesystem error: cannot create directories: Permission denied [x]" -> the path and the reason.
    std::string p = fe->path1().string();
    std::string msg = "cannot access '" + p + "': " + fe->code().message();
    if (!fe->path2().empty()) msg += " (and '" + fe->path2().string() + "')";
    return msg;
  }
  if (dynamic_cast<const std::bad_alloc*>(&e) || dynamic_cast<const std::length_error*>(&e))
    return "out of memory: the model or an input needs more memory than this machine has (a huge dim or tensor?)";
  return describe_message(e.what());
}

std::string describe_message(const std::string& what) {
  std::string w = one_line(what);
  // A bare library message ("stoll", "vector::_M_range_check: ...", "map::at") says nothing to a user.
  bool library = w.empty() || w.find("::") != std::string::npos || w.find(' ') == std::string::npos;
  if (library) return "internal error (" + (w.empty() ? std::string("no message") : w) + "); please report it with the command line";
  return w;
}

int guarded(const char* command, const std::function<int()>& body) {
  try {
    int rc = body();
    support::check_stream(stdout, "standard output");
    return rc;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "sabre %s: error: %s (see sabre %s --help)\n", command, one_line(e.what()).c_str(), command);
    return kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sabre %s: error: %s\n", command, describe(e).c_str());
    return kExitError;
  }
}

int64_t default_dim(const std::string& symbol) {
  std::string s = symbol;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  bool batch_like = s.find("batch") != std::string::npos || s == "n" || s == "b" || s == "bs";
  return batch_like ? 1 : 8;
}

codegen::Stem stem_flag(const ParsedArgs& args) {
  codegen::Stem stem = codegen::Stem::direct;
  if (auto v = args.value("--stem")) {
    try {
      stem = codegen::parse_stem(*v);
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }
  if (args.has("--no-im2col-stem")) {
    if (args.has("--stem") && stem != codegen::Stem::conv)
      throw UsageError("--no-im2col-stem (the same as --stem conv) and --stem " + std::string(codegen::stem_name(stem)) +
                       " contradict each other: give one");
    stem = codegen::Stem::conv;
  }
  return stem;
}

}  // namespace sabre::cli
