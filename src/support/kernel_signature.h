// What a generated GEMM or conv kernel computes, as the fixed one-line text its library returns
// from NAME_signature() (include/sabre/kernel_abi.h): the emitters write it from the spec the
// kernel is built from, and the runtime checks it against the plan step that dispatches to the
// kernel before anything runs (docs/TRUST.md). Header-only: the runtime links no backend.
// Tests: tests/unit/trust_test.cpp
#pragma once

#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

namespace sabre::support {

struct KernelSignature {
  std::string op;        // "gemm" | "conv"
  std::string dtype;     // A and B (conv: x and filter): "f16", "bf16", "f32"
  std::string out;       // D, bias and residual (conv: y)
  std::string layout;    // gemm: "tn" | "tt" (kernel_abi.h); conv: "nhwc"
  std::string epilogue;  // kernel_spec.h epilogue_name spelling: "linear", "bias_gelu", "bias_res_relu", ...
  int alignment = 1;     // elements per access the kernel needs of extents, strides and pointers
  std::string arch;      // "sm_90a", "sm_80", ...: the SASS it holds; "any" for a library kernel (cuBLASLt)
  bool operator==(const KernelSignature&) const = default;
};

inline constexpr std::string_view kKernelSignatureTag = "sabre-kernel-signature/1";

// "sabre-kernel-signature/1 op=gemm dtype=f16 out=f16 layout=tn epilogue=bias_gelu alignment=8 arch=sm_90a"
inline std::string to_text(const KernelSignature& s) {
  return std::string(kKernelSignatureTag) + " op=" + s.op + " dtype=" + s.dtype + " out=" + s.out +
         " layout=" + s.layout + " epilogue=" + s.epilogue + " alignment=" + std::to_string(s.alignment) +
         " arch=" + s.arch;
}

// The signature to_text wrote, or nullopt for any other text (another version, a missing or extra
// field, an empty value).
inline std::optional<KernelSignature> parse_signature(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::string tag, word;
  if (!(in >> tag) || tag != kKernelSignatureTag) return std::nullopt;
  std::map<std::string, std::string> kv;
  while (in >> word) {
    const size_t eq = word.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == word.size()) return std::nullopt;
    if (!kv.emplace(word.substr(0, eq), word.substr(eq + 1)).second) return std::nullopt;
  }
  if (kv.size() != 7) return std::nullopt;
  KernelSignature s;
  for (auto [key, field] : {std::pair{"op", &s.op}, {"dtype", &s.dtype}, {"out", &s.out}, {"layout", &s.layout},
                            {"epilogue", &s.epilogue}, {"arch", &s.arch}}) {
    auto it = kv.find(key);
    if (it == kv.end()) return std::nullopt;
    *field = it->second;
  }
  auto a = kv.find("alignment");
  if (a == kv.end() || a->second.size() > 3 || a->second.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  s.alignment = std::stoi(a->second);
  if (s.alignment < 1) return std::nullopt;
  return s;
}

// The C source of `const char* NAME_signature(void)` returning to_text(s), for inside an
// extern "C" block of a generated kernel library.
inline std::string signature_function(const std::string& name, const KernelSignature& s) {
  return "// What this kernel computes, checked by the runtime against the plan step (docs/TRUST.md).\n"
         "const char* " + name + "_signature(void) { return \"" + to_text(s) + "\"; }\n\n";
}

}  // namespace sabre::support
