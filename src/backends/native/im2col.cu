// im2col at the NCHW graph boundary: the A operand of the GEMM that replaces a small-channel conv
// (the RGB stem, C = 3), read straight from the model's NCHW images with their cast folded in.
// Padding C to the 16-byte access made the stem's implicit GEMM reduce over R·S·8 = 392 instead of
// 147 and gather one filter tap per load; as rows of R·S·C columns (rounded up to the access) a
// plain GEMM runs it. One thread per 16-byte group of columns: consecutive threads write
// consecutive groups (coalesced rows), each gathers its taps through the read-only path, and the
// index math is 32-bit with multiply-shift division wherever the sizes allow.
// Tests: tests/gpu/native_conv_test.cpp (Im2col_*)
#include "backends/native/common.cuh"

namespace sabre::native {
namespace {

using namespace detail;

// n / d for 0 <= n < 2^31 by a multiply-high and a shift (common.cuh's DivMod): five divisions by
// run-time values per thread would otherwise cost more than its memory traffic.
struct Div32 {
  using I = int;
  int d = 1;
  DivMod dm;
  Div32() = default;
  explicit Div32(int64_t divisor) : d(static_cast<int>(divisor)), dm(static_cast<unsigned>(divisor)) {}
  __device__ __forceinline__ int div(int n) const { return static_cast<int>(dm.div(static_cast<unsigned>(n))); }
};
// Sizes past 2^31 elements: plain 64-bit division.
struct Div64 {
  using I = long long;
  long long d = 1;
  Div64() = default;
  explicit Div64(int64_t divisor) : d(divisor) {}
  __device__ __forceinline__ long long div(long long n) const { return n / d; }
};

template <class D>
struct Im2colP {
  using I = typename D::I;
  const void* x;
  void* a;
  I c, h, w, hw, chw;  // x [n,c,h,w]
  I p, q;              // output pixels per image: p x q
  I pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
  I rsc;               // columns with data: (r·S + s)·C + c < rsc
  I vecs;              // VEC-column groups per row (cols / VEC)
  I total;             // rows · vecs
  D by_vecs, by_q, by_p, by_c, by_s;
};

// a[row, col] for the VEC columns from col0 = (i mod vecs)·VEC of row i / vecs, row = (n·P + p)·Q + q.
template <class TX, class TA, int VEC, class D>
__global__ void __launch_bounds__(256) im2col_kernel(const Im2colP<D> p) {
  pdl_enter();
  using I = typename D::I;
  const TX* __restrict__ x = static_cast<const TX*>(p.x);
  TA* __restrict__ a = static_cast<TA*>(p.a);
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.total; i += step) {
    const I row = p.by_vecs.div(i);
    const I col0 = (i - row * p.vecs) * VEC;
    const I t = p.by_q.div(row);
    const I oq = row - t * p.q;
    const I nb = p.by_p.div(t);
    const I op = t - nb * p.p;
    const I ih0 = op * p.stride_h - p.pad_h, iw0 = oq * p.stride_w - p.pad_w;
    const TX* xn = x + nb * p.chw;
    // (r, s, c) of the first column; the others follow by counting c, then s, then r up.
    const I rs = p.by_c.div(col0);
    I c = col0 - rs * p.c;
    I r = p.by_s.div(rs);
    I s = rs - r * p.by_s.d;
    Pack<TA, VEC> v;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      float val = 0.f;
      if (col0 + j < p.rsc) {
        const I ih = ih0 + r * p.dil_h, iw = iw0 + s * p.dil_w;
        if (ih >= 0 && ih < p.h && iw >= 0 && iw < p.w) val = to_float(__ldg(xn + c * p.hw + ih * p.w + iw));
      }
      v.v[j] = from_float<TA>(val);
      if (++c == p.c) {
        c = 0;
        if (++s == p.by_s.d) s = 0, ++r;
      }
    }
    // Row length cols = vecs·VEC, so element row·cols + col0 is i·VEC.
    if constexpr (VEC == 1) a[i] = v.v[0];
    else *reinterpret_cast<Pack<TA, VEC>*>(a + i * VEC) = v;
  }
}

