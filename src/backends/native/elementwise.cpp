// Elementwise chains on the host: builders, validation, bytecode, parameter blocks.
// Tests: tests/unit/native_codegen_test.cpp, tests/gpu/native_elementwise_test.cpp
#include "backends/native/elementwise.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "backends/native/ew_internal.h"

namespace sabre::native {

const std::array<EwOpInfo, kEwOpCount> kEwOpInfo = {{
    {"input", 0},      {"constant", 0},      {"neg", 1},       {"abs", 1},          {"exp", 1},
    {"log", 1},        {"sqrt", 1},          {"reciprocal", 1}, {"erf", 1},         {"tanh", 1},
    {"relu", 1},       {"sigmoid", 1},       {"gelu_erf", 1},  {"gelu_tanh", 1},    {"silu", 1},
    {"leaky_relu", 1}, {"hard_sigmoid", 1},  {"hardswish", 1}, {"clip", 1},         {"logical_not", 1},
    {"cast", 1},       {"add", 2},           {"sub", 2},       {"mul", 2},          {"div", 2},
    {"pow", 2},        {"min", 2},           {"max", 2},       {"equal", 2},        {"less", 2},
    {"greater", 2},    {"less_equal", 2},    {"greater_equal", 2}, {"logical_and", 2}, {"logical_or", 2},
    {"where", 3},      {"sin", 1},           {"cos", 1},       {"tan", 1},          {"asin", 1},
    {"acos", 1},       {"atan", 1},          {"sinh", 1},      {"cosh", 1},         {"asinh", 1},
    {"acosh", 1},      {"atanh", 1},         {"ceil", 1},      {"floor", 1},        {"round", 1},
    {"softplus", 1},   {"softsign", 1},      {"mish", 1},      {"elu", 1},          {"selu", 1},
    {"celu", 1},       {"thresholded_relu", 1}, {"shrink", 1}, {"sign", 1},         {"isnan", 1},
    {"isinf", 1},      {"mod", 2},           {"fmod", 2},      {"shl", 2},          {"shr", 2},
    {"prelu", 2},
}};
static_assert(kEwOpInfo.size() == kEwOpCount, "one EwOpInfo row per EwOp");

namespace detail {

Kind kind_of(DType dt) {
  switch (dt) {
    case DType::f32: case DType::f16: case DType::bf16: return Kind::f;
    case DType::i64: case DType::i32: case DType::i8: case DType::u8: return Kind::i;
    case DType::boolean: return Kind::b;
    default: throw std::invalid_argument("elementwise chain: dtype " + std::string(ir::name(dt)) +
                                         " is not supported by native kernels (f64 runs on the reference only)");
  }
}

bool float_only(EwOp op) {
  switch (op) {
    case EwOp::exp: case EwOp::log: case EwOp::sqrt: case EwOp::reciprocal: case EwOp::erf: case EwOp::tanh:
    case EwOp::relu: case EwOp::sigmoid: case EwOp::gelu_erf: case EwOp::gelu_tanh: case EwOp::silu:
    case EwOp::leaky_relu: case EwOp::hard_sigmoid: case EwOp::hardswish: case EwOp::clip: case EwOp::pow:
    case EwOp::sin: case EwOp::cos: case EwOp::tan: case EwOp::asin: case EwOp::acos: case EwOp::atan:
    case EwOp::sinh: case EwOp::cosh: case EwOp::asinh: case EwOp::acosh: case EwOp::atanh: case EwOp::ceil:
    case EwOp::floor: case EwOp::round: case EwOp::softplus: case EwOp::softsign: case EwOp::mish: case EwOp::elu:
    case EwOp::selu: case EwOp::celu: case EwOp::thresholded_relu: case EwOp::shrink: case EwOp::prelu:
      return true;
    default: return false;
  }
}

bool is_compare(EwOp op) {
  return op == EwOp::equal || op == EwOp::less || op == EwOp::greater || op == EwOp::less_equal ||
         op == EwOp::greater_equal;
}

}  // namespace detail

using detail::Kind;
using detail::kind_of;

int ElementwiseChain::input(int slot) {
  EwNode n;
  n.op = EwOp::input;
  n.a = slot;
  n.dtype = slot >= 0 && slot < static_cast<int>(inputs.size()) ? inputs[slot] : DType::f32;
  nodes.push_back(n);
  return static_cast<int>(nodes.size()) - 1;
}

int ElementwiseChain::constant(float value, DType dt) {
  EwNode n;
  n.op = EwOp::constant;
  n.dtype = dt;
  n.alpha = value;
  nodes.push_back(n);
  return static_cast<int>(nodes.size()) - 1;
}

int ElementwiseChain::unary(EwOp op, int a, float alpha, float beta) {
  EwNode n;
  n.op = op;
  n.a = a;
  n.alpha = alpha;
  n.beta = beta;
  n.dtype = a >= 0 && a < static_cast<int>(nodes.size()) ? nodes[a].dtype : DType::f32;
  if (op == EwOp::logical_not || op == EwOp::isnan || op == EwOp::isinf) n.dtype = DType::boolean;
  nodes.push_back(n);
  return static_cast<int>(nodes.size()) - 1;
}

int ElementwiseChain::binary(EwOp op, int a, int b) {
  EwNode n;
  n.op = op;
  n.a = a;
  n.b = b;
  n.dtype = a >= 0 && a < static_cast<int>(nodes.size()) ? nodes[a].dtype : DType::f32;
  if (detail::is_compare(op) || op == EwOp::logical_and || op == EwOp::logical_or) n.dtype = DType::boolean;
  nodes.push_back(n);
  return static_cast<int>(nodes.size()) - 1;
}

int ElementwiseChain::where(int cond, int a, int b) {
  EwNode n;
  n.op = EwOp::where;
  n.a = cond;
  n.b = a;
  n.c = b;
  n.dtype = a >= 0 && a < static_cast<int>(nodes.size()) ? nodes[a].dtype : DType::f32;
  nodes.push_back(n);
  return static_cast<int>(nodes.size()) - 1;
}

int ElementwiseChain::cast(int a, DType to) {
  EwNode n;
  n.op = EwOp::cast;
  n.a = a;
  n.dtype = to;
  nodes.push_back(n);
  return static_cast<int>(nodes.size()) - 1;
}

void validate(const ElementwiseChain& ch) {
  auto bad = [](size_t i, const std::string& what) {
    throw std::invalid_argument("elementwise chain node " + std::to_string(i) + ": " + what);
  };
  if (ch.inputs.size() > SABRE_EW_MAX_INPUTS)
    throw std::invalid_argument("elementwise chain: " + std::to_string(ch.inputs.size()) + " inputs, at most " +
                                std::to_string(SABRE_EW_MAX_INPUTS) + "; split the chain");
  if (ch.nodes.size() > SABRE_EW_MAX_NODES)
    throw std::invalid_argument("elementwise chain: " + std::to_string(ch.nodes.size()) + " nodes, at most " +
                                std::to_string(SABRE_EW_MAX_NODES) + "; split the chain");
  if (ch.outputs.empty() || ch.outputs.size() > SABRE_EW_MAX_OUTPUTS)
    throw std::invalid_argument("elementwise chain: needs 1.." + std::to_string(SABRE_EW_MAX_OUTPUTS) +
                                " outputs, has " + std::to_string(ch.outputs.size()));
  for (DType d : ch.inputs) kind_of(d);
  for (size_t i = 0; i < ch.nodes.size(); ++i) {
    const EwNode& n = ch.nodes[i];
    if (static_cast<size_t>(n.op) >= kEwOpCount) bad(i, "unknown op");
    const int arity = info(n.op).arity;
    const int ops[3] = {n.a, n.b, n.c};
    for (int k = 0; k < arity; ++k)
      if (ops[k] < 0 || ops[k] >= static_cast<int>(i)) bad(i, "operand " + std::to_string(k) + " is not an earlier node");
    const Kind rk = kind_of(n.dtype);
    auto ok = [&](int k) { return kind_of(ch.nodes[ops[k]].dtype); };
    if (n.op == EwOp::input) {
      if (n.a < 0 || n.a >= static_cast<int>(ch.inputs.size())) bad(i, "input slot out of range");
      if (ch.inputs[n.a] != n.dtype) bad(i, "dtype differs from its input slot");
      continue;
    }
    if (n.op == EwOp::constant || n.op == EwOp::cast) continue;
    if (detail::float_only(n.op)) {
      for (int k = 0; k < arity; ++k)
        if (ok(k) != Kind::f) bad(i, std::string(info(n.op).name) + " needs float operands");
      if (rk != Kind::f) bad(i, "result of " + std::string(info(n.op).name) + " must be a float dtype");
      continue;
    }
    switch (n.op) {
      case EwOp::neg: case EwOp::abs: case EwOp::sign:
        if (ok(0) == Kind::b || rk != ok(0)) bad(i, "neg/abs/sign take and give a number of one kind");
        break;
      case EwOp::isnan: case EwOp::isinf:
        if (ok(0) != Kind::f || rk != Kind::b) bad(i, "isnan/isinf take a float and give bool");
        break;
      case EwOp::add: case EwOp::sub: case EwOp::mul: case EwOp::div: case EwOp::min: case EwOp::max:
      case EwOp::mod: case EwOp::fmod:
        if (ok(0) != ok(1) || ok(0) == Kind::b || rk != ok(0)) bad(i, "arithmetic needs two numbers of one kind");
        break;
      case EwOp::shl: case EwOp::shr:
        if (ok(0) != Kind::i || ok(1) != Kind::i || rk != Kind::i) bad(i, "shifts take and give integers");
        break;
      case EwOp::equal: case EwOp::less: case EwOp::greater: case EwOp::less_equal: case EwOp::greater_equal:
        if (ok(0) != ok(1) || rk != Kind::b) bad(i, "comparisons take operands of one kind and give bool");
        break;
      case EwOp::logical_not: case EwOp::logical_and: case EwOp::logical_or:
        for (int k = 0; k < arity; ++k)
          if (ok(k) != Kind::b) bad(i, "logical ops take bool");
        if (rk != Kind::b) bad(i, "logical ops give bool");
        break;
      case EwOp::where:
        if (ok(0) != Kind::b || ok(1) != ok(2) || rk != ok(1)) bad(i, "where(cond: bool, a, b) with a, b of one kind");
        break;
      default: bad(i, "op not handled by validate (invariant: every EwOp has a rule)");
    }
  }
  for (int o : ch.outputs)
    if (o < 0 || o >= static_cast<int>(ch.nodes.size())) throw std::invalid_argument("elementwise chain: output names no node");
}

SabreEwProgram compile_program(const ElementwiseChain& ch) {
  validate(ch);
  SabreEwProgram p;
  std::memset(&p, 0, sizeof(p));
  p.num_nodes = static_cast<int>(ch.nodes.size());
  p.num_outputs = static_cast<int>(ch.outputs.size());
  for (size_t k = 0; k < ch.outputs.size(); ++k) p.out_node[k] = static_cast<unsigned char>(ch.outputs[k]);
  for (size_t i = 0; i < ch.nodes.size(); ++i) {
    const EwNode& n = ch.nodes[i];
    SabreEwInstr& c = p.code[i];
    c.op = static_cast<unsigned char>(n.op);
    c.dtype = static_cast<unsigned char>(n.dtype);
    c.a = static_cast<unsigned char>(std::max(n.a, 0));
    c.b = static_cast<unsigned char>(std::max(n.b, 0));
    c.c = static_cast<unsigned char>(std::max(n.c, 0));
    c.src_dtype = n.op == EwOp::input    ? static_cast<unsigned char>(n.dtype)
                  : info(n.op).arity > 0 ? static_cast<unsigned char>(ch.nodes[n.a].dtype)
                                         : c.dtype;
    c.alpha = n.alpha;
    c.beta = n.beta;
  }
  return p;
}

std::string kernel_name(const ElementwiseChain& ch) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const void* d, size_t n) {
    const auto* b = static_cast<const unsigned char*>(d);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  for (DType d : ch.inputs) mix(&d, sizeof d);
  for (const EwNode& n : ch.nodes) {
    const int32_t f[4] = {static_cast<int32_t>(n.op), static_cast<int32_t>(n.dtype), n.a, n.b};
    mix(f, sizeof f);
    mix(&n.c, sizeof n.c);
    mix(&n.alpha, sizeof n.alpha);
    mix(&n.beta, sizeof n.beta);
  }
  for (int o : ch.outputs) mix(&o, sizeof o);
  mix(kEwTemplateVersion, std::strlen(kEwTemplateVersion));
  char buf[32];
  std::snprintf(buf, sizeof buf, "sabre_ew_%016llx", static_cast<unsigned long long>(h));
  return buf;
}

