// Loading (include/sabre/session.h: Session): an artifact checked on disk, its kernel libraries
// opened and matched to the plan, each step's kind and launch function resolved, the weights
// copied to the GPU. Tests: tests/gpu/runtime_session_test.cpp (GPU), tests/unit/runtime_capi_test.cpp
#include <optional>

#include "runtime/session_internal.h"

#if SABRE_RUNTIME_HAVE_CUDA
#include <dlfcn.h>

#include <cstdio>
#endif

namespace sabre {

namespace {

std::vector<TensorSpec> specs_of(const Plan& p, const std::vector<int>& ids) {
  std::vector<TensorSpec> out;
  for (int id : ids) {
    const TensorInfo& t = p.tensors[static_cast<size_t>(id)];
    TensorSpec s{t.name, to_dlpack(t.dtype), {}};
    for (const auto& d : t.shape) s.shape.push_back(d.str());
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

#if SABRE_RUNTIME_HAVE_CUDA

void cuda_warn(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();
  std::fprintf(stderr, "sabre runtime: warning: %s failed: %s (%s)\n", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

Session::Impl::~Impl() {
  if (weights_dev) {
    cuda_warn(cudaSetDevice(device), "cudaSetDevice (releasing the weights)");
    cuda_warn(cudaFree(weights_dev), "freeing the weights");
  }
}

void* Session::Impl::find_symbol(const std::string& sym, const std::string& library) const {
  for (size_t i = 0; i < kernels->handles.size(); ++i) {
    if (!library.empty() && library != art.kernel_files[i]) continue;
    if (void* p = dlsym(kernels->handles[i], sym.c_str())) return p;
  }
  return nullptr;
}

Session::Session(const std::string& dir, int device_id) : impl_(std::make_shared<Impl>()) {
  Impl& s = *impl_;
  try {
    s.art = load_artifact(dir);
  } catch (const PlanError& e) {
    throw Error(SABRE_ERR_ARTIFACT, e.what());
  }
  // What can be checked without a GPU first, so a broken artifact says so on any machine: every
  // step's op and params were read when the plan loaded (Plan::from_json).
  // Kernel libraries: loaded only now that every file matched the manifest, and every GEMM and
  // conv kernel a step dispatches to checked against the step by its signature, before any CUDA call.
  try {
    s.kernels = open_kernel_libraries(s.art);
  } catch (const PlanError& err) {
    throw Error(SABRE_ERR_ARTIFACT, err.what());
  }
  s.gemm = s.kernels->gemm;
  s.conv = s.kernels->conv;
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    cudaGetLastError();
    throw Error(SABRE_ERR_NO_DEVICE, std::string("no CUDA device: ") +
                                         (e != cudaSuccess ? cudaGetErrorString(e) : "the driver reports 0 GPUs") +
                                         "; sabre runs artifacts on an NVIDIA GPU with its driver installed");
  }
  if (device_id < 0 || device_id >= count)
    throw Error(SABRE_ERR_NO_DEVICE, "no CUDA device " + std::to_string(device_id) + ": this machine has " +
                                         std::to_string(count) + " (ids 0.." + std::to_string(count - 1) + ")");
  s.device = device_id;
  cuda_check(cudaSetDevice(device_id), "cudaSetDevice(" + std::to_string(device_id) + ")");
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, device_id), "cudaGetDeviceProperties");
  try {
    check_device(s.art.manifest, prop.major * 10 + prop.minor, prop.name);
  } catch (const PlanError& err) {
    throw Error(SABRE_ERR_WRONG_ARCH, err.what());
  }
  const Plan& plan = s.art.plan;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& st = plan.steps[i];
    std::string where = "step '" + st.name + "' (" + st.op + ")";
    const std::optional<StepKind> kind = st.kind();  // Plan::from_json refused any op it does not know
    s.kinds.push_back(*kind);
    s.launch.push_back(step_launch_fn(*kind));
    try {
      // gemm and conv steps: dispatch tables and kernels checked by open_kernel_libraries.
      if (*kind == StepKind::elementwise) {
        const ElementwiseParams& ep = st.as<ElementwiseParams>();
        s.programs[i] = native::compile_program(ep.chain);
        const std::string k = ep.kernel.value_or("");
        if (!k.empty()) {
          void* fn = s.find_symbol(k + "_launch", ep.library.value_or(""));
          if (!fn) throw PlanError("plan: " + where + " names kernel '" + k + "' but no kernels/*.so exports " + k + "_launch");
          s.launchers[i] = reinterpret_cast<EwLaunchFn>(fn);
        }
      }
    } catch (const PlanError& err) {
      throw Error(SABRE_ERR_ARTIFACT, err.what());
    } catch (const std::exception& err) {
      throw Error(SABRE_ERR_ARTIFACT, "plan: " + where + ": " + err.what());
    }
  }
  s.in_specs = specs_of(plan, plan.inputs);
  s.out_specs = specs_of(plan, plan.outputs);
  if (s.art.weights->size() > 0) {
    cuda_check(cudaMalloc(&s.weights_dev, s.art.weights->size()),
               "allocating " + std::to_string(s.art.weights->size()) + " bytes of weights on the GPU");
    cuda_check(cudaMemcpy(s.weights_dev, s.art.weights->data(), s.art.weights->size(), cudaMemcpyHostToDevice),
               "copying the weights to the GPU");
  }
}

#else  // no CUDA in this build

Session::Session(const std::string& dir, int) : impl_(std::make_shared<Impl>()) {
  try {
    impl_->art = load_artifact(dir);
    open_kernel_libraries(impl_->art);  // the same checks as with CUDA, so a bad artifact says so here too
  } catch (const PlanError& e) {
    throw Error(SABRE_ERR_ARTIFACT, e.what());
  }
  throw Error(SABRE_ERR_NO_DEVICE, "no CUDA device: this sabre was built without the CUDA toolkit; rebuild it with CUDA to run artifacts");
}

#endif

Session::~Session() = default;
const std::vector<TensorSpec>& Session::inputs() const { return impl_->in_specs; }
const std::vector<TensorSpec>& Session::outputs() const { return impl_->out_specs; }
const std::string& Session::source_model() const { return impl_->art.manifest.source_model; }

std::vector<std::vector<int64_t>> Session::output_shapes(const std::vector<std::vector<int64_t>>& input_shapes) const {
  const Plan& p = impl_->art.plan;
  try {
    auto dims = p.bind_dims(input_shapes);
    std::vector<std::vector<int64_t>> out;
    for (int id : p.outputs) {
      std::vector<int64_t> s;
      for (const auto& d : p.tensors[static_cast<size_t>(id)].shape) s.push_back(d.eval(dims));
      out.push_back(std::move(s));
    }
    return out;
  } catch (const PlanError& e) {
    throw Error(SABRE_ERR_INVALID_ARGUMENT, e.what());
  }
}

}  // namespace sabre
