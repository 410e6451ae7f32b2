// The step kinds a plan may name (Step::op) and the runtime can run, as an enum: the executor
// resolves each step's kind once at load and dispatches on it (session_steps.cpp), never on the
// op string. Adding a kind: an enumerator, its name in step_kind.cpp, its launch in session_steps.cpp.
// Tests: tests/unit/runtime_step_kind_test.cpp
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace sabre::runtime {

enum class StepKind : uint8_t {
  gemm,
  conv,
  softmax,
  layernorm,
  embed_layernorm,
  elementwise,
  where,
  cast,
  reduce,
  permute,
  slice,
  strided_copy,
  concat,
  split,
  gather,
  pool2d,
  global_average_pool,
  copy,
  reshape,
  fill,
  iota,
  depthwise_conv,
  attention,
  nchw_to_nhwc,
  im2col,
  stem_conv,
  grouped_conv,
  gather_elements,
  trilu,
  cumsum,
  count  // not a kind: the number of kinds
};

inline constexpr size_t kStepKindCount = static_cast<size_t>(StepKind::count);

// The name a plan spells the kind with ("gemm", "embed_layernorm", ...).
const char* to_string(StepKind k);
// The kind a plan's op name stands for, or nullopt for a name this runtime does not know.
std::optional<StepKind> step_kind(const std::string& op);

}  // namespace sabre::runtime
