// The CUTLASS pattern table: which subgraphs sabre offloads to CUTLASS kernels, as data.
//
// Every entry is a structure (partition/pattern.h) plus a check kept apart from it: dtype
// (f16, bf16, f32 as TF32), alignment (elements per 16-byte access: 8 for 16-bit types, 4 for
// f32; a refusal names the fallback alignment a kernel would need), static or symbolic dims
// (M may be symbolic; K and N of a weight GEMM may not), and layouts. The Composite it makes
// carries kind, dtype, layout, alignment and epilogue (kernel_spec.h's spelling) for the emitter.
// Tests: tests/unit/pattern_cutlass_test.cpp, tests/golden/partition/
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
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

// The convs `sabre compile` runs as im2col + GEMM where X is an NCHW value whose channels it would
// otherwise pad (codegen/lower.cpp, LowerOptions::stem): fewer channels than one 16-byte
// access of the f16/bf16 compute dtype holds (the RGB stem's 3) and R·S·C <= kIm2colMaxColumns
// (the GEMM's K; ResNet's 7x7 stem has 147). The region's alignment note says so.
inline constexpr int64_t kIm2colMaxColumns = 1024;

// Grouped convs the grouped kernels (conv_spec.h, ConvConfig::grouped) take: a multiple of
// kGroupedConvInMultiple input channels (one 16-byte access of f16/bf16) and of
// kGroupedConvOutMultiple output channels (the smallest grouped tile N) a group. sabre compile runs
// transform::regroup_convs with these first, which widens narrower groups where a divisor of the
// group count allows (ResNeXt 32x4d's groups of 4 become groups of 32).
inline constexpr int64_t kGroupedConvInMultiple = 8, kGroupedConvOutMultiple = 32;
// Why the grouped kernels cannot take a conv of `groups` groups over c input and k output channels
// with `epilogue`, or nullopt: depthwise convs (one channel a group) stay on the native kernel.
std::optional<std::string> grouped_conv_problem(ir::DType t, int64_t groups, int64_t c, int64_t k,
                                                const std::string& epilogue);
bool im2col_shape(int64_t c, int64_t r, int64_t s);

}  // namespace sabre::cutlass_backend
