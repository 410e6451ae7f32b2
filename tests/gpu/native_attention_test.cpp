// Native kernel GPU test (native_kernels_test.cpp runs it): the fused attention kernels against a
// double-precision reference.
#include <cuda_runtime.h>

#include "native_kernels_test.h"

namespace sabre::native_test {

// ---- fused attention -------------------------------------------------------------------------
// Q, K and V ([rows, hd] each) interleaved as one [rows, 3, hd] tensor, as the joined QKV GEMM
// writes them; a one-element stand-in where the case does not pack them.
Tensor pack_qkv(DType dt, bool packed, const Tensor& q, const Tensor& k, const Tensor& v, int64_t rows, int64_t hd) {
  Tensor qkv(dt, packed ? std::vector<int64_t>{rows, 3, hd} : std::vector<int64_t>{1});
  if (packed)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < hd; ++c) {
        qkv.set_f64((r * 3 + 0) * hd + c, q.get_f64(r * hd + c));
        qkv.set_f64((r * 3 + 1) * hd + c, k.get_f64(r * hd + c));
        qkv.set_f64((r * 3 + 2) * hd + c, v.get_f64(r * hd + c));
      }
  return qkv;
}

// The arguments' geometry, pointers and strides: Q and O [b, sq, h, d], K and V [b, sk, h / kv_group, d]
// in their buffers, or Q, K and V read in place from the packed [b, sq, 3, h, d] tensor (d·h
// elements apart: only 8-byte aligned where d is not a multiple of 8).
native::AttentionArgs attention_args(DType dt, bool packed, int64_t b, int64_t h, int64_t sq, int64_t sk, int64_t d,
                                     int64_t kv_group, const Dev& dq, const Dev& dk, const Dev& dv, const Dev& dqkv,
                                     const Dev& dout) {
  const int64_t hd = h * d, hk = h / kv_group;
  native::AttentionArgs a;
  a.dtype = dt;
  a.q = dq.p, a.k = dk.p, a.v = dv.p, a.o = dout.p;
  if (packed) {
    uint8_t* base = static_cast<uint8_t*>(dqkv.p);
    a.q = base, a.k = base + hd * ir::size_of(dt), a.v = base + 2 * hd * ir::size_of(dt);
  }
  a.b = b, a.h = h, a.sq = sq, a.sk = sk, a.d = d, a.kv_group = kv_group;
  const int64_t qs[3] = {sq * hd, d, hd}, ks[3] = {sk * hk * d, d, hk * d}, qkvs[3] = {sq * 3 * hd, d, 3 * hd};
  for (int i = 0; i < 3; ++i) {
    a.o_stride[i] = qs[i];
    a.q_stride[i] = packed ? qkvs[i] : qs[i];
    a.k_stride[i] = a.v_stride[i] = packed ? qkvs[i] : ks[i];
  }
  return a;
}

// One kernel's run into the poisoned output, against the double reference: relative L2 error
// within the dtype's bound and every element finite.
void run_and_check(const std::string& full, const native::AttentionArgs& a, const Dev& dout, size_t out_bytes,
                   std::vector<int64_t> dims, const std::vector<double>& want) {
  const DType dt = a.dtype;
  CK(cudaMemset(dout.p, 0xFF, out_bytes));  // poison: unwritten elements read as NaN
  CK(native::attention(a, nullptr));
  const Tensor got = dout.get(dt, std::move(dims));
  double num = 0, den = 0;
  bool finite = true;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.get_f64(i), w = want[size_t(i)];
    finite = finite && std::isfinite(g);
    num += (g - w) * (g - w);
    den += w * w;
  }
  const double err = std::sqrt(num / std::max(den, 1e-30)), tol = dt == DType::f16 ? 3e-3 : 2e-2;
  const bool ok = finite && err <= tol;
  std::printf("%s %-66s rel_l2=%.3g tol=%.0e%s\n", ok ? "PASS" : "FAIL", full.c_str(), err, tol,
              finite ? "" : " (non-finite output: unwritten?)");
  ok ? ++g_pass : ++g_fail;
}

