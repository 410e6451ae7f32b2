#include "tune/compile_cache.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "support/hash.h"
#include "support/subprocess.h"
#include "support/thread_pool.h"
#include "tune/compile_batch.h"

namespace fs = std::filesystem;

namespace sabre::tune {

namespace {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::string format_duration(double s) {
  char buf[32];
  if (s >= 60)
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  else
    std::snprintf(buf, sizeof buf, "%.0fs", s);
  return buf;
}

// Bumped whenever what a key covers or how it is hashed changes, so that no entry an older sabre
// cached is ever taken for this one's.
constexpr const char* kKeyVersion = "sabre-kernel-cache-2";

// An include directory as the key sees it: the hash of every regular file below it (relative name
// and bytes, in name order), never its path, so equal headers give equal keys on any machine and
// an edited header gives a new key. Hashed once per directory per process.
std::string include_dir_identity(const std::string& dir) {
  static std::mutex mu;
  static std::map<std::string, std::string> memo;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = memo.find(dir); it != memo.end()) return it->second;
  }
  std::vector<fs::path> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec)) files.push_back(it->path());
  std::sort(files.begin(), files.end());
  support::Hasher h;
  std::string bytes;
  for (const auto& f : files) {
    const std::string rel = f.lexically_relative(dir).generic_string();
    h.update(rel.data(), rel.size() + 1);  // with its NUL: names and contents cannot run together
    std::ifstream in(f, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    const uint64_t size = bytes.size();
    h.update(&size, sizeof size);
    h.update(bytes);
  }
  const std::string id = "@headers:" + support::hex16(h.digest()) + (files.empty() ? ":empty" : "");
  std::lock_guard<std::mutex> lock(mu);
  memo.emplace(dir, id);
  return id;
}

}  // namespace

std::string CompileCache::default_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg) return std::string(xdg) + "/sabre/kernels";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.cache/sabre/kernels";
}

CompileCache::CompileCache(std::string dir, std::string compiler) : dir_(std::move(dir)), compiler_(std::move(compiler)) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw std::runtime_error("kernel cache: cannot create " + dir_ + ": " + ec.message());
  // Temp files of sabres that were killed with -9 on this host.
  support::sweep_stale_temps(dir_);
  if (support::run_process({compiler_, "--version"}, &compiler_version_) != 0)
    throw std::runtime_error("kernel cache: cannot run '" + compiler_ + " --version' (is the CUDA toolkit on PATH?)");
  if (const char* b = std::getenv("SABRE_KERNEL_BATCH"); b && *b) {
    const std::string v = b;
    const bool digits = v.size() <= 2 && v.find_first_not_of("0123456789") == std::string::npos;
    const int n = digits ? std::stoi(v) : 0;
    if (n < 1 || n > kMaxBatch)
      throw std::runtime_error("SABRE_KERNEL_BATCH='" + v.substr(0, 20) + "' is not a batch size: give 1 to " +
                               std::to_string(kMaxBatch) + " kernels a translation unit (1 builds each alone)");
    max_batch_ = n;
  }
}

void CompileCache::set_max_batch(int n) {
  if (n < 1 || n > kMaxBatch)
    throw std::invalid_argument("kernel batch size " + std::to_string(n) + " is out of range: give 1 to " +
                                std::to_string(kMaxBatch) + " kernels a translation unit (1 builds each alone)");
  max_batch_ = n;
}

std::string CompileCache::key(const CompileJob& job) const {
  support::Hasher h;
  auto field = [&h](const std::string& s) { h.update(s.data(), s.size() + 1); };  // each with its NUL
  field(kKeyVersion);
  field(job.source);
  field(compiler_version_);
  for (size_t i = 0; i < job.flags.size(); ++i) {
    const std::string& f = job.flags[i];
    if ((f == "-I" || f == "-isystem") && i + 1 < job.flags.size()) {
      field(f + include_dir_identity(job.flags[++i]));  // -I DIR keys as -IDIR
    } else if (f.size() > 2 && f.rfind("-I", 0) == 0) {
      field("-I" + include_dir_identity(f.substr(2)));
    } else {
      field(f);
    }
  }
  return support::hex16(h.digest());
}

CompileResult CompileCache::lookup(const CompileJob& job) const {
  CompileResult r;
  r.name = job.name;
  std::string stem = dir_ + "/" + job.name + "-" + key(job);
  if (fs::exists(stem + ".so")) {
    r.ok = true;
    r.cached = true;
    r.library = stem + ".so";
  } else if (fs::exists(stem + ".failed")) {
    r.ok = false;
    r.cached = true;
    r.log = stem + ".log";
  }
  return r;
}

