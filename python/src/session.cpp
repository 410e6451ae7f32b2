// sabre.load's Session and the Tensors its runs return. A run takes DLPack capsules (device
// tensors: their memory is used in place) and NumPy arrays (copied to the device), and runs on the
// session's own stream S, ordered with the callers' streams through events: the producer of each
// input makes S wait (__dlpack__(stream=S)), a caller's stream passed to run() waits for the run,
// and a consumer of an output waits for it when it asks for the data (Tensor.__dlpack__(stream=T)).
// So CUDA graphs can be captured (never on the legacy default stream) and nothing is copied.
// Output memory comes from a stream-ordered pool of the session's device; it is freed on S after
// S waited for every stream the tensor was handed to. Input capsules are held until the run that
// read them is done, so their producer cannot reuse the memory under it.
// Tests: tests/python/test_api.py (no GPU), tests/python/test_gpu.py
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <dlpack/dlpack.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ext.h"
#include "sabre/session.h"

#if SABRE_RUNTIME_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace sabre::python {

namespace {

#if SABRE_RUNTIME_HAVE_CUDA

void cuda_check(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();
  throw sabre::Error(SABRE_ERR_CUDA, what + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

// Where nothing may throw (destructors): a failed release is said once on stderr.
void cuda_warn(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();
  // Tensors that outlive the CUDA runtime at interpreter exit: the driver has released everything.
  if (e == cudaErrorCudartUnloading || e == cudaErrorContextIsDestroyed) return;
  std::fprintf(stderr, "sabre: warning: %s failed: %s\n", what, cudaGetErrorString(e));
}

// DLPack's stream numbers: 1 the legacy default stream, 2 the per-thread default stream.
cudaStream_t dlpack_stream(intptr_t s) {
  if (s == 1) return cudaStreamLegacy;
  if (s == 2) return cudaStreamPerThread;
  return reinterpret_cast<cudaStream_t>(s);
}

// What a session and every tensor it returned share: the device, the stream S and the memory pool.
struct Device {
  int id = 0;
  cudaStream_t stream = nullptr;
  cudaMemPool_t pool = nullptr;

  explicit Device(int device) : id(device) {
    cuda_check(cudaSetDevice(id), "cudaSetDevice");
    cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "creating the session's stream");
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = id;
    cuda_check(cudaMemPoolCreate(&pool, &props), "creating the session's memory pool");
    // Keep freed memory in the pool: the next run's outputs reuse it without asking the driver.
    uint64_t keep = UINT64_MAX;
    cuda_check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "configuring the memory pool");
  }
  ~Device() {
    cuda_warn(cudaSetDevice(id), "cudaSetDevice");
    cuda_warn(cudaStreamSynchronize(stream), "finishing the session's stream");
    cuda_warn(cudaStreamDestroy(stream), "cudaStreamDestroy");
    cuda_warn(cudaMemPoolDestroy(pool), "cudaMemPoolDestroy");
  }
  void* alloc(size_t bytes) {
    void* p = nullptr;
    cuda_check(cudaMallocFromPoolAsync(&p, bytes ? bytes : 1, pool, stream),
               "allocating " + std::to_string(bytes) + " bytes on device " + std::to_string(id));
    return p;
  }
};

struct Event {
  cudaEvent_t e = nullptr;
  Event() { cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate"); }
  ~Event() { cuda_warn(cudaEventDestroy(e), "cudaEventDestroy"); }
};

// Makes `waiter` wait for everything enqueued on `on` so far.
void order_after(cudaStream_t waiter, cudaStream_t on) {
  if (waiter == on) return;
  Event ev;
  cuda_check(cudaEventRecord(ev.e, on), "cudaEventRecord");
  cuda_check(cudaStreamWaitEvent(waiter, ev.e, 0), "cudaStreamWaitEvent");
}

#endif  // SABRE_RUNTIME_HAVE_CUDA

size_t elem_bytes(DLDataType t) { return (static_cast<size_t>(t.bits) * t.lanes + 7) / 8; }

std::string dtype_name(DLDataType t) {
  if (t.code == SABRE_DTYPE_BOOL) return "bool";
  std::string base = t.code == kDLInt ? "int" : t.code == kDLUInt ? "uint" : t.code == kDLFloat ? "float"
                     : t.code == kDLBfloat ? "bfloat" : "code" + std::to_string(t.code) + "_";
  return base + std::to_string(t.bits);
}

py::dict spec_dict(const TensorSpec& s) {
  py::dict d;
  d["name"] = s.name;
  d["dtype"] = dtype_name(s.dtype);
  py::list shape;
  for (const auto& dim : s.shape) {
    bool digits = !dim.empty() && dim.find_first_not_of("0123456789") == std::string::npos;
    if (digits)
      shape.append(std::stoll(dim));
    else
      shape.append(dim);
  }
  d["shape"] = shape;
  return d;
}

}  // namespace

// A device tensor a run returned: DLPack producer (__dlpack__/__dlpack_device__); numpy() in python/sabre.
class Tensor {
 public:
  std::vector<int64_t> shape;
  DLDataType dtype{};
  void* data = nullptr;
  size_t bytes = 0;
#if SABRE_RUNTIME_HAVE_CUDA
  std::shared_ptr<Device> dev;
  std::shared_ptr<Event> ready;              // recorded on S after the run that wrote it
  std::vector<cudaStream_t> consumers;       // streams it was handed to
  ~Tensor() {
    if (!data) return;
    cuda_warn(cudaSetDevice(dev->id), "cudaSetDevice");
    for (cudaStream_t t : consumers) {
      Event ev;
      cuda_warn(cudaEventRecord(ev.e, t), "cudaEventRecord");
      cuda_warn(cudaStreamWaitEvent(dev->stream, ev.e, 0), "cudaStreamWaitEvent");
    }
    cuda_warn(cudaFreeAsync(data, dev->stream), "cudaFreeAsync");
  }
  int device_id() const { return dev->id; }
#else
  int device_id() const { return 0; }
#endif
};

namespace {

// The DLManagedTensor a Tensor hands out: it keeps the Python Tensor alive until the consumer is done.
struct Export {
  DLManagedTensor mt{};
  std::vector<int64_t> shape;
  PyObject* owner = nullptr;
};

void export_deleter(DLManagedTensor* m) {
  auto* e = static_cast<Export*>(m->manager_ctx);
  PyGILState_STATE st = PyGILState_Ensure();
  Py_XDECREF(e->owner);
  PyGILState_Release(st);
  delete e;
}

void capsule_destructor(PyObject* cap) {
  // Never consumed (a consumer renames it "used_dltensor"): the producer's reference goes here.
  if (PyCapsule_IsValid(cap, "dltensor")) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
    if (m && m->deleter) m->deleter(m);
  }
}

py::capsule to_dlpack(py::object self, py::object stream) {
  Tensor& t = self.cast<Tensor&>();
#if SABRE_RUNTIME_HAVE_CUDA
  // The consumer's stream waits for the run that wrote the tensor (None: the legacy default stream).
  intptr_t s = stream.is_none() ? 1 : stream.cast<intptr_t>();
  if (s == 0) raise_invalid("__dlpack__(stream=0) is ambiguous for CUDA: pass 1 for the legacy default stream");
  if (s != -1) {
    cudaStream_t consumer = dlpack_stream(s);
    guarded([&] {
      cuda_check(cudaSetDevice(t.dev->id), "cudaSetDevice");
      cuda_check(cudaStreamWaitEvent(consumer, t.ready->e, 0), "cudaStreamWaitEvent");
    });
    t.consumers.push_back(consumer);
  }
#else
  (void)stream;
#endif
  auto* e = new Export();
  e->shape = t.shape;
  e->owner = self.release().ptr();
  e->mt.dl_tensor.data = t.data;
  e->mt.dl_tensor.device = {kDLCUDA, t.device_id()};
  e->mt.dl_tensor.ndim = static_cast<int32_t>(e->shape.size());
  e->mt.dl_tensor.dtype = t.dtype;
  e->mt.dl_tensor.shape = e->shape.data();
  e->mt.dl_tensor.strides = nullptr;
  e->mt.dl_tensor.byte_offset = 0;
  e->mt.manager_ctx = e;
  e->mt.deleter = export_deleter;
  PyObject* cap = PyCapsule_New(&e->mt, "dltensor", capsule_destructor);
  if (!cap) {
    export_deleter(&e->mt);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(cap);
}

}  // namespace

// sabre.load's session: one execution context on the session's stream.
class PySession {
 public:
  PySession(const std::string& artifact, int device) {
    guarded([&] {
      py::gil_scoped_release nogil;
      session_ = std::make_unique<sabre::Session>(artifact, device);
#if SABRE_RUNTIME_HAVE_CUDA
      dev_ = std::make_shared<Device>(device);
      ctx_ = std::make_unique<sabre::ExecutionContext>(*session_, dev_->stream);
#endif
    });
  }
  ~PySession() { release_inputs(true); }

