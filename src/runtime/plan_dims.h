// What a plan's dims are made of: DimExpr (an integer polynomial in symbol names, as the plan
// writes shapes and step params) and PlanError, the user-facing error of a bad plan.
// Tests: tests/unit/plan_test.cpp
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/json.h"

namespace sabre::runtime {

// A user-facing problem with an artifact's plan: what is wrong, and where.
struct PlanError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A whole number in [lo, hi] read from a plan or manifest (a JSON double), or PlanError saying
// `what` is not one: a forged value never reaches an out-of-range (undefined) conversion.
int64_t whole_number(const json::Value& v, int64_t lo, int64_t hi, const std::string& what);

// A dimension: integer polynomial in symbol names. Same text form as the compiler's ir::Dim
// ("768", "batch*seq", "2*seq+1"), evaluated without the compiler's code.
class DimExpr {
 public:
  DimExpr() = default;
  DimExpr(int64_t v);  // NOLINT
  static DimExpr parse(const std::string& text);  // throws PlanError on bad text
  bool is_static() const;
  int64_t value() const;  // requires is_static()
  // Throws PlanError naming the first unbound symbol.
  int64_t eval(const std::map<std::string, int64_t>& dims) const;
  std::string str() const;
  bool operator==(const DimExpr&) const = default;

 private:
  struct Term {
    int64_t coeff;
    std::vector<std::string> symbols;
    bool operator==(const Term&) const = default;
  };
  std::vector<Term> terms_;
};

}  // namespace sabre::runtime
