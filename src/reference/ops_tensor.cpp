// Data-movement kernels: they copy elements by index and so work for every dtype byte-wise.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <limits>

#include "ir/tensor_size.h"
#include "reference/kernels.h"

namespace sabre::reference::detail {
namespace {

// Source offset (in elements) for each output element of a strided view: out[i...] = src[base + sum i_d*str_d].
std::vector<int64_t> strided_index(const Dims& out, const Dims& src_strides, int64_t base) {
  const int64_t total = numel(out);
  std::vector<int64_t> idx(static_cast<size_t>(total));
  if (total == 0) return idx;
  const int64_t r = static_cast<int64_t>(out.size());
  Dims ctr(out.size(), 0);
  int64_t off = base;
  for (int64_t k = 0; k < total; ++k) {
    idx[k] = off;
    for (int64_t d = r - 1; d >= 0; --d) {
      if (++ctr[d] < out[d]) {
        off += src_strides[d];
        break;
      }
      off -= src_strides[d] * (out[d] - 1);
      ctr[d] = 0;
    }
  }
  return idx;
}

template <class T>
void copy_typed(const uint8_t* src, uint8_t* dst, const std::vector<int64_t>& idx) {
  const T* s = reinterpret_cast<const T*>(src);
  T* d = reinterpret_cast<T*>(dst);
  for (size_t i = 0; i < idx.size(); ++i) d[i] = s[idx[i]];
}

// out[i] = x[idx[i]] for every element, whatever the dtype.
Tensor take(const Tensor& x, Dims out_dims, const std::vector<int64_t>& idx) {
  Tensor r(x.dtype(), std::move(out_dims));
  switch (ir::size_of(x.dtype())) {
    case 1: copy_typed<uint8_t>(x.bytes(), r.mutable_bytes(), idx); break;
    case 2: copy_typed<uint16_t>(x.bytes(), r.mutable_bytes(), idx); break;
    case 4: copy_typed<uint32_t>(x.bytes(), r.mutable_bytes(), idx); break;
    case 8: copy_typed<uint64_t>(x.bytes(), r.mutable_bytes(), idx); break;
    default: throw std::logic_error("take: element size must be 1, 2, 4 or 8");
  }
  return r;
}

// Same bytes, new dims (shares storage: tensors are immutable once computed).
Tensor reshaped(const Tensor& x, Dims dims) {
  auto holder = std::make_shared<Tensor>(x);
  return Tensor(x.dtype(), std::move(dims), holder, holder->bytes());
}

std::vector<int64_t> ints_of(const ir::Node& n, const Tensor& t, const char* what) {
  if (ir::is_float(t.dtype()) || t.dtype() == DType::boolean) fail(n, std::string(what) + " must be an integer tensor");
  return to_i64(t);
}

std::vector<Tensor> reshape_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  std::vector<int64_t> shape = ints_of(n, in(n, xs, 1), "shape");
  const bool allowzero = n.attr_int("allowzero", 0) != 0;
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allowzero) {
      if (i >= static_cast<size_t>(x.rank())) fail(n, "shape has 0 at position " + std::to_string(i) + " past the input's rank");
      shape[i] = x.dims()[i];
    }
    if (shape[i] == -1) {
      if (infer >= 0) fail(n, "shape has more than one -1");
      infer = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      fail(n, "shape has a negative dim " + std::to_string(shape[i]));
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || x.numel() % known != 0) fail(n, "cannot infer the -1 dim: sizes do not divide");
    shape[infer] = x.numel() / known;
  }
  if (numel(shape) != x.numel()) fail(n, "element count changes from " + std::to_string(x.numel()) + " to " + std::to_string(numel(shape)));
  return {reshaped(x, shape)};
}

