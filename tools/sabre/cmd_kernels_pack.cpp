// sabre kernels pack: builds the kernel pack (tune/kernel_pack.h) into the compile cache that sabre
// compile reads, in parallel and resumably: what the cache holds is skipped, what a run built stays
// built when it is stopped, and a kernel that fails is reported while the others go on.
#include "cmd_kernels_pack.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "backends/cutlass/nvcc.h"
#include "support/files.h"
#include "tune/compile_cache.h"
#include "tune/kernel_pack.h"

namespace sabre::cli {
namespace {

namespace fs = std::filesystem;

// A pack list is a text file of names: anything near this size is not one.
constexpr uint64_t kMaxListBytes = 16u << 20;

enum class State { cached, build, failed_before, unsupported };

const char* state_name(State s) {
  switch (s) {
    case State::cached: return "cached";
    case State::build: return "build";
    case State::failed_before: return "failed-before";
    case State::unsupported: return "unsupported";
  }
  return "?";
}

struct Item {
  tune::PackEntry entry;
  State state = State::build;
  std::string why;  // unsupported: the reason
  tune::CompileJob job;
  std::string key;
  tune::CompileResult result;
};

std::string mb(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f MB", bytes / 1e6);
  return b;
}

}  // namespace

int kernels_pack(const ParsedArgs& args) {
  if (args.positional.size() > 1)
    throw UsageError("sabre kernels pack takes no kernel names: list them in a file and give it with --list FILE");
  const auto t0 = std::chrono::steady_clock::now();
  const std::string arch = normalize_arch(args.value("--arch").value_or("sm_90a"));
  const int sm = arch_number(arch);
  const bool dry = args.has("--dry-run"), json = args.has("--json");
  const int jobs = jobs_value(args, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));

  std::string text, origin;
  if (auto list = args.value("--list")) {
    text = support::read_input_file(*list, "pack list", kMaxListBytes);  // FileError: one line, exit 1
    origin = *list;
  } else {
    text = tune::builtin_pack_list();
    origin = tune::builtin_pack_list_origin();
  }
  std::vector<tune::PackEntry> entries;
  try {
    entries = tune::parse_pack_list(text, origin);
  } catch (const tune::PackListError& e) {
    throw std::runtime_error(e.what());
  }
  if (entries.empty()) throw std::runtime_error(origin + " holds no kernel names (one a line; '#' starts a comment)");

  const std::string dir = args.value("--cache-dir").value_or(tune::CompileCache::default_dir());
  tune::CompileCache cache(dir, cutlass_backend::find_nvcc());
  if (auto b = args.value("--batch")) {
    const bool digits = !b->empty() && b->size() <= 2 && b->find_first_not_of("0123456789") == std::string::npos;
    const int n = digits ? std::stoi(*b) : 0;
    if (n < 1 || n > tune::CompileCache::kMaxBatch)
      throw UsageError("bad --batch '" + b->substr(0, 20) + "': give 1 to " + std::to_string(tune::CompileCache::kMaxBatch) +
                       " kernels a translation unit (1 builds each alone)");
    cache.set_max_batch(n);
  }
  std::vector<Item> items;
  std::vector<std::pair<std::string, std::string>> record;
  for (const auto& e : entries) {
    Item it;
    it.entry = e;
    try {
      it.job = tune::kernel_compile_job(e.name, sm);
    } catch (const std::invalid_argument& why) {
      it.state = State::unsupported;
      it.why = why.what();
      items.push_back(std::move(it));
      continue;
    }
    it.key = cache.key(it.job);
    const std::string stem = dir + "/" + e.name + "-" + it.key;
    record.push_back({e.name, it.key});
    tune::CompileResult hit = cache.lookup(it.job);
    if (hit.cached && !hit.ok && args.has("--retry-failed") && !dry) {
      std::error_code ec;
      fs::remove(stem + ".failed", ec);  // compile_all then tries it again
      hit = {};
    }
    it.state = hit.cached ? (hit.ok ? State::cached : State::failed_before) : State::build;
    it.result = hit;
    items.push_back(std::move(it));
  }
  size_t n_build = 0, n_cached = 0, n_failed_before = 0, n_unsupported = 0;
  for (const auto& it : items) {
    n_build += it.state == State::build;
    n_cached += it.state == State::cached;
    n_failed_before += it.state == State::failed_before;
    n_unsupported += it.state == State::unsupported;
  }

