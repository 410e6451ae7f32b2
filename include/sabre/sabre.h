/* sabre's C API: load a compiled artifact (model.sabre/) once, run it from many threads through
 * execution contexts. Tensors are DLPack's own DLTensor (<dlpack/dlpack.h>), so a framework passes
 * its device pointers and nothing is copied; host tensors (kDLCPU) are accepted too and staged
 * through the context. Every call returns a sabre_rt_status; on failure sabre_last_error() (per
 * thread) says what is wrong and what to do, and the session and context stay usable.
 * docs/RUNTIME.md section 5. Link: find_package(sabre) -> sabre::runtime, or pkg-config sabre.
 * Example: examples/run_artifact/. Tests: tests/unit/runtime_capi_test.cpp (CPU error paths),
 * tests/gpu/runtime_session_test.cpp (runs), tests/install/ (the installed package). */
#ifndef SABRE_SABRE_H
#define SABRE_SABRE_H

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sabre_rt_status {
  SABRE_SUCCESS = 0,
  SABRE_ERR_INVALID_ARGUMENT = 1, /* wrong count, dtype, shape or device; dim outside its range; NULL */
  SABRE_ERR_ARTIFACT = 2,         /* missing or corrupt artifact, wrong format version */
  SABRE_ERR_NO_DEVICE = 3,        /* no CUDA device (or driver), or a runtime built without CUDA */
  SABRE_ERR_WRONG_ARCH = 4,       /* the GPU is not the one the artifact was compiled for */
  SABRE_ERR_CUDA = 5,             /* a CUDA call or a kernel failed */
  SABRE_ERR_INTERNAL = 6          /* a broken invariant: a bug, please report */
} sabre_rt_status;

/* DLPack's device and dtype codes (kDLCPU, kDLCUDA; kDLInt, kDLUInt, kDLFloat, kDLBfloat and
 * DLPack 0.8's kDLBool = 6, which this header's DLPack may predate). */
enum { SABRE_DEVICE_CPU = kDLCPU, SABRE_DEVICE_CUDA = kDLCUDA };
enum {
  SABRE_DTYPE_INT = kDLInt,
  SABRE_DTYPE_UINT = kDLUInt,
  SABRE_DTYPE_FLOAT = kDLFloat,
  SABRE_DTYPE_BFLOAT = kDLBfloat,
  SABRE_DTYPE_BOOL = 6
};
typedef DLDataType sabre_dtype;

typedef struct sabre_session sabre_session;
typedef struct sabre_context sabre_context;

/* "MAJOR.MINOR.PATCH" of the library (the SONAME carries MAJOR.MINOR). */
const char* sabre_version(void);

/* The message of this thread's last failed call ("" if none). */
const char* sabre_last_error(void);

sabre_rt_status sabre_session_load(const char* artifact_dir, int device_id, sabre_session** out);
void sabre_session_free(sabre_session* s);

/* The model's inputs and outputs, in the order sabre_run takes them. A dim is a number ("768")
 * or a symbol ("batch") that the run's input shapes bind. NULL / 0 for an index out of range. */
int sabre_session_num_inputs(const sabre_session* s);
int sabre_session_num_outputs(const sabre_session* s);
const char* sabre_session_input_name(const sabre_session* s, int i);
const char* sabre_session_output_name(const sabre_session* s, int i);
DLDataType sabre_session_input_dtype(const sabre_session* s, int i);
DLDataType sabre_session_output_dtype(const sabre_session* s, int i);
int sabre_session_input_ndim(const sabre_session* s, int i);
int sabre_session_output_ndim(const sabre_session* s, int i);
const char* sabre_session_input_dim(const sabre_session* s, int i, int d);
const char* sabre_session_output_dim(const sabre_session* s, int i, int d);
/* The index of the input or output of that name, or -1. */
int sabre_session_input_index(const sabre_session* s, const char* name);
int sabre_session_output_index(const sabre_session* s, const char* name);

/* stream: a cudaStream_t to run on (not the legacy default stream: runs are captured into CUDA
 * graphs), or NULL for a stream the context creates and owns. On a stream of yours, write the
 * inputs on that stream (or order it after their writer). On the context's own stream, each run
 * first waits for the work already issued to the legacy default stream, so inputs written with a
 * plain cudaMemcpy or a kernel launched on stream 0 are complete when the run reads them. */
sabre_rt_status sabre_context_create(sabre_session* s, void* stream, sabre_context** out);
void sabre_context_free(sabre_context* c);
/* The cudaStream_t the context runs on. */
void* sabre_context_stream(const sabre_context* c);

/* Runs the model. inputs: one DLTensor per model input, in the session's input order; dense
 * row-major (strides NULL or the dense strides), on this session's CUDA device or on the host
 * (kDLCPU: copied to the device first). outputs: NULL/0 for none, else one per model output in
 * order. An output with data != NULL must have the shape these inputs give; with data == NULL the
 * context supplies the buffer (valid until its next run) and sets data, ndim and shape (pointing
 * at the context's copy); on kDLCPU that buffer is host memory. Enqueued on the context's stream;
 * returns after the stream finished when sync != 0 or when an output is on the host. */
sabre_rt_status sabre_run(sabre_context* c, const DLTensor* inputs, int num_inputs, DLTensor* outputs, int num_outputs,
                          int sync);

/* Peak activation memory (arena bytes) of the context's last successful run. */
uint64_t sabre_context_peak_bytes(const sabre_context* c);

#ifdef __cplusplus
}
#endif

#endif /* SABRE_SABRE_H */
