// The sm90 conv schedules against each other (conv_sm90.h): CUTLASS's non-persistent ws kernel and
// sabre's persistent pingpong and coop kernels, on ResNet-50's 3x3 convs (torchvision v1.5, the
// stride on the 3x3; conv + folded BN + ReLU, so bias_relu), at batch 32 and 1.
//
// Every sm90 conv catalog row with the bias_relu epilogue is compiled through the compile cache
// `sabre tune` uses, then each is checked against a host reference and timed by the tuner's own
// method (gpu_conv_in_process_measure_fn in watchdog children: CUDA graph replay of back-to-back
// launches, operands rotated past the L2, median). Per layer it prints every kernel's time, then a
// summary: the fastest ws kernel, the fastest persistent one and the ratio, the analytic model's
// sm90 pick, and (with --pdl-ab) the fastest persistent kernel again with SABRE_PDL=0, i.e. launched
// without programmatic dependent launch. Totals weight each layer by its count in ResNet-50.
// Exits 77 without a GPU.
//
// Usage: conv_schedule_bench [--db PATH] [--cache DIR] [--dtype f16|bf16] [--batch N]... [--pdl-ab] [-j N]
//        (a fresh temp DB unless --db; batches 32 and 1 unless --batch)
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "backends/cutlass/conv_sm90.h"
#include "backends/cutlass/kernel_spec.h"
#include "backends/cutlass/nvcc.h"
#include "tune/compile_cache.h"
#include "tune/conv_tune.h"
#include "tune/db.h"
#include "tune/profiler.h"
#include "tune/rank.h"
#include "tune/select.h"

using namespace sabre::tune;
namespace cb = sabre::cutlass_backend;

