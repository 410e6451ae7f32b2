// NumPy .npy files: how tensors enter and leave the CLI (`sabre run --input x=x.npy`, outputs).
//
// Reads format versions 1.0, 2.0 and 3.0, little-endian, C order. Dtypes: <f4 <f2 <f8 <i8 <i4 |i1 |u1 |b1
// (the '<'/'|' byte-order marks are taken either way for 1-byte types). Fortran order, big-endian
// data and other dtypes are rejected with a message that names the file and what to do.
// numpy has no bfloat16: save_npy writes bf16 tensors as <f4 (exactly, every bf16 is an f32).
// String tensors: numpy's str arrays ('<U<n>', UTF-32) and bytes arrays ('|S<n>') read as UTF-8 strings;
// save_npy writes '<U<n>'. Object arrays (pickles) are not read.
// Tests: tests/unit/npy_test.cpp
#pragma once

#include <stdexcept>
#include <string>

#include "ir/tensor.h"

namespace sabre::ir {

// A user-facing error about a .npy file: "x.npy: truncated: header says 24 bytes of data, file has 16".
struct NpyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

Tensor load_npy(const std::string& path);
// Parses the bytes of a .npy file; `what` names it in error messages.
Tensor parse_npy(const std::string& bytes, const std::string& what);
void save_npy(const std::string& path, const Tensor& t);
// The bytes save_npy writes.
std::string serialize_npy(const Tensor& t);

}  // namespace sabre::ir
