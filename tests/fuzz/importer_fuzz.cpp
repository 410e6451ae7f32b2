// libFuzzer target for the ONNX importer: arbitrary bytes must come back as a model or as a
// user-facing error (std::runtime_error: ImportError, IrError, ShapeError), never as a crash,
// a sanitizer report, a logic_error (a broken invariant) or an allocation past the fuzzer's limit.
// Run by tests/fuzz/run_fuzz.sh (ctest: fuzz.importer).
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "frontend/onnx/importer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    // A base dir that does not exist: external-data references must fail cleanly.
    sabre::onnx_frontend::import_model_bytes(bytes, "/nonexistent", {});
  } catch (const std::runtime_error&) {
    // Expected for bad input.
  }
  return 0;
}
