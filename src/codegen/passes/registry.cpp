// The lowering's passes in order, and the readable dump of the lowering state after any of them.
#include "codegen/passes/pass.h"

#include "ir/printer.h"

namespace sabre::codegen::passes {

const std::vector<Pass>& lowering_passes() {
  static const std::vector<Pass> passes = {
      {"bind_symbols", bind_symbols},
      {"fuse_row_gather_gemm", fuse_row_gather_gemm},
      {"fuse_softmax", fuse_softmax},
      {"fuse_embed_layernorm", fuse_embed_layernorm},
      {"fuse_layernorm_residual", fuse_layernorm_residual},
      {"slice_range_gather", slice_range_gather},
      {"fuse_depthwise_activation", fuse_depthwise_activation},
      {"fuse_attention", fuse_attention},
      {"fuse_attention_mask", fuse_attention_mask},
      {"eliminate_dead_code", eliminate_dead_code},
      {"group_elementwise", group_elementwise},
      {"fuse_se_scale", fuse_se_scale},
      {"assign_layouts", assign_layouts},
      {"emit_steps", emit_steps},
  };
  return passes;
}

std::string pass_names() {
  std::string s;
  for (const Pass& p : lowering_passes()) s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}

namespace {

std::string val(const Value* v) { return v ? "%" + v->name() : "_"; }

std::string fnum(double v) { return ir::format_double(v); }

// What the passes so far decided about `n`, "" where nothing.
std::string decisions(LowerContext& cx, const Node* n) {
  std::vector<std::string> d;
  if (cx.absorbed.count(n)) d.push_back("absorbed");
  if (auto it = cx.row_gather.find(n); it != cx.row_gather.end())
    d.push_back("A read in place: row " + std::to_string(it->second.row) + " of " + val(it->second.x));
  if (auto it = cx.softmax.find(n); it != cx.softmax.end() && !cx.absorbed.count(n)) {
    const SoftmaxFusion& f = it->second;
    std::string s = "softmax of " + val(f.x) + " scale " + fnum(f.scale);
    if (f.mask) s += " + mask " + val(f.mask);
    if (f.causal) s += ", causal";
    if (!f.absorbed.empty()) s += " (" + std::to_string(f.absorbed.size()) + " absorbed)";
    d.push_back(s);
  }
  if (auto it = cx.embedding.find(n); it != cx.embedding.end()) {
    std::string s = "embed_layernorm of";
    for (const EmbeddingTerm& t : it->second)
      s += " " + val(t.table) + "[" + val(t.ids) + " at " + t.offset.str() + " strides " + ir::str(t.strides) + "]";
    d.push_back(s);
  }
  if (auto it = cx.ln_residual.find(n); it != cx.ln_residual.end())
    d.push_back("layernorm of " + val(it->second->input(0)) + " + residual " + val(it->second->input(1)));
  if (auto it = cx.range_gather.find(n); it != cx.range_gather.end())
    d.push_back("slice " + std::to_string(it->second.start) + ":" + it->second.limit.str() + ":" +
                std::to_string(it->second.delta));
  if (auto it = cx.dw_act.find(n); it != cx.dw_act.end()) {
    const DwActivation& a = it->second;
    if (a.act == native::ConvAct::none)
      d.push_back("clamp [" + fnum(a.lo) + ", " + fnum(a.hi) + "] of " + a.node->name());
    else
      d.push_back(std::string(native::conv_act_name(a.act)) + " alpha " + fnum(a.alpha) + " beta " + fnum(a.beta) +
                  " of " + a.node->name());
  }
  if (auto it = cx.attention.find(n); it != cx.attention.end()) {
    const AttentionFusion& a = it->second;
    std::string s = "attention q " + val(a.q) + " k " + val(a.k) + " v " + val(a.v) + " heads " +
                    std::to_string(a.heads) + " d " + std::to_string(a.d) + " scale " + fnum(a.scale);
    if (a.kv_group > 1) s += " kv_group " + std::to_string(a.kv_group);
    if (a.packed) s += " packed " + val(a.packed);
    if (a.offset[0] != Dim(0) || a.offset[1] != Dim(0) || a.offset[2] != Dim(0))
      s += " offsets " + a.offset[0].str() + "," + a.offset[1].str() + "," + a.offset[2].str();
    auto strides = [](const Dim (&d)[3]) { return "[" + d[0].str() + "," + d[1].str() + "," + d[2].str() + "]"; };
    s += " strides q " + strides(a.q_stride) + " k " + strides(a.k_stride) + " v " + strides(a.v_stride) + " o " +
         strides(a.o_stride);
    if (a.mask) s += " mask " + val(a.mask) + (a.select ? " selecting " + fnum(a.mask_true) + "/" + fnum(a.mask_false) : "");
    if (a.folded_mask) s += " mask folded " + ir::str(std::vector<Dim>(a.folded_mask->dims().begin(), a.folded_mask->dims().end()));
    if (a.mask_strided) s += " mask strides " + strides(a.mask_stride);
    if (a.mask_batch_inner) s += " wrapping every " + std::to_string(a.mask_batch_inner) + " (outer " + a.mask_batch_outer.str() + ")";
    if (a.causal) s += ", causal";
    d.push_back(s);
  }
  if (auto it = cx.se_scale.find(n); it != cx.se_scale.end())
    d.push_back("SE scale of " + val(it->second.first) + " by gate " + val(it->second.second));
  if (!cx.needed.empty() && !cx.needed.count(n) && !cx.absorbed.count(n)) d.push_back("dead");
  if (auto it = cx.group_of.find(n); it != cx.group_of.end())
    d.push_back("ew group " + std::to_string(it->second) + " (" + std::to_string(cx.groups[it->second].nodes.size()) +
                " nodes)");
  if (auto it = cx.layout_views.find(n); it != cx.layout_views.end())
    d.push_back("view of " + val(it->second) + "'s tensor (no step)");
  if (cx.nhwc_reads.count(n)) d.push_back("reads " + val(n->input(0)) + " NHWC in place");
  for (const Value* v : n->outputs()) {
    if (cx.nhwc.count(v)) d.push_back(val(v) + " NHWC");
    if (cx.materialized.count(v)) d.push_back(val(v) + " filled from its dims");
  }
  std::string s;
  for (const auto& x : d) s += (s.empty() ? "" : "; ") + x;
  return s;
}

}  // namespace

std::string dump(LowerContext& cx, std::string_view pass, const PassResult& r) {
  std::string s = "# lowering after " + std::string(pass) + ": ";
  if (!r.skipped.empty()) s += "skipped (" + r.skipped + ")";
  else if (r.fired) s += "fired " + std::to_string(r.fired);
  else if (r.refused.empty()) s += "nothing to do";
  if (!r.refused.empty()) s += std::string(r.fired ? ", " : "") + "refused " + std::to_string(r.refused.size());
  s += "\n";
  for (const Refusal& f : r.refused) s += "#   refused at " + f.node + ": " + f.reason + "\n";
  for (const Node* n : cx.order) {
    std::string line = "  ";
    for (size_t i = 0; i < n->num_outputs(); ++i) line += (i ? ", " : "") + val(n->output(i));
    line += " = " + (n->domain().empty() ? "" : n->domain() + ".") + n->op() + "(";
    for (size_t i = 0; i < n->num_inputs(); ++i) line += (i ? ", " : "") + val(n->input(i));
    line += ") name=\"" + n->name() + "\"";
    if (const std::string d = decisions(cx, n); !d.empty()) line += "  # " + d;
    s += line + "\n";
  }
  if (cx.emitted) {
    const runtime::Plan& p = cx.out.plan;
    for (size_t i = 0; i < p.tensors.size(); ++i) {
      const runtime::TensorInfo& t = p.tensors[i];
      std::string shape;
      for (const auto& d : t.shape) shape += (shape.empty() ? "" : ",") + d.str();
      s += "  t" + std::to_string(i) + " " + runtime::to_string(t.kind) + " " + std::string(ir::name(t.dtype)) + "[" +
           shape + "] \"" + t.name + "\"\n";
    }
    for (size_t i = 0; i < p.steps.size(); ++i) {
      const runtime::Step& st = p.steps[i];
      std::string io;
      for (int x : st.inputs) io += (io.empty() ? "" : ", ") + (x < 0 ? std::string("_") : "t" + std::to_string(x));
      io += ") -> (";
      for (size_t k = 0; k < st.outputs.size(); ++k) io += (k ? ", t" : "t") + std::to_string(st.outputs[k]);
      s += "  step " + std::to_string(i) + " " + st.op + " \"" + st.name + "\" (" + io + ") " + st.params_json().dump() + "\n";
    }
  }
  return s;
}

}  // namespace sabre::codegen::passes
