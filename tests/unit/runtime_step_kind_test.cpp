// The runtime's step kinds: every kind has one name, the names are the runtime's known ops, and
// each is documented in docs/RUNTIME.md section 3. The launch table's completeness is a
// static_assert in src/runtime/session_steps.cpp.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "runtime/resolve.h"
#include "runtime/step_kind.h"

using namespace sabre::runtime;

TEST(RuntimeStepKind, EveryKindRoundTripsThroughItsName) {
  std::set<std::string> seen;
  for (size_t k = 0; k < kStepKindCount; ++k) {
    const auto kind = static_cast<StepKind>(k);
    const std::string name = to_string(kind);
    EXPECT_TRUE(seen.insert(name).second) << "two kinds are named " << name;
    const auto back = step_kind(name);
    ASSERT_TRUE(back.has_value()) << name;
    EXPECT_EQ(*back, kind) << name;
  }
}

TEST(RuntimeStepKind, UnknownNamesHaveNoKind) {
  for (const char* op : {"", "Gemm", "gemm ", "count", "matmul", "?"}) EXPECT_FALSE(step_kind(op).has_value()) << op;
  EXPECT_FALSE(is_known_op("matmul"));
  EXPECT_STREQ(to_string(StepKind::count), "?");
}

TEST(RuntimeStepKind, KnownOpsAreTheKindsInOrder) {
  const auto& ops = known_ops();
  ASSERT_EQ(ops.size(), kStepKindCount);
  for (size_t k = 0; k < kStepKindCount; ++k) {
    EXPECT_EQ(ops[k], to_string(static_cast<StepKind>(k)));
    EXPECT_TRUE(is_known_op(ops[k]));
  }
}

TEST(RuntimeStepKind, EveryKindIsDocumentedInRuntimeMd) {
  std::ifstream f(std::string(SABRE_SOURCE_DIR) + "/docs/RUNTIME.md");
  ASSERT_TRUE(f) << "docs/RUNTIME.md";
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string doc = ss.str();
  for (size_t k = 0; k < kStepKindCount; ++k) {
    const std::string name = to_string(static_cast<StepKind>(k));
    EXPECT_NE(doc.find("`" + name + "`"), std::string::npos) << "docs/RUNTIME.md does not document step kind " << name;
  }
}
