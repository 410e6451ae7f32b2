// Elementwise kernels: unary math, broadcasting binary ops, comparisons, Clip, Where, Cast.
//
// Floats compute in double and round once to the output dtype; integers compute in int64 and wrap
// to the output dtype, so int64 values past 2^53 stay exact.
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "reference/kernels.h"
#include "support/checked.h"

namespace sabre::reference::detail {
namespace {

template <class F>
Tensor unary_float(const ir::Node& n, const Tensor& x, F f) {
  if (!ir::is_float(x.dtype())) fail(n, "needs a float input, got " + std::string(ir::name(x.dtype())));
  std::vector<double> v = to_f64(x);
  for (double& e : v) e = f(e);
  return from_f64(v, x.dtype(), x.dims());
}

// Unary op defined on floats (fd) and integers (fi).
template <class FD, class FI>
Tensor unary_num(const ir::Node& n, const Tensor& x, FD fd, FI fi) {
  if (ir::is_float(x.dtype())) return unary_float(n, x, fd);
  if (x.dtype() == DType::boolean) fail(n, "does not take bool");
  std::vector<int64_t> v = to_i64(x);
  for (int64_t& e : v) e = fi(e);
  return from_i64(v, x.dtype(), x.dims());
}

// Broadcasting binary op: fd on doubles when `a` is a float, fi on int64 otherwise.
template <class FD, class FI>
Tensor binary(const ir::Node& n, const Tensor& a, const Tensor& b, DType out_dt, FD fd, FI fi) {
  Dims out = broadcast_dims(n, a.dims(), b.dims());
  const int64_t total = numel(out);
  const bool same = a.dims() == out && b.dims() == out;
  std::vector<int64_t> ia, ib;
  if (!same) {
    ia = broadcast_index(a.dims(), out);
    ib = broadcast_index(b.dims(), out);
  }
  if (ir::is_float(a.dtype()) || ir::is_float(b.dtype())) {
    std::vector<double> va = to_f64(a), vb = to_f64(b), r(static_cast<size_t>(total));
    for (int64_t i = 0; i < total; ++i) r[i] = same ? fd(va[i], vb[i]) : fd(va[ia[i]], vb[ib[i]]);
    return from_f64(r, out_dt, out);
  }
  std::vector<int64_t> va = to_i64(a), vb = to_i64(b), r(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i) r[i] = same ? fi(va[i], vb[i]) : fi(va[ia[i]], vb[ib[i]]);
  return from_i64(r, out_dt, out);
}

void check_same_dtype(const ir::Node& n, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype())
    fail(n, "input dtypes differ: " + std::string(ir::name(a.dtype())) + " vs " + std::string(ir::name(b.dtype())));
}

template <class FD, class FI>
Kernel arith(FD fd, FI fi) {
  return [fd, fi](const ir::Node& n, const Inputs& xs) {
    const Tensor& a = in(n, xs, 0);
    const Tensor& b = in(n, xs, 1);
    check_same_dtype(n, a, b);
    return std::vector<Tensor>{binary(n, a, b, a.dtype(), fd, fi)};
  };
}

template <class FD, class FI>
Kernel compare(FD fd, FI fi) {
  return [fd, fi](const ir::Node& n, const Inputs& xs) {
    const Tensor& a = in(n, xs, 0);
    const Tensor& b = in(n, xs, 1);
    check_same_dtype(n, a, b);
    auto d = [fd](double x, double y) -> double { return fd(x, y) ? 1.0 : 0.0; };
    auto i = [fi](int64_t x, int64_t y) -> int64_t { return fi(x, y) ? 1 : 0; };
    return std::vector<Tensor>{binary(n, a, b, DType::boolean, d, i)};
  };
}

// Min/Max/Sum-style variadic folds with broadcasting.
template <class FD, class FI>
Kernel variadic(FD fd, FI fi) {
  return [fd, fi](const ir::Node& n, const Inputs& xs) {
    Tensor acc = in(n, xs, 0);
    for (size_t i = 1; i < xs.size(); ++i) {
      const Tensor& b = in(n, xs, i);
      check_same_dtype(n, acc, b);
      acc = binary(n, acc, b, acc.dtype(), fd, fi);
    }
    return std::vector<Tensor>{acc};
  };
}

template <class F>
Kernel unary_kernel(F f) {
  return [f](const ir::Node& n, const Inputs& xs) { return std::vector<Tensor>{unary_float(n, in(n, xs, 0), f)}; };
}

double nan_min(double a, double b) { return (std::isnan(a) || std::isnan(b)) ? NAN : std::min(a, b); }
double nan_max(double a, double b) { return (std::isnan(a) || std::isnan(b)) ? NAN : std::max(a, b); }

std::optional<DType> dtype_from_attr(const ir::Node& n) {
  auto it = n.attrs().find("to");
  if (it == n.attrs().end()) return std::nullopt;
  if (const auto* s = std::get_if<std::string>(&it->second)) return ir::parse_dtype(*s);
  if (const auto* i = std::get_if<int64_t>(&it->second)) {
    // An ONNX TensorProto.DataType number, in case a producer skipped the importer's renaming.
    switch (*i) {
      case 1: return DType::f32;
      case 2: return DType::u8;
      case 3: return DType::i8;
      case 6: return DType::i32;
      case 7: return DType::i64;
      case 9: return DType::boolean;
      case 10: return DType::f16;
      case 11: return DType::f64;
      case 16: return DType::bf16;
      default: return std::nullopt;
    }
  }
  return std::nullopt;
}

std::vector<Tensor> cast_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  std::optional<DType> to = dtype_from_attr(n);
  if (!to) fail(n, "attribute 'to' is missing or not a sabre dtype name (f32, f16, bf16, f64, i64, i32, i8, u8, bool)");
  if (x.dtype() == *to) return {x};
  // Floats go through double: f32 -> f16/bf16 rounds to nearest even once, float -> int truncates.
  if (ir::is_float(x.dtype()) && !ir::is_float(*to)) {
    std::vector<double> v = to_f64(x);
    std::vector<int64_t> r(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      double e = v[i];
      if (*to == DType::boolean) {
        r[i] = e != 0.0;  // NaN is true, like C and numpy
      } else if (std::isnan(e) || std::isinf(e)) {
        r[i] = std::numeric_limits<int64_t>::min();  // undefined in ONNX; pick something deterministic
      } else {
        r[i] = static_cast<int64_t>(std::trunc(e));
      }
    }
    return {from_i64(r, *to, x.dims())};
  }
  return {x.cast(*to)};
}

