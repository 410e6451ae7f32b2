// Embedding sum + LayerNormalization: BERT's embeddings (word, token type and position Gathers, two
// Adds, a LayerNorm) as one kernel instead of five to seven (a Slice of the position ids, three
// Gathers, the Add chain, the LayerNorm). Each row's ids are read in place, through strides that may
// be 0 (the position ids [1, seq] broadcast over the batch) and an offset (a Slice of a constant
// buffer). Rows of up to 256 vectors (2048 halves) stay in registers, a warp per row, as
// layernorm.cu's; longer rows: a block per row that sums the tables again on each pass.
// Tests: tests/gpu/native_norm_test.cpp (EmbedLayerNorm_*).
#include "backends/native/rows.cuh"

namespace sabre::native {
namespace {

using namespace detail;

struct Term {
  const void* table;
  const void* ids;
  long long vocab, offset;
  long long strides[kMaxEmbedRank];
  int ids_i64;
};
struct Params {
  Term term[kMaxEmbedTerms];
  long long row_dims[kMaxEmbedRank];
  const void* gamma;
  const void* beta;
  void* y;
  long long rows;
  int terms, rank, cols;
  float eps, inv_cols;
};

// The table row term t adds to row `row`, or nullptr where its id is outside the table.
template <class T>
__device__ __forceinline__ const T* term_row(const Params& p, int t, long long row) {
  const Term& m = p.term[t];
  long long at = m.offset, rem = row;
  for (int i = p.rank - 1; i >= 0; --i) {
    const long long c = rem % p.row_dims[i];
    rem /= p.row_dims[i];
    at += c * m.strides[i];
  }
  long long id = m.ids_i64 ? static_cast<const long long*>(m.ids)[at] : static_cast<const int*>(m.ids)[at];
  if (id < 0) id += m.vocab;
  if (id < 0 || id >= m.vocab) return nullptr;
  return static_cast<const T*>(m.table) + id * static_cast<long long>(p.cols);
}

// A warp per row, NCH chunks of VEC elements per lane; warps past the last row return whole.
template <class T, int VEC, int NCH>
__global__ void __launch_bounds__(128) embed_ln_warp(const Params p) {
  pdl_enter();
  const long long row = static_cast<long long>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= p.rows) return;
  const int lane = threadIdx.x % 32;
  float v[NCH][VEC];
#pragma unroll
  for (int j = 0; j < NCH; ++j)
#pragma unroll
    for (int e = 0; e < VEC; ++e) v[j][e] = 0.f;
  for (int t = 0; t < p.terms; ++t) {
    const T* src = term_row<T>(p, t, row);
    if (!src) continue;
#pragma unroll
    for (int j = 0; j < NCH; ++j) {
      const int k0 = (lane + j * 32) * VEC;
      if (k0 < p.cols) {
        float c[VEC];
        load_chunk<T, VEC>(src + k0, c);
#pragma unroll
        for (int e = 0; e < VEC; ++e) v[j][e] += c[e];
      }
    }
  }
  float sum = 0.f;
#pragma unroll
  for (int j = 0; j < NCH; ++j)
#pragma unroll
    for (int e = 0; e < VEC; ++e) sum += v[j][e];  // chunks past cols hold zeros
  const float mean = row_sum<32>(sum, nullptr) * p.inv_cols;
  float sq = 0.f;
#pragma unroll
  for (int j = 0; j < NCH; ++j)
    if ((lane + j * 32) * VEC < p.cols)
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float d = v[j][e] - mean;
        sq += d * d;
      }
  const float rstd = rsqrtf(row_sum<32>(sq, nullptr) * p.inv_cols + p.eps);
  const T* gamma = static_cast<const T*>(p.gamma);
  const T* beta = static_cast<const T*>(p.beta);
  T* y = static_cast<T*>(p.y) + row * static_cast<long long>(p.cols);
#pragma unroll
  for (int j = 0; j < NCH; ++j) {
    const int k0 = (lane + j * 32) * VEC;
    if (k0 < p.cols) {
      float g[VEC], b[VEC], o[VEC];
      load_chunk<T, VEC>(gamma + k0, g);
      if (beta) load_chunk<T, VEC>(beta + k0, b);
#pragma unroll
      for (int e = 0; e < VEC; ++e) o[e] = (v[j][e] - mean) * rstd * g[e] + (beta ? b[e] : 0.f);
      store_chunk<T, VEC>(y + k0, o);
    }
  }
}

// Rows too long for registers: a block per row; each pass sums the terms' table rows again.
template <class T>
__global__ void __launch_bounds__(256) embed_ln_loop(const Params p) {
  pdl_enter();
  __shared__ float red[32];
  const long long row = blockIdx.x;
  const T* src[kMaxEmbedTerms];
  for (int t = 0; t < kMaxEmbedTerms; ++t) src[t] = t < p.terms ? term_row<T>(p, t, row) : nullptr;
  auto val = [&](int k) {
    float s = 0.f;
    for (int t = 0; t < p.terms; ++t)
      if (src[t]) s += to_float(src[t][k]);
    return s;
  };
  float sum = 0.f;
  for (int k = threadIdx.x; k < p.cols; k += blockDim.x) sum += val(k);
  const float mean = block_sum(sum, red) * p.inv_cols;
  float sq = 0.f;
  for (int k = threadIdx.x; k < p.cols; k += blockDim.x) {
    const float d = val(k) - mean;
    sq += d * d;
  }
  const float rstd = rsqrtf(block_sum(sq, red) * p.inv_cols + p.eps);
  const T* g = static_cast<const T*>(p.gamma);
  const T* b = static_cast<const T*>(p.beta);
  T* y = static_cast<T*>(p.y) + row * static_cast<long long>(p.cols);
  for (int k = threadIdx.x; k < p.cols; k += blockDim.x)
    y[k] = from_float<T>((val(k) - mean) * rstd * to_float(g[k]) + (b ? to_float(b[k]) : 0.f));
}

