// Indexing kernels: scatter, gather by index tuples, selection (TopK, Compress, NonZero, Unique) and
// small constructors (OneHot, EyeLike). Values move byte-wise, so every dtype works; comparisons and
// reductions read floats as double and integers as int64. Tests: tests/unit/reference_index_test.cpp
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>

#include "reference/kernels.h"

namespace sabre::reference::detail {
namespace {

std::vector<int64_t> index_list(const ir::Node& n, const Tensor& t, const char* what) {
  if (ir::is_float(t.dtype()) || t.dtype() == DType::boolean) fail(n, std::string(what) + " must be an integer tensor");
  return to_i64(t);
}

// out[i] = x[idx[i]], whatever the dtype.
Tensor pick(const Tensor& x, Dims out, const std::vector<int64_t>& idx) {
  Tensor r(x.dtype(), std::move(out));
  const size_t es = ir::size_of(x.dtype());
  const uint8_t* s = x.bytes();
  uint8_t* d = r.mutable_bytes();
  for (size_t i = 0; i < idx.size(); ++i) std::memcpy(d + i * es, s + static_cast<size_t>(idx[i]) * es, es);
  return r;
}

int64_t wrap_index(const ir::Node& n, int64_t i, int64_t dim) {
  if (i < -dim || i >= dim) fail(n, "index " + std::to_string(i) + " is out of range for a dim of " + std::to_string(dim));
  return i < 0 ? i + dim : i;
}

// Scatter with an optional reduction; `dst` holds flat target offsets per update element.
template <class T>
std::vector<T> scatter_values(const ir::Node& n, std::vector<T> out, const std::vector<T>& upd,
                              const std::vector<int64_t>& dst, int64_t block) {
  const std::string red = n.attr_string("reduction", "none");
  if (red != "none" && red != "add" && red != "mul" && red != "max" && red != "min")
    fail(n, "reduction must be none, add, mul, max or min, got '" + red + "'");
  for (size_t u = 0; u < dst.size(); ++u)
    for (int64_t k = 0; k < block; ++k) {
      T& o = out[static_cast<size_t>(dst[u] + k)];
      const T v = upd[u * block + k];
      if (red == "none") o = v;
      else if (red == "add") o = o + v;
      else if (red == "mul") o = o * v;
      else if (red == "max") o = std::max(o, v);
      else o = std::min(o, v);
    }
  return out;
}

Tensor scatter(const ir::Node& n, const Tensor& data, const Tensor& upd, const std::vector<int64_t>& dst, int64_t block) {
  if (upd.dtype() != data.dtype()) fail(n, "updates must have the data's dtype");
  if (ir::is_float(data.dtype()))
    return from_f64(scatter_values(n, to_f64(data), to_f64(upd), dst, block), data.dtype(), data.dims());
  return from_i64(scatter_values(n, to_i64(data), to_i64(upd), dst, block), data.dtype(), data.dims());
}

std::vector<Tensor> scatter_elements_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  const Tensor& it = in(n, xs, 1);
  const Tensor& u = in(n, xs, 2);
  std::vector<int64_t> idx = index_list(n, it, "indices");
  const int64_t axis = norm_axis(n, n.attr_int("axis", 0), x.rank());
  if (it.rank() != x.rank() || it.dims() != u.dims()) fail(n, "indices and updates must have the same shape, of the data's rank");
  for (int64_t d = 0; d < x.rank(); ++d)
    if (d != axis && it.dims()[d] > x.dims()[d]) fail(n, "indices dim " + std::to_string(d) + " exceeds the data's");
  const Dims xst = strides_of(x.dims()), ist = strides_of(it.dims());
  std::vector<int64_t> dst(idx.size());
  for (size_t e = 0; e < idx.size(); ++e) {
    int64_t i = wrap_index(n, idx[e], x.dims()[axis]);
    int64_t rem = static_cast<int64_t>(e), off = 0;
    for (int64_t d = 0; d < x.rank(); ++d) {
      off += (d == axis ? i : rem / ist[d]) * xst[d];
      rem %= ist[d];
    }
    dst[e] = off;
  }
  return {scatter(n, x, u, dst, 1)};
}

// Flat data offsets of the index tuples in the last axis of `indices` (GatherND / ScatterND), with
// `batch` leading dims shared by data and indices.
std::vector<int64_t> nd_offsets(const ir::Node& n, const Tensor& x, const Tensor& it, int64_t batch, int64_t* block) {
  std::vector<int64_t> idx = index_list(n, it, "indices");
  if (it.rank() < 1) fail(n, "indices must have rank >= 1");
  const int64_t q = it.dims().back();
  if (batch < 0 || batch >= std::min(x.rank(), it.rank())) fail(n, "batch_dims is out of range");
  if (q < 1 || batch + q > x.rank()) fail(n, "the index tuples are longer than the data's rank allows");
  for (int64_t d = 0; d < batch; ++d)
    if (x.dims()[d] != it.dims()[d]) fail(n, "the batch dims of data and indices differ");
  const Dims xst = strides_of(x.dims());
  *block = batch + q < x.rank() ? xst[batch + q - 1] : 1;
  int64_t batch_elems = 1;
  for (int64_t d = 0; d < batch; ++d) batch_elems *= x.dims()[d];
  const int64_t tuples = static_cast<int64_t>(idx.size()) / q;
  const int64_t per_batch = batch_elems ? tuples / batch_elems : 0;
  const int64_t batch_stride = batch > 0 ? xst[batch - 1] : 0;
  std::vector<int64_t> off(static_cast<size_t>(tuples));
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t o = per_batch ? (t / per_batch) * batch_stride : 0;
    for (int64_t k = 0; k < q; ++k) o += wrap_index(n, idx[t * q + k], x.dims()[batch + k]) * xst[batch + k];
    off[t] = o;
  }
  return off;
}

