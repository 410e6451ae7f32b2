// Shape and type inference with symbolic dims.
//
// Walks the graph in topological order and sets every node output's dtype and shape. Integer
// tensors that carry shapes (Shape, Gather/Slice/Concat/Unsqueeze of them, arithmetic on them)
// get known_dims(), so Reshape/Expand/ConstantOfShape/Range see symbolic target shapes.
// Tests: tests/unit/infer_test.cpp
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace sabre::ir {

// A user-facing error: the model's shapes or attributes are inconsistent. The message names the
// node, its op and what is wrong: "node 'MatMul_3' (MatMul): inner dims differ: 768 vs 512".
struct ShapeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The model is valid but sabre can't type it: a value that decides a shape or rank (Unsqueeze axes,
// Split sizes) is computed at run time instead of being a constant.
struct ShapeUnsupported : ShapeError {
  using ShapeError::ShapeError;
};

void infer_types(Graph& g);

// Sequences and STRING tensors reach only the ops written for them (infer_sequence.cpp); every other
// op is refused for them, in shape inference and in the reference executor alike.
bool op_takes_sequences(const std::string& domain, const std::string& op);
bool op_takes_strings(const std::string& domain, const std::string& op);
void infer_node(Node& n);

using InferFn = void (*)(Node&);
// sabre's own ops (domain "sabre") register here too.
void register_infer(const std::string& domain, const std::string& op, InferFn fn);
bool has_infer(const std::string& domain, const std::string& op);
std::vector<std::string> supported_ops();  // ONNX ops, sorted

}  // namespace sabre::ir
