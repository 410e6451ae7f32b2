#include "tune/select.h"

#include <set>
#include <sstream>
#include <stdexcept>

#include "backends/cublaslt/lt_spec.h"
#include "backends/cutlass/kernel_spec.h"
#include "ir/graph.h"
#include "tune/profiler.h"
#include "tune/rank.h"

namespace sabre::tune {

std::vector<int64_t> m_buckets(int64_t m_min, int64_t m_max) {
  if (m_min < 1 || m_max < m_min)
    throw std::invalid_argument("M range [" + std::to_string(m_min) + ", " + std::to_string(m_max) +
                                "] is empty or not positive");
  std::vector<int64_t> out;
  int64_t r = 1;
  while (r < m_min) r *= 2;
  for (; r < m_max; r *= 2) out.push_back(r);
  out.push_back(m_max);
  return out;
}

std::string workload_key(const GemmProblem& p, int64_t m) {
  return "gemm " + p.dtype + " " + p.layout + " " + p.epilogue + " m=" + std::to_string(m) +
         " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k) + " b=" + std::to_string(p.batch) +
         " a=" + std::to_string(p.alignment);
}

std::string conv_workload_key(const ConvProblem& p) {
  auto i = [](int64_t v) { return std::to_string(v); };
  return "conv " + p.dtype + " " + p.epilogue + " n=" + i(p.n) + " h=" + i(p.h) + " w=" + i(p.w) + " c=" + i(p.c) +
         " k=" + i(p.k) + " r=" + i(p.r) + " s=" + i(p.s) + " p=" + i(p.p) + " q=" + i(p.q) + " pad=" + i(p.pad_h) +
         "," + i(p.pad_w) + " str=" + i(p.stride_h) + "," + i(p.stride_w) + " dil=" + i(p.dil_h) + "," + i(p.dil_w) +
         " g=" + i(p.groups) + " a=" + std::to_string(p.alignment);
}

std::optional<GemmProblem> parse_workload_key(const std::string& key) {
  std::istringstream in(key);
  std::string word;
  GemmProblem p;
  if (!(in >> word) || word != "gemm" || !(in >> p.dtype >> p.layout >> p.epilogue)) return std::nullopt;
  std::map<std::string, int64_t> kv;
  while (in >> word) {
    const size_t eq = word.find('=');
    if (eq == std::string::npos) return std::nullopt;
    try {
      size_t used = 0;
      const std::string v = word.substr(eq + 1);
      kv[word.substr(0, eq)] = std::stoll(v, &used);
      if (used != v.size()) return std::nullopt;
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  for (const char* k : {"m", "n", "k", "b", "a"})
    if (!kv.count(k) || kv[k] < 1) return std::nullopt;
  p.m_min = p.m_max = kv["m"];
  p.n = kv["n"];
  p.k = kv["k"];
  p.batch = kv["b"];
  if (kv["a"] > 16) return std::nullopt;
  p.alignment = static_cast<int>(kv["a"]);
  return p;
}

std::optional<std::string> gemm_kernel_mismatch(const std::string& kernel, const GemmProblem& p, int target_sm) {
  namespace cb = cutlass_backend;
  cb::GemmOperands ops;
  cb::EpilogueSpec epi;
  int alignment = 1;
  if (auto s = cb::parse_kernel_name(kernel)) {
    if (auto why = cb::unsupported_reason(*s, target_sm)) return "it cannot run on sm" + std::to_string(target_sm) + ": " + *why;
    ops = s->ops;
    epi = s->epi;
    alignment = s->config.alignment;
  } else if (auto l = cublaslt_backend::parse_lt_kernel_name(kernel)) {
    if (auto why = cublaslt_backend::unsupported_reason(l->spec)) return *why;
    ops = l->spec.ops;
    epi = l->spec.epi;
  } else {
    return "'" + kernel + "' is not a GEMM kernel name";
  }
  std::string why;
  auto field = [&](const char* what, std::string_view have, const std::string& want) {
    if (have != want) why += std::string(why.empty() ? "" : ", ") + what + " " + std::string(have) + " where the workload has " + want;
  };
  field("dtype", cb::elem_name(ops.ab), p.dtype);
  field("output dtype", cb::elem_name(ops.d), p.dtype);
  field("layout", cb::layout_name(ops.layout), p.layout);
  field("epilogue", cb::epilogue_name(epi), p.epilogue);
  if (p.alignment % alignment != 0)
    why += std::string(why.empty() ? "" : ", ") + "alignment " + std::to_string(alignment) + " where the workload allows " +
           std::to_string(p.alignment);
  if (why.empty()) return std::nullopt;
  return "kernel " + kernel + " computes " + why;
}

std::optional<std::string> row_mismatch(const Measurement& m, int sm) {
  if (m.workload.rfind("gemm ", 0) == 0) {
    auto p = parse_workload_key(m.workload);
    if (!p) return "workload '" + m.workload + "' is not a GEMM workload text (gemm DTYPE LAYOUT EPILOGUE m= n= k= b= a=)";
    // A cuBLASLt candidate ("cublaslt_<spec>#algoN") is checked through its spec; what it deploys,
    // where the row says, through the deployable name.
    std::string kernel = m.kernel;
    if (auto c = parse_lt_candidate(m.kernel)) {
      auto spec = cublaslt_backend::parse_lt_name(c->first);
      if (!spec) return "kernel '" + m.kernel + "' is not a cuBLASLt candidate name";
      cublaslt_backend::LtKernelSpec ks{*spec, {}};
      kernel = cublaslt_backend::lt_kernel_name(ks);
    }
    if (auto why = gemm_kernel_mismatch(kernel, *p, sm)) return *why;
    if (auto d = deployable_kernel(m); d && *d != m.kernel)
      if (auto why = gemm_kernel_mismatch(*d, *p, sm)) return *why;
    return std::nullopt;
  }
  return std::nullopt;  // conv rows: the conv picker takes only kernels its ranking offers for the workload
}

namespace {

// The fastest correct kernel the DB has for a workload that can be deployed ("" when none): a
// CUTLASS kernel, or with `cublaslt` a cuBLASLt algorithm fixed as a kernel (profiler.h,
// deployable_kernel). cuBLASLt rows measured before that was possible name no kernel and are passed
// over, as is a row whose kernel computes something other than the workload (an edited or imported
// DB): the DB says how fast a kernel was, never what the plan needs.
std::string db_pick(const TuningDb& db, const Environment& env, const GemmProblem& p, int64_t m_rep, bool cublaslt,
                    int target_sm) {
  for (const Measurement& m : db.measurements(env, workload_key(p, m_rep))) {  // fastest first
    if (m.status != Status::ok) continue;
    if (!cublaslt && !cutlass_backend::parse_kernel_name(m.kernel)) continue;
    if (auto k = deployable_kernel(m); k && !gemm_kernel_mismatch(*k, p, target_sm)) return *k;
  }
  return "";
}

}  // namespace

std::vector<DispatchEntry> pick_kernels(const GemmProblem& p, const PickOptions& opts) {
  const std::vector<int64_t> buckets = m_buckets(p.m_min, p.m_max);
  if (opts.tune) {
    if (!opts.db) throw std::invalid_argument("pick_kernels: tuning needs a database to write to (PickOptions::db)");
    if (!have_gpu_support())
      throw std::runtime_error("pick_kernels: this build of sabre cannot time kernels (no CUDA toolkit at configure "
                               "time); pick without tuning (PickOptions::tune = false)");
    ProfileOptions po;
    po.top_k = opts.top_k;
    po.target_sm = opts.target_sm;
    po.quiet = true;
    std::vector<TuneTask> tasks;
    for (int64_t m : buckets) tasks.push_back({p, m});
    if (opts.db->path() == ":memory:")  // children cannot see an in-memory DB: one child per candidate
      tune_tasks(tasks, *opts.db, opts.env, po, gpu_measure_fn(po), default_compile_fn(po));
    else
      tune_tasks(tasks, *opts.db, opts.env, po,
                 batched_in_children(opts.db->path(), opts.env, po.timeout, gpu_in_process_measure_fn()),
                 default_compile_fn(po));
  }
  std::vector<DispatchEntry> out;
  for (int64_t m : buckets) {
    std::string kernel = opts.db ? db_pick(*opts.db, opts.env, p, m, opts.cublaslt, opts.target_sm) : "";
    if (kernel.empty()) {
      auto ranked = rank_candidates(p, m, opts.target_sm, 1);
      if (ranked.empty())
        throw std::invalid_argument("no catalog kernel can run " + workload_key(p, m) + " on sm" +
                                    std::to_string(opts.target_sm));
      kernel = ranked[0].name;
    }
    if (!out.empty() && out.back().kernel == kernel)
      out.back().max_m = m;  // same pick as the smaller bucket: one entry covers both
    else
      out.push_back({m, kernel});
  }
  return out;
}

namespace {

// A Composite dim attribute: an int, or a Dim's text ("batch*seq", "128").
std::optional<ir::Dim> dim_attr(const ir::Node& n, const std::string& key) {
  auto it = n.attrs().find(key);
  if (it == n.attrs().end()) return std::nullopt;
  if (auto* i = std::get_if<int64_t>(&it->second)) return ir::Dim(*i);
  if (auto* s = std::get_if<std::string>(&it->second)) return ir::Dim::parse(*s);
  return std::nullopt;
}

}  // namespace

std::vector<GemmProblem> gemm_problems(const ir::Graph& g, int64_t default_max) {
  return gemm_problems(g, default_max, {});
}

std::vector<GemmProblem> gemm_problems(const ir::Graph& g, int64_t default_max,
                                       const std::map<std::string, std::pair<int64_t, int64_t>>& ranges) {
  std::map<std::string, int64_t> lo, hi;
  for (const auto& [name, r] : ranges) {
    lo[name] = r.first;
    hi[name] = r.second;
  }
  std::vector<GemmProblem> out;
  for (const ir::Node* n : g.topo_order()) {
    if (n->domain() != "sabre" || n->op() != "Composite") continue;
    const std::string kind = n->attr_string("kind", "");
    if (kind != "gemm" && kind != "batched_gemm") continue;
    auto m = dim_attr(*n, "m"), nn = dim_attr(*n, "n"), k = dim_attr(*n, "k");
    auto batch = n->has_attr("batch") ? dim_attr(*n, "batch") : std::optional<ir::Dim>(ir::Dim(1));
    if (!m || !nn || !k || !batch) continue;
    if (!nn->is_static() || !k->is_static() || !batch->is_static()) continue;  // runtime-shaped: not tuned statically
    GemmProblem p;
    p.dtype = n->attr_string("dtype", "");
    p.layout = n->attr_string("layout", "");
    p.epilogue = n->attr_string("epilogue", "");
    p.n = nn->value();
    p.k = k->value();
    p.batch = batch->value();
    p.alignment = int(n->attr_int("alignment", 1));
    if (m->is_static()) {
      p.m_min = p.m_max = m->value();
    } else if (auto a = m->evaluate(lo), b = m->evaluate(hi); a && b && *a >= 1 && *b >= *a) {
      p.m_min = *a;  // M is a polynomial with positive coefficients in practice (batch*seq): monotone
      p.m_max = *b;
    } else {
      p.m_min = 1;
      p.m_max = default_max;
    }
    bool seen = false;
    for (const GemmProblem& q : out) seen = seen || q == p;
    if (!seen) out.push_back(p);
  }
  return out;
}

}  // namespace sabre::tune
