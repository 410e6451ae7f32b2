// What the conv GPU tests (conv_gpu_test.cpp: sm80 CUTLASS; conv_sm90_gpu_test.cpp: sm90 CUTLASS;
// grouped_conv_test.cpp: the native grouped conv) share: f16/bf16 bits, random tensors that are
// never zero, one case's operands and their upload with Y poisoned, the activations, the
// double-precision reference conv with the fused epilogue, the check of Y against it (bounds from
// numerics.h), a device buffer that frees itself, and for the CUTLASS tests the command line, the
// GPU probe, the kernel ABI's arguments and the loading of the built kernel libraries.
#pragma once

#include <dlfcn.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backends/cutlass/kernel_spec.h"
#include "backends/cutlass/nvcc.h"
#include "ir/dtype.h"
#include "numerics.h"
#include "sabre/kernel_abi.h"

namespace sabre::conv_test {

namespace cb = sabre::cutlass_backend;

inline constexpr int kSkip = 77;  // the exit status ctest reports as skipped
constexpr float kAlpha = 0.75f, kBeta = 0.5f;
constexpr int64_t kGuard = 256;  // poisoned elements after Y that no kernel may write

inline uint16_t to_bits(cb::Elem e, float v) {
  return e == cb::Elem::f16 ? sabre::ir::float_to_half(v) : sabre::ir::float_to_bf16(v);
}
inline float from_bits(cb::Elem e, uint16_t b) {
  return e == cb::Elem::f16 ? sabre::ir::half_to_float(b) : sabre::ir::bf16_to_float(b);
}
inline uint16_t nan_bits(cb::Elem e) { return e == cb::Elem::f16 ? 0x7e00 : 0x7fc0; }

// Random values in [-1, -0.05] U [0.05, 1] (never zero), rounded to the dtype; host bits and the doubles.
inline void random_tensor(cb::Elem e, size_t count, std::mt19937& rng, std::vector<uint16_t>& bits, std::vector<double>& vals) {
  std::uniform_real_distribution<float> mag(0.05f, 1.0f);
  bits.resize(count);
  vals.resize(count);
  for (size_t i = 0; i < count; ++i) {
    float v = mag(rng) * (rng() & 1 ? 1.0f : -1.0f);
    bits[i] = to_bits(e, v);
    vals[i] = from_bits(e, bits[i]);
  }
}

inline double activate(cb::Act a, double x) {
  switch (a) {
    case cb::Act::none: return x;
    case cb::Act::relu: return x > 0 ? x : 0;
    case cb::Act::silu: return x / (1 + std::exp(-x));
    case cb::Act::sigmoid: return 1 / (1 + std::exp(-x));
    case cb::Act::hardswish: return x * std::min(std::max(x + 3, 0.0), 6.0) / 6;
    case cb::Act::relu6: return std::min(std::max(x, 0.0), 6.0);
    case cb::Act::gelu_erf: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case cb::Act::gelu_tanh:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case cb::Act::kCount: break;
  }
  return NAN;
}

// A test Problem's groups: its `groups` member where it has one, else 1.
template <class Problem>
int64_t groups_of(const Problem& pb) {
  if constexpr (requires { pb.groups; }) return pb.groups;
  else return 1;
}

// Y = act(alpha*conv + bias + beta*R) or act(alpha*conv + bias) + beta*R, in double; grouped convs
// read the filter as [k, r, s, c/groups], output channel k summing over its group's input channels.
template <class Problem>  // the tests' Problem: n..dil_w and p(), q(); groups optional
std::vector<double> reference(const Problem& pb, const cb::EpilogueSpec& epi, const std::vector<double>& x,
                              const std::vector<double>& w, const std::vector<double>& bias,
                              const std::vector<double>& res) {
  const int64_t P = pb.p(), Q = pb.q();
  std::vector<double> y(size_t(pb.n * P * Q * pb.k));
  for (int64_t n = 0; n < pb.n; ++n)
    for (int64_t p = 0; p < P; ++p)
      for (int64_t q = 0; q < Q; ++q)
        for (int64_t k = 0; k < pb.k; ++k) {
          double acc = 0;
          const int64_t cg = pb.c / groups_of(pb), g = k / (pb.k / groups_of(pb));
          for (int64_t r = 0; r < pb.r; ++r) {
            int64_t hi = p * pb.stride_h - pb.pad_h + r * pb.dil_h;
            if (hi < 0 || hi >= pb.h) continue;
            for (int64_t s = 0; s < pb.s; ++s) {
              int64_t wi = q * pb.stride_w - pb.pad_w + s * pb.dil_w;
              if (wi < 0 || wi >= pb.w) continue;
              const double* xp = &x[size_t(((n * pb.h + hi) * pb.w + wi) * pb.c + g * cg)];
              const double* wp = &w[size_t(((k * pb.r + r) * pb.s + s) * cg)];
              for (int64_t c = 0; c < cg; ++c) acc += xp[c] * wp[c];
            }
          }
          size_t o = size_t(((n * P + p) * Q + q) * pb.k + k);
          double v = kAlpha * acc;
          if (epi.bias) v += bias[size_t(k)];
          if (epi.residual == cb::Residual::before_act) v += kBeta * res[o];
          v = activate(epi.act, v);
          if (epi.residual == cb::Residual::after_act) v += kBeta * res[o];
          y[o] = v;
        }
  return y;
}

// Y's bits (ycount elements, then kGuard that must stay poisoned) against `ref`: every element within
// the bound numerics.h gives a sum of r·s·c products of dtype `e` stored as `e` (serial_splits: the
// slices of a serial split-K), the relative L2 error within its own, nothing unwritten, nothing past
// Y written. Prints one line; returns whether all holds.
template <class Problem>
bool check_y(const std::string& kernel, const Problem& pb, cb::Elem e, const cb::EpilogueSpec& epi, int serial_splits,
             const std::vector<uint16_t>& yb, size_t ycount, const std::vector<double>& ref,
             const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& bias,
             const std::vector<double>& res) {
  namespace sg = sabre::gpu_test;
  const sg::Num num = e == cb::Elem::f16 ? sg::Num::f16 : sg::Num::bf16;
  const int64_t k = pb.r * pb.s * (pb.c / groups_of(pb));
  const double scale = sg::dot_scale(kAlpha, k, sg::rms(x), sg::rms(w),
                                     (epi.bias ? sg::rms(bias) : 0) +
                                         (epi.residual != cb::Residual::none ? kBeta * sg::rms(res) : 0));
  const sg::Comparison c = sg::compare_with(
      int64_t(ycount), [&](int64_t i) { return double(from_bits(e, yb[size_t(i)])); },
      [&](int64_t i) { return ref[size_t(i)]; }, sg::gemm_bound(num, num, k, scale, serial_splits));
  int64_t guard_written = 0;
  for (size_t i = ycount; i < yb.size(); ++i) guard_written += yb[i] != nan_bits(e);
  const bool ok = c.ok() && guard_written == 0;
  std::printf("%s %s %s: %s%s\n", ok ? "ok  " : "FAIL", kernel.c_str(), pb.label, c.summary().c_str(),
              guard_written ? (", " + std::to_string(guard_written) + " elements past Y written").c_str() : "");
  return ok;
}

struct DeviceBuf {
  void* p = nullptr;
  DeviceBuf() = default;
  DeviceBuf(const DeviceBuf&) = delete;
  DeviceBuf& operator=(const DeviceBuf&) = delete;
  ~DeviceBuf() {
    if (p) cudaFree(p);
  }
};

// One case's operands, drawn in this order: X [n,h,w,c], W [k,r,s,c/groups], bias [k] and R (Y's
// shape) random in dtype e (bits and values), and Y's bits: NaN, with kGuard more after it.
struct Operands {
  std::vector<uint16_t> xb, wb, bb, rb, yb;
  std::vector<double> xv, wv, bv, rv;
  size_t ycount = 0;
};

template <class Problem>
Operands random_operands(const Problem& pb, cb::Elem e, std::mt19937& rng) {
  Operands o;
  o.ycount = size_t(pb.n * pb.p() * pb.q() * pb.k);
  random_tensor(e, size_t(pb.n * pb.h * pb.w * pb.c), rng, o.xb, o.xv);
  random_tensor(e, size_t(pb.k * pb.r * pb.s * (pb.c / groups_of(pb))), rng, o.wb, o.wv);
  random_tensor(e, size_t(pb.k), rng, o.bb, o.bv);
  random_tensor(e, o.ycount, rng, o.rb, o.rv);
  o.yb.assign(o.ycount + size_t(kGuard), nan_bits(e));
  return o;
}

struct DeviceOperands {
  DeviceBuf x, w, bias, res, y;
};

// Copies the operands to the device, the filter as `w` (the layout the kernel reads) and Y with its
// poison. Returns "" or the call that failed with CUDA's message.
inline std::string upload(const Operands& o, const std::vector<uint16_t>& w, DeviceOperands& d) {
  const struct {
    const char* name;
    DeviceBuf* buf;
    const std::vector<uint16_t>* host;
  } bufs[] = {{"X", &d.x, &o.xb}, {"W", &d.w, &w}, {"bias", &d.bias, &o.bb}, {"R", &d.res, &o.rb}, {"Y", &d.y, &o.yb}};
  for (const auto& b : bufs) {
    const size_t bytes = b.host->size() * 2;
    if (cudaError_t e = cudaMalloc(&b.buf->p, bytes); e != cudaSuccess)
      return std::string("cudaMalloc of ") + b.name + " failed: " + cudaGetErrorString(e);
    if (cudaError_t e = cudaMemcpy(b.buf->p, b.host->data(), bytes, cudaMemcpyHostToDevice); e != cudaSuccess)
      return std::string("cudaMemcpy of ") + b.name + " to the device failed: " + cudaGetErrorString(e);
  }
  return "";
}

// ---- the CUTLASS conv kernel tests (conv_gpu_test.cpp, conv_sm90_gpu_test.cpp) ----------------

// The kernel ABI's arguments for a problem on the uploaded operands (alpha kAlpha, beta kBeta).
template <class Problem>
sabre_conv_args conv_args(const Problem& pb, const DeviceOperands& d) {
  sabre_conv_args a{};
  a.n = pb.n, a.h = pb.h, a.w = pb.w, a.c = pb.c, a.k = pb.k, a.r = pb.r, a.s = pb.s, a.p = pb.p(), a.q = pb.q();
  a.pad_h = pb.pad_h, a.pad_w = pb.pad_w, a.stride_h = pb.stride_h, a.stride_w = pb.stride_w;
  a.dil_h = pb.dil_h, a.dil_w = pb.dil_w, a.groups = groups_of(pb);
  a.x = d.x.p, a.filter = d.w.p, a.bias = d.bias.p, a.residual = d.res.p, a.y = d.y.p;
  a.alpha = kAlpha, a.beta = kBeta;
  return a;
}

// A built kernel: its name, its spec (cb::ConvSpec or cb::Sm90ConvSpec) and its library's entry.
template <class Spec>
struct ConvKernel {
  std::string name;
  Spec spec;
  sabre_conv_entry entry{};
};

// One case's start: its operands drawn and uploaded (`o`, `d`) and its arguments (`a`); false, with
// a FAIL line, where CUDA fails.
template <class Spec, class Problem>
bool prepare_case(const ConvKernel<Spec>& kn, const Problem& pb, std::mt19937& rng, Operands& o, DeviceOperands& d,
                  sabre_conv_args& a) {
  o = random_operands(pb, kn.spec.elem, rng);
  if (const std::string err = upload(o, o.wb, d); !err.empty()) {
    std::printf("FAIL %s %s: %s\n", kn.name.c_str(), pb.label, err.c_str());
    return false;
  }
  a = conv_args(pb, d);
  return true;
}

// Reads Y (and its guard) back into o.yb; false, with a FAIL line naming `after`, where CUDA fails.
template <class Spec, class Problem>
bool read_y(const ConvKernel<Spec>& kn, const Problem& pb, const DeviceOperands& d, Operands& o, const char* after) {
  cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) e = cudaMemcpy(o.yb.data(), d.y.p, o.yb.size() * 2, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) {
    std::printf("FAIL %s %s: reading Y back after %s failed: %s\n", kn.name.c_str(), pb.label, after,
                cudaGetErrorString(e));
    return false;
  }
  return true;
}

