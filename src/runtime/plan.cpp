#include "runtime/plan.h"

#include <cmath>
#include <cstdint>
#include <algorithm>
#include <cctype>

namespace sabre::runtime {

DimExpr::DimExpr(int64_t v) {
  if (v != 0) terms_.push_back({v, {}});
}

DimExpr DimExpr::parse(const std::string& text) {
  // term (('+'|'-') term)*, term = factor ('*' factor)*, factor = integer | identifier
  DimExpr out;
  size_t i = 0;
  auto fail = [&](const char* what) -> PlanError {
    return PlanError("bad dim '" + text + "': " + what + " at " + std::to_string(i));
  };
  auto skip = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  };
  int64_t sign = 1;
  skip();
  if (i < text.size() && text[i] == '-') {
    sign = -1;
    ++i;
  }
  for (;;) {
    Term t{sign, {}};
    for (;;) {
      skip();
      if (i >= text.size()) throw fail("expected a number or a name");
      unsigned char c = static_cast<unsigned char>(text[i]);
      if (std::isdigit(c)) {
        // Exporters write INT64_MAX and INT64_MIN as "to the end" in Slice bounds: both must parse.
        const uint64_t limit = static_cast<uint64_t>(INT64_MAX) + (t.coeff < 0 ? 1 : 0);
        uint64_t v = 0;
        while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
          const auto d = static_cast<uint64_t>(text[i] - '0');
          if (v > (limit - d) / 10) throw fail("number too large");
          v = v * 10 + d;
          ++i;
        }
        if (v > static_cast<uint64_t>(INT64_MAX)) {  // only -2^63, as a lone negative factor
          if (t.coeff != -1) throw fail("number too large");
          t.coeff = INT64_MIN;
        } else if (__builtin_mul_overflow(t.coeff, static_cast<int64_t>(v), &t.coeff)) {
          throw fail("number too large");
        }
      } else if (std::isalpha(c) || c == '_') {
        size_t b = i;
        while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_')) ++i;
        t.symbols.push_back(text.substr(b, i - b));
      } else {
        throw fail("unexpected character");
      }
      skip();
      if (i < text.size() && text[i] == '*') {
        ++i;
        continue;
      }
      break;
    }
    std::sort(t.symbols.begin(), t.symbols.end());
    if (t.coeff != 0) out.terms_.push_back(std::move(t));
    skip();
    if (i >= text.size()) break;
    if (text[i] == '+')
      sign = 1;
    else if (text[i] == '-')
      sign = -1;
    else
      throw fail("expected '+' or '-'");
    ++i;
  }
  return out;
}

bool DimExpr::is_static() const {
  return std::all_of(terms_.begin(), terms_.end(), [](const Term& t) { return t.symbols.empty(); });
}

int64_t DimExpr::value() const {
  if (!is_static()) throw PlanError("dim '" + str() + "' is symbolic where a number was needed");
  int64_t v = 0;
  for (const auto& t : terms_) v += t.coeff;
  return v;
}

int64_t DimExpr::eval(const std::map<std::string, int64_t>& dims) const {
  int64_t total = 0;
  for (const auto& t : terms_) {
    int64_t v = t.coeff;
    for (const auto& s : t.symbols) {
      auto it = dims.find(s);
      if (it == dims.end()) throw PlanError("dim '" + str() + "' needs symbol '" + s + "', which no input binds");
      v *= it->second;
    }
    total += v;
  }
  return total;
}

std::string DimExpr::str() const {
  if (terms_.empty()) return "0";
  std::string out;
  for (size_t i = 0; i < terms_.size(); ++i) {
    const Term& t = terms_[i];
    int64_t c = t.coeff;
    if (i > 0) out += c < 0 ? "-" : "+";
    else if (c < 0) out += "-";
    // The magnitude as unsigned: -INT64_MIN does not fit an int64_t.
    const uint64_t mag = c < 0 ? 0 - static_cast<uint64_t>(c) : static_cast<uint64_t>(c);
    bool wrote = false;
    if (t.symbols.empty() || mag != 1) {
      out += std::to_string(mag);
      wrote = true;
    }
    for (const auto& s : t.symbols) {
      if (wrote) out += "*";
      out += s;
      wrote = true;
    }
  }
  return out;
}

const char* to_string(TensorKind k) {
  switch (k) {
    case TensorKind::input: return "input";
    case TensorKind::output: return "output";
    case TensorKind::weight: return "weight";
    case TensorKind::activation: return "activation";
  }
  return "?";
}

namespace {

json::Value ints(const std::vector<int>& v) {
  json::Array a;
  for (int x : v) a.push_back(json::Value(static_cast<double>(x)));
  return json::Value(std::move(a));
}

const json::Value& need(const json::Value& obj, const char* key, const std::string& where) {
  const json::Value* v = obj.get(key);
  if (!v) throw PlanError("plan: " + where + " has no '" + key + "'");
  return *v;
}

std::vector<int> read_ids(const json::Value& v, size_t num_tensors, const std::string& where, bool allow_absent) {
  std::vector<int> out;
  for (const auto& x : v.arr()) {
    double d = x.num();
    if (!(d >= (allow_absent ? -1 : 0) && d < static_cast<double>(num_tensors) && d == static_cast<double>(static_cast<int64_t>(d))))
      throw PlanError("plan: " + where + " names tensor " + json::Value(d).dump() + ", which does not exist");
    out.push_back(static_cast<int>(d));
  }
  return out;
}

}  // namespace

