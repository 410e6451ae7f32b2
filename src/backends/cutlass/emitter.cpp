#include "backends/cutlass/emitter.h"

#include <stdexcept>

#include "backends/cutlass/emit_common.h"
#include "backends/cutlass/kernel_template.h"
#include "backends/registry_text.h"

namespace sabre::cutlass_backend {
namespace {

std::string algebra(const EpilogueSpec& e) {
  std::string inner = "alpha*acc";
  if (e.bias) inner += " + bias[n]";
  if (e.residual == Residual::before_act) inner += " + beta*R";
  std::string out = e.act == Act::none ? inner : std::string(act_name(e.act)) + "(" + inner + ")";
  if (e.residual == Residual::after_act) out += " + beta*R";
  return "D = " + out;
}

std::string i(int v) { return std::to_string(v); }

// Whether the kernel waits on the previous grid (griddepcontrol), so it may be launched with
// programmatic dependent launch: the sm90 data-parallel schedules. CUTLASS 4.2's stream-K scheduler
// does not compile with CUTLASS_ENABLE_GDC_FOR_SM90 (is_last_tile binds a const member to a
// non-const reference), so stream-K and split-K kernels launch without it.
bool uses_pdl(const KernelConfig& c) {
  return c.family == Family::sm90 && (c.schedule == Schedule::coop || c.schedule == Schedule::pingpong);
}

std::string cstr(bool b) { return b ? "true" : "false"; }

// The template values both families' types and the file share: operand types and B's layout.
struct OperandText {
  std::string element_ab, element_d, layout_b, b_dims, b_dims_short, b_inner;
};
OperandText operand_text(const GemmOperands& ops) {
  const bool tn = ops.layout == Layout::tn;
  return {detail::cutlass_elem(ops.ab), detail::cutlass_elem(ops.d), tn ? "ColumnMajor" : "RowMajor",
          tn ? "[n, k]" : "[k, n]",     tn ? "[n,k]" : "[k,n]",        tn ? "k" : "n"};
}

std::string emit_sm90_types(const KernelSpec& s) {
  const KernelConfig& c = s.config;
  const EpilogueSpec& e = s.epi;
  const bool has_c = e.residual != Residual::none;
  const bool pingpong = c.schedule == Schedule::pingpong;
  const bool stream_k = c.schedule == Schedule::streamk || is_split_k(c.schedule);
  const OperandText t = operand_text(s.ops);
  return fill_template(
      "gemm_sm90.cu.in",
      {{"pdl_define", uses_pdl(c) ? fill_template("gemm_sm90_pdl.cu.in", {}) : ""},
       {"element_ab", t.element_ab},
       {"layout_b", t.layout_b},
       {"b_dims", t.b_dims},
       {"b_inner", t.b_inner},
       {"element_d", t.element_d},
       {"element_c", has_c ? "ElementD" : "void"},
       {"element_c_note", has_c ? "C is the residual" : "no source tensor is read"},
       {"alignment", i(c.alignment)},
       {"tile_m", i(c.tile.m)},
       {"tile_n", i(c.tile.n)},
       {"tile_k", i(c.tile.k)},
       {"cluster_m", i(c.cluster_m)},
       {"cluster_n", i(c.cluster_n)},
       {"kernel_schedule", pingpong ? "KernelTmaWarpSpecializedPingpong" : "KernelTmaWarpSpecializedCooperative"},
       {"epilogue_schedule", pingpong ? "TmaWarpSpecialized" : "TmaWarpSpecializedCooperative"},
       {"tile_scheduler", stream_k && !pingpong ? "cutlass::gemm::StreamKScheduler" : "void"},
       {"splits", is_split_k(c.schedule)
                      ? "constexpr int kSplits = " + i(c.splits) + ";  // CTAs per output tile, each over 1/kSplits of K\n"
                      : ""},
       {"act_functors", detail::act_functor_definitions(e.act, s.ops.d)},
       {"algebra", algebra(e)},
       {"fusion_op", detail::sm90_fusion_op(e, "ElementD", "bias[n]")}});
}

std::string emit_sm90_args(const KernelSpec& s) {
  const KernelConfig& c = s.config;
  const bool has_c = s.epi.residual != Residual::none;
  std::string split_k;
  if (is_split_k(c.schedule)) {
    // Left to itself the stream-K scheduler picks a decomposition by its own heuristic (our stream-K
    // kernels ran 2-3x slower than cuBLASLt at small M); split-K asks for one. can_implement,
    // workspace_size and run all build their arguments here, so the workspace reported and checked
    // is the one kSplits-way split-K uses (a partial tile and a lock per output tile).
    const bool deterministic = c.schedule == Schedule::splitk;
    split_k = fill_template(
        "gemm_sm90_splitk.cu.in",
        {{"reduction_note",
          deterministic ? "  // Deterministic: the splits add in K order, so results are bitwise the same run to run.\n"
                        : "  // Nondeterministic: once the first split has stored its partial, the middle splits add\n"
                          "  // theirs atomically as they arrive; the f32 sums may differ in the last bits run to run.\n"},
         {"reduction_mode", deterministic ? "Deterministic" : "Nondeterministic"}});
  }
  return fill_template(
      "gemm_sm90_args.cu.in",
      {{"b_stride", s.ops.layout == Layout::tn ? "int64_t(p->ldb), cute::Int<1>{}" : "cute::Int<1>{}, int64_t(p->ldb)"},
       {"ld_c", has_c ? "ldr" : "ldd"},
       {"stride_c", has_c ? "stride_r" : "stride_d"},
       {"c_ptr", has_c ? "static_cast<const ElementD*>(p->residual)" : "nullptr"},
       {"split_k", split_k},
       {"epilogue_arguments", detail::sm90_epilogue_arguments(s.epi, "ElementD")}});
}

std::string emit_sm80_types(const KernelSpec& s) {
  const KernelConfig& c = s.config;
  const EpilogueSpec& e = s.epi;
  const bool f32 = s.ops.ab == Elem::f32;
  const std::string act = detail::cutlass_act(e.act);
  std::string epilogue;
  if (e.residual == Residual::none) {
    epilogue = fill_template(
        "gemm_sm80_linear.cu.in",
        {{"bias_note", e.bias ? "// C is the bias read with row stride 0: D = act(alpha*acc + C), no beta.\n" : ""},
         {"act", act},
         {"scale_type", e.bias ? "NoBetaScaling" : "OnlyAlphaScaling"}});
  } else {
    // Z = UnaryOp(BinaryOp(ActivationOp(alpha*acc + bias), beta*R))
    const bool before = e.residual == Residual::before_act;
    const std::string identity = "cutlass::epilogue::thread::Identity";
    epilogue = fill_template("gemm_sm80_residual.cu.in",
                             {{"activation", before ? identity : act}, {"unary", before ? act : identity}});
  }
  const OperandText t = operand_text(s.ops);
  return fill_template(
      "gemm_sm80.cu.in",
      {{"element_ab", t.element_ab},
       {"layout_b", t.layout_b},
       {"b_dims", t.b_dims},
       {"b_inner", t.b_inner},
       {"element_d", t.element_d},
       {"alignment", i(c.alignment)},
       {"tile_m", i(c.tile.m)},
       {"tile_n", i(c.tile.n)},
       {"tile_k", i(c.tile.k)},
       {"warp_m", i(c.warp.m)},
       {"warp_n", i(c.warp.n)},
       {"warp_k", i(c.warp.k)},
       {"instruction_k", f32 ? "8" : "16"},
       {"instruction_note", f32 ? "  // f32 operands run as TF32" : ""},
       {"stages", i(c.stages)},
       {"stages_note", c.stages == 2 ? "  // register-pipelined mainloop: no cp.async, any alignment" : ""},
       {"act_functors", detail::act_functor_definitions(e.act, s.ops.d)},
       {"algebra", algebra(e)},
       {"epilogue", epilogue}});
}

std::string emit_sm80_args(const KernelSpec& s) {
  const EpilogueSpec& e = s.epi;
  std::string args;
  if (e.residual == Residual::none)
    args = fill_template("gemm_sm80_args_linear.cu.in",
                         {{"c_ptr", e.bias ? "p->bias" : "nullptr"},
                          {"stride_c", e.bias ? "/*stride C=bias*/ 0" : "0"},
                          {"ld_c", e.bias ? "/*ldc=bias row broadcast*/ 0" : "0"}});
  else
    args = fill_template("gemm_sm80_args_residual.cu.in",
                         {{"bias_ptr", e.bias ? "const_cast<void*>(p->bias)" : "nullptr"},
                          {"bias_note", e.bias ? "" : "  // broadcast reads zeros"}});
  return fill_template("gemm_sm80_args.cu.in", {{"arguments", args}});
}

}  // namespace

support::KernelSignature kernel_signature(const KernelSpec& s, int target_sm) {
  return {"gemm", std::string(elem_name(s.ops.ab)), std::string(elem_name(s.ops.d)), std::string(layout_name(s.ops.layout)),
          epilogue_name(s.epi), s.config.alignment,
          s.config.family == Family::sm90 ? "sm_90a" : "sm_" + std::to_string(target_sm)};
}

std::vector<std::string> gencode_flags(Family family, int target_sm) {
  if (family == Family::sm90) return {"-gencode", "arch=compute_90a,code=sm_90a"};
  std::string sm = std::to_string(target_sm);
  return {"-gencode", "arch=compute_" + sm + ",code=sm_" + sm};
}

std::string emit_kernel(const KernelSpec& s, int target_sm, const EmitOptions& opts) {
  if (auto why = unsupported_reason(s, target_sm))
    throw std::invalid_argument("kernel " + kernel_name(s) + " cannot run on sm_" + std::to_string(target_sm) + ": " + *why);
  const bool sm90 = s.config.family == Family::sm90;
  const std::string n = symbol_prefix(s);
  const OperandText t = operand_text(s.ops);
  detail::EntryPoints entry{
      .name = n,
      .args_type = "sabre_gemm_args",
      .empty = "p->m == 0 || p->n == 0 || p->batch == 0",
      .op = "Gemm",
      .op_name = "Gemm",
      .refusal_note = "",
      .make_args = detail::MakeArgs::status,
      .launch = detail::adapter_launch("Gemm", "gemm", uses_pdl(s.config)),
      .signature = support::signature_function(n, kernel_signature(s, target_sm)),
      .registry = opts.registry ? backends::one_kernel_registry("sabre_kernel_entry", "sabre_kernel_registry", n,
                                                                /*guarded=*/false)
                                : ""};
  return fill_template("gemm.cu.in",
                       {{"name", kernel_name(s)},
                        {"algebra", algebra(s.epi)},
                        {"b_dims_short", t.b_dims_short},
                        {"b_inner", t.b_inner},
                        {"b_dims", t.b_dims},
                        {"gencode", detail::joined(gencode_flags(s.config.family, target_sm))},
                        {"device_code", sm90 ? emit_sm90_types(s) : emit_sm80_types(s)},
                        {"error_plumbing", detail::host_error_plumbing()},
                        {"alignment", i(s.config.alignment)},
                        {"elem_bytes", i(elem_bytes(s.ops.ab))},
                        {"has_bias", cstr(s.epi.bias)},
                        {"has_residual", cstr(s.epi.residual != Residual::none)},
                        {"pdl_switch", uses_pdl(s.config) ? detail::pdl_switch() : ""},
                        {"make_args", sm90 ? emit_sm90_args(s) : emit_sm80_args(s)},
                        {"entry_points", detail::entry_points(entry)}});
}

}  // namespace sabre::cutlass_backend
