#include "ir/npy.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "ir/dim.h"
#include "support/files.h"

namespace sabre::ir {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

struct DescrRow {
  const char* descr;  // as numpy writes it
  DType dtype;
};
// What we write for each dtype (bf16 has no numpy spelling: it goes out as <f4).
constexpr DescrRow kDescr[] = {
    {"<f4", DType::f32}, {"<f2", DType::f16}, {"<f8", DType::f64}, {"<i8", DType::i64},
    {"<i4", DType::i32}, {"|i1", DType::i8},  {"|u1", DType::u8},  {"|b1", DType::boolean},
};

std::optional<DType> dtype_of_descr(std::string d) {
  // 1-byte types have no byte order; '=' is native, and sabre only runs on little-endian hosts.
  if (d.size() == 3 && (d[0] == '<' || d[0] == '=' || (d[0] == '|' && d[2] == '1'))) {
    if (d[2] == '1') d[0] = '|';
    else d[0] = '<';
  }
  for (const auto& r : kDescr)
    if (d == r.descr) return r.dtype;
  return std::nullopt;
}

// A tiny reader for the header: a Python dict literal of strings, booleans and int tuples.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& what) : s_(text), what_(what) {}

  void parse(std::string& descr, bool& fortran, std::vector<int64_t>& shape) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    expect('{');
    while (!accept('}')) {
      std::string key = str();
      expect(':');
      if (key == "descr") {
        if (!peek('\'') && !peek('"'))
          bad("descr is not a simple dtype string (structured arrays are not supported)");
        descr = str();
        have_descr = true;
      } else if (key == "fortran_order") {
        fortran = boolean();
        have_fortran = true;
      } else if (key == "shape") {
        shape = tuple();
        have_shape = true;
      } else {
        bad("unexpected key '" + key + "' in header");
      }
      if (!accept(',')) {
        expect('}');
        break;
      }
    }
    if (!have_descr || !have_fortran || !have_shape) bad("header lacks one of descr, fortran_order, shape");
  }

 private:
  const std::string& s_;
  const std::string& what_;
  size_t i_ = 0;

  [[noreturn]] void bad(const std::string& m) const { throw NpyError(what_ + ": bad .npy header: " + m); }
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
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
  void expect(char c) {
    if (!accept(c)) bad(std::string("expected '") + c + "'");
  }
  std::string str() {
    skip();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) bad("expected a quoted string");
    char q = s_[i_++];
    size_t b = i_;
    while (i_ < s_.size() && s_[i_] != q) ++i_;
    if (i_ >= s_.size()) bad("unterminated string");
    return s_.substr(b, i_++ - b);
  }
  bool boolean() {
    skip();
    if (s_.compare(i_, 4, "True") == 0) {
      i_ += 4;
      return true;
    }
    if (s_.compare(i_, 5, "False") == 0) {
      i_ += 5;
      return false;
    }
    bad("fortran_order is neither True nor False");
  }
  std::vector<int64_t> tuple() {
    std::vector<int64_t> out;
    expect('(');
    while (!accept(')')) {
      skip();
      size_t b = i_;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
      if (b == i_ || i_ - b > 18) bad("shape holds something other than a non-negative integer");
      out.push_back(std::stoll(s_.substr(b, i_ - b)));
      skip();
      if (i_ < s_.size() && s_[i_] == 'L') ++i_;  // Python 2 longs
      if (!accept(',')) {
        expect(')');
        break;
      }
    }
    return out;
  }
};

uint32_t read_le(const std::string& b, size_t at, size_t n) {
  uint32_t v = 0;
  for (size_t k = 0; k < n; ++k) v |= static_cast<uint32_t>(static_cast<uint8_t>(b[at + k])) << (8 * k);
  return v;
}

}  // namespace

namespace {

void append_utf8(std::string& out, uint32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xc0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xe0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  }
}

// UTF-8 -> code points; bytes that are not valid UTF-8 are taken one by one (as Latin-1).
std::vector<uint32_t> utf32_of(const std::string& s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) >> 6) == 2;
    if (!ok) {
      out.push_back(b);
      ++i;
      continue;
    }
    uint32_t c = n == 1 ? b : b & (0x7f >> n);
    for (size_t k = 1; k < n; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    out.push_back(c);
    i += n;
  }
  return out;
}

