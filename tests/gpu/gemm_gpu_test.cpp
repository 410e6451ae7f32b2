// GPU numerical test of generated GEMM kernels and the cuBLASLt backend against a CPU reference.
// Compiles the kernels (parallel nvcc), runs each in a child process with a watchdog so a hang or
// crash is recorded rather than fatal, on random inputs with outputs poisoned (NaN) first, and
// prints a table (kernel, shape, status, relative L2 error) plus a summary; exits 77 without a GPU.
//
//   sabre_gemm_gpu_test [--out FILE] [-j N] [--timeout S] [--work DIR] [--quick] [NAME...]
// Default names: every catalog config with the bias epilogue in f16 and bf16 (tn), every epilogue
// kind on one config per family in f16 and bf16, each kind of epilogue on a split-K config, the
// tiles with N = 96 or 192 (also in --quick), the tt layout and TF32 on a few, cuBLASLt, and deployed
// cuBLASLt kernels ("deploy:cublaslt_tn_f16_f16_f32_bias_res": one algorithm fixed as a kernel library).
// This file is the parent side; the child side is gemm_gpu_child.cpp, what both share gemm_gpu_test.h.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cublaslt/cublaslt_gemm.h"
#include "backends/cutlass/catalog.h"
#include "backends/cutlass/nvcc.h"
#include "gemm_gpu_test.h"
#include "tune/compile_cache.h"
#include "tune/profiler.h"

using namespace sabre::gemm_gpu_test;
namespace fs = std::filesystem;

namespace {

// ---- parent side ----

struct Row {
  std::string kernel, shape, status, err, message;
};

// Runs `c` in a child with a watchdog; returns one row per shape (HANG/CRASH rows for what never reported).
std::vector<Row> run_candidate(const Candidate& c, const std::string& lib, const std::vector<const Problem*>& problems,
                               int timeout_s) {
  int fds[2];
  std::vector<Row> rows;
  if (pipe(fds) != 0) return {{c.name, "*", "ERROR", "0", "pipe failed"}};
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    child_run(c, lib, problems, fds[1]);
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string data;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  bool hung = false;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      hung = true;
      kill(pid, SIGKILL);
      break;
    }
    pollfd pf{fds[0], POLLIN, 0};
    int pr = poll(&pf, 1, int(std::min<long long>(left, 1000)));
    if (pr > 0) {
      char buf[4096];
      ssize_t n = read(fds[0], buf, sizeof buf);
      if (n <= 0) break;  // child closed the pipe: done or dead
      data.append(buf, size_t(n));
    }
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  std::set<std::string> reported;
  std::istringstream in(data);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    Row r;
    r.kernel = c.name;
    ls >> r.shape >> r.status >> r.err;
    std::getline(ls, r.message);
    if (!r.message.empty() && r.message[0] == ' ') r.message.erase(0, 1);
    reported.insert(r.shape);
    rows.push_back(r);
  }
  const bool crashed = !hung && !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  bool first = true;  // the first shape without a result is the one that hung or crashed
  for (const Problem* p : problems) {
    if (reported.count(p->shape.label) || reported.count("*")) continue;
    if (first && hung) rows.push_back({c.name, p->shape.label, "HANG", "0", "no result within " + std::to_string(timeout_s) + " s; killed"});
    else if (first && crashed) rows.push_back({c.name, p->shape.label, "CRASH", "0", "child died, wait status " + std::to_string(status)});
    else rows.push_back({c.name, p->shape.label, "NOT_RUN", "0", "an earlier shape hung or crashed"});
    first = false;
  }
  return rows;
}

// Asks a child whether a GPU is present (CUDA must not be initialized in the parent before fork).
int probe_gpu(std::string& desc) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    int n = 0;
    std::string msg;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
      msg = "none";
    } else {
      cudaDeviceProp prop{};
      if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) msg = "none";
      else msg = std::to_string(prop.major * 10 + prop.minor) + " " + prop.name;
    }
    if (write(fds[1], msg.data(), msg.size()) < 0) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  char buf[512];
  ssize_t n = read(fds[0], buf, sizeof buf - 1);
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  if (n <= 0) return -1;
  buf[n] = 0;
  desc = buf;
  if (desc == "none") return 0;
  return std::atoi(buf);
}

