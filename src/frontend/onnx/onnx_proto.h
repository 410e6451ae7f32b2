// What the importer's files share: the ONNX protobuf classes, included the one way that works with
// Debian's build, and the importer's error. Internal to src/frontend/onnx.
#pragma once

// onnx_pb.h defines ONNX_API before it includes onnx-ml.pb.h (ONNX_ML is set for Debian's build).
#ifndef ONNX_ML
#define ONNX_ML 1
#endif
#include <onnx/onnx_pb.h>

#include <string>

#include "frontend/onnx/importer.h"

namespace sabre::onnx_frontend {

[[noreturn]] inline void fail(ImportError::Kind k, const std::string& msg) { throw ImportError(k, msg); }

}  // namespace sabre::onnx_frontend
