// Pieces of generated CUDA text (filled from templates/*.cu.in) and of kernel-name parsing that the
// GEMM emitter (emitter.cpp), the sm80 conv emitter (conv_emitter.cpp) and the sm90 conv emitter
// (conv_sm90.cpp) share.
// Internal to backends/cutlass. Tests: through the emitters' tests (tests/unit/*emitter*, conv_*).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cutlass/kernel_spec.h"

namespace sabre::cutlass_backend::detail {

// `words` joined by single spaces (a kernel's nvcc flags in its Build: comment).
std::string joined(const std::vector<std::string>& words);
// The CUTLASS element type of `e` ("cutlass::half_t", "cutlass::bfloat16_t", "float").
std::string cutlass_elem(Elem e);
// The activation functor template (applied to scalars by the sm90 fusion ops and EVT nodes, to
// Array<> by the sm80 epilogues): "cutlass::epilogue::thread::ReLu", ...
std::string cutlass_act(Act a);
// Definitions of the activation functors sabre supplies, to emit inside the generated source's
// anonymous namespace ahead of the epilogue types: relu6 ("SabreReLu6", which CUTLASS lacks) and
// gelu_erf ("SabreGeluErf", cheaper than CUTLASS's GELU; backends/gelu_erf.h, its gelu_erf16 form
// where the results `out` are f16 or bf16); "" for CUTLASS's own, so those kernels' sources (and
// cache keys) do not change.
std::string act_functor_definitions(Act a, Elem out);
// The conv epilogue as a formula for generated comments: "Y = relu(alpha*conv(X,W) + bias[k] + beta*R)".
std::string conv_algebra(const EpilogueSpec& e);
// The checks both conv families' refuse() starts with (NULL args, groups 1, positive dims, pads,
// strides and dilations, every dim within int32; needs fits()), and the operand-pointer checks
// (x, filter, y, and the bias and residual a kernel with kHasBias / kHasResidual reads).
std::string conv_refuse_shape_checks(bool grouped = false);
std::string conv_refuse_pointer_checks();
// Host-side error plumbing of a generated kernel, for the inside of its anonymous namespace: the
// thread-local last error, fail(status, message), and SABRE_CHECK_CUTLASS / SABRE_CHECK_CUDA, which
// return the failing statement, status text and line through fail().
std::string host_error_plumbing();
// A generated kernel's run-time PDL switch, pdl_enabled() (SABRE_PDL=0: off), for the inside of its
// anonymous namespace; the kernels built with CUTLASS_ENABLE_GDC_FOR_SM90 pass it to run().
std::string pdl_switch();
// The sm90 GEMM and conv kernels' FusionOp for `e`, results and bias of type `elem` (the generated
// source's element type name): LinComb* where the residual comes before the activation (the source
// term C = R, times beta), else an EVT tree without a source term (act(alpha*acc + bias), and
// beta*R + act(...) for a residual after it). `bias_note` names the bias in a comment ("bias[n]").
std::string sm90_fusion_op(const EpilogueSpec& e, const std::string& elem, const std::string& bias_note);
// make_args' epilogue arguments of sm90_fusion_op's FusionOp for `e`, the bias read as `elem`.
std::string sm90_epilogue_arguments(const EpilogueSpec& e, const std::string& elem);

// How a family's make_args hands back the CUTLASS arguments: `int make_args(p, args)` (a status,
// SABRE_OK when args were built) or `Arguments make_args(p)`.
enum class MakeArgs : uint8_t { status, value };

// The C entry points every kernel library exports (kernel_abi.h), written once (templates/shim.cu.in):
// NAME_last_error, _can_implement, _workspace_size and _run, then the signature and registry text.
// The generated source defines refuse(p), make_args and the operator type `op` before them.
struct EntryPoints {
  std::string name;          // the symbol prefix
  std::string args_type;     // "sabre_gemm_args", "sabre_conv_args"
  std::string empty;         // the condition under which the problem is empty (nothing to run)
  std::string op;            // the CUTLASS operator type of the source ("Gemm", "Conv")
  std::string op_name;       // how can_implement's refusal names it
  std::string refusal_note;  // an expression appended to that message (" + ..."), or ""
  MakeArgs make_args = MakeArgs::status;
  std::string launch;        // run's statements after the workspace check (whole lines)
  std::string signature;     // support::signature_function's text
  std::string registry;      // the one-kernel registry's text, or "" (the artifact writer's form)
};
std::string entry_points(const EntryPoints& e);
// The launch through a CUTLASS device adapter (GemmUniversalAdapter, ConvUniversalAdapter) named
// `var` of type `op`: can_implement, initialize, run (with PDL when `pdl`), the launch error.
std::string adapter_launch(const std::string& op, const std::string& var, bool pdl,
                           const std::string& initialize_note = "");
// A conv kernel library's one-entry `sabre_conv_registry` for kernel `name` (kernel_abi.h), left out
// under -DSABRE_NO_REGISTRY.
std::string conv_registry(const std::string& name);

// Kernel-name tokens: takes the token before the next '_' (or the rest) off the front of `s`;
// nullopt for an empty token.
std::optional<std::string_view> take_token(std::string_view& s);
// A positive decimal int with nothing else (no sign, no spaces); nullopt otherwise.
std::optional<int> positive_int(std::string_view s);
// The operand types of a conv name, "f16_f16_f32" (X and W, Y, the f32 accumulator), taken off the
// front of `s`: the element type when X/W and Y agree and accumulation is f32, else nullopt.
std::optional<Elem> take_operand_types(std::string_view& s);
// "128x128x64" with `parts` (2 or 3) positive ints; the unused last entry is 0. Nullopt otherwise.
std::optional<std::array<int, 3>> positive_dims(std::string_view s, size_t parts);

}  // namespace sabre::cutlass_backend::detail
