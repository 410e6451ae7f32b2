// Native kernel GPU test (native_kernels_test.cpp runs it): the index ops (GatherElements, Trilu,
// CumSum) and data movement (permute, slice, concat and split, gather, NCHW to NHWC).
#include <cuda_runtime.h>

#include <memory>

#include "backends/native/index_ops.h"
#include "native_kernels_test.h"

namespace sabre::native_test {

// ---- GatherElements, Trilu, CumSum ---------------------------------------------------------
void gather_elements_case(DType dt, std::vector<int64_t> xdims, std::vector<int64_t> idims, int64_t axis, DType it) {
  const std::string name = "GatherElements_" + dts(dt) + "_" + shp(xdims) + "_idx" + shp(idims) + "_axis" +
                           std::to_string(axis) + "_" + dts(it);
  if (!selected(name)) return;
  const Tensor x = rnd(dt, xdims);
  const int64_t ad = xdims[size_t(axis)];
  Tensor idx(it, idims);  // negative indices count from the end
  std::uniform_int_distribution<int64_t> u(-ad, ad - 1);
  for (int64_t i = 0; i < idx.numel(); ++i) idx.set_f64(i, double(u(g_rng)));
  const Tensor want = ref_op("GatherElements", {x, idx}, {{"axis", axis}})[0];
  Dev dx(x), di(idx), dy(want.nbytes());
  CK(native::gather_elements(ir::size_of(dt), dx.p, xdims, axis, di.p, it, idims, dy.p, nullptr));
  check(name, dy.get(dt, idims), want);
}

void trilu_case(DType dt, std::vector<int64_t> dims, int64_t k, bool upper) {
  const std::string name = std::string("Trilu_") + (upper ? "upper_" : "lower_") + dts(dt) + "_" + shp(dims) + "_k" +
                           std::to_string(k);
  if (!selected(name)) return;
  const Tensor x = rnd(dt, dims, 0.5, 2.0);  // no zeros: a kept element reads as kept
  const Tensor want = ref_op("Trilu", {x, Tensor::from_i64({k}, {})}, {{"upper", int64_t{upper}}})[0];
  Dev dx(x), dy(x.nbytes());
  CK(native::trilu(ir::size_of(dt), dx.p, dims, k, upper, dy.p, nullptr));
  check(name, dy.get(dt, dims), want);
}

void cumsum_case(DType dt, std::vector<int64_t> dims, int64_t axis, bool exclusive, bool reverse) {
  const std::string name = "CumSum_" + dts(dt) + "_" + shp(dims) + "_axis" + std::to_string(axis) +
                           (exclusive ? "_exclusive" : "") + (reverse ? "_reverse" : "");
  if (!selected(name)) return;
  const Tensor x = ir::is_float(dt) ? rnd(dt, dims) : rnd(dt, dims, -50, 50);
  const Tensor want = ref_op("CumSum", {x, Tensor::from_i64({axis}, {})},
                             {{"exclusive", int64_t{exclusive}}, {"reverse", int64_t{reverse}}})[0];
  Dev dx(x), dy(x.nbytes());
  CK(native::cumsum(dt, dx.p, dims, axis, exclusive, reverse, dy.p, nullptr));
  check(name, dy.get(dt, dims), want);
}

void index_ops_tests() {
  for (DType dt : {DType::f32, DType::f16, DType::i64, DType::u8}) {
    gather_elements_case(dt, {4, 5, 6}, {4, 3, 6}, 1, DType::i64);
    gather_elements_case(dt, {4, 5, 6}, {2, 5, 7}, 2, DType::i32);  // more indices than x has along the axis
    gather_elements_case(dt, {7, 3}, {9, 3}, 0, DType::i64);
  }
  for (DType dt : {DType::f32, DType::bf16, DType::i32})
    for (int64_t k : {-2, 0, 1, 7}) {
      trilu_case(dt, {2, 5, 7}, k, true);
      trilu_case(dt, {3, 6, 4}, k, false);
    }
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64})
    for (int64_t axis : {0, 2})
      for (bool excl : {false, true})
        for (bool rev : {false, true}) cumsum_case(dt, {6, 5, 40}, axis, excl, rev);
}

// ---- data movement -------------------------------------------------------------------------
void permute_case(DType dt, std::vector<int64_t> dims, std::vector<int64_t> perm) {
  const std::string name = "Permute_" + dts(dt) + "_" + shp(dims) + "_perm" + shp(perm);
  if (!selected(name)) return;
  const Tensor x = rnd(dt, dims);
  const Tensor want = ref_op("Transpose", {x}, {{"perm", perm}})[0];
  Dev dx(x), dy(x.nbytes());
  CK(native::permute(ir::size_of(dt), dx.p, dims, perm, dy.p, nullptr));
  check(name, dy.get(dt, want.dims()), want);
}

