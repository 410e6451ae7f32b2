#include "cli_util.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <new>
#include <stdexcept>

#include "command.h"
#include "support/files.h"

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

ParsedArgs parse_args(const std::vector<std::string>& args, const std::vector<FlagSpec>& flags) {
  ParsedArgs out;
  bool flags_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (flags_done || a.empty() || a[0] != '-' || a == "-") {
      out.positional.push_back(a);
      continue;
    }
    if (a == "--") {
      flags_done = true;
      continue;
    }
    if (a == "--help" || a == "-h") {
      out.help = true;
      continue;
    }
    std::string key = a, inline_value;
    bool has_inline = false;
    if (auto eq = a.find('='); eq != std::string::npos && a.rfind("--", 0) == 0) {
      key = a.substr(0, eq);
      inline_value = a.substr(eq + 1);
      has_inline = true;
    }
    const FlagSpec* spec = nullptr;
    for (const auto& f : flags)
      if (f.name == key || (!f.alias.empty() && f.alias == key)) spec = &f;
    if (!spec) {
      std::string best;
      size_t best_d = 3;  // suggest only close matches
      for (const auto& f : flags) {
        size_t d = edit_distance(key, f.name);
        if (d < best_d) {
          best_d = d;
          best = f.name;
        }
      }
      throw UsageError("unknown option '" + key + "'" + (best.empty() ? "" : "; did you mean '" + best + "'?"));
    }
    std::string v = "1";
    if (!spec->metavar.empty()) {
      if (has_inline) {
        v = inline_value;
      } else if (i + 1 < args.size()) {
        v = args[++i];
      } else {
        throw UsageError(spec->name + " needs a value: " + spec->name + " " + spec->metavar);
      }
    } else if (has_inline) {
      throw UsageError(spec->name + " takes no value");
    }
    // An empty value is never meant: -o '' would write into the working directory.
    if (!spec->metavar.empty() && v.empty())
      throw UsageError(spec->name + " is given an empty value: " + spec->name + " " + spec->metavar);
    auto& slot = out.values[spec->name];
    if (!slot.empty() && !spec->repeated)
      throw UsageError(spec->name + " is given twice ('" + slot.back() + "' and '" + v + "')");
    slot.push_back(v);
  }
  return out;
}

std::string flags_help(const std::vector<FlagSpec>& flags) {
  std::vector<std::string> left;
  size_t width = 0;
  for (const auto& f : flags) {
    std::string l = (f.alias.empty() ? "" : f.alias + ", ") + f.name + (f.metavar.empty() ? "" : " " + f.metavar);
    width = std::max(width, l.size());
    left.push_back(l);
  }
  std::string out;
  for (size_t i = 0; i < flags.size(); ++i) {
    out += "  " + left[i] + std::string(width - left[i].size() + 3, ' ') + flags[i].help;
    if (flags[i].repeated) out += " (repeatable)";
    out += "\n";
  }
  out += "  -h, --help" + std::string(width > 10 ? width - 10 + 3 : 3, ' ') + "show this help\n";
  return out;
}

std::pair<std::string, std::string> split_assignment(const std::string& text, const std::string& flag,
                                                     const std::string& example) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw UsageError("bad " + flag + " '" + text + "': expected " + example);
  return {text.substr(0, eq), text.substr(eq + 1)};
}

std::map<std::string, int64_t> parse_dims(const std::vector<std::string>& texts) {
  std::map<std::string, int64_t> out;
  for (const auto& t : texts) {
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
  std::string w = one_line(e.what());
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
