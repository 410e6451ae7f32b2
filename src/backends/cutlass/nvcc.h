// The nvcc driver: writes a kernel's .cu, runs nvcc into a shared library with the C ABI of
// include/sabre/kernel_abi.h, keeps the log, and checks the SASS targets in the result
// (an sm90 kernel must contain sm_90a code). Tests: tests/kernels/ (label nvcc).
#pragma once

#include <string>
#include <vector>

#include "backends/cutlass/conv_emitter.h"
#include "backends/cutlass/conv_sm90.h"
#include "backends/cutlass/conv_spec.h"
#include "backends/cutlass/emitter.h"
#include "backends/cutlass/kernel_spec.h"

namespace sabre::cutlass_backend {

struct NvccOptions {
  std::string nvcc;          // empty: $SABRE_NVCC, $CUDA_HOME/bin/nvcc, /usr/local/cuda/bin/nvcc, then PATH
  std::string cutlass_dir;   // holds include/cutlass; empty: the one sabre was configured with
  std::string sabre_include; // holds sabre/kernel_abi.h; empty: $SABRE_INCLUDE_DIR or the source tree's
  int target_sm = 90;
  std::vector<std::string> extra_flags;
};

struct CompileResult {
  std::string name;
  std::string source;   // path of the .cu
  std::string library;  // path of the .so
  std::string log;      // nvcc's output (and the SASS check's complaint, if any)
  std::string command;
  double seconds = 0;
  bool ok = false;
};

// The nvcc command line that builds `source` into the shared library `library`.
std::vector<std::string> nvcc_command(const KernelSpec& s, const std::string& source, const std::string& library,
                                      const NvccOptions& opts);

// Emits, compiles and checks one kernel into out_dir/NAME.{cu,so,log}. Never throws for compile
// failures (the result says what failed); throws std::invalid_argument for a spec the target cannot run.
CompileResult compile_kernel(const KernelSpec& s, const std::string& out_dir, const NvccOptions& opts);

// compile_kernel for each spec, at most `jobs` nvcc processes at a time; results in spec order.
std::vector<CompileResult> compile_kernels(const std::vector<KernelSpec>& specs, const std::string& out_dir,
                                           const NvccOptions& opts, int jobs);

// The same for convolution kernels (conv_emitter.h): emit, nvcc for the target's own SASS, check.
std::vector<std::string> nvcc_conv_command(const std::string& source, const std::string& library,
                                           const NvccOptions& opts);
CompileResult compile_conv_kernel(const ConvSpec& s, const std::string& out_dir, const NvccOptions& opts);
std::vector<CompileResult> compile_conv_kernels(const std::vector<ConvSpec>& specs, const std::string& out_dir,
                                                const NvccOptions& opts, int jobs);

// The same for the sm90 conv family (conv_sm90.h): sm_90a code (sm90_conv_gencode_flags), checked for
// an sm_90a cubin; opts.target_sm must be 90 (compile_sm90_conv_kernel throws std::invalid_argument else).
std::vector<std::string> nvcc_sm90_conv_command(const std::string& source, const std::string& library,
                                                const NvccOptions& opts);
CompileResult compile_sm90_conv_kernel(const Sm90ConvSpec& s, const std::string& out_dir, const NvccOptions& opts);
std::vector<CompileResult> compile_sm90_conv_kernels(const std::vector<Sm90ConvSpec>& specs,
                                                     const std::string& out_dir, const NvccOptions& opts, int jobs);

// Whether `library` holds SASS for `want` (sm_90a, sm_80, ...), as the cuobjdump beside `nvcc` lists
// it: ok with an empty note when it does; ok with a note saying so where no cuobjdump is installed (the
// emitted sources' #error guards still hold); else not ok, the note saying what the library holds.
struct SassCheck {
  bool ok = false;
  std::string note;
};
SassCheck check_sass(const std::string& library, const std::string& want, const std::string& nvcc);

// Runs `argv` with stdout and stderr into `output`; returns the exit status (-1 if it could not start).
int run_process(const std::vector<std::string>& argv, std::string& output);

std::string find_nvcc();
// The directory holding sabre/kernel_abi.h: $SABRE_INCLUDE_DIR, else the source tree's include/.
std::string sabre_include_dir();

}  // namespace sabre::cutlass_backend
