#include "ir/printer.h"

#include <cctype>
#include <charconv>
#include <climits>
#include <cmath>
#include <mutex>
#include <sstream>
#include <unordered_map>

namespace sabre::ir {

// ---------------------------------------------------------------------------------------------
// Elided constants: filler and the memory of which hash a filler stood for.

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

Tensor fill_from_hash(DType dtype, std::vector<int64_t> dims, uint64_t hash) {
  Tensor t(dtype, std::move(dims));
  uint64_t state = hash;
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    uint64_t r = splitmix64(state);
    if (is_float(dtype)) {
      double u = static_cast<double>(r >> 11) * 0x1.0p-53;  // [0, 1)
      t.set_f64(i, 2.0 * u - 1.0);
    } else if (dtype == DType::boolean) {
      t.set_f64(i, static_cast<double>(r & 1));
    } else {
      t.set_f64(i, static_cast<double>(r % 4));
    }
  }
  return t;
}

// filler content hash -> the hash the text showed. Process-wide so print() needs no context;
// a filler's hash colliding with a real tensor's is as likely as any 64-bit hash collision.
std::mutex g_elided_mu;
std::unordered_map<uint64_t, uint64_t>& elided_map() {
  static std::unordered_map<uint64_t, uint64_t> m;
  return m;
}

uint64_t printed_hash(const Tensor& t) {
  uint64_t h = t.content_hash();
  std::lock_guard<std::mutex> lock(g_elided_mu);
  auto it = elided_map().find(h);
  return it == elided_map().end() ? h : it->second;
}

// ---------------------------------------------------------------------------------------------
// Printing

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '/' || c == '-';
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string name_text(const std::string& n) {
  if (n.empty()) return quote(n);
  for (char c : n)
    if (!is_name_char(c)) return quote(n);
  return n;
}

std::string value_ref(const Value* v) { return v ? "%" + name_text(v->name()) : "_"; }

bool is_default_node_name(const Node& n) {
  const std::string& name = n.name();
  const std::string prefix = n.op() + "_";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return false;
  for (size_t i = prefix.size(); i < name.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return false;
  return true;
}

std::string element_text(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::f64: return format_double(t.get_f64(i));
    case DType::f32:
    case DType::f16:
    case DType::bf16: return format_float(static_cast<float>(t.get_f64(i)));
    case DType::boolean: return t.get_i64(i) ? "true" : "false";
    case DType::str: return quote(t.strings()[static_cast<size_t>(i)]);
    default: return std::to_string(t.get_i64(i));
  }
}

std::string tensor_text(const Tensor& t) {
  std::string out = std::string(name(t.dtype())) + str(to_shape(t.dims())) + " ";
  if (t.numel() > kInlineLimit) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "@%016llx", static_cast<unsigned long long>(printed_hash(t)));
    return out + buf;
  }
  out += "[";
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (i) out += ", ";
    out += element_text(t, i);
  }
  return out + "]";
}

// A double attribute always shows it is a float: 1 prints as 1.0.
std::string attr_double(double v) {
  std::string s = format_double(v);
  if (s.find_first_not_of("-0123456789") == std::string::npos) s += ".0";
  return s;
}

void print_graph(std::ostringstream& os, const Graph& g, const std::string& indent);

void print_attr(std::ostringstream& os, const AttrValue& a, const std::string& indent) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          os << v;
        } else if constexpr (std::is_same_v<T, double>) {
          os << attr_double(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          os << quote(v);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          os << "[";
          for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
          os << "]";
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          if (v.empty()) os << "floats";
          os << "[";
          for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << attr_double(v[i]);
          os << "]";
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          if (v.empty()) os << "strings";
          os << "[";
          for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << quote(v[i]);
          os << "]";
        } else if constexpr (std::is_same_v<T, Tensor>) {
          os << "tensor " << tensor_text(v);
        } else {
          static_assert(std::is_same_v<T, std::shared_ptr<Graph>>);
          if (!v) throw IrError("print: a graph attribute holds no graph");
          print_graph(os, *v, indent + "  ");
        }
      },
      a);
}

