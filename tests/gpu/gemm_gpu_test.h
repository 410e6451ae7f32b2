// What the GEMM kernel GPU test's two sides share (gemm_gpu_test.cpp: the parent, which builds
// the kernels and runs each candidate in a child with a watchdog; gemm_gpu_child.cpp: the child,
// which runs one candidate on every shape against the CPU reference): the shapes, a candidate, and
// one problem's inputs with its reference accumulator.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backends/cublaslt/cublaslt_gemm.h"
#include "backends/cutlass/catalog.h"

namespace sabre::gemm_gpu_test {

namespace cb = sabre::cutlass_backend;
namespace lt = sabre::cublaslt_backend;

inline constexpr int kSkip = 77;  // the exit status ctest reports as skipped

struct Shape {
  const char* label;
  int64_t m, n, k, batch;
};
// M=1; M not a multiple of any tile; N=91, K=3 (only alignment-1 kernels may take it, the others
// must refuse); large M; strided batched; small M with long K (split-K's case: 48 k-iterations over
// 12 tiles of 128x64, split 2, 4 or 8 ways).
inline constexpr Shape kShapes[] = {
    {"m1", 1, 256, 128, 1},           {"m_ragged", 333, 200, 264, 1},    {"n91_k3", 77, 91, 3, 1},
    {"large", 4096, 768, 3072, 1},    {"batched", 128, 128, 64, 12},     {"m16_k3072", 16, 768, 3072, 1},
};
inline constexpr Shape kQuickShapes[] = {{"m1", 1, 256, 128, 1},
                                         {"m_ragged", 333, 200, 264, 1},
                                         {"n91_k3", 77, 91, 3, 1},
                                         {"batched", 128, 128, 64, 3},
                                         {"m16_k3072", 16, 768, 3072, 1}};

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

// Host data of one problem: float values already rounded to the dtype, and their device bytes.
struct HostTensor {
  std::vector<float> v;
  std::vector<uint8_t> bytes;
};

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

inline constexpr float kAlpha = 0.75f, kBeta = 0.5f;

// The inputs of shape `s` in dtype `e` (random, seeded by the shape, dtype and layout) and the
// reference accumulator on the checked rows.
Problem make_problem(const Shape& s, cb::Elem e, cb::Layout layout);

// Runs `c` (its kernel library `lib`) on every problem in this process and writes one line a shape,
// "label status err message", to out_fd: what the parent reads back.
void child_run(const Candidate& c, const std::string& lib, const std::vector<const Problem*>& problems, int out_fd);

}  // namespace sabre::gemm_gpu_test