Tensor parse_strings(const std::string& b, size_t data_at, const std::string& descr, bool fortran,
                     const std::vector<int64_t>& shape, const std::string& what) {
  const bool unicode = descr[1] == 'U';
  int64_t width = 0;
  for (size_t i = 2; i < descr.size(); ++i) {
    if (descr[i] < '0' || descr[i] > '9' || width > (int64_t{1} << 30))
      throw NpyError(what + ": dtype '" + descr + "' has a bad width");
    width = width * 10 + (descr[i] - '0');
  }
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d != 0 && numel > (int64_t{1} << 40) / d) throw NpyError(what + ": shape overflows");
    numel *= d;
  }
  if (fortran && shape.size() > 1 && numel > 1)
    throw NpyError(what + ": array is in Fortran order; save it with numpy.save(f, numpy.ascontiguousarray(a))");
  const uint64_t item = static_cast<uint64_t>(width) * (unicode ? 4 : 1);
  if (item && static_cast<uint64_t>(numel) > (uint64_t{1} << 40) / item) throw NpyError(what + ": too large");
  // Zero-width elements take no bytes of the file, so its size does not bound them; each still costs a
  // std::string here.
  if (item == 0 && numel > (int64_t{1} << 20))
    throw NpyError(what + ": " + std::to_string(numel) + " zero-width strings: too many");
  const uint64_t need = static_cast<uint64_t>(numel) * item;
  if (b.size() - data_at < need)
    throw NpyError(what + ": truncated: shape " + str(to_shape(shape)) + " needs " + std::to_string(need) +
                   " bytes of data, file has " + std::to_string(b.size() - data_at));
  std::vector<std::string> v(static_cast<size_t>(numel));
  for (int64_t i = 0; i < numel; ++i) {
    const char* p = b.data() + data_at + i * item;
    std::string& s = v[static_cast<size_t>(i)];
    for (int64_t k = 0; k < width; ++k) {
      uint32_t c = 0;
      if (unicode) {
        for (int j = 3; j >= 0; --j) c = (c << 8) | static_cast<unsigned char>(p[4 * k + j]);
        if (c > 0x10ffff) throw NpyError(what + ": element " + std::to_string(i) + " is not valid UTF-32");
      } else {
        c = static_cast<unsigned char>(p[k]);
      }
      if (c == 0) break;  // numpy pads with NUL
      if (unicode) append_utf8(s, c);
      else s += static_cast<char>(c);
    }
  }
  return Tensor::from_strings(std::move(v), shape);
}

// A string tensor as numpy's '<U<width>' (what np.save writes for an array of str); where an element
// is not text that UTF-32 keeps (bytes that are not UTF-8, an overlong form, a NUL), as '|S<width>'
// with the bytes as they are, so that reading the file back gives the same strings.
std::string string_data(const Tensor& t, std::string& descr) {
  std::vector<std::vector<uint32_t>> cps;
  size_t width = 1;
  bool text = true;
  for (const std::string& s : t.strings()) {
    cps.push_back(utf32_of(s));
    width = std::max(width, cps.back().size());
    std::string again;
    for (uint32_t c : cps.back()) {
      if (c == 0) text = false;
      append_utf8(again, c);
    }
    text = text && again == s;
  }
  if (!text) {
    size_t bytes = 1;
    for (const std::string& s : t.strings()) bytes = std::max(bytes, s.size());
    descr = "|S" + std::to_string(bytes);
    std::string out(t.strings().size() * bytes, '\0');
    for (size_t i = 0; i < t.strings().size(); ++i) t.strings()[i].copy(out.data() + i * bytes, bytes);
    return out;
  }
  descr = "<U" + std::to_string(width);
  std::string out(cps.size() * width * 4, '\0');
  for (size_t i = 0; i < cps.size(); ++i)
    for (size_t k = 0; k < cps[i].size(); ++k)
      for (int j = 0; j < 4; ++j) out[(i * width + k) * 4 + j] = static_cast<char>((cps[i][k] >> (8 * j)) & 0xff);
  return out;
}

}  // namespace

