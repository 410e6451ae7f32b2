// The reference executor's driver: the kernel table, input validation, evaluation in topo order.
#include "reference/reference.h"

#include <algorithm>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "ir/infer.h"
#include "ir/printer.h"
#include "reference/kernels.h"
#include "support/thread_pool.h"

namespace sabre::reference {
namespace detail {

void fail(const ir::Node& n, const std::string& what) {
  throw ReferenceError("node '" + n.name() + "' (" + (n.domain().empty() ? "" : n.domain() + ".") + n.op() +
                       "): " + what);
}

const Tensor& in(const ir::Node& n, const Inputs& xs, size_t i) {
  if (i >= xs.size() || !xs[i]) fail(n, "required input " + std::to_string(i) + " is missing");
  return *xs[i];
}

int64_t norm_axis(const ir::Node& n, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    fail(n, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

int64_t numel(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

Dims strides_of(const Dims& d) {
  Dims s(d.size(), 1);
  for (int64_t i = static_cast<int64_t>(d.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * d[i + 1];
  return s;
}

static std::string dims_str(const Dims& d) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < d.size(); ++i) os << (i ? "," : "") << d[i];
  os << "]";
  return os.str();
}

Dims broadcast_dims(const ir::Node& n, const Dims& a, const Dims& b) {
  size_t r = std::max(a.size(), b.size());
  Dims out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) fail(n, "shapes " + dims_str(a) + " and " + dims_str(b) + " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> broadcast_index(const Dims& in, const Dims& out) {
  const size_t r = out.size();
  Dims in_full(r, 1);
  for (size_t i = 0; i < in.size(); ++i) in_full[r - in.size() + i] = in[i];
  Dims in_str = strides_of(in_full);
  for (size_t i = 0; i < r; ++i)
    if (in_full[i] == 1) in_str[i] = 0;
  const int64_t total = numel(out);
  std::vector<int64_t> idx(static_cast<size_t>(total));
  if (total == 0) return idx;
  Dims ctr(r, 0);
  int64_t off = 0;
  for (int64_t k = 0; k < total; ++k) {
    idx[k] = off;
    for (int64_t d = static_cast<int64_t>(r) - 1; d >= 0; --d) {
      if (++ctr[d] < out[d]) {
        off += in_str[d];
        break;
      }
      off -= in_str[d] * (out[d] - 1);
      ctr[d] = 0;
    }
  }
  return idx;
}

std::vector<double> to_f64(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::f32) {
    const float* p = t.data<float>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = p[i];
  } else {
    for (size_t i = 0; i < v.size(); ++i) v[i] = t.get_f64(static_cast<int64_t>(i));
  }
  return v;
}

std::vector<float> to_f32(const Tensor& t) {
  if (t.dtype() == DType::f32) return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(t.get_f64(static_cast<int64_t>(i)));
  return v;
}

Tensor from_f64(const std::vector<double>& v, DType dt, Dims dims) {
  Tensor t(dt, std::move(dims));
  if (dt == DType::f64) {
    std::copy(v.begin(), v.end(), t.mutable_data<double>());
  } else if (dt == DType::f32) {
    float* p = t.mutable_data<float>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<float>(v[i]);
  } else {
    for (size_t i = 0; i < v.size(); ++i) t.set_f64(static_cast<int64_t>(i), v[i]);
  }
  return t;
}

Tensor from_f32(const std::vector<float>& v, DType dt, Dims dims) {
  Tensor t(dt, std::move(dims));
  if (dt == DType::f32) {
    std::copy(v.begin(), v.end(), t.mutable_data<float>());
  } else {
    for (size_t i = 0; i < v.size(); ++i) t.set_f64(static_cast<int64_t>(i), v[i]);
  }
  return t;
}

std::vector<int64_t> to_i64(const Tensor& t) { return t.to_i64_vector(); }

Tensor from_i64(const std::vector<int64_t>& v, DType dt, Dims dims) {
  Tensor t(dt, std::move(dims));
  uint8_t* p = t.mutable_bytes();
  for (size_t i = 0; i < v.size(); ++i) {
    switch (dt) {
      case DType::i64: reinterpret_cast<int64_t*>(p)[i] = v[i]; break;
      case DType::i32: reinterpret_cast<int32_t*>(p)[i] = static_cast<int32_t>(v[i]); break;
      case DType::i8: reinterpret_cast<int8_t*>(p)[i] = static_cast<int8_t>(v[i]); break;
      case DType::u8: reinterpret_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v[i]); break;
      case DType::boolean: p[i] = v[i] != 0; break;
      default: t.set_f64(static_cast<int64_t>(i), static_cast<double>(v[i])); break;
    }
  }
  return t;
}

void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& f) {
  support::ThreadPool& pool = support::ThreadPool::shared();
  int64_t workers = std::min<int64_t>(static_cast<int64_t>(pool.size()), min_chunk > 0 ? n / min_chunk : n);
  if (workers <= 1) {
    if (n > 0) f(0, n);
    return;
  }
  int64_t per = (n + workers - 1) / workers;
  pool.parallel_for(static_cast<size_t>(workers), [&](size_t w) {
    int64_t b = static_cast<int64_t>(w) * per, e = std::min(n, b + per);
    if (b < e) f(b, e);
  });
}

}  // namespace detail

namespace {

// A partitioned region (partition/partitioner.h) evaluates its body.
std::vector<Tensor> run_composite(const ir::Node& n, const std::vector<const Tensor*>& xs) {
  const auto& body = *n.attr_graph("body");
  std::map<std::string, Tensor> ins;
  for (size_t i = 0; i < body.inputs().size(); ++i) {
    if (i >= xs.size() || !xs[i])
      throw ReferenceError("Composite '" + n.name() + "': input " + std::to_string(i) + " is missing");
    ins[body.inputs()[i]->name()] = *xs[i];
  }
  return run(body, ins);
}

struct Registry {
  std::mutex mu;
  detail::Table table;
};

// The one explicit kernel table: every ONNX kernel is added here, not by static registrars.
Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry;
    detail::register_elementwise(reg->table);
    detail::register_tensor_ops(reg->table);
    detail::register_nn_ops(reg->table);
    detail::register_index_ops(reg->table);
    detail::register_extra_ops(reg->table);
    detail::register_sequence_ops(reg->table);
    reg->table[{"sabre", "Composite"}] = run_composite;
    return reg;
  }();
  return *r;
}

