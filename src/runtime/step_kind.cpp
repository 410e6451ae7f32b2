#include "runtime/step_kind.h"

#include <array>

namespace sabre::runtime {

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
