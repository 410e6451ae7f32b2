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
#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "backends/cublaslt/cublaslt_gemm.h"
#include "backends/cutlass/catalog.h"
#include "backends/cutlass/nvcc.h"
#include "ir/dtype.h"
#include "numerics.h"
#include "sabre/kernel_abi.h"
#include "tune/compile_cache.h"
#include "tune/profiler.h"

namespace cb = sabre::cutlass_backend;
namespace lt = sabre::cublaslt_backend;
namespace fs = std::filesystem;
namespace sg = sabre::gpu_test;

namespace {

// Frees the case's device buffers; a failure (a sticky error left by the kernel) ends this child
// process, which its parent reports as the candidate's failure.
void free_device(std::initializer_list<void*> ptrs) {
  for (void* p : ptrs)
    if (cudaError_t e = cudaFree(p); e != cudaSuccess) {
      std::fprintf(stderr, "cudaFree failed: %s\n", cudaGetErrorString(e));
      std::_Exit(3);
    }
}

constexpr int kSkip = 77;

struct Shape {
  const char* label;
  int64_t m, n, k, batch;
};
// M=1; M not a multiple of any tile; N=91, K=3 (only alignment-1 kernels may take it, the others
// must refuse); large M; strided batched; small M with long K (split-K's case: 48 k-iterations over
// 12 tiles of 128x64, split 2, 4 or 8 ways).
const Shape kShapes[] = {
    {"m1", 1, 256, 128, 1},           {"m_ragged", 333, 200, 264, 1},    {"n91_k3", 77, 91, 3, 1},
    {"large", 4096, 768, 3072, 1},    {"batched", 128, 128, 64, 12},     {"m16_k3072", 16, 768, 3072, 1},
};
const Shape kQuickShapes[] = {{"m1", 1, 256, 128, 1}, {"m_ragged", 333, 200, 264, 1}, {"n91_k3", 77, 91, 3, 1},
                              {"batched", 128, 128, 64, 3}, {"m16_k3072", 16, 768, 3072, 1}};

// Operands and output of one dtype; f32 operands are multiplied as TF32 (numerics.h).
sg::Num out_num(cb::Elem e) { return e == cb::Elem::f16 ? sg::Num::f16 : e == cb::Elem::bf16 ? sg::Num::bf16 : sg::Num::f32; }
sg::Num mul_num(cb::Elem e) { return e == cb::Elem::f32 ? sg::Num::tf32 : out_num(e); }

// Rows the reference checks in the large shape (all of them elsewhere); every row is checked for poison.
constexpr int64_t kLargeSampledRows = 96;

struct Candidate {
  std::string name;
  cb::Elem ab = cb::Elem::f16;
  cb::Layout layout = cb::Layout::tn;
  cb::EpilogueSpec epi;
  int alignment = 1;
  bool cublaslt = false;
  // A deployed cuBLASLt kernel (lt_spec.h): the child takes the heuristic's first algorithm at the
  // first shape, emits and compiles its kernel library, and runs every shape through that library's
  // ABI, as an artifact does (other shapes may take its fallback to cuBLASLt's own choice).
  bool lt_deploy = false;
  cb::KernelSpec spec;  // CUTLASS only
};

float round_to(cb::Elem e, float v) {
  if (e == cb::Elem::f16) return sabre::ir::half_to_float(sabre::ir::float_to_half(v));
  if (e == cb::Elem::bf16) return sabre::ir::bf16_to_float(sabre::ir::float_to_bf16(v));
  return v;
}

// Host data of one problem: float values already rounded to the dtype, and their device bytes.
struct HostTensor {
  std::vector<float> v;
  std::vector<uint8_t> bytes;
};

HostTensor make_tensor(cb::Elem e, size_t count, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  HostTensor t;
  t.v.resize(count);
  const size_t eb = size_t(cb::elem_bytes(e));
  t.bytes.resize(count * eb);
  for (size_t i = 0; i < count; ++i) {
    float x = round_to(e, dist(rng));
    t.v[i] = x;
    if (e == cb::Elem::f32) {
      std::memcpy(&t.bytes[i * 4], &x, 4);
    } else {
      uint16_t h = e == cb::Elem::f16 ? sabre::ir::float_to_half(x) : sabre::ir::float_to_bf16(x);
      std::memcpy(&t.bytes[i * 2], &h, 2);
    }
  }
  return t;
}

float to_float(cb::Elem e, const uint8_t* p) {
  if (e == cb::Elem::f32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return e == cb::Elem::f16 ? sabre::ir::half_to_float(h) : sabre::ir::bf16_to_float(h);
}

double act_ref(cb::Act a, double x) {
  switch (a) {
    case cb::Act::none: return x;
    case cb::Act::relu: return x > 0 ? x : 0;
    case cb::Act::gelu_erf: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case cb::Act::gelu_tanh: return 0.5 * x * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case cb::Act::silu: return x / (1 + std::exp(-x));
    case cb::Act::sigmoid: return 1 / (1 + std::exp(-x));
    case cb::Act::hardswish: return x * std::min(std::max(x + 3, 0.0), 6.0) / 6;
    case cb::Act::relu6: return std::min(std::max(x, 0.0), 6.0);
    case cb::Act::kCount: break;
  }
  return NAN;
}

// One problem's inputs and the reference accumulator A·B (double) on the checked rows.
struct Problem {
  Shape shape;
  cb::Elem e;
  cb::Layout layout;
  HostTensor a, b, bias, res;
  std::vector<int64_t> rows;   // checked rows, per batch
  std::vector<double> acc;     // [batch][rows.size()][n]
  double rms_a = 0, rms_b = 0, rms_bias = 0, rms_res = 0;
};

Problem make_problem(const Shape& s, cb::Elem e, cb::Layout layout) {
  Problem p{s, e, layout, {}, {}, {}, {}, {}, {}};
  std::mt19937 rng(uint32_t(s.m * 7919 + s.n * 104729 + s.k * 13 + s.batch + int(e) * 31 + int(layout) * 101));
  p.a = make_tensor(e, size_t(s.batch * s.m * s.k), rng, -1, 1);
  p.b = make_tensor(e, size_t(s.batch * s.k * s.n), rng, -1, 1);
  p.bias = make_tensor(e, size_t(s.n), rng, -1, 1);
  p.res = make_tensor(e, size_t(s.batch * s.m * s.n), rng, -1, 1);
  p.rms_a = sg::rms(p.a.v), p.rms_b = sg::rms(p.b.v), p.rms_bias = sg::rms(p.bias.v), p.rms_res = sg::rms(p.res.v);
  if (s.m > 1024) {
    std::uniform_int_distribution<int64_t> r(0, s.m - 1);
    std::set<int64_t> rows = {0, s.m - 1};
    while (int64_t(rows.size()) < kLargeSampledRows) rows.insert(r(rng));
    p.rows.assign(rows.begin(), rows.end());
  } else {
    for (int64_t i = 0; i < s.m; ++i) p.rows.push_back(i);
  }
  const size_t R = p.rows.size();
  p.acc.assign(size_t(s.batch) * R * size_t(s.n), 0.0);
  for (int64_t l = 0; l < s.batch; ++l)
    for (size_t ri = 0; ri < R; ++ri) {
      const float* arow = &p.a.v[size_t(l * s.m * s.k + p.rows[ri] * s.k)];
      for (int64_t n = 0; n < s.n; ++n) {
        double sum = 0;
        for (int64_t k = 0; k < s.k; ++k) {
          float bv = layout == cb::Layout::tn ? p.b.v[size_t(l * s.n * s.k + n * s.k + k)]
                                              : p.b.v[size_t(l * s.k * s.n + k * s.n + n)];
          sum += double(arow[k]) * bv;
        }
        p.acc[(size_t(l) * R + ri) * size_t(s.n) + size_t(n)] = sum;
      }
    }
  return p;
}

constexpr float kAlpha = 0.75f, kBeta = 0.5f;

double expected(const Problem& p, const cb::EpilogueSpec& epi, int64_t l, size_t ri, int64_t n) {
  const Shape& s = p.shape;
  double x = kAlpha * p.acc[(size_t(l) * p.rows.size() + ri) * size_t(s.n) + size_t(n)];
  if (epi.bias) x += p.bias.v[size_t(n)];
  double r = kBeta * double(p.res.v[size_t(l * s.m * s.n + p.rows[ri] * s.n + n)]);
  if (epi.residual == cb::Residual::before_act) x += r;
  x = act_ref(epi.act, x);
  if (epi.residual == cb::Residual::after_act) x += r;
  return x;
}

// ---- child side: runs one candidate on every shape, writes "label status err message" lines ----

struct Runner {
  sabre_can_implement_fn can_implement = nullptr;
  sabre_workspace_size_fn workspace_size = nullptr;
  sabre_run_fn run = nullptr;
  sabre_last_error_fn last_error = nullptr;
  std::unique_ptr<lt::LtGemm> ltg;
};

std::string cuda_err(const char* what, cudaError_t e) { return std::string(what) + ": " + cudaGetErrorString(e); }

void child_run(const Candidate& c, const std::string& lib, const std::vector<const Problem*>& problems, int out_fd) {
  auto emit = [&](const std::string& line) {
    std::string l = line + "\n";
    if (write(out_fd, l.data(), l.size()) < 0) _exit(3);
  };
  Runner r;
  std::string library = lib, registered = c.name;
  if (c.lt_deploy) {
    const lt::LtSpec spec{{c.ab, c.ab, c.layout}, c.epi};
    const Shape& s0 = problems.front()->shape;
    sabre_gemm_args a{};
    a.m = s0.m, a.n = s0.n, a.k = s0.k, a.batch = s0.batch, a.lda = s0.k, a.ldb = c.layout == cb::Layout::tn ? s0.k : s0.n;
    a.ldd = a.ldr = s0.n, a.stride_a = s0.m * s0.k, a.stride_b = s0.k * s0.n, a.stride_d = a.stride_r = s0.m * s0.n;
    lt::LtGemm g(spec);
    auto cfg = g.heuristics(a, 1) > 0 ? g.config(0) : std::nullopt;
    if (!cfg) {
      emit("* ERROR 0 no rebuildable cuBLASLt algorithm at " + std::string(s0.label) + ": " + g.last_error());
      return;
    }
    // Emitted and built as sabre compile builds it: tune::lt_compile_job's source and flags.
    const sabre::tune::CompileJob job = sabre::tune::lt_compile_job({spec, *cfg});
    registered = job.name;
    const fs::path dir = fs::path(lib).parent_path();
    const std::string src = (dir / (registered + ".cu")).string();
    library = (dir / (registered + ".so")).string();
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (!(std::ofstream(src) << job.source)) {
      emit("* ERROR 0 cannot write " + src);
      return;
    }
    std::vector<std::string> cmd = {cb::find_nvcc(), "-shared", "-Xcompiler", "-fPIC"};
    cmd.insert(cmd.end(), job.flags.begin(), job.flags.end());
    cmd.insert(cmd.end(), {src, "-o", library});
    std::string log;
    if (cb::run_process(cmd, log) != 0) {
      for (auto& ch : log) if (ch == '\n') ch = ' ';
      emit("* COMPILE_FAIL 0 " + registered + ": " + log.substr(0, 400));
      return;
    }
    emit("algo DEPLOYED 0 " + registered);
  }
  if (c.cublaslt) {
    r.ltg = std::make_unique<lt::LtGemm>(lt::LtSpec{{c.ab, c.ab, c.layout}, c.epi});
  } else {
    void* h = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      emit(std::string("* ERROR 0 dlopen: ") + dlerror());
      return;
    }
    auto reg = reinterpret_cast<sabre_kernel_registry_fn>(dlsym(h, SABRE_KERNEL_REGISTRY_SYMBOL));
    int count = 0, abi = 0;
    const sabre_kernel_entry* ents = reg ? reg(&count, &abi) : nullptr;
    if (!ents || count != 1 || abi != SABRE_KERNEL_ABI_VERSION || registered != ents[0].name) {
      emit("* ERROR 0 the library's registry does not list exactly this kernel with this ABI version");
      return;
    }
    r.can_implement = ents[0].can_implement;
    r.workspace_size = ents[0].workspace_size;
    r.run = ents[0].run;
    r.last_error = ents[0].last_error;
  }
  const size_t eb = size_t(cb::elem_bytes(c.ab));
  for (const Problem* pp : problems) {
    const Problem& p = *pp;
    const Shape& s = p.shape;
    std::string label = s.label;
    auto fail = [&](const std::string& status, const std::string& msg) { emit(label + " " + status + " 0 " + msg); };
    // Which kernels must take the shape: the alignment divides every contiguous extent.
    const bool fits = s.k % c.alignment == 0 && s.n % c.alignment == 0;
    sabre_gemm_args a{};
    a.m = s.m, a.n = s.n, a.k = s.k, a.batch = s.batch;
    a.lda = s.k;
    a.ldb = c.layout == cb::Layout::tn ? s.k : s.n;
    a.ldd = a.ldr = s.n;
    a.stride_a = s.m * s.k, a.stride_b = s.k * s.n, a.stride_d = a.stride_r = s.m * s.n;
    a.alpha = kAlpha, a.beta = kBeta;
    void *da = nullptr, *db = nullptr, *dbias = nullptr, *dres = nullptr, *dd = nullptr, *ws = nullptr;
    cudaError_t ce;
    size_t dsize = size_t(s.batch * s.m * s.n) * eb;
    if ((ce = cudaMalloc(&da, p.a.bytes.size())) || (ce = cudaMalloc(&db, p.b.bytes.size())) ||
        (ce = cudaMalloc(&dbias, p.bias.bytes.size())) || (ce = cudaMalloc(&dres, p.res.bytes.size())) ||
        (ce = cudaMalloc(&dd, dsize))) {
      fail("ERROR", cuda_err("cudaMalloc", ce));
      continue;
    }
    if ((ce = cudaMemcpy(da, p.a.bytes.data(), p.a.bytes.size(), cudaMemcpyHostToDevice)) ||
        (ce = cudaMemcpy(db, p.b.bytes.data(), p.b.bytes.size(), cudaMemcpyHostToDevice)) ||
        (ce = cudaMemcpy(dbias, p.bias.bytes.data(), p.bias.bytes.size(), cudaMemcpyHostToDevice)) ||
        (ce = cudaMemcpy(dres, p.res.bytes.data(), p.res.bytes.size(), cudaMemcpyHostToDevice)) ||
        (ce = cudaMemset(dd, 0xFF, dsize))) {  // poison: all-ones bytes are NaN in f16, bf16 and f32
      fail("ERROR", cuda_err("cudaMemcpy/cudaMemset", ce));
      continue;
    }
    a.a = da, a.b = db, a.d = dd;
    a.bias = c.epi.bias ? dbias : nullptr;
    a.residual = c.epi.residual != cb::Residual::none ? dres : nullptr;
    int st = SABRE_OK;
    std::string err;
    if (c.cublaslt) {
      size_t wsz = 32 << 20;
      if ((ce = cudaMalloc(&ws, wsz))) {
        fail("ERROR", cuda_err("cudaMalloc workspace", ce));
        continue;
      }
      a.workspace = ws, a.workspace_size = wsz;
      int n = r.ltg->heuristics(a, 8);
      st = n > 0 ? r.ltg->run(a, nullptr, 0) : SABRE_NOT_SUPPORTED;
      err = r.ltg->last_error();
    } else {
      int ci = r.can_implement(&a);
      if (!fits) {
        // Must refuse, in can_implement and in run, and leave D alone.
        int rs = r.run(&a, nullptr);
        if (ci == SABRE_NOT_SUPPORTED && rs == SABRE_NOT_SUPPORTED) emit(label + " REFUSED_OK 0 " + r.last_error());
        else fail("FAIL", "alignment " + std::to_string(c.alignment) + " kernel accepted an unaligned shape");
        free_device({da, db, dbias, dres, dd});
        continue;
      }
      if (ci != SABRE_OK) {
        fail("REFUSED", std::string("can_implement: ") + r.last_error());
        free_device({da, db, dbias, dres, dd});
        continue;
      }
      size_t wsz = r.workspace_size(&a);
      if (wsz && (ce = cudaMalloc(&ws, wsz))) {
        fail("ERROR", cuda_err("cudaMalloc workspace", ce));
        continue;
      }
      if (wsz) {
        // The reported size is what run needs: a byte less is refused. The runtime shares one
        // workspace among all GEMMs, so the kernel finds another's bytes there: it must clear what
        // it relies on (stream-K and split-K locks) itself.
        a.workspace = ws, a.workspace_size = wsz - 1;
        if (r.run(&a, nullptr) != SABRE_BAD_ARGS) {
          fail("FAIL", "ran with less workspace than workspace_size reported");
          continue;
        }
        if ((ce = cudaMemset(ws, 0xA5, wsz))) {
          fail("ERROR", cuda_err("cudaMemset workspace", ce));
          continue;
        }
      }
      a.workspace = ws, a.workspace_size = wsz;
      st = r.run(&a, nullptr);
      // Again on the workspace the first run left (its locks at their final counts), D poisoned
      // again: what a replayed CUDA graph does.
      if (st == SABRE_OK && wsz) {
        if ((ce = cudaMemset(dd, 0xFF, dsize))) {
          fail("ERROR", cuda_err("cudaMemset D", ce));
          continue;
        }
        st = r.run(&a, nullptr);
      }
      err = r.last_error();
    }
    if (st != SABRE_OK) {
      fail("ERROR", "run status " + std::to_string(st) + ": " + err);
      continue;
    }
    if ((ce = cudaDeviceSynchronize())) {
      fail("ERROR", cuda_err("cudaDeviceSynchronize after run", ce));
      emit("* ERROR 0 the CUDA context is unusable after a failed kernel; later shapes not run");
      return;
    }
    std::vector<uint8_t> out(dsize);
    if ((ce = cudaMemcpy(out.data(), dd, dsize, cudaMemcpyDeviceToHost))) {
      fail("ERROR", cuda_err("cudaMemcpy D", ce));
      continue;
    }
    // Poison check over all of D; every element of the checked rows against the reference, each
    // within its bound (numerics.h: from the dtype and k), and the relative L2 error within its own.
    int64_t nan_count = 0;
    for (size_t i = 0; i < size_t(s.batch * s.m * s.n); ++i)
      if (!std::isfinite(to_float(c.ab, &out[i * eb]))) ++nan_count;
    const double scale = sg::dot_scale(kAlpha, s.k, p.rms_a, p.rms_b,
                                       (c.epi.bias ? p.rms_bias : 0) +
                                           (c.epi.residual != cb::Residual::none ? kBeta * p.rms_res : 0));
    const sg::Bound bound = sg::gemm_bound(mul_num(c.ab), out_num(c.ab), s.k, scale);
    const int64_t R = int64_t(p.rows.size());
    const sg::Comparison cmp = sg::compare_with(
        s.batch * R * s.n,
        [&](int64_t i) {
          const int64_t l = i / (R * s.n), ri = i / s.n % R, n = i % s.n;
          return double(to_float(c.ab, &out[size_t(l * s.m * s.n + p.rows[size_t(ri)] * s.n + n) * eb]));
        },
        [&](int64_t i) { return expected(p, c.epi, i / (R * s.n), size_t(i / s.n % R), i % s.n); }, bound);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3e", cmp.rel_l2);
    if (nan_count) emit(label + " FAIL " + buf + " " + std::to_string(nan_count) + " outputs unwritten or non-finite");
    else if (!cmp.ok()) emit(label + " FAIL " + buf + " " + cmp.summary());
    else emit(label + " ok " + buf + " -");
    free_device({da, db, dbias, dres, dd});
    if (ws) free_device({ws}), ws = nullptr;
  }
}

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