std::vector<Candidate> default_candidates(int sm, bool quick) {
  std::vector<Candidate> out;
  std::set<std::string> seen;
  auto add = [&](const cb::KernelSpec& s) {
    Candidate c;
    c.spec = s;
    c.name = cb::kernel_name(s);
    c.ab = s.ops.ab, c.layout = s.ops.layout, c.epi = s.epi, c.alignment = s.config.alignment;
    if (seen.insert(c.name).second) out.push_back(c);
  };
  const cb::EpilogueSpec bias{cb::Act::none, true, cb::Residual::none};
  std::vector<cb::Family> fams = {cb::Family::sm80};
  if (sm == 90) fams.insert(fams.begin(), cb::Family::sm90);
  for (cb::Elem e : {cb::Elem::f16, cb::Elem::bf16}) {
    cb::GemmOperands ops{e, e, cb::Layout::tn};
    for (cb::Family f : fams) {
      auto cat = cb::catalog(f, ops, sm);
      if (!quick)
        for (const auto& c : cat) add({c, ops, bias});
      // Every epilogue kind on one config per family (and on the alignment-1 fallback for sm80).
      for (const auto& epi : cb::all_epilogues()) {
        add({cat.front(), ops, epi});
        if (f == cb::Family::sm80 && !quick) add({cat.back(), ops, epi});
      }
      // The tt layout (activation × activation) and TF32.
      add({cb::catalog(f, {e, e, cb::Layout::tt}, sm).front(), {e, e, cb::Layout::tt}, {cb::Act::gelu_erf, true, cb::Residual::none}});
    }
  }
  // Tiles with N = 96 or 192 (mid-size M) in the quick run too: their epilogue subtiles and shared
  // memory layouts are not the power-of-two tiles'. The 128x192 pingpong, whose warpgroup holds 192
  // accumulators a thread, also with the residual and the EVT tree; N = 96 with B N-major (tt),
  // whose shared memory swizzle is 64 bytes wide, not 128. m_ragged (N = 200) leaves partial tiles.
  if (sm == 90)
    for (cb::Elem e : {cb::Elem::f16, cb::Elem::bf16}) {
      if (quick && e != cb::Elem::f16) continue;
      for (cb::Layout l : {cb::Layout::tn, cb::Layout::tt}) {
        cb::GemmOperands ops{e, e, l};
        for (const auto& c : cb::catalog(cb::Family::sm90, ops, sm)) {
          if ((c.tile.n & (c.tile.n - 1)) == 0) continue;
          if (l == cb::Layout::tt) {
            if (c.tile.n == 96) add({c, ops, {cb::Act::gelu_erf, true, cb::Residual::none}});
            continue;
          }
          add({c, ops, bias});
          if (c.schedule == cb::Schedule::pingpong && c.tile.m * c.tile.n == 128 * 192)
            for (const cb::EpilogueSpec& epi : {cb::EpilogueSpec{cb::Act::none, true, cb::Residual::before_act},
                                                cb::EpilogueSpec{cb::Act::gelu_erf, true, cb::Residual::after_act}})
              add({c, ops, epi});
        }
      }
    }
  // Split-K (sm90): the partial accumulators are reduced before the epilogue, which must then apply
  // once per tile. Each kind of epilogue on one split-K config: fusion op without and with bias and
  // activation, the residual as the source tensor, the EVT tree (residual after the activation).
  if (sm == 90)
    for (cb::Elem e : {cb::Elem::f16, cb::Elem::bf16}) {
      if (quick && e != cb::Elem::f16) continue;
      cb::GemmOperands ops{e, e, cb::Layout::tn};
      for (const auto& c : cb::catalog(cb::Family::sm90, ops, sm)) {
        if (c.schedule != cb::Schedule::splitk || c.splits != 4) continue;
        for (const cb::EpilogueSpec& epi :
             {cb::EpilogueSpec{}, cb::EpilogueSpec{cb::Act::gelu_erf, true, cb::Residual::none},
              cb::EpilogueSpec{cb::Act::none, true, cb::Residual::before_act},
              cb::EpilogueSpec{cb::Act::gelu_erf, true, cb::Residual::after_act}})
          add({c, ops, epi});
        break;
      }
      // The unordered split: the middle splits add atomically, so three or more splits exercise it.
      for (const char* n : {"sm90_ws_splitku4_tn_%s_%s_f32_128x32x64_c1x1_a8_bias_res",
                            "sm90_ws_splitku8_tn_%s_%s_f32_128x64x64_c1x1_a8_bias_gelu"}) {
        char buf[128];
        std::snprintf(buf, sizeof buf, n, std::string(cb::elem_name(e)).c_str(), std::string(cb::elem_name(e)).c_str());
        auto spec = cb::parse_kernel_name(buf);
        if (!spec) throw std::logic_error(std::string("bad kernel name in the test list: ") + buf);
        add(*spec);
      }
    }
  for (cb::Family f : fams) {
    cb::GemmOperands ops{cb::Elem::f32, cb::Elem::f32, cb::Layout::tn};
    auto cat = cb::catalog(f, ops, sm);
    add({cat.front(), ops, {cb::Act::relu, true, cb::Residual::none}});
    if (f == cb::Family::sm80) add({cat.back(), ops, {cb::Act::none, true, cb::Residual::none}});
  }
  for (cb::Elem e : {cb::Elem::f16, cb::Elem::bf16, cb::Elem::f32})
    for (cb::Layout l : {cb::Layout::tn, cb::Layout::tt})
      for (const cb::EpilogueSpec& epi :
           {cb::EpilogueSpec{}, cb::EpilogueSpec{cb::Act::none, true, cb::Residual::none},
            cb::EpilogueSpec{cb::Act::relu, true, cb::Residual::none}, cb::EpilogueSpec{cb::Act::gelu_tanh, true, cb::Residual::none},
            cb::EpilogueSpec{cb::Act::gelu_tanh, false, cb::Residual::none},
            cb::EpilogueSpec{cb::Act::none, true, cb::Residual::before_act}}) {
        if (quick && (e == cb::Elem::f32 || l == cb::Layout::tt)) continue;
        Candidate c;
        c.cublaslt = true;
        c.ab = e, c.layout = l, c.epi = epi, c.alignment = 1;
        c.name = lt::lt_name({{e, e, l}, epi});
        out.push_back(c);
      }
  // Deployed cuBLASLt kernels: the epilogues an artifact takes them for (BERT's projections, the
  // residual GEMMs of ResNet's 1x1 convs), and a tt and a bf16 one.
  for (const cb::EpilogueSpec& epi : {cb::EpilogueSpec{cb::Act::none, true, cb::Residual::none},
                                      cb::EpilogueSpec{cb::Act::none, true, cb::Residual::before_act},
                                      cb::EpilogueSpec{cb::Act::relu, true, cb::Residual::before_act},
                                      cb::EpilogueSpec{cb::Act::gelu_tanh, true, cb::Residual::none}})
    for (cb::Elem e : {cb::Elem::f16, cb::Elem::bf16})
      for (cb::Layout l : {cb::Layout::tn, cb::Layout::tt}) {
        if ((e == cb::Elem::bf16 || l == cb::Layout::tt) && epi.residual == cb::Residual::none && epi.act == cb::Act::none)
          continue;  // keep the list short: bf16 and tt on the other epilogues
        Candidate c;
        c.lt_deploy = true;
        c.ab = e, c.layout = l, c.epi = epi, c.alignment = 1;
        c.name = "deploy:" + lt::lt_name({{e, e, l}, epi});
        out.push_back(c);
      }
  return out;
}

