// A tensor dimension: a number, or a polynomial in named symbols (batch, seq, batch*seq, seq+1).
//
// Shapes exported from PyTorch carry dims like batch*seq (a reshape to [-1, 768]) or past+seq
// (a Concat on a KV cache); keeping them as polynomials with integer coefficients lets shape
// inference stay exact without a symbolic-algebra library. Division is exact or it fails.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace sabre::ir {

class Dim {
 public:
  // A monomial is a sorted list of symbol names (repeats allowed: seq*seq).
  using Monomial = std::vector<std::string>;

  Dim() = default;  // the number 0
  Dim(int64_t v);   // NOLINT: numbers convert implicitly
  static Dim symbol(const std::string& name);

  bool is_static() const;   // no symbols
  int64_t value() const;    // requires is_static()
  bool is_symbol() const;   // exactly one symbol with coefficient 1
  std::vector<std::string> symbols() const;

  // Substitute numbers for symbols; nullopt when a symbol is left unbound.
  std::optional<int64_t> evaluate(const std::map<std::string, int64_t>& bindings) const;
  // Substitute numbers for the bound symbols only.
  Dim substitute(const std::map<std::string, int64_t>& bindings) const;

  Dim operator+(const Dim& o) const;
  Dim operator-(const Dim& o) const;
  Dim operator*(const Dim& o) const;
  // Exact division; nullopt when this is not a multiple of o.
  std::optional<Dim> divide(const Dim& o) const;
  // Floor division by a positive number, exact only for static dims (nullopt otherwise unless divisible).
  std::optional<Dim> floordiv(int64_t d) const;

  bool operator==(const Dim& o) const { return terms_ == o.terms_; }
  bool operator!=(const Dim& o) const { return !(*this == o); }
  bool operator<(const Dim& o) const { return terms_ < o.terms_; }

  // Stable text: "768", "batch", "batch*seq", "seq+1", "2*batch*seq".
  std::string str() const;
  // Parses the text form back; nullopt on bad text.
  static std::optional<Dim> parse(const std::string& text);

 private:
  void normalize();
  std::map<Monomial, int64_t> terms_;  // monomial -> nonzero coefficient; {} -> constant term
};

using Shape = std::vector<Dim>;

bool is_static(const Shape& s);
// Product of all dims (the element count, possibly symbolic).
Dim num_elements(const Shape& s);
// Requires is_static(s).
std::vector<int64_t> static_dims(const Shape& s);
Shape to_shape(const std::vector<int64_t>& dims);
std::string str(const Shape& s);  // "[batch,seq,768]"

}  // namespace sabre::ir
