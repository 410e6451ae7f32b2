// The compile driver. See compile.h.
#include "codegen/compile.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <stdexcept>
#include <thread>

#include "backends/cutlass/conv_emitter.h"
#include "backends/cutlass/conv_sm90.h"
#include "backends/cutlass/conv_spec.h"
#include "backends/cutlass/emitter.h"
#include "backends/cutlass/kernel_spec.h"
#include "backends/cutlass/nvcc.h"
#include "backends/cutlass/patterns.h"
#include "frontend/onnx/importer.h"
#include "partition/partitioner.h"
#include "runtime/artifact.h"
#include "transform/canonicalize.h"
#include "tune/compile_cache.h"
#include "tune/conv_tune.h"
#include "tune/db.h"
#include "tune/kernel_pack.h"
#include "tune/profiler.h"
#include "tune/rank.h"
#include "tune/select.h"

namespace sabre::codegen {
namespace fs = std::filesystem;

int arch_sm(const std::string& arch) {
  std::string s = arch;
  if (s.rfind("sm_", 0) != 0) throw std::invalid_argument("bad --arch '" + arch + "': expected sm_90a, sm_90 or sm_80");
  s = s.substr(3);
  if (!s.empty() && s.back() == 'a') s.pop_back();
  if (s.empty() || s.size() > 3 || s.find_first_not_of("0123456789") != std::string::npos)
    throw std::invalid_argument("bad --arch '" + arch + "': expected sm_90a, sm_90 or sm_80");
  return std::stoi(s);
}

std::string elementwise_library_source(const ElementwiseKernel& k) {
  return k.source + "\n// Host launcher the runtime looks up by name (docs/RUNTIME.md, op elementwise).\n#include <cstdlib>\n"
                    "// With the PDL attribute (the kernel begins with griddepcontrol.wait) unless SABRE_PDL=0.\n"
                    "extern \"C\" int " + k.name + "_launch(const SabreEwParams* p, unsigned grid, cudaStream_t s) {\n"
                    "  static const bool pdl = [] { const char* v = getenv(\"SABRE_PDL\"); return !(v && v[0] == '0'); }();\n"
                    "  cudaLaunchAttribute attr[1];\n"
                    "  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;\n"
                    "  attr[0].val.programmaticStreamSerializationAllowed = 1;\n"
                    "  cudaLaunchConfig_t cfg = {};\n"
                    "  cfg.gridDim = dim3(grid), cfg.blockDim = dim3(256), cfg.stream = s, cfg.attrs = attr, cfg.numAttrs = pdl ? 1 : 0;\n"
                    "  return (int)cudaLaunchKernelEx(&cfg, " + k.name + ", *p);\n}\n";
}

std::string analytic_conv_kernel(const ConvProblem& p, int target_sm, ConvKernels family) {
  return tune::rank_conv_candidates(p, target_sm, family).front().name;
}

ir::Graph canonicalize_model(ir::Graph g, bool fuse_attention, bool dump) {
  transform::PassOptions passes;
  passes.dump = dump;
  passes.merge_qkv = fuse_attention;
  passes.regroup = transform::RegroupOptions{cutlass_backend::kGroupedConvOutMultiple,
                                             cutlass_backend::kGroupedConvInMultiple};
  return transform::canonicalize(std::move(g), passes);
}

static void refuse_reference_only_values(const ir::Graph& g) {
  auto kind = [](const ir::Value* v) -> const char* {
    if (!v) return nullptr;
    if (v->type().sequence) return "a sequence";
    if (v->dtype() == ir::DType::str) return "a string tensor";
    return nullptr;
  };
  std::vector<std::string> lines;
  for (const ir::Value* v : g.inputs())
    if (const char* k = kind(v)) lines.push_back(v->name() + ": graph input is " + std::string(k));
  for (const ir::Node* n : g.topo_order()) {
    std::string why;
    for (const ir::Value* v : n->inputs())
      if (const char* k = kind(v); k && why.empty()) why = "reads '" + v->name() + "', " + k;
    for (const ir::Value* v : n->outputs())
      if (const char* k = kind(v); k && why.empty()) why = "makes '" + v->name() + "', " + k;
    if (!why.empty()) lines.push_back(n->name() + " (" + n->op() + "): " + why);
  }
  if (lines.empty()) return;
  std::string msg = "unsupported for GPU (" + std::to_string(lines.size()) + " item" + (lines.size() == 1 ? "" : "s") +
                    "): sequences and string tensors run only on the CPU reference (sabre run --reference):";
  for (const auto& l : lines) msg += "\n  " + l;
  throw UnsupportedError(msg);
}

void annotate_gpu_routes(partition::PartitionReport& rep, const ir::Graph& partitioned) {
  for (auto& lo : rep.left_out)
    for (const ir::Node* n : partitioned.nodes())
      if (n->name() == lo.node) {
        std::string why;
        std::string route = gpu_route(*n, &why);
        lo.runs_on = route.empty() ? "no GPU path (" + why + "): sabre compile refuses the model" : "runs on " + route;
        break;
      }
}

std::vector<tune::GemmProblem> tuned_gemm_problems(const ir::Graph& partitioned, LowerOptions lo, int target_sm) {
  tune::PickOptions popts;
  popts.target_sm = target_sm;
  popts.env.sm = target_sm;
  std::vector<tune::GemmProblem> problems;
  lo.weights = false;
  lo.dump_after = "none";  // collecting problems is not the lowering a dump is asked for
  lo.pick = [&](const tune::GemmProblem& p) {
    // Alignment-1 problems are the fallbacks of symbolic-N/K GEMMs (their aligned table is tuned)
    // or odd static extents; the analytic model picks them, which saves cold time.
    if (p.alignment > 1 && std::find(problems.begin(), problems.end(), p) == problems.end()) problems.push_back(p);
    return tune::pick_kernels(p, popts);
  };
  lower(partitioned, lo);
  return problems;
}

std::vector<ConvProblem> tuned_conv_problems(const ir::Graph& partitioned, LowerOptions lo, int target_sm) {
  tune::PickOptions popts;
  popts.target_sm = target_sm;
  popts.env.sm = target_sm;
  std::vector<ConvProblem> problems;
  lo.weights = false;
  lo.dump_after = "none";  // collecting problems is not the lowering a dump is asked for
  lo.pick = [&](const tune::GemmProblem& p) { return tune::pick_kernels(p, popts); };
  const ConvKernelPicker analytic = lo.pick_conv;
  if (!analytic) return problems;
  lo.pick_conv = [&](const ConvProblem& p) {
    if (std::find(problems.begin(), problems.end(), p) == problems.end()) problems.push_back(p);
    return analytic(p);
  };
  lower(partitioned, lo);
  return problems;
}

namespace {

// The measurements to pick from without timing: those of the DB's environments for the target SM
// taken with this build's CUTLASS and kernel templates (their kernels are the ones this build
// compiles), of the GPU `tuned_for` names where it is set. Several GPUs: none is chosen (nullopt,
// `why` lists them); one GPU under several CUDA versions: the one with the most workloads.
std::optional<tune::Environment> db_environment(const tune::TuningDb& db, int sm, const std::string& tuned_for,
                                                std::string& why) {
  std::vector<tune::Environment> match;
  std::string gpus;
  for (const auto& e : db.environments()) {
    if (e.sm != sm || e.cutlass != tune::cutlass_version() || e.template_version != tune::template_version()) continue;
    if (gpus.find("'" + e.gpu + "'") == std::string::npos) gpus += (gpus.empty() ? "'" : ", '") + e.gpu + "'";
    if (tuned_for.empty() || e.gpu == tuned_for) match.push_back(e);
  }
  const std::string build = "sm" + std::to_string(sm) + ", CUTLASS " + tune::cutlass_version() + ", templates " +
                            tune::template_version();
  if (match.empty()) {
    why = gpus.empty() ? "the DB " + db.path() + " has no measurements for " + build
                       : "the DB " + db.path() + " has measurements for " + build + " of " + gpus + " only";
    return std::nullopt;
  }
  for (const auto& e : match)
    if (e.gpu != match[0].gpu) {
      why = "the DB " + db.path() + " has measurements for " + build + " of several GPUs (" + gpus +
            "); name one with --tuned-for";
      return std::nullopt;
    }
  auto most = match.begin();
  for (auto it = match.begin(); it != match.end(); ++it)
    if (db.workloads(*it).size() > db.workloads(*most).size()) most = it;
  return *most;
}

}  // namespace

CompileSummary compile_model(const std::string& model, const std::string& out_dir, const CompileOptions& opts) {
  auto t0 = std::chrono::steady_clock::now();
  auto say = [&](const std::string& s) {
    if (opts.progress) opts.progress(s);
  };
  const int sm = arch_sm(opts.arch);
  if (opts.dtype != ir::DType::f16 && opts.dtype != ir::DType::bf16)
    throw std::invalid_argument("--dtype must be fp16 or bf16");
  // A misspelt pass to dump after is reported before any work, not after tuning.
  if (const char* e = std::getenv("SABRE_DUMP_AFTER"); opts.dump_after.empty() && e) parse_dump_after(e, "SABRE_DUMP_AFTER");
  parse_dump_after(opts.dump_after);

  CompileSummary sum;
  auto phase_start = std::chrono::steady_clock::now();
  auto phase_done = [&](const char* name) {
    const auto now = std::chrono::steady_clock::now();
    sum.phase_seconds.emplace_back(name, std::chrono::duration<double>(now - phase_start).count());
    phase_start = now;
  };
  say("import " + model);
  ir::Graph g = onnx_frontend::import_model(model);
  refuse_reference_only_values(g);
  phase_done("import");
  say("canonicalize (" + std::to_string(g.num_nodes()) + " nodes)");
  g = canonicalize_model(std::move(g), opts.fuse_attention);
  phase_done("canonicalize");
  partition::PartitionResult pr = partition::partition(std::move(g), cutlass_backend::pattern_table());
  phase_done("partition");
  say("partition: " + std::to_string(pr.regions.size()) + " CUTLASS regions, " +
      std::to_string(pr.refusals.size()) + " refusals");

  const int parallel = opts.jobs > 0 ? opts.jobs : int(std::max(1u, std::thread::hardware_concurrency()));
  LowerOptions lo;
  lo.dtype = opts.dtype;
  lo.ranges = opts.ranges;
  lo.fuse_attention = opts.fuse_attention;
  lo.stem = opts.stem;
  lo.pointwise_gemm = opts.pointwise_gemm;
  lo.dump_after = opts.dump_after;
  lo.dump_file = opts.dump_file;
  lo.pick_conv = [sm, family = opts.conv_kernels](const ConvProblem& p) { return analytic_conv_kernel(p, sm, family); };
  tune::PickOptions popts;  // analytic picks unless a tuning DB is consulted below
  popts.target_sm = sm;
  popts.env.sm = sm;
  popts.cublaslt = opts.cublaslt;
  const std::string db_path = opts.tuning_db.empty() ? tune::TuningDb::default_path() : opts.tuning_db;
  std::unique_ptr<tune::TuningDb> db;
  std::string db_note;  // set where the kernels come from a DB without timing; the counts follow after lowering
  // Picks from a DB's measurements without timing anything: those of the GPU --tuned-for names, or,
  // on a machine with no GPU of the target arch to time on, of the one GPU the DB measured with this
  // build (a DB tuned on the GPU host, the artifact built elsewhere).
  auto pick_from_db = [&](const std::string& why_not_timed) {
    if (opts.tuned_for.empty() && opts.tuning_db.empty() && !fs::exists(db_path)) return false;  // nothing to read; create none
    if (!opts.tuned_for.empty() && !fs::exists(db_path))
      throw std::runtime_error("--tuned-for '" + opts.tuned_for + "': there is no tuning DB at " + db_path + " (give --db)");
    db = std::make_unique<tune::TuningDb>(db_path);
    std::string why;
    std::optional<tune::Environment> denv = db_environment(*db, sm, opts.tuned_for, why);
    if (!denv) {
      db.reset();
      if (!opts.tuned_for.empty()) throw std::runtime_error("--tuned-for '" + opts.tuned_for + "': " + why);
      sum.notes.push_back("the tuning DB was not used: " + why);
      return false;
    }
    popts.db = db.get();
    popts.env = *denv;
    db_note = "not timed here (" + why_not_timed + "): the GEMM and conv kernels are the fastest the DB " + db_path +
              " measured on " + denv->gpu + " (CUDA " + denv->cuda + ")";
    say("tune: picking from " + std::to_string(db->workloads(*denv).size()) + " workloads measured on " + denv->gpu +
        " (DB " + db_path + "), timing nothing");
    return true;
  };
  if (!opts.tuned_for.empty() && opts.tune != CompileOptions::Tune::never) {
    if (opts.tune == CompileOptions::Tune::always)
      throw std::runtime_error("--tuned-for picks from the DB without timing; it cannot go with --tune");
    pick_from_db("--tuned-for");
  } else if (opts.tune != CompileOptions::Tune::never && opts.plan_only) {
    pick_from_db("--plan-only");
  } else if (opts.tune != CompileOptions::Tune::never) {
    std::string why;
    tune::Environment env;
    std::vector<int> gpus;  // resolved: the ids to time on
    bool gpu = tune::have_gpu_support() && tune::probe_gpus(opts.gpus, gpus, env, why);
    if (gpu && env.sm != sm) {
      why = "this machine's GPU is " + env.gpu + " (sm" + std::to_string(env.sm) + "), the artifact is for sm" + std::to_string(sm);
      gpu = false;
    }
    if (!gpu && opts.tune == CompileOptions::Tune::always) throw std::runtime_error("--tune needs a GPU to time on: " + why);
    if (!gpu && !pick_from_db(why)) {
      sum.notes.push_back("not tuned (" + why + "): the analytic model picked the GEMM and conv kernels; run `sabre compile` "
                          "on a GPU of the target arch to tune, or `sabre tune` there and recompile with its DB "
                          "(--db, and --tuned-for GPU where it holds several)");
    } else if (gpu) {
      // Every GEMM workload of the model at once, so all candidates compile in one parallel batch:
      // a first lowering collects the problems, the profiler times them, the second reads winners.
      db = std::make_unique<tune::TuningDb>(db_path);
      if (std::string note = db->other_builds_note(env); !note.empty()) {
        say("tune: " + note);
        sum.notes.push_back(note);
      }
      std::vector<tune::GemmProblem> problems = tuned_gemm_problems(pr.graph, lo, sm);
      std::vector<tune::TuneTask> tasks;
      for (const auto& p : problems)
        for (int64_t m : tune::m_buckets(p.m_min, p.m_max)) tasks.push_back({p, m});
      say("tune: " + std::to_string(problems.size()) + " GEMM workloads, " + std::to_string(tasks.size()) +
          " (workload, M) points on " + (gpus.size() > 1 ? std::to_string(gpus.size()) + " x " : "") + env.gpu +
          " (DB " + db->path() + ")");
      const auto tt = std::chrono::steady_clock::now();
      tune::ProfileOptions po;
      po.top_k = opts.top_k;
      po.target_sm = sm;
      po.jobs = parallel;
      po.quiet = !opts.progress;
      po.cache_dir = opts.cache_dir;
      po.gpus = gpus;
      po.compiled_lookup = tune::default_lookup_fn(po);  // compile while timing
      auto reports = tune::tune_tasks(tasks, *db, env, po,
                                      tune::batched_in_children(db->path(), env, po.timeout, tune::gpu_in_process_measure_fn()),
                                      tune::default_compile_fn(po));
      for (const auto& r : reports) sum.measured_candidates += size_t(r.measured);
      sum.tuned_points = tasks.size();
      // The conv workloads likewise: each (conv, batch bucket) problem the lowering asks for, tuned
      // in one compile batch; the final lowering reads the winners.
      std::vector<ConvProblem> convs = tuned_conv_problems(pr.graph, lo, sm);
      if (!convs.empty()) {
        say("tune: " + std::to_string(convs.size()) + " (conv, batch) points");
        auto creps = tune::tune_convs(convs, *db, env, po, opts.conv_kernels, tune::gpu_conv_in_process_measure_fn(),
                                      tune::default_conv_compile_fn(po));
        for (const auto& r : creps) sum.measured_candidates += size_t(r.measured);
        sum.tuned_points += convs.size();
      }
      sum.tune_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - tt).count();
      popts.db = db.get();
      popts.env = env;
    }
  }
  if (sum.tuned_points) phase_done("tune");
  phase_start = std::chrono::steady_clock::now();  // a DB read or the GPU probe is not a phase of its own
  if (popts.db)  // tuned here or picked from the DB: conv kernels too
    lo.pick_conv = [&popts, sm, family = opts.conv_kernels](const ConvProblem& p) {
      return tune::pick_conv_kernel(p, popts.db, popts.env, sm, family);
    };
  std::set<std::string> gemm_points, db_points;  // (workload, M) texts, for db_note
  lo.pick = [&](const tune::GemmProblem& p) {
    if (!db_note.empty())
      for (int64_t m : tune::m_buckets(p.m_min, p.m_max)) {
        const std::string w = tune::workload_key(p, m);
        gemm_points.insert(w);
        if (popts.db->winner(popts.env, w)) db_points.insert(w);
      }
    return tune::pick_kernels(p, popts);
  };
  Lowered low = lower(pr.graph, lo);
  phase_done("lower");
  if (!db_note.empty())
    sum.notes.push_back(db_note + ", at " + std::to_string(db_points.size()) + " of the " + std::to_string(gemm_points.size()) +
                        " GEMM (workload, M) points; the analytic model picked the rest" +
                        (low.conv_kernels.empty() ? "" : " (and every conv point the DB has no measurement for)"));

