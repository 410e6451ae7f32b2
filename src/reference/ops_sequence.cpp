// Sequence values (ONNX seq(tensor)) and STRING tensors on the reference: the Sequence* ops,
// SplitToSequence, ConcatFromSequence, StringNormalizer, and the string forms of Equal and Cast.
// A sequence is a Tensor holding its elements (ir::Tensor::sequence); a string tensor keeps its
// elements in Tensor::strings(). Tests: tests/unit/sequence_test.cpp
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>

#include "reference/kernels.h"

namespace sabre::reference::detail {
namespace {

const Tensor& seq_in(const ir::Node& n, const Inputs& xs, size_t i) {
  const Tensor& s = in(n, xs, i);
  if (!s.is_sequence()) fail(n, "input " + std::to_string(i) + " must be a sequence, got a tensor");
  return s;
}

const Tensor& tensor_in(const ir::Node& n, const Inputs& xs, size_t i) {
  const Tensor& t = in(n, xs, i);
  if (t.is_sequence()) fail(n, "input " + std::to_string(i) + " must be a tensor, got a sequence");
  return t;
}

// A position input: a scalar (or [1]) in [-len, len) (or [-len, len] where `end_ok`, SequenceInsert), normalized.
int64_t position(const ir::Node& n, const Tensor& p, int64_t len, bool end_ok) {
  if (p.numel() != 1 || p.rank() > 1 || (p.dtype() != DType::i64 && p.dtype() != DType::i32))
    fail(n, "position must be an int32 or int64 scalar");
  int64_t k = p.get_i64(0);
  const int64_t hi = end_ok ? len : len - 1;
  if (k < -len || k > hi)
    fail(n, "position " + std::to_string(k) + " is out of range for a sequence of " + std::to_string(len) + " tensors");
  return k < 0 ? k + len : k;
}

std::vector<Tensor> sequence_empty(const ir::Node& n, const Inputs&) {
  DType d = DType::f32;
  if (n.has_attr("dtype")) {
    auto p = ir::parse_dtype(n.attr_string("dtype"));
    if (!p) fail(n, "unknown dtype '" + n.attr_string("dtype") + "'");
    d = *p;
  }
  return {Tensor::sequence(d, {})};
}

std::vector<Tensor> sequence_construct(const ir::Node& n, const Inputs& xs) {
  std::vector<Tensor> elems;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& t = tensor_in(n, xs, i);
    if (t.dtype() != tensor_in(n, xs, 0).dtype()) fail(n, "inputs have different dtypes");
    elems.push_back(t);
  }
  if (elems.empty()) fail(n, "needs at least one tensor");
  const DType d = elems[0].dtype();  // before the move: argument order is unspecified
  return {Tensor::sequence(d, std::move(elems))};
}

std::vector<Tensor> sequence_insert(const ir::Node& n, const Inputs& xs) {
  const Tensor& s = seq_in(n, xs, 0);
  const Tensor& t = tensor_in(n, xs, 1);
  if (t.dtype() != s.dtype())
    fail(n, "tensor is " + std::string(ir::name(t.dtype())) + " but the sequence holds " + std::string(ir::name(s.dtype())));
  std::vector<Tensor> elems = s.elements();
  const int64_t len = static_cast<int64_t>(elems.size());
  const int64_t at = opt_in(xs, 2) ? position(n, *xs[2], len, true) : len;
  elems.insert(elems.begin() + at, t);
  return {Tensor::sequence(s.dtype(), std::move(elems))};
}

std::vector<Tensor> sequence_erase(const ir::Node& n, const Inputs& xs) {
  const Tensor& s = seq_in(n, xs, 0);
  std::vector<Tensor> elems = s.elements();
  const int64_t len = static_cast<int64_t>(elems.size());
  if (len == 0) fail(n, "cannot erase from an empty sequence");
  const int64_t at = opt_in(xs, 1) ? position(n, *xs[1], len, false) : len - 1;
  elems.erase(elems.begin() + at);
  return {Tensor::sequence(s.dtype(), std::move(elems))};
}

std::vector<Tensor> sequence_at(const ir::Node& n, const Inputs& xs) {
  const Tensor& s = seq_in(n, xs, 0);
  const int64_t len = static_cast<int64_t>(s.elements().size());
  return {s.elements()[static_cast<size_t>(position(n, in(n, xs, 1), len, false))]};
}

std::vector<Tensor> sequence_length(const ir::Node& n, const Inputs& xs) {
  return {Tensor::from_i64({static_cast<int64_t>(seq_in(n, xs, 0).elements().size())}, {})};
}

// Copies the [outer, len, inner] block [from, from + count) along the middle axis into a new tensor.
Tensor slice_axis(const Tensor& x, int64_t axis, int64_t from, int64_t count, bool keep) {
  Dims d = x.dims();
  int64_t outer = 1, inner = static_cast<int64_t>(ir::size_of(x.dtype()));
  for (int64_t i = 0; i < axis; ++i) outer *= d[i];
  for (size_t i = static_cast<size_t>(axis) + 1; i < d.size(); ++i) inner *= d[i];
  const int64_t len = d[axis];
  d[axis] = count;
  if (!keep) d.erase(d.begin() + axis);
  Tensor out(x.dtype(), d);
  uint8_t* o = out.mutable_bytes();
  for (int64_t b = 0; b < outer; ++b)
    if (count * inner > 0) std::memcpy(o + b * count * inner, x.bytes() + (b * len + from) * inner, count * inner);
  return out;
}

std::vector<Tensor> split_to_sequence(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = tensor_in(n, xs, 0);
  if (x.dtype() == DType::str) fail(n, "does not take string tensors");
  if (x.rank() == 0) fail(n, "input must have rank >= 1");
  const int64_t axis = norm_axis(n, n.attr_int("axis", 0), x.rank());
  const int64_t len = x.dims()[axis];
  std::vector<Tensor> parts;
  const Tensor* split = opt_in(xs, 1);
  if (!split) {
    const bool keep = n.attr_int("keepdims", 1) != 0;
    for (int64_t i = 0; i < len; ++i) parts.push_back(slice_axis(x, axis, i, 1, keep));
  } else {
    std::vector<int64_t> sizes = to_i64(*split);
    if (split->rank() == 0) {  // chunks of that size; the last may be shorter
      const int64_t c = sizes[0];
      if (c <= 0) fail(n, "split size must be positive, got " + std::to_string(c));
      sizes.clear();
      for (int64_t at = 0; at < len; at += c) sizes.push_back(std::min(c, len - at));
    } else if (split->rank() != 1) {
      fail(n, "split must be a scalar or a 1-D tensor");
    }
    int64_t at = 0;
    for (int64_t c : sizes) {
      if (c < 0 || at + c > len)
        fail(n, "split sizes do not add up to the axis length " + std::to_string(len));
      parts.push_back(slice_axis(x, axis, at, c, true));
      at += c;
    }
    if (at != len) fail(n, "split sizes add up to " + std::to_string(at) + ", not the axis length " + std::to_string(len));
  }
  return {Tensor::sequence(x.dtype(), std::move(parts))};
}

std::vector<Tensor> concat_from_sequence(const ir::Node& n, const Inputs& xs) {
  const Tensor& s = seq_in(n, xs, 0);
  const auto& elems = s.elements();
  if (elems.empty()) fail(n, "cannot concatenate an empty sequence");
  if (s.dtype() == DType::str) fail(n, "does not take string tensors");
  const bool new_axis = n.attr_int("new_axis", 0) != 0;
  const Dims& d0 = elems[0].dims();
  const int64_t r = static_cast<int64_t>(d0.size());
  if (r == 0 && !new_axis) fail(n, "cannot concatenate scalars without new_axis=1");
  const int64_t axis = norm_axis(n, n.attr_int("axis"), r + (new_axis ? 1 : 0));
  // With new_axis each element gains a dim of 1 at `axis`, then they concatenate there.
  auto expanded = [&](const Tensor& t) {
    Dims d = t.dims();
    if (new_axis) d.insert(d.begin() + axis, 1);
    return d;
  };
  Dims out = expanded(elems[0]);
  out[axis] = 0;
  for (const Tensor& t : elems) {
    Dims d = expanded(t);
    if (d.size() != out.size()) fail(n, "elements have different ranks");
    for (size_t i = 0; i < d.size(); ++i)
      if (static_cast<int64_t>(i) != axis && d[i] != out[i])
        fail(n, "elements differ in dim " + std::to_string(i) + " (" + std::to_string(d[i]) + " vs " + std::to_string(out[i]) + ")");
    out[axis] += d[axis];
  }
  int64_t outer = 1, inner = static_cast<int64_t>(ir::size_of(s.dtype()));
  for (int64_t i = 0; i < axis; ++i) outer *= out[i];
  for (size_t i = static_cast<size_t>(axis) + 1; i < out.size(); ++i) inner *= out[i];
  Tensor y(s.dtype(), out);
  uint8_t* o = y.mutable_bytes();
  int64_t at = 0;
  for (const Tensor& t : elems) {
    const int64_t len = expanded(t)[axis];
    for (int64_t b = 0; b < outer; ++b)
      if (len * inner > 0) std::memcpy(o + (b * out[axis] + at) * inner, t.bytes() + b * len * inner, len * inner);
    at += len;
  }
  return {y};
}

// ---- strings

std::string ascii_case(std::string s, bool upper) {
  for (char& c : s) c = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Case changes and case-insensitive matching are ASCII: other bytes (UTF-8) pass unchanged.
std::vector<Tensor> string_normalizer(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = tensor_in(n, xs, 0);
  if (x.dtype() != DType::str) fail(n, "input must be a string tensor");
  const bool two_d = x.rank() == 2;
  if (!(x.rank() == 1 || (two_d && x.dims()[0] == 1))) fail(n, "input must be [C] or [1,C]");
  const std::string action = n.attr_string("case_change_action", "NONE");
  if (action != "NONE" && action != "LOWER" && action != "UPPER")
    fail(n, "case_change_action must be NONE, LOWER or UPPER, got '" + action + "'");
  const bool sensitive = n.attr_int("is_case_sensitive", 0) != 0;
  std::set<std::string> stop;
  if (n.has_attr("stopwords"))
    for (const std::string& w : std::get<std::vector<std::string>>(n.attrs().at("stopwords")))
      stop.insert(sensitive ? w : ascii_case(w, false));
  std::vector<std::string> kept;
  for (const std::string& s : x.strings()) {
    if (stop.count(sensitive ? s : ascii_case(s, false))) continue;
    kept.push_back(action == "NONE" ? s : ascii_case(s, action == "UPPER"));
  }
  if (kept.empty()) kept.push_back("");  // ONNX: an all-stopword input gives one empty string
  const int64_t c = static_cast<int64_t>(kept.size());
  return {Tensor::from_strings(std::move(kept), two_d ? Dims{1, c} : Dims{c})};
}

std::string float_text(double v, DType from) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "INF" : "-INF";
  char buf[64];
  // Shortest text that reads back to the same value in the source precision.
  auto r = from == DType::f64 ? std::to_chars(buf, buf + sizeof buf, v) : std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
  return std::string(buf, r.ptr);
}

Tensor to_strings(const Tensor& x) {
  std::vector<std::string> out(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (ir::is_float(x.dtype())) out[i] = float_text(x.get_f64(i), x.dtype());
    else if (x.dtype() == DType::boolean) out[i] = x.get_i64(i) ? "1" : "0";
    else out[i] = std::to_string(x.get_i64(i));
  }
  return Tensor::from_strings(std::move(out), x.dims());
}

Tensor from_strings(const ir::Node& n, const Tensor& x, DType to) {
  Tensor out(to, x.dims());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const std::string& s = x.strings()[static_cast<size_t>(i)];
    const char* b = s.c_str();
    char* e = nullptr;
    const double v = std::strtod(b, &e);  // takes "NaN", "INF", "-inf" as ONNX writes them
    if (e == b || *e != '\0') fail(n, "string '" + s + "' is not a number");
    out.set_f64(i, v);
  }
  return out;
}

