/* The C ABI of every kernel sabre generates. Plain C so that the runtime, the tuner's profiler
 * child process and tests can dlopen a kernel library without C++ or CUTLASS headers.
 *
 * A GEMM kernel computes, per batch index l < batch, with row-major D [m, n]:
 *   D = act(alpha * A·B + bias[n] + beta * R)      (residual before the activation)
 *   D = act(alpha * A·B + bias[n]) + beta * R      (residual after the activation)
 * A is [m, k] with k contiguous (row stride lda). B is either [n, k] with k contiguous ("tn",
 * weights as the partitioner lays them out) or [k, n] with n contiguous ("tt", activation x
 * activation products such as P·V); ldb is its row stride either way. R and bias have D's type;
 * bias is one row shared by all batches; batch strides are in elements.
 * Which of bias/act/residual a kernel applies is fixed by the kernel (its name says so).
 * Tests: tests/gpu/gemm_gpu_test.cpp (numerics), tests/kernels/ (compiles). */
#ifndef SABRE_KERNEL_ABI_H
#define SABRE_KERNEL_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 2: every GEMM and conv kernel also exports NAME_signature (below). */
#define SABRE_KERNEL_ABI_VERSION 2

typedef struct CUstream_st* sabre_stream_t; /* the same type as cudaStream_t */

typedef struct sabre_gemm_args {
  int64_t m, n, k, batch;
  const void* a;
  const void* b;
  const void* bias;     /* [n]; ignored by kernels without bias */
  const void* residual; /* [m, n] per batch; ignored by kernels without residual */
  void* d;
  int64_t lda, ldb, ldr, ldd;                    /* row strides, elements */
  int64_t stride_a, stride_b, stride_r, stride_d; /* batch strides, elements */
  float alpha, beta;
  void* workspace; /* device memory of at least <name>_workspace_size bytes (may be NULL if 0) */
  size_t workspace_size;
} sabre_gemm_args;

enum sabre_status {
  SABRE_OK = 0,
  SABRE_NOT_SUPPORTED = 1, /* can_implement said no: shape, alignment or stride not supported */
  SABRE_BAD_ARGS = 2,      /* missing pointer, too little workspace */
  SABRE_CUTLASS_ERROR = 3, /* a CUTLASS call failed; <name>_last_error says which */
  SABRE_CUDA_ERROR = 4,    /* a CUDA call or the launch failed */
  SABRE_LIBRARY_ERROR = 5  /* cuBLASLt or another library failed */
};

/* Each kernel NAME exports:
 *   int    NAME_can_implement(const sabre_gemm_args*);          SABRE_OK or SABRE_NOT_SUPPORTED
 *   size_t NAME_workspace_size(const sabre_gemm_args*);
 *   int    NAME_run(const sabre_gemm_args*, sabre_stream_t);      checks, initializes, launches
 *   const char* NAME_last_error(void);                           message of this thread's last failure
 *   const char* NAME_signature(void);                            what the kernel computes, one line:
 *     "sabre-kernel-signature/1 op=gemm dtype=f16 out=f16 layout=tn epilogue=bias_gelu alignment=8 arch=sm_90a"
 *     (op gemm|conv; dtype of A and B, out of D, bias and residual; layout tn|tt, nhwc for conv;
 *     the epilogue as kernel names spell it, linear for none; the alignment in elements the kernel
 *     needs; the SASS arch, or any). Written by the emitter from the kernel's spec; the runtime
 *     refuses a plan step whose tensors, layout or epilogue differ (src/support/kernel_signature.h).
 * and a library of kernels exports the registry below (one per .so; the artifact writer builds
 * its own when it links several kernels, compiling them with -DSABRE_NO_REGISTRY). */
typedef int (*sabre_can_implement_fn)(const sabre_gemm_args*);
typedef size_t (*sabre_workspace_size_fn)(const sabre_gemm_args*);
typedef int (*sabre_run_fn)(const sabre_gemm_args*, sabre_stream_t);
typedef const char* (*sabre_last_error_fn)(void);

typedef struct sabre_kernel_entry {
  const char* name;
  sabre_can_implement_fn can_implement;
  sabre_workspace_size_fn workspace_size;
  sabre_run_fn run;
  sabre_last_error_fn last_error;
} sabre_kernel_entry;

/* Returns the kernels of this library and their count; abi_version is SABRE_KERNEL_ABI_VERSION. */
typedef const sabre_kernel_entry* (*sabre_kernel_registry_fn)(int* count, int* abi_version);
#define SABRE_KERNEL_REGISTRY_SYMBOL "sabre_kernel_registry"

/* Convolution kernels (issue 7): 2-D forward convolution, NHWC activations, KRSC filters:
 *   Y[n,p,q,k] = act(alpha * sum_{r,s,c} X[n, p*stride_h - pad_h + r*dil_h, q*stride_w - pad_w + s*dil_w, c]
 *                                        * W[k, r, s, c] + bias[k] + beta * R[n,p,q,k])
 * (or the residual after the activation; the kernel's name says which), out-of-range input rows
 * and columns reading as zero. Tensors are dense: X [n,h,w,c], W [k,r,s,c], Y and R [n,p,q,k].
 * groups > 1 (grouped and depthwise) is for kernels that say so; others return NOT_SUPPORTED.
 * The filter pointer is `filter` (`w` is the input width). A conv kernel NAME exports NAME_can_implement / NAME_workspace_size / NAME_run / NAME_last_error / NAME_signature
 * with sabre_conv_args in place of sabre_gemm_args, and its library the conv registry below. */
typedef struct sabre_conv_args {
  int64_t n, h, w, c;  /* input */
  int64_t k, r, s;     /* filters: k output channels of r x s x (c / groups) */
  int64_t p, q;        /* output height and width */
  int64_t pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, groups;
  const void* x;
  const void* filter; /* [k, r, s, c / groups] */
  const void* bias;     /* [k]; ignored by kernels without bias */
  const void* residual; /* [n,p,q,k]; ignored by kernels without residual */
  void* y;
  float alpha, beta;
  void* workspace;
  size_t workspace_size;
} sabre_conv_args;

typedef int (*sabre_conv_can_implement_fn)(const sabre_conv_args*);
typedef size_t (*sabre_conv_workspace_size_fn)(const sabre_conv_args*);
typedef int (*sabre_conv_run_fn)(const sabre_conv_args*, sabre_stream_t);

typedef struct sabre_conv_entry {
  const char* name;
  sabre_conv_can_implement_fn can_implement;
  sabre_conv_workspace_size_fn workspace_size;
  sabre_conv_run_fn run;
  sabre_last_error_fn last_error;
} sabre_conv_entry;

typedef const sabre_conv_entry* (*sabre_conv_registry_fn)(int* count, int* abi_version);
#define SABRE_CONV_REGISTRY_SYMBOL "sabre_conv_registry"

#ifdef __cplusplus
}
#endif

#endif /* SABRE_KERNEL_ABI_H */
