// Native kernel GPU test (native_kernels_test.cpp runs it): softmax and log-softmax, LayerNorm,
// the embedding sum with LayerNorm, and the reductions.
#include <cuda_runtime.h>

#include <deque>

#include "native_kernels_test.h"

namespace sabre::native_test {

// ---- softmax -------------------------------------------------------------------------------
// x to y, q rows of `cols` in each of the b·h blocks (b and h default to 1).
native::SoftmaxArgs softmax_args(DType dt, const Dev& dx, const Dev& dy, int64_t q, int64_t cols) {
  native::SoftmaxArgs a;
  a.dtype = dt;
  a.x = dx.p;
  a.y = dy.p;
  a.q = q;
  a.cols = cols;
  return a;
}

void softmax_case(DType dt, int64_t b, int64_t h, int64_t q, int64_t k, int mask_kind, float scale, bool causal) {
  // mask_kind: 0 none, 1 [B,1,1,K], 2 [B,1,Q,K], 3 [Q,K]
  const std::string name = "Softmax_" + dts(dt) + "_" + shp({b, h, q, k}) + "_mask" + std::to_string(mask_kind) +
                           (causal ? "_causal" : "") + (scale != 1.f ? "_scaled" : "");
  if (!selected(name)) return;
  const Tensor x = rnd(dt, {b, h, q, k}, -4, 4);
  std::vector<int64_t> mdims = mask_kind == 1 ? std::vector<int64_t>{b, 1, 1, k}
                               : mask_kind == 2 ? std::vector<int64_t>{b, 1, q, k}
                                                : std::vector<int64_t>{q, k};
  Tensor mask = rnd(dt, mdims, -3, 0);
  // A padding-style mask: some positions get -10000 like BERT's extended attention mask.
  for (int64_t i = 0; i < mask.numel(); i += 7) mask.set_f64(i, -10000.0);
  // Reference graph: Softmax(x * scale + mask [+ causal -inf]).
  Tensor logits = ref_op("Mul", {x, Tensor::scalar_f32(scale).cast(dt)})[0];
  if (mask_kind) logits = ref_op("Add", {logits, mask})[0];
  if (causal) {
    Tensor c(dt, {q, k});
    for (int64_t i = 0; i < q; ++i)
      for (int64_t j = 0; j < k; ++j) c.set_f64(i * k + j, j > i + (k - q) ? -INFINITY : 0.0);
    logits = ref_op("Add", {logits, c})[0];
  }
  const Tensor want = ref_op("Softmax", {logits}, {{"axis", int64_t{-1}}})[0];
  Dev dx(x), dm(mask), dy(x.nbytes());
  native::SoftmaxArgs a = softmax_args(dt, dx, dy, q, k);
  a.b = b;
  a.h = h;
  a.scale = scale;
  a.causal = causal;
  if (mask_kind) {
    a.mask = dm.p;
    a.mask_dtype = dt;
    if (mask_kind == 1) a.mask_stride[0] = k;
    if (mask_kind == 2) a.mask_stride[0] = q * k, a.mask_stride[2] = k;
    if (mask_kind == 3) a.mask_stride[2] = k;
  }
  CK(native::softmax(a, nullptr));
  check(name, dy.get(dt, {b, h, q, k}), want);
}

// LogSoftmax (SoftmaxArgs::log) on each kernel path: logits wide enough that the smallest
// probabilities underflow f16, so the log of a rounded probability would be -inf.
void log_softmax_case(DType dt, int64_t rows, int64_t k) {
  const std::string name = "LogSoftmax_" + dts(dt) + "_" + shp({rows, k});
  if (!selected(name)) return;
  const Tensor x = rnd(dt, {rows, k}, -30, 30);
  const Tensor want = ref_op("LogSoftmax", {x}, {{"axis", int64_t{-1}}})[0];
  Dev dx(x), dy(x.nbytes());
  native::SoftmaxArgs a = softmax_args(dt, dx, dy, rows, k);
  a.log = true;
  CK(native::softmax(a, nullptr));
  check(name, dy.get(dt, {rows, k}), want);
}

void softmax_tests() {
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (int64_t k : {5, 1000, 4096, 20000}) log_softmax_case(dt, 3, k);
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    softmax_case(dt, 2, 12, 128, 128, 1, 0.125f, false);  // BERT
    softmax_case(dt, 2, 3, 37, 37, 0, 1.f, true);         // causal, odd
    softmax_case(dt, 2, 2, 9, 50, 2, 0.3f, false);
    softmax_case(dt, 1, 4, 16, 16, 3, 1.f, true);
    softmax_case(dt, 1, 1, 3, 1000, 0, 1.f, false);   // scalar path, warp per row
    softmax_case(dt, 1, 1, 4, 4096, 0, 1.f, false);   // block per row
    softmax_case(dt, 1, 1, 2, 20000, 0, 1.f, false);  // looping kernel
    softmax_case(dt, 1, 1, 5, 3, 0, 2.f, false);      // tiny rows
  }
}

