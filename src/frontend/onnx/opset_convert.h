// Models below opset 13: converted to it by the ONNX library's own version converter, in a child
// process so that a crash inside the library on a malformed model is an error message. Internal to
// the importer. Tests: tests/unit/importer_test.cpp (Importer.OldOpset*)
#pragma once

#include <cstdint>

namespace onnx {
class ModelProto;
}

namespace sabre::onnx_frontend {

// The oldest opset the importer reads; older models are converted first.
inline constexpr int kMinOpset = 13;

// The default domain's opset, or 0 when the model declares none.
int64_t default_opset(const onnx::ModelProto& m);

// Converts `m` to kMinOpset when it is older (else leaves it); throws ImportError naming the node
// the converter could not bring forward.
void convert_old_opset(onnx::ModelProto& m);

}  // namespace sabre::onnx_frontend