std::vector<Tensor> gather_nd_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  const Tensor& it = in(n, xs, 1);
  const int64_t b = n.attr_int("batch_dims", 0);
  int64_t block;
  std::vector<int64_t> off = nd_offsets(n, x, it, b, &block);
  Dims out(it.dims().begin(), it.dims().end() - 1);
  out.insert(out.end(), x.dims().begin() + b + it.dims().back(), x.dims().end());
  std::vector<int64_t> src;
  for (int64_t o : off)
    for (int64_t k = 0; k < block; ++k) src.push_back(o + k);
  return {pick(x, out, src)};
}

std::vector<Tensor> scatter_nd_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  const Tensor& it = in(n, xs, 1);
  const Tensor& u = in(n, xs, 2);
  int64_t block;
  std::vector<int64_t> off = nd_offsets(n, x, it, 0, &block);
  if (u.numel() != static_cast<int64_t>(off.size()) * block) fail(n, "updates do not match the indices' shape");
  return {scatter(n, x, u, off, block)};
}

// The order that sorts `v` (ascending or descending), ties by lower index; NaN counts as the largest.
template <class T>
void sort_slice(std::vector<int64_t>& order, const std::vector<T>& v, bool largest) {
  auto less = [](const T& x, const T& y) {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(x)) return false;
      if (std::isnan(y)) return true;
    }
    return x < y;
  };
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return largest ? less(v[b], v[a]) : less(v[a], v[b]); });
}

std::vector<Tensor> topk_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  std::vector<int64_t> kv = index_list(n, in(n, xs, 1), "K");
  if (kv.size() != 1) fail(n, "K must hold one value");
  const int64_t axis = norm_axis(n, n.attr_int("axis", -1), x.rank());
  const bool largest = n.attr_int("largest", 1) != 0;
  const int64_t dim = x.dims()[axis], k = kv[0];
  if (k < 0 || k > dim) fail(n, "K=" + std::to_string(k) + " is out of range for an axis of " + std::to_string(dim));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dims()[d];
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.dims()[d];
  Dims od = x.dims();
  od[axis] = k;
  std::vector<int64_t> src(static_cast<size_t>(outer * k * inner)), ids(src.size());
  auto run = [&](const auto& vals) {
    using T = typename std::decay_t<decltype(vals)>::value_type;
    std::vector<T> slice(static_cast<size_t>(dim));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        for (int64_t j = 0; j < dim; ++j) slice[j] = vals[(o * dim + j) * inner + i];
        std::vector<int64_t> order(static_cast<size_t>(dim));
        std::iota(order.begin(), order.end(), 0);
        sort_slice(order, slice, largest);
        for (int64_t j = 0; j < k; ++j) {
          const size_t at = static_cast<size_t>((o * k + j) * inner + i);
          src[at] = (o * dim + order[j]) * inner + i;
          ids[at] = order[j];
        }
      }
  };
  if (ir::is_float(x.dtype())) run(to_f64(x));
  else run(to_i64(x));
  return {pick(x, od, src), from_i64(ids, DType::i64, od)};
}

