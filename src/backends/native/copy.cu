// Data movement: one strided N-d copy (Slice, Concat, Split, Expand, permutes that keep the
// innermost axis), a shared-memory tiled transpose (permutes that move it), and Gather.
// Kernels see only element sizes; runs of contiguous elements travel as 16-byte units.
// Tests: tests/gpu/native_movement_test.cpp (Permute_*, Slice_*, Concat_*, Split_*, Gather_*)
#include <algorithm>
#include <numeric>

#include "backends/native/common.cuh"

namespace sabre::native {
namespace {

using namespace detail;

constexpr int kMaxDims = 8;

// y[yoff + sum c_k*ys_k] = x[xoff + sum c_k*xs_k] for every coordinate c of dims.
struct CopyParams {
  const void* x;
  void* y;
  long long n, xoff, yoff;
  int rank;
  long long dims[kMaxDims], xs[kMaxDims], ys[kMaxDims];
};

template <class U>
__global__ void __launch_bounds__(256) copy_nd(const CopyParams p) {
  detail::pdl_enter();
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.n; i += step) {
    long long xo = p.xoff, yo = p.yoff, r = i;
    for (int d = p.rank - 1; d >= 0; --d) {
      const long long c = r % p.dims[d];
      r /= p.dims[d];
      xo += c * p.xs[d];
      yo += c * p.ys[d];
    }
    static_cast<U*>(p.y)[yo] = static_cast<const U*>(p.x)[xo];
  }
}

struct View {
  std::vector<int64_t> dims, xs, ys;
  int64_t xoff = 0, yoff = 0;
};

// Drops size-1 dims and merges neighbours contiguous in both x and y.
View simplify(const View& v) {
  View o;
  o.xoff = v.xoff;
  o.yoff = v.yoff;
  for (size_t d = 0; d < v.dims.size(); ++d) {
    if (v.dims[d] == 1) continue;
    if (!o.dims.empty() && o.xs.back() == v.xs[d] * v.dims[d] && o.ys.back() == v.ys[d] * v.dims[d]) {
      o.dims.back() *= v.dims[d];
      o.xs.back() = v.xs[d];
      o.ys.back() = v.ys[d];
    } else {
      o.dims.push_back(v.dims[d]);
      o.xs.push_back(v.xs[d]);
      o.ys.push_back(v.ys[d]);
    }
  }
  if (o.dims.empty()) {
    o.dims = {1};
    o.xs = {0};
    o.ys = {0};
  }
  return o;
}

template <class U>
cudaError_t launch_copy(const View& v, const void* x, void* y, cudaStream_t s) {
  CopyParams p{};
  p.x = x;
  p.y = y;
  p.xoff = v.xoff;
  p.yoff = v.yoff;
  p.rank = static_cast<int>(v.dims.size());
  p.n = 1;
  for (int d = 0; d < p.rank; ++d) {
    p.dims[d] = v.dims[d];
    p.xs[d] = v.xs[d];
    p.ys[d] = v.ys[d];
    p.n *= v.dims[d];
  }
  if (p.n == 0) return cudaSuccess;
  SABRE_CUDA_TRY(detail::launch(copy_nd<U>, blocks_for(p.n, 256), 256, 0, s, p));
  SABRE_LAUNCH_CHECK();
  return cudaSuccess;
}

// Runs a view, moving `g` elements at a time when the innermost dim is contiguous on both sides
// and everything (offsets, strides, pointers) lines up to g*elem_size bytes.
cudaError_t run_view(size_t es, View v, const void* x, void* y, cudaStream_t s) {
  v = simplify(v);
  if (v.dims.size() > kMaxDims) return fail(cudaErrorNotSupported, "copy: more than 8 dims after merging");
  for (size_t bytes : {16, 8, 4, 2}) {
    if (bytes <= es || bytes % es) continue;
    const int64_t g = static_cast<int64_t>(bytes / es);
    const size_t r = v.dims.size();
    bool ok = v.xs[r - 1] == 1 && v.ys[r - 1] == 1 && v.dims[r - 1] % g == 0 && v.xoff % g == 0 && v.yoff % g == 0 &&
              reinterpret_cast<uintptr_t>(x) % bytes == 0 && reinterpret_cast<uintptr_t>(y) % bytes == 0;
    for (size_t d = 0; d + 1 < r && ok; ++d) ok = v.xs[d] % g == 0 && v.ys[d] % g == 0;
    if (!ok) continue;
    View w = v;
    w.dims[r - 1] /= g;
    for (size_t d = 0; d + 1 < r; ++d) {
      w.xs[d] /= g;
      w.ys[d] /= g;
    }
    w.xoff /= g;
    w.yoff /= g;
    es = bytes;
    v = w;
    break;
  }
  switch (es) {
    case 1: return launch_copy<uint8_t>(v, x, y, s);
    case 2: return launch_copy<uint16_t>(v, x, y, s);
    case 4: return launch_copy<uint32_t>(v, x, y, s);
    case 8: return launch_copy<uint2>(v, x, y, s);
    case 16: return launch_copy<uint4>(v, x, y, s);
    default: return fail(cudaErrorNotSupported, "copy: element size " + std::to_string(es) + " (1, 2, 4, 8 or 16)");
  }
}

std::vector<int64_t> dense_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size());
  int64_t k = 1;
  for (size_t d = dims.size(); d-- > 0;) {
    s[d] = k;
    k *= dims[d];
  }
  return s;
}