std::vector<Tensor> clip_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  const Tensor* lo = opt_in(xs, 1);
  const Tensor* hi = opt_in(xs, 2);
  if ((lo && lo->numel() != 1) || (hi && hi->numel() != 1)) fail(n, "min and max must be scalars");
  if (ir::is_float(x.dtype())) {
    double l = lo ? lo->get_f64(0) : -INFINITY, h = hi ? hi->get_f64(0) : INFINITY;
    return {unary_float(n, x, [l, h](double v) { return std::isnan(v) ? v : std::min(std::max(v, l), h); })};
  }
  int64_t l = lo ? lo->get_i64(0) : std::numeric_limits<int64_t>::min();
  int64_t h = hi ? hi->get_i64(0) : std::numeric_limits<int64_t>::max();
  std::vector<int64_t> v = to_i64(x);
  for (int64_t& e : v) e = std::min(std::max(e, l), h);
  return {from_i64(v, x.dtype(), x.dims())};
}

std::vector<Tensor> where_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& c = in(n, xs, 0);
  const Tensor& a = in(n, xs, 1);
  const Tensor& b = in(n, xs, 2);
  if (c.dtype() != DType::boolean) fail(n, "condition must be bool");
  check_same_dtype(n, a, b);
  Dims out = broadcast_dims(n, broadcast_dims(n, c.dims(), a.dims()), b.dims());
  auto ic = broadcast_index(c.dims(), out), ia = broadcast_index(a.dims(), out), ib = broadcast_index(b.dims(), out);
  Tensor r(a.dtype(), out);
  const size_t es = ir::size_of(a.dtype());
  uint8_t* dst = r.mutable_bytes();
  const uint8_t* cp = c.bytes();
  for (size_t i = 0; i < ic.size(); ++i) {
    const uint8_t* src = cp[ic[i]] ? a.bytes() + ia[i] * es : b.bytes() + ib[i] * es;
    std::memcpy(dst + i * es, src, es);
  }
  return {r};
}

