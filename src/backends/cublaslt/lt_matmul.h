// One sabre GEMM (include/sabre/kernel_abi.h) on cuBLASLt: descriptors, the algorithm from its
// configuration, the call. Header-only and self-contained (cuBLASLt, the CUDA runtime and
// kernel_abi.h): the tuner's LtGemm (cublaslt_gemm.cpp) includes it, and every deployed cuBLASLt
// kernel library has its text pasted in (lt_spec.cpp, emit_lt_kernel), so what was timed and what
// runs build the same call. Tests: tests/gpu/gemm_gpu_test.cpp
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "sabre/kernel_abi.h"

namespace sabre_lt {

// What a kernel fixes: operand and output types, B's layout, the epilogue.
struct Problem {
  cudaDataType_t ab = CUDA_R_16F, d = CUDA_R_16F;
  bool tn = true;  // B is [n, k] (k contiguous); else [k, n]
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  bool bias = false;
  bool residual = false;  // R enters as cuBLASLt's C (beta * C, before the epilogue's activation)
};

// An algorithm as cuBLASLt's configuration attributes (CUBLASLT_ALGO_CONFIG_*): what
// cublasLtMatmulAlgoInit and the attribute setters rebuild it from.
struct AlgoConfig {
  int32_t id = 0;
  uint32_t tile = 0, stages = 0;
  int32_t splitk = 1;
  uint32_t reduction = 0, swizzle = 0, custom = 0;
  uint16_t inner = 0, cluster = 0;
};

inline cublasComputeType_t compute_type(const Problem& p) {
  return p.ab == CUDA_R_32F ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

// "call failed: STATUS (code)".
inline std::string status_text(const char* call, cublasStatus_t st) {
  return std::string(call) + " failed: " + cublasLtGetStatusString(st) + " (" + std::to_string(int(st)) + ")";
}

// Returns the status of `call` when it fails, naming the call in *what.
#define SABRE_LT_TRY(call)                                  \
  do {                                                      \
    cublasStatus_t st_ = (call);                            \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                     \
      if (what) *what = #call;                              \
      return st_;                                           \
    }                                                       \
  } while (0)

inline cublasStatus_t read_config(const cublasLtMatmulAlgo_t& a, AlgoConfig* c, const char** what) {
  size_t n = 0;
  SABRE_LT_TRY(cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_ID, &c->id, sizeof c->id, &n));
  SABRE_LT_TRY(cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &c->tile, sizeof c->tile, &n));
  SABRE_LT_TRY(cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &c->stages, sizeof c->stages, &n));
  SABRE_LT_TRY(cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &c->splitk, sizeof c->splitk, &n));
  SABRE_LT_TRY(cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &c->reduction,
                                                    sizeof c->reduction, &n));
  SABRE_LT_TRY(cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &c->swizzle, sizeof c->swizzle, &n));
  SABRE_LT_TRY(cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &c->custom, sizeof c->custom, &n));
  SABRE_LT_TRY(cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, &c->inner, sizeof c->inner, &n));
  SABRE_LT_TRY(cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &c->cluster,
                                                    sizeof c->cluster, &n));
  return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t make_algo(cublasLtHandle_t h, const Problem& p, const AlgoConfig& c, cublasLtMatmulAlgo_t* a,
                                const char** what) {
  SABRE_LT_TRY(cublasLtMatmulAlgoInit(h, compute_type(p), CUDA_R_32F, p.ab, p.ab, p.d, p.d, c.id, a));
  SABRE_LT_TRY(cublasLtMatmulAlgoConfigSetAttribute(a, CUBLASLT_ALGO_CONFIG_TILE_ID, &c.tile, sizeof c.tile));
  SABRE_LT_TRY(cublasLtMatmulAlgoConfigSetAttribute(a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &c.stages, sizeof c.stages));
  SABRE_LT_TRY(cublasLtMatmulAlgoConfigSetAttribute(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &c.splitk, sizeof c.splitk));
  SABRE_LT_TRY(cublasLtMatmulAlgoConfigSetAttribute(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &c.reduction, sizeof c.reduction));
  SABRE_LT_TRY(cublasLtMatmulAlgoConfigSetAttribute(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &c.swizzle, sizeof c.swizzle));
  SABRE_LT_TRY(cublasLtMatmulAlgoConfigSetAttribute(a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &c.custom, sizeof c.custom));
  SABRE_LT_TRY(cublasLtMatmulAlgoConfigSetAttribute(a, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, &c.inner, sizeof c.inner));
  SABRE_LT_TRY(cublasLtMatmulAlgoConfigSetAttribute(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &c.cluster, sizeof c.cluster));
  return CUBLAS_STATUS_SUCCESS;
}