// Tiled transpose: coordinates of x; axis A (x's innermost, stride 1 in x) and axis B (stride 1
// in y) form 32x32 tiles staged through shared memory so both sides stay coalesced.
struct TileParams {
  const void* x;
  void* y;
  int rank;  // batch dims (all but A and B)
  long long bdims[kMaxDims], bxs[kMaxDims], bys[kMaxDims];
  long long na, nb, xs_b, ys_a;  // x stride of B, y stride of A
  long long tiles_a, tiles_b, n_tiles;
};

template <class U>
__global__ void __launch_bounds__(256) transpose_tiled(const TileParams p) {
  detail::pdl_enter();
  __shared__ U tile[32][33];
  for (long long t = blockIdx.x; t < p.n_tiles; t += gridDim.x) {
    long long r = t;
    const long long ta = r % p.tiles_a;
    r /= p.tiles_a;
    const long long tb = r % p.tiles_b;
    r /= p.tiles_b;
    long long xo = 0, yo = 0;
    for (int d = p.rank - 1; d >= 0; --d) {
      const long long c = r % p.bdims[d];
      r /= p.bdims[d];
      xo += c * p.bxs[d];
      yo += c * p.bys[d];
    }
    const long long a0 = ta * 32, b0 = tb * 32;
    // Read: threadIdx.x walks A (contiguous in x).
    for (int i = threadIdx.x >> 5; i < 32; i += blockDim.x >> 5) {
      const long long a = a0 + (threadIdx.x & 31), b = b0 + i;
      if (a < p.na && b < p.nb) tile[i][threadIdx.x & 31] = static_cast<const U*>(p.x)[xo + b * p.xs_b + a];
    }
    __syncthreads();
    // Write: threadIdx.x walks B (contiguous in y).
    for (int i = threadIdx.x >> 5; i < 32; i += blockDim.x >> 5) {
      const long long b = b0 + (threadIdx.x & 31), a = a0 + i;
      if (a < p.na && b < p.nb) static_cast<U*>(p.y)[yo + a * p.ys_a + b] = tile[threadIdx.x & 31][i];
    }
    __syncthreads();
  }
}

template <class U>
cudaError_t launch_tiled(const TileParams& p, cudaStream_t s) {
  SABRE_CUDA_TRY(detail::launch(transpose_tiled<U>, blocks_for(p.n_tiles, 1, 132 * 16), 256, 0, s, p));
  SABRE_LAUNCH_CHECK();
  return cudaSuccess;
}

}  // namespace

