#include "tune/kernel_pack.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "backends/cublaslt/lt_spec.h"
#include "backends/cutlass/conv_sm90.h"
#include "backends/cutlass/conv_spec.h"
#include "backends/cutlass/emitter.h"
#include "backends/cutlass/kernel_spec.h"
#include "tune/conv_tune.h"
#include "tune/profiler.h"

namespace sabre::tune {
namespace {

namespace fs = std::filesystem;
namespace cb = cutlass_backend;

#include "tune/kernel_pack.inc"  // kKernelPackText: data/kernel_pack.txt

constexpr const char* kRecordPrefix = "pack-";
constexpr const char* kRecordSuffix = ".list";

bool is_kernel_name(const std::string& n) {
  if (cb::is_sm90_conv_kernel_name(n)) return cb::parse_sm90_conv_kernel_name(n).has_value();
  if (cb::is_conv_kernel_name(n)) return cb::parse_conv_kernel_name(n).has_value();
  return cb::parse_kernel_name(n).has_value() || cublaslt_backend::parse_lt_kernel_name(n).has_value();
}

}  // namespace

std::vector<PackEntry> parse_pack_list(const std::string& text, const std::string& origin) {
  std::vector<PackEntry> out;
  std::set<std::string> seen;
  std::istringstream in(text);
  int no = 0;
  for (std::string line; std::getline(in, line);) {
    ++no;
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string name, extra;
    if (!(words >> name)) continue;
    const std::string at = origin + ":" + std::to_string(no) + ": ";
    if (words >> extra)
      throw PackListError(at + "one kernel name a line, found '" + name + "' and '" + extra + "'");
    if (name.size() > 200 || !is_kernel_name(name))
      throw PackListError(at + "'" + name.substr(0, 200) +
                          "' is not a kernel name (sabre kernels list --names shows GEMM kernels; docs/KERNELS.md the rest)");
    if (!seen.insert(name).second) throw PackListError(at + "'" + name + "' is listed twice");
    out.push_back({name, no});
  }
  return out;
}

const std::string& builtin_pack_list() {
  static const std::string text = kKernelPackText;
  return text;
}

const char* builtin_pack_list_origin() { return "the built-in pack list (data/kernel_pack.txt)"; }

CompileJob kernel_compile_job(const std::string& name, int target_sm) {
  if (cb::is_sm90_conv_kernel_name(name) || cb::is_conv_kernel_name(name)) {
    if (auto s = cb::parse_sm90_conv_kernel_name(name))
      if (auto why = cb::sm90_conv_unsupported_reason(*s, target_sm)) throw std::invalid_argument(*why);
    if (auto s = cb::parse_conv_kernel_name(name))
      if (auto why = cb::conv_unsupported_reason(*s, target_sm)) throw std::invalid_argument(*why);
    return conv_compile_job(name, target_sm);
  }
  if (auto lt = cublaslt_backend::parse_lt_kernel_name(name)) {
    if (auto why = cublaslt_backend::unsupported_reason(lt->spec)) throw std::invalid_argument(*why);
    return lt_compile_job(*lt);
  }
  auto spec = cb::parse_kernel_name(name);
  if (!spec) throw std::invalid_argument("'" + name + "' is not a kernel name");
  if (auto why = cb::unsupported_reason(*spec, target_sm)) throw std::invalid_argument(*why);
  return gemm_compile_job(*spec, target_sm);
}

void write_pack_record(const std::string& cache_dir, const std::string& arch, const std::string& list_origin,
                       const std::vector<std::pair<std::string, std::string>>& name_keys) {
  const fs::path path = fs::path(cache_dir) / (kRecordPrefix + arch + kRecordSuffix);
  const fs::path tmp = path.string() + ".tmp-" + std::to_string(getpid());
  {
    std::ofstream out(tmp);
    out << "# sabre kernels pack for " << arch << " from " << list_origin << ": the cache entries it holds\n";
    for (const auto& [name, key] : name_keys) out << name << "-" << key << "\n";
    if (!out.flush()) throw std::runtime_error("kernel cache: cannot write " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);  // atomically: a compile reading it never sees half a record
  if (ec) {
    fs::remove(tmp, ec);
    throw std::runtime_error("kernel cache: cannot write " + path.string());
  }
}

std::set<std::string> pack_entries(const std::string& cache_dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(cache_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string f = it->path().filename().string();
    if (!f.starts_with(kRecordPrefix) || !f.ends_with(kRecordSuffix)) continue;
    std::ifstream in(it->path());
    for (std::string line; std::getline(in, line);)
      if (!line.empty() && line[0] != '#') out.insert(line);
  }
  return out;
}

}  // namespace sabre::tune
