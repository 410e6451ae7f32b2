// Kernel sources from template files: src/backends/cutlass/templates/*.in, embedded in the binary at
// build time (CMake: sabre_embed_templates), so an installed sabre needs no source tree. A template
// is the text of a generated source with ${name} placeholders; the emitters choose the values.
// A placeholder alone on its line is a block: the line is replaced by the value, which is whole
// lines (empty, or ending in a newline), so an absent block leaves no blank line. Anywhere else a
// placeholder is replaced in place. A '$' not followed by '{' is text.
// The compile cache keys kernels by their emitted source (tune/compile_cache.h), which holds every
// template byte, so editing a template gives its kernels new keys by itself.
// Tests: tests/unit/kernel_template_test.cpp, tests/golden/kernel_source_test.cpp (emitted texts).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace sabre::cutlass_backend {

using TemplateValue = std::pair<std::string_view, std::string_view>;  // placeholder name, value

// `text` with each placeholder replaced by its value. Throws std::logic_error (a broken invariant of
// the emitter that calls it, naming `what`) for a placeholder without a value, a value no placeholder
// takes, a name given twice, a malformed "${", or a block value that is not whole lines.
std::string substitute(std::string_view text, std::initializer_list<TemplateValue> values, std::string_view what);

// The embedded template `name` ("shim.cu.in"); throws std::logic_error if there is none.
std::string_view kernel_template(std::string_view name);

// substitute(kernel_template(name), values, name).
std::string fill_template(std::string_view name, std::initializer_list<TemplateValue> values);

}  // namespace sabre::cutlass_backend
