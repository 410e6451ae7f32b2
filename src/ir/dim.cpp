#include "ir/dim.h"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <stdexcept>

#include "support/checked.h"

namespace sabre::ir {

namespace {
// Dims come from model files: their arithmetic is checked, never undefined.
int64_t add_or_throw(int64_t a, int64_t b) {
  auto r = support::checked_add(a, b);
  if (!r) throw std::overflow_error("dim arithmetic overflows int64 (" + std::to_string(a) + " + " + std::to_string(b) + ")");
  return *r;
}
int64_t mul_or_throw(int64_t a, int64_t b) {
  auto r = support::checked_mul(a, b);
  if (!r) throw std::overflow_error("dim arithmetic overflows int64 (" + std::to_string(a) + " * " + std::to_string(b) + ")");
  return *r;
}
}  // namespace

Dim::Dim(int64_t v) {
  if (v != 0) terms_[{}] = v;
}

Dim Dim::symbol(const std::string& name) {
  Dim d;
  d.terms_[{name}] = 1;
  return d;
}

void Dim::normalize() {
  for (auto it = terms_.begin(); it != terms_.end();) {
    if (it->second == 0)
      it = terms_.erase(it);
    else
      ++it;
  }
}

bool Dim::is_static() const {
  return terms_.empty() || (terms_.size() == 1 && terms_.begin()->first.empty());
}

int64_t Dim::value() const {
  if (!is_static()) throw std::logic_error("Dim::value() on symbolic dim " + str());
  return terms_.empty() ? 0 : terms_.begin()->second;
}

bool Dim::is_symbol() const {
  return terms_.size() == 1 && terms_.begin()->first.size() == 1 && terms_.begin()->second == 1;
}

std::vector<std::string> Dim::symbols() const {
  std::vector<std::string> out;
  for (const auto& [m, c] : terms_)
    for (const auto& s : m)
      if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  return out;
}

std::optional<int64_t> Dim::evaluate(const std::map<std::string, int64_t>& bindings) const {
  int64_t total = 0;
  for (const auto& [m, c] : terms_) {
    int64_t v = c;
    for (const auto& s : m) {
      auto it = bindings.find(s);
      if (it == bindings.end()) return std::nullopt;
      v = mul_or_throw(v, it->second);
    }
    total = add_or_throw(total, v);
  }
  return total;
}

Dim Dim::substitute(const std::map<std::string, int64_t>& bindings) const {
  Dim out;
  for (const auto& [m, c] : terms_) {
    Monomial rest;
    int64_t v = c;
    for (const auto& s : m) {
      auto it = bindings.find(s);
      if (it == bindings.end())
        rest.push_back(s);
      else
        v = mul_or_throw(v, it->second);
    }
    auto& t = out.terms_[rest];
    t = add_or_throw(t, v);
  }
  out.normalize();
  return out;
}

Dim Dim::operator+(const Dim& o) const {
  Dim out = *this;
  for (const auto& [m, c] : o.terms_) {
    auto& t = out.terms_[m];
    t = add_or_throw(t, c);
  }
  out.normalize();
  return out;
}

Dim Dim::operator-(const Dim& o) const {
  Dim out = *this;
  for (const auto& [m, c] : o.terms_) {
    auto& t = out.terms_[m];
    t = add_or_throw(t, mul_or_throw(c, -1));
  }
  out.normalize();
  return out;
}

Dim Dim::operator*(const Dim& o) const {
  Dim out;
  for (const auto& [m1, c1] : terms_)
    for (const auto& [m2, c2] : o.terms_) {
      Monomial m = m1;
      m.insert(m.end(), m2.begin(), m2.end());
      std::sort(m.begin(), m.end());
      auto& t = out.terms_[m];
      t = add_or_throw(t, mul_or_throw(c1, c2));
    }
  out.normalize();
  return out;
}

namespace {
// Removes the symbols of `divisor` from `m` (multiset difference); false if not all present.
bool remove_symbols(Dim::Monomial& m, const Dim::Monomial& divisor) {
  for (const auto& s : divisor) {
    auto it = std::find(m.begin(), m.end(), s);
    if (it == m.end()) return false;
    m.erase(it);
  }
  return true;
}
}  // namespace

std::optional<Dim> Dim::divide(const Dim& o) const {
  if (o.terms_.empty()) return std::nullopt;  // division by zero
  if (terms_.empty()) return Dim(0);
  // Divide by a single monomial term exactly; a polynomial divisor only when it equals us.
  if (o.terms_.size() != 1) {
    if (*this == o) return Dim(1);
    return std::nullopt;
  }
  const auto& [dm, dc] = *o.terms_.begin();
  Dim out;
  for (const auto& [m, c] : terms_) {
    Monomial rest = m;
    // INT64_MIN / -1 and % -1 trap on x86: a -1 divisor is a checked negation.
    if (!remove_symbols(rest, dm) || (dc != -1 && c % dc != 0)) return std::nullopt;
    auto& t = out.terms_[rest];
    t = add_or_throw(t, dc == -1 ? mul_or_throw(c, -1) : c / dc);
  }
  out.normalize();
  return out;
}

std::optional<Dim> Dim::floordiv(int64_t d) const {
  if (d <= 0) return std::nullopt;
  if (is_static()) {
    int64_t v = value();
    int64_t q = v / d;
    if ((v % d != 0) && ((v < 0) != (d < 0))) --q;
    return Dim(q);
  }
  return divide(Dim(d));
}

std::string Dim::str() const {
  if (terms_.empty()) return "0";
  std::ostringstream os;
  bool first = true;
  // Highest-degree terms first reads naturally: "batch*seq+1".
  std::vector<std::pair<Monomial, int64_t>> ordered(terms_.begin(), terms_.end());
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  for (const auto& [m, c] : ordered) {
    int64_t coeff = c;
    if (!first) os << (coeff < 0 ? "-" : "+");
    else if (coeff < 0) os << "-";
    first = false;
    std::string digits = std::to_string(coeff);
    if (coeff < 0) digits.erase(0, 1);  // -INT64_MIN has no int64: drop the sign as text
    bool wrote = false;
    if (m.empty() || digits != "1") {
      os << digits;
      wrote = true;
    }
    for (const auto& s : m) {
      if (wrote) os << "*";
      os << s;
      wrote = true;
    }
  }
  return os.str();
}

std::optional<Dim> Dim::parse(const std::string& text) {
  // Grammar: term (('+'|'-') term)*, term = factor ('*' factor)*, factor = integer | identifier.
  size_t i = 0;
  auto skip = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  };
  auto factor = [&]() -> std::optional<Dim> {
    skip();
    if (i >= text.size()) return std::nullopt;
    if (std::isdigit(static_cast<unsigned char>(text[i]))) {
      int64_t v = 0;
      while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])))
        v = v * 10 + (text[i++] - '0');
      return Dim(v);
    }
    if (std::isalpha(static_cast<unsigned char>(text[i])) || text[i] == '_') {
      size_t b = i;
      while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_'))
        ++i;
      return Dim::symbol(text.substr(b, i - b));
    }
    return std::nullopt;
  };
  auto term = [&]() -> std::optional<Dim> {
    auto d = factor();
    if (!d) return std::nullopt;
    for (;;) {
      skip();
      if (i < text.size() && text[i] == '*') {
        ++i;
        auto f = factor();
        if (!f) return std::nullopt;
        d = *d * *f;
      } else {
        return d;
      }
    }
  };
  skip();
  bool neg = false;
  if (i < text.size() && text[i] == '-') {
    neg = true;
    ++i;
  }
  auto d = term();
  if (!d) return std::nullopt;
  if (neg) d = Dim(0) - *d;
  for (;;) {
    skip();
    if (i >= text.size()) return d;
    char op = text[i];
    if (op != '+' && op != '-') return std::nullopt;
    ++i;
    auto t = term();
    if (!t) return std::nullopt;
    d = op == '+' ? *d + *t : *d - *t;
  }
}

bool is_static(const Shape& s) {
  return std::all_of(s.begin(), s.end(), [](const Dim& d) { return d.is_static(); });
}

Dim num_elements(const Shape& s) {
  Dim n(1);
  for (const auto& d : s) n = n * d;
  return n;
}

std::vector<int64_t> static_dims(const Shape& s) {
  std::vector<int64_t> out;
  out.reserve(s.size());
  for (const auto& d : s) out.push_back(d.value());
  return out;
}

Shape to_shape(const std::vector<int64_t>& dims) { return Shape(dims.begin(), dims.end()); }

std::string str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ",";
    out += s[i].str();
  }
  return out + "]";
}

}  // namespace sabre::ir
