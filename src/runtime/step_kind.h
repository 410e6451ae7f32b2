// The step kinds a plan may name (Step::op) and the runtime can run: the enum StepKind and its
// names are declared with the kinds' params (step_params.h), so that a kind is one place; the
// executor resolves each step's kind once at load and dispatches on it (session_steps.cpp), never
// on the op string. Tests: tests/unit/runtime_step_kind_test.cpp
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "runtime/step_params.h"

namespace sabre::runtime {

// The name a plan spells the kind with ("gemm", "embed_layernorm", ...).
const char* to_string(StepKind k);
// The kind a plan's op name stands for, or nullopt for a name this runtime does not know.
std::optional<StepKind> step_kind(const std::string& op);

}  // namespace sabre::runtime
