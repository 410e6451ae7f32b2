/* sabre's C API: load a compiled artifact (model.sabre/) once, run it from many threads through
 * execution contexts, with DLPack-style tensor descriptors so a framework passes its own device
 * pointers and nothing is copied. Every call returns a sabre_rt_status; on failure
 * sabre_last_error() (per thread) says what is wrong and what to do, and the session and
 * context stay usable. docs/RUNTIME.md section 5. Tests: tests/unit/runtime_capi_test.cpp (CPU
 * error paths), tests/gpu/runtime_session_test.cpp (runs). */
#ifndef SABRE_SABRE_H
#define SABRE_SABRE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sabre_rt_status {
  SABRE_SUCCESS = 0,
  SABRE_ERR_INVALID_ARGUMENT = 1, /* unknown input name, wrong dtype/shape, dim outside its range, NULL */
  SABRE_ERR_ARTIFACT = 2,         /* missing or corrupt artifact, wrong format version */
  SABRE_ERR_NO_DEVICE = 3,        /* no CUDA device (or driver) */
  SABRE_ERR_WRONG_ARCH = 4,       /* the GPU is not the one the artifact was compiled for */
  SABRE_ERR_CUDA = 5,             /* a CUDA call or a kernel failed */
  SABRE_ERR_INTERNAL = 6          /* a broken invariant: a bug, please report */
} sabre_rt_status;

/* DLPack's device and dtype codes (kDLCPU = 1, kDLCUDA = 2; kDLInt = 0, kDLUInt = 1, kDLFloat = 2,
 * kDLBfloat = 4, kDLBool = 6). */
enum { SABRE_DEVICE_CPU = 1, SABRE_DEVICE_CUDA = 2 };
enum { SABRE_DTYPE_INT = 0, SABRE_DTYPE_UINT = 1, SABRE_DTYPE_FLOAT = 2, SABRE_DTYPE_BFLOAT = 4, SABRE_DTYPE_BOOL = 6 };

typedef struct sabre_dtype {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes; /* 1 */
} sabre_dtype;

/* A tensor in device memory, as DLPack's DLTensor (strides NULL = dense row-major; only dense
 * tensors are accepted). For an output passed with data == NULL the context supplies its own
 * buffer (valid until the context's next run) and sets data, and shape points at the context's
 * copy of the shape. */
typedef struct sabre_tensor {
  const char* name; /* the model's input/output name */
  void* data;
  int32_t device_type; /* SABRE_DEVICE_CUDA */
  int32_t device_id;
  sabre_dtype dtype;
  int32_t ndim;
  const int64_t* shape;
  const int64_t* strides; /* elements; NULL = dense */
} sabre_tensor;

typedef struct sabre_session sabre_session;
typedef struct sabre_context sabre_context;

/* The message of this thread's last failed call ("" if none). */
const char* sabre_last_error(void);

sabre_rt_status sabre_session_load(const char* artifact_dir, int device_id, sabre_session** out);
void sabre_session_free(sabre_session* s);
int sabre_session_num_inputs(const sabre_session* s);
int sabre_session_num_outputs(const sabre_session* s);
const char* sabre_session_input_name(const sabre_session* s, int i);
const char* sabre_session_output_name(const sabre_session* s, int i);

/* stream: a cudaStream_t to run on, or NULL for a stream the context creates and owns. */
sabre_rt_status sabre_context_create(sabre_session* s, void* stream, sabre_context** out);
void sabre_context_free(sabre_context* c);

/* Runs the model: inputs by name (every input once), outputs by name (each output at most once;
 * NULL/0 = none). Enqueued on the context's stream; returns after the stream finished when
 * sync != 0. */
sabre_rt_status sabre_run(sabre_context* c, const sabre_tensor* inputs, int num_inputs, sabre_tensor* outputs,
                          int num_outputs, int sync);

/* Peak activation memory (arena bytes) of the context's last successful run. */
uint64_t sabre_context_peak_bytes(const sabre_context* c);

#ifdef __cplusplus
}
#endif

#endif /* SABRE_SABRE_H */
