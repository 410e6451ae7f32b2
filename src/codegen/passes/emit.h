// The emitters of the emit_steps pass (passes/pass.h): one plan step, or a few, per node that runs.
// Private to the passes. Step params follow docs/RUNTIME.md.
#pragma once

#include <optional>
#include <string>

#include "codegen/passes/context.h"

namespace sabre::codegen::passes {

// emit_steps.cpp: any node (dispatches to the emitters below).
void emit_node(LowerContext& cx, Node* n);

// emit_fused.cpp
void emit_group(LowerContext& cx, const EwGroup& gr);
void emit_attention(LowerContext& cx, Node* n, const AttentionFusion& a);
void emit_softmax(LowerContext& cx, Node* n);
void emit_layernorm(LowerContext& cx, Node* n);

// emit_gemm.cpp
void emit_composite(LowerContext& cx, Node* n);
// A gemm step's params for D[m,n] = epilogue(A[m,k]·B + bias, residual): dims, leading dimensions,
// dtype, layout and the dispatch table(s) LowerOptions::pick gives; `p` brings the batch strides.
// Throws UnsupportedError when no kernel fits.
runtime::GemmParams gemm_params(LowerContext& cx, const Node* n, runtime::GemmParams p, const Dim& m, const Dim& nn,
                                const Dim& k, const Dim& batch, const std::string& layout, const std::string& epilogue,
                                bool residual);

// emit_conv.cpp
void emit_conv(LowerContext& cx, Node* n);
void emit_depthwise(LowerContext& cx, Node* n);
// The gemm step params of a conv region run as one unbatched "tn" GEMM; nullopt, with a note
// saying `refused` and `instead`, where no GEMM kernel takes the problem.
std::optional<runtime::GemmParams> conv_gemm_params(LowerContext& cx, const Node* n, const Node* conv, const Dim& m,
                                                    const Dim& nn, const Dim& k, const std::string& epilogue,
                                                    bool residual, const std::string& refused,
                                                    const std::string& instead);

// emit_stem.cpp: the small-channel conv at the NCHW boundary (the RGB stem).
bool emit_im2col_gemm(LowerContext& cx, const Node* n, const Node* conv, Value* X, Value* W, Value* bias,
                      int64_t c_pad, const std::string& epilogue);
bool emit_stem_conv(LowerContext& cx, const Node* n, const Node* conv, Value* X, Value* W, Value* bias,
                    const Value* res, int64_t groups, const std::string& epilogue);

}  // namespace sabre::codegen::passes
