// The execution plan inside an artifact: the contract between the compiler (src/codegen writes it)
// and the runtime (src/runtime reads and runs it).
//
// A plan is a list of steps over numbered tensors. Shapes are polynomials in the model's symbolic
// dims ("batch*seq", "seq+1"), evaluated once per call from the input shapes. Each step names an
// op the runtime knows (a native kernel, or "gemm" through a kernel library) and its parameters as
// JSON, documented per op in docs/RUNTIME.md. The runtime links only the CUDA runtime (and
// cuBLASLt where a plan uses it): nothing here depends on the compiler's IR.
// Tests: tests/unit/plan_test.cpp
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/dtype.h"  // header-only: the DType enum and its names
#include "support/json.h"

namespace sabre::runtime {

using ir::DType;

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

// A symbolic dim and the range the artifact was compiled for (--dynamic batch=1..256).
struct SymbolRange {
  std::string name;
  int64_t min = 1, max = 1;
};

enum class TensorKind { input, output, weight, activation };
const char* to_string(TensorKind k);

struct TensorInfo {
  std::string name;  // the model's value name (inputs/outputs keep theirs)
  DType dtype = DType::f16;
  std::vector<DimExpr> shape;
  TensorKind kind = TensorKind::activation;
  uint64_t weight_offset = 0;  // weights only: byte offset into weights.bin (256-byte aligned)
  uint64_t weight_bytes = 0;
};

struct Step {
  std::string op;            // "gemm", "softmax", "layernorm", "elementwise", "gather", ...
  std::string name;          // the node or region it came from, for errors and profiles
  std::vector<int> inputs;   // tensor ids; -1 for an absent optional input
  std::vector<int> outputs;  // tensor ids
  json::Value params;        // op-specific (docs/RUNTIME.md)
};

struct Plan {
  static constexpr int kFormatVersion = 1;
  int format_version = kFormatVersion;
  std::vector<SymbolRange> symbols;
  std::vector<TensorInfo> tensors;
  std::vector<int> inputs;   // tensor ids, in the model's input order
  std::vector<int> outputs;  // tensor ids, in the model's output order
  std::vector<Step> steps;   // in execution order

  std::string to_json() const;
  // Validates ids, kinds and dims as it reads; throws PlanError saying what is wrong.
  static Plan from_json(const std::string& text);

  // Binds every symbol from the inputs' shapes; throws PlanError for a shape that does not fit
  // (wrong rank, a static dim that differs, a symbol outside its compiled range).
  std::map<std::string, int64_t> bind_dims(const std::vector<std::vector<int64_t>>& input_shapes) const;
};

}  // namespace sabre::runtime
