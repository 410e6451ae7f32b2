// sabre::json on nlohmann-json (src/support/json.h): what sabre writes reads back the same, and a
// malformed file gives one line with its line and column, never a C++ or library type name.
#include <gtest/gtest.h>

#include <string>

#include "support/json.h"

namespace {

using sabre::json::Array;
using sabre::json::Object;
using sabre::json::Value;

std::string parse_error(const std::string& text) {
  try {
    sabre::json::parse(text);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(parsed)";
}

TEST(Json, WritesWholeNumbersAsIntegersSortedKeysAndReadsThemBack) {
  Object o{{"size", Value(219520.0)},
           {"alpha", Value(0.125)},
           {"name", Value("/enc/\"q\"\n\x01")},
           {"list", Value(Array{Value(true), Value(), Value(-3.0)})}};
  const std::string text = Value(o).dump();
  EXPECT_EQ(text, R"({"alpha":0.125,"list":[true,null,-3],"name":"/enc/\"q\"\n\u0001","size":219520})");
  Value back = sabre::json::parse(text);
  EXPECT_EQ(back.get("size")->num(), 219520.0);
  EXPECT_EQ(back.get("name")->str(), "/enc/\"q\"\n\x01");
  EXPECT_EQ(back.dump(), text);
}

TEST(Json, ReadsFilesOlderSabreWrote) {
  // The hand-written writer's forms: %.17g fractions, 1e-05-style exponents, \u escapes, nesting.
  Value v = sabre::json::parse(R"( {"a":0.10000000000000001,"b":1e-05,"c":"\u00e9\u0041","d":{"e":[]}} )");
  EXPECT_EQ(v.get("a")->num(), 0.1);
  EXPECT_EQ(v.get("b")->num(), 1e-05);
  EXPECT_EQ(v.get("c")->str(), "\xc3\xa9" "A");
  EXPECT_TRUE(v.get("d")->get("e")->arr().empty());
}

TEST(Json, MalformedTextIsOneLineWithLineAndColumn) {
  const std::string e = parse_error("{\n  \"a\": 1,\n  \"b\": @\n}");
  EXPECT_NE(e.find("line 3"), std::string::npos) << e;
  EXPECT_NE(e.find("column"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  for (const std::string& bad : {std::string("{\"a\":1"), std::string("[1,]"), std::string("{\"a\":nan}"),
                                 std::string("{\"a\":+1}"), std::string("\"\xff\""), std::string("[1] x"),
                                 std::string("")}) {
    const std::string m = parse_error(bad);
    EXPECT_EQ(m.rfind("json: ", 0), 0u) << bad << " -> " << m;
    EXPECT_EQ(m.find("json.exception"), std::string::npos) << m;
    EXPECT_EQ(m.find("::"), std::string::npos) << m;
  }
}

TEST(Json, DeepNestingIsRefusedNotAStackOverflow) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_NE(parse_error(deep).find("nesting deeper than"), std::string::npos);
  const std::string ok = std::string(150, '[') + std::string(150, ']');
  EXPECT_NO_THROW(sabre::json::parse(ok));
}

}  // namespace
