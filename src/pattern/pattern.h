// A pattern language where patterns are data: a pattern is a DAG of nodes built with small
// functions (op, wildcard, constant, scalar, alt, optional tails) and the + * >> operators, and
// the matcher walks it against the graph from a root value upwards.
//
// Sharing is meaningful: a sub-pattern object used twice must match the same value both times
// (GELU reads x three times). Named captures (.as("A")) give the check and the emitter the
// values they need. Checks (dtype, alignment, dims) are not part of a pattern: see partitioner.h.
// Tests: tests/unit/pattern_test.cpp
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace sabre::pattern {

// A constraint on one attribute of an op node; `text` is how it prints ("perm=[0,2,1]").
struct AttrConstraint {
  std::string text;
  std::function<bool(const ir::Node&)> holds;
};
// The attribute equals `v`; `def` is the value an absent attribute has (ONNX defaults).
AttrConstraint attr_eq(const std::string& name, int64_t v, std::optional<int64_t> def = std::nullopt);
AttrConstraint attr_eq(const std::string& name, const std::string& v, std::optional<std::string> def = std::nullopt);
AttrConstraint attr_eq(const std::string& name, const std::vector<int64_t>& v);
// A float attribute within a relative tolerance of `v`.
AttrConstraint attr_near(const std::string& name, double v, std::optional<double> def = std::nullopt,
                         double rel_tol = 1e-5);
// Any test on the node (e.g. "perm swaps the last two axes").
AttrConstraint attr_test(const std::string& text, std::function<bool(const ir::Node&)> f);

struct PatternNode {
  enum class Kind { op, wildcard, constant, alternatives };
  Kind kind = Kind::wildcard;
  std::string op, domain;                            // op
  std::vector<std::shared_ptr<const PatternNode>> inputs;  // op: operands; alternatives: choices, in order
  std::vector<AttrConstraint> attrs;                 // op
  bool commutative = false;                          // op with 2 operands: either order matches
  bool any_operands = false;                         // op: operands not matched, any count (op_any)
  std::optional<double> scalar;                      // constant: a one-element tensor near this value
  double rel_tol = 1e-4;
  std::string capture;                               // named capture, "" for none
};

// A handle on a pattern node, with the operators that make tables read like algebra.
class Pat {
 public:
  Pat() = default;
  explicit Pat(std::shared_ptr<const PatternNode> n) : node_(std::move(n)) {}
  const PatternNode& operator*() const { return *node_; }
  const PatternNode* get() const { return node_.get(); }
  const std::shared_ptr<const PatternNode>& shared() const { return node_; }
  // The same pattern, captured under `name` (a copy: the original stays uncaptured).
  Pat as(const std::string& name) const;
  std::string str() const;  // "Add(MatMul(A, B:const), bias:const)"
 private:
  std::shared_ptr<const PatternNode> node_;
};

Pat op(const std::string& name, std::vector<Pat> inputs, std::vector<AttrConstraint> attrs = {},
       const std::string& domain = "");
// An op whose operands the pattern leaves alone, however many (a Composite region's): what reads
// them is the check's business. The name "*" is any op of the domain (its attrs say which).
Pat op_any(const std::string& name, std::vector<AttrConstraint> attrs = {}, const std::string& domain = "");
// An op whose two operands may match in either order (Add, Mul).
Pat commutative(const std::string& name, Pat a, Pat b);
Pat wildcard(const std::string& capture = "");
Pat constant(const std::string& capture = "");
// A constant with one element near v (relative tolerance): 0.5, sqrt(2), 1e-12 ...
Pat scalar(double v, double rel_tol = 1e-4);
// The first choice that leads to a complete match wins (the matcher backtracks through choices).
Pat alt(std::vector<Pat> choices);
// `inner`, followed by `tail` when the graph has it: alt({tail(inner), inner}).
using Tail = std::function<Pat(Pat)>;
Pat optional_tail(Pat inner, const Tail& tail);

Pat operator+(Pat a, Pat b);  // commutative Add
Pat operator*(Pat a, Pat b);  // commutative Mul
Pat operator>>(Pat a, const Tail& tail);  // tail(a): gemm(a, b) + bias >> relu

// What a match binds. `region` holds every graph node an op pattern matched, in topological order
// of the graph; values read by the region but not produced in it are its inputs.
struct Match {
  ir::Node* root = nullptr;
  std::map<std::string, ir::Value*> values;  // capture -> value
  std::map<std::string, ir::Node*> nodes;    // capture of an op pattern -> its node
  std::vector<ir::Node*> region;
  bool has(const std::string& c) const { return values.count(c) != 0; }
  ir::Value* value(const std::string& c) const;  // throws when absent
};

// Matches `p` against the value `v` (its producer is the region's root when p is an op).
std::optional<Match> match(const Pat& p, ir::Value* v);
// Matches at node n's first output.
std::optional<Match> match_at(const Pat& p, ir::Node* n);

}  // namespace sabre::pattern