// ---- layernorm -----------------------------------------------------------------------------
void layernorm_case(DType dt, int64_t rows, int64_t cols, bool residual, bool beta, bool misalign = false,
                    bool f32_copy = false) {
  const std::string name = "LayerNorm_" + dts(dt) + "_" + shp({rows, cols}) + (residual ? "_residual" : "") +
                           (beta ? "" : "_nobeta") + (misalign ? "_misaligned" : "") + (f32_copy ? "_f32copy" : "");
  if (!selected(name)) return;
  const Tensor x = rnd(dt, {rows, cols}, -3, 5), r = rnd(dt, {rows, cols}), g = rnd(dt, {cols}, 0.5, 1.5),
               bt = rnd(dt, {cols});
  const Tensor s = residual ? ref_op("Add", {x, r})[0] : x;
  std::vector<Tensor> lin = {s, g};
  if (beta) lin.push_back(bt);
  const Tensor want = ref_op("LayerNormalization", lin, {{"axis", int64_t{-1}}, {"epsilon", 1e-5}})[0];
  const size_t es = ir::size_of(dt), sh = misalign ? es : 0;
  Dev dx(x.nbytes() + 16), dr(r), dg(g), db(bt), dy(x.nbytes() + 16), ds(x.nbytes());
  CK(cudaMemcpy(static_cast<char*>(dx.p) + sh, x.bytes(), x.nbytes(), cudaMemcpyHostToDevice));
  native::LayerNormArgs a;
  a.dtype = dt;
  a.x = static_cast<char*>(dx.p) + sh;
  a.residual = residual ? dr.p : nullptr;
  a.gamma = dg.p;
  a.beta = beta ? db.p : nullptr;
  a.y = static_cast<char*>(dy.p) + sh;
  a.sum_out = residual ? ds.p : nullptr;
  Dev d32(static_cast<size_t>(rows * cols) * 4);
  if (f32_copy) a.y_f32 = static_cast<float*>(d32.p);
  a.rows = rows;
  a.cols = cols;
  a.eps = 1e-5f;
  CK(native::layernorm(a, nullptr));
  CK(cudaDeviceSynchronize());
  Tensor got(dt, {rows, cols});
  CK(cudaMemcpy(got.mutable_bytes(), a.y, got.nbytes(), cudaMemcpyDeviceToHost));
  check(name, got, want);
  if (residual) check(name + "_sum_out", ds.get(dt, {rows, cols}), s);
  if (f32_copy) check(name + "_copy", d32.get(DType::f32, {rows, cols}), got.cast(DType::f32));  // y as stored
}

