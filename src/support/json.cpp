#include "support/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace sabre::json {

namespace {
[[noreturn]] void type_error(const char* want) { throw std::runtime_error(std::string("json: expected ") + want); }

void dump_string(const std::string& s, std::string& out) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void dump_value(const Value& v, std::string& out) {
  if (v.is_null()) {
    out += "null";
  } else if (v.is_number()) {
    double d = v.num();
    if (!std::isfinite(d)) {
      out += "null";
      return;
    }
    char buf[32];
    if (d == std::floor(d) && std::fabs(d) < 1e15)
      std::snprintf(buf, sizeof buf, "%.0f", d);
    else
      std::snprintf(buf, sizeof buf, "%.17g", d);
    out += buf;
  } else if (v.is_string()) {
    dump_string(v.str(), out);
  } else if (v.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [k, x] : v.obj()) {
      if (!first) out += ',';
      first = false;
      dump_string(k, out);
      out += ':';
      dump_value(x, out);
    }
    out += '}';
  } else if (v.is_array()) {
    out += '[';
    for (size_t i = 0; i < v.arr().size(); ++i) {
      if (i) out += ',';
      dump_value(v.arr()[i], out);
    }
    out += ']';
  } else {
    out += v.boolean() ? "true" : "false";
  }
}

struct Parser {
  const std::string& s;
  size_t i = 0;
  int depth = 0;

  [[noreturn]] void fail(const char* what) {
    throw std::runtime_error(std::string("json: ") + what + " at offset " + std::to_string(i));
  }
  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  }
  bool lit(const char* w) {
    size_t n = std::char_traits<char>::length(w);
    if (s.compare(i, n, w) == 0) {
      i += n;
      return true;
    }
    return false;
  }
  std::string string() {
    if (i >= s.size() || s[i] != '"') fail("expected string");
    ++i;
    std::string out;
    while (i < s.size() && s[i] != '"') {
      char c = s[i++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i >= s.size()) fail("bad escape");
      char e = s[i++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          if (i + 4 > s.size()) fail("bad \\u escape");
          unsigned cp = static_cast<unsigned>(std::strtoul(s.substr(i, 4).c_str(), nullptr, 16));
          i += 4;
          if (cp < 0x80) {
            out += static_cast<char>(cp);
          } else if (cp < 0x800) {
            out += static_cast<char>(0xc0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3f));
          } else {
            out += static_cast<char>(0xe0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
            out += static_cast<char>(0x80 | (cp & 0x3f));
          }
          break;
        }
        default: out += e;
      }
    }
    if (i >= s.size()) fail("unterminated string");
    ++i;
    return out;
  }
  Value value() {
    if (++depth > 200) fail("nesting too deep");
    ws();
    if (i >= s.size()) fail("unexpected end");
    Value out;
    char c = s[i];
    if (c == '{') {
      ++i;
      Object o;
      ws();
      if (i < s.size() && s[i] == '}') {
        ++i;
      } else {
        for (;;) {
          ws();
          std::string k = string();
          ws();
          if (i >= s.size() || s[i] != ':') fail("expected ':'");
          ++i;
          o[k] = value();
          ws();
          if (i < s.size() && s[i] == ',') {
            ++i;
            continue;
          }
          if (i < s.size() && s[i] == '}') {
            ++i;
            break;
          }
          fail("expected ',' or '}'");
        }
      }
      out = Value(std::move(o));
    } else if (c == '[') {
      ++i;
      Array a;
      ws();
      if (i < s.size() && s[i] == ']') {
        ++i;
      } else {
        for (;;) {
          a.push_back(value());
          ws();
          if (i < s.size() && s[i] == ',') {
            ++i;
            continue;
          }
          if (i < s.size() && s[i] == ']') {
            ++i;
            break;
          }
          fail("expected ',' or ']'");
        }
      }
      out = Value(std::move(a));
    } else if (c == '"') {
      out = Value(string());
    } else if (lit("null")) {
      out = Value();
    } else if (lit("true")) {
      out = Value(true);
    } else if (lit("false")) {
      out = Value(false);
    } else {
      const char* b = s.c_str() + i;
      char* e = nullptr;
      double d = std::strtod(b, &e);
      if (e == b) fail("unexpected character");
      i += static_cast<size_t>(e - b);
      out = Value(d);
    }
    --depth;
    return out;
  }
};
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
  std::string out;
  dump_value(*this, out);
  return out;
}

Value parse(const std::string& text) {
  Parser p{text};
  Value v = p.value();
  p.ws();
  if (p.i != text.size()) p.fail("trailing characters");
  return v;
}

}  // namespace sabre::json