// Q, K, V and O in BERT's [b, s, h, 64] GEMM-output layout (read through strides), against a
// double-precision reference on the same rounded inputs. mask_kind as softmax_case, the mask in
// mask_dt; 3: a [B,1,Q,K] f32 mask whose rows 3 mod 7 are all finfo(f32).min (HF's padding value),
// rows 5 mod 7 all -inf (zeros) and rows 4 mod 7 finfo.min at every third key (the reference rounds
// scale·s + mask to f32 there, as the kernel does, so a row of finfo.min averages V uniformly).
// packed (sq = sk): Q, K and V read in place from one [b, s, 3, h, d] tensor, as the fused plan reads
// the joined QKV GEMM's output. mask_dt i64: a select mask of 0/1/2 (HF's attention_mask, as the
// fused plan reads it), mask_true where nonzero, else mask_false; with mask_kind 2 its rows 3 mod 7
// are all zeros. kv_group > 1: grouped-query attention, K and V with h / kv_group heads, query head
// hi reading K/V head hi / kv_group (Llama-style GQA; kv_group = h is multi-query). Every case runs each kernel (the automatic choice, the previous
// kernel and each block shape forced), the output poisoned before each run.
void attention_case(DType dt, int64_t b, int64_t h, int64_t sq, int64_t sk, int mask_kind, bool causal,
                    int64_t d = 64, bool packed = false, DType mask_dt = DType::f32, double mask_true = 0,
                    double mask_false = -3.4028234663852886e38, int64_t kv_group = 1) {
  const std::string name = "Attention_" + dts(dt) + "_b" + std::to_string(b) + "h" + std::to_string(h) + "_q" +
                           std::to_string(sq) + "k" + std::to_string(sk) + "d" + std::to_string(d) + "_mask" +
                           std::to_string(mask_kind) + (mask_kind && mask_dt != DType::f32 ? dts(mask_dt) : "") +
                           (causal ? "_causal" : "") + (packed ? "_packedqkv" : "") +
                           (mask_kind && mask_dt == DType::i64 ? "_sel" + std::to_string(int(mask_true)) +
                                                                     (mask_false < -1e38 ? "_fmin" : "_" + std::to_string(int(mask_false)))
                                                               : "") +
                           (kv_group > 1 ? "_gqa" + std::to_string(kv_group) : "");
  const auto& kernels = native::kAttentionKernelNames;
  bool any = false;
  for (const auto& kn : kernels) any = any || selected(name + "_" + kn.second);
  if (!any) return;
  const int64_t hk = h / kv_group;  // K/V heads
  const Tensor q = rnd(dt, {b, sq, h, d}), k = rnd(dt, {b, sk, hk, d}), v = rnd(dt, {b, sk, hk, d});
  std::vector<int64_t> mdims = mask_kind == 1                      ? std::vector<int64_t>{b, 1, 1, sk}
                               : mask_kind == 2 || mask_kind == 3 ? std::vector<int64_t>{b, 1, sq, sk}
                                                                  : std::vector<int64_t>{1};
  const bool select = mask_kind && mask_dt == DType::i64;
  Tensor mask = select ? Tensor(DType::i64, mdims) : rnd(mask_kind ? mask_dt : DType::f32, mdims, -3, 0);
  if (select)
    for (int64_t i = 0; i < mask.numel(); ++i) {
      const int64_t row = mask_kind == 2 ? i / sk % sq : -1;
      mask.set_f64(i, row % 7 == 3 || (i * 7919 + 13) % 10 >= 7 ? 0 : (i % 11 == 4 ? 2 : 1));
    }
  else if (mask_kind)
    for (int64_t i = 0; i < mask.numel(); i += 5) mask.set_f64(i, -10000.0);
  // The addend at a mask element: its value, or a select mask's choice.
  auto addend = [&](int64_t at) { return select ? (mask.get_f64(at) != 0 ? mask_true : mask_false) : mask.get_f64(at); };
  const double fmin = -3.4028234663852886e38;  // finfo(f32).min
  if (mask_kind == 3)
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t i = 0; i < sq; ++i)
        for (int64_t j = 0; j < sk; ++j) {
          const int64_t at = (bi * sq + i) * sk + j;
          if (i % 7 == 3 || (i % 7 == 4 && j % 3 == 0)) mask.set_f64(at, fmin);
          if (i % 7 == 5) mask.set_f64(at, -INFINITY);
        }
  const float scale = 0.125f;
  std::vector<double> want(static_cast<size_t>(b * sq * h * d));
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t hi = 0; hi < h; ++hi)
      for (int64_t i = 0; i < sq; ++i) {
        std::vector<double> s(static_cast<size_t>(sk));
        double mx = -INFINITY;
        for (int64_t j = 0; j < sk; ++j) {
          double acc = 0;
          for (int64_t c = 0; c < d; ++c)
            acc += q.get_f64(((bi * sq + i) * h + hi) * d + c) * k.get_f64(((bi * sk + j) * hk + hi / kv_group) * d + c);
          acc *= scale;
          if (select) acc = double(float(acc) + float(addend(mask_kind == 1 ? bi * sk + j : (bi * sq + i) * sk + j)));
          else if (mask_kind == 1) acc += addend(bi * sk + j);
          else if (mask_kind == 2) acc += addend((bi * sq + i) * sk + j);
          if (mask_kind == 3) acc = double(float(acc) + float(mask.get_f64((bi * sq + i) * sk + j)));
          if (causal && j > i + (sk - sq)) acc = -INFINITY;
          s[size_t(j)] = acc;
          mx = std::max(mx, acc);
        }
        double sum = 0;
        for (double& x : s) sum += (x = mx == -INFINITY ? 0.0 : std::exp(x - mx));  // fully masked: zeros
        const double inv = sum > 0 ? 1 / sum : 0.0;
        for (int64_t c = 0; c < d; ++c) {
          double o = 0;
          for (int64_t j = 0; j < sk; ++j) o += s[size_t(j)] * inv * v.get_f64(((bi * sk + j) * hk + hi / kv_group) * d + c);
          want[size_t(((bi * sq + i) * h + hi) * d + c)] = o;
        }
      }
  const Tensor qkv = pack_qkv(dt, packed, q, k, v, b * sq, h * d);
  const size_t out_bytes = size_t(b * sq * h * d) * ir::size_of(dt);
  Dev dq(q), dk(k), dv(v), dqkv(qkv), dm(mask), dout(out_bytes);
  native::AttentionArgs a = attention_args(dt, packed, b, h, sq, sk, d, kv_group, dq, dk, dv, dqkv, dout);
  a.scale = scale;
  a.causal = causal;
  if (mask_kind) {
    a.mask = dm.p;
    a.mask_dtype = mask_dt;
    a.mask_true = static_cast<float>(mask_true), a.mask_false = static_cast<float>(mask_false);
    if (mask_kind == 1) a.mask_stride[0] = sk;
    if (mask_kind >= 2) a.mask_stride[0] = sq * sk, a.mask_stride[2] = sk;
  }
  for (const auto& [kernel, kname] : kernels) {
    const std::string full = name + "_" + kname;
    if (!selected(full)) continue;
    a.kernel = kernel;
    run_and_check(full, a, dout, out_bytes, {b, sq, h, d}, want);
  }
}