// The descriptors of one problem shape. Row-major D [m,n] is column-major Dᵀ [n,m] = Bᵀ·Aᵀ, so
// cuBLASLt's "A" is our B and its "B" our A. tn: our B is [n,k] row-major = column-major k×n,
// entering transposed; tt: [k,n] row-major = column-major n×k, as is.
struct Matmul {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr, ld = nullptr;

  Matmul() = default;
  Matmul(const Matmul&) = delete;
  Matmul& operator=(const Matmul&) = delete;
  ~Matmul() { release(); }

  void release() {
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (op) cublasLtMatmulDescDestroy(op);
    la = lb = lc = ld = nullptr, op = nullptr;
  }

  cublasStatus_t build(const Problem& p, const sabre_gemm_args& a, const char** what) {
    release();
    SABRE_LT_TRY(cublasLtMatmulDescCreate(&op, compute_type(p), CUDA_R_32F));
    cublasOperation_t ta = p.tn ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
    SABRE_LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    SABRE_LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    SABRE_LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &p.epilogue, sizeof p.epilogue));
    if (p.bias) {
      SABRE_LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &p.d, sizeof p.d));
      int64_t zero = 0;  // one bias row for all batches
      SABRE_LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &zero, sizeof zero));
      SABRE_LT_TRY(set_bias(a.bias, what));  // the heuristic only needs to know there is one
    }
    SABRE_LT_TRY(layout(&la, p.ab, p.tn ? a.k : a.n, p.tn ? a.n : a.k, a.ldb, a.stride_b, a.batch, what));
    SABRE_LT_TRY(layout(&lb, p.ab, a.k, a.m, a.lda, a.stride_a, a.batch, what));
    SABRE_LT_TRY(layout(&lc, p.d, a.n, a.m, p.residual ? a.ldr : a.ldd, p.residual ? a.stride_r : a.stride_d, a.batch, what));
    SABRE_LT_TRY(layout(&ld, p.d, a.n, a.m, a.ldd, a.stride_d, a.batch, what));
    return CUBLAS_STATUS_SUCCESS;
  }

  cublasStatus_t set_bias(const void* bias, const char** what) {
    SABRE_LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    return CUBLAS_STATUS_SUCCESS;
  }

  // Up to `count` heuristic results for these descriptors with at most `workspace` bytes of workspace.
  cublasStatus_t heuristics(cublasLtHandle_t h, uint64_t workspace, int count, cublasLtMatmulHeuristicResult_t* out,
                            int* found, const char** what) {
    cublasLtMatmulPreference_t pref = nullptr;
    SABRE_LT_TRY(cublasLtMatmulPreferenceCreate(&pref));
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                             sizeof workspace);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, ld, pref, count, out, found);
    if (st != CUBLAS_STATUS_SUCCESS && what) *what = "cublasLtMatmulAlgoGetHeuristic";
    cublasLtMatmulPreferenceDestroy(pref);
    return st;
  }

  // D = epilogue(alpha·A·B + beta·R) with `algo` on `stream`; the bias pointer is set from `a`.
  cublasStatus_t run(cublasLtHandle_t h, const Problem& p, const sabre_gemm_args& a, const cublasLtMatmulAlgo_t& algo,
                     cudaStream_t stream, const char** what) {
    if (p.bias) SABRE_LT_TRY(set_bias(a.bias, what));
    const float alpha = a.alpha, beta = p.residual ? a.beta : 0.0f;
    SABRE_LT_TRY(cublasLtMatmul(h, op, &alpha, a.b, la, a.a, lb, &beta, p.residual ? a.residual : a.d, lc, a.d, ld,
                                &algo, a.workspace, a.workspace ? a.workspace_size : 0, stream));
    return CUBLAS_STATUS_SUCCESS;
  }

 private:
  static cublasStatus_t layout(cublasLtMatrixLayout_t* l, cudaDataType_t type, int64_t rows, int64_t cols, int64_t lead,
                               int64_t stride, int64_t batch, const char** what) {
    SABRE_LT_TRY(cublasLtMatrixLayoutCreate(l, type, uint64_t(rows), uint64_t(cols), lead));
    int32_t count = int32_t(batch);
    SABRE_LT_TRY(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
    SABRE_LT_TRY(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
    return CUBLAS_STATUS_SUCCESS;
  }
};

#undef SABRE_LT_TRY

}  // namespace sabre_lt
