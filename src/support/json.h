// A JSON value for sabre's own files (plans, manifests, tuning exports): a typed tree the runtime
// reads with one-line errors; parsing and writing are nlohmann-json's (json.cpp).
#pragma once

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace sabre::json {

class Value;
using Object = std::map<std::string, Value>;
using Array = std::vector<Value>;

class Value {
 public:
  Value() = default;  // null
  explicit Value(bool b) : v_(b) {}
  explicit Value(double d) : v_(d) {}
  explicit Value(std::string s) : v_(std::move(s)) {}
  explicit Value(const char* s) : v_(std::string(s)) {}
  explicit Value(Object o) : v_(std::make_shared<Object>(std::move(o))) {}
  explicit Value(Array a) : v_(std::make_shared<Array>(std::move(a))) {}

  bool is_null() const { return std::holds_alternative<std::monostate>(v_); }
  bool is_number() const { return std::holds_alternative<double>(v_); }
  bool is_string() const { return std::holds_alternative<std::string>(v_); }
  bool is_object() const { return std::holds_alternative<std::shared_ptr<Object>>(v_); }
  bool is_array() const { return std::holds_alternative<std::shared_ptr<Array>>(v_); }

  // Typed access; throws std::runtime_error naming the expected type.
  double num() const;
  bool boolean() const;
  const std::string& str() const;
  const Object& obj() const;
  const Array& arr() const;
  // Member of an object, nullptr when absent (or when this is not an object).
  const Value* get(const std::string& key) const;

  std::string dump() const;  // compact, keys sorted

 private:
  std::variant<std::monostate, bool, double, std::string, std::shared_ptr<Object>, std::shared_ptr<Array>> v_;
};

// Throws std::runtime_error "json: parse error at line L, column C: ..." (no C++ type names).
Value parse(const std::string& text);

}  // namespace sabre::json