cudaError_t strided_copy(size_t elem_size, const void* x, int64_t offset, const std::vector<int64_t>& out_dims,
                         const std::vector<int64_t>& strides, void* y, cudaStream_t stream) {
  if (out_dims.size() != strides.size()) return fail(cudaErrorInvalidValue, "strided_copy: dims and strides differ in rank");
  View v;
  v.dims = out_dims;
  v.xs = strides;
  v.ys = dense_strides(out_dims);
  v.xoff = offset;
  return run_view(elem_size, v, x, y, stream);
}

cudaError_t permute(size_t elem_size, const void* x, const std::vector<int64_t>& dims,
                    const std::vector<int64_t>& perm, void* y, cudaStream_t stream) {
  const size_t r = dims.size();
  if (perm.size() != r) return fail(cudaErrorInvalidValue, "permute: perm and dims differ in rank");
  std::vector<bool> seen(r, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(r) || seen[p]) return fail(cudaErrorInvalidValue, "permute: perm is not a permutation");
    seen[p] = true;
  }
  const std::vector<int64_t> xs = dense_strides(dims);
  std::vector<int64_t> odims(r);
  for (size_t j = 0; j < r; ++j) odims[j] = dims[perm[j]];
  const std::vector<int64_t> ost = dense_strides(odims);
  // Walk in y order so the simplified view's innermost dim is y's.
  View v;
  for (size_t j = 0; j < r; ++j) {
    v.dims.push_back(dims[perm[j]]);
    v.xs.push_back(xs[perm[j]]);
    v.ys.push_back(ost[j]);
  }
  View sv = simplify(v);
  const bool inner_moves = sv.xs.back() != 1;
  if (!inner_moves || sv.dims.size() > kMaxDims || elem_size > 8) return run_view(elem_size, v, x, y, stream);
  // Tiled: A = the dim with x stride 1, B = y's innermost (y stride 1).
  TileParams p{};
  p.x = x;
  p.y = y;
  const size_t n = sv.dims.size();
  size_t ia = n;
  for (size_t d = 0; d < n; ++d)
    if (sv.xs[d] == 1) ia = d;
  const size_t ib = n - 1;
  if (ia == n) return run_view(elem_size, v, x, y, stream);
  p.na = sv.dims[ia];
  p.nb = sv.dims[ib];
  p.xs_b = sv.xs[ib];
  p.ys_a = sv.ys[ia];
  for (size_t d = 0; d < n; ++d) {
    if (d == ia || d == ib) continue;
    p.bdims[p.rank] = sv.dims[d];
    p.bxs[p.rank] = sv.xs[d];
    p.bys[p.rank] = sv.ys[d];
    ++p.rank;
  }
  p.tiles_a = (p.na + 31) / 32;
  p.tiles_b = (p.nb + 31) / 32;
  p.n_tiles = p.tiles_a * p.tiles_b;
  for (int d = 0; d < p.rank; ++d) p.n_tiles *= p.bdims[d];
  if (p.n_tiles == 0) return cudaSuccess;
  switch (elem_size) {
    case 1: return launch_tiled<uint8_t>(p, stream);
    case 2: return launch_tiled<uint16_t>(p, stream);
    case 4: return launch_tiled<uint32_t>(p, stream);
    case 8: return launch_tiled<unsigned long long>(p, stream);
    default: return fail(cudaErrorNotSupported, "permute: element size " + std::to_string(elem_size));
  }
}

std::vector<int64_t> slice_shape(const std::vector<int64_t>& dims, const std::vector<int64_t>& starts,
                                 const std::vector<int64_t>& ends, const std::vector<int64_t>& axes,
                                 const std::vector<int64_t>& steps) {
  std::vector<int64_t> out = dims;
  const int64_t r = static_cast<int64_t>(dims.size());
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t ax = axes.empty() ? static_cast<int64_t>(i) : axes[i];
    if (ax < 0) ax += r;
    const int64_t d = dims[ax], st = steps.empty() ? 1 : steps[i];
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s += d;
    if (e < 0) e += d;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      out[ax] = e > s ? (e - s + st - 1) / st : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
      out[ax] = s > e ? (s - e + (-st) - 1) / (-st) : 0;
    }
  }
  return out;
}