namespace {

struct Layer {
  const char* label;
  int64_t hw, c, stride, count;  // input h = w, channels in = out, stride, convs like it in ResNet-50
};
const Layer kLayers[] = {
    {"layer1 3x3 56x56 c64", 56, 64, 1, 3},      {"layer2.0 3x3 s2 56->28 c128", 56, 128, 2, 1},
    {"layer2 3x3 28x28 c128", 28, 128, 1, 3},    {"layer3.0 3x3 s2 28->14 c256", 28, 256, 2, 1},
    {"layer3 3x3 14x14 c256", 14, 256, 1, 5},    {"layer4.0 3x3 s2 14->7 c512", 14, 512, 2, 1},
    {"layer4 3x3 7x7 c512", 7, 512, 1, 2},
};

ConvProblem problem(const Layer& l, int64_t batch, const std::string& dtype) {
  ConvProblem p;
  p.dtype = dtype;
  p.epilogue = "bias_relu";
  p.n = batch, p.h = p.w = l.hw, p.c = p.k = l.c, p.r = p.s = 3;
  p.pad_h = p.pad_w = 1, p.stride_h = p.stride_w = l.stride;
  p.p = p.q = (l.hw + 2 - 3) / l.stride + 1;
  p.alignment = 8;
  return p;
}

std::string schedule_of(const std::string& kernel) {
  auto s = cb::parse_sm90_conv_kernel_name(kernel);
  return s ? std::string(cb::sm90_conv_schedule_name(s->config.schedule)) : "?";
}

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Best {
  std::string kernel;
  double us = kInf;
  void take(const std::string& k, double t) {
    if (t < us) kernel = k, us = t;
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::string db_path, cache_dir, dtype = "f16";
  std::vector<int64_t> batches;
  bool pdl_ab = false;
  int jobs = int(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--db") && i + 1 < argc) db_path = argv[++i];
    else if (!std::strcmp(argv[i], "--cache") && i + 1 < argc) cache_dir = argv[++i];
    else if (!std::strcmp(argv[i], "--batch") && i + 1 < argc && std::atoll(argv[i + 1]) > 0) batches.push_back(std::atoll(argv[++i]));
    else if (!std::strcmp(argv[i], "--pdl-ab")) pdl_ab = true;
    else if (!std::strcmp(argv[i], "-j") && i + 1 < argc && std::atoi(argv[i + 1]) > 0) jobs = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--dtype") && i + 1 < argc && (!std::strcmp(argv[i + 1], "f16") || !std::strcmp(argv[i + 1], "bf16")))
      dtype = argv[++i];
    else {
      std::fprintf(stderr, "usage: conv_schedule_bench [--db PATH] [--cache DIR] [--dtype f16|bf16] [--batch N]... [--pdl-ab] [-j N]\n");
      return 2;
    }
  }
  if (batches.empty()) batches = {32, 1};
  Environment env;
  std::string why;
  if (!have_gpu_support() || !probe_gpu(env, why)) {
    std::printf("SKIP: no GPU (%s)\n", why.c_str());
    return 77;
  }
  if (env.sm != 90) {
    std::printf("SKIP: sm90 conv kernels need sm_90, this GPU is sm_%d\n", env.sm);
    return 77;
  }
  if (db_path.empty())
    db_path = (std::filesystem::temp_directory_path() / ("conv_schedule_bench_" + std::to_string(getpid()) + ".db")).string();
  TuningDb db(db_path);
  std::printf("GPU %s (sm_%d), CUDA %s; DB %s\n", env.gpu.c_str(), env.sm, env.cuda.c_str(), db_path.c_str());

  // Every catalog row with the layers' epilogue.
  const cb::Elem elem = *cb::parse_elem(dtype);
  const cb::EpilogueSpec epi = *cb::parse_epilogue("bias_relu");
  std::vector<std::string> kernels;
  std::vector<CompileJob> jobs_list;
  for (const auto& c : cb::sm90_conv_catalog(elem)) {
    const cb::Sm90ConvSpec s{c, elem, epi};
    kernels.push_back(cb::sm90_conv_kernel_name(s));
    jobs_list.push_back(conv_compile_job(kernels.back(), 90));
  }
  CompileCache cache(cache_dir.empty() ? CompileCache::default_dir() : cache_dir, cb::find_nvcc());
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<CompileResult> built = cache.compile_all(jobs_list, jobs, /*quiet=*/true);
  std::map<std::string, std::string> library;
  for (const auto& r : built) {
    if (r.ok) library[r.name] = r.library;
    std::printf("%s %s%s\n", r.ok ? "built   " : "FAILED  ", r.name.c_str(), r.cached ? " (cached)" : "");
    if (!r.ok) std::printf("%s\n", r.log.c_str());
  }
  std::printf("compiled %zu kernels in %.0f s (%d jobs)\n\n", kernels.size(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), jobs);
  const ConvMeasureFn measure = gpu_conv_in_process_measure_fn();
  const std::chrono::milliseconds timeout(30000);

  struct Row {
    const Layer* layer;
    int64_t batch;
    Best ws, persistent, persistent_no_pdl;
    std::string analytic;
    double analytic_us = kInf;
  };
  std::vector<Row> rows;
  for (int64_t batch : batches)
    for (const Layer& l : kLayers) {
      const ConvProblem p = problem(l, batch, dtype);
      const std::string workload = conv_workload_key(p);
      std::vector<std::pair<std::string, std::string>> todo;
      for (const auto& k : kernels)
        if (library.count(k) && !db.find(env, workload, k)) todo.push_back({k, library[k]});
      measure_in_children(db.path(), env, workload, todo, timeout,
                          [&](const std::string& k, const std::string& lib) { return measure(p, k, lib); });
      Row row{&l, batch, {}, {}, {}, rank_conv_candidates(p, 90, ConvKernels::sm90).front().name, kInf};
      const int64_t m = p.n * p.p * p.q, kk = p.r * p.s * p.c;
      const double gflop = 2.0 * double(m) * double(p.k) * double(kk) * 1e-9;
      std::printf("%s, batch %lld: M=%lld N=%lld K=%lld, %.2f GFLOP\n", l.label, (long long)batch, (long long)m,
                  (long long)p.k, (long long)kk, gflop);
      std::vector<Measurement> ms;
      for (const auto& k : kernels)
        if (auto r = db.find(env, workload, k)) ms.push_back(*r);
      std::sort(ms.begin(), ms.end(), [](const Measurement& a, const Measurement& b) { return a.time_us < b.time_us; });
      for (const auto& r : ms) {
        const bool ok = r.status == Status::ok;
        if (ok) (schedule_of(r.kernel) == "ws" ? row.ws : row.persistent).take(r.kernel, r.time_us);
        if (r.kernel == row.analytic && ok) row.analytic_us = r.time_us;
        if (ok)
          std::printf("  %9.2f us %7.1f TFLOP/s  %-8s %s%s\n", r.time_us, gflop / r.time_us * 1e-3,
                      schedule_of(r.kernel).c_str(), r.kernel.c_str(), r.kernel == row.analytic ? "  <- analytic pick" : "");
        else
          std::printf("  %12s %16s %-8s %s: %s\n", to_string(r.status), "", schedule_of(r.kernel).c_str(),
                      r.kernel.c_str(), r.detail.substr(0, 160).c_str());
      }
      if (pdl_ab) {
        // The persistent kernels again, launched without PDL (SABRE_PDL=0 reaches the children).
        const std::string w0 = workload + " pdl=0";
        std::vector<std::pair<std::string, std::string>> todo0;
        for (const auto& k : kernels)
          if (library.count(k) && schedule_of(k) != "ws" && !db.find(env, w0, k)) todo0.push_back({k, library[k]});
        setenv("SABRE_PDL", "0", 1);
        measure_in_children(db.path(), env, w0, todo0, timeout,
                            [&](const std::string& k, const std::string& lib) { return measure(p, k, lib); });
        unsetenv("SABRE_PDL");
        for (const auto& k : kernels)
          if (auto r = db.find(env, w0, k); r && r->status == Status::ok) row.persistent_no_pdl.take(k, r->time_us);
        if (row.persistent_no_pdl.us < kInf)
          std::printf("  without PDL: fastest persistent %.2f us (%s)\n", row.persistent_no_pdl.us,
                      row.persistent_no_pdl.kernel.c_str());
      }
      std::printf("\n");
      rows.push_back(row);
    }

  std::printf("Summary (%s, bias_relu; us; persistent/ws < 1 is a gain)\n", dtype.c_str());
  std::printf("%-30s %5s %9s %9s %8s %9s %9s  %s\n", "layer", "batch", "best ws", "best pers", "pers/ws", "analytic",
              pdl_ab ? "pers noPDL" : "", "fastest persistent kernel");
  for (int64_t batch : batches) {
    double tot_ws = 0, tot_pers = 0, tot_best = 0, tot_analytic = 0, tot_nopdl = 0;
    for (const Row& r : rows) {
      if (r.batch != batch) continue;
      const double n = double(r.layer->count);
      tot_ws += n * r.ws.us, tot_pers += n * r.persistent.us, tot_best += n * std::min(r.ws.us, r.persistent.us);
      tot_analytic += n * r.analytic_us, tot_nopdl += n * r.persistent_no_pdl.us;
      std::printf("%-30s %5lld %9.2f %9.2f %8.3f %9.2f %9s  %s\n", r.layer->label, (long long)batch, r.ws.us,
                  r.persistent.us, r.persistent.us / r.ws.us, r.analytic_us,
                  pdl_ab ? std::to_string(r.persistent_no_pdl.us).substr(0, 8).c_str() : "", r.persistent.kernel.c_str());
    }
    std::printf("ResNet-50 3x3 total at batch %lld (16 convs): best ws %.1f us, best persistent %.1f us (%.3fx), best of "
                "both %.1f us, analytic picks %.1f us%s\n\n",
                (long long)batch, tot_ws, tot_pers, tot_pers / tot_ws, tot_best, tot_analytic,
                pdl_ab ? (", persistent without PDL " + std::to_string(tot_nopdl) + " us").c_str() : "");
  }
  return 0;
}
