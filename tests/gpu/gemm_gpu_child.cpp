// GEMM kernel GPU test, the child side (gemm_gpu_test.cpp forks it for each candidate): runs one
// kernel on every shape into poisoned outputs and checks each element against the CPU reference
// within numerics.h's bounds.
#include <dlfcn.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "backends/cutlass/nvcc.h"
#include "gemm_gpu_test.h"
#include "ir/dtype.h"
#include "numerics.h"
#include "sabre/kernel_abi.h"
#include "tune/compile_cache.h"
#include "tune/profiler.h"

namespace sabre::gemm_gpu_test {

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

// Operands and output of one dtype; f32 operands are multiplied as TF32 (numerics.h).
sg::Num out_num(cb::Elem e) { return e == cb::Elem::f16 ? sg::Num::f16 : e == cb::Elem::bf16 ? sg::Num::bf16 : sg::Num::f32; }
sg::Num mul_num(cb::Elem e) { return e == cb::Elem::f32 ? sg::Num::tf32 : out_num(e); }

// Rows the reference checks in the large shape (all of them elsewhere); every row is checked for poison.
constexpr int64_t kLargeSampledRows = 96;

float round_to(cb::Elem e, float v) {
  if (e == cb::Elem::f16) return sabre::ir::half_to_float(sabre::ir::float_to_half(v));
  if (e == cb::Elem::bf16) return sabre::ir::bf16_to_float(sabre::ir::float_to_bf16(v));
  return v;
}

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

}  // namespace

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

namespace {

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

}  // namespace

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

}  // namespace sabre::gemm_gpu_test
