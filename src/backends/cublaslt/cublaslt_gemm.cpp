#include "backends/cublaslt/cublaslt_gemm.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstring>

namespace sabre::cublaslt_backend {
namespace cb = cutlass_backend;

std::string lt_name(const LtSpec& s) {
  return "cublaslt_" + std::string(cb::layout_name(s.ops.layout)) + "_" + std::string(cb::elem_name(s.ops.ab)) + "_" +
         std::string(cb::elem_name(s.ops.d)) + "_f32_" + cb::epilogue_name(s.epi);
}

std::optional<LtSpec> parse_lt_name(std::string_view name) {
  // cublaslt_<layout>_<ab>_<d>_f32_<epilogue>
  constexpr std::string_view pre = "cublaslt_";
  if (name.substr(0, pre.size()) != pre) return std::nullopt;
  for (cb::Layout l : {cb::Layout::tn, cb::Layout::tt})
    for (cb::Elem e : {cb::Elem::f16, cb::Elem::bf16, cb::Elem::f32}) {
      LtSpec s{{e, e, l}, {}};
      std::string head = lt_name(s);
      head.resize(head.size() - std::string("linear").size());
      if (name.substr(0, head.size()) != head) continue;
      auto epi = cb::parse_epilogue(name.substr(head.size()));
      if (!epi) return std::nullopt;
      s.epi = *epi;
      return s;
    }
  return std::nullopt;
}

std::optional<std::string> unsupported_reason(const LtSpec& s) {
  if (s.ops.ab != s.ops.d) return "output dtype must equal the operand dtype";
  if (s.epi.act != cb::Act::none && s.epi.act != cb::Act::relu && s.epi.act != cb::Act::gelu_tanh)
    return "cuBLASLt epilogues have only relu and gelu (tanh form)";
  if (s.epi.residual == cb::Residual::after_act) return "cuBLASLt adds C before its epilogue: no residual after the activation";
  return std::nullopt;
}

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

}  // namespace

#define LT_CHECK(stmt)                                                                                \
  do {                                                                                                \
    cublasStatus_t st_ = (stmt);                                                                      \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                                               \
      error_ = std::string(#stmt) + " failed: " + cublasLtGetStatusString(st_) + " (" +               \
               std::to_string(int(st_)) + ") at " __FILE__ ":" + std::to_string(__LINE__);           \
      return SABRE_LIBRARY_ERROR;                                                                     \
    }                                                                                                 \
  } while (0)

struct LtGemm::Impl {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr, ld = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  std::vector<cublasLtMatmulHeuristicResult_t> algos;
  std::string key;  // the problem the descriptors and algos are for

  void release() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (op) cublasLtMatmulDescDestroy(op);
    pref = nullptr, la = lb = lc = ld = nullptr, op = nullptr;
    algos.clear();
    key.clear();
  }
};

LtGemm::LtGemm(LtSpec spec) : spec_(spec), impl_(std::make_unique<Impl>()) {}

LtGemm::~LtGemm() {
  impl_->release();
  if (impl_->handle) cublasLtDestroy(impl_->handle);
}