const Kernel* find_kernel(const std::string& domain, const std::string& op) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.table.find({domain, op});
  return it == r.table.end() ? nullptr : &it->second;  // entries are never erased: stable
}

std::string shape_str(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

// Checks the caller's tensors against the graph's declared inputs, binding symbolic dims.
void validate_inputs(const ir::Graph& g, const std::map<std::string, Tensor>& inputs) {
  for (const auto& [name, t] : inputs) {
    bool known = std::any_of(g.inputs().begin(), g.inputs().end(), [&](const ir::Value* v) { return v->name() == name; });
    if (!known) {
      std::string names;
      for (const ir::Value* v : g.inputs()) names += (names.empty() ? "" : ", ") + v->name();
      throw ReferenceError("unknown input '" + name + "'; the graph's inputs are: " + names);
    }
  }
  std::map<std::string, int64_t> bindings;
  std::map<std::string, std::string> bound_by;
  std::vector<std::pair<const ir::Value*, size_t>> deferred;  // polynomial dims, checked after binding
  for (const ir::Value* v : g.inputs()) {
    auto it = inputs.find(v->name());
    if (it == inputs.end()) throw ReferenceError("missing input '" + v->name() + "': pass a tensor for it");
    const Tensor& t = it->second;
    if (!v->type().known) continue;
    if (t.is_sequence() != v->type().sequence)
      throw ReferenceError("input '" + v->name() + "' is a " + (t.is_sequence() ? "sequence" : "tensor") +
                           " but the graph expects " + ir::print_type(v->type()));
    if (t.is_sequence()) {
      if (t.dtype() != v->dtype())
        throw ReferenceError("input '" + v->name() + "' is a sequence of " + std::string(ir::name(t.dtype())) +
                             " tensors but the graph expects " + ir::print_type(v->type()));
      continue;  // its elements' shapes may differ from each other: the ops check what they need
    }
    if (t.dtype() != v->dtype())
      throw ReferenceError("input '" + v->name() + "' has dtype " + std::string(ir::name(t.dtype())) + " but the graph expects " +
                           std::string(ir::name(v->dtype())));
    const ir::Shape& s = v->shape();
    if (static_cast<size_t>(t.rank()) != s.size())
      throw ReferenceError("input '" + v->name() + "' has shape " + shape_str(t.dims()) + " but the graph expects " +
                           ir::str(s) + " (rank " + std::to_string(s.size()) + ")");
    for (size_t i = 0; i < s.size(); ++i) {
      const ir::Dim& d = s[i];
      int64_t got = t.dims()[i];
      if (d.is_static()) {
        if (d.value() != got)
          throw ReferenceError("input '" + v->name() + "' has shape " + shape_str(t.dims()) + " but the graph expects " +
                               ir::str(s));
      } else if (d.is_symbol()) {
        const std::string sym = d.symbols()[0];
        auto b = bindings.find(sym);
        if (b == bindings.end()) {
          bindings[sym] = got;
          bound_by[sym] = v->name();
        } else if (b->second != got) {
          throw ReferenceError("input '" + v->name() + "' dim " + std::to_string(i) + " is " + std::to_string(got) +
                               " but symbol '" + sym + "' is " + std::to_string(b->second) + " from input '" +
                               bound_by[sym] + "'; the same symbol must have the same value");
        }
      } else {
        deferred.push_back({v, i});
      }
    }
  }
  for (auto [v, i] : deferred) {
    const ir::Dim& d = v->shape()[i];
    int64_t got = inputs.at(v->name()).dims()[i];
    std::optional<int64_t> want = d.evaluate(bindings);
    if (want && *want != got)
      throw ReferenceError("input '" + v->name() + "' dim " + std::to_string(i) + " is " + std::to_string(got) +
                           " but " + d.str() + " = " + std::to_string(*want) + " from the other inputs");
  }
}

}  // namespace

