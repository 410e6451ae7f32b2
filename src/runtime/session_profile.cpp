// Profiling (include/sabre/session.h: ExecutionContext::profile): the plan run step by step,
// `repeats` times, with a CUDA event between steps, and each step's median time and kernel.
// Tests: tests/gpu/runtime_session_test.cpp (GPU)
#include <algorithm>
#include <atomic>

#include "runtime/session_internal.h"
#include "runtime/session_profile_nvtx.h"
#include "runtime/session_profile_report.h"

namespace sabre {

#if SABRE_RUNTIME_HAVE_CUDA

std::vector<StepTime> ExecutionContext::profile(const std::vector<sabre_tensor>& inputs, std::vector<sabre_tensor>& outputs,
                                                int repeats) {
  if (repeats < 1) throw Error(SABRE_ERR_INVALID_ARGUMENT, "profile needs at least one repeat");
  std::vector<StepTime> out;
  impl_->run(inputs, outputs, true, &out, repeats);
  return out;
}

const char* ExecutionContext::Impl::step_label(size_t i) {
  if (step_labels.empty())
    for (const Step& st : plan().steps) step_labels.push_back(runtime::step_label(st.op, st.name));
  return step_labels[i].c_str();
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
        const NvtxRange range(step_label(i));
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
      sabre_gemm_args a = gemm_args(st, sig, ptr);
      gemm_kernel(st, a, &t.kernel);
      t.flops = 2.0 * double(a.m) * double(a.n) * double(a.k) * double(std::max<int64_t>(a.batch, 1));
    } else if (s->kinds[i] == StepKind::conv) {
      sabre_conv_args a = conv_step_args(st, sig, ptr);
      conv_kernel(st, a, &t.kernel);
      t.flops = 2.0 * double(a.n * a.p * a.q) * double(a.k) * double(a.r * a.s) * double(a.c / std::max<int64_t>(a.groups, 1));
    }
    for (auto [ids, shapes] : {std::pair{&st.inputs, &t.input_shapes}, std::pair{&st.outputs, &t.output_shapes}})
      for (int id : *ids) {
        if (id < 0) continue;  // an absent optional input
        shapes->push_back(sig.shapes[static_cast<size_t>(id)]);
        t.bytes += sig.bytes[static_cast<size_t>(id)];
      }
    for (float m : ms[i]) t.runs_us.push_back(1000.0 * m);
    std::sort(ms[i].begin(), ms[i].end());
    t.us = 1000.0 * ms[i][ms[i].size() / 2];
    out.push_back(std::move(t));
  }
}

#endif

}  // namespace sabre