namespace {
std::string problem_key(const sabre_gemm_args& a) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %zu %d", long(a.m), long(a.n),
                long(a.k), long(a.batch), long(a.lda), long(a.ldb), long(a.ldr), long(a.ldd), long(a.stride_a),
                long(a.stride_b), long(a.stride_r), long(a.stride_d), a.workspace ? a.workspace_size : size_t(0),
                a.bias != nullptr);
  return buf;
}
}  // namespace

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
      error_ = std::string("cublasLtCreate failed: ") + cublasLtGetStatusString(st);
      return 0;
    }
  }
  im.release();
  auto build = [&]() -> int {
    const bool f32 = spec_.ops.ab == cb::Elem::f32;
    LT_CHECK(cublasLtMatmulDescCreate(&im.op, f32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
    // Row-major D [m,n] is column-major Dᵀ [n,m] = Bᵀ·Aᵀ: cuBLASLt's "A" is our B and its "B" our A.
    // tn: our B is [n,k] row-major = column-major k×n, so it enters transposed; tt: [k,n] row-major
    // = column-major n×k, as is.
    const bool tn = spec_.ops.layout == cb::Layout::tn;
    cublasOperation_t ta = tn ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
    LT_CHECK(cublasLtMatmulDescSetAttribute(im.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT_CHECK(cublasLtMatmulDescSetAttribute(im.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    cublasLtEpilogue_t epi = lt_epilogue(spec_.epi);
    LT_CHECK(cublasLtMatmulDescSetAttribute(im.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (spec_.epi.bias) {
      cudaDataType_t bt = cuda_type(spec_.ops.d);
      LT_CHECK(cublasLtMatmulDescSetAttribute(im.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
      int64_t zero = 0;  // one bias row for all batches
      LT_CHECK(cublasLtMatmulDescSetAttribute(im.op, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &zero, sizeof zero));
      // The pointer is set per run; the heuristic only needs to know there is one.
      const void* bias = a.bias;
      LT_CHECK(cublasLtMatmulDescSetAttribute(im.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    }
    cudaDataType_t t = cuda_type(spec_.ops.ab), td = cuda_type(spec_.ops.d);
    auto layout = [&](cublasLtMatrixLayout_t* l, cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld,
                      int64_t stride) -> int {
      LT_CHECK(cublasLtMatrixLayoutCreate(l, type, uint64_t(rows), uint64_t(cols), ld));
      int32_t batch = int32_t(a.batch);
      LT_CHECK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch));
      LT_CHECK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
      return SABRE_OK;
    };
    if (int st = tn ? layout(&im.la, t, a.k, a.n, a.ldb, a.stride_b) : layout(&im.la, t, a.n, a.k, a.ldb, a.stride_b)) return st;
    if (int st = layout(&im.lb, t, a.k, a.m, a.lda, a.stride_a)) return st;
    const bool res = spec_.epi.residual != cb::Residual::none;
    if (int st = layout(&im.lc, td, a.n, a.m, res ? a.ldr : a.ldd, res ? a.stride_r : a.stride_d)) return st;
    if (int st = layout(&im.ld, td, a.n, a.m, a.ldd, a.stride_d)) return st;
    LT_CHECK(cublasLtMatmulPreferenceCreate(&im.pref));
    uint64_t ws = a.workspace ? a.workspace_size : 0;
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(im.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    im.algos.resize(size_t(std::max(1, max_algos)));
    int found = 0;
    LT_CHECK(cublasLtMatmulAlgoGetHeuristic(im.handle, im.op, im.la, im.lb, im.lc, im.ld, im.pref, int(im.algos.size()),
                                            im.algos.data(), &found));
    im.algos.resize(size_t(found));
    if (found == 0) {
      error_ = "cuBLASLt heuristic found no algorithm for this problem";
      return SABRE_NOT_SUPPORTED;
    }
    im.key = problem_key(a);
    return SABRE_OK;
  };
  int st = build();
  if (st != SABRE_OK) {
    im.release();
    return 0;
  }
  return int(im.algos.size());
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
  if (spec_.epi.bias) {
    const void* bias = a.bias;
    LT_CHECK(cublasLtMatmulDescSetAttribute(im.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  }
  const bool res = spec_.epi.residual != cb::Residual::none;
  float alpha = a.alpha, beta = res ? a.beta : 0.0f;
  LT_CHECK(cublasLtMatmul(im.handle, im.op, &alpha, a.b, im.la, a.a, im.lb, &beta, res ? a.residual : a.d, im.lc, a.d,
                          im.ld, &im.algos[size_t(algo)].algo, a.workspace, a.workspace ? a.workspace_size : 0,
                          reinterpret_cast<cudaStream_t>(stream)));
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    error_ = std::string("cublasLtMatmul launch: ") + cudaGetErrorString(e);
    return SABRE_CUDA_ERROR;
  }
  return SABRE_OK;
}

}  // namespace sabre::cublaslt_backend
