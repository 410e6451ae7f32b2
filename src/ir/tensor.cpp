#include "ir/tensor.h"
#include "ir/tensor_size.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "support/checked.h"
#include "support/hash.h"

namespace sabre::ir {

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
  int32_t e = static_cast<int32_t>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);  // underflow -> signed zero
    mant |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half_mant = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++half_mant;
    return static_cast<uint16_t>(sign | half_mant);
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // may carry into exp: correct
  return static_cast<uint16_t>(half);
}

float half_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while (!(mant & 0x400u));
      x = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((x >> 16) | 0x40u);
  uint32_t lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;
  return static_cast<uint16_t>(x >> 16);
}

float bf16_to_float(uint16_t b) {
  uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

void check_tensor_size(DType dtype, const std::vector<int64_t>& dims, const std::string& what) {
  auto shape = [&] {
    std::string s = "[";
    for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
    return s + "]";
  };
  for (int64_t d : dims)
    if (d < 0) throw TensorSizeError(what + " has a negative dim in shape " + shape());
  auto n = support::checked_product(dims);
  if (!n || *n > kMaxElements)
    throw TensorSizeError(what + " of shape " + shape() + " has " + (n ? std::to_string(*n) : "more than 2^63") +
                          " elements, more than the " + std::to_string(kMaxElements) + " sabre allows in one tensor");
  const double bytes = static_cast<double>(*n) * static_cast<double>(size_of(dtype));
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  const double mem = pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0;
  if (mem > 0 && bytes > mem) {
    char buf[160];
    std::snprintf(buf, sizeof buf, " (%s) needs %.1f GiB, more than this machine's %.1f GiB of memory", std::string(name(dtype)).c_str(),
                  bytes / 1073741824.0, mem / 1073741824.0);
    throw TensorSizeError(what + " of shape " + shape() + buf);
  }
}

Tensor::Tensor(DType dtype, std::vector<int64_t> dims) : dtype_(dtype), dims_(std::move(dims)) {
  check_tensor_size(dtype_, dims_, "a tensor");
  storage_ = std::make_shared<std::vector<uint8_t>>(nbytes());
  data_ = storage_->data();
  owner_ = storage_;
  if (dtype_ == DType::str) strings_ = std::make_shared<std::vector<std::string>>(static_cast<size_t>(numel()));
}

const std::vector<std::string>& Tensor::strings() const {
  static const std::vector<std::string> none;
  return strings_ ? *strings_ : none;
}

std::vector<std::string>& Tensor::mutable_strings() {
  if (dtype_ != DType::str) throw std::logic_error("Tensor::mutable_strings: not a string tensor");
  if (!strings_) strings_ = std::make_shared<std::vector<std::string>>(static_cast<size_t>(numel()));
  else if (strings_.use_count() != 1) strings_ = std::make_shared<std::vector<std::string>>(*strings_);
  return *strings_;
}

Tensor Tensor::from_strings(std::vector<std::string> values, std::vector<int64_t> dims) {
  Tensor t(DType::str, std::move(dims));
  if (static_cast<size_t>(t.numel()) != values.size()) throw std::invalid_argument("from_strings: size mismatch");
  t.strings_ = std::make_shared<std::vector<std::string>>(std::move(values));
  return t;
}

Tensor Tensor::sequence(DType elem, std::vector<Tensor> elements) {
  Tensor t;
  t.dtype_ = elem;
  t.elements_ = std::make_shared<const std::vector<Tensor>>(std::move(elements));
  return t;
}

const std::vector<Tensor>& Tensor::elements() const {
  if (!elements_) throw std::logic_error("Tensor::elements: not a sequence");
  return *elements_;
}

Tensor::Tensor(DType dtype, std::vector<int64_t> dims, std::shared_ptr<const void> owner, const void* data)
    : dtype_(dtype), dims_(std::move(dims)), owner_(std::move(owner)), data_(data) {}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

uint8_t* Tensor::mutable_bytes() {
  // Shared with another Tensor (use_count counts owner_ and storage_ of each holder) or borrowed.
  if (!storage_ || storage_.use_count() != 2) {
    storage_ = std::make_shared<std::vector<uint8_t>>(bytes(), bytes() + nbytes());
    data_ = storage_->data();
    owner_ = storage_;
  }
  return storage_->data();
}

double Tensor::get_f64(int64_t i) const {
  switch (dtype_) {
    case DType::f32: return data<float>()[i];
    case DType::f16: return half_to_float(data<uint16_t>()[i]);
    case DType::bf16: return bf16_to_float(data<uint16_t>()[i]);
    case DType::f64: return data<double>()[i];
    case DType::i64: return static_cast<double>(data<int64_t>()[i]);
    case DType::i32: return data<int32_t>()[i];
    case DType::i8: return data<int8_t>()[i];
    case DType::u8: return data<uint8_t>()[i];
    case DType::boolean: return data<uint8_t>()[i] ? 1.0 : 0.0;
    case DType::str:
    case DType::kCount: break;
  }
  throw std::logic_error("Tensor::get_f64: bad dtype");
}

int64_t Tensor::get_i64(int64_t i) const {
  switch (dtype_) {
    case DType::i64: return data<int64_t>()[i];
    case DType::i32: return data<int32_t>()[i];
    case DType::i8: return data<int8_t>()[i];
    case DType::u8: return data<uint8_t>()[i];
    case DType::boolean: return data<uint8_t>()[i] ? 1 : 0;
    default: return static_cast<int64_t>(get_f64(i));
  }
}

void Tensor::set_f64(int64_t i, double v) {
  uint8_t* p = mutable_bytes();
  switch (dtype_) {
    case DType::f32: reinterpret_cast<float*>(p)[i] = static_cast<float>(v); return;
    case DType::f16: reinterpret_cast<uint16_t*>(p)[i] = float_to_half(static_cast<float>(v)); return;
    case DType::bf16: reinterpret_cast<uint16_t*>(p)[i] = float_to_bf16(static_cast<float>(v)); return;
    case DType::f64: reinterpret_cast<double*>(p)[i] = v; return;
    case DType::i64: reinterpret_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); return;
    case DType::i32: reinterpret_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); return;
    case DType::i8: reinterpret_cast<int8_t*>(p)[i] = static_cast<int8_t>(v); return;
    case DType::u8: reinterpret_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); return;
    case DType::boolean: p[i] = v != 0.0 ? 1 : 0; return;
    case DType::str:
    case DType::kCount: break;
  }
  throw std::logic_error("Tensor::set_f64: bad dtype");
}

