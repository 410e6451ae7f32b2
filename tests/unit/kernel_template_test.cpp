// The kernel-template substituter (backends/cutlass/kernel_template.h): placeholders in place and as
// blocks, and each broken invariant refused with a message naming the template and the placeholder.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "backends/cutlass/kernel_template.h"

namespace sabre::cutlass_backend {
namespace {

std::string error_of(std::string_view text, std::initializer_list<TemplateValue> values) {
  try {
    substitute(text, values, "t.cu.in");
  } catch (const std::logic_error& e) {
    return e.what();
  }
  return "";
}

TEST(KernelTemplate, FillsPlaceholdersInPlace) {
  EXPECT_EQ(substitute("using T = ${elem};  // ${note}\n", {{"elem", "float"}, {"note", "f32"}}, "t"),
            "using T = float;  // f32\n");
  // The same placeholder twice takes the one value; '$' without '{' is text.
  EXPECT_EQ(substitute("${n}_run ${n}_last_error $x\n", {{"n", "k1"}}, "t"), "k1_run k1_last_error $x\n");
  // An inline value may be empty or span lines.
  EXPECT_EQ(substitute("a${x}b\n", {{"x", ""}}, "t"), "ab\n");
  EXPECT_EQ(substitute("a${x}b\n", {{"x", "\n"}}, "t"), "a\nb\n");
}

TEST(KernelTemplate, BlockPlaceholderStandsForWholeLines) {
  const std::string_view text = "begin\n${block}\nend\n";
  EXPECT_EQ(substitute(text, {{"block", ""}}, "t"), "begin\nend\n");  // no blank line left
  EXPECT_EQ(substitute(text, {{"block", "one\ntwo\n"}}, "t"), "begin\none\ntwo\nend\n");
  EXPECT_EQ(substitute("${block}\n", {{"block", "x\n"}}, "t"), "x\n");  // at the start of the text
}

TEST(KernelTemplate, RefusesBrokenInvariants) {
  EXPECT_EQ(error_of("a ${x} b", {}), "invariant: kernel template t.cu.in: placeholder ${x} has no value");
  EXPECT_EQ(error_of("a b", {{"x", "1"}}),
            "invariant: kernel template t.cu.in: value for ${x}, which the template does not use");
  EXPECT_EQ(error_of("${x}", {{"x", "1"}, {"x", "2"}}), "invariant: kernel template t.cu.in: value for ${x} given twice");
  EXPECT_NE(error_of("a ${x b", {{"x", "1"}}).find("malformed placeholder at byte 2"), std::string::npos);
  EXPECT_NE(error_of("a ${} b", {}).find("malformed placeholder"), std::string::npos);
  EXPECT_NE(error_of("a ${X} b", {{"X", "1"}}).find("malformed placeholder"), std::string::npos);
  EXPECT_EQ(error_of("a\n${x}\nb\n", {{"x", "no newline"}}),
            "invariant: kernel template t.cu.in: block ${x}'s value does not end in a newline");
}

TEST(KernelTemplate, EmbeddedTemplatesAreFound) {
  // The shared C entry points: the one template every kernel family fills.
  EXPECT_NE(kernel_template("shim.cu.in").find("${name}_can_implement"), std::string_view::npos);
  EXPECT_THROW(kernel_template("no_such.cu.in"), std::logic_error);
  // fill_template names the template in its errors.
  try {
    fill_template("pdl_switch.cu.in", {{"unused", "x"}});
    FAIL() << "an unused value must be refused";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("pdl_switch.cu.in"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sabre::cutlass_backend
