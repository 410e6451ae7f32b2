// sabre::json::Value over nlohmann-json: its parser (strict RFC 8259, UTF-8 checked, positions by
// line and column) fills the Value tree through the SAX interface, and its serializer writes it.
#include "support/json.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace sabre::json {

namespace {
[[noreturn]] void type_error(const char* want) { throw std::runtime_error(std::string("json: expected ") + want); }

// Deeper nesting than any file sabre writes; a Value tree is freed recursively, so a hostile
// [[[[...]]]] must stop here rather than at the end of the stack.
constexpr size_t kMaxDepth = 200;

// nlohmann's what() starts "[json.exception.parse_error.101] "; the rest says where and what.
std::string without_exception_tag(const std::string& what) {
  if (!what.empty() && what[0] == '[')
    if (auto close = what.find("] "); close != std::string::npos) return what.substr(close + 2);
  return what;
}

class Builder : public nlohmann::json_sax<nlohmann::json> {
 public:
  Value root;

  bool null() override { return add(Value()); }
  bool boolean(bool v) override { return add(Value(v)); }
  bool number_integer(number_integer_t v) override { return add(Value(static_cast<double>(v))); }
  bool number_unsigned(number_unsigned_t v) override { return add(Value(static_cast<double>(v))); }
  bool number_float(number_float_t v, const string_t&) override { return add(Value(static_cast<double>(v))); }
  bool string(string_t& v) override { return add(Value(std::move(v))); }
  bool binary(binary_t&) override { throw std::runtime_error("json: binary values are not JSON text"); }
  bool start_object(std::size_t) override { return open(true); }
  bool key(string_t& k) override {
    frames_.back().key = std::move(k);
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) override {
    throw std::runtime_error("json: " + without_exception_tag(ex.what()));
  }

 private:
  struct Frame {
    bool is_object;
    Object object;
    Array array;
    std::string key;
  };
  std::vector<Frame> frames_;

  bool add(Value v) {
    if (frames_.empty()) {
      root = std::move(v);
    } else if (Frame& f = frames_.back(); f.is_object) {
      f.object[f.key] = std::move(v);  // a repeated key: the last one counts
    } else {
      f.array.push_back(std::move(v));
    }
    return true;
  }
  bool open(bool is_object) {
    if (frames_.size() >= kMaxDepth)
      throw std::runtime_error("json: nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    frames_.push_back(Frame{is_object, {}, {}, {}});
    return true;
  }
  bool close() {
    Frame f = std::move(frames_.back());
    frames_.pop_back();
    return f.is_object ? add(Value(std::move(f.object))) : add(Value(std::move(f.array)));
  }
};

// Whole numbers are written as integers (sizes, offsets, ids), other finite ones in the shortest
// form that reads back the same double, non-finite ones as null (JSON has no NaN).
nlohmann::json to_nlohmann(const Value& v) {
  if (v.is_null()) return nullptr;
  if (v.is_number()) {
    const double d = v.num();
    if (!std::isfinite(d)) return nullptr;
    if (d == std::floor(d) && std::fabs(d) < 1e15) return static_cast<int64_t>(d);
    return d;
  }
  if (v.is_string()) return v.str();
  if (v.is_object()) {
    nlohmann::json o = nlohmann::json::object();
    for (const auto& [k, x] : v.obj()) o[k] = to_nlohmann(x);
    return o;
  }
  if (v.is_array()) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& x : v.arr()) a.push_back(to_nlohmann(x));
    return a;
  }
  return v.boolean();
}
}  // namespace

double Value::num() const {
  if (auto* d = std::get_if<double>(&v_)) return *d;
  type_error("number");
}
bool Value::boolean() const {
  if (auto* b = std::get_if<bool>(&v_)) return *b;
  type_error("boolean");
}
const std::string& Value::str() const {
  if (auto* s = std::get_if<std::string>(&v_)) return *s;
  type_error("string");
}
const Object& Value::obj() const {
  if (auto* o = std::get_if<std::shared_ptr<Object>>(&v_)) return **o;
  type_error("object");
}
const Array& Value::arr() const {
  if (auto* a = std::get_if<std::shared_ptr<Array>>(&v_)) return **a;
  type_error("array");
}
const Value* Value::get(const std::string& key) const {
  auto* o = std::get_if<std::shared_ptr<Object>>(&v_);
  if (!o) return nullptr;
  auto it = (*o)->find(key);
  return it == (*o)->end() ? nullptr : &it->second;
}

std::string Value::dump() const {
  // Invalid UTF-8 in a string (a tensor name from a model) becomes U+FFFD rather than an exception.
  return to_nlohmann(*this).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Value parse(const std::string& text) {
  Builder b;
  nlohmann::json::sax_parse(text, &b);
  return std::move(b.root);
}

}  // namespace sabre::json