void layernorm_tests() {
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    layernorm_case(dt, 256, 768, true, true);   // BERT (batch*seq, 768)
    layernorm_case(dt, 7, 13, false, true);     // odd
    layernorm_case(dt, 7, 768, true, false, true);
    layernorm_case(dt, 64, 3072, false, true);  // block per row
    layernorm_case(dt, 3, 20000, true, true);   // looping kernel
    // Hidden sizes off the 16-byte vector: 1000 (8-byte vectors for f16/bf16, 16 for f32), 770
    // (one element for f16/bf16, 8-byte vectors for f32), 37 rows of 40 (8-lane groups, 4 rows a warp).
    layernorm_case(dt, 33, 1000, true, true);
    layernorm_case(dt, 5, 770, true, true);
    layernorm_case(dt, 37, 40, false, true);
    // Chunk counts that round up to a compiled NCH: 1280 halves (5 -> 6 per lane), 4800 (3 -> 4 per thread of a block).
    layernorm_case(dt, 64, 1280, true, true);
    layernorm_case(dt, 9, 4800, true, true);
  }
  layernorm_case(DType::f16, 4096, 3072, true, true);  // large rows
  // BERT-base at batch 1 and 32 (seq 128): a row per warp, 1 warp per block at 128 rows, 4 at 4096;
  // 1001 rows leave the last block partly empty.
  for (DType dt : {DType::f16, DType::bf16}) {
    layernorm_case(dt, 128, 768, true, true);
    layernorm_case(dt, 128, 768, false, true);
    layernorm_case(dt, 4096, 768, true, true);
    layernorm_case(dt, 1001, 768, true, false);
    // The f32 copy of y (a model output): registers, one-element loads, the looping kernel.
    layernorm_case(dt, 128, 768, true, true, false, true);
    layernorm_case(dt, 4096, 768, true, true, false, true);
    layernorm_case(dt, 5, 770, false, true, false, true);
    layernorm_case(dt, 3, 20000, true, true, false, true);
  }
}

// ---- embedding sum + layernorm --------------------------------------------------------------
// BERT's embeddings: word ids (i64, one negative and one past the table: the last row and zeros),
// token type ids (i32), position ids read in place from a [1, 512] arange buffer at `pos_off` with
// step `pos_step` and stride 0 over the batch. Expected: the sum in f32 on the host, the reference
// LayerNormalization over it, cast to dt.
void embed_ln_case(DType dt, int64_t batch, int64_t seq, int64_t cols, int terms, int64_t pos_off = 0,
                   int64_t pos_step = 1, bool beta = true) {
  const std::string name = "EmbedLayerNorm_" + dts(dt) + "_" + shp({batch, seq, cols}) + "_t" + std::to_string(terms) +
                           (pos_off || pos_step != 1 ? "_pos" + std::to_string(pos_off) + "s" + std::to_string(pos_step) : "") +
                           (beta ? "" : "_nobeta");
  if (!selected(name)) return;
  const int64_t rows = batch * seq, vocab[3] = {1000, 2, 512};
  std::vector<Tensor> tables, ids;
  for (int t = 0; t < terms; ++t) tables.push_back(rnd(dt, {vocab[t], cols}));
  Tensor word(DType::i64, {batch, seq}), type(DType::i32, {batch, seq}), pos(DType::i64, {1, 512});
  for (int64_t i = 0; i < rows; ++i) {
    word.set_f64(i, static_cast<double>(g_rng() % 1000));
    type.set_f64(i, static_cast<double>(g_rng() % 2));
  }
  word.set_f64(0, -1);
  if (rows > 1) word.set_f64(1, 5000);
  for (int64_t i = 0; i < 512; ++i) pos.set_f64(i, static_cast<double>(i));
  const Tensor* id_t[3] = {&word, &type, &pos};
  auto id_at = [&](int t, int64_t b, int64_t q) -> int64_t {
    if (t == 2) return static_cast<int64_t>(pos.get_f64(pos_off + q * pos_step));
    return static_cast<int64_t>(id_t[t]->get_f64(b * seq + q));
  };
  Tensor sum(DType::f32, {rows, cols});
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t q = 0; q < seq; ++q)
      for (int64_t c = 0; c < cols; ++c) {
        double v = 0;
        for (int t = 0; t < terms; ++t) {
          int64_t id = id_at(t, b, q);
          if (id < 0) id += vocab[t];
          if (id >= 0 && id < vocab[t]) v += tables[t].get_f64(id * cols + c);
        }
        sum.set_f64((b * seq + q) * cols + c, v);
      }
  const Tensor g = rnd(dt, {cols}, 0.5, 1.5), bt = rnd(dt, {cols});
  std::vector<Tensor> lin = {sum, g.cast(DType::f32)};
  if (beta) lin.push_back(bt.cast(DType::f32));
  const Tensor want = ref_op("LayerNormalization", lin, {{"axis", int64_t{-1}}, {"epsilon", 1e-5}})[0].cast(dt);
  std::deque<Dev> dt_tab, dt_ids;  // Dev cannot move; a deque never does
  for (int t = 0; t < terms; ++t) {
    dt_tab.emplace_back(tables[t]);
    dt_ids.emplace_back(*id_t[t]);
  }
  Dev dg(g), db(bt), dy(static_cast<size_t>(rows * cols) * ir::size_of(dt));
  native::EmbedLayerNormArgs a;
  a.dtype = dt;
  a.rank = 2;
  a.row_dims[0] = batch;
  a.row_dims[1] = seq;
  a.cols = cols;
  a.num_terms = terms;
  for (int t = 0; t < terms; ++t) {
    native::EmbedTerm& m = a.terms[t];
    m.table = dt_tab[t].p;
    m.ids = dt_ids[t].p;
    m.ids_dtype = id_t[t]->dtype();
    m.vocab = vocab[t];
    m.offset = t == 2 ? pos_off : 0;
    m.strides[0] = t == 2 ? 0 : seq;
    m.strides[1] = t == 2 ? pos_step : 1;
  }
  a.gamma = dg.p;
  a.beta = beta ? db.p : nullptr;
  a.y = dy.p;
  a.eps = 1e-5f;
  CK(native::embed_layernorm(a, nullptr));
  check(name, dy.get(dt, {rows, cols}), want);
}