std::vector<Tensor> transpose_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  const int64_t r = x.rank();
  std::vector<int64_t> perm = n.attr_ints("perm", {});
  if (perm.empty())
    for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
  if (static_cast<int64_t>(perm.size()) != r) fail(n, "perm has " + std::to_string(perm.size()) + " entries for rank " + std::to_string(r));
  Dims in_str = strides_of(x.dims()), out(r), str(r);
  std::vector<bool> seen(r, false);
  for (int64_t i = 0; i < r; ++i) {
    int64_t p = norm_axis(n, perm[i], r);
    if (seen[p]) fail(n, "perm repeats axis " + std::to_string(p));
    seen[p] = true;
    out[i] = x.dims()[p];
    str[i] = in_str[p];
  }
  return {take(x, out, strided_index(out, str, 0))};
}

std::vector<Tensor> flatten_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  int64_t axis = n.attr_int("axis", 1);
  if (axis < 0) axis += x.rank();
  if (axis < 0 || axis > x.rank()) fail(n, "axis out of range");
  int64_t a = 1;
  for (int64_t i = 0; i < axis; ++i) a *= x.dims()[i];
  return {reshaped(x, {a, a == 0 ? 0 : x.numel() / std::max<int64_t>(a, 1)})};
}

std::vector<Tensor> squeeze_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  std::vector<bool> drop(x.rank(), false);
  if (const Tensor* a = opt_in(xs, 1)) {
    for (int64_t ax : ints_of(n, *a, "axes")) {
      int64_t k = norm_axis(n, ax, x.rank());
      if (x.dims()[k] != 1) fail(n, "cannot squeeze axis " + std::to_string(k) + " of size " + std::to_string(x.dims()[k]));
      drop[k] = true;
    }
  } else {
    for (int64_t i = 0; i < x.rank(); ++i) drop[i] = x.dims()[i] == 1;
  }
  Dims out;
  for (int64_t i = 0; i < x.rank(); ++i)
    if (!drop[i]) out.push_back(x.dims()[i]);
  return {reshaped(x, out)};
}

std::vector<Tensor> unsqueeze_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  std::vector<int64_t> axes = ints_of(n, in(n, xs, 1), "axes");
  const int64_t r = x.rank() + static_cast<int64_t>(axes.size());
  std::vector<bool> ins(r, false);
  for (int64_t a : axes) {
    int64_t k = norm_axis(n, a, r);
    if (ins[k]) fail(n, "axes repeat " + std::to_string(k));
    ins[k] = true;
  }
  Dims out;
  size_t j = 0;
  for (int64_t i = 0; i < r; ++i) out.push_back(ins[i] ? 1 : x.dims()[j++]);
  return {reshaped(x, out)};
}

std::vector<Tensor> concat_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& first = in(n, xs, 0);
  const int64_t r = first.rank();
  const int64_t axis = norm_axis(n, n.attr_int("axis"), r);
  Dims out = first.dims();
  out[axis] = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& t = in(n, xs, i);
    if (t.dtype() != first.dtype()) fail(n, "input dtypes differ");
    if (t.rank() != r) fail(n, "input ranks differ");
    for (int64_t d = 0; d < r; ++d)
      if (d != axis && t.dims()[d] != first.dims()[d]) fail(n, "inputs differ in dim " + std::to_string(d));
    out[axis] += t.dims()[axis];
  }
  Tensor res(first.dtype(), out);
  const size_t es = ir::size_of(first.dtype());
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= out[d];
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < r; ++d) inner *= out[d];
  uint8_t* dst = res.mutable_bytes();
  const int64_t out_row = out[axis] * inner;
  int64_t col = 0;
  for (const Tensor* t : xs) {
    const int64_t row = t->dims()[axis] * inner;
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + (o * out_row + col) * es, t->bytes() + o * row * es, row * es);
    col += row;
  }
  return {res};
}

// Copies x[.., begin:begin+len, ..] along axis.
Tensor slice_axis(const Tensor& x, int64_t axis, int64_t begin, int64_t len) {
  Dims out = x.dims();
  out[axis] = len;
  Dims str = strides_of(x.dims());
  return take(x, out, strided_index(out, str, begin * str[axis]));
}