  py::list inputs() const {
    py::list l;
    for (const auto& s : session_->inputs()) l.append(spec_dict(s));
    return l;
  }
  py::list outputs() const {
    py::list l;
    for (const auto& s : session_->outputs()) l.append(spec_dict(s));
    return l;
  }
  uintptr_t stream() const {
#if SABRE_RUNTIME_HAVE_CUDA
    return reinterpret_cast<uintptr_t>(dev_->stream);
#else
    return 0;
#endif
  }
  int device() const {
#if SABRE_RUNTIME_HAVE_CUDA
    return dev_->id;
#else
    return 0;
#endif
  }
  std::vector<uintptr_t> last_input_pointers() const { return last_ptrs_; }
  py::dict last_stats() const {
    py::dict d;
#if SABRE_RUNTIME_HAVE_CUDA
    const RunStats& s = ctx_->last_stats();
    d["peak_activation_bytes"] = s.peak_activation_bytes;
    d["graph_replayed"] = s.graph_replayed;
#endif
    return d;
  }

  // items: per model input, a DLPack capsule or a C-contiguous NumPy array of the input's dtype.
  // outs: None, or per output a DLPack capsule to write into. caller_stream: None or a stream
  // (DLPack numbering) that waits for the run. Returns the new output Tensors (none when outs).
  py::list run(const py::list& items, const py::object& outs, const py::object& caller_stream);