void print_node(std::ostringstream& os, const Node& n, const std::string& indent) {
  os << indent;
  for (size_t i = 0; i < n.outputs().size(); ++i) {
    const Value* v = n.outputs()[i];
    os << (i ? ", " : "") << value_ref(v);
    if (v->type().known) os << ": " << print_type(v->type());
  }
  if (!n.outputs().empty()) os << " = ";
  if (!n.domain().empty()) os << n.domain() << ".";
  os << n.op() << "(";
  for (size_t i = 0; i < n.inputs().size(); ++i) os << (i ? ", " : "") << value_ref(n.inputs()[i]);
  os << ")";
  if (!n.attrs().empty()) {
    os << " {";
    bool first = true;
    for (const auto& [k, a] : n.attrs()) {
      os << (first ? "" : ", ") << name_text(k) << "=";
      print_attr(os, a, indent);
      first = false;
    }
    os << "}";
  }
  if (!is_default_node_name(n)) os << " name=" << quote(n.name());
  os << "\n";
}

// Statements of `g` are indented by indent + 2; the closing brace by `indent`.
void print_graph(std::ostringstream& os, const Graph& g, const std::string& indent) {
  os << "graph " << name_text(g.name) << "(";
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const Value* v = g.inputs()[i];
    os << (i ? ", " : "") << value_ref(v) << ": " << print_type(v->type());
  }
  os << ") -> (";
  for (size_t i = 0; i < g.outputs().size(); ++i) os << (i ? ", " : "") << value_ref(g.outputs()[i]);
  os << ") {\n";
  const std::string inner = indent + "  ";
  for (const Value* c : g.constants()) os << inner << value_ref(c) << " = const " << tensor_text(c->constant()) << "\n";
  for (const Node* n : g.topo_order()) print_node(os, *n, inner);
  os << indent << "}";
}

}  // namespace