std::vector<Tensor> split_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  const int64_t axis = norm_axis(n, n.attr_int("axis", 0), x.rank());
  const int64_t dim = x.dims()[axis];
  std::vector<int64_t> sizes;
  if (const Tensor* s = opt_in(xs, 1)) {
    sizes = ints_of(n, *s, "split");
  } else {
    int64_t k = n.attr_int("num_outputs", static_cast<int64_t>(n.num_outputs()));
    if (k <= 0) fail(n, "num_outputs must be positive");
    int64_t chunk = (dim + k - 1) / k;  // the last part is smaller when dim does not divide
    for (int64_t i = 0, left = dim; i < k; ++i, left -= chunk) sizes.push_back(std::max<int64_t>(0, std::min(chunk, left)));
  }
  int64_t sum = 0;
  for (int64_t s : sizes) sum += s;
  if (sum != dim) fail(n, "split sizes add up to " + std::to_string(sum) + " but the axis has " + std::to_string(dim));
  std::vector<Tensor> outs;
  int64_t at = 0;
  for (int64_t s : sizes) {
    outs.push_back(slice_axis(x, axis, at, s));
    at += s;
  }
  return outs;
}

std::vector<Tensor> slice_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  const int64_t r = x.rank();
  std::vector<int64_t> starts = ints_of(n, in(n, xs, 1), "starts");
  std::vector<int64_t> ends = ints_of(n, in(n, xs, 2), "ends");
  if (starts.size() != ends.size()) fail(n, "starts and ends differ in length");
  std::vector<int64_t> axes, steps;
  if (const Tensor* a = opt_in(xs, 3)) {
    axes = ints_of(n, *a, "axes");
  } else {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (const Tensor* s = opt_in(xs, 4)) {
    steps = ints_of(n, *s, "steps");
  } else {
    steps.assign(starts.size(), 1);
  }
  if (axes.size() != starts.size() || steps.size() != starts.size()) fail(n, "starts, ends, axes and steps differ in length");
  Dims out = x.dims(), begin(r, 0), step(r, 1);
  std::vector<bool> seen(r, false);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = norm_axis(n, axes[i], r);
    if (seen[a]) fail(n, "axes repeat " + std::to_string(a));
    seen[a] = true;
    const int64_t dim = x.dims()[a], st = steps[i];
    if (st == 0) fail(n, "steps must not be 0");
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s += dim;  // still negative when below -dim: the clamps below handle it
    if (e < 0) e += dim;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
    } else {
      s = std::clamp<int64_t>(s, -1, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
    }
    int64_t len = st > 0 ? (e - s + st - 1) / st : (s - e + (-st) - 1) / (-st);
    out[a] = std::max<int64_t>(0, len);
    begin[a] = s;
    step[a] = st;
  }
  Dims str = strides_of(x.dims()), sstr(r);
  int64_t base = 0;
  for (int64_t d = 0; d < r; ++d) {
    sstr[d] = str[d] * step[d];
    base += begin[d] * str[d];
  }
  if (numel(out) == 0) return {Tensor(x.dtype(), out)};
  return {take(x, out, strided_index(out, sstr, base))};
}

std::vector<Tensor> gather_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  std::vector<int64_t> idx = ints_of(n, in(n, xs, 1), "indices");
  const Dims& idims = in(n, xs, 1).dims();
  const int64_t axis = norm_axis(n, n.attr_int("axis", 0), x.rank());
  const int64_t dim = x.dims()[axis];
  Dims out(x.dims().begin(), x.dims().begin() + axis);
  out.insert(out.end(), idims.begin(), idims.end());
  out.insert(out.end(), x.dims().begin() + axis + 1, x.dims().end());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dims()[d];
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.dims()[d];
  for (int64_t& i : idx) {
    if (i < -dim || i >= dim) fail(n, "index " + std::to_string(i) + " is out of range for a dim of " + std::to_string(dim));
    if (i < 0) i += dim;
  }
  std::vector<int64_t> src;
  src.reserve(static_cast<size_t>(outer * idx.size() * inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i : idx)
      for (int64_t k = 0; k < inner; ++k) src.push_back((o * dim + i) * inner + k);
  return {take(x, out, src)};
}

