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

std::vector<CompileResult> CompileCache::compile_all(const std::vector<CompileJob>& jobs, int parallel, bool quiet) {
  std::vector<CompileResult> results(jobs.size());
  std::vector<size_t> todo;
  for (size_t i = 0; i < jobs.size(); ++i) {
    results[i] = lookup(jobs[i]);
    if (!results[i].cached) todo.push_back(i);
  }
  if (todo.empty()) return results;
  parallel = std::max(1, std::min<int>(parallel, static_cast<int>(todo.size())));
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
      std::fprintf(stderr, "compiled %zu/%zu: %s %s (%.1f s)%s\n", done, todo.size(), r.name.c_str(),
                   r.ok ? "ok" : "FAILED", r.seconds, r.ok ? "" : (", log: " + r.log).c_str());
    }
    std::fflush(stderr);
  };
  // Its own pool: `parallel` is the user's --jobs, nvcc processes that may outnumber the cores.
  support::ThreadPool pool(static_cast<size_t>(parallel));
  pool.parallel_for(todo.size(), [&](size_t t) {
    CompileResult r;
    try {
      r = compile_one(jobs[todo[t]]);
    } catch (const std::exception& e) {  // a full disk must not take the other compiles down
      r.name = jobs[todo[t]].name;
      r.ok = false;
      r.log = e.what();
    }
    std::lock_guard<std::mutex> lock(mu);
    results[todo[t]] = r;
    ++done;
    if (!r.ok) ++failed;
    report(r);
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