// Additive biases, long key sequences and padded head dims: Q, K, V and O as [b, s, h, d] (packed:
// one [b, s, 3, h, d] tensor), against a double reference on the rounded inputs, output poisoned
// first, the automatic kernel (every block shape forced too where d is 32 or 64 and the fast path
// runs). bias: 0 none; 1 a relative position bias [h, sq, sk] (strides {0, sq·sk, sk}); 2 a window
// shift mask [nW, sq, sk] of 0 and -100 wrapping over the batch (b % nW, mask_batch_inner = nW);
// 3 their sum [nW, h, sq, sk], wrapping, as fuse_attention folds Swin's two constants. The bias is in
// bias_dt (f32 or the dtype).
void attention_bias_case(DType dt, int64_t b, int64_t h, int64_t sq, int64_t sk, int64_t d, int bias, bool packed = false,
                         int64_t nw = 1, DType bias_dt = DType::f32, bool causal = false) {
  const std::string name = "AttentionBias_" + dts(dt) + "_b" + std::to_string(b) + "h" + std::to_string(h) + "_q" +
                           std::to_string(sq) + "k" + std::to_string(sk) + "d" + std::to_string(d) + "_bias" +
                           std::to_string(bias) + (bias ? dts(bias_dt) : "") + (nw > 1 ? "_nw" + std::to_string(nw) : "") +
                           (packed ? "_packedqkv" : "") + (causal ? "_causal" : "");
  const bool fast = d == 32 || d == 64;
  bool any = false;
  for (const auto& kn : native::kAttentionKernelNames) any = any || selected(name + "_" + kn.second);
  if (!any) return;
  const Tensor q = rnd(dt, {b, sq, h, d}), k = rnd(dt, {b, sk, h, d}), v = rnd(dt, {b, sk, h, d});
  const Tensor rel = rnd(bias_dt, {h, sq, sk}, -2, 2);
  Tensor shift(bias_dt, {nw, sq, sk});
  for (int64_t i = 0; i < shift.numel(); ++i) shift.set_f64(i, (i * 7919 + i / sk * 13) % 5 == 0 ? -100.0 : 0.0);
  Tensor sum(bias_dt, {nw, h, sq, sk});
  for (int64_t w = 0; w < nw; ++w)
    for (int64_t hi = 0; hi < h; ++hi)
      for (int64_t e = 0; e < sq * sk; ++e)
        sum.set_f64((w * h + hi) * sq * sk + e, rel.get_f64(hi * sq * sk + e) + shift.get_f64(w * sq * sk + e));
  const Tensor& mask = bias == 1 ? rel : bias == 2 ? shift : sum;
  auto addend = [&](int64_t bi, int64_t hi, int64_t i, int64_t j) -> double {
    const int64_t w = bi % nw;
    if (bias == 1) return rel.get_f64((hi * sq + i) * sk + j);
    if (bias == 2) return shift.get_f64((w * sq + i) * sk + j);
    if (bias == 3) return sum.get_f64(((w * h + hi) * sq + i) * sk + j);
    return 0.0;
  };
  const float scale = 1.f / std::sqrt(float(d));
  std::vector<double> want(static_cast<size_t>(b * sq * h * d));
  std::vector<double> s(static_cast<size_t>(sk));
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t hi = 0; hi < h; ++hi)
      for (int64_t i = 0; i < sq; ++i) {
        double mx = -INFINITY;
        for (int64_t j = 0; j < sk; ++j) {
          double acc = 0;
          for (int64_t c = 0; c < d; ++c)
            acc += q.get_f64(((bi * sq + i) * h + hi) * d + c) * k.get_f64(((bi * sk + j) * h + hi) * d + c);
          acc = acc * scale + addend(bi, hi, i, j);
          if (causal && j > i + (sk - sq)) acc = -INFINITY;
          s[size_t(j)] = acc;
          mx = std::max(mx, acc);
        }
        double total = 0;
        for (double& x : s) total += (x = mx == -INFINITY ? 0.0 : std::exp(x - mx));
        for (int64_t c = 0; c < d; ++c) {
          double o = 0;
          for (int64_t j = 0; j < sk; ++j) o += s[size_t(j)] * v.get_f64(((bi * sk + j) * h + hi) * d + c);
          want[size_t(((bi * sq + i) * h + hi) * d + c)] = total > 0 ? o / total : 0.0;
        }
      }
  const Tensor qkv = pack_qkv(dt, packed, q, k, v, b * sq, h * d);
  const size_t out_bytes = size_t(b * sq * h * d) * ir::size_of(dt);
  Dev dq(q), dk(k), dv(v), dqkv(qkv), dm(mask), dout(out_bytes);
  native::AttentionArgs a = attention_args(dt, packed, b, h, sq, sk, d, 1, dq, dk, dv, dqkv, dout);
  a.scale = scale;
  a.causal = causal;
  if (bias) {
    a.mask = dm.p;
    a.mask_dtype = bias_dt;
    if (bias == 1) a.mask_stride[0] = 0, a.mask_stride[1] = sq * sk, a.mask_stride[2] = sk;
    if (bias == 2) a.mask_stride[0] = sq * sk, a.mask_stride[1] = 0, a.mask_stride[2] = sk;
    if (bias == 3) a.mask_stride[0] = h * sq * sk, a.mask_stride[1] = sq * sk, a.mask_stride[2] = sk;
    if (bias >= 2) a.mask_batch_inner = nw;
  }
  for (const auto& [kernel, kname] : native::kAttentionKernelNames) {
    const std::string full = name + "_" + kname;
    if (!selected(full) || (!fast && kernel != native::AttentionKernel::automatic)) continue;
    a.kernel = kernel;
    run_and_check(full, a, dout, out_bytes, {b, sq, h, d}, want);
  }
}

