// The CUTLASS pattern table: which subgraphs sabre offloads to CUTLASS kernels, as data.
//
// Every entry is a structure (partition/pattern.h) plus a check kept apart from it: dtype
// (f16, bf16, f32 as TF32), alignment (elements per 16-byte access: 8 for 16-bit types, 4 for
// f32; a refusal names the fallback alignment a kernel would need), static or symbolic dims
// (M may be symbolic; K and N of a weight GEMM may not), and layouts. The Composite it makes
// carries kind, dtype, layout, alignment and epilogue (kernel_spec.h's spelling) for the emitter.
// Tests: tests/unit/pattern_cutlass_test.cpp, tests/golden/partition/
#pragma once

#include <initializer_list>
#include <string>
#include <utility>

#include "ir/dtype.h"
#include "partition/partitioner.h"

namespace sabre::cutlass_backend {

/** The table, in priority order (longest epilogues first). Tests: tests/unit/pattern_cutlass_test.cpp */
const partition::PatternTable& pattern_table();

// Elements per 16-byte access for `t` (8 for f16/bf16, 4 for f32): the alignment of the fast kernels.
int max_alignment(ir::DType t);
// The largest power of two <= max_alignment(t) that divides `extent`: the kernels `extent` can use.
int fallback_alignment(ir::DType t, int64_t extent);
// The widest alignment the static ones of `extents` allow (symbolic ones are skipped); when that is
// below max_alignment(t), `note` (if given) gets why: "N=10 not a multiple of 8: alignment-2 ...".
int static_alignment(ir::DType t, std::initializer_list<std::pair<const char*, ir::Dim>> extents,
                     std::string* note = nullptr);

}  // namespace sabre::cutlass_backend
