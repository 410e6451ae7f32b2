// What the native kernel GPU test's files share (native_kernels_test.cpp runs the groups): the
// tolerance table, random tensors, poisoned device buffers, the check against the reference
// executor, one ONNX node on the reference, and the groups' entry points.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "backends/native/native.h"
#include "ir/graph.h"
#include "reference/reference.h"

namespace sabre::native_test {

using ir::DType;
using ir::Tensor;

// ---- tolerance table: rel L2 error per output dtype --------------------------------------
inline double tolerance(DType d) {
  switch (d) {
    case DType::f32: return 1e-5;
    case DType::f16: return 1e-3;
    case DType::bf16: return 8e-3;
    default: return 0.0;  // integers and bool: exact
  }
}

// One set of counters, one filter and one random stream for the whole program: the groups draw
// from g_rng in main's order, so every case sees the inputs it always has.
inline int g_pass = 0, g_fail = 0;
inline std::string g_filter;
inline std::mt19937 g_rng(1234);

#define CK(stmt)                                                                                       \
  do {                                                                                                 \
    cudaError_t e_ = (stmt);                                                                           \
    if (e_ != cudaSuccess) {                                                                           \
      std::fprintf(stderr, "%s failed at %s:%d: %s | %s\n", #stmt, __FILE__, __LINE__, cudaGetErrorString(e_), \
                   native::last_error_message().c_str());                                              \
      throw std::runtime_error("cuda");                                                                \
    }                                                                                                  \
  } while (0)

inline Tensor rnd(DType dt, std::vector<int64_t> dims, double lo = -2.0, double hi = 2.0) {
  Tensor t(dt, std::move(dims));
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = u(g_rng);
    if (dt == DType::boolean) v = v > (lo + hi) / 2 ? 1 : 0;
    else if (!ir::is_float(dt)) v = std::floor(v);
    t.set_f64(i, v);
  }
  return t;
}

struct Dev {
  void* p = nullptr;
  size_t n = 0;
  explicit Dev(size_t bytes) : n(bytes) {
    CK(cudaMalloc(&p, bytes ? bytes : 16));
    CK(cudaMemset(p, 0xFF, bytes ? bytes : 16));  // poison
  }
  explicit Dev(const Tensor& t) : Dev(t.nbytes()) { CK(cudaMemcpy(p, t.bytes(), t.nbytes(), cudaMemcpyHostToDevice)); }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  Tensor get(DType dt, std::vector<int64_t> dims) const {
    CK(cudaDeviceSynchronize());
    Tensor t(dt, std::move(dims));
    CK(cudaMemcpy(t.mutable_bytes(), p, t.nbytes(), cudaMemcpyDeviceToHost));
    return t;
  }
};

inline bool selected(const std::string& name) { return g_filter.empty() || name.find(g_filter) != std::string::npos; }

inline void check(const std::string& name, const Tensor& got, const Tensor& want) {
  if (got.numel() != want.numel() || got.dtype() != want.dtype()) {
    std::printf("FAIL %-60s size/dtype mismatch (%lld %s vs %lld %s)\n", name.c_str(), (long long)got.numel(),
                std::string(ir::name(got.dtype())).c_str(), (long long)want.numel(),
                std::string(ir::name(want.dtype())).c_str());
    ++g_fail;
    return;
  }
  double num = 0, den = 0;
  int64_t bad = -1;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.get_f64(i), w = want.get_f64(i);
    if (std::isnan(g) != std::isnan(w) || (std::isinf(w) && g != w)) {
      if (bad < 0) bad = i;
      continue;
    }
    if (std::isnan(w) || std::isinf(w)) continue;
    num += (g - w) * (g - w);
    den += w * w;
  }
  const double err = std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
  const double tol = tolerance(got.dtype());
  if (bad >= 0 || err > tol || (tol == 0 && num != 0)) {
    const int64_t i = bad >= 0 ? bad : 0;
    std::printf("FAIL %-60s rel_l2=%.3g tol=%.1g (first non-finite mismatch at %lld: got %g want %g)\n", name.c_str(),
                err, tol, (long long)bad, got.get_f64(i), want.get_f64(i));
    ++g_fail;
  } else {
    std::printf("PASS %-60s rel_l2=%.3g\n", name.c_str(), err);
    ++g_pass;
  }
}

inline ir::TensorType type_of(const Tensor& t) {
  return ir::TensorType{t.dtype(), ir::Shape(t.dims().begin(), t.dims().end()), true};
}

// One ONNX node on the reference executor.
inline std::vector<Tensor> ref_op(const std::string& op, const std::vector<Tensor>& ins,
                           std::map<std::string, ir::AttrValue> attrs = {}, size_t nout = 1) {
  ir::Graph g;
  std::vector<ir::Value*> vals;
  std::vector<const Tensor*> ptrs;
  for (size_t i = 0; i < ins.size(); ++i) {
    vals.push_back(g.add_input("in" + std::to_string(i), type_of(ins[i])));
    ptrs.push_back(&ins[i]);
  }
  ir::Node* n = g.add_node(op, vals, nout, std::move(attrs));
  return reference::eval_node(*n, ptrs);
}

inline Tensor i64s(std::vector<int64_t> v) { return Tensor::from_i64(v, {static_cast<int64_t>(v.size())}); }

inline std::string dts(DType d) { return std::string(ir::name(d)); }
inline std::string shp(const std::vector<int64_t>& d) {
  std::string s;
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "x" : "") + std::to_string(d[i]);
  return s;
}

inline Tensor to_nhwc(const Tensor& t) { return ref_op("Transpose", {t}, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}})[0]; }

// The generated elementwise kernels (native_elementwise_test.cpp): the nvcc to build them with and
// the GPU's compute capability, set by main; load_driver finds the driver's module entry points.
inline std::string g_nvcc;
inline int g_cc = 0;
void load_driver();

// The groups main runs, one file a family.
void elementwise_tests();  // native_elementwise_test.cpp
void where_cast_tests();
void softmax_tests();      // native_norm_test.cpp
void layernorm_tests();
void embed_ln_tests();
void reduce_tests();
void index_ops_tests();    // native_movement_test.cpp
void movement_tests();
void attention_tests();    // native_attention_test.cpp
void depthwise_tests();    // native_conv_test.cpp
void grouped_tests();
void pool_tests();
void im2col_tests();
void stem_conv_tests();

}  // namespace sabre::native_test
