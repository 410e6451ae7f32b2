// Model statistics for `sabre inspect`: inputs and outputs, op histogram, parameter count and
// GEMM/convolution FLOPs per op kind, as dims polynomials so dynamic models stay symbolic
// ("2*batch*seq*589824") until the user binds the symbols.
// Tests: tests/unit/stats_test.cpp
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace sabre::ir {

struct OpKindFlops {
  int64_t nodes = 0;    // nodes of this kind whose FLOPs are counted in `flops`
  Dim flops;            // sum over those nodes as a polynomial; zero when !exact
  bool exact = true;    // false when the polynomial's coefficients pass int64
  int64_t unknown = 0;  // nodes of this kind whose operand shapes were not inferred
  std::vector<std::vector<Dim>> terms;  // per counted node, the factors of its FLOPs

  // The FLOPs at these dims, counted in double (no overflow); nullopt when a symbol is unbound.
  std::optional<double> evaluate(const std::map<std::string, int64_t>& bindings) const;
};

struct ModelStats {
  std::string name;
  std::vector<const Value*> inputs, outputs;
  std::vector<std::string> symbols;               // the graph inputs' dim symbols, first appearance order
  std::map<std::string, int64_t> op_histogram;    // top-level nodes by op ("MatMul", "sabre.Composite")
  int64_t num_nodes = 0;
  int64_t num_constants = 0;
  int64_t parameter_count = 0;                    // elements of float constants
  int64_t parameter_bytes = 0;                    // bytes of float constants as stored
  // GEMM and convolution FLOPs by op kind (MatMul, Gemm, Conv, ConvTranspose), counted inside
  // graph attributes too, so a partitioned graph reports the same work as before partitioning.
  //   MatMul, Gemm:   2 * M * N * K per output matrix (batch dims of MatMul included)
  //   Conv:           2 * N * OC * OH * OW * (IC / groups) * KH * KW   (any number of spatial dims)
  //   ConvTranspose:  2 * N * IC * IH * IW * (OC / groups) * KH * KW
  std::map<std::string, OpKindFlops> flops;

  OpKindFlops total_flops() const;  // every kind together
};

ModelStats compute_stats(const Graph& g);

// Short number for humans: 1234567 -> "1.23M", 2.2e9 -> "2.20G".
std::string human_count(double v);

}  // namespace sabre::ir
