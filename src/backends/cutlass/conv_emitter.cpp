#include "backends/cutlass/conv_emitter.h"

#include <stdexcept>

#include "backends/cutlass/emit_common.h"
#include "backends/cutlass/kernel_template.h"

namespace sabre::cutlass_backend {
namespace {

std::string i(int v) { return std::to_string(v); }

std::string cstr(bool b) { return b ? "true" : "false"; }

// CUTLASS's iterator enumerator for `it`.
std::string iterator_name(ConvIter it) {
  switch (it) {
    case ConvIter::optimized: return "kOptimized";
    case ConvIter::analytic: return "kAnalytic";
    case ConvIter::few_channels: return "kFewChannels";
    case ConvIter::kCount: break;
  }
  throw std::logic_error("conv emitter: ConvIter " + std::to_string(int(it)) + " has no CUTLASS iterator (invariant: kIterNames)");
}

// Parallel split-K: the conv writes f32 partial sums, one slice after another in the workspace, and
// reduce_slices adds them in slice order and applies the epilogue (conv_algebra) with `act`.
std::string parallel_split_k_types(const ConvSpec& s, const std::string& act) {
  const EpilogueSpec& e = s.epi;
  return fill_template(
      "conv_sm80_split_k_parallel.cu.in",
      {{"split_k", i(s.config.split_k)},
       {"act", act},
       {"read_residual",
        e.residual != Residual::none
            ? "  const cutlass::Array<Element, 4> r = *reinterpret_cast<const cutlass::Array<Element, 4>*>(residual + i);\n"
            : ""},
       {"add_bias", e.bias ? " + float(bias[ch + j])" : ""},
       {"apply_epilogue", e.residual == Residual::before_act ? "v = act(v + beta * float(r[j]));"
                          : e.residual == Residual::after_act ? "v = act(v) + beta * float(r[j]);"
                                                              : "v = act(v);"}});
}

// The epilogue and kernel types after the algebra comment, through `ConvKernel`.
std::string epilogue_types(const ConvSpec& s) {
  const ConvConfig& c = s.config;
  const EpilogueSpec& e = s.epi;
  const std::string act = detail::cutlass_act(e.act);
  if (c.split_mode == ConvSplitK::parallel) return parallel_split_k_types(s, act);
  const std::string kernel_arguments = fill_template(
      "conv_sm80_kernel_arguments.cu.in",
      {{"group_mode", c.grouped ? "\n    cutlass::conv::GroupMode::kSingleGroup,  // each CTA's N tile inside one group\n    " : ""}});
  if (e.residual == Residual::none)
    return fill_template(
        "conv_sm80_linear.cu.in",
        {{"bias_note",
          e.bias ? "// The source tensor C is the bias with all strides 0 (one row, broadcast): Y = act(alpha*acc + C).\n" : ""},
         {"act", act},
         {"scale_type", e.bias ? "NoBetaScaling" : "OnlyAlphaScaling"},
         {"default_kernel", c.grouped ? "DefaultConv2dGroupFprop" : "DefaultConv2dFprop"},
         {"kernel_arguments", kernel_arguments}});
  const bool before = e.residual == Residual::before_act;
  const std::string identity = "cutlass::epilogue::thread::Identity";
  return fill_template("conv_sm80_residual.cu.in", {{"activation", before ? identity : act},
                                                    {"unary", before ? act : identity},
                                                    {"kernel_arguments", kernel_arguments}});
}

// make_args' tensors after X and W, and its return.
std::string argument_tensors(const ConvSpec& s) {
  const EpilogueSpec& e = s.epi;
  if (s.config.split_mode == ConvSplitK::parallel) return fill_template("conv_sm80_args_parallel.cu.in", {});
  if (e.residual != Residual::none)
    return fill_template("conv_sm80_args_residual.cu.in",
                         {{"bias_ptr", e.bias ? "const_cast<void*>(p->bias)" : "nullptr"},
                          {"bias_note", e.bias ? "" : "  // broadcast reads zeros"}});
  return fill_template(
      "conv_sm80_args_linear.cu.in",
      {{"c_ptr", e.bias ? "static_cast<Element*>(const_cast<void*>(p->bias))" : "nullptr"},
       {"c_extent", e.bias ? "0, 0, 0, 0" : "int(p->n), int(p->p), int(p->q), int(p->k)"},
       {"c_note", e.bias ? "strides 0: broadcast" : "not read (beta unused)"}});
}

// run's launch: conv_kernel through launch() (PDL), after serial split-K's semaphores are cleared,
// and parallel split-K's reduce_slices after it.
std::string launch(const ConvSpec& s) {
  const bool parallel = s.config.split_mode == ConvSplitK::parallel;
  const bool serial = s.config.split_k > 1 && !parallel;
  return fill_template(
      "conv_sm80_launch.cu.in",
      {{"workspace_alignment_check", parallel ? fill_template("conv_sm80_parallel_workspace.cu.in", {}) : ""},
       {"clear_semaphores",
        serial ? "  SABRE_CHECK_CUDA(cudaMemsetAsync(p->workspace, 0, need, stream));  // the semaphores, one per output tile\n"
               : ""},
       // After serial split-K's memset the kernel waits as it always did (a programmatic edge is between kernels).
       {"conv_pdl", cstr(!serial)},
       {"reduce", parallel ? fill_template("conv_sm80_reduce_launch.cu.in", {}) : ""}});
}

}  // namespace

support::KernelSignature conv_kernel_signature(const ConvSpec& s, int target_sm) {
  const std::string e(elem_name(s.elem));
  // Grouped kernels share the plain ones' signature: both read the same tensors, and what tells them
  // apart (groups) each kernel's refuse() checks at run time.
  return {"conv", e, e, "nhwc", epilogue_name(s.epi), s.config.alignment, "sm_" + std::to_string(target_sm)};
}

std::vector<std::string> conv_gencode_flags(int target_sm) {
  std::string sm = std::to_string(target_sm);
  return {"-gencode", "arch=compute_" + sm + ",code=sm_" + sm};
}

std::string emit_conv_kernel(const ConvSpec& s, int target_sm, const EmitOptions& opts) {
  if (auto why = conv_unsupported_reason(s, target_sm))
    throw std::invalid_argument("kernel " + conv_kernel_name(s) + " cannot run on sm_" + std::to_string(target_sm) +
                                ": " + *why);
  const ConvConfig& c = s.config;
  const EpilogueSpec& e = s.epi;
  const std::string n = conv_kernel_name(s);
  const bool parallel = c.split_mode == ConvSplitK::parallel;
  const bool broadcast = e.residual != Residual::none && !parallel;  // the residual block epilogue
  const bool few = c.iter == ConvIter::few_channels;
  const detail::EntryPoints entry{
      .name = n,
      .args_type = "sabre_conv_args",
      .empty = "p->n == 0",
      .op = "Conv",
      .op_name = "ImplicitGemmConvolution",
      .refusal_note = "",
      .make_args = detail::MakeArgs::value,
      .launch = launch(s),
      .signature = support::signature_function(n, conv_kernel_signature(s, target_sm)),
      .registry = opts.registry ? detail::conv_registry(n) : ""};
  return fill_template(
      "conv_sm80.cu.in",
      {{"name", n},
       {"algebra", detail::conv_algebra(e)},
       {"gencode", detail::joined(conv_gencode_flags(target_sm))},
       {"kernel_header", broadcast    ? "default_conv2d_fprop_with_broadcast.h"
                         : c.grouped ? "default_conv2d_group_fprop.h"
                                     : "default_conv2d_fprop.h"},
       {"epilogue_header", parallel    ? "linear_combination.h"
                           : broadcast ? "linear_combination_residual_block.h"
                                       : "linear_combination_generic.h"},
       {"pdl_switch", detail::pdl_switch()},
       {"element", detail::cutlass_elem(s.elem)},
       {"alignment", i(c.alignment)},
       {"tile_m", i(c.tile.m)},
       {"tile_n", i(c.tile.n)},
       {"tile_k", i(c.tile.k)},
       {"warp_m", i(c.warp.m)},
       {"warp_n", i(c.warp.n)},
       {"warp_k", i(c.warp.k)},
       {"stages", i(c.stages)},
       {"stages_note", c.stages == 2 ? "  // register-pipelined mainloop: no cp.async, any alignment" : ""},
       {"iterator", iterator_name(c.iter)},
       {"iterator_note", c.iter == ConvIter::analytic ? "  // recomputes (r,s,c) per access: any alignment" : ""},
       {"iterator_comment", few ? fill_template("conv_sm80_few_channels.cu.in", {}) : ""},
       {"act_functors", detail::act_functor_definitions(e.act, s.elem)},
       {"epilogue", epilogue_types(s)},
       {"error_plumbing", detail::host_error_plumbing()},
       {"has_bias", cstr(e.bias)},
       {"has_residual", cstr(e.residual != Residual::none)},
       {"shape_checks", detail::conv_refuse_shape_checks(c.grouped)},
       {"few_channels_size_check", few ? fill_template("conv_sm80_refuse_few_channels_size.cu.in", {}) : ""},
       {"pointer_checks", detail::conv_refuse_pointer_checks()},
       {"group_checks", c.grouped ? fill_template("conv_sm80_refuse_grouped.cu.in", {}) : ""},
       {"few_channels_c_check",
        few ? fill_template("conv_sm80_refuse_few_channels_c.cu.in", {{"max_c", std::to_string(kFewChannelsMaxC)}}) : ""},
       {"split_k", i(c.split_k)},
       {"groups", c.grouped ? "int(p->groups)" : "/*groups=*/1"},
       {"serial_split_k_note",
        c.split_k > 1 && !parallel ? fill_template("conv_sm80_serial_split_k.cu.in", {{"split_k", i(c.split_k)}}) : ""},
       {"filter_c", c.grouped ? "p->c / p->groups" : "p->c"},
       {"filter_note", c.grouped ? "  // [k, r, s, c/groups]" : ""},
       {"tensors", argument_tensors(s)},
       {"entry_points", detail::entry_points(entry)}});
}

}  // namespace sabre::cutlass_backend
