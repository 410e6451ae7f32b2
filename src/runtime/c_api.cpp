// include/sabre/sabre.h over the C++ Session: DLTensors in model order become the Session's named
// tensors, host tensors are staged through device buffers the context keeps, exceptions become
// status codes and a per-thread message. Tests: tests/unit/runtime_capi_test.cpp,
// tests/gpu/runtime_session_test.cpp
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "sabre/sabre.h"
#include "sabre/session.h"

#if SABRE_RUNTIME_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#ifndef SABRE_VERSION_STRING
#error "SABRE_VERSION_STRING is set by CMake from the project version"
#endif

struct sabre_session {
  std::unique_ptr<sabre::Session> s;
  int device = 0;
};

namespace {

// A device buffer the context owns, grown on demand (host inputs are copied through it).
struct DeviceBuffer {
  void* p = nullptr;
  size_t cap = 0;
};

}  // namespace

struct sabre_context {
  sabre_session* session = nullptr;
  std::unique_ptr<sabre::ExecutionContext> c;
  std::vector<DeviceBuffer> staged_in;                 // per input
  std::vector<std::vector<unsigned char>> host_out;    // per output: context-owned host buffers
  std::vector<std::vector<int64_t>> host_out_shape;
  ~sabre_context();
};

namespace {

thread_local std::string g_last_error;

template <class F>
sabre_rt_status guard(F&& f) {
  try {
    f();
    g_last_error.clear();
    return SABRE_SUCCESS;
  } catch (const sabre::Error& e) {
    g_last_error = e.what();
    return e.code;
  } catch (const std::bad_alloc&) {
    g_last_error = "out of host memory";
    return SABRE_ERR_INTERNAL;
  } catch (const std::exception& e) {
    g_last_error = std::string("internal error: ") + e.what();
    return SABRE_ERR_INTERNAL;
  }
}

sabre_rt_status null_arg(const char* what) {
  g_last_error = std::string(what) + " is NULL";
  return SABRE_ERR_INVALID_ARGUMENT;
}

[[noreturn]] void invalid(const std::string& what) { throw sabre::Error(SABRE_ERR_INVALID_ARGUMENT, what); }

const sabre::TensorSpec* spec_at(const std::vector<sabre::TensorSpec>& v, int i) {
  return i >= 0 && static_cast<size_t>(i) < v.size() ? &v[static_cast<size_t>(i)] : nullptr;
}

int index_of(const std::vector<sabre::TensorSpec>& v, const char* name) {
  if (!name) return -1;
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i].name == name) return static_cast<int>(i);
  return -1;
}

// Bytes of a dense tensor; throws for a negative dim or a size past 2^62.
size_t dense_bytes(const DLTensor& t, const std::string& what) {
  if (t.ndim < 0 || (t.ndim > 0 && !t.shape)) invalid(what + " has no shape");
  unsigned __int128 n = (t.dtype.bits * static_cast<unsigned>(t.dtype.lanes) + 7) / 8;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] < 0) invalid(what + " has a negative dim");
    n *= static_cast<uint64_t>(t.shape[d]);
    if (n > (static_cast<unsigned __int128>(1) << 62)) invalid(what + " is too large");
  }
  return static_cast<size_t>(n);
}

#if SABRE_RUNTIME_HAVE_CUDA
void cuda_check(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();
  throw sabre::Error(SABRE_ERR_CUDA, what + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}
#endif

// The named descriptor the C++ Session takes.
sabre_tensor named(const DLTensor& t, const std::string& name) {
  return {name.c_str(), t.data ? static_cast<char*>(t.data) + t.byte_offset : nullptr,
          static_cast<int32_t>(t.device.device_type), t.device.device_id, t.dtype, t.ndim, t.shape, t.strides};
}

}  // namespace

sabre_context::~sabre_context() {
#if SABRE_RUNTIME_HAVE_CUDA
  // The context's stream may still read a staged input: finish it before the buffers go, on the
  // session's device (the calling thread may have moved to another GPU since).
  auto warn = [](cudaError_t e, const char* what) {
    if (e == cudaSuccess) return;
    cudaGetLastError();
    std::fprintf(stderr, "sabre: warning: %s failed: %s\n", what, cudaGetErrorString(e));
  };
  if (session) warn(cudaSetDevice(session->device), "cudaSetDevice (freeing a context)");
  if (c) warn(cudaStreamSynchronize(static_cast<cudaStream_t>(c->stream())), "cudaStreamSynchronize (freeing a context)");
  for (auto& b : staged_in)
    if (b.p) warn(cudaFree(b.p), "freeing a staged input");
#endif
}

namespace sabre {
const char* version() { return SABRE_VERSION_STRING; }
}  // namespace sabre

