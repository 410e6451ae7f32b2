// Kernel libraries of an artifact: opened (dlopen) only after load_artifact has verified the whole
// manifest, their registries indexed by kernel name, and every GEMM and conv kernel a plan step
// dispatches to checked against that step through the signature its library states
// (NAME_signature, include/sabre/kernel_abi.h) before anything runs. No CUDA call here, so a
// mismatch is reported on any machine (docs/TRUST.md). Tests: tests/unit/trust_test.cpp
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/artifact.h"
#include "sabre/kernel_abi.h"
#include "support/kernel_signature.h"

namespace sabre::runtime {

// What a gemm or conv step needs of the kernels it dispatches to, from the plan: the operand and
// output dtypes of its tensors (A or x, D or y), the layout ("tn"/"tt"; "nhwc" for conv), the
// epilogue and the artifact's arch. Throws PlanError when the step cannot say (no epilogue, a bad
// tensor id).
support::KernelSignature expected_signature(const Plan& plan, const Step& step, const ManifestInfo& m);

// Why kernel `kernel`, whose library states `have`, cannot run `step`, which needs `want` (the
// fields that differ), or nullopt. `aligned_to` > 0 for a kernel of the step's dispatch_aligned
// table: the kernel's alignment must divide it. arch "any" (a library kernel) matches every arch.
std::optional<std::string> signature_mismatch(const support::KernelSignature& want, const support::KernelSignature& have,
                                              int aligned_to);

// Checks `text`, what kernel `kernel`'s NAME_signature returned (nullptr: the symbol is missing),
// against `step`. Throws PlanError naming the step, the kernel and both signatures.
void check_kernel_signature(const Plan& plan, const Step& step, const ManifestInfo& m, const std::string& kernel,
                            const char* text, int aligned_to);

// The dlopened kernel libraries of a verified artifact and the kernels they define.
struct KernelLibraries {
  std::vector<void*> handles;  // manifest order; dlclosed by the destructor
  std::map<std::string, sabre_kernel_entry> gemm;
  std::map<std::string, sabre_conv_entry> conv;
  KernelLibraries() = default;
  KernelLibraries(const KernelLibraries&) = delete;
  KernelLibraries& operator=(const KernelLibraries&) = delete;
  ~KernelLibraries();
};

// dlopens art.kernel_libraries (which load_artifact has resolved inside the artifact and
// checksummed), indexes their GEMM and conv registries (this runtime's ABI version, no name twice)
// and checks every gemm and conv step: a dispatch table, each kernel it names defined, and each
// kernel's signature matching the step. Throws PlanError saying what is wrong.
std::unique_ptr<KernelLibraries> open_kernel_libraries(const LoadedArtifact& art);

}  // namespace sabre::runtime
