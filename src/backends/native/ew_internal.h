// Internal to the elementwise-chain host code: operand kinds and the codegen template version.
#pragma once

#include "backends/native/elementwise.h"

namespace sabre::native::detail {

// What a value computes as: f32 (f), int64 (i) or bool (b).
enum class Kind { f, i, b };
Kind kind_of(DType dt);
bool float_only(EwOp op);
bool is_compare(EwOp op);

}  // namespace sabre::native::detail

namespace sabre::native {
// Part of every generated kernel's name: bump when the generated code changes meaning.
inline constexpr const char* kEwTemplateVersion = "ew-v1";
}  // namespace sabre::native
