// Element types of sabre's IR, and host-side conversions for the 16-bit floats.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace sabre::ir {

// str (ONNX STRING) runs only on the CPU reference: its elements live in Tensor::strings(), not in bytes.
enum class DType : uint8_t { f32, f16, bf16, f64, i64, i32, i8, u8, boolean, str, kCount };

inline constexpr size_t kDTypeCount = static_cast<size_t>(DType::kCount);

struct DTypeInfo {
  std::string_view name;  // the text form: "f32", "f16", ...
  size_t size;            // bytes per element (0 for str: variable length, kept outside the bytes)
  bool is_float;
};

inline constexpr std::array<DTypeInfo, kDTypeCount> kDTypeInfo = {{
    {"f32", 4, true},
    {"f16", 2, true},
    {"bf16", 2, true},
    {"f64", 8, true},
    {"i64", 8, false},
    {"i32", 4, false},
    {"i8", 1, false},
    {"u8", 1, false},
    {"bool", 1, false},
    {"string", 0, false},
}};
static_assert(kDTypeInfo.size() == kDTypeCount, "one DTypeInfo row per DType");

inline const DTypeInfo& info(DType t) { return kDTypeInfo[static_cast<size_t>(t)]; }
inline std::string_view name(DType t) { return info(t).name; }
inline size_t size_of(DType t) { return info(t).size; }
inline bool is_float(DType t) { return info(t).is_float; }

inline std::optional<DType> parse_dtype(std::string_view s) {
  for (size_t i = 0; i < kDTypeCount; ++i)
    if (kDTypeInfo[i].name == s) return static_cast<DType>(i);
  return std::nullopt;
}

// IEEE binary16 <-> float, round to nearest even. Host only.
uint16_t float_to_half(float f);
float half_to_float(uint16_t h);
// bfloat16 <-> float, round to nearest even; NaN stays NaN.
uint16_t float_to_bf16(float f);
float bf16_to_float(uint16_t b);

}  // namespace sabre::ir