  for (const auto& s : low.plan.steps) ++sum.steps_by_op[s.op];
  sum.gemm_kernels = low.gemm_kernels.size();
  sum.conv_kernels = low.conv_kernels.size();
  sum.elementwise_kernels = low.ew_kernels.size();
  sum.weights_bytes = low.weights.size();
  sum.notes.insert(sum.notes.end(), low.notes.begin(), low.notes.end());
  say("lower: " + std::to_string(low.plan.steps.size()) + " steps, " + std::to_string(sum.gemm_kernels) +
      " GEMM kernels, " + std::to_string(sum.elementwise_kernels) + " elementwise kernels");

  std::vector<std::string> libraries;
  for (const auto& name : low.gemm_kernels)
    sum.kernel_list.push_back({name, cublaslt_backend::parse_lt_kernel_name(name) ? "cublaslt" : "gemm", "planned"});
  for (const auto& name : low.conv_kernels) sum.kernel_list.push_back({name, "conv", "planned"});
  for (const auto& k : low.ew_kernels) sum.kernel_list.push_back({k.name, "elementwise", "planned"});
  if (!opts.plan_only) {
    std::vector<tune::CompileJob> jobs;  // in kernel_list's order
    for (const auto& name : low.gemm_kernels) {
      if (auto lt = cublaslt_backend::parse_lt_kernel_name(name)) {
        jobs.push_back(tune::lt_compile_job(*lt));  // a cuBLASLt algorithm the tuner measured fastest
        continue;
      }
      auto spec = cutlass_backend::parse_kernel_name(name);
      if (!spec) throw std::logic_error("compile: picker returned '" + name + "', not a kernel name (invariant: catalog and lt_spec.h names)");
      jobs.push_back(tune::gemm_compile_job(*spec, sm));
    }
    for (const auto& name : low.conv_kernels) {
      try {
        jobs.push_back(tune::conv_compile_job(name, sm));  // the tuner's jobs: one cache for both
      } catch (const std::invalid_argument& e) {
        throw std::logic_error(std::string("compile: conv picker returned a name that is no conv kernel's (invariant: conv_spec.h, conv_sm90.h names): ") + e.what());
      }
    }
    std::string num = opts.arch.substr(3);
    for (const auto& k : low.ew_kernels)
      jobs.push_back({k.name, elementwise_library_source(k),
                      {"-std=c++17", "-O3", "-gencode", "arch=compute_" + num + ",code=sm_" + num}});
    say("build " + std::to_string(jobs.size()) + " kernels (" + std::to_string(parallel) + " at a time)");
    tune::CompileCache cache(opts.cache_dir.empty() ? tune::CompileCache::default_dir() : opts.cache_dir, opts.nvcc);
    const std::set<std::string> pack = tune::pack_entries(cache.dir());
    size_t hits = 0, pack_hits = 0;
    for (const auto& j : jobs) {
      const auto r = cache.lookup(j);
      hits += r.cached && r.ok;
      pack_hits += r.cached && r.ok && pack.count(j.name + "-" + cache.key(j));
    }
    say("kernel cache " + cache.dir() + ": " + std::to_string(hits) + " of " + std::to_string(jobs.size()) +
        " kernels there (" + std::to_string(pack_hits) + " from the kernel pack), " + std::to_string(jobs.size() - hits) +
        " to compile");
    auto results = cache.compile_all(jobs, parallel, !opts.progress);
    std::string failed;
    for (size_t i = 0; i < results.size(); ++i) {
      const auto& r = results[i];
      if (!r.ok) failed += "\n  " + r.name + " (log: " + r.log + ")";
      else libraries.push_back(r.library);
      (r.cached ? sum.kernels_cached : sum.kernels_compiled) += 1;
      const bool from_pack = r.cached && r.ok && pack.count(jobs[i].name + "-" + cache.key(jobs[i]));
      sum.kernels_from_pack += from_pack;
      sum.kernel_list[i].origin = !r.ok ? "failed" : from_pack ? "pack" : r.cached ? "cache" : "compiled";
    }
    if (!failed.empty()) throw std::runtime_error("kernels failed to compile:" + failed);
    phase_done("build");
  }

  runtime::ManifestInfo mi;
  mi.arch = opts.arch;
  mi.sm = sm;
  mi.tools = {{"sabre", "0.1"}, {"cutlass", "4.2"}};
  // The name and content hash, not the path: an artifact is shipped, and where it was built is
  // nobody's business; run --compare-reference finds the model by name and checks the hash.
  mi.source_model = fs::path(model).filename().string();
  mi.source_model_checksum = runtime::file_checksum(model);
  say("write " + out_dir);
  runtime::write_artifact(out_dir, low.plan, low.weights, libraries, mi);
  for (const auto& e : fs::recursive_directory_iterator(out_dir))
    if (e.is_regular_file() && e.path().filename() != "weights.bin") sum.artifact_bytes_without_weights += e.file_size();
  phase_done("write");
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

}  // namespace sabre::codegen
