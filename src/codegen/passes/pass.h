// The lowering's passes (codegen/lower.cpp runs them in this order). Each reads and extends the
// shared LowerContext and says what it did: fired N times, nothing to do, or refused at some nodes
// with a reason each (the refusals become the lowering's notes). Any pass can be dumped after
// (LowerOptions::dump_after, SABRE_DUMP_AFTER). Tests: tests/unit/codegen_passes_test.cpp
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "codegen/passes/context.h"

namespace sabre::codegen::passes {

struct PassResult {
  int fired = 0;                  // sites the pass rewrote or decided
  std::vector<Refusal> refused;   // sites its pattern began to match but did not apply
  std::string skipped;            // why the pass did not look at all (an option is off), or ""
};

struct Pass {
  std::string_view name;
  PassResult (*run)(LowerContext&);
};

// Bind every model symbol to its range (LowerOptions::ranges or default_range).
PassResult bind_symbols(LowerContext& cx);
// A GEMM region whose A is a Gather of one row per matrix reads that row in place.
PassResult fuse_row_gather_gemm(LowerContext& cx);
// Softmax absorbs a preceding scale (Div/Mul by a constant), an additive mask and a causal Where.
PassResult fuse_softmax(LowerContext& cx);
// A LayerNorm of a sum of embedding Gathers becomes one embed_layernorm step.
PassResult fuse_embed_layernorm(LowerContext& cx);
// A LayerNorm absorbs the residual Add that feeds it.
PassResult fuse_layernorm_residual(LowerContext& cx);
// Gather(data, Range(...)) runs as a slice.
PassResult slice_range_gather(LowerContext& cx);
// A depthwise conv absorbs the activation after it: Relu, constant Clip, SiLU and Swish in any
// operand order, Sigmoid, HardSwish, x·HardSigmoid(x), HardSigmoid.
PassResult fuse_depthwise_activation(LowerContext& cx);
// Q·Kᵀ, softmax and ·V between the head reshapes become one attention step.
PassResult fuse_attention(LowerContext& cx);
// An i64 padding mask read through Where(Cast<bool>(m), t, f) by attention steps only is read as m.
PassResult fuse_attention_mask(LowerContext& cx);
// Walk back from the outputs: what no output reads does not run, and shape values the runtime
// knows from the dims are filled, so the shape subgraphs computing them disappear.
PassResult eliminate_dead_code(LowerContext& cx);
// Maximal single-consumer chains of elementwise ops become one generated kernel each.
PassResult group_elementwise(LowerContext& cx);
// The squeeze-excite scale x·gate (gate [N,C,1,1], a sigmoid) runs in one elementwise step with what
// follows it; where a GEMM or conv reads it instead, the refusal says why it is a step of its own.
PassResult fuse_se_scale(LowerContext& cx);
// Conv regions and what reads them inside (pooling, elementwise chains) are stored NHWC; a Transpose
// between NCHW and NHWC orders (or one that cancels the Transposes before it) is a view, no step.
PassResult assign_layouts(LowerContext& cx);
// Every remaining node becomes plan steps; the model's inputs and outputs are bound.
PassResult emit_steps(LowerContext& cx);

// In the order they run.
const std::vector<Pass>& lowering_passes();
// "a, b, c": for error messages.
std::string pass_names();

// The readable dump of the lowering state after `pass` (the graph in topological order with each
// node's decisions, and once emit_steps ran, the plan's steps).
std::string dump(LowerContext& cx, std::string_view pass, const PassResult& r);

}  // namespace sabre::codegen::passes