void usage() {
  std::fprintf(stderr,
               "usage: sabre_gemm_gpu_test [--out FILE] [-j N] [--timeout S] [--work DIR] [--quick] [--compile-only] [--list] [NAME...]\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_path, work = (fs::temp_directory_path() / "sabre_gemm_gpu_test").string();
  int jobs = 16, timeout_s = 120;
  bool quick = false, compile_only = false, list_only = false;
  std::vector<std::string> names;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        usage();
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--out") out_path = next();
    else if (a == "-j") jobs = std::atoi(next().c_str());
    else if (a.rfind("-j", 0) == 0 && a.size() > 2) jobs = std::atoi(a.c_str() + 2);
    else if (a == "--timeout") timeout_s = std::atoi(next().c_str());
    else if (a == "--work") work = next();
    else if (a == "--quick") quick = true;
    else if (a == "--compile-only") compile_only = true;
    else if (a == "--list") list_only = true;
    else if (a == "-h" || a == "--help") return usage(), 0;
    else if (a[0] == '-') return usage(), 2;
    else names.push_back(a);
  }
  if (list_only) {  // no GPU needed: what a default run would test on an sm_90 GPU
    for (const auto& c : default_candidates(90, quick)) std::printf("%s\n", c.name.c_str());
    return 0;
  }
  std::string gpu;
  int sm = probe_gpu(gpu);
  if (sm <= 0) {
    std::printf("no CUDA GPU found: skipped\n");
    return kSkip;
  }
  const int target_sm = sm >= 90 ? 90 : 80;
  if (sm < 80) {
    std::printf("GPU %s is older than sm_80: skipped\n", gpu.c_str());
    return kSkip;
  }
  std::vector<Candidate> cands;
  if (names.empty()) {
    cands = default_candidates(target_sm, quick);
  } else {
    for (const auto& n : names) {
      Candidate c;
      c.name = n;
      if (auto s = cb::parse_kernel_name(n)) {
        c.spec = *s, c.ab = s->ops.ab, c.layout = s->ops.layout, c.epi = s->epi, c.alignment = s->config.alignment;
      } else if (auto d = n.rfind("deploy:", 0) == 0 ? lt::parse_lt_name(n.substr(7)) : std::nullopt) {
        c.lt_deploy = true, c.ab = d->ops.ab, c.layout = d->ops.layout, c.epi = d->epi;
      } else if (auto l = lt::parse_lt_name(n)) {
        c.cublaslt = true, c.ab = l->ops.ab, c.layout = l->ops.layout, c.epi = l->epi;
      } else {
        std::fprintf(stderr, "not a kernel name: %s (see sabre kernels list --names)\n", n.c_str());
        return 2;
      }
      cands.push_back(c);
    }
  }
  // Compile every CUTLASS candidate as sabre compile and sabre tune do: through the compile cache
  // (here in the work dir), whose key is the emitted source, the flags and nvcc's version, so a
  // kernel whose source or flags changed is built again and never run from a stale .so.
  std::vector<sabre::tune::CompileJob> to_build;
  std::vector<const Candidate*> built_for;
  for (const auto& c : cands)
    if (!c.cublaslt && !c.lt_deploy) {
      to_build.push_back(sabre::tune::gemm_compile_job(c.spec, target_sm));
      built_for.push_back(&c);
    }
  std::map<std::string, std::string> compile_fail, library;
  std::printf("GPU: %s (sm_%d); %zu candidates, %zu CUTLASS kernels to build or find in %s (-j%d)\n", gpu.c_str(), sm,
              cands.size(), to_build.size(), work.c_str(), jobs);
  std::fflush(stdout);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<sabre::tune::CompileResult> built;
  try {
    built = sabre::tune::CompileCache(work, cb::find_nvcc()).compile_all(to_build, jobs, true);
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  size_t cached = 0;
  for (size_t i = 0; i < built.size(); ++i) {
    const sabre::tune::CompileResult& r = built[i];
    const std::string& name = built_for[i]->name;
    cached += r.cached;
    if (r.ok) {
      library[name] = r.library;
      continue;
    }
    std::ifstream log(r.log);
    std::string text((std::istreambuf_iterator<char>(log)), {});
    compile_fail[name] = text.empty() ? "no log at " + r.log : text.substr(0, 400);
  }
  std::printf("built %zu, %zu from the cache, in %.0f s; %zu failed\n", built.size() - cached, cached,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), compile_fail.size());
  std::fflush(stdout);

  if (compile_only) return compile_fail.empty() ? 0 : 1;

  std::map<std::tuple<int, int, std::string>, std::unique_ptr<Problem>> problems;
  std::vector<Row> rows;
  for (const auto& c : cands) {
    if (compile_fail.count(c.name)) {
      std::string msg = compile_fail[c.name];
      for (auto& ch : msg) if (ch == '\n') ch = ' ';
      rows.push_back({c.name, "*", "COMPILE_FAIL", "0", msg});
      continue;
    }
    if (c.cublaslt || c.lt_deploy) {
      if (auto why = lt::unsupported_reason({{c.ab, c.ab, c.layout}, c.epi})) {
        rows.push_back({c.name, "*", "UNSUPPORTED", "0", *why});
        continue;
      }
    }
    std::vector<const Problem*> ps;
    if (quick) {
      for (const auto& s : kQuickShapes) {
        auto& slot = problems[{int(c.ab), int(c.layout), s.label}];
        if (!slot) slot = std::make_unique<Problem>(make_problem(s, c.ab, c.layout));
        ps.push_back(slot.get());
      }
    } else {
      for (const auto& s : kShapes) {
        auto& slot = problems[{int(c.ab), int(c.layout), s.label}];
        if (!slot) slot = std::make_unique<Problem>(make_problem(s, c.ab, c.layout));
        ps.push_back(slot.get());
      }
    }
    // cuBLASLt candidates have no library; a deployed one builds its own next to this path.
    const std::string lib = library.count(c.name) ? library[c.name] : (fs::path(work) / (c.name + ".so")).string();
    auto rs = run_candidate(c, lib, ps, timeout_s);
    for (const auto& r : rs) {
      std::printf("%-78s %-9s %-12s %-10s %s\n", r.kernel.c_str(), r.shape.c_str(), r.status.c_str(), r.err.c_str(),
                  r.message == "-" ? "" : r.message.c_str());
      std::fflush(stdout);
    }
    rows.insert(rows.end(), rs.begin(), rs.end());
  }

  // Table and summary.
  std::ostringstream t;
  char date[64];
  std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S %Z", std::localtime(&now));
  t << "# sabre GEMM kernel numerical test\n\nGPU: " << gpu << " (sm_" << sm << ")  \nDate: " << date
    << "  \nShapes (m x n x k, batch): ";
  for (const auto& s : quick ? std::vector<Shape>(std::begin(kQuickShapes), std::end(kQuickShapes))
                             : std::vector<Shape>(std::begin(kShapes), std::end(kShapes)))
    t << s.label << "=" << s.m << "x" << s.n << "x" << s.k << "x" << s.batch << " ";
  t << " \nalpha=" << kAlpha << " beta=" << kBeta
    << "; each element within atol + rtol*|ref| and the relative L2 error within its bound, both from the dtype and k"
       " (tests/gpu/numerics.h)\n\n";
  t << "| kernel | shape | status | rel L2 error | note |\n|---|---|---|---|---|\n";
  std::map<std::string, int> counts;
  std::map<std::string, std::string> failed;
  for (const auto& r : rows) {
    t << "| " << r.kernel << " | " << r.shape << " | " << r.status << " | " << r.err << " | "
      << (r.message == "-" ? "" : r.message) << " |\n";
    counts[r.status]++;
    if (r.status != "ok" && r.status != "REFUSED_OK" && r.status != "UNSUPPORTED" && r.status != "DEPLOYED" &&
        !failed.count(r.kernel))
      failed[r.kernel] = r.status + " at " + r.shape + ": " + r.message;
  }
  t << "\n## Summary\n\n";
  for (const auto& [k, v] : counts) t << "- " << k << ": " << v << "\n";
  t << "\n## Kernels that failed, hung or crashed (" << failed.size() << ")\n\n";
  for (const auto& [k, v] : failed) t << "- " << k << ": " << v << "\n";
  std::printf("\n%s", t.str().substr(t.str().find("## Summary")).c_str());
  if (!out_path.empty()) {
    std::ofstream f(out_path);
    f << t.str();
    std::printf("table written to %s\n", out_path.c_str());
  }
  return failed.empty() ? 0 : 1;
}