template <class TX, class TA, class D>
cudaError_t launch_im2col(const Im2colArgs& a, cudaStream_t stream) {
  constexpr int kVec = static_cast<int>(16 / sizeof(TA));
  const bool vec = a.cols % kVec == 0 && aligned16(a.a);
  const int vlen = vec ? kVec : 1;
  using I = typename D::I;
  Im2colP<D> p{};
  p.x = a.x;
  p.a = a.a;
  p.c = static_cast<I>(a.c), p.h = static_cast<I>(a.h), p.w = static_cast<I>(a.w);
  p.hw = static_cast<I>(a.h * a.w), p.chw = static_cast<I>(a.c * a.h * a.w);
  p.p = static_cast<I>(a.p), p.q = static_cast<I>(a.q);
  p.pad_h = static_cast<I>(a.pad_h), p.pad_w = static_cast<I>(a.pad_w);
  p.stride_h = static_cast<I>(a.stride_h), p.stride_w = static_cast<I>(a.stride_w);
  p.dil_h = static_cast<I>(a.dil_h), p.dil_w = static_cast<I>(a.dil_w);
  p.rsc = static_cast<I>(a.r * a.s * a.c);
  p.vecs = static_cast<I>(a.cols / vlen);
  p.total = static_cast<I>(a.n * a.p * a.q * (a.cols / vlen));
  p.by_vecs = D(a.cols / vlen), p.by_q = D(a.q), p.by_p = D(a.p), p.by_c = D(a.c), p.by_s = D(a.s);
  const unsigned blocks = blocks_for(p.total, 256);
  if (vec) SABRE_CUDA_TRY(launch(im2col_kernel<TX, TA, kVec, D>, blocks, 256, 0, stream, p));
  else SABRE_CUDA_TRY(launch(im2col_kernel<TX, TA, 1, D>, blocks, 256, 0, stream, p));
  return cudaSuccess;
}

template <class TX, class D>
cudaError_t launch_to(const Im2colArgs& a, cudaStream_t stream) {
  SABRE_FLOAT_DISPATCH(a.a_dtype, TA, return launch_im2col<TX, TA, D>(a, stream));
}

template <class D>
cudaError_t launch_from(const Im2colArgs& a, cudaStream_t stream) {
  SABRE_FLOAT_DISPATCH(a.x_dtype, TX, return launch_to<TX, D>(a, stream));
}

}  // namespace

cudaError_t im2col(const Im2colArgs& a, cudaStream_t stream) {
  if (a.n < 0 || a.c < 1 || a.h < 0 || a.w < 0 || a.r < 1 || a.s < 1 || a.p < 0 || a.q < 0 || a.pad_h < 0 ||
      a.pad_w < 0 || a.stride_h < 1 || a.stride_w < 1 || a.dil_h < 1 || a.dil_w < 1 || a.cols < a.r * a.s * a.c)
    return fail(cudaErrorInvalidValue,
                "im2col: needs c, r, s, strides and dilations >= 1, non-negative n, h, w, p, q and pads, and cols >= r*s*c "
                "(got n=" + std::to_string(a.n) + " c=" + std::to_string(a.c) + " h=" + std::to_string(a.h) +
                    " w=" + std::to_string(a.w) + " r=" + std::to_string(a.r) + " s=" + std::to_string(a.s) +
                    " p=" + std::to_string(a.p) + " q=" + std::to_string(a.q) + " cols=" + std::to_string(a.cols) + ")");
  if (a.n == 0 || a.p == 0 || a.q == 0) return cudaSuccess;
  if (!a.x || !a.a) return fail(cudaErrorInvalidValue, "im2col: needs x and a");
  // 32-bit indices while every index, and the grid-stride loop's last step past the end, stay below
  // 2^31 (blocks_for caps the grid at 132·32 blocks of 256 threads).
  constexpr int64_t kLimit = (int64_t(1) << 31) - int64_t(132) * 32 * 256;
  const bool narrow = a.n * a.c * a.h * a.w < kLimit && a.n * a.p * a.q * a.cols < kLimit &&
                      a.h + a.pad_h + (a.r - 1) * a.dil_h < kLimit && a.w + a.pad_w + (a.s - 1) * a.dil_w < kLimit &&
                      a.p * a.stride_h < kLimit && a.q * a.stride_w < kLimit;
  return narrow ? launch_from<Div32>(a, stream) : launch_from<Div64>(a, stream);
}

}  // namespace sabre::native