std::string format_double(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string format_float(float v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string print_type(const TensorType& t) {
  std::string s = std::string(name(t.dtype)) + str(t.shape);
  if (t.sequence && !t.elem_rank_known) return "seq(" + std::string(name(t.dtype)) + ")";  // elements undescribed
  return t.sequence ? "seq(" + s + ")" : s;
}

std::string print(const Graph& g) {
  std::ostringstream os;
  print_graph(os, g, "");
  os << "\n";
  return os.str();
}

// ---------------------------------------------------------------------------------------------
// Parsing: recursive descent straight over the characters, so errors know their line and column.

namespace {

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  Graph parse_top() {
    skip();
    if (!accept_word("graph")) fail("expected 'graph NAME(...) -> (...) {' at the start");
    Graph g;
    parse_graph_rest(g);
    skip();
    if (i_ < s_.size()) fail("unexpected text after the graph's closing '}'");
    return g;
  }

 private:
  const std::string& s_;
  size_t i_ = 0;
  std::vector<Graph*> scopes_;  // innermost last: subgraphs may read values of enclosing graphs

  [[noreturn]] void fail_at(size_t pos, const std::string& what) const {
    int line = 1;
    size_t line_start = 0;
    for (size_t k = 0; k < pos && k < s_.size(); ++k)
      if (s_[k] == '\n') {
        ++line;
        line_start = k + 1;
      }
    throw IrError("line " + std::to_string(line) + ":" + std::to_string(pos - line_start + 1) + ": " + what);
  }
  [[noreturn]] void fail(const std::string& what) const { fail_at(i_, what); }

  void skip() {
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (std::isspace(static_cast<unsigned char>(c))) {
        ++i_;
      } else if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else {
        break;
      }
    }
  }
  bool peek(char c) {
    skip();
    return i_ < s_.size() && s_[i_] == c;
  }
  bool accept(char c) {
    if (!peek(c)) return false;
    ++i_;
    return true;
  }
  void expect(char c, const std::string& context) {
    if (accept(c)) return;
    std::string got = i_ < s_.size() ? "'" + std::string(1, s_[i_]) + "'" : "end of text";
    fail("expected '" + std::string(1, c) + "' " + context + ", got " + got);
  }
  static bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }
  bool accept_word(const std::string& w) {
    skip();
    if (s_.compare(i_, w.size(), w) != 0) return false;
    if (i_ + w.size() < s_.size() && word_char(s_[i_ + w.size()])) return false;
    i_ += w.size();
    return true;
  }
  // An op name, keyword, dtype or attribute key: [A-Za-z0-9_.]+
  std::string word(const std::string& what) {
    skip();
    size_t b = i_;
    while (i_ < s_.size() && word_char(s_[i_])) ++i_;
    if (b == i_) fail("expected " + what);
    return s_.substr(b, i_ - b);
  }

  std::string string_lit() {
    skip();
    if (i_ >= s_.size() || s_[i_] != '"') fail("expected a string in double quotes");
    size_t start = i_++;
    std::string out;
    for (;;) {
      if (i_ >= s_.size() || s_[i_] == '\n') fail_at(start, "string is not closed");
      char c = s_[i_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail_at(start, "string is not closed");
      char e = s_[i_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'x': {
          if (i_ + 2 > s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[i_])) ||
              !std::isxdigit(static_cast<unsigned char>(s_[i_ + 1])))
            fail("\\x needs two hex digits");
          out += static_cast<char>(std::stoi(s_.substr(i_, 2), nullptr, 16));
          i_ += 2;
          break;
        }
        default: fail_at(i_ - 2, std::string("unknown escape \\") + e);
      }
    }
  }

  // A graph, value or attribute name: bare [A-Za-z0-9_./-]+ or quoted.
  std::string name() {
    skip();
    if (peek('"')) return string_lit();
    size_t b = i_;
    while (i_ < s_.size() && is_name_char(s_[i_])) ++i_;
    if (b == i_) fail("expected a name");
    return s_.substr(b, i_ - b);
  }
  std::string value_name() {
    expect('%', "before a value name");
    if (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) fail("no space allowed after '%'");
    return name();
  }

  DType dtype() {
    size_t at = (skip(), i_);
    std::string w = word("a dtype (f32, f16, bf16, f64, i64, i32, i8, u8, bool)");
    auto d = parse_dtype(w);
    if (!d) fail_at(at, "unknown dtype '" + w + "' (expected f32, f16, bf16, f64, i64, i32, i8, u8 or bool)");
    return *d;
  }

  Shape shape() {
    expect('[', "to open a shape");
    Shape out;
    if (accept(']')) return out;
    for (;;) {
      skip();
      size_t b = i_;
      while (i_ < s_.size() && s_[i_] != ',' && s_[i_] != ']' && s_[i_] != '\n') ++i_;
      std::string text = s_.substr(b, i_ - b);
      auto d = Dim::parse(text);
      if (!d) fail_at(b, "bad dim '" + text + "' (expected a number or a polynomial like batch*seq+1)");
      out.push_back(*d);
      if (accept(']')) return out;
      expect(',', "between dims");
    }
  }

  TensorType type() {
    TensorType t;
    t.dtype = dtype();
    t.shape = shape();
    t.known = true;
    return t;
  }

  // Number-like token: sign, digits, letters (inf, nan, exponents), dots.
  std::string number_token() {
    skip();
    size_t b = i_;
    if (i_ < s_.size() && (s_[i_] == '-' || s_[i_] == '+')) ++i_;
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '.') {
        ++i_;
      } else if ((c == '-' || c == '+') && (s_[i_ - 1] == 'e' || s_[i_ - 1] == 'E')) {
        ++i_;
      } else {
        break;
      }
    }
    if (b == i_) fail("expected a number");
    return s_.substr(b, i_ - b);
  }
  static bool looks_float(const std::string& t) {
    return t.find_first_of(".eEin") != std::string::npos;  // '.', exponent, inf, nan
  }
  double to_double(const std::string& t, size_t at) {
    std::string u = t[0] == '+' ? t.substr(1) : t;
    double v = 0;
    auto r = std::from_chars(u.data(), u.data() + u.size(), v);
    if (r.ec != std::errc() || r.ptr != u.data() + u.size()) fail_at(at, "bad number '" + t + "'");
    return v;
  }
  float to_float(const std::string& t, size_t at) {
    std::string u = t[0] == '+' ? t.substr(1) : t;
    float v = 0;
    auto r = std::from_chars(u.data(), u.data() + u.size(), v);
    if (r.ec != std::errc() || r.ptr != u.data() + u.size()) fail_at(at, "bad number '" + t + "'");
    return v;
  }
  int64_t to_int(const std::string& t, size_t at) {
    std::string u = t[0] == '+' ? t.substr(1) : t;
    int64_t v = 0;
    auto r = std::from_chars(u.data(), u.data() + u.size(), v);
    if (r.ec != std::errc() || r.ptr != u.data() + u.size()) fail_at(at, "bad integer '" + t + "'");
    return v;
  }

  // dtype shape ( '[' values ']' | '@' hash )
  Tensor tensor_lit() {
    DType dt = dtype();
    size_t shape_at = (skip(), i_);
    Shape sh = shape();
    if (!is_static(sh)) fail_at(shape_at, "a constant needs numeric dims, got " + str(sh));
    std::vector<int64_t> dims = static_dims(sh);
    for (int64_t d : dims)
      if (d < 0) fail_at(shape_at, "negative dim in constant shape " + str(sh));
    if (accept('@')) {
      size_t b = i_;
      while (i_ < s_.size() && std::isxdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
      if (i_ - b != 16) fail_at(b, "expected 16 hex digits after '@'");
      uint64_t h = std::stoull(s_.substr(b, 16), nullptr, 16);
      Tensor t = fill_from_hash(dt, dims, h);
      std::lock_guard<std::mutex> lock(g_elided_mu);
      elided_map()[t.content_hash()] = h;
      return t;
    }
    size_t open = (skip(), i_);
    expect('[', "to open the constant's values (or '@' and a content hash)");
    Tensor t(dt, dims);
    int64_t n = 0;
    if (!accept(']')) {
      for (;;) {
        size_t at = (skip(), i_);
        double v;
        if (dt == DType::boolean && accept_word("true")) {
          v = 1;
        } else if (dt == DType::boolean && accept_word("false")) {
          v = 0;
        } else {
          std::string tok = number_token();
          if (is_float(dt)) {
            v = dt == DType::f64 ? to_double(tok, at) : static_cast<double>(to_float(tok, at));
          } else {
            int64_t iv = to_int(tok, at);
            const int64_t lo = dt == DType::i32 ? INT32_MIN : dt == DType::i8 ? -128 : dt == DType::u8 ? 0 : INT64_MIN;
            const int64_t hi = dt == DType::i32 ? INT32_MAX : dt == DType::i8 ? 127 : dt == DType::u8 ? 255
                             : dt == DType::boolean ? 1 : INT64_MAX;
            if (iv < (dt == DType::boolean ? 0 : lo) || iv > hi)
              fail_at(at, "value " + tok + " does not fit " + std::string(ir::name(dt)));
            // i64 is written directly: a double would round values beyond 2^53.
            if (dt == DType::i64 && n < t.numel()) t.mutable_data<int64_t>()[n] = iv;
            v = static_cast<double>(iv);
          }
        }
        if (n < t.numel() && dt != DType::i64) t.set_f64(n, v);
        ++n;
        if (accept(']')) break;
        expect(',', "between values");
      }
    }
    if (n != t.numel())
      fail_at(open, "constant has " + std::to_string(n) + " values but " + std::string(ir::name(dt)) + str(sh) +
                        " needs " + std::to_string(t.numel()));
    return t;
  }

  AttrValue attr_value() {
    skip();
    size_t at = i_;
    if (peek('"')) return string_lit();
    if (accept_word("tensor")) return tensor_lit();
    if (accept_word("graph")) {
      auto g = std::make_shared<Graph>();
      parse_graph_rest(*g);
      return g;
    }
    if (accept_word("floats")) {
      expect('[', "after 'floats'");
      expect(']', "(only an empty list is spelled floats[])");
      return std::vector<double>{};
    }
    if (accept_word("strings")) {
      expect('[', "after 'strings'");
      expect(']', "(only an empty list is spelled strings[])");
      return std::vector<std::string>{};
    }
    if (accept('[')) {
      if (accept(']')) return std::vector<int64_t>{};
      if (peek('"')) {
        std::vector<std::string> out;
        for (;;) {
          out.push_back(string_lit());
          if (accept(']')) return out;
          expect(',', "between list elements");
        }
      }
      std::vector<std::pair<std::string, size_t>> toks;
      bool any_float = false;
      for (;;) {
        size_t tat = (skip(), i_);
        toks.emplace_back(number_token(), tat);
        any_float |= looks_float(toks.back().first);
        if (accept(']')) break;
        expect(',', "between list elements");
      }
      if (any_float) {
        std::vector<double> out;
        for (auto& [t, p] : toks) out.push_back(to_double(t, p));
        return out;
      }
      std::vector<int64_t> out;
      for (auto& [t, p] : toks) out.push_back(to_int(t, p));
      return out;
    }
    std::string tok = number_token();
    if (looks_float(tok)) return to_double(tok, at);
    return to_int(tok, at);
  }

  Value* lookup(const std::string& n, size_t at) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
      if (Value* v = (*it)->find_value(n)) return v;
    fail_at(at, "value %" + name_text(n) + " is used before it is defined");
  }

  Value* define(Graph& g, const std::string& n, size_t at) {
    if (g.find_value(n)) fail_at(at, "value %" + name_text(n) + " is defined twice");
    return g.add_value(n);
  }

  // After the keyword 'graph': NAME(inputs) -> (outputs) { statements }
  void parse_graph_rest(Graph& g) {
    g.name = name();
    scopes_.push_back(&g);
    expect('(', "to open the graph's inputs");
    if (!accept(')')) {
      for (;;) {
        size_t at = (skip(), i_);
        std::string n = value_name();
        expect(':', "between an input's name and its type");
        TensorType t = type();
        if (g.find_value(n)) fail_at(at, "graph input %" + name_text(n) + " is declared twice");
        g.add_input(n, t);
        if (accept(')')) break;
        expect(',', "between graph inputs");
      }
    }
    skip();
    if (s_.compare(i_, 2, "->") != 0) fail("expected '->' before the graph's outputs");
    i_ += 2;
    expect('(', "to open the graph's outputs");
    std::vector<std::pair<std::string, size_t>> outs;
    if (!accept(')')) {
      for (;;) {
        size_t at = (skip(), i_);
        outs.emplace_back(value_name(), at);
        if (accept(')')) break;
        expect(',', "between graph outputs");
      }
    }
    expect('{', "to open the graph's body");
    while (!accept('}')) {
      skip();
      if (i_ >= s_.size()) fail("graph '" + g.name + "' is not closed with '}'");
      statement(g);
    }
    for (auto& [n, at] : outs) {
      Value* v = g.find_value(n);
      if (!v) fail_at(at, "graph output %" + name_text(n) + " is never defined");
      g.add_output(v);
    }
    scopes_.pop_back();
  }

  void statement(Graph& g) {
    struct Out {
      std::string name;
      size_t at;
      std::optional<TensorType> type;
    };
    std::vector<Out> outs;
    if (peek('%')) {
      for (;;) {
        size_t at = (skip(), i_);
        Out o{value_name(), at, std::nullopt};
        if (accept(':')) o.type = type();
        outs.push_back(std::move(o));
        if (accept('=')) break;
        expect(',', "between a node's outputs (or '=' before its op)");
      }
      if (accept_word("const")) {
        if (outs.size() != 1 || outs[0].type) fail_at(outs[0].at, "a constant is written '%name = const dtype[dims] ...'");
        if (g.find_value(outs[0].name)) fail_at(outs[0].at, "value %" + name_text(outs[0].name) + " is defined twice");
        g.add_constant(outs[0].name, tensor_lit());
        return;
      }
    }
    size_t op_at = (skip(), i_);
    std::string op = word("an op name");
    std::string domain;
    if (auto dot = op.rfind('.'); dot != std::string::npos) {
      domain = op.substr(0, dot);
      op = op.substr(dot + 1);
      if (domain.empty() || op.empty()) fail_at(op_at, "bad op name '" + domain + "." + op + "'");
    }
    expect('(', "after the op name");
    std::vector<Value*> ins;
    if (!accept(')')) {
      for (;;) {
        size_t at = (skip(), i_);
        if (peek('%')) {
          ins.push_back(lookup(value_name(), at));
        } else if (accept_word("_")) {
          ins.push_back(nullptr);
        } else {
          fail("expected an input (%name, or _ for an absent optional input)");
        }
        if (accept(')')) break;
        expect(',', "between a node's inputs");
      }
    }
    std::map<std::string, AttrValue> attrs;
    if (accept('{')) {
      if (!accept('}')) {
        for (;;) {
          size_t at = (skip(), i_);
          std::string k = name();
          expect('=', "after attribute name '" + k + "'");
          if (attrs.count(k)) fail_at(at, "attribute '" + k + "' is given twice");
          attrs[k] = attr_value();
          if (accept('}')) break;
          expect(',', "between attributes");
        }
      }
    }
    std::string node_name;
    if (accept_word("name")) {
      expect('=', "after 'name'");
      node_name = string_lit();
      if (node_name.empty()) fail("a node name cannot be empty (leave name= out instead)");
    }
    std::vector<Value*> out_values;
    for (auto& o : outs) {
      Value* v = define(g, o.name, o.at);
      if (o.type) v->set_type(*o.type);
      out_values.push_back(v);
    }
    g.add_node_with_outputs(op, std::move(ins), std::move(out_values), std::move(attrs), node_name, domain);
  }
};

}  // namespace

Graph parse_graph(const std::string& text) { return Parser(text).parse_top(); }

}  // namespace sabre::ir
