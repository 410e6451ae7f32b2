// emit_steps: every node that runs becomes plan steps (fused nodes through their fusion's step),
// in topological order, the model's inputs and outputs bound around them. Anything the runtime
// cannot run is collected and reported all at once. The simple ops are emitted here; fused steps,
// GEMM and conv regions in emit_*.cpp. Tests: tests/unit/codegen_lower_test.cpp,
// tests/unit/codegen_plan_interp_test.cpp
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
          runtime::Pool2dParams{.kind = n->op() == "MaxPool" ? "max" : "average",
                                .layout = in_nhwc ? "nhwc" : "nchw",
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

void emit_reduce(LowerContext& cx, Node* n) {
  static const std::map<std::string, std::string> kinds = {
      {"ReduceSum", "sum"}, {"ReduceMean", "mean"}, {"ReduceMax", "max"},
      {"ReduceMin", "min"}, {"ReduceProd", "prod"}, {"ReduceSumSquare", "sum_square"}};
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
  int x = cx.tensor(n->input(0));
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
  if (op == "Softmax") return emit_softmax(cx, n);
  if (op == "LayerNormalization") return emit_layernorm(cx, n);
  if (op == "Transpose") {
    std::vector<int64_t> perm = n->attr_ints("perm", {});
    if (perm.empty())
      for (int64_t i = static_cast<int64_t>(n->input(0)->shape().size()) - 1; i >= 0; --i) perm.push_back(i);
    int x = cx.tensor(n->input(0));
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
  if (op.rfind("Reduce", 0) == 0) return emit_reduce(cx, n);
  if (op == "MaxPool" || op == "AveragePool") return emit_pool(cx, n);
  if (op == "GlobalAveragePool" && n->input(0)->shape().size() == 4) {
    const bool in_nhwc = cx.nhwc.count(n->output(0)) != 0;
    int x = in_nhwc ? cx.tensor_nhwc(n->input(0)) : cx.tensor(n->input(0));
    cx.step(n->name(), {x}, {cx.define(n->output(0))},
            runtime::GlobalAveragePoolParams{.layout = in_nhwc ? "nhwc" : "nchw"});
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