void embed_ln_tests() {
  for (DType dt : {DType::f16, DType::bf16}) {
    embed_ln_case(dt, 1, 128, 768, 3);          // BERT-base at batch 1: a warp per row, one per block
    embed_ln_case(dt, 32, 128, 768, 3, 3, 2);   // batch 32: 4 warps a block; a strided, offset position read
    embed_ln_case(dt, 2, 7, 768, 2, 0, 1, false);
  }
  embed_ln_case(DType::f32, 3, 5, 768, 3);
  embed_ln_case(DType::f16, 1, 7, 770, 3);   // one element a lane (770 halves are not 16-byte rows)
  embed_ln_case(DType::f16, 2, 3, 3000, 3);  // block per row, the tables read on every pass
  embed_ln_case(DType::f16, 4, 33, 64, 3);   // a chunk for the first 8 lanes only
  embed_ln_case(DType::f16, 2, 9, 1280, 3);  // 5 chunks a lane, compiled as 6
  // Refusals: no terms; a term without a table.
  const std::string name = "EmbedLayerNorm_refusals";
  if (!selected(name)) return;
  native::EmbedLayerNormArgs a;
  a.rank = 1;
  a.cols = 8;
  Dev d(64);
  a.gamma = a.y = d.p;
  const bool no_terms = native::embed_layernorm(a, nullptr) == cudaErrorInvalidValue &&
                        native::last_error_message().find("terms") != std::string::npos;
  a.num_terms = 1;
  a.terms[0].ids = d.p;
  a.terms[0].vocab = 4;
  const bool no_table = native::embed_layernorm(a, nullptr) == cudaErrorInvalidValue &&
                        native::last_error_message().find("table") != std::string::npos;
  if (no_terms && no_table) {
    std::printf("ok   %-60s\n", name.c_str());
    ++g_pass;
  } else {
    std::printf("FAIL %-60s no_terms %d no_table %d\n", name.c_str(), no_terms, no_table);
    ++g_fail;
  }
}