std::vector<int64_t> Tensor::to_i64_vector() const {
  std::vector<int64_t> out(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) out[static_cast<size_t>(i)] = get_i64(i);
  return out;
}

Tensor Tensor::from_i64(const std::vector<int64_t>& values, std::vector<int64_t> dims) {
  Tensor t(DType::i64, std::move(dims));
  if (static_cast<size_t>(t.numel()) != values.size()) throw std::invalid_argument("from_i64: size mismatch");
  // An empty vector's data() may be null, and memcpy from null is undefined even for 0 bytes.
  if (!values.empty()) std::memcpy(t.mutable_bytes(), values.data(), values.size() * 8);
  return t;
}

Tensor Tensor::from_f32(const std::vector<float>& values, std::vector<int64_t> dims) {
  Tensor t(DType::f32, std::move(dims));
  if (static_cast<size_t>(t.numel()) != values.size()) throw std::invalid_argument("from_f32: size mismatch");
  if (!values.empty()) std::memcpy(t.mutable_bytes(), values.data(), values.size() * 4);
  return t;
}

Tensor Tensor::cast(DType to) const {
  if (is_sequence() || dtype_ == DType::str || to == DType::str)
    throw std::invalid_argument("Tensor::cast: sequences and string tensors do not convert by value");
  Tensor out(to, dims_);
  const bool int_path = !is_float(dtype_) && !is_float(to);
  for (int64_t i = 0; i < numel(); ++i) {
    if (int_path) {
      int64_t v = get_i64(i);
      uint8_t* p = out.mutable_bytes();
      switch (to) {
        case DType::i64: reinterpret_cast<int64_t*>(p)[i] = v; break;
        case DType::i32: reinterpret_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); break;
        case DType::i8: reinterpret_cast<int8_t*>(p)[i] = static_cast<int8_t>(v); break;
        case DType::u8: reinterpret_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); break;
        case DType::boolean: p[i] = v != 0; break;
        default: break;
      }
    } else {
      out.set_f64(i, get_f64(i));
    }
  }
  return out;
}

uint64_t Tensor::content_hash() const {
  support::Hasher h;
  uint8_t dt = static_cast<uint8_t>(dtype_);
  h.update(&dt, 1);
  h.update(dims_.data(), dims_.size() * sizeof(int64_t));
  if (data_) h.update(data_, nbytes());
  for (const std::string& e : strings()) {
    uint64_t len = e.size();
    h.update(&len, sizeof len);
    h.update(e.data(), e.size());
  }
  if (elements_) {
    uint64_t n = elements_->size(), tag = 0x5e9;
    h.update(&tag, sizeof tag);
    h.update(&n, sizeof n);
    for (const Tensor& e : *elements_) {
      uint64_t eh = e.content_hash();
      h.update(&eh, sizeof eh);
    }
  }
  return h.digest();
}

}  // namespace sabre::ir
