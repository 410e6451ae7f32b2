// A native fusion as a table entry: the structure it matches (a pattern over the graph, pattern/
// pattern.h), a check that says whether a match fuses or why not, and what it records for emission.
// run_fusion matches the structure at every node in lowering order; a fusion pass is its entry plus
// this driver, so a new fusion is data in one file, not another hand-written graph walk.
// Tests: tests/unit/codegen_passes_test.cpp (FusionTable.*)
#pragma once

#include <any>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/passes/pass.h"
#include "pattern/pattern.h"

namespace sabre::codegen::passes {

// A check's answer for one match.
struct Verdict {
  // fuse: record it, a site fired. keep: record it, nothing fused (a plain Softmax: what emission and
  // later fusions read, with nothing absorbed). not_mine: the structure matched but the site belongs
  // to another decision (already fused, say): nothing, no note. refuse: nothing recorded, a note.
  enum class Kind { fuse, keep, not_mine, refuse };
  Kind kind = Kind::fuse;
  // refuse: why (the note a user reads). fuse and keep: a part of the match that did not fuse and
  // why (a note too), or "" where none.
  std::string reason;
  // What the check worked out that record stores (each fusion its own type: a softmax's absorbed
  // chain), so the analysis runs once; empty where record needs only the match.
  std::any decision;
  Verdict with(std::any d) && {
    decision = std::move(d);
    return std::move(*this);
  }
  static Verdict fuse(std::string part_refused = "") { return {Kind::fuse, std::move(part_refused), {}}; }
  static Verdict keep(std::string part_refused = "") { return {Kind::keep, std::move(part_refused), {}}; }
  static Verdict not_mine() { return {Kind::not_mine, "", {}}; }
  static Verdict refuse(std::string why) { return {Kind::refuse, std::move(why), {}}; }
};

struct Fusion {
  std::string_view name;     // the pass name (--dump-after, notes)
  std::string_view algebra;  // what the fused step computes: "y = LayerNorm(a + b)"
  pattern::Pat structure;    // rooted at the node that names the site in notes
  std::function<Verdict(const pattern::Match&, LowerContext&)> check;
  std::function<void(const pattern::Match&, const Verdict&, LowerContext&)> record;  // what emission reads
};

// Matches `f.structure` at every node of cx.order and, where its check allows (fuse, keep), records
// it; every refusal is a note at the match's root node.
PassResult run_fusion(const Fusion& f, LowerContext& cx);

// The entries written this way, one file each (the pass of the same name runs it).
const Fusion& row_gather_gemm_fusion();       // fuse_row_gather_gemm.cpp
const Fusion& softmax_fusion();               // fuse_softmax.cpp
const Fusion& embed_layernorm_fusion();       // fuse_embed_layernorm.cpp
const Fusion& layernorm_residual_fusion();    // fuse_layernorm_residual.cpp
const Fusion& range_gather_fusion();          // slice_range_gather.cpp
const Fusion& depthwise_activation_fusion();  // fuse_depthwise_activation.cpp
const Fusion& attention_fusion();             // fuse_attention.cpp
const Fusion& attention_mask_fusion();        // fuse_attention_mask.cpp
const Fusion& elementwise_chain_fusion();     // group_elementwise.cpp
const Fusion& se_scale_fusion();              // fuse_se_scale.cpp

// Every entry, in the order the lowering runs them.
const std::vector<const Fusion*>& fusion_table();

}  // namespace sabre::codegen::passes