cudaError_t slice(size_t elem_size, const void* x, const std::vector<int64_t>& dims,
                  const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                  const std::vector<int64_t>& axes, const std::vector<int64_t>& steps, void* y,
                  cudaStream_t stream) {
  const int64_t r = static_cast<int64_t>(dims.size());
  if (ends.size() != starts.size() || (!axes.empty() && axes.size() != starts.size()) ||
      (!steps.empty() && steps.size() != starts.size()))
    return fail(cudaErrorInvalidValue, "slice: starts, ends, axes and steps differ in length");
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t ax = axes.empty() ? static_cast<int64_t>(i) : axes[i];
    if (ax < -r || ax >= r) return fail(cudaErrorInvalidValue, "slice: axis out of range");
    if (!steps.empty() && steps[i] == 0) return fail(cudaErrorInvalidValue, "slice: step 0");
  }
  const std::vector<int64_t> out = slice_shape(dims, starts, ends, axes, steps);
  const std::vector<int64_t> xs = dense_strides(dims);
  std::vector<int64_t> st = xs;
  int64_t off = 0;
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t ax = axes.empty() ? static_cast<int64_t>(i) : axes[i];
    if (ax < 0) ax += r;
    const int64_t d = dims[ax], step = steps.empty() ? 1 : steps[i];
    int64_t s = starts[i];
    if (s < 0) s += d;
    s = step > 0 ? std::clamp<int64_t>(s, 0, d) : std::clamp<int64_t>(s, 0, d - 1);
    if (out[ax] > 0) off += s * xs[ax];
    st[ax] = xs[ax] * step;
  }
  return strided_copy(elem_size, x, off, out, st, y, stream);
}

