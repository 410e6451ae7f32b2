// Several kernels in one translation unit: the compile cache's batch builds (compile_cache.h).
//
// Most of a CUTLASS kernel's nvcc time is parsing the CuTe/CUTLASS headers, once per translation
// unit, so kernels that share their headers and preprocessor state are cheaper compiled together.
// A batchable source is a preamble (only preprocessor lines, comments and blank lines: the includes
// and the macros they see) followed by a body without #include or #undef; the macros a body defines are
// undefined after it, so every body sees the preamble's state, as alone. Kernels whose jobs name the
// same batch family and have the same flags and the same preamble (comments aside) share a unit: the
// preamble once, then each body in a namespace of its own, its registry function renamed. The batch
// is compiled once into an object; each kernel's library is linked from that object, exporting only
// that kernel's symbols, so the cache keeps one library and one key per kernel, keyed by the kernel's
// own source as when built alone. Tests: tests/unit/compile_batch_test.cpp
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tune/compile_cache.h"

namespace sabre::tune {

struct BatchableSource {
  std::string preamble;  // the preprocessor lines, comments dropped
  std::string body;      // the rest, verbatim
  std::vector<std::string> macros;  // the names the body #defines
};

// The split of a job's source, or nullopt where it cannot share a unit: no batch family, a name that
// is no C identifier, a body that includes or undefines anything, or no body.
std::optional<BatchableSource> split_for_batch(const CompileJob& job);

// The work of compiling jobs[todo...]: each unit is one or more indices into `jobs` (in todo's order),
// compiled as one translation unit. Jobs group by family, flags and preamble; a group is cut into
// balanced batches of at most b kernels, b <= max_batch the size that finishes soonest with
// `parallel` compilers at a time (a unit's time grows slower than its kernel count, but fewer units
// than compilers leave compilers idle); ties go to the larger batch, which spends less CPU.
std::vector<std::vector<size_t>> plan_compile_units(const std::vector<CompileJob>& jobs, const std::vector<size_t>& todo,
                                                    int max_batch, int parallel);

// The translation unit of a batch. Throws std::logic_error where the jobs cannot share one (an
// invariant of plan_compile_units).
std::string batch_source(const std::vector<const CompileJob*>& batch);

// What the library of `job`, linked from its batch's object, exports: every symbol of its body that
// starts with its name, and the registry functions it defines under their ABI names (alias, the
// name batch_source gave the definition).
struct BatchExports {
  std::vector<std::string> symbols;
  std::vector<std::pair<std::string, std::string>> aliases;
};
BatchExports batch_exports(const CompileJob& job);

// The ld version script that keeps `e`'s symbols global and every other symbol local.
std::string version_script(const BatchExports& e);

}  // namespace sabre::tune