std::string Plan::to_json() const {
  json::Array syms, tens, steps_out;
  for (const auto& s : symbols)
    syms.push_back(json::Value(json::Object{{"name", json::Value(s.name)},
                                            {"min", json::Value(static_cast<double>(s.min))},
                                            {"max", json::Value(static_cast<double>(s.max))}}));
  for (const auto& t : tensors) {
    json::Array shape;
    for (const auto& d : t.shape) shape.push_back(json::Value(d.str()));
    json::Object o{{"name", json::Value(t.name)},
                   {"dtype", json::Value(std::string(ir::name(t.dtype)))},
                   {"shape", json::Value(std::move(shape))},
                   {"kind", json::Value(to_string(t.kind))}};
    if (t.kind == TensorKind::weight) {
      o["offset"] = json::Value(static_cast<double>(t.weight_offset));
      o["bytes"] = json::Value(static_cast<double>(t.weight_bytes));
    }
    tens.push_back(json::Value(std::move(o)));
  }
  for (const auto& s : steps)
    steps_out.push_back(json::Value(json::Object{{"op", json::Value(s.op)},
                                                 {"name", json::Value(s.name)},
                                                 {"inputs", ints(s.inputs)},
                                                 {"outputs", ints(s.outputs)},
                                                 {"params", s.params_json()}}));
  json::Object root{{"format_version", json::Value(static_cast<double>(format_version))},
                    {"symbols", json::Value(std::move(syms))},
                    {"tensors", json::Value(std::move(tens))},
                    {"inputs", ints(inputs)},
                    {"outputs", ints(outputs)},
                    {"steps", json::Value(std::move(steps_out))}};
  return json::Value(std::move(root)).dump();
}

namespace {

// A weight offset or size from plan.json: a whole number in [0, 2^53] (what a JSON double holds
// exactly), so that negative, fractional and wrapping values are refused before any bounds check.
uint64_t byte_count(const json::Value& v, const std::string& what) {
  const double d = v.num();
  constexpr double kMax = 9007199254740992.0;  // 2^53
  if (!(d >= 0) || d > kMax || d != static_cast<double>(static_cast<uint64_t>(d)))
    throw PlanError("plan: " + what + " is " + json::Value(d).dump() +
                    ", not a byte count (a whole number from 0 to 2^53); the artifact is corrupt, recompile it");
  return static_cast<uint64_t>(d);
}

}  // namespace

int64_t whole_number(const json::Value& v, int64_t lo, int64_t hi, const std::string& what) {
  const double d = v.num();
  if (!(d >= static_cast<double>(lo) && d <= static_cast<double>(hi)) || d != std::floor(d))
    throw PlanError(what + " is " + json::Value(d).dump() + ", not a whole number from " + std::to_string(lo) + " to " +
                    std::to_string(hi) + "; the artifact is corrupt, recompile it");
  return static_cast<int64_t>(d);
}

Plan Plan::from_json(const std::string& text) {
  json::Value root;
  try {
    root = json::parse(text);
  } catch (const std::exception& e) {
    throw PlanError(std::string("plan: not valid JSON: ") + e.what());
  }
  Plan p;
  try {
    p.format_version = static_cast<int>(whole_number(need(root, "format_version", "the plan"), 0, 1 << 30, "plan: format_version"));
    if (p.format_version != kFormatVersion)
      throw PlanError("plan: format version " + std::to_string(p.format_version) + ", this runtime reads " +
                      std::to_string(kFormatVersion) + "; recompile the model with this sabre");
    for (const auto& s : need(root, "symbols", "the plan").arr())
      p.symbols.push_back({need(s, "name", "a symbol").str(),
                           whole_number(need(s, "min", "a symbol"), INT64_MIN / 2, INT64_MAX / 2, "plan: a symbol's min"),
                           whole_number(need(s, "max", "a symbol"), INT64_MIN / 2, INT64_MAX / 2, "plan: a symbol's max")});
    for (const auto& t : need(root, "tensors", "the plan").arr()) {
      TensorInfo ti;
      ti.name = need(t, "name", "a tensor").str();
      std::string where = "tensor '" + ti.name + "'";
      auto dt = ir::parse_dtype(need(t, "dtype", where).str());
      if (!dt || *dt == ir::DType::str)  // string tensors run only on the CPU reference
        throw PlanError("plan: " + where + " has unknown dtype '" + need(t, "dtype", where).str() + "'");
      ti.dtype = *dt;
      for (const auto& d : need(t, "shape", where).arr()) ti.shape.push_back(DimExpr::parse(d.str()));
      std::string kind = need(t, "kind", where).str();
      if (kind == "input") ti.kind = TensorKind::input;
      else if (kind == "output") ti.kind = TensorKind::output;
      else if (kind == "weight") ti.kind = TensorKind::weight;
      else if (kind == "activation") ti.kind = TensorKind::activation;
      else throw PlanError("plan: " + where + " has unknown kind '" + kind + "'");
      if (ti.kind == TensorKind::weight) {
        ti.weight_offset = byte_count(need(t, "offset", where), where + ": weight offset");
        ti.weight_bytes = byte_count(need(t, "bytes", where), where + ": weight bytes");
      }
      p.tensors.push_back(std::move(ti));
    }
    const size_t n = p.tensors.size();
    p.inputs = read_ids(need(root, "inputs", "the plan"), n, "the plan's inputs", false);
    p.outputs = read_ids(need(root, "outputs", "the plan"), n, "the plan's outputs", false);
    for (const auto& s : need(root, "steps", "the plan").arr()) {
      Step st;
      st.op = need(s, "op", "a step").str();
      st.name = need(s, "name", "a step").str();
      std::string where = "step '" + st.name + "' (" + st.op + ")";
      st.inputs = read_ids(need(s, "inputs", where), n, where, true);
      st.outputs = read_ids(need(s, "outputs", where), n, where, false);
      const std::optional<StepKind> kind = step_kind(st.op);
      if (!kind)
        throw PlanError("plan: " + where + " is an op this runtime does not know; run it with the sabre that compiled it");
      st.params = parse_step_params(*kind, need(s, "params", where), where);
      p.steps.push_back(std::move(st));
    }
  } catch (const PlanError&) {
    throw;
  } catch (const std::exception& e) {
    throw PlanError(std::string("plan: malformed: ") + e.what());
  }
  return p;
}