// Runs a case can_implement accepted (`can_implement`: its status, which must be SABRE_OK): the
// workspace it asks for (every byte 0xff, NaN in f32 and 16-bit, where poison_workspace), the kernel,
// Y read back into o.yb. False, with a FAIL line, where a step fails.
template <class Spec, class Problem>
bool run_kernel(const ConvKernel<Spec>& kn, const Problem& pb, int can_implement, sabre_conv_args& a,
                bool poison_workspace, const DeviceOperands& d, Operands& o) {
  if (can_implement != SABRE_OK) {
    std::printf("FAIL %s %s: can_implement %d: %s\n", kn.name.c_str(), pb.label, can_implement, kn.entry.last_error());
    return false;
  }
  DeviceBuf ws;
  a.workspace_size = kn.entry.workspace_size(&a);
  if (a.workspace_size) {
    cudaError_t e = cudaMalloc(&ws.p, a.workspace_size);
    if (e == cudaSuccess && poison_workspace) e = cudaMemset(ws.p, 0xff, a.workspace_size);
    if (e != cudaSuccess) {
      std::printf("FAIL %s %s: the workspace of %zu bytes: %s\n", kn.name.c_str(), pb.label, a.workspace_size,
                  cudaGetErrorString(e));
      return false;
    }
  }
  a.workspace = ws.p;
  if (const int st = kn.entry.run(&a, nullptr); st != SABRE_OK) {
    std::printf("FAIL %s %s: run %d: %s\n", kn.name.c_str(), pb.label, st, kn.entry.last_error());
    return false;
  }
  return read_y(kn, pb, d, o, "the run");
}

