// ONNX -> sabre IR: parses a ModelProto (opsets 13..21), upgrades every op to the IR's opset-21
// form (docs/IR.md), turns initializers and Constant nodes into constant values, then (by default)
// runs shape inference. It only imports: folding shape subgraphs and every other rewrite belong to
// the callers that prepare a model (transform::canonicalize, sabre inspect, the reference paths).
//
// Bad input never crashes: every index, count and size in the proto is checked, and problems come
// back as ImportError with a one-line message first. Tests: tests/unit/importer_test.cpp
#pragma once

#include <stdexcept>
#include <map>
#include <string>

#include "ir/graph.h"
#include "ir/tensor.h"

namespace sabre::onnx_frontend {

struct ImportError : std::runtime_error {
  // io: a file cannot be read; invalid: the bytes are not a well-formed model;
  // unsupported: valid ONNX that sabre can't take (op, attribute value, dtype).
  enum class Kind { io, invalid, unsupported };
  Kind kind;
  ImportError(Kind k, const std::string& msg) : std::runtime_error(msg), kind(k) {}
};

struct ImportOptions {
  bool infer = true;  // run ir::infer_types
};

// The newest default-domain opset sabre imports (the oldest: kMinOpset, opset_convert.h), and per ONNX
// op the oldest opset whose form it reads (older models are converted to kMinOpset first).
int max_opset();
const std::map<std::string, int>& op_oldest_opsets();

// Loads a model file (external-data initializers resolved relative to its directory).
ir::Graph import_model(const std::string& path, const ImportOptions& opts = {});
// Same from bytes (the fuzzer uses this); base_dir resolves external data.
ir::Graph import_model_bytes(const std::string& bytes, const std::string& base_dir, const ImportOptions& opts = {});
// A serialized onnx.TensorProto file (the conformance tests' input_0.pb / output_0.pb).
ir::Tensor load_tensor_pb(const std::string& path);
// A serialized onnx.SequenceProto of tensors (a sequence input or output of those tests) as a sequence
// value (ir::Tensor::sequence) of `elem` tensors: `elem` types an empty sequence, which stores none.
ir::Tensor load_sequence_pb(const std::string& path, ir::DType elem);

}  // namespace sabre::onnx_frontend