cudaError_t concat(size_t elem_size, const std::vector<const void*>& xs, const std::vector<std::vector<int64_t>>& dims,
                   int64_t axis, void* y, cudaStream_t stream) {
  if (xs.empty() || xs.size() != dims.size()) return fail(cudaErrorInvalidValue, "concat: needs inputs with dims");
  const int64_t r = static_cast<int64_t>(dims[0].size());
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return fail(cudaErrorInvalidValue, "concat: axis out of range");
  std::vector<int64_t> odims = dims[0];
  odims[axis] = 0;
  for (const auto& d : dims) {
    if (static_cast<int64_t>(d.size()) != r) return fail(cudaErrorInvalidValue, "concat: inputs differ in rank");
    for (int64_t k = 0; k < r; ++k)
      if (k != axis && d[k] != dims[0][k]) return fail(cudaErrorInvalidValue, "concat: inputs differ off the axis");
    odims[axis] += d[axis];
  }
  const std::vector<int64_t> ys = dense_strides(odims);
  int64_t at = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    View v;
    v.dims = dims[i];
    v.xs = dense_strides(dims[i]);
    v.ys = ys;
    v.yoff = at * ys[axis];
    at += dims[i][axis];
    if (cudaError_t e = run_view(elem_size, v, xs[i], y, stream); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t split(size_t elem_size, const void* x, const std::vector<int64_t>& dims, int64_t axis,
                  const std::vector<int64_t>& sizes, const std::vector<void*>& ys, cudaStream_t stream) {
  const int64_t r = static_cast<int64_t>(dims.size());
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return fail(cudaErrorInvalidValue, "split: axis out of range");
  if (sizes.size() != ys.size() || std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) != dims[axis])
    return fail(cudaErrorInvalidValue, "split: sizes must sum to dims[axis], one per output");
  const std::vector<int64_t> xst = dense_strides(dims);
  int64_t at = 0;
  for (size_t i = 0; i < ys.size(); ++i) {
    View v;
    v.dims = dims;
    v.dims[axis] = sizes[i];
    v.xs = xst;
    v.ys = dense_strides(v.dims);
    v.xoff = at * xst[axis];
    at += sizes[i];
    if (cudaError_t e = run_view(elem_size, v, x, ys[i], stream); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

namespace {

template <class U, class I>
__global__ void __launch_bounds__(256) gather_kernel(const U* x, const I* idx, U* y, long long outer, long long axis_dim,
                                                     long long nidx, long long inner) {
  detail::pdl_enter();
  const long long n = outer * nidx * inner;
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const long long j = i % inner;
    const long long r = i / inner;
    const long long k = r % nidx;
    const long long o = r / nidx;
    long long a = static_cast<long long>(idx[k]);
    if (a < 0) a += axis_dim;
    if (a < 0 || a >= axis_dim) {
      y[i] = U{};
    } else {
      y[i] = x[(o * axis_dim + a) * inner + j];
    }
  }
}

template <class U>
cudaError_t launch_gather(const void* x, const void* idx, DType it, void* y, int64_t outer, int64_t ad, int64_t ni,
                          int64_t inner, cudaStream_t s) {
  const unsigned b = blocks_for(outer * ni * inner, 256);
  if (it == DType::i64)
    SABRE_CUDA_TRY(detail::launch(gather_kernel<U, long long>, b, 256, 0, s, static_cast<const U*>(x),
                                  static_cast<const long long*>(idx), static_cast<U*>(y), outer, ad, ni, inner));
  else
    SABRE_CUDA_TRY(detail::launch(gather_kernel<U, int>, b, 256, 0, s, static_cast<const U*>(x),
                                  static_cast<const int*>(idx), static_cast<U*>(y), outer, ad, ni, inner));
  SABRE_LAUNCH_CHECK();
  return cudaSuccess;
}

}  // namespace

cudaError_t gather(size_t elem_size, const void* x, const std::vector<int64_t>& dims, int64_t axis,
                   const void* indices, DType index_dtype, int64_t num_indices, void* y, cudaStream_t stream) {
  const int64_t r = static_cast<int64_t>(dims.size());
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return fail(cudaErrorInvalidValue, "gather: axis out of range");
  if (index_dtype != DType::i64 && index_dtype != DType::i32)
    return fail(cudaErrorNotSupported, "gather: indices must be i64 or i32");
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= dims[d];
  for (int64_t d = axis + 1; d < r; ++d) inner *= dims[d];
  if (outer * num_indices * inner == 0) return cudaSuccess;
  // Rows of `inner` elements move as the widest unit that divides them and the pointers.
  for (size_t bytes : {16, 8, 4, 2, 1}) {
    if (bytes < elem_size || bytes % elem_size) continue;
    const int64_t g = static_cast<int64_t>(bytes / elem_size);
    if (inner % g || reinterpret_cast<uintptr_t>(x) % bytes || reinterpret_cast<uintptr_t>(y) % bytes) continue;
    const int64_t in_u = inner / g;
    switch (bytes) {
      case 16: return launch_gather<uint4>(x, indices, index_dtype, y, outer, dims[axis], num_indices, in_u, stream);
      case 8: return launch_gather<uint2>(x, indices, index_dtype, y, outer, dims[axis], num_indices, in_u, stream);
      case 4: return launch_gather<uint32_t>(x, indices, index_dtype, y, outer, dims[axis], num_indices, in_u, stream);
      case 2: return launch_gather<uint16_t>(x, indices, index_dtype, y, outer, dims[axis], num_indices, in_u, stream);
      case 1: return launch_gather<uint8_t>(x, indices, index_dtype, y, outer, dims[axis], num_indices, in_u, stream);
    }
  }
  return fail(cudaErrorNotSupported, "gather: element size " + std::to_string(elem_size));
}

}  // namespace sabre::native
