#include "backends/cutlass/nvcc.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/subprocess.h"
#include "support/thread_pool.h"

namespace sabre::cutlass_backend {
namespace fs = std::filesystem;

namespace {

std::string env(const char* n) {
  const char* v = std::getenv(n);
  return v ? v : "";
}

std::string cuobjdump_for(const std::string& nvcc) {
  fs::path p = fs::path(nvcc).parent_path() / "cuobjdump";
  return fs::exists(p) ? p.string() : "cuobjdump";
}

}  // namespace

std::string sabre_include_dir() {
  if (auto e = env("SABRE_INCLUDE_DIR"); !e.empty()) return e;
  // The source tree's include/, from CMake: __FILE__ is relative under ccache's base_dir, and a
  // relative -I would point nvcc at the working directory's parent.
  return SABRE_SOURCE_INCLUDE_DIR;
}

std::string find_nvcc() {
  if (auto e = env("SABRE_NVCC"); !e.empty()) return e;
  if (auto h = env("CUDA_HOME"); !h.empty() && fs::exists(fs::path(h) / "bin" / "nvcc")) return h + "/bin/nvcc";
  if (fs::exists("/usr/local/cuda/bin/nvcc")) return "/usr/local/cuda/bin/nvcc";
  return "nvcc";
}

int run_process(const std::vector<std::string>& argv, std::string& output) {
  return support::run_process(argv, &output);
}

std::vector<std::string> nvcc_command(const KernelSpec& s, const std::string& source, const std::string& library,
                                      const NvccOptions& opts) {
  std::string cutlass = opts.cutlass_dir.empty() ? std::string(SABRE_CUTLASS_DIR) : opts.cutlass_dir;
  std::string inc = opts.sabre_include.empty() ? sabre_include_dir() : opts.sabre_include;
  std::vector<std::string> cmd = {opts.nvcc.empty() ? find_nvcc() : opts.nvcc,
                                  "-std=c++17", "-O3", "--expt-relaxed-constexpr", "-DNDEBUG"};
  for (const auto& f : gencode_flags(s.config.family, opts.target_sm)) cmd.push_back(f);
  cmd.insert(cmd.end(), {"-I" + cutlass + "/include", "-I" + cutlass + "/tools/util/include", "-I" + inc,
                         "-Xcompiler", "-fPIC", "-shared", "-o", library, source});
  for (const auto& f : opts.extra_flags) cmd.push_back(f);
  return cmd;
}

SassCheck check_sass(const std::string& library, const std::string& want, const std::string& nvcc) {
  std::string elf, tool = cuobjdump_for(nvcc);
  const int orc = run_process({tool, "--list-elf", library}, elf);
  // No cuobjdump here (a compile-only box): the TU's #error still guards the arch.
  if (orc == 127) return {true, "SASS not checked: " + tool + " not found"};
  std::istringstream lines(elf);
  for (std::string line; std::getline(lines, line);) {
    const auto p = line.find(want + ".cubin");
    if (p != std::string::npos && p > 0 && line[p - 1] == '.' && orc == 0) return {true, ""};
  }
  return {false, "SASS check failed: cuobjdump --list-elf " + library + " lists no " + want + " cubin:\n" + elf};
}

namespace {

// Writes `text` to out_dir/NAME.cu, runs `cmd_for(source, library)` and checks that the library
// holds SASS for `want` (sm_90a, sm_90, ...). Shared by the GEMM and conv kernels.
template <class CmdFor>
CompileResult compile_text(const std::string& name, const std::string& text, const std::string& want,
                           const std::string& out_dir, CmdFor cmd_for) {
  CompileResult r;
  r.name = name;
  fs::create_directories(out_dir);
  r.source = (fs::path(out_dir) / (r.name + ".cu")).string();
  r.library = (fs::path(out_dir) / (r.name + ".so")).string();
  {
    std::ofstream f(r.source);
    f << text;
    if (!f) {
      r.log = "cannot write " + r.source;
      return r;
    }
  }
  std::vector<std::string> cmd = cmd_for(r.source, r.library);
  for (const auto& a : cmd) r.command += (r.command.empty() ? "" : " ") + a;
  auto t0 = std::chrono::steady_clock::now();
  int rc = run_process(cmd, r.log);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (rc != 0) {
    r.log += "\nnvcc exited with status " + std::to_string(rc);
  } else {
    const SassCheck check = check_sass(r.library, want, cmd[0]);
    r.ok = check.ok;
    if (!check.note.empty()) r.log += "\n" + check.note;
  }
  std::ofstream(fs::path(out_dir) / (r.name + ".log")) << r.command << "\n" << r.log;
  return r;
}

// Runs compile(i) for i < n on `jobs` threads; compile may throw (the result then holds the message).
template <class Compile, class NameOf>
std::vector<CompileResult> compile_parallel(size_t n, int jobs, Compile compile, NameOf name_of) {
  std::vector<CompileResult> results(n);
  // Its own pool: `jobs` is the user's --jobs, nvcc processes that may outnumber the cores.
  support::ThreadPool pool(static_cast<size_t>(std::max(1, std::min<int>(jobs, static_cast<int>(n)))));
  pool.parallel_for(n, [&](size_t i) {
    try {
      results[i] = compile(i);
    } catch (const std::exception& e) {
      results[i].name = name_of(i);
      results[i].log = e.what();
    }
  });
  return results;
}

}  // namespace

CompileResult compile_kernel(const KernelSpec& s, const std::string& out_dir, const NvccOptions& opts) {
  // The SASS must be for the arch the kernel needs: sm_90a for wgmma/TMA kernels (a plain sm_90
  // cubin of these templates is a stub that prints an error), the target's own SM otherwise.
  std::string want = s.config.family == Family::sm90 ? "sm_90a" : "sm_" + std::to_string(opts.target_sm);
  return compile_text(kernel_name(s), emit_kernel(s, opts.target_sm), want, out_dir,
                      [&](const std::string& src, const std::string& lib) { return nvcc_command(s, src, lib, opts); });
}

std::vector<CompileResult> compile_kernels(const std::vector<KernelSpec>& specs, const std::string& out_dir,
                                           const NvccOptions& opts, int jobs) {
  return compile_parallel(
      specs.size(), jobs, [&](size_t i) { return compile_kernel(specs[i], out_dir, opts); },
      [&](size_t i) { return kernel_name(specs[i]); });
}

std::vector<std::string> nvcc_conv_command(const std::string& source, const std::string& library,
                                           const NvccOptions& opts) {
  std::string cutlass = opts.cutlass_dir.empty() ? std::string(SABRE_CUTLASS_DIR) : opts.cutlass_dir;
  std::string inc = opts.sabre_include.empty() ? sabre_include_dir() : opts.sabre_include;
  std::vector<std::string> cmd = {opts.nvcc.empty() ? find_nvcc() : opts.nvcc,
                                  "-std=c++17", "-O3", "--expt-relaxed-constexpr", "-DNDEBUG"};
  for (const auto& f : conv_gencode_flags(opts.target_sm)) cmd.push_back(f);
  cmd.insert(cmd.end(), {"-I" + cutlass + "/include", "-I" + cutlass + "/tools/util/include", "-I" + inc,
                         "-Xcompiler", "-fPIC", "-shared", "-o", library, source});
  for (const auto& f : opts.extra_flags) cmd.push_back(f);
  return cmd;
}

CompileResult compile_conv_kernel(const ConvSpec& s, const std::string& out_dir, const NvccOptions& opts) {
  return compile_text(conv_kernel_name(s), emit_conv_kernel(s, opts.target_sm), "sm_" + std::to_string(opts.target_sm),
                      out_dir, [&](const std::string& src, const std::string& lib) { return nvcc_conv_command(src, lib, opts); });
}

std::vector<CompileResult> compile_conv_kernels(const std::vector<ConvSpec>& specs, const std::string& out_dir,
                                                const NvccOptions& opts, int jobs) {
  return compile_parallel(
      specs.size(), jobs, [&](size_t i) { return compile_conv_kernel(specs[i], out_dir, opts); },
      [&](size_t i) { return conv_kernel_name(specs[i]); });
}

std::vector<std::string> nvcc_sm90_conv_command(const std::string& source, const std::string& library,
                                                const NvccOptions& opts) {
  std::string cutlass = opts.cutlass_dir.empty() ? std::string(SABRE_CUTLASS_DIR) : opts.cutlass_dir;
  std::string inc = opts.sabre_include.empty() ? sabre_include_dir() : opts.sabre_include;
  std::vector<std::string> cmd = {opts.nvcc.empty() ? find_nvcc() : opts.nvcc,
                                  "-std=c++17", "-O3", "--expt-relaxed-constexpr", "-DNDEBUG"};
  for (const auto& f : sm90_conv_gencode_flags()) cmd.push_back(f);
  cmd.insert(cmd.end(), {"-I" + cutlass + "/include", "-I" + cutlass + "/tools/util/include", "-I" + inc,
                         "-Xcompiler", "-fPIC", "-shared", "-o", library, source});
  for (const auto& f : opts.extra_flags) cmd.push_back(f);
  return cmd;
}

CompileResult compile_sm90_conv_kernel(const Sm90ConvSpec& s, const std::string& out_dir, const NvccOptions& opts) {
  return compile_text(sm90_conv_kernel_name(s), emit_sm90_conv_kernel(s, opts.target_sm), "sm_90a", out_dir,
                      [&](const std::string& src, const std::string& lib) { return nvcc_sm90_conv_command(src, lib, opts); });
}

std::vector<CompileResult> compile_sm90_conv_kernels(const std::vector<Sm90ConvSpec>& specs,
                                                     const std::string& out_dir, const NvccOptions& opts, int jobs) {
  return compile_parallel(
      specs.size(), jobs, [&](size_t i) { return compile_sm90_conv_kernel(specs[i], out_dir, opts); },
      [&](size_t i) { return sm90_conv_kernel_name(specs[i]); });
}

}  // namespace sabre::cutlass_backend