void attention_tests() {
  for (DType dt : {DType::f16, DType::bf16}) {
    // Whisper-tiny's encoder (1500 keys, 24 key tiles), ViT at 384 px (577), a relative bias on both.
    attention_bias_case(dt, 1, 2, 1500, 1500, 64, 0);
    attention_bias_case(dt, 1, 2, 577, 577, 64, 1);
    attention_bias_case(dt, 2, 3, 100, 1500, 32, 1, false, 1, dt, true);
    // MobileViT-S's head dims (36, 48, 60: padded in shared memory), packed Q/K/V only 8-byte aligned.
    for (int64_t d : {36, 48, 60}) {
      attention_bias_case(dt, 4, 4, 256, 256, d, 0, true);
      attention_bias_case(dt, 2, 4, 77, 77, d, 1, false, 1, dt);
    }
    // Other multiples of 4 up to 128; a 1500-key sequence with a padded head dim.
    for (int64_t d : {4, 40, 52, 80, 100, 128}) attention_bias_case(dt, 2, 3, 77, 100, d, 1);
    attention_bias_case(dt, 1, 2, 1500, 1500, 48, 0, false, 1, DType::f32, true);
    // Swin's shifted windows: 2 images x 4 windows of 49 tokens, 3 heads of 32; the shift mask alone
    // and summed with the relative position bias, wrapping every 4 windows; in f32 and the dtype.
    attention_bias_case(dt, 8, 3, 49, 49, 32, 2, false, 4);
    attention_bias_case(dt, 8, 3, 49, 49, 32, 3, false, 4);
    attention_bias_case(dt, 8, 3, 49, 49, 32, 3, true, 4, dt);
    attention_bias_case(dt, 8, 3, 49, 49, 36, 3, false, 4);
    attention_case(dt, 2, 12, 128, 128, 1, false);  // BERT-base, padding mask
    attention_case(dt, 1, 12, 77, 77, 0, true);     // GPT-2, causal, ragged tile
    attention_case(dt, 3, 2, 9, 300, 2, false);     // more keys than queries, [B,1,Q,K] mask
    attention_case(dt, 1, 2, 130, 512, 1, true);    // eight key tiles
    attention_case(dt, 2, 2, 16, 16, 1, false, 32);  // head dim 32 (the bundled bert_tiny)
    // Grids the automatic choice gives other block shapes (every case also runs each shape forced).
    attention_case(dt, 8, 12, 128, 128, 2, true);
    attention_case(dt, 24, 12, 100, 100, 1, false);
    // More 128-row blocks than two an SM: automatic takes four warps of 32 rows (no mask; below, the
    // i64 [B,1,1,K] mask at batch 32), here causal, ragged, head dim 32.
    attention_case(dt, 24, 12, 100, 100, 0, true, 32);
    // BERT-base as the fused plan runs it: packed Q/K/V, a [B,1,1,K] mask, and HF's expanded
    // [B,1,Q,K] one in f32 and in the tensor dtype.
    attention_case(dt, 1, 12, 128, 128, 1, false, 64, true);
    attention_case(dt, 2, 12, 128, 128, 2, false, 64, true);
    attention_case(dt, 2, 12, 128, 128, 2, false, 64, true, dt);
    // Split keys over four tiles with causal tile skipping, per-row mask, packed Q/K/V.
    attention_case(dt, 1, 4, 200, 200, 2, true, 64, true);
    // Causal with fewer keys than queries: the first 16 rows see no key and give zeros.
    attention_case(dt, 2, 3, 40, 24, 1, true);
    // Head dim 32 with ragged rows and keys; a per-row mask in the tensor dtype.
    attention_case(dt, 6, 12, 100, 100, 1, false, 32);
    attention_case(dt, 6, 12, 100, 100, 2, true, 64, false, dt);
    attention_case(dt, 24, 12, 100, 100, 2, true, 32);
    // One query and one key; 512 of each with a per-row mask (eight tiles, buffers reused).
    attention_case(dt, 4, 12, 1, 1, 1, false);
    attention_case(dt, 2, 3, 1, 1, 2, true, 32);
    attention_case(dt, 1, 2, 512, 512, 2, false);
    attention_case(dt, 1, 2, 512, 512, 2, true, 32, false, dt);
    // Odd mask strides (77 keys): one element a load on every step, not only the ragged one.
    attention_case(dt, 2, 3, 77, 77, 2, false);
    attention_case(dt, 2, 4, 64, 77, 1, false, 64, false, dt);
    // finfo(f32).min and -inf rows (HF's padding mask), with and without causal.
    attention_case(dt, 2, 3, 40, 100, 3, false);
    attention_case(dt, 2, 3, 100, 100, 3, true, 32);
    // The i64 attention_mask read as a select (BERT-base's fused plan at batch 1 and 32; its rows of
    // zeros are all finfo.min and average V), other select values, odd strides, causal, head dim 32.
    // [B,1,1,K] masks take the shared-row kernel unless SABRE_ATTN_BCAST=0 (run the test both ways).
    attention_case(dt, 1, 12, 128, 128, 1, false, 64, true, DType::i64);
    attention_case(dt, 32, 12, 128, 128, 1, false, 64, true, DType::i64);
    attention_case(dt, 2, 3, 40, 100, 2, false, 64, false, DType::i64);
    attention_case(dt, 2, 4, 64, 77, 1, false, 64, false, DType::i64, 0.5, -2);
    attention_case(dt, 3, 2, 77, 77, 2, true, 32, false, DType::i64, 1, -10000);
    // [B,1,1,K] i64 (one load shared by a thread's two rows) with causal rows that see no key.
    attention_case(dt, 2, 3, 40, 24, 1, true, 64, false, DType::i64);
    // Grouped-query attention (Llama's 16 query heads on 4 K/V heads: a causal [B,1,Q,K] f32 mask),
    // multi-query (one K/V head), and without a mask at ViT's 197 and CLIP's 50 keys, head dim 32.
    attention_case(dt, 2, 16, 100, 100, 2, true, 64, false, DType::f32, 0, -3.4028234663852886e38, 4);
    attention_case(dt, 3, 8, 77, 77, 0, true, 32, false, DType::f32, 0, -3.4028234663852886e38, 8);
    attention_case(dt, 24, 16, 128, 128, 0, false, 64, false, DType::f32, 0, -3.4028234663852886e38, 2);
    attention_case(dt, 2, 12, 197, 197, 0, false);
    attention_case(dt, 3, 12, 50, 50, 0, false, 32);
  }
  // Refusals: head dim 50 (not a multiple of 4), too many keys, a stride not a multiple of 4, an
  // unknown kernel, heads that are no multiple of the K/V group.
  native::AttentionArgs a;
  a.q = a.k = a.v = reinterpret_cast<void*>(256);
  a.sq = a.sk = 16;
  for (int i = 0; i < 3; ++i) a.q_stride[i] = a.k_stride[i] = a.v_stride[i] = 64;
  int refused = 0;
  a.d = 50;
  refused += native::attention(a, nullptr) == cudaErrorNotSupported;
  a.d = 64, a.sk = native::kMaxAttentionKeys + 1;
  refused += native::attention(a, nullptr) == cudaErrorNotSupported;
  a.sk = 16, a.q_stride[2] = 62;
  refused += native::attention(a, nullptr) == cudaErrorNotSupported;
  a.q_stride[2] = 64, a.kernel = static_cast<native::AttentionKernel>(99);
  refused += native::attention(a, nullptr) == cudaErrorInvalidValue;
  a.kernel = native::AttentionKernel::automatic, a.h = 6, a.kv_group = 4;
  refused += native::attention(a, nullptr) == cudaErrorNotSupported;
  std::printf("%s %-66s %d of 5 refused\n", refused == 5 ? "PASS" : "FAIL", "Attention_refusals", refused);
  refused == 5 ? ++g_pass : ++g_fail;
}

}  // namespace sabre::native_test
