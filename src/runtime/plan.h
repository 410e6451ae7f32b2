// The execution plan inside an artifact: the contract between the compiler (src/codegen writes it)
// and the runtime (src/runtime reads and runs it).
//
// A plan is a list of steps over numbered tensors. Shapes are polynomials in the model's symbolic
// dims ("batch*seq", "seq+1"), evaluated once per call from the input shapes. Each step names an
// op the runtime knows (a native kernel, or "gemm" through a kernel library) and its parameters, a
// typed struct per kind (step_params.h) written as JSON, documented per op in docs/RUNTIME.md. The runtime links only the CUDA runtime (and
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
#include "runtime/plan_dims.h"
#include "runtime/step_kind.h"
#include "runtime/step_params.h"
#include "support/json.h"

namespace sabre::runtime {

using ir::DType;

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
  std::string op;            // the kind's name (step_kind.h): to_string(kind()); a plan whose op
                             // disagrees with its params does not load
  std::string name;          // the node or region it came from, for errors and profiles
  std::vector<int> inputs;   // tensor ids; -1 for an absent optional input
  std::vector<int> outputs;  // tensor ids
  StepParams params;         // the kind's params, read once at load (step_params.h, docs/RUNTIME.md)

  StepKind kind() const { return kind_of(params); }
  // The kind's params; throws std::bad_variant_access where they are another kind's.
  template <class P>
  const P& as() const {
    return std::get<P>(params);
  }
  json::Value params_json() const { return to_json(params); }
};

// A step for a plan built by hand (tests, tools): of the kind `op` names, its params the kind's
// defaults, or read from `params` as a plan load reads them (PlanError where they do not fit the
// kind or the op is unknown). An unknown op without params keeps the default params, so a test
// can write a plan that names one.
Step make_step(std::string op, std::string name, std::vector<int> inputs, std::vector<int> outputs);
Step make_step(std::string op, std::string name, std::vector<int> inputs, std::vector<int> outputs,
               const json::Value& params);

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