std::vector<Tensor> onehot_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& it = in(n, xs, 0);
  const Tensor& dt = in(n, xs, 1);
  const Tensor& vt = in(n, xs, 2);
  if (dt.numel() != 1) fail(n, "depth must hold one value");
  if (vt.numel() != 2) fail(n, "values must hold [off, on]");
  const int64_t depth = static_cast<int64_t>(dt.get_f64(0));
  if (depth < 1) fail(n, "depth must be positive");
  const std::vector<double> idx = to_f64(it);
  const int64_t r = it.rank() + 1;
  const int64_t axis = norm_axis(n, n.attr_int("axis", -1), r);
  Dims od = it.dims();
  od.insert(od.begin() + axis, depth);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= it.dims()[d];
  for (int64_t d = axis; d < it.rank(); ++d) inner *= it.dims()[d];
  std::vector<int64_t> src(static_cast<size_t>(numel(od)), 0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t c = static_cast<int64_t>(idx[o * inner + i]);
      if (c < 0) c += depth;
      if (c >= 0 && c < depth) src[(o * depth + c) * inner + i] = 1;  // out-of-range indices give all off
    }
  return {pick(vt, od, src)};
}

std::vector<Tensor> nonzero_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  const std::vector<double> v = to_f64(x);
  const Dims st = strides_of(x.dims());
  std::vector<int64_t> hits;
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] != 0) hits.push_back(static_cast<int64_t>(i));
  const int64_t r = x.rank(), m = static_cast<int64_t>(hits.size());
  std::vector<int64_t> out(static_cast<size_t>(std::max<int64_t>(r, 1) * m));
  for (int64_t j = 0; j < m; ++j) {
    int64_t rem = hits[j];
    for (int64_t d = 0; d < r; ++d) {
      out[d * m + j] = rem / st[d];
      rem %= st[d];
    }
  }
  if (r == 0) return {from_i64(std::vector<int64_t>(static_cast<size_t>(m), 0), DType::i64, {1, m})};
  return {from_i64(out, DType::i64, {r, m})};
}

std::vector<Tensor> compress_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  const std::vector<int64_t> cond = to_i64(in(n, xs, 1));
  if (!n.has_attr("axis")) {
    std::vector<int64_t> src;
    for (int64_t i = 0; i < std::min<int64_t>(x.numel(), static_cast<int64_t>(cond.size())); ++i)
      if (cond[i]) src.push_back(i);
    return {pick(x, {static_cast<int64_t>(src.size())}, src)};
  }
  const int64_t axis = norm_axis(n, n.attr_int("axis"), x.rank());
  const int64_t dim = x.dims()[axis];
  if (static_cast<int64_t>(cond.size()) > dim) fail(n, "condition is longer than the axis");
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < static_cast<int64_t>(cond.size()); ++i)
    if (cond[i]) keep.push_back(i);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dims()[d];
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.dims()[d];
  Dims od = x.dims();
  od[axis] = static_cast<int64_t>(keep.size());
  std::vector<int64_t> src;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k : keep)
      for (int64_t i = 0; i < inner; ++i) src.push_back((o * dim + k) * inner + i);
  return {pick(x, od, src)};
}

