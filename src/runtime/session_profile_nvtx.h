// NVTX ranges around plan steps (domain "sabre"), named as the profile trace names them
// (session_profile_report.h: step_label), so Nsight Systems shows which step a kernel belongs to.
// NVTX3 is header-only and costs a call through a null hook when no tool is attached.
// Tests: tests/gpu/runtime_session_test.cpp (the ranges are pushed and popped around every step)
#pragma once

#if SABRE_RUNTIME_HAVE_CUDA
#include <nvtx3/nvToolsExt.h>

namespace sabre::runtime {

inline nvtxDomainHandle_t nvtx_domain() {
  static const nvtxDomainHandle_t d = nvtxDomainCreateA("sabre");
  return d;
}

// One range for the scope: pushed on construction, popped on destruction (an exception included).
class NvtxRange {
 public:
  explicit NvtxRange(const char* label) {
    nvtxEventAttributes_t a{};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = label;
    nvtxDomainRangePushEx(nvtx_domain(), &a);
  }
  ~NvtxRange() { nvtxDomainRangePop(nvtx_domain()); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace sabre::runtime
#endif
