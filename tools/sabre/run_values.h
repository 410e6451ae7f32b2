// How `sabre run --reference` reads and writes values that are not one numeric array: sequences
// (a directory of 0.npy, 1.npy, ...) and string tensors (.npy of numpy str/bytes, see ir/npy.h).
#pragma once

#include <string>

#include "ir/graph.h"

namespace sabre::cli {

// The --input FILE for graph input `v`: a .npy file, or for a sequence input a directory holding
// 0.npy, 1.npy, ... (one per element, in order, all of the sequence's dtype; an empty directory is
// an empty sequence).
ir::Tensor load_input_value(const std::string& file, const ir::Value& v);
// Writes `t` to `npy_path` or, for a sequence, to the directory `npy_path` less its ".npy" with one
// <i>.npy per element; returns the path written (a directory path ends in '/').
std::string save_value(const std::string& npy_path, const ir::Tensor& t);
// "f32[2,3]", "string[4]", "seq(f32) of 3".
std::string value_text(const ir::Tensor& t);

}  // namespace sabre::cli
