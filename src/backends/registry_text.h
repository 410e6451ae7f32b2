// The registry a one-kernel library exports (include/sabre/kernel_abi.h), as generated source: the
// text the CUTLASS GEMM and conv emitters and the cuBLASLt emitter write after their entry points.
#pragma once

#include <string>

namespace sabre::backends {

// `entry` is the entry struct ("sabre_kernel_entry", "sabre_conv_entry"), `fn` the registry
// function (SABRE_KERNEL_REGISTRY_SYMBOL's or SABRE_CONV_REGISTRY_SYMBOL's name), `n` the kernel's
// name. `guarded` puts it under #ifndef SABRE_NO_REGISTRY, which the artifact writer defines when it
// links several kernels into one library with a registry of its own.
inline std::string one_kernel_registry(const std::string& entry, const std::string& fn, const std::string& n,
                                       bool guarded) {
  std::string o = "const " + entry + "* " + fn + "(int* count, int* abi_version) {\n";
  o += "  static const " + entry + " entries[] = {\n";
  o += "      {\"" + n + "\", " + n + "_can_implement, " + n + "_workspace_size, " + n + "_run, " + n + "_last_error}};\n";
  o += "  if (count) *count = 1;\n  if (abi_version) *abi_version = SABRE_KERNEL_ABI_VERSION;\n  return entries;\n}\n";
  return guarded ? "#ifndef SABRE_NO_REGISTRY\n" + o + "#endif\n\n" : o + "\n";
}

}  // namespace sabre::backends
