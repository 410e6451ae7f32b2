// GPU tests of sabre's native kernels (src/backends/native) against the CPU reference executor.
//
// Every case: random inputs (never zeros), outputs poisoned with 0xFF bytes (NaN for floats) so
// unwritten elements show, the same op run by sabre::reference on the host, and a normalised L2
// error checked against a per-dtype tolerance. Elementwise chains run twice: through the
// interpreter kernel and through the generated kernel (nvcc at test time, loaded with the driver
// API). Exit 77 (ctest: skipped) without a GPU; 1 on any failure.
// This file runs the groups (and holds the small ones); each kernel family's cases are in its own
// file: native_elementwise_test.cpp, native_norm_test.cpp, native_movement_test.cpp,
// native_attention_test.cpp, native_conv_test.cpp; what they share is native_kernels_test.h.
// Run: build-g/tests/gpu/native_kernels_test [substring-filter]   (docs/NATIVE.md)
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "native_kernels_test.h"

using namespace sabre::native_test;
namespace native = sabre::native;

namespace {

// ---- fill / iota (run-time values: Shape-as-data and Range) --------------------------------
void fill_iota_tests() {
  for (DType dt : {DType::i64, DType::i32}) {
    const std::string fname = "Fill_" + dts(dt) + "_4_values";
    if (selected(fname)) {
      const std::vector<int64_t> vals = {7, -1, 123456, 3};
      Tensor want(dt, {4});
      for (int64_t i = 0; i < 4; ++i) want.set_f64(i, double(vals[size_t(i)]));
      Dev dy(want.nbytes());
      CK(native::fill_values(dt, dy.p, 4, vals, nullptr));
      check(fname, dy.get(dt, {4}), want);
    }
    const std::string bname = "Fill_" + dts(dt) + "_broadcast_1000";
    if (selected(bname)) {
      Tensor want(dt, {1000});
      for (int64_t i = 0; i < 1000; ++i) want.set_f64(i, 77);
      Dev dy(want.nbytes());
      CK(native::fill_values(dt, dy.p, 1000, {77}, nullptr));
      check(bname, dy.get(dt, {1000}), want);
    }
  }
  for (DType dt : {DType::i64, DType::i32, DType::f32}) {
    const std::string name = "Iota_" + dts(dt) + "_Range_5_to_1000_by_3";
    if (!selected(name)) continue;
    // The reference: ONNX Range on the executor.
    Tensor start(dt, {}), limit(dt, {}), delta(dt, {});
    start.set_f64(0, 5), limit.set_f64(0, 1000), delta.set_f64(0, 3);
    const Tensor want = ref_op("Range", {start, limit, delta})[0];
    Dev dy(want.nbytes());
    CK(native::iota(dt, dy.p, want.numel(), 5, 3, nullptr));
    check(name, dy.get(dt, {want.numel()}), want);
  }
  // Refusals: too many values, a count that matches neither 1 nor n, float output.
  int refused = 0;
  Dev dy(64 * 8);
  refused += native::fill_values(DType::i64, dy.p, 20, std::vector<int64_t>(20, 1), nullptr) != cudaSuccess;
  refused += native::fill_values(DType::i64, dy.p, 5, {1, 2}, nullptr) != cudaSuccess;
  refused += native::fill_values(DType::f16, dy.p, 1, {1}, nullptr) != cudaSuccess;
  cudaGetLastError();
  std::printf("%s %-60s %d of 3 refused\n", refused == 3 ? "PASS" : "FAIL", "Fill_refusals", refused);
  refused == 3 ? ++g_pass : ++g_fail;
}

// ---- L2 prefetch (the runtime's weight prefetch) ------------------------------------------
// A hint: it must run without a fault over any length (a tail that is not a multiple of 16 bytes,
// lengths past one block's share), leave the bytes as they were, and refuse a misaligned or null
// address.
void prefetch_tests() {
  for (int64_t n : {int64_t(1000), int64_t(262147), int64_t(5000011)}) {  // f16 elements: 2 KB .. 10 MB
    const std::string name = "L2Prefetch_f16_" + std::to_string(n) + "_unchanged";
    if (!selected(name)) continue;
    const Tensor want = rnd(DType::f16, {n});
    Dev d(want);
    CK(native::l2_prefetch(d.p, static_cast<size_t>(want.nbytes()), nullptr));
    check(name, d.get(DType::f16, {n}), want);
  }
  const std::string name = "L2Prefetch_refusals";
  if (!selected(name)) return;
  Dev d(4096);
  int refused = 0;
  refused += native::l2_prefetch(static_cast<char*>(d.p) + 8, 1024, nullptr) == cudaErrorInvalidValue;
  refused += native::l2_prefetch(nullptr, 1024, nullptr) == cudaErrorInvalidValue;
  cudaGetLastError();
  std::printf("%s %-66s %d of 2 refused\n", refused == 2 ? "PASS" : "FAIL", name.c_str(), refused);
  refused == 2 ? ++g_pass : ++g_fail;
}

// ---- argument errors: clear messages, no launch --------------------------------------------
void error_tests() {
  if (!selected("Errors")) return;
  native::LayerNormArgs a;
  const cudaError_t e = native::layernorm(a, nullptr);
  const bool ok1 = e == cudaErrorInvalidValue && native::last_error_message().find("layernorm") != std::string::npos;
  native::SoftmaxArgs s;
  s.dtype = DType::f64;
  s.x = s.y = reinterpret_cast<void*>(16);
  s.cols = 4;
  const bool ok2 = native::softmax(s, nullptr) == cudaErrorNotSupported;
  const bool ok3 = native::permute(4, nullptr, {2, 3}, {0, 0}, nullptr, nullptr) == cudaErrorInvalidValue;
  // c_pad below c, and an integer dtype.
  void* p16 = reinterpret_cast<void*>(256);
  const bool ok4 = native::nchw_to_nhwc(DType::f32, DType::f16, p16, 1, 8, 2, 2, 3, p16, nullptr) == cudaErrorInvalidValue &&
                   native::last_error_message().find("c_pad") != std::string::npos;
  const bool ok5 = native::nchw_to_nhwc(DType::i64, DType::f16, p16, 1, 3, 2, 2, 8, p16, nullptr) == cudaErrorNotSupported;
  // im2col: fewer columns than r*s*c, and an integer x.
  native::Im2colArgs ia;
  ia.x = ia.a = p16;
  ia.n = 1, ia.c = 3, ia.h = ia.w = 8, ia.r = ia.s = 3, ia.p = ia.q = 6, ia.cols = 24;
  const bool ok6 = native::im2col(ia, nullptr) == cudaErrorInvalidValue &&
                   native::last_error_message().find("cols >= r*s*c") != std::string::npos;
  ia.cols = 32;
  ia.x_dtype = DType::i64;
  const bool ok7 = native::im2col(ia, nullptr) == cudaErrorNotSupported;
  const bool ok = ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7;
  std::printf("%s Errors_bad_arguments\n", ok ? "PASS" : "FAIL");
  (ok ? g_pass : g_fail)++;
}

}  // namespace

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("no CUDA device: skipping the native kernel tests\n");
    return 77;
  }
  if (argc > 1) g_filter = argv[1];
  cudaDeviceProp prop{};
  // make the runtime's primary context current for the driver API too (cudaFree(nullptr))
  if (cudaError_t e = cudaGetDeviceProperties(&prop, 0); e != cudaSuccess || (e = cudaFree(nullptr)) != cudaSuccess) {
    std::printf("FAIL setting up the device: %s\n", cudaGetErrorString(e));
    return 1;
  }
  g_cc = prop.major * 10 + prop.minor;
  std::printf("device: %s (sm_%d)\n", prop.name, g_cc);
  load_driver();
  if (const char* e = std::getenv("NVCC")) g_nvcc = e;
  else if (std::system("nvcc --version > /dev/null 2>&1") == 0) g_nvcc = "nvcc";
  else if (std::system("/usr/local/cuda/bin/nvcc --version > /dev/null 2>&1") == 0) g_nvcc = "/usr/local/cuda/bin/nvcc";
  const std::pair<const char*, void (*)()> groups[] = {
      {"errors", error_tests},     {"elementwise", elementwise_tests}, {"softmax", softmax_tests},
      {"layernorm", layernorm_tests}, {"embed_layernorm", embed_ln_tests}, {"reduce", reduce_tests},        {"movement", movement_tests},
      {"where_cast", where_cast_tests}, {"pool", pool_tests},  {"fill_iota", fill_iota_tests},
      {"attention", attention_tests},   {"depthwise", depthwise_tests}, {"grouped", grouped_tests}, {"im2col", im2col_tests},
      {"stem_conv", stem_conv_tests}, {"prefetch", prefetch_tests}, {"index_ops", index_ops_tests}};
  for (auto [name, fn] : groups) {
    try {
      fn();
    } catch (const std::exception& e) {
      std::printf("FAIL group %s aborted: %s\n", name, e.what());
      ++g_fail;
    }
  }
  std::printf("\n%d passed, %d failed\n", g_pass, g_fail);
  if (g_pass + g_fail == 0) {
    std::printf("FAIL: no case ran (the filter '%s' matches none)\n", g_filter.c_str());
    return 1;
  }
  return g_fail ? 1 : 0;
}
