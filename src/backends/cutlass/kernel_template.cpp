#include "backends/cutlass/kernel_template.h"

#include <stdexcept>
#include <vector>

#include "backends/cutlass/kernel_templates.inc"  // kKernelTemplates: templates/*.in, made by CMake

namespace sabre::cutlass_backend {
namespace {

[[noreturn]] void broken(std::string_view what, const std::string& why) {
  throw std::logic_error("invariant: kernel template " + std::string(what) + ": " + why);
}

bool name_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }

}  // namespace

std::string substitute(std::string_view text, std::initializer_list<TemplateValue> values, std::string_view what) {
  std::vector<bool> used(values.size(), false);
  for (auto a = values.begin(); a != values.end(); ++a)
    for (auto b = a + 1; b != values.end(); ++b)
      if (a->first == b->first) broken(what, "value for ${" + std::string(a->first) + "} given twice");
  auto value_of = [&](std::string_view name) -> std::string_view {
    size_t i = 0;
    for (const auto& [n, v] : values) {
      if (n == name) {
        used[i] = true;
        return v;
      }
      ++i;
    }
    broken(what, "placeholder ${" + std::string(name) + "} has no value");
  };
  std::string out;
  out.reserve(text.size() * 2);
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t d = text.find("${", pos);
    if (d == std::string_view::npos) {
      out.append(text.substr(pos));
      break;
    }
    size_t end = d + 2;
    while (end < text.size() && name_char(text[end])) ++end;
    if (end == d + 2 || end >= text.size() || text[end] != '}')
      broken(what, "malformed placeholder at byte " + std::to_string(d) + " (want ${name}, name of a-z, 0-9, _)");
    const std::string_view name = text.substr(d + 2, end - d - 2);
    const std::string_view v = value_of(name);
    const bool line_start = d == 0 || text[d - 1] == '\n';
    const bool line_end = end + 1 < text.size() && text[end + 1] == '\n';
    out.append(text.substr(pos, d - pos));
    out.append(v);
    if (line_start && line_end) {  // a block: the value stands for whole lines, the line's newline included
      if (!v.empty() && v.back() != '\n') broken(what, "block ${" + std::string(name) + "}'s value does not end in a newline");
      pos = end + 2;
    } else {
      pos = end + 1;
    }
  }
  size_t i = 0;
  for (const auto& [n, v] : values)
    if (!used[i++]) broken(what, "value for ${" + std::string(n) + "}, which the template does not use");
  return out;
}

std::string_view kernel_template(std::string_view name) {
  for (const auto& t : kKernelTemplates)
    if (t.name == name) return t.text;
  throw std::logic_error("invariant: no kernel template " + std::string(name) + " is embedded (src/backends/cutlass/templates)");
}

std::string fill_template(std::string_view name, std::initializer_list<TemplateValue> values) {
  return substitute(kernel_template(name), values, name);
}

}  // namespace sabre::cutlass_backend
