// sabre kernels: list the kernel catalog, emit one kernel's CUDA C++, build kernels into .so files.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "backends/cublaslt/lt_spec.h"
#include "backends/cutlass/catalog.h"
#include "backends/cutlass/conv_emitter.h"
#include "backends/cutlass/conv_sm90.h"
#include "backends/cutlass/conv_spec.h"
#include "backends/cutlass/emitter.h"
#include "backends/cutlass/kernel_spec.h"
#include "backends/cutlass/nvcc.h"
#include "tune/profiler.h"
#include "cli_util.h"
#include "cmd_kernels_pack.h"
#include "command.h"
#include "support/files.h"

namespace sabre::cli {
namespace {
namespace cb = sabre::cutlass_backend;

const char* kUsage =
    "usage: sabre kernels list [--arch sm90|sm80] [--epilogue EPI] [--dtype f16|bf16|f32] [--layout tn|tt]\n"
    "                          [--target-sm 90|80] [--names]\n"
    "       sabre kernels emit NAME [-o FILE.cu] [--target-sm 90|80]\n"
    "       sabre kernels build NAME... -o DIR [-j N] [--target-sm 90|80]\n"
    "       sabre kernels pack [--list FILE] [--arch sm_90a] [--cache-dir DIR] [-j N] [--batch N] [--dry-run] [--json]\n"
    "EPI is an epilogue name such as linear, bias, bias_gelu, bias_res_relu (residual before act),\n"
    "gelu_res (after); default bias. Activations: relu gelu gelutanh silu sigmoid hardswish relu6.\n"
    "emit and build also take conv kernel names (docs/KERNELS.md), e.g.\n"
    "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8_bias_relu,\n"
    "sm90_conv_fprop_nhwc_f16_f16_f32_128x128x64_c1x1_a8_bias_relu (CUTLASS's non-persistent kernel) or\n"
    "sm90_conv_fprop_pingpong_nhwc_f16_f16_f32_128x64x64_c1x1_a8_bias_relu (persistent: pingpong, coop).\n"
    "emit and build also take the cuBLASLt kernels a tuned artifact may deploy (a plan's kernel names), e.g.\n"
    "cublaslt_tn_f16_f16_f32_bias_res_algo66_t20_s8_k1_r0_w0_o0_i0_c0 (docs/KERNELS.md).\n"
    "pack builds, once per machine and toolchain, the kernels sabre compile picks most across the model zoo\n"
    "(data/kernel_pack.txt, built into sabre; --list FILE for another list, one name a line) into the kernel\n"
    "cache that sabre compile reads. A kernel already in the cache is skipped, a stopped run keeps what it\n"
    "built, a kernel that fails is reported and the others go on (docs/KERNELS.md).\n"
    "Kernels of one family are compiled up to --batch N in one translation unit (fewer where that finishes\n"
    "sooner with -j N compilers), each still cached on its own; SABRE_KERNEL_BATCH sets it for compile and tune.\n";

// Every catalog kernel for target_sm with epilogue `epi`, filtered.
std::vector<cb::KernelSpec> list_specs(int target_sm, std::optional<cb::Family> fam, std::optional<cb::Elem> dtype,
                                       std::optional<cb::Layout> layout, const cb::EpilogueSpec& epi) {
  std::vector<cb::KernelSpec> out;
  for (cb::Family f : {cb::Family::sm90, cb::Family::sm80}) {
    if (fam && *fam != f) continue;
    for (cb::Elem e : {cb::Elem::f16, cb::Elem::bf16, cb::Elem::f32}) {
      if (dtype && *dtype != e) continue;
      for (cb::Layout l : {cb::Layout::tn, cb::Layout::tt}) {
        if (layout && *layout != l) continue;
        cb::GemmOperands ops{e, e, l};
        for (const auto& c : cb::catalog(f, ops, target_sm)) out.push_back({c, ops, epi});
      }
    }
  }
  return out;
}

// A kernel name from the user: parsed, or a usage error naming the closest catalog kernels.
std::optional<cb::KernelSpec> resolve(const std::string& name, int target_sm) {
  if (auto s = cb::parse_kernel_name(name)) return s;
  std::vector<std::pair<size_t, std::string>> near;
  for (const auto& epi : cb::all_epilogues())
    for (const auto& s : list_specs(target_sm, {}, {}, {}, epi)) {
      auto n = cb::kernel_name(s);
      near.push_back({edit_distance(name, n), n});
    }
  std::sort(near.begin(), near.end());
  std::fprintf(stderr, "sabre kernels: '%s' is not a kernel name (see sabre kernels list). Closest:\n", name.c_str());
  for (size_t i = 0; i < std::min<size_t>(3, near.size()); ++i) std::fprintf(stderr, "  %s\n", near[i].second.c_str());
  return std::nullopt;
}

const std::vector<FlagSpec> kFlags = {
    arch_flag("list: only kernels of this family (sm90 or sm80); pack: the GPU arch to build for (default sm_90a)"),
    {"--epilogue", "", "EPI", "list: the epilogue the kernels are named with (default bias)", false},
    dtype_flag("list: only kernels of this operand dtype (f16, bf16 or f32)"),
    {"--layout", "", "tn|tt", "list: only kernels of this operand layout", false},
    {"--target-sm", "", "SM", "the GPU the kernels are for: 90 (default) or 80, spelled as --arch takes it", false},
    {"--names", "", "", "list: kernel names only, one a line", false},
    output_flag("emit: write the source to this file instead of stdout; build: the directory to build into"),
    jobs_flag("build: nvcc processes at a time (default 2); pack: (default all cores)"),
    {"--list", "", "FILE", "pack: the kernel names to build, one a line, '#' comments (default the built-in list)", false},
    {"--cache-dir", "", "DIR", "pack: the compiled-kernel cache (default $XDG_CACHE_HOME/sabre/kernels, as sabre compile)", false},
    {"--dry-run", "", "", "pack: say which kernels are cached and which would be built; build nothing", false},
    {"--retry-failed", "", "", "pack: compile again the kernels an earlier run failed on (default: report them)", false},
    {"--batch", "", "N", "pack: at most N kernels of one family a translation unit, 1 to 16 (default $SABRE_KERNEL_BATCH, else 4; 1: each alone)", false},
    json_flag(),
};

// Which flags each action takes; another is a usage error naming the action.
const std::map<std::string, std::vector<std::string>> kActionFlags = {
    {"list", {"--arch", "--epilogue", "--dtype", "--layout", "--target-sm", "--names"}},
    {"emit", {"--output", "--target-sm"}},
    {"build", {"--output", "--jobs", "--target-sm"}},
    {"pack", {"--list", "--arch", "--cache-dir", "--jobs", "--batch", "--dry-run", "--retry-failed", "--json"}},
};

int target_sm_flag(const ParsedArgs& args) {
  auto v = args.value("--target-sm");
  if (!v) return 90;
  const int sm = arch_number(normalize_arch(*v, "--target-sm"));
  if (sm != 90 && sm != 80) throw UsageError("bad --target-sm '" + *v + "': kernels are generated for 90 or 80");
  return sm;
}

int cmd_list(const ParsedArgs& args) {
  if (args.positional.size() > 1) throw UsageError("sabre kernels list takes no names (see --epilogue, --dtype)");
  std::optional<cb::Family> fam;
  std::optional<cb::Elem> dtype;
  std::optional<cb::Layout> layout;
  cb::EpilogueSpec epi{cb::Act::none, true, cb::Residual::none};
  const int target_sm = target_sm_flag(args);
  const bool names_only = args.has("--names");
  if (auto v = args.value("--arch")) {
    const int sm = arch_number(normalize_arch(*v));
    if (sm != 90 && sm != 80) throw UsageError("bad --arch '" + *v + "': the kernel families are sm90 and sm80");
    fam = sm == 90 ? cb::Family::sm90 : cb::Family::sm80;
  }
  if (auto v = args.value("--epilogue")) {
    auto e = cb::parse_epilogue(*v);
    if (!e) throw UsageError("bad --epilogue '" + *v + "': e.g. linear, bias, bias_gelu, bias_res_relu, gelu_res");
    epi = *e;
  }
  if (auto v = args.value("--dtype")) dtype = cb::parse_elem(normalize_dtype(*v, {"f16", "bf16", "f32"}));
  if (auto v = args.value("--layout")) {
    if (*v == "tn") layout = cb::Layout::tn;
    else if (*v == "tt") layout = cb::Layout::tt;
    else throw UsageError("bad --layout '" + *v + "': use tn or tt");
  }
  auto specs = list_specs(target_sm, fam, dtype, layout, epi);
  if (!names_only)
    std::printf("%-72s %-6s %-11s %-11s %-7s %-10s %-6s %s\n", "name", "family", "schedule", "tile", "cluster", "warp",
                "stages", "align");
  for (const auto& s : specs) {
    const auto& c = s.config;
    if (names_only) {
      std::printf("%s\n", cb::kernel_name(s).c_str());
      continue;
    }
    auto d3 = [](cb::Shape3 t) { return std::to_string(t.m) + "x" + std::to_string(t.n) + "x" + std::to_string(t.k); };
    bool sm90 = c.family == cb::Family::sm90;
    std::printf("%-72s %-6s %-11s %-11s %-7s %-10s %-6s %d\n", cb::kernel_name(s).c_str(),
                std::string(cb::family_name(c.family)).c_str(), std::string(cb::schedule_name(c.schedule)).c_str(),
                d3(c.tile).c_str(),
                sm90 ? (std::to_string(c.cluster_m) + "x" + std::to_string(c.cluster_n)).c_str() : "-",
                sm90 ? "-" : d3(c.warp).c_str(), sm90 ? "auto" : std::to_string(c.stages).c_str(), c.alignment);
  }
  if (!names_only) std::printf("%zu kernels\n", specs.size());
  return kExitOk;
}

// A convolution kernel (sm80_conv_...; conv_spec.h): no catalog lookup, the name must parse.
// `sabre kernels emit`'s output: the source to stdout, or to OUT when -o was given.
int write_source(const std::string& text, const std::string& out) {
  if (out.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return kExitOk;
  }
  support::write_output_file(out, text.data(), text.size());  // FileError: the caller's one-line error
  return kExitOk;
}

int emit_sm90_conv(const std::string& name, const std::string& out, int target_sm) {
  auto spec = cb::parse_sm90_conv_kernel_name(name);
  if (!spec) {
    std::fprintf(stderr, "sabre kernels emit: '%s' is not an sm90 conv kernel name (e.g. %s)\n", name.c_str(),
                 "sm90_conv_fprop_nhwc_f16_f16_f32_128x128x64_c1x1_a8_bias_relu");
    return kExitUsage;
  }
  if (auto why = cb::sm90_conv_unsupported_reason(*spec, target_sm)) {
    std::fprintf(stderr, "sabre kernels emit: %s cannot run on sm_%d: %s\n", name.c_str(), target_sm, why->c_str());
    return kExitError;
  }
  return write_source(cb::emit_sm90_conv_kernel(*spec, target_sm), out);
}

int emit_conv(const std::string& name, const std::string& out, int target_sm) {
  auto spec = cb::parse_conv_kernel_name(name);
  if (!spec) {
    std::fprintf(stderr, "sabre kernels emit: '%s' is not a conv kernel name (e.g. %s)\n", name.c_str(),
                 "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8_bias_relu");
    return kExitUsage;
  }
  if (auto why = cb::conv_unsupported_reason(*spec, target_sm)) {
    std::fprintf(stderr, "sabre kernels emit: %s cannot run on sm_%d: %s\n", name.c_str(), target_sm, why->c_str());
    return kExitError;
  }
  return write_source(cb::emit_conv_kernel(*spec, target_sm), out);
}

int cmd_emit(const ParsedArgs& args) {
  if (args.positional.size() != 2)
    throw UsageError(args.positional.size() < 2 ? "which kernel? give its NAME: sabre kernels emit NAME"
                                                : "one kernel at a time: sabre kernels emit NAME");
  const std::string name = args.positional[1], out = args.value("--output").value_or("");
  const int target_sm = target_sm_flag(args);
  if (cb::is_sm90_conv_kernel_name(name)) return emit_sm90_conv(name, out, target_sm);
  if (cb::is_conv_kernel_name(name)) return emit_conv(name, out, target_sm);
  if (auto lt = cublaslt_backend::parse_lt_kernel_name(name)) {  // a cuBLASLt algorithm an artifact deploys
    if (auto why = cublaslt_backend::unsupported_reason(lt->spec)) {
      std::fprintf(stderr, "sabre kernels emit: cuBLASLt cannot compute %s: %s\n", name.c_str(), why->c_str());
      return kExitError;
    }
    return write_source(cublaslt_backend::emit_lt_kernel(*lt), out);
  }
  auto spec = resolve(name, target_sm);
  if (!spec) return kExitUsage;
  if (auto why = cb::unsupported_reason(*spec, target_sm)) {
    std::fprintf(stderr, "sabre kernels emit: %s cannot run on sm_%d: %s\n", name.c_str(), target_sm, why->c_str());
    return kExitError;
  }
  return write_source(cb::emit_kernel(*spec, target_sm), out);
}

// A cuBLASLt kernel library (host code on cuBLASLt, lt_spec.h) into out/NAME.{cu,so,log}: the source
// and flags of tune::lt_compile_job, which sabre compile builds through its cache.
cb::CompileResult compile_lt(const cublaslt_backend::LtKernelSpec& lt, const std::string& out, const cb::NvccOptions& opts) {
  const tune::CompileJob job = tune::lt_compile_job(lt);
  cb::CompileResult r;
  r.name = job.name;
  std::filesystem::create_directories(out);
  r.source = out + "/" + r.name + ".cu";
  r.library = out + "/" + r.name + ".so";
  std::ofstream(r.source) << job.source;
  std::vector<std::string> argv = {opts.nvcc.empty() ? cb::find_nvcc() : opts.nvcc, "-shared", "-Xcompiler", "-fPIC"};
  argv.insert(argv.end(), job.flags.begin(), job.flags.end());
  argv.insert(argv.end(), {r.source, "-o", r.library});
  for (const auto& a : argv) r.command += (r.command.empty() ? "" : " ") + a;
  const auto t0 = std::chrono::steady_clock::now();
  r.ok = cb::run_process(argv, r.log) == 0 && std::filesystem::exists(r.library);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::ofstream(out + "/" + r.name + ".log") << r.log;
  return r;
}

int cmd_build(const ParsedArgs& args) {
  const std::vector<std::string> names(args.positional.begin() + 1, args.positional.end());
  if (names.empty()) throw UsageError("which kernels? give their NAMEs: sabre kernels build NAME... -o DIR");
  auto out_flag = args.value("--output");
  if (!out_flag) throw UsageError("where to? give the directory with -o DIR");
  const std::string out = *out_flag;
  const int jobs = jobs_value(args, 2);
  cb::NvccOptions opts;
  opts.target_sm = target_sm_flag(args);
  std::vector<cb::KernelSpec> specs;
  std::vector<cb::ConvSpec> convs;
  std::vector<cb::Sm90ConvSpec> convs90;
  std::vector<cublaslt_backend::LtKernelSpec> lts;
  for (const auto& n : names) {
    if (auto lt = cublaslt_backend::parse_lt_kernel_name(n)) {
      if (auto why = cublaslt_backend::unsupported_reason(lt->spec)) {
        std::fprintf(stderr, "sabre kernels build: cuBLASLt cannot compute %s: %s\n", n.c_str(), why->c_str());
        return kExitError;
      }
      lts.push_back(*lt);
      continue;
    }
    if (cb::is_sm90_conv_kernel_name(n)) {
      auto c = cb::parse_sm90_conv_kernel_name(n);
      if (!c) {
        std::fprintf(stderr, "sabre kernels build: '%s' is not an sm90 conv kernel name\n", n.c_str());
        return kExitUsage;
      }
      if (auto why = cb::sm90_conv_unsupported_reason(*c, opts.target_sm)) {
        std::fprintf(stderr, "sabre kernels build: %s cannot run on sm_%d: %s\n", n.c_str(), opts.target_sm, why->c_str());
        return kExitError;
      }
      convs90.push_back(*c);
      continue;
    }
    if (cb::is_conv_kernel_name(n)) {
      auto c = cb::parse_conv_kernel_name(n);
      if (!c) {
        std::fprintf(stderr, "sabre kernels build: '%s' is not a conv kernel name\n", n.c_str());
        return kExitUsage;
      }
      if (auto why = cb::conv_unsupported_reason(*c, opts.target_sm)) {
        std::fprintf(stderr, "sabre kernels build: %s cannot run on sm_%d: %s\n", n.c_str(), opts.target_sm, why->c_str());
        return kExitError;
      }
      convs.push_back(*c);
      continue;
    }
    auto s = resolve(n, opts.target_sm);
    if (!s) return kExitUsage;
    if (auto why = cb::unsupported_reason(*s, opts.target_sm)) {
      std::fprintf(stderr, "sabre kernels build: %s cannot run on sm_%d: %s\n", n.c_str(), opts.target_sm, why->c_str());
      return kExitError;
    }
    specs.push_back(*s);
  }
  auto results = cb::compile_kernels(specs, out, opts, jobs);
  for (auto& r : cb::compile_conv_kernels(convs, out, opts, jobs)) results.push_back(std::move(r));
  for (auto& r : cb::compile_sm90_conv_kernels(convs90, out, opts, jobs)) results.push_back(std::move(r));
  for (const auto& lt : lts) results.push_back(compile_lt(lt, out, opts));
  int failed = 0;
  for (const auto& r : results) {
    std::printf("%-4s %6.1fs %s\n", r.ok ? "ok" : "FAIL", r.seconds, r.name.c_str());
    if (!r.ok) {
      ++failed;
      std::fprintf(stderr, "--- %s\n%s\n", r.command.c_str(), r.log.c_str());
    }
  }
  return failed ? kExitError : kExitOk;
}

int run(const std::vector<std::string>& argv) {
  return guarded("kernels", [&] {
    ParsedArgs args = parse_args(argv, kFlags);
    if (args.help) {
      std::printf("%s\noptions:\n%s", kUsage, flags_help(kFlags).c_str());
      return kExitOk;
    }
    if (args.positional.empty()) throw UsageError("no action given: sabre kernels list|emit|build|pack");
    const std::string action = args.positional[0];
    auto allowed = kActionFlags.find(action);
    if (allowed == kActionFlags.end()) throw UsageError("unknown action '" + action + "': use list, emit, build or pack");
    for (const auto& [flag, v] : args.values)
      if (std::find(allowed->second.begin(), allowed->second.end(), flag) == allowed->second.end())
        throw UsageError(flag + " does not go with sabre kernels " + action);
    if (action == "list") return cmd_list(args);
    if (action == "emit") return cmd_emit(args);
    if (action == "pack") return kernels_pack(args);
    return cmd_build(args);
  });
}

const bool reg = register_command({"kernels", "list, emit and build generated GEMM and conv kernels; build the kernel pack", run});

}  // namespace
}  // namespace sabre::cli