extern "C" {

const char* sabre_version(void) { return SABRE_VERSION_STRING; }

const char* sabre_last_error(void) { return g_last_error.c_str(); }

sabre_rt_status sabre_session_load(const char* dir, int device_id, sabre_session** out) {
  if (!dir) return null_arg("artifact_dir");
  if (!out) return null_arg("out");
  *out = nullptr;
  return guard([&] {
    auto s = std::make_unique<sabre_session>();
    s->s = std::make_unique<sabre::Session>(dir, device_id);
    s->device = device_id;
    *out = s.release();
  });
}

void sabre_session_free(sabre_session* s) { delete s; }

int sabre_session_num_inputs(const sabre_session* s) { return s ? static_cast<int>(s->s->inputs().size()) : 0; }
int sabre_session_num_outputs(const sabre_session* s) { return s ? static_cast<int>(s->s->outputs().size()) : 0; }

const char* sabre_session_input_name(const sabre_session* s, int i) {
  const sabre::TensorSpec* t = s ? spec_at(s->s->inputs(), i) : nullptr;
  return t ? t->name.c_str() : nullptr;
}
const char* sabre_session_output_name(const sabre_session* s, int i) {
  const sabre::TensorSpec* t = s ? spec_at(s->s->outputs(), i) : nullptr;
  return t ? t->name.c_str() : nullptr;
}
DLDataType sabre_session_input_dtype(const sabre_session* s, int i) {
  const sabre::TensorSpec* t = s ? spec_at(s->s->inputs(), i) : nullptr;
  return t ? t->dtype : DLDataType{0, 0, 0};
}
DLDataType sabre_session_output_dtype(const sabre_session* s, int i) {
  const sabre::TensorSpec* t = s ? spec_at(s->s->outputs(), i) : nullptr;
  return t ? t->dtype : DLDataType{0, 0, 0};
}
int sabre_session_input_ndim(const sabre_session* s, int i) {
  const sabre::TensorSpec* t = s ? spec_at(s->s->inputs(), i) : nullptr;
  return t ? static_cast<int>(t->shape.size()) : 0;
}
int sabre_session_output_ndim(const sabre_session* s, int i) {
  const sabre::TensorSpec* t = s ? spec_at(s->s->outputs(), i) : nullptr;
  return t ? static_cast<int>(t->shape.size()) : 0;
}
const char* sabre_session_input_dim(const sabre_session* s, int i, int d) {
  const sabre::TensorSpec* t = s ? spec_at(s->s->inputs(), i) : nullptr;
  return t && d >= 0 && static_cast<size_t>(d) < t->shape.size() ? t->shape[static_cast<size_t>(d)].c_str() : nullptr;
}
const char* sabre_session_output_dim(const sabre_session* s, int i, int d) {
  const sabre::TensorSpec* t = s ? spec_at(s->s->outputs(), i) : nullptr;
  return t && d >= 0 && static_cast<size_t>(d) < t->shape.size() ? t->shape[static_cast<size_t>(d)].c_str() : nullptr;
}
int sabre_session_input_index(const sabre_session* s, const char* name) { return s ? index_of(s->s->inputs(), name) : -1; }
int sabre_session_output_index(const sabre_session* s, const char* name) { return s ? index_of(s->s->outputs(), name) : -1; }

sabre_rt_status sabre_context_create(sabre_session* s, void* stream, sabre_context** out) {
  if (!s) return null_arg("session");
  if (!out) return null_arg("out");
  *out = nullptr;
  return guard([&] {
    auto c = std::make_unique<sabre_context>();
    c->session = s;
    c->c = std::make_unique<sabre::ExecutionContext>(*s->s, stream);
    c->staged_in.resize(s->s->inputs().size());
    c->host_out.resize(s->s->outputs().size());
    c->host_out_shape.resize(s->s->outputs().size());
    *out = c.release();
  });
}

void sabre_context_free(sabre_context* c) { delete c; }

void* sabre_context_stream(const sabre_context* c) { return c ? c->c->stream() : nullptr; }

sabre_rt_status sabre_run(sabre_context* c, const DLTensor* inputs, int num_inputs, DLTensor* outputs, int num_outputs,
                          int sync) {
  if (!c) return null_arg("context");
  if (num_inputs > 0 && !inputs) return null_arg("inputs");
  if (num_outputs > 0 && !outputs) return null_arg("outputs");
  return guard([&] {
    const auto& in_specs = c->session->s->inputs();
    const auto& out_specs = c->session->s->outputs();
    if (num_inputs != static_cast<int>(in_specs.size()))
      invalid("got " + std::to_string(num_inputs) + " inputs but the model takes " + std::to_string(in_specs.size()) +
              " (sabre_session_input_name lists them in order)");
    if (num_outputs != 0 && num_outputs != static_cast<int>(out_specs.size()))
      invalid("got " + std::to_string(num_outputs) + " outputs but the model has " + std::to_string(out_specs.size()) +
              "; pass all of them in order, or none");
    void* stream = c->c->stream();
    std::vector<sabre_tensor> in, out;
    in.reserve(in_specs.size());
    bool host_outputs = false;
    for (size_t k = 0; k < in_specs.size(); ++k) {
      const DLTensor& t = inputs[k];
      in.push_back(named(t, in_specs[k].name));
      if (t.device.device_type != kDLCPU) continue;
      // A host input: copied into the context's device buffer, then run from there.
      const std::string what = "input '" + in_specs[k].name + "'";
      size_t bytes = dense_bytes(t, what);
      if (t.strides) {
        int64_t want = 1;
        for (int d = t.ndim - 1; d >= 0; --d) {
          if (t.shape[d] != 1 && t.strides[d] != want) invalid(what + " is strided; pass a dense row-major tensor");
          want *= t.shape[d];
        }
      }
      if (bytes && !t.data) invalid(what + " has a null data pointer");
#if SABRE_RUNTIME_HAVE_CUDA
      cuda_check(cudaSetDevice(c->session->device), "cudaSetDevice");
      DeviceBuffer& b = c->staged_in[k];
      if (b.cap < bytes) {
        cuda_check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
        cuda_check(cudaFree(b.p), "freeing the staging buffer of " + what);
        b = {};
        cuda_check(cudaMalloc(&b.p, bytes), "allocating " + std::to_string(bytes) + " bytes for " + what);
        b.cap = bytes;
      }
      if (bytes)
        cuda_check(cudaMemcpyAsync(b.p, static_cast<const char*>(t.data) + t.byte_offset, bytes, cudaMemcpyHostToDevice,
                                   static_cast<cudaStream_t>(stream)),
                   "copying " + what + " to the GPU");
      sabre_tensor& n = in.back();
      n.data = b.p;
      n.device_type = SABRE_DEVICE_CUDA;
      n.device_id = c->session->device;
      n.strides = nullptr;
#else
      (void)stream;
#endif
    }
    for (int k = 0; k < num_outputs; ++k) {
      const DLTensor& t = outputs[k];
      out.push_back(named(t, out_specs[static_cast<size_t>(k)].name));
      if (t.device.device_type == kDLCPU) {
        host_outputs = true;
        out.back().data = nullptr;  // run into the context's device buffer, copy to the host after
      }
    }
    c->c->run(in, out, sync != 0 && !host_outputs);
    for (int k = 0; k < num_outputs; ++k) {
      DLTensor& t = outputs[k];
      const sabre_tensor& r = out[static_cast<size_t>(k)];
      if (t.device.device_type != kDLCPU) {
        if (!t.data) {
          t.data = r.data;
          t.byte_offset = 0;
          t.device = {kDLCUDA, r.device_id};
          t.dtype = r.dtype;
          t.ndim = r.ndim;
          t.shape = const_cast<int64_t*>(r.shape);
          t.strides = nullptr;
        }
        continue;
      }
      const std::string what = "output '" + out_specs[static_cast<size_t>(k)].name + "'";
      DLTensor dev{};
      dev.dtype = r.dtype;
      dev.ndim = r.ndim;
      dev.shape = const_cast<int64_t*>(r.shape);
      const size_t bytes = dense_bytes(dev, what);
      void* dst = t.data ? static_cast<char*>(t.data) + t.byte_offset : nullptr;
      if (dst) {
        std::vector<int64_t> got(t.shape, t.shape + (t.ndim > 0 ? t.ndim : 0)), want(r.shape, r.shape + r.ndim);
        if (t.ndim < 0 || got != want || t.dtype.code != r.dtype.code || t.dtype.bits != r.dtype.bits)
          invalid(what + " on the host does not have the dtype and shape these inputs give");
      } else {
        c->host_out[static_cast<size_t>(k)].resize(bytes);
        c->host_out_shape[static_cast<size_t>(k)].assign(r.shape, r.shape + r.ndim);
        dst = c->host_out[static_cast<size_t>(k)].data();
        t.data = dst;
        t.byte_offset = 0;
        t.device = {kDLCPU, 0};
        t.dtype = r.dtype;
        t.ndim = r.ndim;
        t.shape = c->host_out_shape[static_cast<size_t>(k)].data();
        t.strides = nullptr;
      }
#if SABRE_RUNTIME_HAVE_CUDA
      if (bytes)
        cuda_check(cudaMemcpyAsync(dst, r.data, bytes, cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(stream)),
                   "copying " + what + " to the host");
#endif
    }
#if SABRE_RUNTIME_HAVE_CUDA
    if (host_outputs)
      cuda_check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "running the model (cudaStreamSynchronize)");
#endif
  });
}

uint64_t sabre_context_peak_bytes(const sabre_context* c) { return c ? c->c->last_stats().peak_activation_bytes : 0; }

}  // extern "C"
