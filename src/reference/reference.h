// The CPU reference executor: the oracle of every numerical test.
//
// Clarity and exactness over speed. Every op accumulates in f32 (f64 for f64); f16 and bf16
// tensors are stored as such and rounded once per op output. Tests: tests/unit/reference_test.cpp
#pragma once

#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace sabre::reference {

using ir::Tensor;

// Thrown for inputs the graph cannot take (wrong name, dtype, shape) or ops without a kernel.
struct ReferenceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Runs `g` on the CPU. `inputs` by graph-input name; returns the outputs in graph-output order.
std::vector<Tensor> run(const ir::Graph& g, const std::map<std::string, Tensor>& inputs);

// Evaluates one node on host tensors (absent optional inputs are nullptr). Constant folding uses it.
std::vector<Tensor> eval_node(const ir::Node& n, const std::vector<const Tensor*>& inputs);

using Kernel = std::function<std::vector<Tensor>(const ir::Node&, const std::vector<const Tensor*>&)>;
void register_kernel(const std::string& domain, const std::string& op, Kernel k);
bool has_kernel(const std::string& domain, const std::string& op);

}  // namespace sabre::reference