std::vector<Tensor> shape_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  const int64_t r = x.rank();
  int64_t s = n.attr_int("start", 0), e = n.attr_int("end", r);
  if (s < 0) s += r;
  if (e < 0) e += r;
  s = std::clamp<int64_t>(s, 0, r);
  e = std::clamp<int64_t>(e, 0, r);
  std::vector<int64_t> v;
  for (int64_t i = s; i < e; ++i) v.push_back(x.dims()[i]);
  return {Tensor::from_i64(v, {static_cast<int64_t>(v.size())})};
}

std::vector<Tensor> constant_of_shape_kernel(const ir::Node& n, const Inputs& xs) {
  std::vector<int64_t> dims = ints_of(n, in(n, xs, 0), "shape");
  for (int64_t d : dims)
    if (d < 0) fail(n, "shape has a negative dim");
  Tensor value = n.has_attr("value") ? n.attr_tensor("value") : Tensor::scalar_f32(0.0f);
  if (value.numel() != 1) fail(n, "value must hold one element");
  std::vector<int64_t> idx(static_cast<size_t>(numel(dims)), 0);
  return {take(value, dims, idx)};
}

std::vector<Tensor> expand_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  std::vector<int64_t> shape = ints_of(n, in(n, xs, 1), "shape");
  Dims out = broadcast_dims(n, x.dims(), shape);
  return {take(x, out, broadcast_index(x.dims(), out))};
}

std::vector<Tensor> range_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& s = in(n, xs, 0);
  const Tensor& l = in(n, xs, 1);
  const Tensor& d = in(n, xs, 2);
  if (s.numel() != 1 || l.numel() != 1 || d.numel() != 1) fail(n, "start, limit and delta must be scalars");
  // The count is computed wide (a span of two int64s overflows int64) and bounded before anything
  // is allocated, so a hostile Range is an error, not a huge allocation.
  auto check_count = [&](double cnt) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", cnt);
    if (!(cnt <= static_cast<double>(ir::kMaxElements)))
      fail(n, "its output would have " + std::string(buf) + " elements, more than the " +
                  std::to_string(ir::kMaxElements) + " sabre allows in one tensor");
    ir::check_tensor_size(s.dtype(), {static_cast<int64_t>(cnt)}, "its output");
  };
  if (ir::is_float(s.dtype())) {
    double start = s.get_f64(0), limit = l.get_f64(0), delta = d.get_f64(0);
    if (delta == 0) fail(n, "delta must not be 0");
    double c = std::max(0.0, std::ceil((limit - start) / delta));
    check_count(c);
    int64_t cnt = static_cast<int64_t>(c);
    std::vector<double> v(cnt);
    for (int64_t i = 0; i < cnt; ++i) v[i] = start + static_cast<double>(i) * delta;
    return {from_f64(v, s.dtype(), {cnt})};
  }
  int64_t start = s.get_i64(0), limit = l.get_i64(0), delta = d.get_i64(0);
  if (delta == 0) fail(n, "delta must not be 0");
  __int128 span = static_cast<__int128>(limit) - start, step = delta;
  __int128 c = step > 0 ? (span > 0 ? (span + step - 1) / step : 0) : (span < 0 ? (-span - step - 1) / -step : 0);
  check_count(static_cast<double>(c));
  int64_t cnt = static_cast<int64_t>(c);
  std::vector<int64_t> v(cnt);
  for (int64_t i = 0; i < cnt; ++i) v[i] = static_cast<int64_t>(static_cast<uint64_t>(start) + static_cast<uint64_t>(i) * static_cast<uint64_t>(delta));
  return {from_i64(v, s.dtype(), {cnt})};
}

std::vector<Tensor> trilu_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  if (x.rank() < 2) fail(n, "needs rank >= 2");
  int64_t k = 0;
  if (const Tensor* kt = opt_in(xs, 1)) k = kt->get_i64(0);
  const bool upper = n.attr_int("upper", 1) != 0;
  const int64_t rows = x.dims()[x.rank() - 2], cols = x.dims()[x.rank() - 1];
  Tensor r = x;
  uint8_t* p = r.mutable_bytes();
  const size_t es = ir::size_of(x.dtype());
  const int64_t mats = rows * cols == 0 ? 0 : x.numel() / (rows * cols);
  for (int64_t m = 0; m < mats; ++m)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        bool keep = upper ? (j - i >= k) : (j - i <= k);
        if (!keep) std::memset(p + ((m * rows + i) * cols + j) * es, 0, es);
      }
  return {r};
}