// Y against the double reference conv on the case's operands (check_y; serial_splits: the slices
// of a serial split-K).
template <class Spec, class Problem>
bool check_case(const ConvKernel<Spec>& kn, const Problem& pb, int serial_splits, const Operands& o) {
  return check_y(kn.name, pb, kn.spec.elem, kn.spec.epi, serial_splits, o.yb, o.ycount,
                 reference(pb, kn.spec.epi, o.xv, o.wv, o.bv, o.rv), o.xv, o.wv, o.bv, o.rv);
}

// `prog [-j N] [--work DIR] [NAME...]`; false (after the usage line) on anything else.
inline bool parse_args(int argc, char** argv, const char* prog, int& jobs, std::string& work,
                       std::vector<std::string>& names) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-j" && i + 1 < argc) jobs = std::max(1, std::atoi(argv[++i]));
    else if (a == "--work" && i + 1 < argc) work = argv[++i];
    else if (!a.empty() && a[0] != '-') names.push_back(a);
    else {
      std::fprintf(stderr, "usage: %s [-j N] [--work DIR] [NAME...]\n", prog);
      return false;
    }
  }
  return true;
}

// Device 0's compute capability as 10 * major + minor (and a line naming the GPU); 0 without a GPU
// (a line saying `what` is skipped), -1 where its properties cannot be read.
inline int gpu_sm(const char* what) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA GPU: %s skipped\n", what);
    return 0;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    std::printf("cudaGetDeviceProperties failed\n");
    return -1;
  }
  const int sm = prop.major * 10 + prop.minor;
  std::printf("GPU: %s (sm_%d)\n", prop.name, sm);
  return sm;
}