Kernel string_cast(Kernel numeric) {
  return [numeric](const ir::Node& n, const Inputs& xs) -> std::vector<Tensor> {
    const Tensor& x = tensor_in(n, xs, 0);
    DType to;
    if (n.op() == "CastLike") {
      to = in(n, xs, 1).dtype();
    } else {
      auto p = ir::parse_dtype(n.attr_string("to"));
      if (!p) fail(n, "unknown target dtype '" + n.attr_string("to") + "'");
      to = *p;
    }
    if (x.dtype() == DType::str && to == DType::str) return {x};
    if (to == DType::str) return {to_strings(x)};
    if (x.dtype() == DType::str) return {from_strings(n, x, to)};
    return numeric(n, xs);
  };
}

Kernel string_equal(Kernel numeric) {
  return [numeric](const ir::Node& n, const Inputs& xs) -> std::vector<Tensor> {
    const Tensor& a = tensor_in(n, xs, 0);
    const Tensor& b = tensor_in(n, xs, 1);
    if (a.dtype() != DType::str && b.dtype() != DType::str) return numeric(n, xs);
    if (a.dtype() != b.dtype()) fail(n, "compares a string tensor with a " + std::string(ir::name(a.dtype() == DType::str ? b.dtype() : a.dtype())) + " one");
    const Dims out = broadcast_dims(n, a.dims(), b.dims());
    const std::vector<int64_t> ia = broadcast_index(a.dims(), out), ib = broadcast_index(b.dims(), out);
    Tensor y(DType::boolean, out);
    uint8_t* p = y.mutable_bytes();
    for (size_t i = 0; i < ia.size(); ++i) p[i] = a.strings()[ia[i]] == b.strings()[ib[i]];
    return {y};
  };
}

}  // namespace

void register_sequence_ops(Table& t) {
  auto add = [&](const char* op, Kernel k) { t[{"", op}] = std::move(k); };
  add("SequenceEmpty", sequence_empty);
  add("SequenceConstruct", sequence_construct);
  add("SequenceInsert", sequence_insert);
  add("SequenceErase", sequence_erase);
  add("SequenceAt", sequence_at);
  add("SequenceLength", sequence_length);
  add("SplitToSequence", split_to_sequence);
  add("ConcatFromSequence", concat_from_sequence);
  add("StringNormalizer", string_normalizer);
  // The numeric kernels stay underneath: these only take the string cases (registered after them).
  for (const char* op : {"Cast", "CastLike"})
    if (auto it = t.find({"", op}); it != t.end()) it->second = string_cast(it->second);
  if (auto it = t.find({"", "Equal"}); it != t.end()) it->second = string_equal(it->second);
}

}  // namespace sabre::reference::detail