void slice_case(DType dt, std::vector<int64_t> dims, std::vector<int64_t> st, std::vector<int64_t> en,
                std::vector<int64_t> ax, std::vector<int64_t> sp) {
  const std::string name = "Slice_" + dts(dt) + "_" + shp(dims) + "_s" + shp(st) + "_e" + shp(en) + "_st" + shp(sp);
  if (!selected(name)) return;
  const Tensor x = rnd(dt, dims);
  const Tensor want = ref_op("Slice", {x, i64s(st), i64s(en), i64s(ax), i64s(sp)})[0];
  const auto od = native::slice_shape(dims, st, en, ax, sp);
  if (od != want.dims()) {
    std::printf("FAIL %s slice_shape %s vs reference %s\n", name.c_str(), shp(od).c_str(), shp(want.dims()).c_str());
    ++g_fail;
    return;
  }
  Dev dx(x), dy(want.nbytes());
  CK(native::slice(ir::size_of(dt), dx.p, dims, st, en, ax, sp, dy.p, nullptr));
  check(name, dy.get(dt, want.dims()), want);
}

void concat_split_case(DType dt, std::vector<std::vector<int64_t>> parts, int64_t axis) {
  std::vector<Tensor> xs;
  std::string sh;
  for (auto& d : parts) {
    xs.push_back(rnd(dt, d));
    sh += "_" + shp(d);
  }
  const std::string cname = "Concat_" + dts(dt) + sh + "_axis" + std::to_string(axis);
  const Tensor want = ref_op("Concat", xs, {{"axis", axis}})[0];
  if (selected(cname)) {
    std::vector<std::unique_ptr<Dev>> d;
    std::vector<const void*> ps;
    for (auto& t : xs) {
      d.push_back(std::make_unique<Dev>(t));
      ps.push_back(d.back()->p);
    }
    Dev dy(want.nbytes());
    CK(native::concat(ir::size_of(dt), ps, parts, axis, dy.p, nullptr));
    check(cname, dy.get(dt, want.dims()), want);
  }
  const std::string sname = "Split_" + dts(dt) + "_" + shp(want.dims()) + "_axis" + std::to_string(axis);
  if (selected(sname)) {
    const int64_t ax = axis < 0 ? axis + static_cast<int64_t>(want.dims().size()) : axis;
    std::vector<int64_t> sizes;
    for (auto& d : parts) sizes.push_back(d[ax]);
    const auto wants = ref_op("Split", {want, i64s(sizes)}, {{"axis", axis}}, parts.size());
    Dev dx(want);
    std::vector<std::unique_ptr<Dev>> d;
    std::vector<void*> ps;
    for (auto& t : wants) {
      d.push_back(std::make_unique<Dev>(t.nbytes()));
      ps.push_back(d.back()->p);
    }
    CK(native::split(ir::size_of(dt), dx.p, want.dims(), axis, sizes, ps, nullptr));
    for (size_t i = 0; i < wants.size(); ++i) check(sname + "_part" + std::to_string(i), d[i]->get(dt, wants[i].dims()), wants[i]);
  }
}

void gather_case(DType dt, std::vector<int64_t> dims, int64_t axis, DType it, std::vector<int64_t> idims) {
  const std::string name = "Gather_" + dts(dt) + "_" + shp(dims) + "_axis" + std::to_string(axis) + "_" + dts(it) +
                           "_idx" + shp(idims);
  if (!selected(name)) return;
  const Tensor x = rnd(dt, dims);
  const int64_t ad = dims[axis < 0 ? axis + dims.size() : axis];
  Tensor idx(it, idims);
  std::uniform_int_distribution<int64_t> u(-ad, ad - 1);
  for (int64_t i = 0; i < idx.numel(); ++i) idx.set_f64(i, static_cast<double>(u(g_rng)));
  const Tensor want = ref_op("Gather", {x, idx}, {{"axis", axis}})[0];
  Dev dx(x), di(idx), dy(want.nbytes());
  CK(native::gather(ir::size_of(dt), dx.p, dims, axis, di.p, it, idx.numel(), dy.p, nullptr));
  check(name, dy.get(dt, want.dims()), want);
}

// nchw_to_nhwc: the reference is Cast (to y's dtype) then Transpose to NHWC, zeros appended as
// channels c..c_pad-1 (the poisoned output shows any the kernel leaves unwritten). misalign
// shifts y one element off 16-byte alignment: the scalar store path.
void nchw_to_nhwc_case(DType xt, DType yt, std::vector<int64_t> dims, int64_t c_pad, bool misalign = false) {
  const std::string name = "NchwToNhwc_" + dts(xt) + "_to_" + dts(yt) + "_" + shp(dims) + "_cpad" +
                           std::to_string(c_pad) + (misalign ? "_misaligned" : "");
  if (!selected(name)) return;
  const int64_t N = dims[0], C = dims[1], H = dims[2], W = dims[3];
  const Tensor x = rnd(xt, dims);
  const Tensor cast = xt == yt ? x : ref_op("Cast", {x}, {{"to", dts(yt)}})[0];
  const Tensor t = to_nhwc(cast);
  Tensor want(yt, {N, H, W, c_pad});
  for (int64_t p = 0; p < N * H * W; ++p)
    for (int64_t c = 0; c < c_pad; ++c) want.set_f64(p * c_pad + c, c < C ? t.get_f64(p * C + c) : 0.0);
  const size_t off = misalign ? ir::size_of(yt) : 0;
  Dev dx(x), dy(want.nbytes() + off);
  void* y = static_cast<char*>(dy.p) + off;
  CK(native::nchw_to_nhwc(xt, yt, dx.p, N, C, H, W, c_pad, y, nullptr));
  CK(cudaDeviceSynchronize());
  Tensor got(yt, want.dims());
  CK(cudaMemcpy(got.mutable_bytes(), y, got.nbytes(), cudaMemcpyDeviceToHost));
  check(name, got, want);
}

