// Internal to the reference executor: helpers the kernel files share and their registration hooks.
#pragma once

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "ir/graph.h"
#include "reference/reference.h"

namespace sabre::reference::detail {

using ir::DType;
using Inputs = std::vector<const Tensor*>;
using Dims = std::vector<int64_t>;

// A kernel-level user error: names the node and its op.
[[noreturn]] void fail(const ir::Node& n, const std::string& what);

// Input i, which must be present.
const Tensor& in(const ir::Node& n, const Inputs& xs, size_t i);
// Input i or nullptr when absent or empty-named.
inline const Tensor* opt_in(const Inputs& xs, size_t i) { return i < xs.size() ? xs[i] : nullptr; }

// Normalizes a possibly negative axis against `rank`; fails the node when out of range.
int64_t norm_axis(const ir::Node& n, int64_t axis, int64_t rank);

int64_t numel(const Dims& d);
Dims strides_of(const Dims& d);
// Numpy broadcast of two shapes; fails the node when incompatible.
Dims broadcast_dims(const ir::Node& n, const Dims& a, const Dims& b);
// For each output index (row-major over `out`), the flat index into a tensor of shape `in`
// broadcast to `out`.
std::vector<int64_t> broadcast_index(const Dims& in, const Dims& out);

// Float contents widened to double (any dtype), and back with rounding to `dt`.
std::vector<double> to_f64(const Tensor& t);
std::vector<float> to_f32(const Tensor& t);
Tensor from_f64(const std::vector<double>& v, DType dt, Dims dims);
Tensor from_f32(const std::vector<float>& v, DType dt, Dims dims);
std::vector<int64_t> to_i64(const Tensor& t);
Tensor from_i64(const std::vector<int64_t>& v, DType dt, Dims dims);

// Runs f(begin, end) over [0, n) split across hardware threads (serial when n is small).
void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& f);

// Registration hooks, called once from the explicit kernel table in reference.cpp.
using Table = std::map<std::pair<std::string, std::string>, Kernel>;
void register_elementwise(Table& t);
void register_tensor_ops(Table& t);
void register_nn_ops(Table& t);
void register_index_ops(Table& t);  // ops_index.cpp
void register_extra_ops(Table& t);
void register_conv_transpose(Table& t);  // ops_conv_transpose.cpp
void register_vision_ops(Table& t);     // ops_vision.cpp
void register_rnn_ops(Table& t);        // ops_rnn.cpp
void register_sequence_ops(Table& t);   // ops_sequence.cpp: after the others (wraps Cast, Equal)
void register_qlinear_ops(Table& t);    // ops_qlinear.cpp  // ops_extra.cpp: losses, quantization, LRN, Det, ...

}  // namespace sabre::reference::detail
