// libFuzzer target for the .npy reader (`sabre run --input x=x.npy`): arbitrary bytes come back as
// a tensor or as an NpyError, never as a crash, a sanitizer report or an allocation past the
// fuzzer's limit. A tensor that parses must survive a round trip through serialize_npy unchanged.
// Run by tests/fuzz/run_fuzz.sh (ctest: fuzz.npy).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ir/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  sabre::ir::Tensor t;
  try {
    t = sabre::ir::parse_npy(bytes, "fuzz.npy");
  } catch (const sabre::ir::NpyError&) {
    return 0;  // expected for bad input
  }
  // The storage must hold numel elements (ASan sees a short buffer): touch the first and the last.
  // String tensors (numpy str and bytes) keep their elements in strings(), not in bytes().
  const bool strings = t.dtype() == sabre::ir::DType::str;
  if (t.numel() > 0) {
    if (strings) {
      volatile size_t sink = t.strings().at(0).size() + t.strings().at(static_cast<size_t>(t.numel() - 1)).size();
      (void)sink;
    } else {
      volatile double sink = t.get_f64(0) + t.get_f64(t.numel() - 1);
      (void)sink;
    }
  }
  // What the writer makes of it reads back the same.
  sabre::ir::Tensor back = sabre::ir::parse_npy(sabre::ir::serialize_npy(t), "round trip");
  if (back.dims() != t.dims() || back.dtype() != t.dtype() || back.nbytes() != t.nbytes() ||
      (t.nbytes() && std::memcmp(back.bytes(), t.bytes(), t.nbytes()) != 0) ||
      (strings && back.strings() != t.strings()))
    std::abort();
  return 0;
}
