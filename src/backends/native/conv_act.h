// The activations sabre's native convolutions apply in their store (depthwise_conv2d), by the names
// plans use. Host-only: the runtime's plan reader includes it.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace sabre::native {

// Of v = conv + bias: silu v·sigmoid(alpha·v) (SiLU and ONNX Swish), sigmoid 1/(1 + e^-v),
// hard_swish v·clamp(alpha·v + beta, 0, 1), hard_sigmoid clamp(alpha·v + beta, 0, 1).
enum class ConvAct : uint8_t { none, silu, sigmoid, hard_swish, hard_sigmoid, kCount };

inline constexpr std::array<std::string_view, size_t(ConvAct::kCount)> kConvActNames = {
    "none", "silu", "sigmoid", "hard_swish", "hard_sigmoid"};

inline std::string_view conv_act_name(ConvAct a) { return kConvActNames[size_t(a)]; }

// A plan's name (not "none": an absent activation is none); nullopt for any other.
inline std::optional<ConvAct> parse_conv_act(std::string_view name) {
  for (size_t i = 1; i < kConvActNames.size(); ++i)
    if (kConvActNames[i] == name) return ConvAct(i);
  return std::nullopt;
}

}  // namespace sabre::native