SabreEwParams prepare_params(const ElementwiseChain& ch, const std::vector<int64_t>& out_dims,
                             const std::vector<std::vector<int64_t>>& in_dims, const std::vector<const void*>& in,
                             const std::vector<void*>& out) {
  const size_t nin = ch.inputs.size();
  if (in_dims.size() != nin || in.size() != nin)
    throw std::invalid_argument("elementwise chain: " + std::to_string(nin) + " inputs declared, " +
                                std::to_string(in.size()) + " pointers and " + std::to_string(in_dims.size()) +
                                " shapes given");
  if (out.size() != ch.outputs.size())
    throw std::invalid_argument("elementwise chain: " + std::to_string(ch.outputs.size()) + " outputs declared, " +
                                std::to_string(out.size()) + " pointers given");
  const size_t r = out_dims.size();
  // Per input: strides over the output's dims (0 where broadcast).
  std::vector<std::vector<int64_t>> st(nin, std::vector<int64_t>(r, 0));
  for (size_t k = 0; k < nin; ++k) {
    const auto& d = in_dims[k];
    if (d.size() > r)
      throw std::invalid_argument("elementwise chain: input " + std::to_string(k) + " has rank " +
                                  std::to_string(d.size()) + " above the output's " + std::to_string(r));
    int64_t s = 1;
    for (size_t j = 0; j < d.size(); ++j) {
      const size_t od = r - 1 - j;
      const int64_t id = d[d.size() - 1 - j];
      if (id != out_dims[od] && id != 1)
        throw std::invalid_argument("elementwise chain: input " + std::to_string(k) + " dim " + std::to_string(id) +
                                    " does not broadcast to " + std::to_string(out_dims[od]));
      st[k][od] = id == 1 ? 0 : s;
      s *= id;
    }
  }
  // Drop size-1 dims, then merge neighbours where every input agrees.
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> cst(nin);
  int64_t n = 1;
  for (size_t d = 0; d < r; ++d) {
    n *= out_dims[d];
    if (out_dims[d] == 1) continue;
    bool can = !dims.empty();
    for (size_t k = 0; k < nin && can; ++k) can = cst[k].back() == st[k][d] * out_dims[d];
    if (can) {
      dims.back() *= out_dims[d];
      for (size_t k = 0; k < nin; ++k) cst[k].back() = st[k][d];
    } else {
      dims.push_back(out_dims[d]);
      for (size_t k = 0; k < nin; ++k) cst[k].push_back(st[k][d]);
    }
  }
  if (dims.empty()) {
    dims.push_back(1);
    for (auto& s : cst) s.push_back(0);
  }
  if (dims.size() > SABRE_EW_MAX_RANK)
    throw std::invalid_argument("elementwise chain: " + std::to_string(dims.size()) +
                                " dims remain after merging, at most " + std::to_string(SABRE_EW_MAX_RANK));
  SabreEwParams p;
  std::memset(&p, 0, sizeof(p));
  p.n = n;
  p.rank = static_cast<int>(dims.size());
  for (size_t d = 0; d < dims.size(); ++d) p.dims[d] = dims[d];
  for (size_t k = 0; k < nin; ++k) {
    for (size_t d = 0; d < dims.size(); ++d) p.in_strides[k][d] = cst[k][d];
    p.in[k] = in[k];
  }
  for (size_t k = 0; k < out.size(); ++k) p.out[k] = out[k];

  // The vector path: whole vectors never straddle a row, each input is contiguous or broadcast
  // along the innermost dim, and every vector access is aligned.
  const int V = SABRE_EW_VEC;
  auto aligned = [&](const void* ptr, DType dt) {
    const size_t a = std::min<size_t>(16, V * ir::size_of(dt));
    return reinterpret_cast<uintptr_t>(ptr) % a == 0;
  };
  bool vec = n > 0 && dims.back() % V == 0;
  for (size_t k = 0; k < nin && vec; ++k) {
    const int64_t inner = cst[k].back();
    if (inner == 0) continue;
    if (inner != 1 || !aligned(in[k], ch.inputs[k])) vec = false;
    for (size_t d = 0; d + 1 < dims.size() && vec; ++d) vec = cst[k][d] % V == 0;
  }
  for (size_t k = 0; k < out.size() && vec; ++k) vec = aligned(out[k], ch.nodes[ch.outputs[k]].dtype);
  p.vec = vec ? V : 1;
  return p;
}

unsigned ew_grid_size(const SabreEwParams& p) {
  const long long threads = p.vec > 1 ? p.n / p.vec : p.n;
  const long long blocks = (threads + 255) / 256;
  // Grid-stride loops: a few waves of 132 SMs x 8 blocks are enough to saturate memory.
  return static_cast<unsigned>(std::clamp<long long>(blocks, 1, 132 * 8 * 4));
}

}  // namespace sabre::native
