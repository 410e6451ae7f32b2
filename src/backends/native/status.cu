// Error messages of the native kernels' host API. Tests: tests/gpu/native_kernels_test.cpp
#include <cstdlib>
#include <string>

#include "backends/native/common.cuh"

namespace sabre::native {
namespace {
thread_local std::string g_last_error;
}

const std::string& last_error_message() { return g_last_error; }

namespace detail {

cudaError_t fail(cudaError_t code, const std::string& what) {
  g_last_error = what;
  return code;
}

cudaError_t fail_cuda(cudaError_t code, const char* stmt, const char* file, int line) {
  g_last_error = std::string(stmt) + " failed at " + file + ":" + std::to_string(line) + ": " +
                 cudaGetErrorName(code) + " (" + cudaGetErrorString(code) + ")";
  return code;
}

bool pdl_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("SABRE_PDL");
    return !(v && v[0] == '0');
  }();
  return on;
}

}  // namespace detail
}  // namespace sabre::native
