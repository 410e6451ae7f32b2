// Profiling (include/sabre/session.h: ExecutionContext::profile): the plan run step by step,
// `repeats` times, with a CUDA event between steps, and each step's median time and kernel.
// Tests: tests/gpu/runtime_session_test.cpp (GPU)
#include <algorithm>
#include <atomic>

#include "runtime/session_internal.h"

namespace sabre {

#if SABRE_RUNTIME_HAVE_CUDA

std::vector<StepTime> ExecutionContext::profile(const std::vector<sabre_tensor>& inputs, std::vector<sabre_tensor>& outputs,
                                                int repeats) {
  if (repeats < 1) throw Error(SABRE_ERR_INVALID_ARGUMENT, "profile needs at least one repeat");
  std::vector<StepTime> out;
  impl_->run(inputs, outputs, true, &out, repeats);
  return out;
}

namespace {
// A host callback that holds its stream until the enqueuing thread has queued everything behind it.
void CUDART_CB hold_stream(void* flag) {
  auto* go = static_cast<std::atomic<bool>*>(flag);
  while (!go->load(std::memory_order_acquire)) {
  }
}
}  // namespace

void ExecutionContext::Impl::profile_steps(const Signature& sig, const std::vector<void*>& ptr, std::vector<StepTime>& out,
                                           int repeats) {
  const Plan& p = plan();
  const size_t n = p.steps.size();
  std::vector<cudaEvent_t> ev(n + 1, nullptr);
  struct Events {
    std::vector<cudaEvent_t>& v;
    ~Events() {
      for (cudaEvent_t e : v)
        if (e) cudaEventDestroy(e);
    }
  } destroy{ev};
  for (auto& e : ev) cuda_check(cudaEventCreate(&e), "cudaEventCreate");
  std::vector<std::vector<float>> ms(n);
  for (int r = 0; r < repeats; ++r) {
    std::atomic<bool> go{false};
    cuda_check(cudaLaunchHostFunc(stream, hold_stream, &go), "cudaLaunchHostFunc");
    try {
      cuda_check(cudaEventRecord(ev[0], stream), "cudaEventRecord");
      for (size_t i = 0; i < n; ++i) {
        enqueue(i, sig, ptr);
        cuda_check(cudaEventRecord(ev[i + 1], stream), "cudaEventRecord");
      }
    } catch (...) {
      go.store(true, std::memory_order_release);
      // The error being thrown is the one to report; a failed drain is only said.
      cuda_warn(cudaStreamSynchronize(stream), "cudaStreamSynchronize (after a failed profile step)");
      throw;
    }
    go.store(true, std::memory_order_release);
    cuda_check(cudaStreamSynchronize(stream), "running the model (cudaStreamSynchronize)");
    for (size_t i = 0; i < n; ++i) {
      float t = 0;
      cuda_check(cudaEventElapsedTime(&t, ev[i], ev[i + 1]), "cudaEventElapsedTime");
      ms[i].push_back(t);
    }
  }
  out.clear();
  for (size_t i = 0; i < n; ++i) {
    const Step& st = p.steps[i];
    StepTime t;
    t.index = i;
    t.op = st.op;
    t.name = st.name;
    if (s->kinds[i] == StepKind::gemm) {
      gemm_kernel(st, gemm_args(st, sig, ptr), &t.kernel);
    } else if (s->kinds[i] == StepKind::conv) {
      sabre_conv_args a = conv_step_args(st, sig, ptr);
      conv_kernel(st, a, &t.kernel);
    }
    std::sort(ms[i].begin(), ms[i].end());
    t.us = 1000.0 * ms[i][ms[i].size() / 2];
    out.push_back(std::move(t));
  }
}

#endif

}  // namespace sabre
