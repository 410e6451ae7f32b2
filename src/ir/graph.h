// sabre's graph IR: values, nodes with typed attributes, graphs that own both.
//
// The IR speaks ONNX opset 21 semantics for ONNX ops (the importer upgrades older forms, e.g.
// ReduceMean's axes attribute becomes an input), plus sabre's own ops in domain "sabre"
// (Composite regions, fused kernels). Values and nodes are owned by their Graph and referenced
// by pointer; pointers stay valid until the Graph removes them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ir/dim.h"
#include "ir/dtype.h"
#include "ir/tensor.h"

namespace sabre::ir {

class Graph;
class Node;

struct TensorType {
  DType dtype = DType::f32;
  Shape shape;
  bool known = false;  // false until shape inference has run on the producer
  // A sequence of tensors (ONNX seq(tensor)) of `dtype`; `shape` is what its elements have in common
  // (their rank, with fresh symbols where they differ). Only the CPU reference runs sequences.
  bool sequence = false;
  bool elem_rank_known = true;  // false for a sequence whose elements' rank nothing states (SequenceEmpty)
};

class Value {
 public:
  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }
  const TensorType& type() const { return type_; }
  DType dtype() const { return type_.dtype; }
  const Shape& shape() const { return type_.shape; }
  void set_type(TensorType t) { type_ = std::move(t); }
  void set_type(DType d, Shape s) { type_ = {d, std::move(s), true}; }

  Node* producer() const { return producer_; }
  // Nodes that read this value (a node appears once per input slot that reads it).
  const std::vector<Node*>& users() const { return users_; }

  bool is_constant() const { return constant_ != nullptr; }
  const Tensor& constant() const { return *constant_; }
  const std::shared_ptr<const Tensor>& constant_ptr() const { return constant_; }

  // Shape-like values (1-D or 0-D integer tensors computed from shapes) whose elements are
  // known as dims, possibly symbolic: the result of Shape(x) on [batch,seq,768] is {batch,seq,768}.
  const std::optional<std::vector<Dim>>& known_dims() const { return known_dims_; }
  void set_known_dims(std::optional<std::vector<Dim>> d) { known_dims_ = std::move(d); }

 private:
  friend class Graph;
  friend class Node;
  std::string name_;
  TensorType type_;
  Node* producer_ = nullptr;
  std::vector<Node*> users_;
  std::shared_ptr<const Tensor> constant_;
  std::optional<std::vector<Dim>> known_dims_;
};

using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>,
                               std::vector<std::string>, Tensor, std::shared_ptr<Graph>>;

class Node {
 public:
  const std::string& op() const { return op_; }
  const std::string& domain() const { return domain_; }  // "" for ONNX, "sabre" for ours
  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }

  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  // Optional ONNX inputs that are absent are nullptr.
  Value* input(size_t i) const { return i < inputs_.size() ? inputs_[i] : nullptr; }
  Value* output(size_t i) const { return outputs_.at(i); }
  size_t num_inputs() const { return inputs_.size(); }
  size_t num_outputs() const { return outputs_.size(); }
  void set_input(size_t i, Value* v);

  const std::map<std::string, AttrValue>& attrs() const { return attrs_; }
  bool has_attr(const std::string& k) const { return attrs_.count(k) != 0; }
  void set_attr(const std::string& k, AttrValue v) { attrs_[k] = std::move(v); }
  void remove_attr(const std::string& k) { attrs_.erase(k); }
  // Typed getters; the defaulted forms return `def` when absent, the others throw.
  int64_t attr_int(const std::string& k) const;
  int64_t attr_int(const std::string& k, int64_t def) const;
  double attr_float(const std::string& k) const;
  double attr_float(const std::string& k, double def) const;
  const std::string& attr_string(const std::string& k) const;
  std::string attr_string(const std::string& k, const std::string& def) const;
  const std::vector<int64_t>& attr_ints(const std::string& k) const;
  std::vector<int64_t> attr_ints(const std::string& k, const std::vector<int64_t>& def) const;
  const std::vector<double>& attr_floats(const std::string& k) const;
  const Tensor& attr_tensor(const std::string& k) const;
  const std::shared_ptr<Graph>& attr_graph(const std::string& k) const;

 private:
  friend class Graph;
  std::string op_;
  std::string domain_;
  std::string name_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  std::map<std::string, AttrValue> attrs_;
};

class Graph {
 public:
  Graph() = default;
  Graph(Graph&&) = default;
  Graph& operator=(Graph&&) = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  // A deep copy (constants share storage: they are immutable).
  Graph clone() const;

  std::string name;
  // Symbolic dims declared by the model's inputs, in order of first appearance.
  std::vector<std::string> symbols() const;

  // Values
  Value* add_input(const std::string& name, TensorType type);
  Value* add_constant(const std::string& name, Tensor t);
  Value* add_value(const std::string& name);  // unnamed if empty: a fresh name is chosen
  void add_output(Value* v) { outputs_.push_back(v); }
  void set_outputs(std::vector<Value*> outs) { outputs_ = std::move(outs); }
  void set_output(size_t i, Value* v) { outputs_.at(i) = v; }
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  std::vector<Value*> constants() const;
  Value* find_value(const std::string& name) const;
  bool is_graph_input(const Value* v) const;
  bool is_graph_output(const Value* v) const;

  // Nodes: `outputs` are created fresh (with fresh or given names).
  Node* add_node(const std::string& op, std::vector<Value*> inputs, size_t num_outputs,
                 std::map<std::string, AttrValue> attrs = {}, const std::string& name = "",
                 const std::string& domain = "");
  Node* add_node_with_outputs(const std::string& op, std::vector<Value*> inputs, std::vector<Value*> outputs,
                              std::map<std::string, AttrValue> attrs = {}, const std::string& name = "",
                              const std::string& domain = "");
  // Gives `v` a new name (which must be free), keeping name lookup consistent.
  void rename_value(Value* v, const std::string& name);
  // Every user of `from` (and graph outputs) reads `to` instead.
  void replace_all_uses(Value* from, Value* to);
  // Removes a node; its outputs must have no users and not be graph outputs.
  void remove_node(Node* n);
  // Removes nodes whose outputs nobody reads, then unused constants and values.
  void remove_dead();

  // Nodes in a valid topological order (stable: insertion order where free).
  std::vector<Node*> topo_order() const;
  size_t num_nodes() const { return nodes_.size(); }
  std::vector<Node*> nodes() const;  // insertion order
  // Re-orders internal storage topologically; throws on a cycle.
  void sort();

 private:
  std::string fresh_name(const std::string& hint);
  std::vector<std::unique_ptr<Value>> values_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  std::map<std::string, Value*> by_name_;
  uint64_t next_id_ = 0;
};

// Thrown for broken IR invariants; the message names the invariant.
struct IrError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Checks: every input is defined before use, names are unique, outputs are produced once,
// types known (when require_types), no cycles. Throws IrError naming the first violation.
void verify(const Graph& g, bool require_types = true);

}  // namespace sabre::ir