void register_kernel(const std::string& domain, const std::string& op, Kernel k) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.table[{domain, op}] = std::move(k);
}

bool has_kernel(const std::string& domain, const std::string& op) { return find_kernel(domain, op) != nullptr; }

std::vector<Tensor> eval_node(const ir::Node& n, const std::vector<const Tensor*>& inputs) {
  const Kernel* k = find_kernel(n.domain(), n.op());
  if (!k)
    throw ReferenceError("node '" + n.name() + "': no reference kernel for op " +
                         (n.domain().empty() ? "" : n.domain() + ".") + n.op());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor* t = inputs[i];
    if (!t) continue;
    if (t->is_sequence() && !ir::op_takes_sequences(n.domain(), n.op()))
      detail::fail(n, "input " + std::to_string(i) + " is a sequence, which this op does not take");
    if (!t->is_sequence() && t->dtype() == ir::DType::str && !ir::op_takes_strings(n.domain(), n.op()))
      detail::fail(n, "input " + std::to_string(i) + " is a string tensor, which sabre does not support for this op");
  }
  std::vector<Tensor> outs;
  try {
    outs = (*k)(n, inputs);
  } catch (const ReferenceError&) {
    throw;
  } catch (const std::bad_alloc&) {
    detail::fail(n, "out of memory computing its outputs");
  } catch (const std::exception& e) {  // a kernel's arithmetic refusal (division by zero), a size check
    detail::fail(n, e.what());
  }
  if (outs.size() < n.num_outputs()) {
    // Kernels may skip trailing optional outputs nobody reads; required ones are checked by run().
    outs.resize(n.num_outputs());
  }
  return outs;
}

std::vector<Tensor> run(const ir::Graph& g, const std::map<std::string, Tensor>& inputs) {
  validate_inputs(g, inputs);

  std::unordered_map<const ir::Value*, Tensor> env;
  std::unordered_map<const ir::Value*, int64_t> uses;  // remaining reads before the value can go
  for (const ir::Value* v : g.inputs()) env[v] = inputs.at(v->name());
  std::vector<ir::Node*> order = g.topo_order();
  for (const ir::Node* n : order)
    for (const ir::Value* v : n->inputs())
      if (v) ++uses[v];

  auto lookup = [&](const ir::Value* v) -> const Tensor* {
    auto it = env.find(v);
    if (it != env.end()) return &it->second;
    if (v->is_constant()) return &v->constant();
    return nullptr;
  };

  for (const ir::Node* n : order) {
    std::vector<const Tensor*> xs(n->num_inputs(), nullptr);
    for (size_t i = 0; i < n->num_inputs(); ++i) {
      const ir::Value* v = n->input(i);
      if (!v) continue;
      xs[i] = lookup(v);
      if (!xs[i]) throw ReferenceError("node '" + n->name() + "' reads '" + v->name() + "' before it is computed");
    }
    std::vector<Tensor> outs = eval_node(*n, xs);
    for (size_t i = 0; i < n->num_outputs(); ++i) {
      const ir::Value* o = n->output(i);
      if (uses[o] == 0 && !g.is_graph_output(o)) continue;  // an optional output nobody reads
      env[o] = std::move(outs[i]);
    }
    for (const ir::Value* v : n->inputs()) {
      if (!v || --uses[v] > 0 || g.is_graph_output(v)) continue;
      env.erase(v);
    }
  }

  std::vector<Tensor> result;
  for (const ir::Value* v : g.outputs()) {
    const Tensor* t = lookup(v);
    if (!t) throw ReferenceError("graph output '" + v->name() + "' is never computed");
    result.push_back(*t);
  }
  return result;
}

}  // namespace sabre::reference