Step make_step(std::string op, std::string name, std::vector<int> inputs, std::vector<int> outputs) {
  Step s{std::move(op), std::move(name), std::move(inputs), std::move(outputs), {}};
  if (auto k = step_kind(s.op)) s.params = default_step_params(*k);
  return s;
}

Step make_step(std::string op, std::string name, std::vector<int> inputs, std::vector<int> outputs,
               const json::Value& params) {
  Step s = make_step(std::move(op), std::move(name), std::move(inputs), std::move(outputs));
  const std::optional<StepKind> k = step_kind(s.op);
  if (!k) throw PlanError("plan: step '" + s.name + "' (" + s.op + ") is an op this runtime does not know");
  s.params = parse_step_params(*k, params, "step '" + s.name + "' (" + s.op + ")");
  return s;
}

std::map<std::string, int64_t> Plan::bind_dims(const std::vector<std::vector<int64_t>>& shapes) const {
  if (shapes.size() != inputs.size())
    throw PlanError("the model takes " + std::to_string(inputs.size()) + " inputs, got " + std::to_string(shapes.size()));
  std::map<std::string, int64_t> dims;
  auto shape_str = [](const std::vector<int64_t>& s) {
    std::string o = "[";
    for (size_t i = 0; i < s.size(); ++i) o += (i ? "," : "") + std::to_string(s[i]);
    return o + "]";
  };
  // First bind plain symbols, then check every dim (products like batch*seq need both).
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorInfo& t = tensors[static_cast<size_t>(inputs[i])];
    if (shapes[i].size() != t.shape.size())
      throw PlanError("input '" + t.name + "' has rank " + std::to_string(shapes[i].size()) + " (shape " +
                      shape_str(shapes[i]) + ") but the model expects rank " + std::to_string(t.shape.size()));
    for (size_t d = 0; d < t.shape.size(); ++d) {
      std::string s = t.shape[d].str();
      if (t.shape[d].is_static() || s.find_first_of("*+-") != std::string::npos) continue;
      auto [it, fresh] = dims.emplace(s, shapes[i][d]);
      if (!fresh && it->second != shapes[i][d])
        throw PlanError("input '" + t.name + "' has " + s + "=" + std::to_string(shapes[i][d]) +
                        " but another input has " + s + "=" + std::to_string(it->second));
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorInfo& t = tensors[static_cast<size_t>(inputs[i])];
    for (size_t d = 0; d < t.shape.size(); ++d) {
      int64_t want = t.shape[d].eval(dims);
      if (want != shapes[i][d])
        throw PlanError("input '" + t.name + "' has shape " + shape_str(shapes[i]) + " but dim " + std::to_string(d) +
                        " must be " + t.shape[d].str() + " = " + std::to_string(want));
    }
  }
  for (const auto& s : symbols) {
    auto it = dims.find(s.name);
    if (it == dims.end()) continue;
    if (it->second < s.min || it->second > s.max)
      throw PlanError(s.name + "=" + std::to_string(it->second) + " is outside the compiled range " +
                      std::to_string(s.min) + ".." + std::to_string(s.max) + "; recompile with --dynamic " + s.name +
                      "=" + std::to_string(std::min(s.min, it->second)) + ".." +
                      std::to_string(std::max(s.max, it->second)));
  }
  return dims;
}

}  // namespace sabre::runtime
