// Times GEMM kernel libraries on one problem, the way the tuner times its candidates: each kernel
// in a watchdog child, its output checked against the CPU reference first (poisoned output,
// random operands), then CUDA-graph replay over operand sets rotated past L2, median of repeats
// (src/tune/gpu_measure.cpp). For A/B experiments on a kernel's generated source: emit it
// (`sabre kernels emit NAME`), change it, build it with the flags `sabre kernels build` uses, and
// time the original and the variants side by side here. --rounds N measures the list N times,
// interleaved, so a clock or neighbour drift shows up as spread instead of as a difference.
// --l2-hot times one operand set left in L2 instead of sets rotated past it (how much of a kernel's
// time is waiting on HBM; the tuner always rotates). Exits 77 without a GPU.
// Usage: gemm_lib_bench --dtype f16|bf16|f32 --epilogue EPI --m M --n N --k K [--layout tn|tt]
//                       [--batch B] [--rounds N] [--l2-hot] NAME=LIBRARY.so ...
//   NAME is the kernel's name in the library's registry (its entry points NAME_run, ...).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cutlass/kernel_spec.h"
#include "tune/profiler.h"
#include "tune/select.h"

using namespace sabre::tune;

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: gemm_lib_bench --dtype f16|bf16|f32 --epilogue EPI --m M --n N --k K [--layout tn|tt]\n"
               "                      [--batch B] [--rounds N] [--l2-hot] NAME=LIBRARY.so ...\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  GemmProblem p;
  p.dtype = "f16", p.layout = "tn", p.epilogue = "bias";
  int64_t m = 0;
  int rounds = 3;
  bool l2_hot = false;
  std::vector<std::pair<std::string, std::string>> libs;  // (kernel, library)
  for (int i = 1; i < argc; ++i) {
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* a = argv[i];
    const char* v = nullptr;
    if (!std::strcmp(a, "--dtype") && (v = value())) p.dtype = v;
    else if (!std::strcmp(a, "--layout") && (v = value())) p.layout = v;
    else if (!std::strcmp(a, "--epilogue") && (v = value())) p.epilogue = v;
    else if (!std::strcmp(a, "--m") && (v = value())) m = std::atoll(v);
    else if (!std::strcmp(a, "--n") && (v = value())) p.n = std::atoll(v);
    else if (!std::strcmp(a, "--k") && (v = value())) p.k = std::atoll(v);
    else if (!std::strcmp(a, "--batch") && (v = value())) p.batch = std::atoll(v);
    else if (!std::strcmp(a, "--rounds") && (v = value())) rounds = std::atoi(v);
    else if (!std::strcmp(a, "--l2-hot")) l2_hot = true;
    else if (!std::strcmp(a, "-h") || !std::strcmp(a, "--help")) return usage(), 0;
    else if (a[0] != '-' && std::strchr(a, '=')) {
      const char* eq = std::strchr(a, '=');
      libs.emplace_back(std::string(a, eq), std::string(eq + 1));
    } else {
      std::fprintf(stderr, "gemm_lib_bench: unknown or incomplete argument '%s'\n", a);
      return usage();
    }
  }
  if (m < 1 || p.n < 1 || p.k < 1 || p.batch < 1 || rounds < 1 || libs.empty()) {
    std::fprintf(stderr, "gemm_lib_bench: need --m, --n, --k >= 1, --rounds >= 1 and at least one NAME=LIBRARY\n");
    return usage();
  }
  if (p.dtype != "f16" && p.dtype != "bf16" && p.dtype != "f32") {
    std::fprintf(stderr, "gemm_lib_bench: --dtype is f16, bf16 or f32, not '%s'\n", p.dtype.c_str());
    return usage();
  }
  if (p.layout != "tn" && p.layout != "tt") {
    std::fprintf(stderr, "gemm_lib_bench: --layout is tn or tt, not '%s'\n", p.layout.c_str());
    return usage();
  }
  if (!sabre::cutlass_backend::parse_epilogue(p.epilogue)) {
    std::fprintf(stderr, "gemm_lib_bench: '%s' is not an epilogue (bias, bias_gelu, bias_res, linear, ...)\n",
                 p.epilogue.c_str());
    return usage();
  }
  p.m_min = p.m_max = m;
  if (l2_hot) setenv("SABRE_MEASURE_L2_HOT", "1", 1);  // read in the measuring child (gpu_measure.cpp)
  Environment env;
  std::string why;
  if (!have_gpu_support() || !probe_gpu(env, why)) {
    std::printf("SKIP: no GPU (%s)\n", why.c_str());
    return 77;
  }
  std::printf("%s, sm %d, CUDA %s: gemm %s %s %s m=%lld n=%lld k=%lld b=%lld, %d rounds\n", env.gpu.c_str(), env.sm,
              env.cuda.c_str(), p.dtype.c_str(), p.layout.c_str(), p.epilogue.c_str(), (long long)m, (long long)p.n,
              (long long)p.k, (long long)p.batch, rounds);
  if (l2_hot) std::printf("operands L2-hot: one set, not rotated past L2 (--l2-hot)\n");
  ProfileOptions opts;
  const MeasureFn measure = gpu_measure_fn(opts);
  std::vector<std::vector<double>> times(libs.size());  // ok rounds' medians, per library
  std::vector<Measurement> last(libs.size());
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < libs.size(); ++i) {
      Measurement x = measure(p, m, libs[i].first, libs[i].second);
      if (x.status == Status::ok) times[i].push_back(x.time_us);
      last[i] = x;
    }
  const double flops = 2.0 * double(m) * double(p.n) * double(p.k) * double(p.batch);
  std::printf("%-70s %9s %9s %9s %8s %10s\n", "kernel (library)", "min us", "median", "max", "TFLOP/s", "rel err");
  int failed = 0;
  for (size_t i = 0; i < libs.size(); ++i) {
    std::vector<double>& t = times[i];
    const std::string label = libs[i].first + " (" + libs[i].second.substr(libs[i].second.rfind('/') + 1) + ")";
    if (t.size() != size_t(rounds)) {
      ++failed;
      std::printf("%-70s %s: %s\n", label.c_str(), to_string(last[i].status), last[i].detail.c_str());
      continue;
    }
    std::sort(t.begin(), t.end());
    const double med = t[t.size() / 2];
    std::printf("%-70s %9.2f %9.2f %9.2f %8.1f %10.3e\n", label.c_str(), t.front(), med, t.back(), flops / med * 1e-6,
                last[i].rel_error);
  }
  return failed ? 1 : 0;
}
