// emit_steps: every node that runs becomes plan steps (fused nodes through their fusion's step),
// in topological order, the model's inputs and outputs bound around them. Anything the runtime
// cannot run is collected and reported all at once. The simple ops are emitted here; fused steps,
// GEMM and conv regions in emit_*.cpp. Tests: tests/unit/codegen_lower_test.cpp,
// tests/unit/codegen_plan_interp_test.cpp
#include <algorithm>
#include <map>

#include "codegen/passes/emit.h"
#include "codegen/passes/pass.h"

namespace sabre::codegen::passes {
namespace {

void emit_gather(LowerContext& cx, Node* n) {
  int64_t axis = norm_axis(n->attr_int("axis", 0), n->input(0)->shape().size());
  if (auto it = cx.range_gather.find(n); it != cx.range_gather.end()) {
    auto [start, limit, delta] = it->second;
    int x = cx.tensor(n->input(0));
    cx.step(n->name() + " (gather of a range)", {x}, {cx.define(n->output(0))},
            runtime::SliceParams{.starts = param_numbers({start}), .ends = pdims({limit}), .axes = param_numbers({axis}),
                                 .steps = param_numbers({delta})});
    return;
  }
  int x = cx.tensor(n->input(0));
  int idx = cx.tensor(n->input(1));
  cx.step(n->name(), {x, idx}, {cx.define(n->output(0))}, runtime::GatherParams{.axis = ParamDim(axis)});
}

void emit_slice(LowerContext& cx, Node* n) {
  auto starts = cx.dims_of(n->input(1)), ends = cx.dims_of(n->input(2));
  std::optional<std::vector<Dim>> axes, steps;
  if (n->input(3)) axes = cx.dims_of(n->input(3));
  if (n->input(4)) steps = cx.dims_of(n->input(4));
  if (!starts || !ends || (n->input(3) && !axes) || (n->input(4) && !steps))
    throw UnsupportedError(where(n) + ": starts/ends/axes/steps computed from data at run time");
  const size_t rank = n->input(0)->shape().size();
  std::vector<Dim> ax;
  if (axes) {
    for (const Dim& a : *axes) {
      if (!a.is_static()) throw UnsupportedError(where(n) + ": symbolic axes");
      ax.push_back(Dim(norm_axis(a.value(), rank)));
    }
  } else {
    for (size_t i = 0; i < starts->size(); ++i) ax.push_back(Dim(static_cast<int64_t>(i)));
  }
  std::vector<Dim> st = steps ? *steps : std::vector<Dim>(starts->size(), Dim(1));
  int x = cx.tensor(n->input(0));
  cx.step(n->name(), {x}, {cx.define(n->output(0))},
          runtime::SliceParams{.starts = pdims(*starts), .ends = pdims(*ends), .axes = pdims(ax), .steps = pdims(st)});
}

// Depthwise conv -> native "depthwise_conv": NHWC in and out, the filter [C,1,R,S] as [R,S,C].
// Other grouped convs -> native "grouped_conv", the same kernel entry with `k` and `groups`: the
// filter [K,C/G,R,S] as [R,S,C/G,K] (for depthwise the same bytes as [R,S,C]).

// MaxPool / AveragePool, NCHW or (inside a conv region) NHWC, explicit pads only.
void emit_pool(LowerContext& cx, Node* n) {
  if (n->input(0)->shape().size() != 4) throw UnsupportedError(where(n) + ": only 2-D pooling (NCHW) runs on the GPU");
  if (n->attr_string("auto_pad", "NOTSET") != "NOTSET" && n->attr_string("auto_pad", "NOTSET") != "VALID")
    throw UnsupportedError(where(n) + ": auto_pad " + n->attr_string("auto_pad", "") + " (export with explicit pads)");
  if (n->num_outputs() > 1 && (!n->output(1)->users().empty() || cx.g.is_graph_output(n->output(1))))
    throw UnsupportedError(where(n) + ": the Indices output is not produced on the GPU");
  auto pads = n->attr_ints("pads", {0, 0, 0, 0});
  const bool in_nhwc = cx.nhwc.count(n->output(0)) != 0;
  int x = in_nhwc ? cx.tensor_nhwc(n->input(0)) : cx.tensor(n->input(0));
  cx.step(n->name(), {x}, {cx.define(n->output(0))},
          runtime::Pool2dParams{.kind = n->op() == "MaxPool" ? runtime::PoolMode::max : runtime::PoolMode::average,
                                .layout = in_nhwc ? runtime::TensorLayout::nhwc : runtime::TensorLayout::nchw,
                                .kernel = param_numbers(n->attr_ints("kernel_shape")),
                                .stride = param_numbers(n->attr_ints("strides", {1, 1})),
                                .dilation = param_numbers(n->attr_ints("dilations", {1, 1})),
                                .pads = param_numbers(pads),
                                .ceil_mode = n->attr_int("ceil_mode", 0) != 0,
                                .count_include_pad = n->attr_int("count_include_pad", 0) != 0});
}

// Expand: a strided read with stride 0 on the broadcast dims.
void emit_expand(LowerContext& cx, Node* n) {
  const auto& in = n->input(0)->shape();
  const auto& out = n->output(0)->shape();
  std::vector<Dim> strides(out.size(), Dim(0));
  const std::vector<Dim> dense = contiguous_strides(in);
  for (size_t i = 0; i < in.size(); ++i) {
    size_t ii = in.size() - 1 - i, oi = out.size() - 1 - i;
    strides[oi] = (in[ii] == Dim(1) && out[oi] != Dim(1)) ? Dim(0) : dense[ii];
  }
  int x = cx.tensor(n->input(0));
  cx.step(n->name() + " (expand)", {x}, {cx.define(n->output(0))},
          runtime::StridedCopyParams{.offset = ParamDim::text("0"), .strides = pdims(strides)});
}

// out = x read through `strides` into a dense temporary of `view` dims (a finer view of the output's
// elements), then the output as a reshape of it: one strided_copy kernel for the data movement ops
// whose output index splits into the input's (DepthToSpace, SpaceToDepth, Tile).
void emit_view_copy(LowerContext& cx, Node* n, const std::vector<Dim>& view, const std::vector<Dim>& strides) {
  int x = cx.tensor(n->input(0));
  runtime::TensorInfo t;
  t.name = n->output(0)->name() + ".view";
  t.dtype = cx.storage(n->output(0)->dtype());
  t.kind = runtime::TensorKind::activation;
  for (const Dim& d : view) t.shape.push_back(runtime::DimExpr::parse(d.str()));
  const int tmp = cx.add_tensor(std::move(t));
  cx.step(n->name(), {x}, {tmp}, runtime::StridedCopyParams{.offset = ParamDim::text("0"), .strides = pdims(strides)});
  cx.step(n->name() + " (view)", {tmp}, {cx.define(n->output(0))}, runtime::ReshapeParams{});
}

// DepthToSpace / SpaceToDepth on NCHW with blocksize b, as a view copy (ONNX's reshape-transpose-reshape).
void emit_depth_space(LowerContext& cx, Node* n) {
  const auto& sh = n->input(0)->shape();
  if (sh.size() != 4) throw UnsupportedError(where(n) + ": only 4-D (NCHW) inputs run on the GPU");
  const Dim b(n->attr_int("blocksize"));
  const Dim &N = sh[0], &C = sh[1], &H = sh[2], &W = sh[3];
  const Dim HW = H * W, CHW = C * HW;
  if (n->op() == "DepthToSpace") {
    // output viewed as [N, C/b², H, b(i), W, b(j)]; DCR reads channel (i*b + j)*C/b² + c, CRD c*b² + i*b + j
    const Dim Co = n->output(0)->shape()[1];
    const bool crd = n->attr_string("mode", "DCR") == "CRD";
    emit_view_copy(cx, n, {N, Co, H, b, W, b},
                   crd ? std::vector<Dim>{CHW, b * b * HW, W, b * HW, Dim(1), HW}
                       : std::vector<Dim>{CHW, HW, W, b * Co * HW, Dim(1), Co * HW});
    return;
  }
  // SpaceToDepth: output viewed as [N, b(i), b(j), C, H/b, W/b], reading x[n, c, h*b + i, w*b + j]
  const Dim Ho = n->output(0)->shape()[2], Wo = n->output(0)->shape()[3];
  emit_view_copy(cx, n, {N, b, b, C, Ho, Wo}, {CHW, W, Dim(1), HW, b * W, b});
}

// Tile with known repeats: the output viewed as [r0, d0, r1, d1, ...], stride 0 over each r.
void emit_tile(LowerContext& cx, Node* n) {
  auto reps = cx.dims_of(n->input(1));
  if (!reps) throw UnsupportedError(where(n) + ": repeats computed from data at run time");
  const auto& in = n->input(0)->shape();
  const std::vector<Dim> dense = contiguous_strides(in);
  std::vector<Dim> view, strides;
  for (size_t i = 0; i < in.size(); ++i) {
    view.insert(view.end(), {(*reps)[i], in[i]});
    strides.insert(strides.end(), {Dim(0), dense[i]});
  }
  emit_view_copy(cx, n, view, strides);
}

// GatherElements, Trilu and CumSum: one native step each (backends/native/index_ops.h).
void emit_index_op(LowerContext& cx, Node* n) {
  const std::string& op = n->op();
  const size_t rank = n->input(0)->shape().size();
  int x = cx.tensor(n->input(0));
  if (op == "GatherElements") {
    const int64_t axis = norm_axis(n->attr_int("axis", 0), rank);
    int idx = cx.tensor(n->input(1));
    cx.step(n->name(), {x, idx}, {cx.define(n->output(0))}, runtime::GatherElementsParams{.axis = axis});
    return;
  }
  if (op == "Trilu") {
    int64_t k = 0;  // a constant (negative ones too)
    if (n->num_inputs() > 1 && n->input(1)) {
      if (!scalar_constant(n->input(1))) throw UnsupportedError(where(n) + ": k computed from data at run time");
      k = n->input(1)->constant().to_i64_vector().at(0);
    }
    cx.step(n->name(), {x}, {cx.define(n->output(0))},
            runtime::TriluParams{.k = k, .upper = n->attr_int("upper", 1) != 0});
    return;
  }
  // CumSum: the axis is a scalar input.
  if (!scalar_constant(n->input(1))) throw UnsupportedError(where(n) + ": axis computed from data at run time");
  const int64_t axis = n->input(1)->constant().to_i64_vector().at(0);
  const DType dt = n->input(0)->dtype();
  if (!ir::is_float(dt) && dt != DType::i32 && dt != DType::i64)
    throw UnsupportedError(where(n) + ": dtype " + std::string(ir::name(dt)) + " (the GPU takes floats, i32 and i64)");
  cx.step(n->name(), {x}, {cx.define(n->output(0))},
          runtime::CumsumParams{.axis = norm_axis(axis, rank),
                                .exclusive = n->attr_int("exclusive", 0) != 0,
                                .reverse = n->attr_int("reverse", 0) != 0});
}

// ArgMax / ArgMin: a reduce step writing int64 indices along the one axis.
void emit_arg_reduce(LowerContext& cx, Node* n) {
  if (!ir::is_float(n->input(0)->dtype()))
    throw UnsupportedError(where(n) + ": only float inputs run on the GPU (this one is " +
                           std::string(ir::name(n->input(0)->dtype())) + ")");
  const int64_t axis = norm_axis(n->attr_int("axis", 0), n->input(0)->shape().size());
  const bool last = n->attr_int("select_last_index", 0) != 0;
  using runtime::ReduceKind;
  const ReduceKind kind = n->op() == "ArgMax" ? (last ? ReduceKind::argmax_last : ReduceKind::argmax)
                                              : (last ? ReduceKind::argmin_last : ReduceKind::argmin);
  int x = cx.tensor(n->input(0));
  cx.step(n->name(), {x}, {cx.define(n->output(0))}, runtime::ReduceParams{.kind = kind, .axes = param_numbers({axis})});
}

void emit_reduce(LowerContext& cx, Node* n) {
  using runtime::ReduceKind;
  static const std::map<std::string, ReduceKind> kinds = {
      {"ReduceSum", ReduceKind::sum},        {"ReduceMean", ReduceKind::mean},
      {"ReduceMax", ReduceKind::max},        {"ReduceMin", ReduceKind::min},
      {"ReduceProd", ReduceKind::prod},      {"ReduceSumSquare", ReduceKind::sum_square},
      {"ReduceL1", ReduceKind::l1},          {"ReduceL2", ReduceKind::l2},
      {"ReduceLogSum", ReduceKind::log_sum}, {"ReduceLogSumExp", ReduceKind::log_sum_exp}};
  auto k = kinds.find(n->op());
  if (k == kinds.end()) throw UnsupportedError(where(n) + ": no GPU lowering for this op");
  std::vector<int64_t> axes;
  if (n->input(1)) {
    if (!n->input(1)->is_constant()) throw UnsupportedError(where(n) + ": axes computed at run time");
    for (int64_t a : n->input(1)->constant().to_i64_vector())
      axes.push_back(norm_axis(a, n->input(0)->shape().size()));
  }
  if (axes.empty() && n->attr_int("noop_with_empty_axes", 0)) {
    int x = cx.tensor(n->input(0));
    cx.step(n->name(), {x}, {cx.define(n->output(0))}, runtime::CopyParams{});
    return;
  }
  const bool nhwc = cx.nhwc_reads.count(n) != 0;  // assign_layouts: reduce the NHWC bytes, axes remapped
  if (nhwc) {
    for (int64_t& a : axes) a = kNhwcPos[a];
    std::sort(axes.begin(), axes.end());
  }
  int x = nhwc ? cx.tensor_nhwc(n->input(0)) : cx.tensor(n->input(0));
  cx.step(n->name(), {x}, {cx.define(n->output(0))}, runtime::ReduceParams{.kind = k->second, .axes = param_numbers(axes)});
}


}  // namespace

void emit_node(LowerContext& cx, Node* n) {
  const std::string& op = n->op();
  // First: an attention step can end at its ·V product (a region or a MatMul) as well as at a view.
  if (cx.attention.count(n)) return emit_attention(cx, n, cx.attention.at(n));
  if (n->domain() == "sabre" && op == "Composite") return emit_composite(cx, n);
  if (op == "MatMul" || op == "Gemm" || op == "MatMulTransB")
    return cx.unsupported(n, "a GEMM the CUTLASS pattern table refused (`sabre partition` says why); sabre has no "
                          "other GEMM path");
  if (n->domain() != "") return cx.unsupported(n, "no GPU lowering for domain '" + n->domain() + "'");
  if (is_ew(n)) {
    auto it = cx.group_of.find(n);
    // A Cast between float types that store alike (f32 -> f32 softmax casts in an f16 plan): a view.
    if (op == "Cast" && it != cx.group_of.end() && cx.groups[it->second].nodes.size() == 1 &&
        cx.storage(n->input(0)->dtype()) == cx.storage(n->output(0)->dtype())) {
      cx.step(n->name(), {cx.tensor(n->input(0))}, {cx.define(n->output(0))}, runtime::ReshapeParams{});
      return;
    }
    if (it != cx.group_of.end() && cx.groups[it->second].nodes.back() == n) emit_group(cx, cx.groups[it->second]);
    return;
  }
  if (is_view(op)) {
    int x = cx.tensor(n->input(0));
    cx.step(n->name(), {x}, {cx.define(n->output(0))}, runtime::ReshapeParams{});
    return;
  }
  if (op == "Softmax" || op == "LogSoftmax") return emit_softmax(cx, n);
  if (op == "LayerNormalization") return emit_layernorm(cx, n);
  if (op == "Transpose") {
    if (auto it = cx.layout_views.find(n); it != cx.layout_views.end()) {  // assign_layouts: no step
      const int x = cx.nhwc.count(it->second) ? cx.tensor_nhwc(it->second) : cx.tensor(it->second);
      if (x < 0) throw AfterRefusal{};
      cx.tid[n->output(0)] = x;
      return;
    }
    std::vector<int64_t> perm = transpose_perm(n);
    const bool nhwc = cx.nhwc.count(n->input(0)) != 0;
    if (nhwc)  // read the NHWC bytes in place
      for (int64_t& d : perm) d = kNhwcPos[d];
    int x = nhwc ? cx.tensor_nhwc(n->input(0)) : cx.tensor(n->input(0));
    cx.step(n->name(), {x}, {cx.define(n->output(0))}, runtime::PermuteParams{.perm = param_numbers(perm)});
    return;
  }
  if (op == "Gather") return emit_gather(cx, n);
  if (op == "Slice") return emit_slice(cx, n);
  if (op == "Concat") {
    std::vector<int> ins;
    for (Value* v : n->inputs()) ins.push_back(cx.tensor(v));
    int64_t axis = norm_axis(n->attr_int("axis"), n->output(0)->shape().size());
    cx.step(n->name(), ins, {cx.define(n->output(0))}, runtime::ConcatParams{.axis = ParamDim(axis)});
    return;
  }
  if (op == "Split") {
    int x = cx.tensor(n->input(0));
    std::vector<int> outs;
    for (Value* v : n->outputs()) outs.push_back(cx.define(v));
    int64_t axis = norm_axis(n->attr_int("axis", 0), n->input(0)->shape().size());
    cx.step(n->name(), {x}, outs, runtime::SplitParams{.axis = ParamDim(axis)});
    return;
  }
  if (op == "Expand") return emit_expand(cx, n);
  if (op == "DepthToSpace" || op == "SpaceToDepth") return emit_depth_space(cx, n);
  if (op == "Tile") return emit_tile(cx, n);
  if (op.rfind("Reduce", 0) == 0) return emit_reduce(cx, n);
  if (op == "ArgMax" || op == "ArgMin") return emit_arg_reduce(cx, n);
  if (op == "GatherElements" || op == "Trilu" || op == "CumSum") return emit_index_op(cx, n);
  if (op == "MaxPool" || op == "AveragePool") return emit_pool(cx, n);
  if (op == "GlobalAveragePool" && n->input(0)->shape().size() == 4) {
    const bool in_nhwc = cx.nhwc.count(n->output(0)) != 0;
    int x = in_nhwc ? cx.tensor_nhwc(n->input(0)) : cx.tensor(n->input(0));
    cx.step(n->name(), {x}, {cx.define(n->output(0))},
            runtime::GlobalAveragePoolParams{.layout = in_nhwc ? runtime::TensorLayout::nhwc : runtime::TensorLayout::nchw});
    return;
  }
  if (op == "GlobalMaxPool" || (op == "GlobalAveragePool" && n->input(0)->shape().size() != 4)) {
    std::vector<int64_t> axes;  // every spatial axis: the output is [N, C, 1, ...]
    for (size_t a = 2; a < n->input(0)->shape().size(); ++a) axes.push_back(static_cast<int64_t>(a));
    int x = cx.tensor(n->input(0));
    cx.step(n->name(), {x}, {cx.define(n->output(0))},
            runtime::ReduceParams{.kind = op == "GlobalMaxPool" ? runtime::ReduceKind::max : runtime::ReduceKind::mean,
                                  .axes = param_numbers(axes)});
    return;
  }
  if (op == "Conv") {
    if (!cx.o.pick_conv) return cx.unsupported(n, "conv offload is not implemented yet (issue 7)");
    if (n->attr_int("group", 1) != 1) {
      if (std::string why = depthwise_problem(n); !why.empty()) return cx.unsupported(n, why);
      return emit_depthwise(cx, n);
    }
    return cx.unsupported(n, "a Conv the CUTLASS pattern table refused (`sabre partition` says why); sabre has no "
                          "other conv path");
  }
  if (op == "Range" && cx.range_operands(n)) {
    auto [start, delta] = *cx.range_operands(n);
    cx.step(n->name(), {}, {cx.define(n->output(0))}, runtime::IotaParams{.start = pdim(start), .delta = pdim(delta)});
    return;
  }
  if (op == "Shape" || op == "Range" || op == "ConstantOfShape" || op == "Size")
    return cx.unsupported(n, "a shape computation whose value the model uses as data at run time");
  cx.unsupported(n, "no GPU lowering for this op");
}


PassResult emit_steps(LowerContext& cx) {
  if (!cx.unsupported_nodes.empty()) cx.fail();
  for (const Value* v : cx.g.inputs()) cx.bind_input(v);
  int emitted = 0;  // nodes that became steps (fused ones through the node that emits the fusion)
  for (Node* n : cx.order) {
    if (!cx.needed.count(n) || cx.absorbed.count(n)) continue;
    const size_t before = cx.unsupported_nodes.size();
    ++emitted;
    try {
      emit_node(cx, n);
    } catch (const UnsupportedError& e) {
      cx.unsupported_nodes.push_back(e.what());
    } catch (const AfterRefusal&) {
      // reads a value whose producer was refused: that refusal is the error
    }
    // Keep going after a refusal so that one error lists every unsupported node.
    if (cx.unsupported_nodes.size() != before)
      for (const Value* v : n->outputs())
        if (!cx.tid.count(v)) cx.tid[v] = -1;
  }
  if (!cx.unsupported_nodes.empty()) cx.fail();
  for (const Value* v : cx.g.outputs()) cx.bind_output(v);
  cx.emitted = true;
  cx.out.plan.symbols = cx.symbols;
  cx.out.layout_permutes = cx.permutes;
  cx.out.im2col_convs = cx.im2col;
  cx.out.stem_convs = cx.stem_conv;
  cx.out.pointwise_convs = cx.pointwise;
  const int permutes = cx.permutes, im2col = cx.im2col, stem_conv = cx.stem_conv, pointwise = cx.pointwise;
  if (!cx.nhwc.empty())
    cx.out.notes.push_back("NHWC inside conv regions: " + std::to_string(cx.nhwc.size()) + " values stored NHWC, " +
                           std::to_string(permutes) + " NCHW<->NHWC conversion" + (permutes == 1 ? "" : "s") +
                           " at the region edges" +
                           (im2col ? ", " + std::to_string(im2col) + " conv" + (im2col == 1 ? "" : "s") +
                                         " reading NCHW through im2col" : "") +
                           (stem_conv ? ", " + std::to_string(stem_conv) + " conv" + (stem_conv == 1 ? "" : "s") +
                                            " reading NCHW in one stem_conv kernel" : "") +
                           (pointwise ? ", " + std::to_string(pointwise) + " 1x1 conv" + (pointwise == 1 ? "" : "s") +
                                            " run as GEMMs (--no-pointwise-gemm: conv kernels)" : ""));
  PassResult r;
  r.fired = emitted;
  return r;
}

}  // namespace sabre::codegen::passes
