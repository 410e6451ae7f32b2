// The IR's stable text form: what golden tests compare, what `sabre inspect --ir` shows, and
// what a pass dumps between steps.
//
//   graph bert(%input_ids: i64[batch,seq], %mask: i64[batch,seq]) -> (%out) {
//     %w = const f32[2,2] [1, 2, 3, 4]
//     %big = const f32[768,768] @5f0c2a9e1b77d301
//     %y: f32[batch,seq,2] = MatMul(%x, %w) name="mm0"
//     %a: f32[batch,seq,2], %b: f32[batch,seq,2] = Split(%y, _) {axis=-1, num_outputs=2}
//     %r = sabre.Composite(%a) {body=graph region(%p: f32[batch,seq,2]) -> (%q) {
//         %q: f32[batch,seq,2] = Relu(%p)
//       }, pattern="relu"}
//   }
//
// Rules (each one exists so that print(parse(print(g))) == print(g)):
// - Constants come first, in the graph's storage order; nodes follow in topo_order().
// - Names that are not plain identifiers ([A-Za-z0-9_./-]+) are quoted: %"input:0".
// - A node's name is shown (name="...") only when it is not the default that Graph::add_node
//   generates for an unnamed node (the op name, '_', digits); parsing a node without name=
//   lets the graph generate one again.
// - Values whose type is not inferred yet print without ": type".
// - Constants of up to kInlineLimit elements print their values; floats print the shortest text
//   that reads back to the same bits of their dtype. Larger constants print as @<content hash>
//   (Tensor::content_hash, 16 hex digits). Parsing an elided constant makes a tensor of the printed
//   dtype and shape filled from a SplitMix64 stream seeded by the hash: floats uniform in [-1, 1),
//   integers uniform in [0, 4), bools random. The parser remembers which hash it read for that
//   filler, so printing the parsed graph shows the original hash again.
// - Attribute values: 3 (int), 3.0 (float: always has '.', 'e', inf or nan), "s" (string),
//   [1, 2] (ints), [1.0, 2.5] (floats), ["a"] (strings), empty lists as [] (ints), floats[],
//   strings[]; tensors as `tensor f32[2] [1, 2]`; graphs as `graph NAME(...) -> (...) {...}`.
// - '#' starts a comment that runs to the end of the line (for hand-written golden files).
// Tests: tests/unit/printer_test.cpp
#pragma once

#include <string>

#include "ir/graph.h"

namespace sabre::ir {

inline constexpr int64_t kInlineLimit = 16;

std::string print(const Graph& g);
// Throws IrError "line L:C: what is wrong" on bad text.
Graph parse_graph(const std::string& text);

// One value's type as printed: "f32[batch,seq,768]".
std::string print_type(const TensorType& t);
// A float in the shortest form that reads back to the same value (of its dtype for f32).
std::string format_double(double v);
std::string format_float(float v);

}  // namespace sabre::ir
