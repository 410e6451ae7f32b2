#include "runtime/step_kind.h"

#include <array>

namespace sabre::runtime {

namespace {

// Indexed by StepKind; the runtime's known ops (resolve.h: known_ops) are these names.
constexpr std::array<const char*, kStepKindCount> kStepKindNames = {
    "gemm",   "conv",          "softmax",      "layernorm", "embed_layernorm", "elementwise",
    "where",  "cast",          "reduce",       "permute",   "slice",           "strided_copy",
    "concat", "split",         "gather",       "pool2d",    "global_average_pool", "copy",
    "reshape", "fill",         "iota",         "depthwise_conv", "attention",  "nchw_to_nhwc",
    "im2col", "stem_conv",     "grouped_conv", "gather_elements", "trilu", "cumsum"};
static_assert(kStepKindNames.size() == kStepKindCount);
static_assert(kStepKindNames.back() != nullptr, "a StepKind without a name");

}  // namespace

const char* to_string(StepKind k) {
  const auto i = static_cast<size_t>(k);
  return i < kStepKindCount ? kStepKindNames[i] : "?";
}

std::optional<StepKind> step_kind(const std::string& op) {
  for (size_t i = 0; i < kStepKindCount; ++i)
    if (op == kStepKindNames[i]) return static_cast<StepKind>(i);
  return std::nullopt;
}

}  // namespace sabre::runtime
