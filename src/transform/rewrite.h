// Internal to the transform passes: the small graph surgery they share.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace sabre::transform::detail {

// Every reader of `old` (and the graph outputs) reads `repl` instead, and `repl` takes old's name,
// so rewrites keep the names golden files and users see.
void replace_value(ir::Graph& g, ir::Value* old, ir::Value* repl);

// Removes `nodes` (given producers before consumers) whose outputs nobody reads any more.
void remove_nodes(ir::Graph& g, const std::vector<ir::Node*>& nodes);

// A node that takes the name of `old_name` once the old node is gone: adds it under a temporary
// name; call finish_rename after removing the old node.
std::string temp_node_name(const ir::Graph& g, const std::string& base);

// The constant `t` as a value, reusing an existing constant with the same bytes (tied weights).
ir::Value* add_constant_dedup(ir::Graph& g, const std::string& name, ir::Tensor t);

// Transposes a 2-D tensor of any dtype (a byte copy: exact).
ir::Tensor transpose2d(const ir::Tensor& t);

}  // namespace sabre::transform::detail