Tensor parse_npy(const std::string& b, const std::string& what) {
  if (b.size() < kMagicLen + 2 || b.compare(0, kMagicLen, kMagic, kMagicLen) != 0)
    throw NpyError(what + ": not a .npy file (no \\x93NUMPY magic; save it with numpy.save)");
  const int major = static_cast<uint8_t>(b[6]);
  if (major < 1 || major > 3)
    throw NpyError(what + ": .npy format version " + std::to_string(major) + " is not supported (1, 2 or 3)");
  const size_t len_bytes = major == 1 ? 2 : 4;
  const size_t header_at = kMagicLen + 2 + len_bytes;
  if (b.size() < header_at) throw NpyError(what + ": truncated inside the .npy preamble");
  const size_t header_len = read_le(b, kMagicLen + 2, len_bytes);
  if (b.size() < header_at + header_len)
    throw NpyError(what + ": truncated: header says " + std::to_string(header_len) + " bytes, file has " +
                   std::to_string(b.size() - header_at));
  std::string descr;
  bool fortran = false;
  std::vector<int64_t> shape;
  HeaderParser(b.substr(header_at, header_len), what).parse(descr, fortran, shape);
  if (!descr.empty() && descr[0] == '>')
    throw NpyError(what + ": data is big-endian ('" + descr + "'); save it little-endian with a.astype(a.dtype.newbyteorder('<'))");
  // Strings: numpy's fixed-width unicode ('<U8': UTF-32 code points, NUL-padded) or bytes ('|S8').
  if (descr.size() > 2 && (descr.compare(0, 2, "<U") == 0 || descr.compare(0, 2, "|S") == 0 || descr.compare(0, 2, "|U") == 0))
    return parse_strings(b, header_at + header_len, descr, fortran, shape, what);
  auto dt = dtype_of_descr(descr);
  if (!dt)
    throw NpyError(what + ": dtype '" + descr +
                   "' is not supported; use one of float32, float16, float64, int64, int32, int8, uint8, bool "
                   "(little-endian), or str/bytes for string tensors (not object arrays)");
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d != 0 && numel > std::numeric_limits<int64_t>::max() / d) throw NpyError(what + ": shape overflows");
    numel *= d;
  }
  if (fortran && shape.size() > 1 && numel > 1)
    throw NpyError(what + ": array is in Fortran order; save it with numpy.save(f, numpy.ascontiguousarray(a))");
  const size_t data_at = header_at + header_len;
  const uint64_t need = static_cast<uint64_t>(numel) * size_of(*dt);
  if (b.size() - data_at < need)
    throw NpyError(what + ": truncated: shape " + str(to_shape(shape)) + " needs " + std::to_string(need) +
                   " bytes of data, file has " + std::to_string(b.size() - data_at));
  Tensor t(*dt, shape);
  if (need) std::memcpy(t.mutable_bytes(), b.data() + data_at, need);
  return t;
}

Tensor load_npy(const std::string& path) {
  std::string bytes;
  try {
    bytes = support::read_input_file(path, "", support::kMaxDataBytes);
  } catch (const support::FileError& e) {
    throw NpyError(e.what());
  }
  return parse_npy(bytes, path);
}

std::string serialize_npy(const Tensor& in) {
  const Tensor t = in.dtype() == DType::bf16 ? in.cast(DType::f32) : in;
  if (t.is_sequence()) throw NpyError("save_npy: a sequence is not one array (write one .npy per element)");
  std::string str_descr, str_data;
  if (t.dtype() == DType::str) str_data = string_data(t, str_descr);
  const char* descr = t.dtype() == DType::str ? str_descr.c_str() : nullptr;
  for (const auto& r : kDescr)
    if (r.dtype == t.dtype()) descr = r.descr;
  if (!descr) throw NpyError("save_npy: no .npy spelling for dtype " + std::string(name(t.dtype())));
  std::string shape = "(";
  for (size_t k = 0; k < t.dims().size(); ++k) shape += std::to_string(t.dims()[k]) + ", ";
  if (t.dims().size() > 1) shape.resize(shape.size() - 2);  // (2, 3) but (5,)
  else if (t.dims().size() == 1) shape.resize(shape.size() - 1);
  shape += ")";
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces and a final newline so the data starts 64-byte aligned, as numpy does.
  size_t pre = kMagicLen + 2 + 2;
  int major = 1;
  if (pre + header.size() + 1 > 65535) {
    major = 2;
    pre += 2;
  }
  size_t total = pre + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out(kMagic, kMagicLen);
  out += static_cast<char>(major);
  out += '\0';
  const uint32_t hl = static_cast<uint32_t>(header.size());
  for (size_t k = 0; k < (major == 1 ? 2u : 4u); ++k) out += static_cast<char>((hl >> (8 * k)) & 0xff);
  out += header;
  if (t.nbytes()) out.append(reinterpret_cast<const char*>(t.bytes()), t.nbytes());
  out += str_data;
  return out;
}

void save_npy(const std::string& path, const Tensor& t) {
  std::string bytes = serialize_npy(t);
  try {  // checks the close too: a full disk must not pass as written
    support::write_output_file(path, bytes.data(), bytes.size());
  } catch (const support::FileError& e) {
    throw NpyError(e.what());
  }
}

}  // namespace sabre::ir