std::vector<Tensor> not_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  if (x.dtype() != DType::boolean) fail(n, "needs a bool input");
  Tensor r(DType::boolean, x.dims());
  for (int64_t i = 0; i < x.numel(); ++i) r.mutable_bytes()[i] = !x.bytes()[i];
  return {r};
}

template <class F>
Kernel logical(F f) {
  return [f](const ir::Node& n, const Inputs& xs) {
    const Tensor& a = in(n, xs, 0);
    const Tensor& b = in(n, xs, 1);
    if (a.dtype() != DType::boolean || b.dtype() != DType::boolean) fail(n, "needs bool inputs");
    auto i = [f](int64_t x, int64_t y) -> int64_t { return f(x != 0, y != 0) ? 1 : 0; };
    auto d = [f](double x, double y) -> double { return f(x != 0, y != 0) ? 1 : 0; };
    return std::vector<Tensor>{binary(n, a, b, DType::boolean, d, i)};
  };
}

}  // namespace

void register_elementwise(Table& t) {
  auto add = [&](const char* op, Kernel k) { t[{"", op}] = std::move(k); };

  add("Add", arith([](double a, double b) { return a + b; },
                   [](int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }));
  add("Sub", arith([](double a, double b) { return a - b; },
                   [](int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)); }));
  add("Mul", arith([](double a, double b) { return a * b; },
                   [](int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }));
  // Integer Div truncates toward zero (ONNX follows C). ONNX leaves INT64_MIN / -1 and a zero
  // divisor undefined: the first wraps to INT64_MIN, the second is refused (eval_node names the node).
  add("Div", arith([](double a, double b) { return a / b; }, [](int64_t a, int64_t b) {
        if (b == 0) throw std::domain_error("integer division by zero");
        return support::wrapping_div(a, b);
      }));
  add("Min", variadic(nan_min, [](int64_t a, int64_t b) { return std::min(a, b); }));
  add("Max", variadic(nan_max, [](int64_t a, int64_t b) { return std::max(a, b); }));
  add("Mean", [](const ir::Node& n, const Inputs& xs) {
    const Tensor& a = in(n, xs, 0);
    if (!ir::is_float(a.dtype())) fail(n, "needs float inputs");
    Tensor s = variadic([](double x, double y) { return x + y; }, [](int64_t x, int64_t y) { return x + y; })(n, xs)[0];
    const double k = static_cast<double>(xs.size());
    // The sum is rounded to the dtype once more than numpy's mean; within the tests' tolerance.
    return std::vector<Tensor>{unary_float(n, s, [k](double x) { return x / k; })};
  });
  add("Sum", variadic([](double a, double b) { return a + b; }, [](int64_t a, int64_t b) {
        return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
      }));

  // Pow: the output has the base's dtype; the exponent may be any numeric dtype.
  add("Pow", [](const ir::Node& n, const Inputs& xs) {
    const Tensor& a = in(n, xs, 0);
    const Tensor& b = in(n, xs, 1);
    if (a.dtype() == DType::boolean || b.dtype() == DType::boolean) fail(n, "does not take bool");
    auto fd = [](double x, double y) { return std::pow(x, y); };
    if (ir::is_float(a.dtype())) return std::vector<Tensor>{binary(n, a, b.cast(DType::f64), a.dtype(), fd, fd)};
    auto fi = [](int64_t x, int64_t y) {
      if (y < 0) return static_cast<int64_t>(std::trunc(std::pow(static_cast<double>(x), static_cast<double>(y))));
      // Square-and-multiply, wrapping like the other integer ops: a huge exponent costs 63 steps.
      uint64_t r = 1, b = static_cast<uint64_t>(x);
      for (uint64_t e = static_cast<uint64_t>(y); e; e >>= 1, b *= b)
        if (e & 1) r *= b;
      return static_cast<int64_t>(r);
    };
    if (ir::is_float(b.dtype())) {
      auto fdt = [](double x, double y) { return std::trunc(std::pow(x, y)); };
      Tensor r = binary(n, a.cast(DType::f64), b, DType::f64, fdt, fdt);
      return std::vector<Tensor>{r.cast(a.dtype())};
    }
    return std::vector<Tensor>{binary(n, a, b.cast(DType::i64), a.dtype(), fi, fi)};
  });

  add("Equal", compare([](double a, double b) { return a == b; }, [](int64_t a, int64_t b) { return a == b; }));
  add("Less", compare([](double a, double b) { return a < b; }, [](int64_t a, int64_t b) { return a < b; }));
  add("Greater", compare([](double a, double b) { return a > b; }, [](int64_t a, int64_t b) { return a > b; }));
  add("LessOrEqual", compare([](double a, double b) { return a <= b; }, [](int64_t a, int64_t b) { return a <= b; }));
  add("GreaterOrEqual", compare([](double a, double b) { return a >= b; }, [](int64_t a, int64_t b) { return a >= b; }));
  add("And", logical([](bool a, bool b) { return a && b; }));
  add("Or", logical([](bool a, bool b) { return a || b; }));
  add("Xor", logical([](bool a, bool b) { return a != b; }));
  add("Not", not_kernel);

  add("Sqrt", unary_kernel([](double x) { return std::sqrt(x); }));
  add("Reciprocal", unary_kernel([](double x) { return 1.0 / x; }));
  add("Exp", unary_kernel([](double x) { return std::exp(x); }));
  add("Log", unary_kernel([](double x) { return std::log(x); }));
  add("Erf", unary_kernel([](double x) { return std::erf(x); }));
  add("Tanh", unary_kernel([](double x) { return std::tanh(x); }));
  add("Sigmoid", unary_kernel([](double x) { return 1.0 / (1.0 + std::exp(-x)); }));
  add("Neg", [](const ir::Node& n, const Inputs& xs) {
    return std::vector<Tensor>{unary_num(n, in(n, xs, 0), [](double x) { return -x; }, [](int64_t x) { return static_cast<int64_t>(0 - static_cast<uint64_t>(x)); })};
  });
  add("Abs", [](const ir::Node& n, const Inputs& xs) {
    return std::vector<Tensor>{
        unary_num(n, in(n, xs, 0), [](double x) { return std::fabs(x); }, [](int64_t x) { return x < 0 ? static_cast<int64_t>(0 - static_cast<uint64_t>(x)) : x; })};
  });
  add("Relu", [](const ir::Node& n, const Inputs& xs) {
    return std::vector<Tensor>{unary_num(
        n, in(n, xs, 0), [](double x) { return x < 0 ? 0.0 : x; }, [](int64_t x) { return x < 0 ? int64_t{0} : x; })};
  });
  add("LeakyRelu", [](const ir::Node& n, const Inputs& xs) {
    double alpha = n.attr_float("alpha", 0.01);
    return std::vector<Tensor>{unary_float(n, in(n, xs, 0), [alpha](double x) { return x < 0 ? alpha * x : x; })};
  });
  add("HardSigmoid", [](const ir::Node& n, const Inputs& xs) {
    double alpha = n.attr_float("alpha", 0.2), beta = n.attr_float("beta", 0.5);
    return std::vector<Tensor>{
        unary_float(n, in(n, xs, 0), [=](double x) { return std::max(0.0, std::min(1.0, alpha * x + beta)); })};
  });
  add("HardSwish", unary_kernel([](double x) { return x * std::max(0.0, std::min(1.0, x / 6.0 + 0.5)); }));
  add("Gelu", [](const ir::Node& n, const Inputs& xs) {
    std::string approx = n.attr_string("approximate", "none");
    if (approx == "none")
      return std::vector<Tensor>{
          unary_float(n, in(n, xs, 0), [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); })};
    if (approx == "tanh")
      return std::vector<Tensor>{unary_float(n, in(n, xs, 0), [](double x) {
        return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
      })};
    fail(n, "approximate must be 'none' or 'tanh', got '" + approx + "'");
  });

  add("Sin", unary_kernel([](double x) { return std::sin(x); }));
  add("Cos", unary_kernel([](double x) { return std::cos(x); }));
  add("Tan", unary_kernel([](double x) { return std::tan(x); }));
  add("Asin", unary_kernel([](double x) { return std::asin(x); }));
  add("Acos", unary_kernel([](double x) { return std::acos(x); }));
  add("Atan", unary_kernel([](double x) { return std::atan(x); }));
  add("Sinh", unary_kernel([](double x) { return std::sinh(x); }));
  add("Cosh", unary_kernel([](double x) { return std::cosh(x); }));
  add("Asinh", unary_kernel([](double x) { return std::asinh(x); }));
  add("Acosh", unary_kernel([](double x) { return std::acosh(x); }));
  add("Atanh", unary_kernel([](double x) { return std::atanh(x); }));
  add("Ceil", unary_kernel([](double x) { return std::ceil(x); }));
  add("Floor", unary_kernel([](double x) { return std::floor(x); }));
  add("Round", unary_kernel([](double x) { return std::nearbyint(x); }));  // half to even (default FP mode)
  // log(1 + e^x) without overflow.
  add("Softplus", unary_kernel([](double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x))); }));
  add("Softsign", unary_kernel([](double x) { return x / (1.0 + std::fabs(x)); }));
  add("Mish", unary_kernel([](double x) { return x * std::tanh(std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x)))); }));
  add("Elu", [](const ir::Node& n, const Inputs& xs) {
    const double a = n.attr_float("alpha", 1.0);
    return std::vector<Tensor>{unary_float(n, in(n, xs, 0), [a](double x) { return x < 0 ? a * std::expm1(x) : x; })};
  });
  add("Selu", [](const ir::Node& n, const Inputs& xs) {
    const double a = n.attr_float("alpha", 1.67326319217681884765625), g = n.attr_float("gamma", 1.05070102214813232421875);
    return std::vector<Tensor>{
        unary_float(n, in(n, xs, 0), [a, g](double x) { return x <= 0 ? g * a * std::expm1(x) : g * x; })};
  });
  add("Celu", [](const ir::Node& n, const Inputs& xs) {
    const double a = n.attr_float("alpha", 1.0);
    return std::vector<Tensor>{unary_float(
        n, in(n, xs, 0), [a](double x) { return std::max(0.0, x) + std::min(0.0, a * std::expm1(x / a)); })};
  });
  add("ThresholdedRelu", [](const ir::Node& n, const Inputs& xs) {
    const double a = n.attr_float("alpha", 1.0);
    return std::vector<Tensor>{unary_float(n, in(n, xs, 0), [a](double x) { return x > a ? x : 0.0; })};
  });
  add("Shrink", [](const ir::Node& n, const Inputs& xs) {
    const double l = n.attr_float("lambd", 0.5), b = n.attr_float("bias", 0.0);
    auto fd = [l, b](double x) { return x < -l ? x + b : x > l ? x - b : 0.0; };
    // Integers: computed in double (exact below 2^53), then back to the input dtype.
    return std::vector<Tensor>{unary_num(n, in(n, xs, 0), fd, [fd](int64_t x) {
      return static_cast<int64_t>(fd(static_cast<double>(x)));
    })};
  });
  add("Sign", [](const ir::Node& n, const Inputs& xs) {
    return std::vector<Tensor>{unary_num(
        n, in(n, xs, 0), [](double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : x == 0 ? 0.0 : x; },
        [](int64_t x) { return static_cast<int64_t>((x > 0) - (x < 0)); })};
  });
  add("IsNaN", [](const ir::Node& n, const Inputs& xs) {
    const Tensor& x = in(n, xs, 0);
    if (!ir::is_float(x.dtype())) fail(n, "needs a float input, got " + std::string(ir::name(x.dtype())));
    std::vector<double> v = to_f64(x);
    std::vector<int64_t> r(v.size());
    for (size_t i = 0; i < v.size(); ++i) r[i] = std::isnan(v[i]);
    return std::vector<Tensor>{from_i64(r, DType::boolean, x.dims())};
  });
  add("IsInf", [](const ir::Node& n, const Inputs& xs) {
    const Tensor& x = in(n, xs, 0);
    if (!ir::is_float(x.dtype())) fail(n, "needs a float input, got " + std::string(ir::name(x.dtype())));
    const bool neg = n.attr_int("detect_negative", 1) != 0, pos = n.attr_int("detect_positive", 1) != 0;
    std::vector<double> v = to_f64(x);
    std::vector<int64_t> r(v.size());
    for (size_t i = 0; i < v.size(); ++i) r[i] = std::isinf(v[i]) && (v[i] < 0 ? neg : pos);
    return std::vector<Tensor>{from_i64(r, DType::boolean, x.dims())};
  });
  // Mod: fmod=0 gives the divisor's sign (numpy mod), fmod=1 the dividend's (C fmod). Integer
  // divisors 0 and -1 give 0, as the GPU kernels do: no trap on x % 0 or INT64_MIN % -1.
  add("Mod", [](const ir::Node& n, const Inputs& xs) {
    const Tensor& a = in(n, xs, 0);
    const Tensor& b = in(n, xs, 1);
    check_same_dtype(n, a, b);
    if (a.dtype() == DType::boolean) fail(n, "does not take bool");
    const bool c_fmod = n.attr_int("fmod", 0) != 0;
    auto fd = [c_fmod](double x, double y) {
      const double r = std::fmod(x, y);
      return !c_fmod && r != 0 && ((r < 0) != (y < 0)) ? r + y : r;
    };
    auto fi = [c_fmod](int64_t x, int64_t y) -> int64_t {
      if (y == 0 || y == -1) return 0;
      const int64_t r = x % y;
      return !c_fmod && r != 0 && ((r < 0) != (y < 0)) ? r + y : r;
    };
    return std::vector<Tensor>{binary(n, a, b, a.dtype(), fd, fi)};
  });
  // BitShift on unsigned integers; a shift by the width or more gives 0.
  add("BitShift", [](const ir::Node& n, const Inputs& xs) {
    const Tensor& a = in(n, xs, 0);
    const Tensor& b = in(n, xs, 1);
    check_same_dtype(n, a, b);
    if (a.dtype() != DType::u8) fail(n, "needs unsigned integers (sabre has u8), got " + std::string(ir::name(a.dtype())));
    const std::string dir = n.attr_string("direction", "");
    if (dir != "LEFT" && dir != "RIGHT") fail(n, "direction must be 'LEFT' or 'RIGHT', got '" + dir + "'");
    const bool left = dir == "LEFT";
    auto fi = [left](int64_t x, int64_t y) -> int64_t {
      if (y < 0 || y > 63) return 0;
      const auto u = static_cast<uint64_t>(x);
      return static_cast<int64_t>(left ? u << y : u >> y);
    };
    auto fd = [](double, double) { return 0.0; };  // unreachable: u8 computes as integers
    return std::vector<Tensor>{binary(n, a, b, a.dtype(), fd, fi)};
  });
  // PRelu: the slope broadcasts to x (unidirectionally: the output has x's shape).
  add("PRelu", [](const ir::Node& n, const Inputs& xs) {
    const Tensor& x = in(n, xs, 0);
    const Tensor& s = in(n, xs, 1);
    check_same_dtype(n, x, s);
    if (broadcast_dims(n, x.dims(), s.dims()) != x.dims())
      fail(n, "slope shape does not broadcast to the input's shape");
    return std::vector<Tensor>{binary(n, x, s, x.dtype(), [](double a, double b) { return a < 0 ? a * b : a; },
                                      [](int64_t a, int64_t b) { return a < 0 ? a * b : a; })};
  });

  add("Clip", clip_kernel);
  add("Where", where_kernel);
  add("Cast", cast_kernel);
}

}  // namespace sabre::reference::detail