void movement_tests() {
  // The ResNet/MobileNet stem: f32 images to f16 NHWC padded to 8 channels (16-byte stores).
  nchw_to_nhwc_case(DType::f32, DType::f16, {2, 3, 224, 224}, 8);
  nchw_to_nhwc_case(DType::f32, DType::f16, {3, 3, 37, 45}, 8);       // W not a multiple of 32
  nchw_to_nhwc_case(DType::f32, DType::f16, {3, 3, 17, 19}, 3);       // no padding: scalar stores
  nchw_to_nhwc_case(DType::f32, DType::f16, {2, 3, 17, 19}, 8, true);  // y off alignment: scalar stores
  nchw_to_nhwc_case(DType::f32, DType::bf16, {2, 5, 9, 70}, 16);
  nchw_to_nhwc_case(DType::f16, DType::f16, {2, 64, 14, 14}, 64);     // two 32-channel tiles
  nchw_to_nhwc_case(DType::f16, DType::f16, {1, 40, 7, 33}, 40);      // tiles of 32 and 8 channels
  nchw_to_nhwc_case(DType::bf16, DType::bf16, {2, 12, 5, 300}, 16);   // rows wider than one tile
  nchw_to_nhwc_case(DType::f32, DType::f32, {2, 3, 10, 11}, 4);       // f32 stores, 4 per vector
  nchw_to_nhwc_case(DType::bf16, DType::f32, {1, 3, 6, 7}, 3);
  nchw_to_nhwc_case(DType::f16, DType::f16, {1, 1, 1, 1}, 8);
  // The few-channel kernel (c_pad one or two 16-byte vectors, y aligned): images over one block's
  // 1024 pixels; f32 into one and two 4-float vectors; c == c_pad; and the tiled fallbacks beside
  // them (c_pad not a multiple of the vector, y off alignment, c_pad over two vectors).
  nchw_to_nhwc_case(DType::f32, DType::f16, {2, 3, 37, 41}, 8);
  nchw_to_nhwc_case(DType::f32, DType::bf16, {2, 3, 37, 41}, 8);
  nchw_to_nhwc_case(DType::f16, DType::f16, {2, 3, 37, 41}, 8);
  nchw_to_nhwc_case(DType::f32, DType::f32, {2, 3, 37, 41}, 4);
  nchw_to_nhwc_case(DType::f32, DType::f32, {2, 3, 37, 41}, 8);
  nchw_to_nhwc_case(DType::f16, DType::f16, {3, 8, 33, 35}, 8);
  nchw_to_nhwc_case(DType::f32, DType::f16, {2, 11, 19, 23}, 16);
  nchw_to_nhwc_case(DType::f32, DType::f16, {2, 3, 37, 41}, 3);
  nchw_to_nhwc_case(DType::f32, DType::f16, {2, 3, 37, 41}, 8, true);
  nchw_to_nhwc_case(DType::f16, DType::f16, {2, 5, 37, 41}, 6);
  nchw_to_nhwc_case(DType::f32, DType::f16, {2, 17, 13, 9}, 24);

  for (DType dt : {DType::f32, DType::f16}) {
    permute_case(dt, {2, 128, 12, 64}, {0, 2, 1, 3});  // BERT heads split: innermost stays
    permute_case(dt, {2, 128, 12, 64}, {0, 2, 3, 1});  // K^T: innermost moves (tiled)
    permute_case(dt, {33, 65}, {1, 0});
    permute_case(dt, {3, 5, 7, 9}, {3, 1, 0, 2});
    permute_case(dt, {4, 6, 10}, {2, 0, 1});
    slice_case(dt, {10, 37}, {1, -30}, {9, 100}, {0, 1}, {2, 3});
    slice_case(dt, {10, 37}, {-1, 20}, {-100, 0}, {1, 0}, {-1, -2});
    slice_case(dt, {4, 16, 768}, {0}, {384}, {2}, {1});
    concat_split_case(dt, {{2, 3, 8}, {2, 5, 8}, {2, 1, 8}}, 1);
    concat_split_case(dt, {{3, 7}, {3, 5}}, -1);
    concat_split_case(dt, {{4, 768}, {8, 768}}, 0);
    gather_case(dt, {1000, 768}, 0, DType::i64, {2, 128});  // embeddings
    gather_case(dt, {4, 10, 6}, 1, DType::i32, {3});
    gather_case(dt, {5, 9}, -1, DType::i64, {2, 2});
  }
  gather_case(DType::i64, {7, 3}, 0, DType::i64, {4});
}

}  // namespace sabre::native_test
