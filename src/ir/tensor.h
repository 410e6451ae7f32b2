// A host tensor with static dims: constants in the IR, and the values the reference executor computes.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace sabre::ir {

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled storage of the right size.
  Tensor(DType dtype, std::vector<int64_t> dims);
  // Shares `owner`'s memory (an mmap, another tensor); `data` must stay valid while owner lives.
  Tensor(DType dtype, std::vector<int64_t> dims, std::shared_ptr<const void> owner, const void* data);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t rank() const { return static_cast<int64_t>(dims_.size()); }
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * size_of(dtype_); }

  const uint8_t* bytes() const { return static_cast<const uint8_t*>(data_); }
  // Copy-on-write: detaches from shared storage before handing out a writable pointer.
  uint8_t* mutable_bytes();

  template <class T>
  const T* data() const { return reinterpret_cast<const T*>(data_); }
  template <class T>
  T* mutable_data() { return reinterpret_cast<T*>(mutable_bytes()); }

  // Element i converted to double / to int64 whatever the dtype (f16/bf16 decoded).
  double get_f64(int64_t i) const;
  int64_t get_i64(int64_t i) const;
  // Element i set from a double, rounded to the dtype (f16/bf16 round to nearest even).
  void set_f64(int64_t i, double v);

  // Contents as int64 (for shape-like tensors of any integer dtype).
  std::vector<int64_t> to_i64_vector() const;
  static Tensor from_i64(const std::vector<int64_t>& values, std::vector<int64_t> dims);
  static Tensor from_f32(const std::vector<float>& values, std::vector<int64_t> dims);
  static Tensor scalar_f32(float v) { return from_f32({v}, {}); }
  // Same values, other dtype.
  Tensor cast(DType to) const;

  // support::hash64 of dtype, dims and bytes (strings, elements): a stable identity for printing and caching.
  uint64_t content_hash() const;

  // STRING tensors (dtype str): the elements, row-major. Empty for other dtypes.
  const std::vector<std::string>& strings() const;
  // Copy-on-write like mutable_bytes().
  std::vector<std::string>& mutable_strings();
  static Tensor from_strings(std::vector<std::string> values, std::vector<int64_t> dims);

  // A sequence value (ONNX seq(tensor)): an ordered list of tensors of one dtype, possibly of
  // different shapes. dtype() is the elements' dtype; dims() is empty and there are no bytes.
  static Tensor sequence(DType elem, std::vector<Tensor> elements);
  bool is_sequence() const { return elements_ != nullptr; }
  const std::vector<Tensor>& elements() const;

 private:
  DType dtype_ = DType::f32;
  std::vector<int64_t> dims_;
  std::shared_ptr<const void> owner_;
  std::shared_ptr<std::vector<uint8_t>> storage_;  // set when we own writable memory
  std::shared_ptr<std::vector<std::string>> strings_;  // dtype str only
  std::shared_ptr<const std::vector<Tensor>> elements_;  // sequences only
  const void* data_ = nullptr;
};

}  // namespace sabre::ir
