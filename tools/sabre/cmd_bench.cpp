// sabre bench MODEL.sabre: latency percentiles and throughput of a compiled artifact on the GPU at
// given dims (docs/RUNTIME.md section 6), and the GPU's clock and power meanwhile. Tests:
// tests/gpu/runtime_session_test.cpp covers the runtime it times, tests/unit/gpu_clocks_test.cpp the
// clock report; bench/results holds what it measured.
#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "cli_util.h"
#include "command.h"
#include "runtime/plan.h"
#include "runtime/resolve.h"
#include "runtime/session_profile_report.h"
#include "sabre/session.h"
#include "support/gpu_clocks.h"

#if SABRE_RUNTIME_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace sabre::cli {
namespace {

const std::vector<FlagSpec> kFlags = {
    dim_flag("value of a symbolic dim (unset ones: 1 for batch-like names, else 8)"),
    {"--warmup", "", "N", "untimed runs first (default 20; 0 for none, e.g. one run under a profiler)", false},
    {"--iters", "--iterations", "N", "timed runs (default 200); --iterations (trtexec) is another spelling", false},
    json_flag(),
    {"--device", "", "N", "the CUDA device (default 0)", false},
    {"--no-graphs", "", "", "launch step by step instead of replaying a CUDA graph", false},
    {"--profile", "", "", "also time every plan step (events between steps) and print where the time goes", false},
    {"--steps", "", "N", "with --profile: how many of the slowest steps to list and chart (default 15; 0 for all)", false},
    {"--profile-out", "", "DIR", "with --profile: the folder for MODEL.trace.json and MODEL.profile.svg (default: the "
     "current directory; made if missing; files there are never replaced: MODEL.2.trace.json ... instead)", false},
    {"--no-clocks", "", "", "do not sample the GPU's SM clock and power (NVML) during the timed runs", false},
    {"--back-to-back", "", "N", "also time N runs enqueued one after another between two CUDA events (5 times; "
     "the median a run): what a serving loop that does not wait for each result sees, as PyTorch benchmarks "
     "time a loop", false},
};

// Step-by-step runs --profile times (the median of each step is reported; the trace shows each run).
constexpr int kProfileRuns = 20;

// sabre bench --profile: the time per op kind, then the slowest steps with their kernels.
void print_profile(const std::vector<StepTime>& steps, size_t listed) {
  double total = 0;
  std::map<std::string, std::pair<int, double>> by_op;
  for (const auto& t : steps) {
    total += t.us;
    auto& [count, us] = by_op[t.op];
    ++count;
    us += t.us;
  }
  std::vector<std::pair<std::string, std::pair<int, double>>> ops(by_op.begin(), by_op.end());
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
  std::printf("\nprofile      %zu steps, %.1f us in all (step by step, events between steps; median of the repeats)\n",
              steps.size(), total);
  std::printf("  %-20s %6s %10s %7s %9s\n", "op", "steps", "total us", "share", "us/step");
  for (const auto& [op, cu] : ops)
    std::printf("  %-20s %6d %10.1f %6.1f%% %9.2f\n", op.c_str(), cu.first, cu.second, 100.0 * cu.second / total,
                cu.second / cu.first);
  std::vector<const StepTime*> slow;
  for (const auto& t : steps) slow.push_back(&t);
  std::sort(slow.begin(), slow.end(), [](const StepTime* a, const StepTime* b) { return a->us > b->us; });
  if (listed == 0 || listed > slow.size()) listed = slow.size();
  std::printf("  slowest steps%s:\n", listed == slow.size() ? " (all)" : "");
  for (size_t i = 0; i < listed; ++i)
    std::printf("  %5zu %-12s %8.2f us  %s%s%s\n", slow[i]->index, slow[i]->op.c_str(), slow[i]->us, slow[i]->name.c_str(),
                slow[i]->kernel.empty() ? "" : "  ", slow[i]->kernel.c_str());
}

namespace fs = std::filesystem;

// The folder --profile writes into, made now so that a bad one fails before the timed runs.
[[maybe_unused]] fs::path profile_dir(const ParsedArgs& args) {
  const fs::path dir = args.value("--profile-out").value_or(".");
  std::error_code ec;
  fs::create_directories(dir, ec);
  std::string why = ec ? ec.message() : !fs::is_directory(dir) ? "not a folder" : "";
  if (why.empty()) {  // writable? (a read-only folder would fail only after the timed runs)
    const fs::path probe = dir / (".sabre_profile_probe_" + std::to_string(::getpid()));
    if (!std::ofstream(probe)) why = "cannot create a file there";
    fs::remove(probe, ec);
  }
  if (!why.empty())
    throw UsageError("cannot write the profile into --profile-out '" + dir.string() + "': " + why +
                     "; give a folder you can write to");
  return dir;
}

// What the profile files are named after: the artifact's name less its extension (bert.sabre -> bert).
[[maybe_unused]] std::string model_stem(const std::string& artifact) {
  fs::path p = fs::path(artifact).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  std::string stem = p.stem().string();
  return stem.empty() || stem == "." || stem == ".." ? "model" : stem;
}

// Writes MODEL.trace.json and MODEL.profile.svg into `dir`, never over an existing file: the first
// free MODEL[.N] names both. Returns their paths.
[[maybe_unused]] std::pair<fs::path, fs::path> write_profile_files(const runtime::ProfileRecord& rec, const fs::path& dir,
                                                  size_t listed) {
  fs::path trace, svg;
  for (int n = 1;; ++n) {
    const std::string base = rec.model + (n == 1 ? "" : "." + std::to_string(n));
    trace = dir / (base + ".trace.json");
    svg = dir / (base + ".profile.svg");
    if (!fs::exists(trace) && !fs::exists(svg)) break;
  }
  auto write = [](const fs::path& path, const std::string& text) {
    {
      std::ofstream f(path, std::ios::binary);
      f << text;
      if (f.flush()) return;
    }
    std::error_code ec;
    fs::remove(path, ec);  // a partial file of our own, not the user's: never there before
    throw std::runtime_error("cannot write " + path.string() + " (disk full or not writable?)");
  };
  write(trace, runtime::chrome_trace(rec).dump() + "\n");
  write(svg, runtime::time_breakdown_svg(rec, listed));
  return {trace, svg};
}

#if SABRE_RUNTIME_HAVE_CUDA
void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// A CUDA event for timing runs, destroyed with the scope (a failure to destroy it is said on stderr).
struct TimingEvent {
  cudaEvent_t e = nullptr;
  TimingEvent() { cuda_check(cudaEventCreate(&e), "creating a timing event"); }
  ~TimingEvent() {
    if (cudaError_t err = cudaEventDestroy(e); err != cudaSuccess)
      std::fprintf(stderr, "sabre bench: warning: destroying a timing event: %s\n", cudaGetErrorString(err));
  }
  TimingEvent(const TimingEvent&) = delete;
  TimingEvent& operator=(const TimingEvent&) = delete;
};
#endif

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

int bench(const std::vector<std::string>& argv) {
  return guarded("bench", [&] {
    ParsedArgs args = parse_args(argv, kFlags);
    if (args.help) {
      std::printf("usage: sabre bench MODEL.sabre [--dim NAME=VALUE ...] [--warmup N] [--iters N] [--profile [--steps N]\n"
                  "                   [--profile-out DIR]] [--no-graphs] [--no-clocks] [--device N]\n"
                  "                   [--back-to-back N] [--json]\n\n"
                  "Times a compiled artifact on the GPU with random inputs: p50/p90/p99 latency of one run, on the\n"
                  "host (enqueue to stream finished) and by CUDA events around it (launch included, as PyTorch's\n"
                  "torch.cuda.Event timing measures), throughput, and peak activation memory; with --profile, the\n"
                  "GPU time of every plan step, summed per op, and the slowest steps with their kernels, and two\n"
                  "files named after the artifact (bert.sabre -> bert.*) in --profile-out (default: the current\n"
                  "directory): bert.trace.json, one event per step per profiled run named by its op and ONNX node\n"
                  "with the kernel, shapes, bytes and flops (open it in https://ui.perfetto.dev or chrome://tracing),\n"
                  "and bert.profile.svg, the time by op kind and of the slowest steps as bars (any browser).\n"
                  "Each plan step is an NVTX range named the same way (domain 'sabre'), so Nsight Systems shows\n"
                  "step names: nsys profile sabre bench bert.sabre --no-graphs (with CUDA graphs the ranges\n"
                  "mark the capture, not each replay).\n"
                  "While the timed runs go, the GPU's SM clock and power are sampled every 10 ms (NVML, from the\n"
                  "driver): under sustained load a GPU can sit at its power limit with the clock well under its\n"
                  "maximum, and the 'gpu clocks' line says so (how many samples had the clock held down, and why).\n"
                  "The 'l2 prefetch' line says which weights each run fetches into L2 ahead of the GEMM or conv\n"
                  "reading them (not those of a GEMM or conv with >= 2048 rows and >= 4 GFLOP at the run's shapes);\n"
                  "environment: SABRE_PREFETCH=N (kernel steps ahead, default 1; 0 off), SABRE_PREFETCH_MAX_GFLOP=G\n"
                  "(that size limit in GFLOP, default 4; 0: none), SABRE_PDL=0\n"
                  "(no programmatic dependent launch), SABRE_ATTN=r16x4|r32x2|r64|r128|r128w4 (one attention block\n"
                  "shape), SABRE_ATTN_BCAST=0 (a [B,1,1,K] i64 attention mask loaded per query row),\n"
                  "SABRE_LN_WPB=1|2|4|8 (warps, i.e. rows, a layernorm block).\n"
                  "\noptions:\n%s",
                  flags_help(kFlags).c_str());
      return kExitOk;
    }
    if (args.positional.size() != 1) throw UsageError("give one artifact: sabre bench MODEL.sabre --dim batch=8");
    // A bad command line is a usage error in every build, a CUDA-less one included.
    [[maybe_unused]] const int64_t warmup = int64_t(unsigned_flag(args, "--warmup", 20, 9, "a whole number"));
    [[maybe_unused]] const int64_t iters = int64_t(unsigned_flag(args, "--iters", 200, 9, "a positive integer"));
    if (iters == 0) throw UsageError("bad --iters '0': expected a positive integer");
    [[maybe_unused]] const int device = static_cast<int>(unsigned_flag(args, "--device", 0, 3, "a GPU index such as 0"));
    [[maybe_unused]] const int64_t back_to_back = int64_t(unsigned_flag(args, "--back-to-back", 0, 7, "a positive integer"));
    if (args.has("--back-to-back") && back_to_back == 0)
      throw UsageError("bad --back-to-back '0': expected a positive integer (runs between the two events)");
    [[maybe_unused]] const uint64_t listed = unsigned_flag(args, "--steps", 15, 6, "a whole number (0 lists every step)");
    if (args.has("--steps") && !args.has("--profile")) throw UsageError("--steps lists profiled steps: add --profile");
    if (args.has("--profile-out") && !args.has("--profile"))
      throw UsageError("--profile-out is where --profile writes its files: add --profile");
    [[maybe_unused]] std::map<std::string, int64_t> dims = parse_dims(dim_texts(args));
#if SABRE_RUNTIME_HAVE_CUDA
    sabre::Session session(args.positional[0], device);
    const fs::path out_dir = args.has("--profile") ? profile_dir(args) : fs::path();  // before the timed runs
    {
      InputDims input_dims;
      for (const auto& sp : session.inputs()) input_dims.push_back({sp.name, sp.shape});
      add_input_shape_dims(dims, args, input_dims);
    }
    std::set<std::string> symbols;
    for (const auto& sp : session.inputs())
      for (const auto& d : sp.shape)
        if (!d.empty() && !std::isdigit(static_cast<unsigned char>(d[0])) && d.find_first_of("*+-") == std::string::npos)
          symbols.insert(d);
    for (const auto& [name, v] : dims)
      if (!symbols.count(name)) throw UsageError("model has no dim '" + name + "'");
    std::string dim_line;
    for (const auto& s : symbols) {
      dims.emplace(s, default_dim(s));
      dim_line += (dim_line.empty() ? "" : ", ") + s + "=" + std::to_string(dims[s]);
    }
    DeviceInputs dev;
    std::vector<std::vector<int64_t>> shapes;
    std::vector<sabre_tensor> ins;
    std::mt19937 rng(1);
    for (const auto& sp : session.inputs()) {
      std::vector<int64_t> shape;
      for (const auto& d : sp.shape) shape.push_back(runtime::DimExpr::parse(d).eval(dims));
      shapes.push_back(shape);
    }
    for (size_t i = 0; i < shapes.size(); ++i) {
      const auto& sp = session.inputs()[i];
      int64_t n = 1;
      for (int64_t d : shapes[i]) n *= d;
      size_t bytes = static_cast<size_t>(n) * sp.dtype.bits / 8;
      // Random bytes for floats would include NaNs; small values of the input's type instead:
      // integers 0/1 (valid indices and masks), floats from a uniform pattern.
      std::vector<uint8_t> host(bytes, 0);
      auto dt = runtime::from_dlpack(sp.dtype);
      for (int64_t k = 0; k < n; ++k) {
        uint8_t* e = host.data() + static_cast<size_t>(k) * sp.dtype.bits / 8;
        if (dt == ir::DType::f32) {
          float f = static_cast<float>(rng() % 2001) / 1000.f - 1.f;
          std::memcpy(e, &f, 4);
        } else if (dt == ir::DType::f16) {
          uint16_t h = static_cast<uint16_t>(0x3000 + rng() % 0x0c00);  // in [0.125, 1)
          std::memcpy(e, &h, 2);
        } else if (dt == ir::DType::bf16) {
          uint16_t h = static_cast<uint16_t>(0x3e00 + rng() % 0x0080);
          std::memcpy(e, &h, 2);
        } else {
          e[0] = static_cast<uint8_t>(rng() & 1);
        }
      }
      void* p = dev.upload(sp.name, host.data(), bytes);
      ins.push_back({sp.name.c_str(), p, SABRE_DEVICE_CUDA, device, sp.dtype, static_cast<int32_t>(shapes[i].size()),
                     shapes[i].data(), nullptr});
    }
    sabre::ExecutionContext ctx(session, nullptr, !args.has("--no-graphs"));
    std::vector<sabre_tensor> outs;
    for (const auto& sp : session.outputs()) outs.push_back({sp.name.c_str(), nullptr, 0, 0, {}, 0, nullptr, nullptr});
    auto once = [&] {
      for (auto& o : outs) o.data = nullptr;  // context-owned outputs, same buffers every run
      ctx.run(ins, outs, true);
    };
    for (int64_t i = 0; i < warmup; ++i) once();
    // Each run timed twice: on the host, enqueue to the stream synchronized (what a caller waits), and
    // by CUDA events recorded on the stream around it (the GPU's time from the run's start to its
    // end, launch included; what PyTorch's benchmarks measure with torch.cuda.Event).
    auto stream = static_cast<cudaStream_t>(ctx.stream());
    TimingEvent start, end;
    cudaEvent_t ev0 = start.e, ev1 = end.e;
    std::vector<double> ms, gpu_ms;
    // The GPU's clock and power over the timed runs (a thread reading NVML every 10 ms).
    std::unique_ptr<support::ClockMonitor> clocks;
    std::string clock_line;
    if (!args.has("--no-clocks")) {
      char bus[32] = {};
      if (cudaError_t e = cudaDeviceGetPCIBusId(bus, sizeof bus, device); e == cudaSuccess)
        clocks = std::make_unique<support::ClockMonitor>(bus);
      else
        clock_line = std::string("not read (the device's PCI bus id: ") + cudaGetErrorString(e) + ")";
    }
    auto t_all = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < iters; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      for (auto& o : outs) o.data = nullptr;
      cuda_check(cudaEventRecord(ev0, stream), "recording a timing event");
      ctx.run(ins, outs, false);
      cuda_check(cudaEventRecord(ev1, stream), "recording a timing event");
      cuda_check(cudaEventSynchronize(ev1), "waiting for the run");
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      float g = 0;
      cuda_check(cudaEventElapsedTime(&g, ev0, ev1), "reading a timing event");
      gpu_ms.push_back(g);
    }
    double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_all).count();
    // Back to back: the runs enqueued without waiting between them, so the host's launch work overlaps the
    // GPU's; the per-run times above include it.
    std::vector<double> b2b_ms;
    for (int r = 0; back_to_back > 0 && r < 5; ++r) {
      cuda_check(cudaEventRecord(ev0, stream), "recording a timing event");
      for (int64_t i = 0; i < back_to_back; ++i) {
        for (auto& o : outs) o.data = nullptr;
        ctx.run(ins, outs, false);
      }
      cuda_check(cudaEventRecord(ev1, stream), "recording a timing event");
      cuda_check(cudaEventSynchronize(ev1), "waiting for the runs");
      float g = 0;
      cuda_check(cudaEventElapsedTime(&g, ev0, ev1), "reading a timing event");
      b2b_ms.push_back(g / static_cast<double>(back_to_back));
    }
    if (clocks) clock_line = clocks->stop();
    int64_t batch = 1;
    for (const auto& [k, v] : dims)
      if (k.find("batch") != std::string::npos) batch = v;
    const sabre::RunStats& rs = ctx.last_stats();
    // --profile: the step-by-step runs and their files (in text mode after the timings are printed,
    // so that a failure here leaves them on the screen).
    runtime::ProfileRecord rec;
    std::pair<fs::path, fs::path> profile_files;
    auto profile = [&] {
      for (auto& o : outs) o.data = nullptr;
      rec.steps = ctx.profile(ins, outs, kProfileRuns);
      rec.model = model_stem(args.positional[0]);
      cudaDeviceProp prop{};
      if (cudaGetDeviceProperties(&prop, device) == cudaSuccess) rec.device = prop.name;
      for (const auto& s : symbols) rec.dims[s] = dims[s];
      profile_files = write_profile_files(rec, out_dir, static_cast<size_t>(listed));
    };
    if (args.has("--json")) {
      auto pct = [](const std::vector<double>& v) {
        return nlohmann::ordered_json{{"p50", percentile(v, 50)}, {"p90", percentile(v, 90)}, {"p99", percentile(v, 99)},
                                      {"min", *std::min_element(v.begin(), v.end())}};
      };
      nlohmann::ordered_json j = json_header("bench");
      j["artifact"] = args.positional[0];
      j["device"] = device;
      j["dims"] = dims;
      j["runs"] = {{"timed", iters}, {"warmup", warmup}, {"cuda_graphs", !args.has("--no-graphs")}};
      j["latency_ms"] = pct(ms);
      j["gpu_ms"] = pct(gpu_ms);
      j["back_to_back_ms"] = b2b_ms.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(percentile(b2b_ms, 50));
      j["throughput"] = {{"runs_per_s", static_cast<double>(iters) / total_s},
                         {"samples_per_s", static_cast<double>(iters * batch) / total_s},
                         {"batch", batch}};
      j["activations"] = {{"peak_bytes", rs.peak_activation_bytes}, {"without_reuse_bytes", rs.activation_bytes_without_reuse}};
      j["l2_prefetch"] = {{"weights", rs.prefetched_weights}, {"bytes", rs.prefetched_bytes}, {"lead_steps", rs.prefetch_lead}};
      j["gpu_clocks"] = clock_line.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(clock_line);
      if (args.has("--profile")) {
        profile();
        j["profile"] = nlohmann::ordered_json::array();
        for (const auto& t : rec.steps)
          j["profile"].push_back({{"index", t.index}, {"op", t.op}, {"name", t.name}, {"kernel", t.kernel}, {"us", t.us},
                                  {"bytes", t.bytes}, {"flops", t.flops}});
        j["profile_files"] = {{"trace", profile_files.first.string()}, {"chart", profile_files.second.string()}};
      }
      print_json(j);
      return kExitOk;
    }
    std::printf("dims         %s\n", dim_line.empty() ? "(static)" : dim_line.c_str());
    std::printf("runs         %lld timed after %lld warmup, CUDA graphs %s\n", static_cast<long long>(iters),
                static_cast<long long>(warmup), args.has("--no-graphs") ? "off" : "on");
    std::printf("latency ms   p50 %.4f  p90 %.4f  p99 %.4f  min %.4f  (host: enqueue to synchronized)\n",
                percentile(ms, 50), percentile(ms, 90), percentile(ms, 99), *std::min_element(ms.begin(), ms.end()));
    std::printf("gpu ms       p50 %.4f  p90 %.4f  p99 %.4f  min %.4f  (CUDA events around each run)\n",
                percentile(gpu_ms, 50), percentile(gpu_ms, 90), percentile(gpu_ms, 99),
                *std::min_element(gpu_ms.begin(), gpu_ms.end()));
    if (!b2b_ms.empty())
      std::printf("back to back ms %.4f a run  (%lld runs between two CUDA events, median of %zu)\n",
                  percentile(b2b_ms, 50), static_cast<long long>(back_to_back), b2b_ms.size());
    std::printf("throughput   %.1f runs/s, %.1f samples/s (batch %lld)\n", static_cast<double>(iters) / total_s,
                static_cast<double>(iters * batch) / total_s, static_cast<long long>(batch));
    std::printf("activations  peak %.2f MiB (%.2f MiB without reuse)\n", rs.peak_activation_bytes / 1048576.0,
                rs.activation_bytes_without_reuse / 1048576.0);
    if (rs.prefetched_weights > 0)
      std::printf("l2 prefetch  %llu weights, %.1f MiB a run, each %d kernel step%s ahead of its GEMM (SABRE_PREFETCH)\n",
                  static_cast<unsigned long long>(rs.prefetched_weights), rs.prefetched_bytes / 1048576.0,
                  rs.prefetch_lead, rs.prefetch_lead == 1 ? "" : "s");
    else
      std::printf("l2 prefetch  off (SABRE_PREFETCH=0, or no GEMM or conv weight of 64 KiB or more, or all of them too large at these shapes)\n");
    if (!clock_line.empty()) std::printf("gpu clocks   %s\n", clock_line.c_str());
    if (args.has("--profile")) {
      std::fflush(stdout);
      profile();
      print_profile(rec.steps, static_cast<size_t>(listed));
      std::printf("  trace        %s  (https://ui.perfetto.dev or chrome://tracing)\n  chart        %s\n",
                  profile_files.first.string().c_str(), profile_files.second.string().c_str());
    }
    return kExitOk;
#else
    throw std::runtime_error("this sabre was built without CUDA: it cannot run artifacts on a GPU");
#endif
  });
}

const bool reg = register_command({"bench", "time a compiled artifact on the GPU (latency percentiles, throughput)", bench});

}  // namespace
}  // namespace sabre::cli
