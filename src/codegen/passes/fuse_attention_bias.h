// Internal to fuse_attention: the additive terms between Q·Kᵀ and the softmax (relative position
// biases, window shift masks added through Reshapes, their sum) as the attention step reads them.
// Tests: tests/golden/lower/fuse_attention/ (*bias*, *window*), tests/unit/codegen_plan_interp_test.cpp
#pragma once

#include <string>
#include <vector>

#include "codegen/passes/context.h"

namespace sabre::codegen::passes {

// coef·t added to the scores where they have the dims `space` (the same elements in the same order
// as the Q·Kᵀ product's output: only Reshapes lie between), t broadcast to space right-aligned.
struct BiasTerm {
  Value* t = nullptr;
  std::vector<Dim> space;
  double coef = 1.0;
};

// Sets a's mask from `terms` over the kernel's scores [a.b, a.heads, a.sq, a.sk]: one term read in
// place through strides where it can be (coefficient 1, keys contiguous), else constant terms summed
// into folded_mask over one period of their batch dependence. "" or why not.
std::string attach_bias(const std::vector<BiasTerm>& terms, AttentionFusion& a);

}  // namespace sabre::codegen::passes