std::vector<Tensor> pad_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  const int64_t r = x.rank();
  std::vector<int64_t> pads = ints_of(n, in(n, xs, 1), "pads");
  std::vector<int64_t> axes;
  if (const Tensor* a = opt_in(xs, 3)) {
    axes = ints_of(n, *a, "axes");
  } else {
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  }
  if (pads.size() != 2 * axes.size()) fail(n, "pads must hold 2 entries per axis");
  Dims before(r, 0), after(r, 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = norm_axis(n, axes[i], r);
    before[a] = pads[i];
    after[a] = pads[i + axes.size()];
  }
  const std::string mode = n.attr_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    fail(n, "mode must be constant, reflect, edge or wrap, got '" + mode + "'");
  Dims out(r);
  for (int64_t d = 0; d < r; ++d) {
    out[d] = x.dims()[d] + before[d] + after[d];
    if (out[d] < 0) fail(n, "pads make dim " + std::to_string(d) + " negative");
    if (mode != "constant" && x.dims()[d] == 0 && out[d] > 0) fail(n, "cannot " + mode + "-pad an empty dim");
  }
  // Per axis: the source coordinate of every output coordinate (-1: the constant).
  std::vector<std::vector<int64_t>> src(r);
  for (int64_t d = 0; d < r; ++d) {
    const int64_t dim = x.dims()[d];
    for (int64_t o = 0; o < out[d]; ++o) {
      int64_t i = o - before[d];
      if (i < 0 || i >= dim) {
        if (mode == "constant") {
          i = -1;
        } else if (mode == "edge") {
          i = std::clamp<int64_t>(i, 0, dim - 1);
        } else if (mode == "wrap") {
          i = ((i % dim) + dim) % dim;
        } else if (dim == 1) {
          i = 0;
        } else {
          const int64_t period = 2 * (dim - 1);
          i = ((i % period) + period) % period;
          if (i >= dim) i = period - i;
        }
      }
      src[d].push_back(i);
    }
  }
  Tensor fill(x.dtype(), {1});
  if (const Tensor* cv = opt_in(xs, 2); cv && cv->numel() > 0 && mode == "constant") fill = cv->cast(x.dtype());
  // Gather from a tensor that is x followed by the fill element (index numel(x)).
  Tensor ext(x.dtype(), {x.numel() + 1});
  const size_t es = ir::size_of(x.dtype());
  std::memcpy(ext.mutable_bytes(), x.bytes(), x.nbytes());
  std::memcpy(ext.mutable_bytes() + x.nbytes(), fill.bytes(), es);
  Dims str = strides_of(x.dims());
  const int64_t total = numel(out);
  std::vector<int64_t> idx(static_cast<size_t>(total));
  Dims ctr(r, 0);
  for (int64_t k = 0; k < total; ++k) {
    int64_t off = 0;
    for (int64_t d = 0; d < r && off >= 0; ++d) {
      int64_t s = src[d][ctr[d]];
      off = s < 0 ? -1 : off + s * str[d];
    }
    idx[k] = off < 0 ? x.numel() : off;
    for (int64_t d = r - 1; d >= 0; --d) {
      if (++ctr[d] < out[d]) break;
      ctr[d] = 0;
    }
  }
  return {take(ext, out, idx)};
}

}  // namespace