// The kernels compile_conv_kernels or compile_sm90_conv_kernels built (built[i] for kernels[i]),
// loaded: each library's registry must list exactly its kernel, at this ABI version. A kernel that
// did not build or load gets a FAIL line and counts in `failed`; the others come back with their entry.
template <class Spec>
std::vector<ConvKernel<Spec>> load_built(std::vector<ConvKernel<Spec>>& kernels, const std::vector<cb::CompileResult>& built,
                                         int& failed) {
  std::vector<ConvKernel<Spec>> ready;
  for (size_t i = 0; i < built.size(); ++i) {
    const auto& r = built[i];
    if (!r.ok) {
      std::printf("FAIL %s: compile (%.0f s):\n%s\n%s\n", r.name.c_str(), r.seconds, r.command.c_str(), r.log.c_str());
      ++failed;
      continue;
    }
    std::printf("built %s (%.0f s)\n", r.name.c_str(), r.seconds);
    void* h = dlopen(r.library.c_str(), RTLD_NOW | RTLD_LOCAL);
    auto reg = h ? reinterpret_cast<sabre_conv_registry_fn>(dlsym(h, SABRE_CONV_REGISTRY_SYMBOL)) : nullptr;
    int count = 0, abi = 0;
    const sabre_conv_entry* entries = reg ? reg(&count, &abi) : nullptr;
    if (!entries || count != 1 || abi != SABRE_KERNEL_ABI_VERSION || kernels[i].name != entries[0].name) {
      std::printf("FAIL %s: library %s has no matching %s (dlerror: %s)\n", r.name.c_str(), r.library.c_str(),
                  SABRE_CONV_REGISTRY_SYMBOL, h ? "-" : dlerror());
      ++failed;
      continue;
    }
    kernels[i].entry = entries[0];
    ready.push_back(kernels[i]);
  }
  return ready;
}

}  // namespace sabre::conv_test
