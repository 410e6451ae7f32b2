// sabre tune: profile the GEMM workloads of a model and record the winners in the tuning DB.
// Exit codes: 0 tuned (or --no-tune); 3 no GPU to time on (the analytic picks are printed instead);
// 1/2 errors as everywhere. Tests: tests/unit/tune_cli_test.cpp (no-GPU path), docs/TUNING.md.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "backends/cutlass/patterns.h"
#include "cli_util.h"
#include "codegen/compile.h"
#include "command.h"
#include "frontend/onnx/importer.h"
#include "partition/partitioner.h"
#include "tune/conv_tune.h"
#include "tune/db.h"
#include "tune/profiler.h"
#include "tune/rank.h"
#include "tune/select.h"

namespace sabre::cli {
namespace {

constexpr int kExitNoGpu = 3;

const std::vector<FlagSpec> kFlags = {
    {"--db", "", "PATH", "the tuning database (default $XDG_CACHE_HOME/sabre/tuning.db)", false},
    {"--top-k", "", "N", "CUTLASS candidates timed per workload, best of the analytic ranking (default 4)", false},
    {"--max-kernels", "", "N", "CUTLASS kernels compiled per GEMM problem, all M buckets (default 8, 0: no cap)",
     false},
    {"--lt-algos", "", "N", "cuBLASLt heuristic algorithms timed per workload (default 16)", false},
    onnx_flag(),
    dtype_flag("the precision the model will run in: fp16 or bf16 (default fp16)"),
    {"--fp16", "", "", "the same as --dtype fp16 (trtexec)", false},
    {"--bf16", "", "", "the same as --dtype bf16 (trtexec)", false},
    [] {
      FlagSpec f = dim_flag("range of a symbolic dim (batch=1..32, seq=128), as sabre compile takes it; unnamed dims "
                            "get its defaults (batch-like 1..64, others 1..512); M is tuned at powers of two");
      f.metavar = "NAME=LO..HI";
      return f;
    }(),
    {"--no-fuse-attention", "", "", "collect the workloads of sabre compile --no-fuse-attention (with attention's GEMMs)", false},
    {"--stem", "", "direct|im2col|conv", "collect the workloads of sabre compile --stem: direct (default) has nothing to tune for a stem that runs as one native stem_conv kernel; im2col tunes the stem as a GEMM, conv as a padded conv problem with few_channels candidates", false},
    {"--no-im2col-stem", "", "", "the same as --stem conv (the older spelling)", false},
    {"--no-pointwise-gemm", "", "", "collect the workloads of sabre compile --no-pointwise-gemm (1x1 convs as convs, not GEMMs)", false},
    {"--fuse-attention", "", "", "the default (fused attention has no attention GEMMs); kept so older scripts run", false},
    [] {
      FlagSpec f = arch_flag("target architecture for --no-tune (default sm_90a); --sm is the older spelling");
      f.alias = "--sm";
      return f;
    }(),
    {"--no-tune", "", "", "no timing: print the analytic model's picks (no GPU needed)", false},
    {"--no-gpu-check", "", "", "the same as --no-tune: do not look for a GPU at all", false},
    jobs_flag("parallel nvcc processes (default: all cores)"),
    gpus_flag("the GPUs that time candidates, one worker each, all of one model"),
    {"--quiet", "", "", "no compile progress", false},
};

void print_help() {
  std::printf(
      "usage: sabre tune MODEL.onnx [--db PATH] [--top-k N] [--max-kernels N] [--dtype fp16|bf16] [--dim NAME=LO..HI ...]\n"
      "                  [--no-fuse-attention] [--stem direct|im2col|conv] [--no-pointwise-gemm] [--no-tune]\n"
      "                  [--arch sm_90a] [-j N] [--gpus all|N|LIST]\n\n"
      "Partitions and lowers MODEL.onnx as sabre compile does and collects the GEMM workloads compile would tune\n"
      "(dtype, layout, epilogue, N, K, batch, M range) and its conv workloads at each batch bucket (with the same\n"
      "--dtype, dims, attention and stem flags a model tuned here compiles without new measurements). It ranks the\n"
      "CUTLASS catalog for each with the analytic model and times the top-k candidates (and, for GEMMs,\n"
      "cuBLASLt's heuristic algorithms) on GPU 0, or on each GPU of --gpus at once (compiles cached and shared, one\n"
      "timing worker per GPU taking the next point as it is free, each candidate in a watchdog child, checked\n"
      "against a reference, timed by CUDA graph replay). The table compares the fastest CUTLASS kernel with\n"
      "cuBLASLt; where one of cuBLASLt's algorithms is faster, sabre compile deploys that algorithm (the\n"
      "dispatch tables say so). Every measurement goes to the database at once; a rerun measures only what is\n"
      "missing. Without a GPU it prints the analytic picks and exits 3.\n\noptions:\n%s",
      flags_help(kFlags).c_str());
}

int64_t positive(const ParsedArgs& a, const char* flag, int64_t def) {
  auto v = a.value(flag);
  if (!v) return def;
  try {
    size_t used = 0;
    int64_t x = std::stoll(*v, &used);
    if (used == v->size() && x > 0) return x;
  } catch (const std::exception&) {
  }
  throw UsageError(std::string("bad ") + flag + " '" + *v + "': give a positive integer");
}

std::map<std::string, std::pair<int64_t, int64_t>> parse_ranges(const std::vector<std::string>& texts) {
  std::map<std::string, std::pair<int64_t, int64_t>> out;
  for (const auto& t : texts) {
    auto [name, value] = split_assignment(t, "--dim", "NAME=LO..HI or NAME=VALUE, like batch=1..32");
    auto dots = value.find("..");
    std::string lo = dots == std::string::npos ? value : value.substr(0, dots);
    std::string hi = dots == std::string::npos ? value : value.substr(dots + 2);
    auto num = [&](const std::string& s) {
      bool ok = !s.empty() && s.size() <= 12;
      for (char c : s) ok = ok && c >= '0' && c <= '9';
      int64_t v = ok ? std::stoll(s) : 0;
      if (v <= 0) throw UsageError("bad --dim '" + t + "': use NAME=LO..HI with positive integers, like batch=1..32");
      return v;
    };
    int64_t a = num(lo), b = num(hi);
    if (b < a) throw UsageError("bad --dim '" + t + "': the range is empty (LO > HI)");
    out[name] = {a, b};
  }
  return out;
}

std::string us(const std::optional<tune::Measurement>& m) {
  if (!m) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", m->time_us);
  return buf;
}

std::string ratio(const std::optional<tune::Measurement>& num, const std::optional<tune::Measurement>& den) {
  if (!num || !den) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", num->time_us / den->time_us);
  return buf;
}

int run(const std::vector<std::string>& argv) {
  return guarded("tune", [&] {
    ParsedArgs args = parse_args(argv, kFlags);
    if (args.help) {
      print_help();
      return kExitOk;
    }
    if (args.positional.size() != 1)
      throw UsageError(args.positional.empty() ? "no model given: sabre tune MODEL.onnx"
                                               : "one model at a time: sabre tune MODEL.onnx");
    const std::string dtype = dtype_choice(args, {"f16", "bf16"}, "f16");
    tune::ProfileOptions po;
    po.top_k = int(positive(args, "--top-k", 4));
    po.max_kernels_per_problem = int(unsigned_flag(args, "--max-kernels", 8, 4, "a count of kernels, 0 for no cap"));
    po.lt_algos = args.has("--lt-algos") ? int(positive(args, "--lt-algos", 16)) : 16;
    po.jobs = jobs_value(args, 0);
    po.quiet = args.has("--quiet");
    po.target_sm = arch_number(normalize_arch(args.value("--arch").value_or("sm_90a")));
    for (const auto& t : dim_texts(args))
      if (is_input_shape(t))
        throw UsageError("--shapes '" + t + "' gives one input's shape, which inspect, partition, run and bench take; " +
                         "sabre tune takes dim ranges: --dim batch=1..8,seq=1..128");
    auto ranges = parse_ranges(dim_texts(args));
    if (args.has("--fuse-attention") && args.has("--no-fuse-attention"))
      throw UsageError("--fuse-attention and --no-fuse-attention contradict each other: give one");
    const bool fuse = !args.has("--no-fuse-attention");
    const std::vector<int> gpus_asked = gpus_value(args);
    if (args.has("--gpus") && (args.has("--no-tune") || args.has("--no-gpu-check")))
      throw UsageError(std::string("--gpus names GPUs to time on, but ") +
                       (args.has("--no-tune") ? "--no-tune" : "--no-gpu-check") + " times nothing: give one");

    const auto t0 = std::chrono::steady_clock::now();
    ir::Graph g = codegen::canonicalize_model(onnx_frontend::import_model(args.positional[0]), fuse);
    partition::PartitionResult part = partition::partition(std::move(g), cutlass_backend::pattern_table());
    // What sabre compile would tune with the same dtype, ranges and fusion: its own collection call.
    codegen::LowerOptions lo;
    lo.dtype = dtype == "bf16" ? ir::DType::bf16 : ir::DType::f16;
    lo.ranges = ranges;
    lo.fuse_attention = fuse;
    lo.stem = stem_flag(args);
    lo.pointwise_gemm = !args.has("--no-pointwise-gemm");
    lo.pick_conv = [sm = po.target_sm](const codegen::ConvProblem& p) { return codegen::analytic_conv_kernel(p, sm); };
    std::vector<tune::GemmProblem> problems = codegen::tuned_gemm_problems(part.graph, lo, po.target_sm);
    std::vector<tune::ConvProblem> convs = codegen::tuned_conv_problems(part.graph, lo, po.target_sm);
    if (problems.empty() && convs.empty()) {
      std::printf("no GEMM or conv workloads to tune in this model\n");
      return kExitOk;
    }
    std::vector<tune::TuneTask> tasks;
    for (const auto& p : problems)
      for (int64_t m : tune::m_buckets(p.m_min, p.m_max)) tasks.push_back({p, m});
    std::printf("%zu GEMM workloads, %zu (workload, M) points to tune; %zu (conv, batch) points\n", problems.size(),
                tasks.size(), convs.size());

    tune::Environment env;
    std::string why;
    const bool no_tune = args.has("--no-tune") || args.has("--no-gpu-check");
    bool gpu = false;
    if (!no_tune) {
      try {
        gpu = tune::probe_gpus(gpus_asked, po.gpus, env, why);
      } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--gpus: ") + e.what());
      }
    }
    if (!gpu) {
      if (!no_tune)
        std::fprintf(stderr, "sabre tune: timing needs a GPU (%s); printing the analytic model's picks instead\n",
                     why.c_str());
      for (const auto& p : problems) {
        std::printf("\n%s  M %lld..%lld\n", tune::workload_key(p, p.m_max).c_str(), static_cast<long long>(p.m_min),
                    static_cast<long long>(p.m_max));
        tune::PickOptions o;
        o.target_sm = po.target_sm;
        for (const auto& e : tune::pick_kernels(p, o))
          std::printf("  M <= %-7lld %s\n", static_cast<long long>(e.max_m), e.kernel.c_str());
      }
      for (const auto& c : convs)
        std::printf("\n%s\n  %s\n", tune::conv_workload_key(c).c_str(), codegen::analytic_conv_kernel(c, po.target_sm).c_str());
      return no_tune ? kExitOk : kExitNoGpu;
    }
    po.target_sm = env.sm;
    tune::TuningDb db(args.value("--db").value_or(tune::TuningDb::default_path()));
    std::string ids;
    for (int d : po.gpus) ids += (ids.empty() ? "" : ",") + std::to_string(d);
    std::printf("GPU %s (sm%d), CUDA %s, CUTLASS %s%s\n", env.gpu.c_str(), env.sm, env.cuda.c_str(), env.cutlass.c_str(),
                po.gpus.size() > 1 ? (", timing on GPUs " + ids).c_str() : "");
    if (std::string note = db.other_builds_note(env); !note.empty()) std::fprintf(stderr, "note: %s\n", note.c_str());
    // One timing worker per GPU; per workload one child (and CUDA context), restarted past a crashing
    // or hanging candidate.
    tune::BatchMeasureFn measure = tune::batched_in_children(db.path(), env, po.timeout, tune::gpu_in_process_measure_fn());
    tune::TuneStats stats;
    po.compiled_lookup = tune::default_lookup_fn(po);  // compile while timing
    auto reports = tune::tune_tasks(tasks, db, env, po, measure, tune::default_compile_fn(po), &stats);

    // Speedups are the fastest correct CUTLASS kernel's; where a cuBLASLt algorithm measured faster,
    // sabre compile deploys that instead (the dispatch tables below say which).
    std::printf("\n%-62s %-66s %9s %9s %7s %7s %7s %5s\n", "workload", "fastest CUTLASS", "us", "lt1 us", "xlt1",
                "xltbest", "model", "new");
    double log_lt1 = 0, log_best = 0, log_model = 0;
    int n_lt1 = 0, n_best = 0, n_model = 0, lt_faster = 0, n_compared = 0;
    for (const auto& r : reports) {
      const auto& best = r.cutlass_best;
      std::printf("%-62s %-66s %9s %9s %7s %7s %7s %5d\n", r.workload.c_str(),
                  best ? best->kernel.c_str() : "none correct", us(best).c_str(), us(r.lt_top1).c_str(),
                  ratio(r.lt_top1, best).c_str(), ratio(r.lt_best, best).c_str(), ratio(r.analytic, best).c_str(),
                  r.measured);
      if (best && r.lt_top1) log_lt1 += std::log(r.lt_top1->time_us / best->time_us), ++n_lt1;
      if (best && r.lt_best) log_best += std::log(r.lt_best->time_us / best->time_us), ++n_best;
      if (best && r.analytic) log_model += std::log(r.analytic->time_us / best->time_us), ++n_model;
      if (best && r.lt_best) ++n_compared, lt_faster += r.lt_best->time_us < best->time_us;
    }
    if (n_lt1) std::printf("\ngeomean speedup over cuBLASLt heuristic top-1: %.3f (%d workloads)\n", std::exp(log_lt1 / n_lt1), n_lt1);
    if (n_best) std::printf("geomean speedup over best cuBLASLt algorithm:  %.3f\n", std::exp(log_best / n_best));
    if (n_model) std::printf("geomean analytic pick / tuned pick time:       %.3f\n", std::exp(log_model / n_model));
    if (n_compared)
      std::printf("cuBLASLt faster than the fastest CUTLASS kernel on %d of %d points (sabre compile deploys its "
                  "algorithm there; --no-cublaslt: CUTLASS only)\n",
                  lt_faster, n_compared);
    for (const auto& p : problems) {
      tune::PickOptions o;
      o.db = &db;
      o.env = env;
      o.target_sm = env.sm;
      std::printf("\ndispatch %s:\n", tune::workload_key(p, p.m_max).c_str());
      for (const auto& e : tune::pick_kernels(p, o))
        std::printf("  M <= %-7lld %s\n", static_cast<long long>(e.max_m), e.kernel.c_str());
    }
    if (!convs.empty()) {
      const auto tc = std::chrono::steady_clock::now();
      auto creps = tune::tune_convs(convs, db, env, po, tune::ConvKernels::automatic,
                                    tune::gpu_conv_in_process_measure_fn(), tune::default_conv_compile_fn(po));
      stats.timing_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - tc).count();
      std::printf("\n%-100s %-84s %9s %7s %5s\n", "conv workload", "deployed", "us", "model", "new");
      double log_model = 0;
      int n_model = 0;
      for (const auto& r : creps) {
        std::printf("%-100s %-84s %9s %7s %5d\n", r.workload.c_str(), r.winner ? r.winner->kernel.c_str() : "none correct",
                    us(r.winner).c_str(), ratio(r.analytic, r.winner).c_str(), r.measured);
        if (r.winner && r.analytic) log_model += std::log(r.analytic->time_us / r.winner->time_us), ++n_model;
      }
      if (n_model) std::printf("geomean analytic conv pick / tuned pick time: %.3f (%d points)\n", std::exp(log_model / n_model), n_model);
    }
    const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("\ntuned in %.1f s: compile %.1f s (%d kernels), timing %.1f s, other %.1f s\n", total,
                stats.compile_s, stats.compiled, stats.timing_s,
                std::max(0.0, total - stats.compile_s - stats.timing_s));
    return kExitOk;
  });
}

const bool reg = register_command({"tune", "time GEMM and conv kernel candidates for a model and record winners", run});

}  // namespace
}  // namespace sabre::cli
