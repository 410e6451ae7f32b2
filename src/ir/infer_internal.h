// Helpers shared by the shape-inference files (infer*.cpp); not a public API.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/infer.h"

namespace sabre::ir::infer_detail {

// Static dims beyond this are rejected: products of a few such dims must still fit in int64.
inline constexpr int64_t kMaxDim = int64_t{1} << 40;
// Constant shape-like lists longer than this carry no known_dims (they are data, not shapes).
inline constexpr size_t kMaxKnown = 64;

using Table = std::map<std::pair<std::string, std::string>, InferFn>;

[[noreturn]] void fail(const Node& n, const std::string& msg);
// Throws ShapeUnsupported: "<what> must be constant (it is computed at run time)".
[[noreturn]] void needs_constant(const Node& n, const std::string& what);
Value* in(const Node& n, size_t i);      // a required input (throws when absent)
Value* opt_in(const Node& n, size_t i);  // nullptr when absent
void set_out(Node& n, size_t i, DType d, Shape s);
void set_known(Node& n, size_t i, std::vector<Dim> kd);
int64_t norm_axis(const Node& n, int64_t axis, int64_t rank);
Shape broadcast(const Node& n, const std::vector<const Shape*>& shapes);
// A fresh symbol for a dim inference cannot express: unk_<value>_<i>.
Dim unknown_dim(const Node& n, size_t out, size_t i);
std::optional<std::vector<Dim>> known(const Value* v);
std::optional<std::vector<int64_t>> known_ints(const Value* v);
// A static dim from a model attribute or list: checked to be within [0, kMaxDim].
Dim checked_dim(const Node& n, int64_t v, const char* what);
// Two dims that must be equal: returns the more informative one, fails when both static and differ.
Dim unify(const Node& n, const Dim& a, const Dim& b, const std::string& what);

bool is_int(DType d);  // integer, not bool
// A static dim within [-kMaxDim, kMaxDim]: arithmetic on known lists of these cannot overflow.
bool small_static(const Dim& d);
Dim mul(const Node& n, const Dim& a, const Dim& b);  // a*b, failing instead of overflowing
Dim numel(const Node& n, const Shape& s);           // the element count, without overflow
int64_t list_len(const Shape& s);                    // of a rank<=1 static shape, or -1
// Output 0 carries input 0's known list unchanged (Identity, Reshape/Squeeze/Unsqueeze of shape lists).
void pass_known(Node& n);
void unary(Node& n);     // output 0: input 0's dtype and shape
void identity(Node& n);  // unary, and the known list passes through
std::vector<Value*> present_inputs(const Node& n);
void check_same_dtype(const Node& n, const std::vector<Value*>& ins);

void add_elementwise_ops(Table& t);  // infer_elementwise.cpp
void add_shape_ops(Table& t);        // infer_shape.cpp
void add_nn_ops(Table& t);
void add_index_ops(Table& t);      // infer_index.cpp
void add_extra_ops(Table& t);      // infer_extra.cpp
void add_sequence_ops(Table& t);   // infer_sequence.cpp

}  // namespace sabre::ir::infer_detail
