// The GPU half of tests/gpu/e2e_models.py: runs one compiled artifact on given inputs and writes
// every output as .npy, twice per case: into output buffers the caller owns, poisoned first (every
// byte 0xFF: NaN in f16, bf16 and f32, -1 in integers, 255 in bool), so an element no kernel wrote
// shows; and into buffers the runtime supplies (data == NULL), the path `sabre run` takes.
//
//   sabre_e2e_run --probe                  exit 0 with a CUDA device, 77 without
//   sabre_e2e_run ARTIFACT CASE_DIR...     each CASE_DIR holds inputs/NAME.npy for every input;
//                                          writes CASE_DIR/gpu/NAME.npy and CASE_DIR/gpu_owned/NAME.npy
//
// All cases run on one Session and one ExecutionContext (CUDA graphs on), in the order given, so a
// case list that repeats a shape replays its graph after other shapes ran. Exit 0 when every case
// ran, 1 on the first error (printed), 77 without a GPU.
#include <cuda_runtime_api.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/npy.h"
#include "runtime/resolve.h"
#include "sabre/session.h"

namespace fs = std::filesystem;

namespace {

#define CUDA_OK(call)                                                                                     \
  do {                                                                                                    \
    cudaError_t e_ = (call);                                                                              \
    if (e_ != cudaSuccess)                                                                                \
      throw std::runtime_error(std::string(#call) + " failed at " + __FILE__ + ":" + std::to_string(__LINE__) + \
                               ": " + cudaGetErrorString(e_));                                            \
  } while (0)

// Device buffers freed on scope exit.
struct DeviceBuffers {
  std::vector<void*> ptrs;
  void* alloc(size_t bytes) {
    void* p = nullptr;
    CUDA_OK(cudaMalloc(&p, bytes ? bytes : 1));
    ptrs.push_back(p);
    return p;
  }
  ~DeviceBuffers() {
    for (void* p : ptrs) cudaFree(p);
  }
};

// The file name `sabre run` gives a tensor name (letters, digits, _ . - kept, others '_').
std::string file_stem(const std::string& name) {
  std::string out;
  for (char c : name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.') ? c : '_';
  return out;
}

sabre::ir::Tensor download(const sabre_tensor& t, const std::string& name) {
  auto dt = sabre::runtime::from_dlpack(t.dtype);
  if (!dt) throw std::runtime_error("output '" + name + "' has a dtype this test cannot read");
  sabre::ir::Tensor h(*dt, std::vector<int64_t>(t.shape, t.shape + t.ndim));
  CUDA_OK(cudaMemcpy(h.mutable_bytes(), t.data, h.nbytes(), cudaMemcpyDeviceToHost));
  return h;
}

void run_case(sabre::Session& session, sabre::ExecutionContext& ctx, const fs::path& dir) {
  DeviceBuffers buf;
  std::vector<sabre::ir::Tensor> host_in;
  std::vector<sabre_tensor> ins;
  std::vector<std::vector<int64_t>> in_shapes;
  for (const auto& sp : session.inputs()) {
    const fs::path f = dir / "inputs" / (file_stem(sp.name) + ".npy");
    sabre::ir::Tensor t = sabre::ir::load_npy(f.string());
    auto want = sabre::runtime::from_dlpack(sp.dtype);
    if (!want) throw std::runtime_error("input '" + sp.name + "' has a dtype this test cannot make");
    if (t.dtype() != *want) t = t.cast(*want);  // e.g. i64 ids for an i32 input
    host_in.push_back(std::move(t));
    in_shapes.push_back(host_in.back().dims());
  }
  for (size_t i = 0; i < host_in.size(); ++i) {
    const auto& t = host_in[i];
    void* p = buf.alloc(t.nbytes());
    CUDA_OK(cudaMemcpy(p, t.bytes(), t.nbytes(), cudaMemcpyHostToDevice));
    ins.push_back(sabre_tensor{session.inputs()[i].name.c_str(), p, SABRE_DEVICE_CUDA, 0,
                               sabre::runtime::to_dlpack(t.dtype()), static_cast<int32_t>(t.rank()), t.dims().data(),
                               nullptr});
  }

  // Caller-owned outputs, poisoned.
  const auto out_shapes = session.output_shapes(in_shapes);
  const auto& specs = session.outputs();
  std::vector<sabre_tensor> outs;
  for (size_t i = 0; i < specs.size(); ++i) {
    auto dt = sabre::runtime::from_dlpack(specs[i].dtype);
    if (!dt) throw std::runtime_error("output '" + specs[i].name + "' has a dtype this test cannot read");
    int64_t n = 1;
    for (int64_t d : out_shapes[i]) n *= d;
    const size_t bytes = static_cast<size_t>(n) * sabre::ir::size_of(*dt);
    void* p = buf.alloc(bytes);
    CUDA_OK(cudaMemset(p, 0xFF, bytes));
    outs.push_back(sabre_tensor{specs[i].name.c_str(), p, SABRE_DEVICE_CUDA, 0, specs[i].dtype,
                                static_cast<int32_t>(out_shapes[i].size()), out_shapes[i].data(), nullptr});
  }
  CUDA_OK(cudaDeviceSynchronize());
  ctx.run(ins, outs);
  fs::create_directories(dir / "gpu");
  for (size_t i = 0; i < outs.size(); ++i)
    sabre::ir::save_npy((dir / "gpu" / (file_stem(specs[i].name) + ".npy")).string(), download(outs[i], specs[i].name));

  // Runtime-owned outputs.
  std::vector<sabre_tensor> owned;
  for (const auto& sp : specs) owned.push_back(sabre_tensor{sp.name.c_str(), nullptr, 0, 0, {}, 0, nullptr, nullptr});
  ctx.run(ins, owned);
  fs::create_directories(dir / "gpu_owned");
  for (size_t i = 0; i < owned.size(); ++i)
    sabre::ir::save_npy((dir / "gpu_owned" / (file_stem(specs[i].name) + ".npy")).string(), download(owned[i], specs[i].name));
  std::printf("ran %s (%zu inputs, %zu outputs, peak activations %llu bytes)\n", dir.string().c_str(), ins.size(),
              outs.size(), static_cast<unsigned long long>(ctx.last_stats().peak_activation_bytes));
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  if (argc == 2 && std::strcmp(argv[1], "--probe") == 0) return 0;
  if (argc < 3) {
    std::fprintf(stderr, "usage: sabre_e2e_run ARTIFACT CASE_DIR... | --probe\n");
    return 2;
  }
  try {
    sabre::Session session(argv[1], 0);
    sabre::ExecutionContext ctx(session);
    for (int i = 2; i < argc; ++i) run_case(session, ctx, argv[i]);
  } catch (const std::exception& e) {
    std::printf("sabre_e2e_run: %s: %s\n", argv[1], e.what());
    return 1;
  }
  return 0;
}