  if (dry) {
    if (json) {
      nlohmann::ordered_json j = json_header("kernels_pack");
      j["list"] = origin;
      j["arch"] = arch;
      j["cache_dir"] = dir;
      j["dry_run"] = true;
      j["kernels"] = nlohmann::ordered_json::array();
      for (const auto& it : items) {
        nlohmann::ordered_json k = {{"name", it.entry.name}, {"state", state_name(it.state)}};
        if (!it.why.empty()) k["why"] = it.why;
        j["kernels"].push_back(k);
      }
      j["summary"] = {{"to_build", n_build}, {"cached", n_cached}, {"failed_before", n_failed_before},
                      {"unsupported", n_unsupported}};
      print_json(j);
      return kExitOk;
    }
    for (const auto& it : items)
      std::printf("%-13s %s%s\n", state_name(it.state), it.entry.name.c_str(),
                  it.why.empty() ? "" : (" (" + it.why + ")").c_str());
    std::printf("would build %zu of %zu kernels for %s into %s (%zu cached, %zu failed before: --retry-failed, "
                "%zu unsupported)\n",
                n_build, items.size(), arch.c_str(), dir.c_str(), n_cached, n_failed_before, n_unsupported);
    return kExitOk;
  }

  // Recorded before building: a pack stopped half way still names its kernels to sabre compile.
  tune::write_pack_record(dir, arch, origin, record);
  std::fprintf(stderr,
               "sabre kernels pack: %zu kernels from %s for %s: %zu cached, %zu to build (%d at a time, up to %d a "
               "translation unit) into %s\n",
               items.size(), origin.c_str(), arch.c_str(), n_cached, n_build, jobs, cache.max_batch(), dir.c_str());
  for (const auto& it : items)
    if (it.state == State::unsupported)
      std::fprintf(stderr, "sabre kernels pack: skipped %s: cannot run on %s: %s\n", it.entry.name.c_str(), arch.c_str(),
                   it.why.c_str());
  std::vector<tune::CompileJob> todo;
  std::vector<size_t> where;
  for (size_t i = 0; i < items.size(); ++i)
    if (items[i].state == State::build) {
      todo.push_back(items[i].job);
      where.push_back(i);
    }
  auto results = cache.compile_all(todo, jobs);
  for (size_t t = 0; t < results.size(); ++t) items[where[t]].result = results[t];

  size_t built = 0, failed = 0;
  uint64_t bytes = 0;
  for (const auto& it : items) {
    if (it.state == State::unsupported) continue;
    if (it.result.ok) {
      built += it.state == State::build;
      std::error_code ec;
      const auto size = fs::file_size(it.result.library, ec);
      if (!ec) bytes += size;
    } else {
      ++failed;
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (json) {
    nlohmann::ordered_json j = json_header("kernels_pack");
    j["list"] = origin;
    j["arch"] = arch;
    j["cache_dir"] = dir;
    j["dry_run"] = false;
    j["kernels"] = nlohmann::ordered_json::array();
    for (const auto& it : items) {
      nlohmann::ordered_json k = {{"name", it.entry.name}};
      if (it.state == State::unsupported) {
        k["state"] = "unsupported";
        k["why"] = it.why;
      } else {
        k["state"] = !it.result.ok ? "failed" : it.state == State::build ? "built" : "cached";
        k["seconds"] = it.result.seconds;
        if (!it.result.batch.empty()) k["batch"] = it.result.batch;  // the kernels of its translation unit
        if (!it.result.ok) k["log"] = it.result.log;
      }
      j["kernels"].push_back(k);
    }
    j["summary"] = {{"built", built},     {"cached", n_cached},       {"failed", failed},
                    {"unsupported", n_unsupported}, {"bytes", bytes}, {"seconds", wall}};
    print_json(j);
  } else {
    for (const auto& it : items)
      if (it.state != State::unsupported && !it.result.ok)
        std::printf("failed: %s%s (log: %s)\n", it.entry.name.c_str(),
                    it.state == State::failed_before ? " (in an earlier run; --retry-failed tries again)" : "",
                    it.result.log.c_str());
    std::printf("pack for %s: %zu kernels: %zu built, %zu cached, %zu failed, %zu unsupported; %s on disk; %.1f s\n",
                arch.c_str(), items.size(), built, n_cached, failed, n_unsupported, mb(bytes).c_str(), wall);
  }
  return failed ? kExitError : kExitOk;
}

}  // namespace sabre::cli