CompileResult CompileCache::compile_one(const CompileJob& job) const {
  CompileResult r = lookup(job);
  if (r.cached) return r;
  auto t0 = std::chrono::steady_clock::now();
  std::string stem = dir_ + "/" + job.name + "-" + key(job);
  // Work in a private temp name, then rename: concurrent tuners and kills never see half files.
  // The name carries host and pid, so a later run can sweep what a sabre killed with -9 left.
  std::string tmp = stem + ".tmp-" + support::temp_tag() + "-" +
                    std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()) % 100000);
  support::TempFiles temps({tmp + ".cu", tmp + ".so", tmp + ".log"});
  {
    std::ofstream src(tmp + ".cu");
    src << job.source;
    if (!src) throw std::runtime_error("kernel cache: cannot write " + tmp + ".cu");
  }
  std::vector<std::string> argv = {compiler_, "-shared", "-Xcompiler", "-fPIC"};
  argv.insert(argv.end(), job.flags.begin(), job.flags.end());
  argv.insert(argv.end(), {tmp + ".cu", "-o", tmp + ".so"});
  std::string cmd;
  for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + shell_quote(a);
  int rc = support::run_process(argv, nullptr, {tmp + ".log", temps.paths()});
  std::error_code ec;
  {
    std::ofstream(tmp + ".log", std::ios::app) << "\n# command: " << cmd << "\n# exit status: " << rc << "\n";
  }
  fs::rename(tmp + ".log", stem + ".log", ec);
  r.log = stem + ".log";
  if (rc == 0 && fs::exists(tmp + ".so")) {
    fs::rename(tmp + ".so", stem + ".so", ec);
    if (ec) throw std::runtime_error("kernel cache: cannot move " + tmp + ".so into place: " + ec.message());
    r.ok = true;
    r.library = stem + ".so";
  } else {
    std::ofstream(stem + ".failed") << "exit status " << rc << "\n";
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::optional<std::vector<CompileResult>> CompileCache::compile_batch(const std::vector<const CompileJob*>& batch) const {
  auto t0 = std::chrono::steady_clock::now();
  const std::string thread = std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()) % 100000);
  // Temp names as compile_one's, so a later run sweeps what a sabre killed with -9 left.
  const std::string tmp = dir_ + "/batch-" + batch.front()->name + ".tmp-" + support::temp_tag() + "-" + thread;
  support::TempFiles temps({tmp + ".cu", tmp + ".o", tmp + ".log"});
  std::string members;
  for (const CompileJob* j : batch) members += (members.empty() ? "" : ",") + j->name;
  {
    std::ofstream src(tmp + ".cu");
    src << batch_source(batch);
    if (!src) throw std::runtime_error("kernel cache: cannot write " + tmp + ".cu");
  }
  // One object for the batch; sections per function, so each kernel's library keeps only its own host code.
  std::vector<std::string> argv = {compiler_, "-c", "-Xcompiler", "-fPIC", "-Xcompiler", "-ffunction-sections",
                                   "-Xcompiler", "-fdata-sections"};
  const std::vector<std::string>& flags = batch.front()->flags;
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {tmp + ".cu", "-o", tmp + ".o"});
  std::string cmd;
  for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + shell_quote(a);
  const int rc = support::run_process(argv, nullptr, {tmp + ".log", temps.paths()});
  if (rc != 0 || !fs::exists(tmp + ".o")) return std::nullopt;
  std::string batch_log;
  {
    std::ifstream in(tmp + ".log");
    batch_log.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const double compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<CompileResult> results;
  for (const CompileJob* j : batch) {
    const auto tl = std::chrono::steady_clock::now();
    CompileResult r;
    r.name = j->name;
    r.batch = members;
    const std::string stem = dir_ + "/" + j->name + "-" + key(*j);
    const std::string ktmp = stem + ".tmp-" + support::temp_tag() + "-" + thread;
    const std::string log_tmp = stem + ".log.tmp-" + support::temp_tag() + "-" + thread;
    support::TempFiles ktemps({ktmp + ".map", ktmp + ".so", ktmp + ".log", log_tmp});
    const BatchExports exports = batch_exports(*j);
    {
      std::ofstream map(ktmp + ".map");
      map << version_script(exports);
      if (!map) throw std::runtime_error("kernel cache: cannot write " + ktmp + ".map");
    }
    std::vector<std::string> link = {compiler_, "-shared"};
    link.insert(link.end(), flags.begin(), flags.end());
    link.insert(link.end(), {tmp + ".o", "-o", ktmp + ".so", "-Xlinker", "--gc-sections", "-Xlinker",
                             "--version-script=" + ktmp + ".map"});
    for (const auto& [alias, def] : exports.aliases) link.insert(link.end(), {"-Xlinker", "--defsym=" + alias + "=" + def});
    std::string link_cmd;
    for (const auto& a : link) link_cmd += (link_cmd.empty() ? "" : " ") + shell_quote(a);
    std::vector<std::string> cleanup = temps.paths();
    cleanup.insert(cleanup.end(), ktemps.paths().begin(), ktemps.paths().end());
    const int lrc = support::run_process(link, nullptr, {ktmp + ".log", cleanup});
    std::string link_log;
    {
      std::ifstream in(ktmp + ".log");
      link_log.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    if (lrc != 0 || !fs::exists(ktmp + ".so")) {
      // Not cached as a failure: the caller builds this kernel alone, which names the fault.
      r.log = link_log;
      results.push_back(std::move(r));
      continue;
    }
    std::error_code ec;
    {
      std::ofstream log(log_tmp);
      log << "# built in one translation unit with: " << members << "\n" << batch_log << "\n# command: " << cmd
          << "\n# exit status: 0\n" << link_log << "# link: " << link_cmd << "\n# exit status: 0\n";
    }
    fs::rename(log_tmp, stem + ".log", ec);
    fs::rename(ktmp + ".so", stem + ".so", ec);
    if (ec) throw std::runtime_error("kernel cache: cannot move " + ktmp + ".so into place: " + ec.message());
    r.ok = true;
    r.library = stem + ".so";
    r.log = stem + ".log";
    r.seconds = compile_seconds / static_cast<double>(batch.size()) +
                std::chrono::duration<double>(std::chrono::steady_clock::now() - tl).count();
    results.push_back(std::move(r));
  }
  return results;
}

std::vector<CompileResult> CompileCache::compile_all(const std::vector<CompileJob>& jobs, int parallel, bool quiet) {
  std::vector<CompileResult> results(jobs.size());
  std::vector<size_t> todo;
  for (size_t i = 0; i < jobs.size(); ++i) {
    results[i] = lookup(jobs[i]);
    if (!results[i].cached) todo.push_back(i);
  }
  if (todo.empty()) return results;
  parallel = std::max(1, parallel);
  const bool tty = isatty(fileno(stderr));
  const auto t0 = std::chrono::steady_clock::now();
  std::mutex mu;
  size_t done = 0, failed = 0;
  auto report = [&](const CompileResult& r) {
    if (quiet) return;
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // ETA from the observed rate; with `parallel` compiles in flight the rate already includes that.
    double eta = done ? elapsed / static_cast<double>(done) * static_cast<double>(todo.size() - done) : 0;
    if (tty) {
      const int width = 30;
      int filled = static_cast<int>(width * done / todo.size());
      std::fprintf(stderr, "\r[%s%s] %zu/%zu kernels compiled, %zu failed, %s elapsed, ETA %s   ",
                   std::string(static_cast<size_t>(filled), '#').c_str(),
                   std::string(static_cast<size_t>(width - filled), ' ').c_str(), done, todo.size(), failed,
                   format_duration(elapsed).c_str(), format_duration(eta).c_str());
      if (done == todo.size()) std::fprintf(stderr, "\n");
    } else {
      std::fprintf(stderr, "compiled %zu/%zu: %s %s (%.1f s%s)%s\n", done, todo.size(), r.name.c_str(),
                   r.ok ? "ok" : "FAILED", r.seconds, r.batch.empty() ? "" : ", in one translation unit with its batch",
                   r.ok ? "" : (", log: " + r.log).c_str());
    }
    std::fflush(stderr);
  };
  const std::vector<std::vector<size_t>> units = plan_compile_units(jobs, todo, max_batch_, parallel);
  auto finish = [&](size_t i, CompileResult r) {
    std::lock_guard<std::mutex> lock(mu);
    results[i] = std::move(r);
    ++done;
    if (!results[i].ok) ++failed;
    report(results[i]);
  };
  auto alone = [&](size_t i) {
    CompileResult r;
    try {
      r = compile_one(jobs[i]);
    } catch (const std::exception& e) {  // a full disk must not take the other compiles down
      r.name = jobs[i].name;
      r.ok = false;
      r.log = e.what();
    }
    finish(i, std::move(r));
  };
  // Its own pool: `parallel` is the user's --jobs, nvcc processes that may outnumber the cores.
  support::ThreadPool pool(static_cast<size_t>(std::min(parallel, static_cast<int>(units.size()))));
  pool.parallel_for(units.size(), [&](size_t u) {
    const std::vector<size_t>& unit = units[u];
    if (unit.size() == 1) return alone(unit.front());
    std::vector<const CompileJob*> batch;
    for (size_t i : unit) batch.push_back(&jobs[i]);
    std::optional<std::vector<CompileResult>> built;
    try {
      built = compile_batch(batch);
    } catch (const std::exception&) {
      built.reset();  // built alone below, where the error is reported against its kernel
    }
    for (size_t k = 0; k < unit.size(); ++k) {
      if (built && (*built)[k].ok)
        finish(unit[k], std::move((*built)[k]));
      else
        alone(unit[k]);  // the batch failed: each kernel alone, so a failure names its kernel
    }
  });
  return results;
}

std::vector<std::string> cache_flags(const std::vector<std::string>& command) {
  std::vector<std::string> out;
  for (size_t i = 1; i < command.size(); ++i) {
    const std::string& a = command[i];
    if (a == "@SRC@" || a == "@LIB@" || a == "-shared" || a == "-o" || a == "-fPIC") continue;
    if (a == "-Xcompiler" && i + 1 < command.size() && command[i + 1] == "-fPIC") continue;
    out.push_back(a);
  }
  return out;
}

}  // namespace sabre::tune
