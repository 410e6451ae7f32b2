#include "reference/compare.h"

#include <cmath>
#include <limits>

namespace sabre::reference {

Tolerance default_tolerance(ir::DType dt) {
  if (!ir::is_float(dt)) return {0, 0};
  if (dt == ir::DType::bf16) return {5e-2, 1e-3};
  return {1e-2, 1e-3};
}

Comparison compare(const ir::Tensor& got, const ir::Tensor& want, Tolerance tol) {
  Comparison c;
  const double inf = std::numeric_limits<double>::infinity();
  if (got.numel() != want.numel()) {
    c.max_abs = c.rel_l2 = inf;
    c.within = false;
    return c;
  }
  double num = 0, den = 0;
  for (int64_t k = 0; k < got.numel(); ++k) {
    const double x = got.get_f64(k), y = want.get_f64(k);
    if (!std::isfinite(x) || !std::isfinite(y)) {
      // The same inf on both sides agrees; NaN never does.
      if (!(x == y)) {
        ++c.nonfinite;
        c.max_abs = inf;
      }
      continue;
    }
    const double d = std::fabs(x - y);
    c.max_abs = std::max(c.max_abs, d);
    num += d * d;
    den += y * y;
  }
  c.rel_l2 = c.nonfinite ? inf : den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  c.within = c.nonfinite == 0 && (c.rel_l2 <= tol.rtol || c.max_abs <= tol.atol);
  return c;
}

}  // namespace sabre::reference