// ArgMax / ArgMin: the index of the first (or, select_last_index=1, last) extreme along the axis.
Kernel arg_extreme(bool max) {
  return [max](const ir::Node& n, const Inputs& xs) {
    const Tensor& x = in(n, xs, 0);
    if (x.dtype() == DType::boolean) fail(n, "does not take bool");
    const int64_t axis = norm_axis(n, n.attr_int("axis", 0), x.rank());
    const bool keep = n.attr_int("keepdims", 1) != 0, last = n.attr_int("select_last_index", 0) != 0;
    int64_t outer = 1, inner = 1;
    const int64_t dim = x.dims()[axis];
    if (dim == 0) fail(n, "the reduced axis is empty");
    for (int64_t d = 0; d < axis; ++d) outer *= x.dims()[d];
    for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.dims()[d];
    std::vector<double> v = to_f64(x);
    std::vector<int64_t> r(static_cast<size_t>(outer * inner));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const double* p = v.data() + o * dim * inner + i;
        int64_t best = 0;
        for (int64_t k = 1; k < dim; ++k) {
          const double a = p[k * inner], b = p[best * inner];
          if (max ? (a > b || (last && a == b)) : (a < b || (last && a == b))) best = k;
        }
        r[o * inner + i] = best;
      }
    Dims out = x.dims();
    if (keep) out[axis] = 1;
    else out.erase(out.begin() + axis);
    return std::vector<Tensor>{from_i64(r, DType::i64, out)};
  };
}

// CumSum along the axis given as input 1; exclusive / reverse attributes.
std::vector<Tensor> cumsum_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  std::vector<int64_t> ax = ints_of(n, in(n, xs, 1), "axis");
  if (ax.size() != 1) fail(n, "axis must hold one value");
  if (x.dtype() == DType::boolean) fail(n, "does not take bool");
  const int64_t axis = norm_axis(n, ax[0], x.rank());
  const bool excl = n.attr_int("exclusive", 0) != 0, rev = n.attr_int("reverse", 0) != 0;
  int64_t outer = 1, inner = 1;
  const int64_t dim = x.dims()[axis];
  for (int64_t d = 0; d < axis; ++d) outer *= x.dims()[d];
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.dims()[d];
  auto scan = [&](auto& v) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        typename std::decay_t<decltype(v)>::value_type acc = 0;
        for (int64_t s = 0; s < dim; ++s) {
          const int64_t k = rev ? dim - 1 - s : s;
          auto& e = v[(o * dim + k) * inner + i];
          const auto cur = e;
          e = excl ? acc : acc + cur;
          acc += cur;
        }
      }
  };
  if (ir::is_float(x.dtype())) {
    std::vector<double> v = to_f64(x);
    scan(v);
    return {from_f64(v, x.dtype(), x.dims())};
  }
  std::vector<int64_t> v = to_i64(x);
  scan(v);
  return {from_i64(v, x.dtype(), x.dims())};
}

// GatherElements: out[i][j][k] = x[idx[i][j][k]][j][k] along the axis (indices may be negative).
std::vector<Tensor> gather_elements_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  const Tensor& it = in(n, xs, 1);
  std::vector<int64_t> idx = ints_of(n, it, "indices");
  const int64_t axis = norm_axis(n, n.attr_int("axis", 0), x.rank());
  if (it.rank() != x.rank()) fail(n, "indices must have the data's rank");
  for (int64_t d = 0; d < x.rank(); ++d)
    if (d != axis && it.dims()[d] > x.dims()[d]) fail(n, "indices dim " + std::to_string(d) + " exceeds the data's");
  const Dims xst = strides_of(x.dims()), ist = strides_of(it.dims());
  const int64_t dim = x.dims()[axis];
  std::vector<int64_t> src(idx.size());
  for (size_t e = 0; e < idx.size(); ++e) {
    int64_t i = idx[e];
    if (i < -dim || i >= dim) fail(n, "index " + std::to_string(i) + " is out of range for a dim of " + std::to_string(dim));
    if (i < 0) i += dim;
    int64_t rem = static_cast<int64_t>(e), off = 0;
    for (int64_t d = 0; d < x.rank(); ++d) {
      const int64_t c = rem / ist[d];
      rem %= ist[d];
      off += (d == axis ? i : c) * xst[d];
    }
    src[e] = off;
  }
  return {take(x, it.dims(), src)};
}