 private:
  struct Held {
#if SABRE_RUNTIME_HAVE_CUDA
    std::shared_ptr<Event> done;
#endif
    std::vector<DLManagedTensor*> capsules;
  };
  // Calls the deleters of input capsules whose runs finished (all of them when `all`, after the stream).
  void release_inputs(bool all) {
#if SABRE_RUNTIME_HAVE_CUDA
    if (all && dev_) cuda_warn(cudaStreamSynchronize(dev_->stream), "finishing the session's stream");
    std::vector<Held> keep;
    for (auto& h : held_) {
      bool finished = all || cudaEventQuery(h.done->e) == cudaSuccess;
      if (!finished) {
        cudaGetLastError();
        keep.push_back(std::move(h));
        continue;
      }
      for (DLManagedTensor* m : h.capsules)
        if (m->deleter) m->deleter(m);
    }
    held_ = std::move(keep);
#else
    (void)all;
#endif
  }

  std::unique_ptr<sabre::Session> session_;
#if SABRE_RUNTIME_HAVE_CUDA
  std::shared_ptr<Device> dev_;  // before ctx_: the context runs on its stream
  std::unique_ptr<sabre::ExecutionContext> ctx_;
#endif
  std::vector<Held> held_;
  std::vector<uintptr_t> last_ptrs_;
};

namespace {

// Takes ownership of a DLPack capsule's tensor (renaming it, as the protocol asks).
DLManagedTensor* take_capsule(const py::handle& h, const std::string& what) {
  PyObject* cap = h.ptr();
  if (!PyCapsule_IsValid(cap, "dltensor"))
    raise_invalid(what + ": a DLPack capsule was already consumed or is not a DLPack tensor");
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
  if (PyCapsule_SetName(cap, "used_dltensor") != 0) throw py::error_already_set();
  return m;
}

sabre_tensor view(const DLTensor& t, const std::string& name) {
  return {name.c_str(), t.data ? static_cast<char*>(t.data) + t.byte_offset : nullptr,
          static_cast<int32_t>(t.device.device_type), t.device.device_id, t.dtype, t.ndim, t.shape, t.strides};
}

}  // namespace

py::list PySession::run(const py::list& items, const py::object& outs, const py::object& caller_stream) {
#if !SABRE_RUNTIME_HAVE_CUDA
  (void)items, (void)outs, (void)caller_stream;
  raise_status(SABRE_ERR_NO_DEVICE, "no CUDA device: this sabre was built without the CUDA toolkit");
#else
  return guarded([&]() -> py::list {
    const auto& in_specs = session_->inputs();
    const auto& out_specs = session_->outputs();
    if (items.size() != in_specs.size())
      raise_invalid("got " + std::to_string(items.size()) + " inputs but the model takes " + std::to_string(in_specs.size()));
    cuda_check(cudaSetDevice(dev_->id), "cudaSetDevice");
    release_inputs(false);
    cudaStream_t S = dev_->stream;
    cudaStream_t T = caller_stream.is_none() ? nullptr : dlpack_stream(caller_stream.cast<intptr_t>());
    if (T) order_after(S, T);

    Held held;
    held.done = std::make_shared<Event>();
    std::vector<void*> staged;  // host inputs' device copies, freed on S after the run
    // Whatever happens below, every taken capsule is released once S is done with it.
    struct Cleanup {
      PySession* self;
      Held* held;
      std::vector<void*>* staged;
      bool enqueued = false;
      ~Cleanup() {
        for (void* p : *staged) cuda_warn(cudaFreeAsync(p, self->dev_->stream), "cudaFreeAsync");
        if (!held->capsules.empty()) {
          if (!enqueued) cuda_warn(cudaEventRecord(held->done->e, self->dev_->stream), "cudaEventRecord");
          self->held_.push_back(std::move(*held));
        }
      }
    } cleanup{this, &held, &staged};

    std::vector<sabre_tensor> in;
    std::vector<uintptr_t> ptrs;
    std::vector<std::vector<int64_t>> in_shapes;  // host inputs' shapes (the tensors point into them)
    in_shapes.reserve(in_specs.size());
    for (size_t k = 0; k < in_specs.size(); ++k) {
      const std::string& name = in_specs[k].name;
      py::handle item = items[k];
      if (PyCapsule_CheckExact(item.ptr())) {
        DLManagedTensor* m = take_capsule(item, "input '" + name + "'");
        held.capsules.push_back(m);
        const DLTensor& t = m->dl_tensor;
        if (t.device.device_type != kDLCUDA)
          raise_invalid("input '" + name + "' is a DLPack tensor on device type " + std::to_string(t.device.device_type) +
                        ", not CUDA; pass host data as a NumPy array");
        in.push_back(view(t, name));
      } else {
        if (!py::isinstance<py::array>(item)) raise_invalid("input '" + name + "': expected a DLPack capsule or a NumPy array");
        // Read through the buffer protocol, not pybind11's view of NumPy's descriptor: the descriptor's
        // layout changed in NumPy 2, and pybind11 before 2.12 (Debian 12 has 2.10) reads its item size as 0.
        // (The flags field kept its place in NumPy 2, so the contiguity check stays pybind11's.)
        if (!(py::reinterpret_borrow<py::array>(item).flags() & py::array::c_style))
          raise_invalid("input '" + name + "': the array must be C-contiguous");
        py::buffer_info info = py::reinterpret_borrow<py::buffer>(item).request();
        const auto itemsize = static_cast<size_t>(info.itemsize);
        const size_t nbytes = static_cast<size_t>(info.size) * itemsize;
        // The array's dtype was matched to the input's by python/sabre; its byte size must agree too.
        if (itemsize != elem_bytes(in_specs[k].dtype))
          raise_invalid("input '" + name + "' has " + std::to_string(itemsize) + "-byte elements but the model expects " +
                        dtype_name(in_specs[k].dtype));
        void* p = dev_->alloc(nbytes);
        staged.push_back(p);
        if (nbytes)
          cuda_check(cudaMemcpyAsync(p, info.ptr, nbytes, cudaMemcpyHostToDevice, S),
                     "copying input '" + name + "' to the GPU");
        in_shapes.emplace_back(info.shape.begin(), info.shape.end());
        sabre_tensor t{name.c_str(), p, SABRE_DEVICE_CUDA, dev_->id, in_specs[k].dtype,
                       static_cast<int32_t>(info.ndim), in_shapes.back().data(), nullptr};
        in.push_back(t);
      }
      ptrs.push_back(reinterpret_cast<uintptr_t>(in.back().data));
    }

    std::vector<sabre_tensor> out;
    py::list result;
    std::vector<std::unique_ptr<Tensor>> made;
    if (!outs.is_none()) {
      auto ol = outs.cast<py::list>();
      if (ol.size() != out_specs.size())
        raise_invalid("got " + std::to_string(ol.size()) + " outputs but the model has " + std::to_string(out_specs.size()));
      for (size_t k = 0; k < out_specs.size(); ++k) {
        DLManagedTensor* m = take_capsule(ol[k], "output '" + out_specs[k].name + "'");
        held.capsules.push_back(m);
        out.push_back(view(m->dl_tensor, out_specs[k].name));
      }
    } else {
      std::vector<std::vector<int64_t>> shapes;
      for (const auto& t : in) shapes.emplace_back(t.shape, t.shape + (t.ndim > 0 && t.shape ? t.ndim : 0));
      std::vector<std::vector<int64_t>> oshapes = session_->output_shapes(shapes);
      for (size_t k = 0; k < out_specs.size(); ++k) {
        auto t = std::make_unique<Tensor>();
        t->dev = dev_;
        t->shape = oshapes[k];
        t->dtype = out_specs[k].dtype;
        size_t n = elem_bytes(t->dtype);
        for (int64_t d : t->shape) n *= static_cast<size_t>(d);
        t->bytes = n;
        t->data = dev_->alloc(n);
        out.push_back({out_specs[k].name.c_str(), t->data, SABRE_DEVICE_CUDA, dev_->id, t->dtype,
                       static_cast<int32_t>(t->shape.size()), t->shape.data(), nullptr});
        made.push_back(std::move(t));
      }
    }
    // With the GIL held: the context is not for two threads at once, and a run only enqueues.
    ctx_->run(in, out, false);
    cuda_check(cudaEventRecord(held.done->e, S), "cudaEventRecord");
    cleanup.enqueued = true;
    if (T) cuda_check(cudaStreamWaitEvent(T, held.done->e, 0), "cudaStreamWaitEvent");
    last_ptrs_ = ptrs;
    for (auto& t : made) {
      t->ready = held.done;
      result.append(py::cast(t.release(), py::return_value_policy::take_ownership));
    }
    return result;
  });
#endif
}

void register_session(py::module_& m) {
  py::class_<Tensor>(m, "Tensor", "A device tensor a run returned (DLPack: torch.from_dlpack(t), cupy.from_dlpack(t)).")
      .def_property_readonly("shape", [](const Tensor& t) { return py::tuple(py::cast(t.shape)); })
      .def_property_readonly("dtype", [](const Tensor& t) { return dtype_name(t.dtype); })
      .def_property_readonly("nbytes", [](const Tensor& t) { return t.bytes; })
      .def_property_readonly("device", [](const Tensor& t) { return t.device_id(); })
      .def_property_readonly("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data); })
      .def("__dlpack_device__", [](const Tensor& t) { return py::make_tuple(static_cast<int>(kDLCUDA), t.device_id()); })
      .def(
          "__dlpack__",
          [](py::object self, py::object stream, py::kwargs) { return to_dlpack(std::move(self), std::move(stream)); },
          py::arg("stream") = py::none())
      .def("_copy_to_host", [](Tensor& t, py::buffer dst) {
        py::buffer_info b = dst.request(true);
        if (static_cast<size_t>(b.size * b.itemsize) != t.bytes) raise_invalid("host buffer has the wrong size");
#if SABRE_RUNTIME_HAVE_CUDA
        guarded([&] {
          py::gil_scoped_release nogil;
          cuda_check(cudaSetDevice(t.dev->id), "cudaSetDevice");
          cuda_check(cudaEventSynchronize(t.ready->e), "waiting for the run (cudaEventSynchronize)");
          if (t.bytes) cuda_check(cudaMemcpy(b.ptr, t.data, t.bytes, cudaMemcpyDeviceToHost), "copying an output to the host");
        });
#endif
      });

  py::class_<PySession>(m, "_Session")
      .def(py::init<const std::string&, int>(), py::arg("artifact"), py::arg("device"))
      .def_property_readonly("inputs", &PySession::inputs)
      .def_property_readonly("outputs", &PySession::outputs)
      .def_property_readonly("stream", &PySession::stream)
      .def_property_readonly("device", &PySession::device)
      .def_property_readonly("last_input_pointers", &PySession::last_input_pointers)
      .def_property_readonly("last_stats", &PySession::last_stats)
      .def("run", &PySession::run, py::arg("inputs"), py::arg("outputs"), py::arg("stream"));
}

}  // namespace sabre::python
