// A native fusion as a table entry: the structure it matches (a pattern over the graph, pattern/
// pattern.h), a check that says whether a match fuses or why not, and what it records for emission.
// run_fusion matches the structure at every node in lowering order; a fusion pass is its entry plus
// this driver, so a new fusion is data in one file, not another hand-written graph walk.
// Tests: tests/unit/codegen_passes_test.cpp (FusionTable.*)
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "codegen/passes/pass.h"
#include "pattern/pattern.h"

namespace sabre::codegen::passes {

// A check's answer for one match.
struct Verdict {
  enum class Kind { fuse, not_mine, refuse };
  Kind kind = Kind::fuse;
  std::string reason;  // refuse: why (the note a user reads)
  static Verdict fuse() { return {}; }
  // The structure matched but the site belongs to another decision (already fused, say): no note.
  static Verdict not_mine() { return {Kind::not_mine, ""}; }
  static Verdict refuse(std::string why) { return {Kind::refuse, std::move(why)}; }
};

struct Fusion {
  std::string_view name;     // the pass name (--dump-after, notes)
  std::string_view algebra;  // what the fused step computes: "y = LayerNorm(a + b)"
  pattern::Pat structure;    // rooted at the node that names the site in notes
  std::function<Verdict(const pattern::Match&, LowerContext&)> check;
  std::function<void(const pattern::Match&, LowerContext&)> record;  // what emission reads
};

// Matches `f.structure` at every node of cx.order and, where its check allows, records the fusion;
// every refusal is a note at the match's root node.
PassResult run_fusion(const Fusion& f, LowerContext& cx);

// The entries written this way, one file each (the pass of the same name runs it).
const Fusion& layernorm_residual_fusion();  // fuse_layernorm_residual.cpp
const Fusion& range_gather_fusion();        // slice_range_gather.cpp

}  // namespace sabre::codegen::passes