template <class T, int VEC>
cudaError_t launch_vec(const Params& p, cudaStream_t s) {
  const long long chunks = (p.cols + VEC - 1) / VEC;
  int nch = static_cast<int>((chunks + 31) / 32);
  if (nch == 5) nch = 6;
  if (nch == 7) nch = 8;
  if (nch > 8) {
    SABRE_CUDA_TRY(launch(embed_ln_loop<T>, static_cast<unsigned>(p.rows), 256, 0, s, p));
    SABRE_LAUNCH_CHECK();
    return cudaSuccess;
  }
  const int wpb = warps_per_block(p.rows);
  const unsigned blocks = static_cast<unsigned>((p.rows + wpb - 1) / wpb);
#define SABRE_EMBED_CASE(NCH) \
  if (nch == NCH) SABRE_CUDA_TRY(launch(embed_ln_warp<T, VEC, NCH>, blocks, 32 * wpb, 0, s, p));
  SABRE_EMBED_CASE(1) SABRE_EMBED_CASE(2) SABRE_EMBED_CASE(3) SABRE_EMBED_CASE(4) SABRE_EMBED_CASE(6) SABRE_EMBED_CASE(8)
#undef SABRE_EMBED_CASE
  SABRE_LAUNCH_CHECK();
  return cudaSuccess;
}

// 16-byte vectors where cols and every table, gamma, beta and y allow them; else one element.
template <class T>
cudaError_t launch_typed(const EmbedLayerNormArgs& a, const Params& p, cudaStream_t s) {
  constexpr int V = 16 / sizeof(T);
  auto al = [](const void* q) { return !q || (reinterpret_cast<uintptr_t>(q) & 15) == 0; };
  bool vec = a.cols % V == 0 && al(a.gamma) && al(a.beta) && al(a.y);
  for (int t = 0; t < a.num_terms; ++t) vec = vec && al(a.terms[t].table);
  return vec ? launch_vec<T, V>(p, s) : launch_vec<T, 1>(p, s);
}

}  // namespace

cudaError_t embed_layernorm(const EmbedLayerNormArgs& a, cudaStream_t stream) {
  if (a.num_terms < 1 || a.num_terms > kMaxEmbedTerms || a.rank < 1 || a.rank > kMaxEmbedRank)
    return detail::fail(cudaErrorInvalidValue, "embed_layernorm: 1.." + std::to_string(kMaxEmbedTerms) +
                                                   " terms and row rank 1.." + std::to_string(kMaxEmbedRank) +
                                                   " (got " + std::to_string(a.num_terms) + ", " +
                                                   std::to_string(a.rank) + ")");
  if (a.cols < 1 || a.cols > 0x7fffffff || !a.gamma || !a.y)
    return detail::fail(cudaErrorInvalidValue, "embed_layernorm: needs gamma, y and 1 <= cols < 2^31");
  Params p{};
  p.rows = 1;
  for (int i = 0; i < a.rank; ++i) {
    if (a.row_dims[i] < 1) return detail::fail(cudaErrorInvalidValue, "embed_layernorm: row dims must be >= 1");
    p.row_dims[i] = a.row_dims[i];
    p.rows *= a.row_dims[i];
  }
  if (p.rows > 0x7fffffff)
    return detail::fail(cudaErrorInvalidValue, "embed_layernorm: at most 2^31 - 1 rows (got " + std::to_string(p.rows) + ")");
  for (int t = 0; t < a.num_terms; ++t) {
    const EmbedTerm& m = a.terms[t];
    if (!m.table || !m.ids || m.vocab < 1)
      return detail::fail(cudaErrorInvalidValue, "embed_layernorm: term " + std::to_string(t) + " needs a table, ids and vocab >= 1");
    if (m.ids_dtype != DType::i64 && m.ids_dtype != DType::i32)
      return detail::fail(cudaErrorNotSupported, "embed_layernorm: ids must be i64 or i32");
    Term& q = p.term[t];
    q.table = m.table;
    q.ids = m.ids;
    q.vocab = m.vocab;
    q.offset = m.offset;
    for (int i = 0; i < kMaxEmbedRank; ++i) q.strides[i] = i < a.rank ? m.strides[i] : 0;
    q.ids_i64 = m.ids_dtype == DType::i64;
  }
  p.terms = a.num_terms;
  p.rank = a.rank;
  p.cols = static_cast<int>(a.cols);
  p.gamma = a.gamma;
  p.beta = a.beta;
  p.y = a.y;
  p.eps = a.eps;
  p.inv_cols = 1.f / static_cast<float>(a.cols);
  SABRE_FLOAT_DISPATCH(a.dtype, T, return launch_typed<T>(a, p, stream));
}

}  // namespace sabre::native