// Unique over elements (no axis) or over slices along `axis`: slices compare as tuples.
std::vector<Tensor> unique_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  const bool sorted = n.attr_int("sorted", 1) != 0;
  const bool has_axis = n.has_attr("axis");
  const int64_t axis = has_axis ? norm_axis(n, n.attr_int("axis"), x.rank()) : 0;
  int64_t outer = 1, dim = x.numel(), inner = 1;
  if (has_axis) {
    dim = x.dims()[axis];
    for (int64_t d = 0; d < axis; ++d) outer *= x.dims()[d];
    for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.dims()[d];
  }
  const std::vector<double> v = to_f64(x);
  auto slice_of = [&](int64_t j) {
    std::vector<double> s;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) s.push_back(v[(o * dim + j) * inner + i]);
    return s;
  };
  std::vector<std::vector<double>> slices;
  for (int64_t j = 0; j < dim; ++j) slices.push_back(slice_of(j));
  // A total order (NaNs equal each other and sort last), so that map and sort stay well defined.
  auto less = [](const std::vector<double>& a, const std::vector<double>& b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](double x, double y) {
      if (std::isnan(x) || std::isnan(y)) return !std::isnan(x) && std::isnan(y);
      return x < y;
    });
  };
  std::map<std::vector<double>, int64_t, decltype(less)> seen(less);  // slice -> its position in `firsts`
  std::vector<int64_t> firsts;  // first occurrence of each distinct slice, in order of appearance
  std::vector<int64_t> inverse(static_cast<size_t>(dim));
  for (int64_t j = 0; j < dim; ++j) {
    auto [it, fresh] = seen.emplace(slices[j], static_cast<int64_t>(firsts.size()));
    inverse[j] = it->second;
    if (fresh) firsts.push_back(j);
  }
  std::vector<int64_t> order(firsts.size());
  std::iota(order.begin(), order.end(), 0);
  if (sorted) std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return less(slices[firsts[a]], slices[firsts[b]]); });
  std::vector<int64_t> rank_of(order.size());
  for (size_t k = 0; k < order.size(); ++k) rank_of[order[k]] = static_cast<int64_t>(k);
  const int64_t u = static_cast<int64_t>(order.size());
  std::vector<int64_t> idx(u), counts(u, 0), inv(static_cast<size_t>(dim));
  for (int64_t k = 0; k < u; ++k) idx[k] = firsts[order[k]];
  for (int64_t j = 0; j < dim; ++j) {
    inv[j] = rank_of[inverse[j]];
    ++counts[inv[j]];
  }
  Dims yd = has_axis ? x.dims() : Dims{u};
  if (has_axis) yd[axis] = u;
  std::vector<int64_t> src;
  if (!has_axis) src = idx;
  else
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k : idx)
        for (int64_t i = 0; i < inner; ++i) src.push_back((o * dim + k) * inner + i);
  return {pick(x, yd, src), from_i64(idx, DType::i64, {u}), from_i64(inv, DType::i64, {dim}),
          from_i64(counts, DType::i64, {u})};
}

std::vector<Tensor> eyelike_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  if (x.rank() != 2) fail(n, "input must be 2-D");
  DType dt = x.dtype();
  if (n.has_attr("dtype")) {
    auto d = ir::parse_dtype(n.attr_string("dtype"));
    if (!d) fail(n, "unknown dtype '" + n.attr_string("dtype") + "'");
    dt = *d;
  }
  const int64_t k = n.attr_int("k", 0), R = x.dims()[0], C = x.dims()[1];
  std::vector<int64_t> v(static_cast<size_t>(R * C), 0);
  for (int64_t i = 0; i < R; ++i)
    if (i + k >= 0 && i + k < C) v[i * C + i + k] = 1;
  return {from_i64(v, dt, x.dims())};
}

std::vector<Tensor> reverse_sequence_kernel(const ir::Node& n, const Inputs& xs) {
  const Tensor& x = in(n, xs, 0);
  const std::vector<int64_t> lens = index_list(n, in(n, xs, 1), "sequence_lens");
  const int64_t ta = n.attr_int("time_axis", 0), ba = n.attr_int("batch_axis", 1);
  if (x.rank() < 2 || (ta != 0 && ta != 1) || ba != 1 - ta) fail(n, "time_axis and batch_axis must be 0 and 1 in some order");
  const Dims st = strides_of(x.dims());
  if (static_cast<int64_t>(lens.size()) != x.dims()[ba]) fail(n, "sequence_lens must have one entry per batch");
  std::vector<int64_t> src(static_cast<size_t>(x.numel()));
  for (int64_t e = 0; e < x.numel(); ++e) {
    const int64_t t = (e / st[ta]) % x.dims()[ta], b = (e / st[ba]) % x.dims()[ba];
    if (lens[b] < 0 || lens[b] > x.dims()[ta]) fail(n, "a sequence length is out of range");
    src[e] = t < lens[b] ? e + (lens[b] - 1 - 2 * t) * st[ta] : e;
  }
  return {pick(x, x.dims(), src)};
}

}  // namespace

void register_index_ops(Table& t) {
  auto add = [&](const char* op, Kernel k) { t[{"", op}] = std::move(k); };
  add("ScatterElements", scatter_elements_kernel);
  add("ScatterND", scatter_nd_kernel);
  add("GatherND", gather_nd_kernel);
  add("TopK", topk_kernel);
  add("OneHot", onehot_kernel);
  add("NonZero", nonzero_kernel);
  add("Compress", compress_kernel);
  add("Unique", unique_kernel);
  add("EyeLike", eyelike_kernel);
  add("ReverseSequence", reverse_sequence_kernel);
  add("CastLike", [](const ir::Node& n, const Inputs& xs) {
    return std::vector<Tensor>{in(n, xs, 0).cast(in(n, xs, 1).dtype())};
  });
}

}  // namespace sabre::reference::detail
