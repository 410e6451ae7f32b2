// sabre compile: ONNX model -> artifact directory (plan, weights, kernels). docs/COMPILE.md
// Tests: tests/unit/codegen_lower_test.cpp (the library call behind it)
#include <cstdio>
#include <string>
#include <vector>

#include "cli_util.h"
#include "codegen/compile.h"
#include "command.h"
#include "sabre/compiler.h"

namespace sabre::cli {
namespace {

FlagSpec with_alias(FlagSpec f, const std::string& alias, const std::string& metavar = "") {
  f.alias += "," + alias;
  if (!metavar.empty()) f.metavar = metavar;
  return f;
}

const std::vector<FlagSpec> kFlags = {
    with_alias(output_flag("the artifact directory to write (model.sabre); --saveEngine (trtexec) is another spelling"),
               "--saveEngine", "DIR"),
    onnx_flag(),
    dtype_flag("compute dtype of activations and weights: fp16 or bf16 (default fp16)"),
    {"--fp16", "", "", "the same as --dtype fp16 (trtexec)", false},
    {"--bf16", "", "", "the same as --dtype bf16 (trtexec)", false},
    [] {
      FlagSpec f = dim_flag("range of a symbolic dim, NAME=MIN..MAX or NAME=VALUE (default batch-like 1..64, others 1..512)");
      f.metavar = "NAME=MIN..MAX";
      return f;
    }(),
    {"--no-tune", "", "", "pick GEMM kernels with the analytic model, even where a GPU could time them", false},
    {"--tune", "", "", "require tuning: fail if this machine has no GPU of the target arch (default: tune when it has one)", false},
    {"--db", "", "PATH", "the tuning database (default $XDG_CACHE_HOME/sabre/tuning.db)", false},
    {"--tuned-for", "", "GPU", "pick the GEMM and conv kernels from the DB's measurements of this GPU (its name as `sabre db show` lists it, e.g. \"NVIDIA H200\"), timing nothing: build on a machine without that GPU from a DB tuned on one", false},
    {"--top-k", "", "N", "CUTLASS candidates timed per GEMM workload and M bucket (default 4)", false},
    {"--no-cublaslt", "", "", "deploy CUTLASS GEMM kernels only (default: where the tuner measured one of cuBLASLt's algorithms fastest, that algorithm runs, as a cuBLASLt kernel named by its configuration)", false},
    {"--plan-only", "", "", "write plan, weights and manifest without compiling any kernel", false},
    {"--no-fuse-attention", "", "", "keep attention as GEMMs, softmax and permutes (default: attention with head dim a multiple of 4 up to 128 is one native kernel reading Q/K/V from one joined projection GEMM)", false},
    {"--fuse-attention", "", "", "the default; kept so older scripts run", false},
    {"--stem", "", "direct|im2col|conv", "how a conv at the NCHW input with C < 8 (the RGB stem) runs: direct (default) is one native stem_conv kernel reading the NCHW images and writing NHWC (bias and relu/relu6 fused), where it takes the conv, else im2col; im2col is an im2col step reading the NCHW images into [n*p*q, R*S*C rounded up to 8] and a GEMM over it; conv zero-pads C to 8 in the NHWC conversion and runs an implicit-GEMM conv, on few_channels kernels (GEMM K = R*S*8 = 392 for a 7x7 stem, no padding to the tile's K). The notes say which path each stem took", false},
    {"--no-im2col-stem", "", "", "the same as --stem conv (the older spelling)", false},
    {"--no-pointwise-gemm", "", "", "run 1x1 stride-1 convs on the conv kernels (default: as GEMMs over their NHWC tensors, on the persistent GEMM kernels)", false},
    {"--conv-kernels", "", "auto|sm80|sm90", "conv kernel families: auto (default) lets the model rank CUTLASS 2.x sm80 implicit GEMMs (with split-K) against 3.x sm90 TMA/wgmma kernels on sm_90a; sm80 or sm90 insists on one (sm90 where C and K are multiples of 8)", false},
    arch_flag("what kernels are compiled for (default sm_90a)"),
    jobs_flag("compiler processes at a time (default: all cores)"),
    gpus_flag("the GPUs that time candidates when tuning, one worker each, all of one model"),
    {"--cache-dir", "", "DIR", "compiled-kernel cache (default $XDG_CACHE_HOME/sabre/kernels)", false},
    {"--dump-after", "", "PASS[,PASS]|all", "print the graph and plan after these lowering passes to stderr (the pass names are in docs/COMPILE.md; also $SABRE_DUMP_AFTER)", false},
    json_flag(),
};

void print_help() {
  std::printf(
      "usage: sabre compile MODEL.onnx -o MODEL.sabre [--dtype fp16|bf16] [--dim batch=1..256,seq=1..512]\n"
      "                     [--no-tune|--tune] [--db PATH [--tuned-for GPU]] [--plan-only] [--stem direct|im2col|conv]\n"
      "                     [--arch sm_90a] [-j N] [--json]\n\n"
      "Imports MODEL.onnx, canonicalizes and partitions it, lowers it to a runtime plan (GEMM regions to\n"
      "CUTLASS kernels with per-M dispatch tables, the rest to sabre's native kernels), compiles the kernels\n"
      "(cached by content) and writes the artifact directory that `sabre run` loads. Where this machine has a\n"
      "GPU of the target arch, GEMM candidates are timed first (results kept in the tuning DB, so a rerun\n"
      "times nothing). Elsewhere, and with --plan-only, the kernels come from the DB where it holds one GPU's\n"
      "measurements for the target arch and this build (--tuned-for GPU chooses among several; `sabre db\n"
      "import` brings a DB exported on the GPU host), else the analytic model picks; the output says which.\n"
      "No GPU is needed.\n\n"
      "The RGB stem (a conv on the NCHW images with C < 8, e.g. ResNet's 7x7 stride-2 3 -> 64) has three paths\n"
      "(--stem, below); a note says which path each stem took. Grouped convs run on CUTLASS's grouped\n"
      "implicit GEMMs, their groups widened first to 32 output channels where a divisor of the group count\n"
      "allows (block-diagonal filters), else dense up to 64 groups; depthwise convs on sabre's own kernel.\n\n"
      "options:\n%s",
      flags_help(kFlags).c_str());
}

int run(const std::vector<std::string>& argv) {
  return guarded("compile", [&] {
    ParsedArgs args = parse_args(argv, kFlags);
    if (args.help) {
      print_help();
      return kExitOk;
    }
    if (args.positional.size() != 1)
      throw UsageError(args.positional.empty() ? "no model given: sabre compile MODEL.onnx -o MODEL.sabre"
                                               : "one model at a time: sabre compile MODEL.onnx -o MODEL.sabre");
    auto out = args.value("--output");
    if (!out) throw UsageError("where to? give the artifact directory with -o MODEL.sabre");
    // The public compile API (include/sabre/compiler.h) does the work; this command reads its flags.
    CompileOptions o;
    o.dtype = dtype_choice(args, {"f16", "bf16"}, "f16");
    for (const auto& t : dim_texts(args))
      if (is_input_shape(t))
        throw UsageError("--shapes '" + t + "' gives one input's shape, which inspect, partition, run and bench take; " +
                         "sabre compile takes dim ranges: --dim batch=1..8,seq=1..128");
    if (args.has("--dim")) {
      std::string ranges;
      for (const auto& t : dim_texts(args)) ranges += (ranges.empty() ? "" : ",") + t;
      try {
        o.dynamic_dims = codegen::parse_dynamic(ranges);
      } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
      }
    }
    if (args.has("--tune") && args.has("--no-tune")) throw UsageError("--tune and --no-tune contradict each other");
    o.tune = args.has("--tune")      ? CompileOptions::Tune::always
             : args.has("--no-tune") ? CompileOptions::Tune::never
                                     : CompileOptions::Tune::automatic;
    if (auto d = args.value("--db")) o.tuning_db = *d;
    if (auto g = args.value("--tuned-for")) {
      if (g->empty()) throw UsageError("--tuned-for needs a GPU's name as the DB has it, e.g. \"NVIDIA H200\"");
      if (args.has("--tune")) throw UsageError("--tuned-for picks from the DB without timing: it cannot go with --tune");
      if (args.has("--no-tune")) throw UsageError("--tuned-for picks from the DB, --no-tune from the analytic model: give one");
      o.tuned_for = *g;
    }
    o.gpus = gpus_value(args);
    if (args.has("--gpus") && (args.has("--no-tune") || args.has("--tuned-for") || args.has("--plan-only")))
      throw UsageError(std::string("--gpus names GPUs to time on, but ") +
                       (args.has("--no-tune") ? "--no-tune" : args.has("--tuned-for") ? "--tuned-for" : "--plan-only") +
                       " times nothing: give one");
    // A positive number of at most 3 digits, or `def` when the flag is absent.
    auto positive = [&](const char* flag, int def) {
      auto v = args.value(flag);
      if (!v) return def;
      if (v->empty() || v->find_first_not_of("0123456789") != std::string::npos || v->size() > 3 || std::stoi(*v) < 1)
        throw UsageError(std::string(flag) + " '" + *v + "': give a positive number");
      return std::stoi(*v);
    };
    o.top_k = positive("--top-k", o.top_k);
    o.cublaslt = !args.has("--no-cublaslt");
    o.plan_only = args.has("--plan-only");
    if (auto d = args.value("--dump-after")) {
      try {
        codegen::parse_dump_after(*d);
      } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
      }
      o.dump_after = *d;
    }
    if (args.has("--fuse-attention") && args.has("--no-fuse-attention"))
      throw UsageError("--fuse-attention and --no-fuse-attention contradict each other: give one");
    o.fuse_attention = !args.has("--no-fuse-attention");
    switch (stem_flag(args)) {
      case codegen::Stem::direct: o.stem = CompileOptions::Stem::direct; break;
      case codegen::Stem::im2col: o.stem = CompileOptions::Stem::im2col; break;
      case codegen::Stem::conv: o.stem = CompileOptions::Stem::conv; break;
    }
    o.pointwise_gemm = !args.has("--no-pointwise-gemm");
    const std::string ck = args.value("--conv-kernels").value_or("auto");
    if (ck == "auto")
      o.conv_kernels = CompileOptions::ConvKernels::automatic;
    else if (ck == "sm80")
      o.conv_kernels = CompileOptions::ConvKernels::sm80;
    else if (ck == "sm90")
      o.conv_kernels = CompileOptions::ConvKernels::sm90;
    else
      throw UsageError("--conv-kernels '" + ck + "': give auto, sm80 or sm90");
    o.arch = normalize_arch(args.value("--arch").value_or("sm_90a"));
    o.jobs = jobs_value(args, o.jobs);
    if (auto c = args.value("--cache-dir")) o.cache_dir = *c;
    o.progress = [](const std::string& line) { std::fprintf(stderr, "sabre compile: %s\n", line.c_str()); };

    const CompileOutcome s = compile(args.positional[0], *out, o);
    if (!s.ok()) {
      std::fprintf(stderr, "sabre compile: error: %s\n", describe_message(s.message).c_str());
      return kExitError;
    }
    int total = 0;
    std::string by_op;
    for (const auto& [op, n] : s.steps_by_op) {
      total += n;
      by_op += (by_op.empty() ? "" : ", ") + std::to_string(n) + " " + op;
    }
    if (args.has("--json")) {
      nlohmann::ordered_json j = json_header("compile");
      j["model"] = args.positional[0];
      j["artifact"] = *out;
      j["dtype"] = o.dtype;
      j["arch"] = o.arch;
      j["plan_only"] = o.plan_only;
      j["steps"] = {{"total", total}, {"by_op", s.steps_by_op}};
      j["kernels"] = {{"gemm", s.gemm_kernels},           {"conv", s.conv_kernels},
                      {"elementwise", s.elementwise_kernels}, {"compiled", s.kernels_compiled},
                      {"cached", s.kernels_cached}};
      j["kernel_list"] = nlohmann::ordered_json::array();  // name, kind, origin (compile.h CompileSummary::Kernel)
      for (const auto& k : s.kernel_list) j["kernel_list"].push_back({{"name", k.name}, {"kind", k.kind}, {"origin", k.origin}});
      j["weights_bytes"] = s.weights_bytes;
      j["artifact_bytes_without_weights"] = s.artifact_bytes_without_weights;
      j["tuning"] = {{"points", s.tuned_points}, {"new_measurements", s.measured_candidates}, {"seconds", s.tune_seconds}};
      j["seconds"] = s.seconds;
      j["phase_seconds"] = nlohmann::ordered_json::object();
      for (const auto& [phase, secs] : s.phase_seconds) j["phase_seconds"][phase] = secs;
      j["notes"] = s.notes;
      print_json(j);
      return kExitOk;
    }
    for (const auto& n : s.notes) std::printf("note: %s\n", n.c_str());
    std::printf("wrote %s\n", out->c_str());
    std::printf("  steps:    %d (%s)\n", total, by_op.c_str());
    std::printf("  kernels:  %zu GEMM, %zu conv, %zu elementwise%s\n", s.gemm_kernels, s.conv_kernels, s.elementwise_kernels,
                o.plan_only ? " (not compiled: --plan-only)"
                            : (" (" + std::to_string(s.kernels_compiled) + " compiled, " +
                               std::to_string(s.kernels_cached) + " from the cache" +
                               (s.kernels_from_pack ? ", " + std::to_string(s.kernels_from_pack) + " of them the kernel pack's" : "") +
                               ")").c_str());
    std::printf("  weights:  %.2f MB\n", s.weights_bytes / 1e6);
    std::printf("  artifact: %.2f MB without weights\n", s.artifact_bytes_without_weights / 1e6);
    if (s.tuned_points)
      std::printf("  tuning:   %zu (workload, M) points, %zu new measurements, %.1f s\n", s.tuned_points,
                  s.measured_candidates, s.tune_seconds);
    std::string phases;
    for (const auto& [phase, secs] : s.phase_seconds) {
      char b[64];
      std::snprintf(b, sizeof b, "%s%s %.1f s", phases.empty() ? "" : ", ", phase.c_str(), secs);
      phases += b;
    }
    std::printf("  time:     %.1f s (%s)\n", s.seconds, phases.c_str());
    return kExitOk;
  });
}

const bool reg = register_command({"compile", "compile an ONNX model into an artifact that sabre run loads", run});

}  // namespace
}  // namespace sabre::cli
