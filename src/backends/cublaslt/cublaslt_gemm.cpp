#include "backends/cublaslt/cublaslt_gemm.h"

#include <cstdio>

#include "backends/cublaslt/lt_matmul.h"

namespace sabre::cublaslt_backend {
namespace cb = cutlass_backend;

namespace {

cudaDataType_t cuda_type(cb::Elem e) {
  switch (e) {
    case cb::Elem::f16: return CUDA_R_16F;
    case cb::Elem::bf16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

cublasLtEpilogue_t lt_epilogue(const cb::EpilogueSpec& e) {
  if (e.act == cb::Act::relu) return e.bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
  if (e.act == cb::Act::gelu_tanh) return e.bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
  return e.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

sabre_lt::Problem lt_problem(const LtSpec& s) {
  sabre_lt::Problem p;
  p.ab = cuda_type(s.ops.ab);
  p.d = cuda_type(s.ops.d);
  p.tn = s.ops.layout == cb::Layout::tn;
  p.epilogue = lt_epilogue(s.epi);
  p.bias = s.epi.bias;
  p.residual = s.epi.residual != cb::Residual::none;
  return p;
}

std::string problem_key(const sabre_gemm_args& a) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %zu %d", long(a.m), long(a.n),
                long(a.k), long(a.batch), long(a.lda), long(a.ldb), long(a.ldr), long(a.ldd), long(a.stride_a),
                long(a.stride_b), long(a.stride_r), long(a.stride_d), a.workspace ? a.workspace_size : size_t(0),
                a.bias != nullptr);
  return buf;
}

}  // namespace

struct LtGemm::Impl {
  cublasLtHandle_t handle = nullptr;
  sabre_lt::Problem problem;
  sabre_lt::Matmul mm;
  std::vector<cublasLtMatmulHeuristicResult_t> algos;
  std::vector<std::optional<LtAlgo>> configs;  // per algo: what it was rebuilt from
  std::string key;  // the problem the descriptors and algos are for

  void release() {
    mm.release();
    algos.clear();
    configs.clear();
    key.clear();
  }
};

LtGemm::LtGemm(LtSpec spec) : spec_(spec), impl_(std::make_unique<Impl>()) { impl_->problem = lt_problem(spec); }

LtGemm::~LtGemm() {
  impl_->release();
  if (impl_->handle) cublasLtDestroy(impl_->handle);
}

int LtGemm::heuristics(const sabre_gemm_args& a, int max_algos) {
  if (auto why = unsupported_reason(spec_)) {
    error_ = *why;
    return 0;
  }
  if (a.m < 1 || a.n < 1 || a.k < 1 || a.batch < 1) {
    error_ = "need m, n, k, batch >= 1";
    return 0;
  }
  auto& im = *impl_;
  if (!im.handle) {
    cublasStatus_t st = cublasLtCreate(&im.handle);
    if (st != CUBLAS_STATUS_SUCCESS) {
      im.handle = nullptr;
      error_ = sabre_lt::status_text("cublasLtCreate", st);
      return 0;
    }
  }
  im.release();
  const char* what = "";
  if (cublasStatus_t st = im.mm.build(im.problem, a, &what); st != CUBLAS_STATUS_SUCCESS) {
    error_ = sabre_lt::status_text(what, st);
    im.release();
    return 0;
  }
  im.algos.resize(size_t(std::max(1, max_algos)));
  int found = 0;
  const uint64_t ws = a.workspace ? a.workspace_size : 0;
  if (cublasStatus_t st = im.mm.heuristics(im.handle, ws, int(im.algos.size()), im.algos.data(), &found, &what);
      st != CUBLAS_STATUS_SUCCESS) {
    error_ = sabre_lt::status_text(what, st);
    im.release();
    return 0;
  }
  im.algos.resize(size_t(found));
  if (found == 0) {
    error_ = "cuBLASLt heuristic found no algorithm for this problem";
    im.release();
    return 0;
  }
  // Rebuild each from its configuration, as a deployed kernel does (emit_lt_kernel).
  for (auto& r : im.algos) {
    sabre_lt::AlgoConfig c;
    cublasLtMatmulAlgo_t rebuilt{};
    cublasLtMatmulHeuristicResult_t check{};
    if (sabre_lt::read_config(r.algo, &c, &what) != CUBLAS_STATUS_SUCCESS ||
        sabre_lt::make_algo(im.handle, im.problem, c, &rebuilt, &what) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulAlgoCheck(im.handle, im.mm.op, im.mm.la, im.mm.lb, im.mm.lc, im.mm.ld, &rebuilt, &check) !=
            CUBLAS_STATUS_SUCCESS) {
      im.configs.push_back(std::nullopt);
      continue;
    }
    r.algo = rebuilt;
    r.workspaceSize = check.workspaceSize;
    im.configs.push_back(LtAlgo{c.id, c.tile, c.stages, c.splitk, c.reduction, c.swizzle, c.custom, c.inner, c.cluster});
  }
  im.key = problem_key(a);
  return int(im.algos.size());
}

std::optional<LtAlgo> LtGemm::config(int algo) const {
  if (algo < 0 || size_t(algo) >= impl_->configs.size()) return std::nullopt;
  return impl_->configs[size_t(algo)];
}

int LtGemm::run(const sabre_gemm_args& a, sabre_stream_t stream, int algo) {
  if (!a.a || !a.b || !a.d || (spec_.epi.bias && !a.bias) ||
      (spec_.epi.residual != cb::Residual::none && !a.residual)) {
    error_ = "a, b, d (and bias/residual where the spec has them) must be non-NULL";
    return SABRE_BAD_ARGS;
  }
  auto& im = *impl_;
  if (im.key != problem_key(a) && heuristics(a, std::max(1, algo + 1)) == 0) return SABRE_NOT_SUPPORTED;
  if (algo < 0 || size_t(algo) >= im.algos.size()) {
    error_ = "algorithm index " + std::to_string(algo) + " out of range (" + std::to_string(im.algos.size()) + " found)";
    return SABRE_BAD_ARGS;
  }
  const char* what = "";
  if (cublasStatus_t st = im.mm.run(im.handle, im.problem, a, im.algos[size_t(algo)].algo,
                                    reinterpret_cast<cudaStream_t>(stream), &what);
      st != CUBLAS_STATUS_SUCCESS) {
    error_ = sabre_lt::status_text(what, st) + " at " __FILE__;
    return SABRE_LIBRARY_ERROR;
  }
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    error_ = std::string("cublasLtMatmul launch: ") + cudaGetErrorString(e);
    return SABRE_CUDA_ERROR;
  }
  return SABRE_OK;
}

}  // namespace sabre::cublaslt_backend