// DepthToSpace (DCR or CRD) and SpaceToDepth on NCHW.
Kernel depth_space(bool to_space) {
  return [to_space](const ir::Node& n, const Inputs& xs) {
    const Tensor& x = in(n, xs, 0);
    if (x.rank() != 4) fail(n, "input must be 4-D (NCHW)");
    const int64_t b = n.attr_int("blocksize");
    if (b <= 0) fail(n, "blocksize must be positive");
    const bool crd = n.attr_string("mode", "DCR") == "CRD";
    const int64_t N = x.dims()[0], C = x.dims()[1], H = x.dims()[2], W = x.dims()[3];
    Dims out;
    if (to_space) {
      if (C % (b * b)) fail(n, "channels must be a multiple of blocksize^2");
      out = {N, C / (b * b), H * b, W * b};
    } else {
      if (H % b || W % b) fail(n, "height and width must be multiples of blocksize");
      out = {N, C * b * b, H / b, W / b};
    }
    std::vector<int64_t> src(static_cast<size_t>(numel(out)));
    size_t e = 0;
    for (int64_t nn = 0; nn < out[0]; ++nn)
      for (int64_t c = 0; c < out[1]; ++c)
        for (int64_t h = 0; h < out[2]; ++h)
          for (int64_t w = 0; w < out[3]; ++w) {
            int64_t ic, ih, iw;
            if (to_space) {
              const int64_t bh = h % b, bw = w % b, oc = out[1];
              ic = crd ? c * b * b + bh * b + bw : (bh * b + bw) * oc + c;
              ih = h / b;
              iw = w / b;
            } else {  // the inverse of DCR: channel (bh*b + bw)*C + c
              const int64_t blk = c / C, cc = c % C;
              ic = cc;
              ih = h * b + blk / b;
              iw = w * b + blk % b;
            }
            src[e++] = ((nn * C + ic) * H + ih) * W + iw;
          }
    return std::vector<Tensor>{take(x, out, src)};
  };
}

std::vector<Tensor> tile_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  std::vector<int64_t> reps = ints_of(n, in(n, xs, 1), "repeats");
  if (static_cast<int64_t>(reps.size()) != x.rank()) fail(n, "repeats must have one value per input dim");
  Dims out = x.dims();
  for (size_t i = 0; i < reps.size(); ++i) {
    if (reps[i] < 0) fail(n, "repeats must not be negative");
    out[i] *= reps[i];
  }
  const Dims xs_ = strides_of(x.dims()), os = strides_of(out);
  std::vector<int64_t> src(static_cast<size_t>(numel(out)));
  for (size_t e = 0; e < src.size(); ++e) {
    int64_t rem = static_cast<int64_t>(e), off = 0;
    for (int64_t d = 0; d < x.rank(); ++d) {
      off += (rem / os[d]) % x.dims()[d] * xs_[d];
      rem %= os[d];
    }
    src[e] = off;
  }
  return {take(x, out, src)};
}

void register_tensor_ops(Table& t) {
  auto add = [&](const char* op, Kernel k) { t[{"", op}] = std::move(k); };
  add("Identity", [](const ir::Node& n, const Inputs& xs) { return std::vector<Tensor>{in(n, xs, 0)}; });
  add("Reshape", reshape_kernel);
  add("Transpose", transpose_kernel);
  add("Flatten", flatten_kernel);
  add("Squeeze", squeeze_kernel);
  add("Unsqueeze", unsqueeze_kernel);
  add("Concat", concat_kernel);
  add("Split", split_kernel);
  add("Slice", slice_kernel);
  add("Gather", gather_kernel);
  add("Shape", shape_kernel);
  add("ConstantOfShape", constant_of_shape_kernel);
  add("Expand", expand_kernel);
  add("Range", range_kernel);
  add("Trilu", trilu_kernel);
  add("Pad", pad_kernel);
  add("ArgMax", arg_extreme(true));
  add("ArgMin", arg_extreme(false));
  add("CumSum", cumsum_kernel);
  add("Tile", tile_kernel);
  add("GatherElements", gather_elements_kernel);
  add("DepthToSpace", depth_space(true));
  add("SpaceToDepth", depth_space(false));
  add("Size", [](const ir::Node& n, const Inputs& xs) {
    return std::vector<Tensor>{Tensor::from_i64({in(n, xs, 0).numel()}, {})};
  });
}

}  // namespace sabre::reference::detail