// ---- reductions ----------------------------------------------------------------------------
void reduce_case(native::ReduceOp op, const std::string& onnx, DType dt, std::vector<int64_t> dims,
                 std::vector<int64_t> axes) {
  const std::string name = "Reduce_" + onnx + "_" + dts(dt) + "_" + shp(dims) + "_axes" + shp(axes);
  if (!selected(name)) return;
  // prod near 1 (no overflow), log_sum of positives; log_sum_exp far above exp's f32 range (88), so
  // only a max-shifted sum stays finite.
  const Tensor x = op == native::ReduceOp::prod      ? rnd(dt, dims, 0.8, 1.25)
                   : op == native::ReduceOp::log_sum ? rnd(dt, dims, 0.1, 2.0)
                   : op == native::ReduceOp::log_sum_exp ? rnd(dt, dims, 90.0, 100.0)
                                                          : rnd(dt, dims);
  const Tensor want = ref_op(onnx, {x, i64s(axes)}, {{"keepdims", int64_t{0}}})[0];
  Dev dx(x), dy(want.nbytes());
  CK(native::reduce(op, dt, dx.p, dims, axes, dy.p, nullptr));
  check(name, dy.get(dt, want.dims()), want);
}

// ArgMax / ArgMin: inputs rounded to a few values, so ties decide between first and last index.
void arg_case(bool is_max, bool last, DType dt, std::vector<int64_t> dims, int64_t axis) {
  const std::string onnx = is_max ? "ArgMax" : "ArgMin";
  const std::string name = "Reduce_" + onnx + (last ? "_last" : "") + "_" + dts(dt) + "_" + shp(dims) + "_axis" +
                           std::to_string(axis);
  if (!selected(name)) return;
  Tensor x = rnd(dt, dims, -3, 3);
  for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, std::round(x.get_f64(i)));
  const Tensor want = ref_op(onnx, {x}, {{"axis", axis}, {"keepdims", int64_t{0}}, {"select_last_index", int64_t{last}}})[0];
  using R = native::ReduceOp;
  const R op = is_max ? (last ? R::argmax_last : R::argmax) : (last ? R::argmin_last : R::argmin);
  Dev dx(x), dy(want.nbytes());
  CK(native::reduce(op, dt, dx.p, dims, {axis}, dy.p, nullptr));
  check(name, dy.get(DType::i64, want.dims()), want);
}

void reduce_tests() {
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (bool is_max : {true, false})
      for (bool last : {false, true}) {
        arg_case(is_max, last, dt, {8, 16, 33}, 2);
        arg_case(is_max, last, dt, {8, 16, 33}, 0);
        arg_case(is_max, last, dt, {5, 1, 7}, 1);  // a size-1 axis: every index 0
      }
  using R = native::ReduceOp;
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    reduce_case(R::mean, "ReduceMean", dt, {8, 16, 33}, {2});
    reduce_case(R::sum, "ReduceSum", dt, {8, 16, 33}, {0});
    reduce_case(R::max, "ReduceMax", dt, {8, 16, 33}, {0, 2});
    reduce_case(R::min, "ReduceMin", dt, {8, 16, 33}, {1});
    reduce_case(R::sum_square, "ReduceSumSquare", dt, {5, 7, 9, 11}, {1, 3});
    reduce_case(R::prod, "ReduceProd", dt, {6, 40}, {1});
    reduce_case(R::mean, "ReduceMean", dt, {256, 768}, {-1});
    reduce_case(R::sum, "ReduceSum", dt, {3, 5, 7}, {0, 1, 2});
    for (const std::vector<int64_t>& axes : {std::vector<int64_t>{2}, std::vector<int64_t>{0, 2}}) {  // warp, thread per output
      reduce_case(R::l1, "ReduceL1", dt, {8, 16, 33}, axes);
      reduce_case(R::l2, "ReduceL2", dt, {8, 16, 33}, axes);
      reduce_case(R::log_sum, "ReduceLogSum", dt, {8, 16, 33}, axes);
      reduce_case(R::log_sum_exp, "ReduceLogSumExp", dt, {8, 16, 33}, axes);
    }
  }
}

}  // namespace sabre::native_test
