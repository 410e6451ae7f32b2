// ONNX ModelProto -> ir::Graph. Tests: tests/unit/importer_test.cpp
#include "frontend/onnx/importer.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "frontend/onnx/onnx_proto.h"
#include <onnx/onnx-data.pb.h>  // SequenceProto (after onnx_proto.h: it sets ONNX_ML)
#include "frontend/onnx/opset_convert.h"
#include "ir/infer.h"
#include "support/files.h"
#include "support/confine.h"

namespace sabre::onnx_frontend {

namespace {

using Kind = ImportError::Kind;
using ir::Dim;
using ir::DType;

constexpr int kMaxOpset = 21;  // kMinOpset: opset_convert.h
// Tensors larger than this are refused before any allocation (a corrupt size field must not OOM us).
constexpr int64_t kMaxTensorBytes = int64_t{1} << 38;

std::string sanitize_symbol(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "_" + out;
  return out;
}

std::optional<DType> dtype_from_onnx(int t) {
  switch (t) {
    case onnx::TensorProto::FLOAT: return DType::f32;
    case onnx::TensorProto::FLOAT16: return DType::f16;
    case onnx::TensorProto::BFLOAT16: return DType::bf16;
    case onnx::TensorProto::DOUBLE: return DType::f64;
    case onnx::TensorProto::INT64: return DType::i64;
    case onnx::TensorProto::INT32: return DType::i32;
    case onnx::TensorProto::INT8: return DType::i8;
    case onnx::TensorProto::UINT8: return DType::u8;
    case onnx::TensorProto::BOOL: return DType::boolean;
    case onnx::TensorProto::STRING: return DType::str;
    default: return std::nullopt;
  }
}

std::string onnx_dtype_name(int t) {
  if (onnx::TensorProto_DataType_IsValid(t)) return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(t));
  return "dtype " + std::to_string(t);
}

DType require_dtype(int t, const std::string& what) {
  auto d = dtype_from_onnx(t);
  if (!d)
    fail(Kind::unsupported, what + " has element type " + onnx_dtype_name(t) +
                                ", which sabre does not support (f32 f16 bf16 f64 i64 i32 i8 u8 bool; string on the reference)");
  return *d;
}

int64_t checked_numel(const google::protobuf::RepeatedField<int64_t>& dims, DType dt, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) fail(Kind::invalid, what + " has a negative dim " + std::to_string(d));
    if (d != 0 && n > kMaxTensorBytes / d) fail(Kind::unsupported, what + " is too large");
    n *= d;
  }
  if (n > kMaxTensorBytes / static_cast<int64_t>(std::max<size_t>(ir::size_of(dt), 1))) fail(Kind::unsupported, what + " is too large");
  return n;
}

// Reads `nbytes` at the recorded offset of an external-data file into a tensor of dims; the file is
// checked to be long enough before the tensor is allocated (a corrupt length must not allocate).
ir::Tensor read_external(const onnx::TensorProto& tp, const std::string& base_dir, const std::string& what, DType dt,
                         const std::vector<int64_t>& dims, size_t nbytes) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : tp.external_data()) {
    try {
      if (kv.key() == "location") location = kv.value();
      else if (kv.key() == "offset") offset = std::stoll(kv.value());
      else if (kv.key() == "length") length = std::stoll(kv.value());
    } catch (const std::exception&) {
      fail(Kind::invalid, what + ": external data key '" + kv.key() + "' has a bad value '" + kv.value() + "'");
    }
  }
  if (location.empty()) fail(Kind::invalid, what + " has external data without a location");
  if (offset < 0) fail(Kind::invalid, what + ": external data offset " + std::to_string(offset) + " is negative");
  if (length >= 0 && static_cast<uint64_t>(length) != nbytes)
    fail(Kind::invalid, what + ": external data length " + std::to_string(length) + " does not match its " +
                            std::to_string(nbytes) + " bytes");
  // The location is resolved (symlinks followed) and must stay inside the model's folder: a model
  // is data and may not make sabre read, and print, files elsewhere (docs/TRUST.md).
  std::filesystem::path file;
  try {
    file = support::confine(base_dir.empty() ? "." : base_dir, location, what + ": external data location");
  } catch (const support::ConfineError& e) {
    if (e.missing) fail(Kind::io, what + ": cannot open external data file '" + location + "' (" + e.what() + ")");
    fail(Kind::invalid, std::string(e.what()) + "; external data must be a file inside the model's directory");
  }
  std::ifstream f(file, std::ios::binary);
  if (!f) fail(Kind::io, what + ": cannot open external data file '" + file.string() + "'");
  f.seekg(0, std::ios::end);
  int64_t size = static_cast<int64_t>(f.tellg());
  if (size < 0 || !support::range_inside(static_cast<uint64_t>(offset), nbytes, static_cast<uint64_t>(size)))
    fail(Kind::invalid, what + ": external data file '" + location + "' is too short (" + std::to_string(size) +
                            " bytes, need " + std::to_string(nbytes) + " at offset " + std::to_string(offset) + ")");
  ir::Tensor t(dt, dims);
  if (nbytes == 0) return t;
  f.seekg(offset);
  f.read(reinterpret_cast<char*>(t.mutable_bytes()), static_cast<std::streamsize>(nbytes));
  if (!f) fail(Kind::io, what + ": reading external data file '" + file.string() + "' failed");
  return t;
}

ir::Tensor to_tensor(const onnx::TensorProto& tp, const std::string& what, const std::string& base_dir) {
  DType dt = require_dtype(tp.data_type(), what);
  if (tp.has_segment()) fail(Kind::unsupported, what + " is segmented, which sabre does not support");
  int64_t n = checked_numel(tp.dims(), dt, what);
  std::vector<int64_t> dims(tp.dims().begin(), tp.dims().end());
  size_t nbytes = static_cast<size_t>(n) * ir::size_of(dt);
  auto count_error = [&](size_t have) {
    fail(Kind::invalid, what + " has " + std::to_string(have) + " stored elements but its dims " +
                            ir::str(ir::to_shape(dims)) + " need " + std::to_string(n));
  };
  if (dt == DType::str) {  // string_data holds the elements; raw and external data cannot
    if (tp.data_location() == onnx::TensorProto::EXTERNAL || tp.has_raw_data())
      fail(Kind::invalid, what + " is a string tensor stored as raw or external data; ONNX keeps strings in string_data");
    if (tp.string_data_size() != n) count_error(static_cast<size_t>(tp.string_data_size()));
    return ir::Tensor::from_strings({tp.string_data().begin(), tp.string_data().end()}, dims);
  }
  if (tp.data_location() == onnx::TensorProto::EXTERNAL) return read_external(tp, base_dir, what, dt, dims, nbytes);
  if (tp.has_raw_data()) {
    if (tp.raw_data().size() != nbytes)
      fail(Kind::invalid, what + " has " + std::to_string(tp.raw_data().size()) + " bytes of raw data but its dims " +
                              ir::str(ir::to_shape(dims)) + " need " + std::to_string(nbytes));
    ir::Tensor t(dt, dims);
    if (nbytes) std::memcpy(t.mutable_bytes(), tp.raw_data().data(), nbytes);
    return t;
  }
  // Typed fields: count them before allocating.
  int stored = dt == DType::f32 ? tp.float_data_size() : dt == DType::f64 ? tp.double_data_size()
             : dt == DType::i64 ? tp.int64_data_size() : tp.int32_data_size();
  if (stored != n) count_error(static_cast<size_t>(stored));
  ir::Tensor t(dt, dims);
  switch (dt) {
    case DType::f32: {
      if (tp.float_data_size() != n) count_error(tp.float_data_size());
      if (n) std::memcpy(t.mutable_bytes(), tp.float_data().data(), nbytes);
      break;
    }
    case DType::f64: {
      if (tp.double_data_size() != n) count_error(tp.double_data_size());
      if (n) std::memcpy(t.mutable_bytes(), tp.double_data().data(), nbytes);
      break;
    }
    case DType::i64: {
      if (tp.int64_data_size() != n) count_error(tp.int64_data_size());
      if (n) std::memcpy(t.mutable_bytes(), tp.int64_data().data(), nbytes);
      break;
    }
    case DType::i32: {
      if (tp.int32_data_size() != n) count_error(tp.int32_data_size());
      if (n) std::memcpy(t.mutable_bytes(), tp.int32_data().data(), nbytes);
      break;
    }
    default: {  // f16, bf16, i8, u8, bool: one element per int32_data entry (the low bits)
      if (tp.int32_data_size() != n) count_error(tp.int32_data_size());
      uint8_t* p = t.mutable_bytes();
      for (int64_t i = 0; i < n; ++i) {
        uint32_t bits = static_cast<uint32_t>(tp.int32_data(static_cast<int>(i)));
        if (ir::size_of(dt) == 2) {
          uint16_t h = static_cast<uint16_t>(bits);
          std::memcpy(p + 2 * i, &h, 2);
        } else {
          p[i] = dt == DType::boolean ? (bits != 0) : static_cast<uint8_t>(bits);
        }
      }
      break;
    }
  }
  return t;
}

// ---------------------------------------------------------------- ops

// ONNX ops sabre imports, each with the oldest opset whose form sabre reads: from 13 on every op is
// upgraded to the opset-21 form; older models import where their ops' semantics are those forms
// (or an attribute sabre moves to an input: Reduce*/Squeeze/Unsqueeze axes, Split split).
const std::map<std::string, int>& supported_ops() {
  static const std::map<std::string, int> ops = {
      {"MatMul", 1}, {"Gemm", 11}, {"Add", 7}, {"Sub", 7}, {"Mul", 7}, {"Div", 7}, {"Pow", 7}, {"Sqrt", 6},
      {"Reciprocal", 6}, {"Neg", 6}, {"Exp", 6}, {"Log", 6}, {"Erf", 9}, {"Tanh", 6}, {"Relu", 6},
      {"Sigmoid", 6}, {"Gelu", 1}, {"LeakyRelu", 6}, {"HardSigmoid", 6}, {"HardSwish", 1}, {"Clip", 11},
      {"Min", 8}, {"Max", 8}, {"Softmax", 13}, {"LayerNormalization", 1}, {"ReduceMean", 1}, {"ReduceSum", 1},
      {"ReduceMax", 1}, {"Reshape", 5}, {"Transpose", 1}, {"Flatten", 1}, {"Squeeze", 1}, {"Unsqueeze", 1},
      {"Concat", 4}, {"Split", 2}, {"Slice", 10}, {"Gather", 1}, {"Shape", 1}, {"ConstantOfShape", 9},
      {"Expand", 8}, {"Range", 11}, {"Where", 9}, {"Equal", 7}, {"Less", 7}, {"Greater", 7}, {"Not", 1},
      {"LessOrEqual", 12}, {"GreaterOrEqual", 12}, {"And", 7}, {"Or", 7}, {"Xor", 7},
      {"Cast", 6}, {"Constant", 1}, {"Identity", 1}, {"Trilu", 1}, {"Conv", 1}, {"BatchNormalization", 9},
      {"MaxPool", 8}, {"AveragePool", 7}, {"GlobalAveragePool", 1}, {"Pad", 11}, {"Resize", 11},
      {"Dropout", 1}, {"Abs", 6}, {"Sin", 7}, {"Cos", 7}, {"Tan", 7}, {"Asin", 7}, {"Acos", 7}, {"Atan", 7},
      {"Sinh", 9}, {"Cosh", 9}, {"Asinh", 9}, {"Acosh", 9}, {"Atanh", 9}, {"Ceil", 6}, {"Floor", 6}, {"Round", 11},
      {"Sign", 9}, {"Softplus", 1}, {"Softsign", 1}, {"Mish", 18}, {"Elu", 6}, {"Selu", 6}, {"Celu", 12},
      {"ThresholdedRelu", 10}, {"Shrink", 9}, {"IsNaN", 9}, {"IsInf", 10}, {"Mod", 10}, {"BitShift", 11},
      {"PRelu", 7}, {"LogSoftmax", 13}, {"Hardmax", 13}, {"Sum", 8}, {"ReduceMin", 1}, {"ReduceProd", 1},
      {"ReduceSumSquare", 1}, {"ReduceL1", 1}, {"ReduceL2", 1}, {"ReduceLogSum", 1}, {"ReduceLogSumExp", 1},
      {"GlobalMaxPool", 1}, {"ArgMax", 13}, {"ArgMin", 13}, {"CumSum", 11}, {"GatherElements", 11},
      {"Size", 1}, {"DepthToSpace", 13}, {"SpaceToDepth", 13}, {"Mean", 8}, {"Tile", 6},
      {"InstanceNormalization", 6}, {"ScatterElements", 11}, {"ScatterND", 11}, {"GatherND", 12}, {"TopK", 10},
      {"OneHot", 9}, {"NonZero", 9}, {"Compress", 9}, {"Unique", 11}, {"EyeLike", 9}, {"ReverseSequence", 10},
      {"CastLike", 15}, {"NegativeLogLikelihoodLoss", 12}, {"SoftmaxCrossEntropyLoss", 12}, {"QuantizeLinear", 10},
      {"DequantizeLinear", 10}, {"DynamicQuantizeLinear", 11}, {"LRN", 1}, {"MeanVarianceNormalization", 9},
      {"Det", 11}, {"ConvTranspose", 1}, {"Einsum", 12}, {"HannWindow", 17}, {"HammingWindow", 17},
      {"BlackmanWindow", 17}, {"NonMaxSuppression", 11}, {"GridSample", 16}, {"RNN", 14}, {"GRU", 14}, {"LSTM", 14},
      {"MatMulInteger", 10}, {"ConvInteger", 10}, {"QLinearMatMul", 10}, {"QLinearConv", 10},
      {"MaxUnpool", 11}, {"DFT", 17}, {"MelWeightMatrix", 17},
      // Sequence values and STRING tensors: the CPU reference only (sabre compile refuses them).
      {"SequenceEmpty", 11}, {"SequenceConstruct", 11}, {"SequenceInsert", 11}, {"SequenceErase", 11},
      {"SequenceAt", 11}, {"SequenceLength", 11}, {"SplitToSequence", 11}, {"ConcatFromSequence", 11},
      {"StringNormalizer", 10}};
  return ops;
}

struct Pending {
  std::string op, name;
  std::vector<ir::Value*> inputs;
  std::vector<std::string> outputs;  // "" = an optional output the model does not ask for
  std::map<std::string, ir::AttrValue> attrs;
};

class Importer {
 public:
  // source_opset: the model's opset before convert_old_opset (0: not converted).
  Importer(const onnx::ModelProto& m, std::string base_dir, int64_t source_opset = 0)
      : m_(m), base_dir_(std::move(base_dir)), source_opset_(source_opset) {}
  ir::Graph run(const ImportOptions& opts);

 private:
  std::string where(const onnx::NodeProto& n, int i) const {
    return "node '" + (n.name().empty() ? "#" + std::to_string(i) : n.name()) + "' (" + n.op_type() + ")";
  }
  void read_opsets();
  void add_initializers();
  void add_inputs();
  void check_ops();
  void add_nodes();
  ir::AttrValue convert_attr(const onnx::AttributeProto& a, const std::string& ctx);
  void upgrade(Pending& p, const std::string& ctx);
  void resolve_auto_pad();

  const onnx::ModelProto& m_;
  std::string base_dir_;
  int opset_ = 0;
  int64_t source_opset_ = 0;
  std::map<std::string, int64_t> domain_opsets_;
  ir::Graph g_;
  std::set<std::string> used_names_;  // every name some node or the graph output reads
};

void Importer::read_opsets() {
  for (const auto& o : m_.opset_import()) domain_opsets_[o.domain()] = o.version();
  auto it = domain_opsets_.find("");
  if (it == domain_opsets_.end()) it = domain_opsets_.find("ai.onnx");
  if (it == domain_opsets_.end() && !domain_opsets_.empty())  // e.g. only ai.onnx.preview.training
    fail(Kind::unsupported, "model uses only the domain '" + domain_opsets_.begin()->first +
                                "', which sabre does not support; sabre imports ai.onnx models");
  if (it == domain_opsets_.end()) fail(Kind::invalid, "model declares no opset for the ONNX domain (opset_import is missing)");
  // Below kMinOpset, import_model_bytes has converted the model already (convert_old_opset).
  if (it->second < kMinOpset || it->second > kMaxOpset)
    fail(Kind::unsupported, "model uses ONNX opset " + std::to_string(it->second) + "; sabre imports opsets 1.." +
                                std::to_string(kMaxOpset) + " (below " + std::to_string(kMinOpset) +
                                " through onnx's version converter)");
  opset_ = static_cast<int>(it->second);
}

void Importer::add_initializers() {
  for (int i = 0; i < m_.graph().initializer_size(); ++i) {
    const auto& tp = m_.graph().initializer(i);
    if (tp.name().empty()) fail(Kind::invalid, "initializer #" + std::to_string(i) + " has no name");
    if (g_.find_value(tp.name())) fail(Kind::invalid, "initializer '" + tp.name() + "' is defined twice");
    g_.add_constant(tp.name(), to_tensor(tp, "initializer '" + tp.name() + "'", base_dir_));
  }
  if (m_.graph().sparse_initializer_size() > 0)
    fail(Kind::unsupported, "model has sparse initializers ('" + m_.graph().sparse_initializer(0).values().name() +
                                "'), which sabre does not support");
}

void Importer::add_inputs() {
  for (const auto& vi : m_.graph().input()) {
    const std::string& name = vi.name();
    if (name.empty()) fail(Kind::invalid, "a graph input has no name");
    if (ir::Value* v = g_.find_value(name)) {
      if (v->is_constant()) continue;  // IR<4 style: initializers listed as inputs are constants
      fail(Kind::invalid, "graph input '" + name + "' is listed twice");
    }
    // A sequence of tensors is taken (the CPU reference runs it); maps and optionals are not.
    const bool seq = vi.has_type() && vi.type().has_sequence_type() && vi.type().sequence_type().has_elem_type() &&
                     vi.type().sequence_type().elem_type().has_tensor_type();
    if (!vi.has_type() || (!vi.type().has_tensor_type() && !seq))
      fail(Kind::unsupported, "graph input '" + name + "' is not a tensor or a sequence of tensors (maps and optionals are not supported)");
    const auto& tt = seq ? vi.type().sequence_type().elem_type().tensor_type() : vi.type().tensor_type();
    DType dt = require_dtype(tt.elem_type(), "graph input '" + name + "'");
    if (seq && !tt.has_shape()) {  // the elements' rank is unknown: ops that need it refuse
      ir::TensorType t{dt, {}, true, true};
      t.elem_rank_known = false;
      g_.add_input(name, t);
      continue;
    }
    if (!tt.has_shape())
      fail(Kind::unsupported, "graph input '" + name + "' has no shape (unknown rank); give it one, e.g. with dim_params");
    ir::Shape shape;
    for (int i = 0; i < tt.shape().dim_size(); ++i) {
      const auto& d = tt.shape().dim(i);
      if (d.has_dim_value()) {
        if (d.dim_value() < 0 || d.dim_value() > (int64_t{1} << 40))
          fail(Kind::invalid, "graph input '" + name + "' has an invalid dim " + std::to_string(d.dim_value()));
        shape.push_back(Dim(d.dim_value()));
      } else if (d.has_dim_param() && !d.dim_param().empty()) {
        shape.push_back(Dim::symbol(sanitize_symbol(d.dim_param())));
      } else {
        shape.push_back(Dim::symbol(sanitize_symbol("unk_" + name + "_" + std::to_string(i))));
      }
    }
    int64_t count = 1;
    for (const Dim& d : shape)
      if (d.is_static() && (__builtin_mul_overflow(count, d.value(), &count) || count > (int64_t{1} << 50)))
        fail(Kind::unsupported, "graph input '" + name + "' is too large: " + ir::str(shape));
    g_.add_input(name, {dt, shape, true, seq});
  }
}

void Importer::check_ops() {
  std::vector<std::string> lines;
  std::set<std::string> kinds;
  for (int i = 0; i < m_.graph().node_size(); ++i) {
    const auto& n = m_.graph().node(i);
    const std::string& dom = n.domain();
    bool onnx_domain = dom.empty() || dom == "ai.onnx";
    auto op = supported_ops().find(n.op_type());
    bool old_form = onnx_domain && op != supported_ops().end() && opset_ < kMinOpset && opset_ < op->second;
    if (onnx_domain && op != supported_ops().end() && !old_form) continue;
    auto it = domain_opsets_.find(dom);
    if (onnx_domain && it == domain_opsets_.end()) it = domain_opsets_.find(dom.empty() ? "ai.onnx" : "");
    std::string opset = it == domain_opsets_.end() ? "?" : std::to_string(it->second);
    std::string qual = onnx_domain ? n.op_type() : dom + "." + n.op_type();
    if (old_form) qual += " (opset " + opset + " form; sabre imports opsets " + std::to_string(kMinOpset) + ".." +
                          std::to_string(kMaxOpset) + ", convert the model with onnx.version_converter)";
    if (dom == "ai.onnx.preview.training") qual += " (training; sabre runs inference only: export the model without it)";
    kinds.insert(qual);
    lines.push_back("  node '" + (n.name().empty() ? "#" + std::to_string(i) : n.name()) + "': op '" + n.op_type() +
                    "' domain '" + (dom.empty() ? "ai.onnx" : dom) + "' opset " + opset);
  }
  if (lines.empty()) return;
  std::string list;
  for (const auto& k : kinds) list += (list.empty() ? "" : ", ") + k;
  std::string msg = "model has " + std::to_string(lines.size()) + " node(s) with ops sabre does not support (" + list +
                    "); replace them or export the model without them";
  for (const auto& l : lines) msg += "\n" + l;
  fail(Kind::unsupported, msg);
}

ir::AttrValue Importer::convert_attr(const onnx::AttributeProto& a, const std::string& ctx) {
  std::string w = ctx + " attribute '" + a.name() + "'";
  if (!a.ref_attr_name().empty()) fail(Kind::invalid, w + " refers to a function attribute outside a function");
  switch (a.type()) {
    case onnx::AttributeProto::FLOAT: return static_cast<double>(a.f());
    case onnx::AttributeProto::INT: return static_cast<int64_t>(a.i());
    case onnx::AttributeProto::STRING: return a.s();
    case onnx::AttributeProto::TENSOR: return to_tensor(a.t(), w, base_dir_);
    case onnx::AttributeProto::FLOATS: return std::vector<double>(a.floats().begin(), a.floats().end());
    case onnx::AttributeProto::INTS: return std::vector<int64_t>(a.ints().begin(), a.ints().end());
    case onnx::AttributeProto::STRINGS: return std::vector<std::string>(a.strings().begin(), a.strings().end());
    case onnx::AttributeProto::UNDEFINED: fail(Kind::invalid, w + " has no type");
    default: fail(Kind::unsupported, w + " has type " + onnx::AttributeProto_AttributeType_Name(a.type()) + ", which sabre does not support");
  }
}

std::string dtype_attr_name(int64_t t, const std::string& ctx) {
  if (t < INT_MIN || t > INT_MAX) fail(Kind::invalid, ctx + ": dtype " + std::to_string(t) + " is not an ONNX dtype");
  return std::string(ir::name(require_dtype(static_cast<int>(t), ctx)));
}

template <class T>
const T* get(const Pending& p, const std::string& k) {
  auto it = p.attrs.find(k);
  return it == p.attrs.end() ? nullptr : std::get_if<T>(&it->second);
}

// Rewrites an older-opset node into the IR's opset-21 form; refuses attribute values sabre can't run.
void Importer::upgrade(Pending& p, const std::string& ctx) {
  auto unsupported = [&](const std::string& what) { fail(Kind::unsupported, ctx + ": " + what + " is not supported"); };
  auto extra_output_used = [&](size_t from) {
    for (size_t i = from; i < p.outputs.size(); ++i)
      if (!p.outputs[i].empty() && used_names_.count(p.outputs[i])) return true;
    return false;
  };
  const std::string& op = p.op;
  // Reduce* axes became an input in opset 18, ReduceSum's (and Squeeze/Unsqueeze's) in 13.
  const bool reduce_op = op.rfind("Reduce", 0) == 0;
  bool axes_attr = (reduce_op && op != "ReduceSum" && opset_ < 18) ||
                   ((op == "ReduceSum" || op == "Squeeze" || op == "Unsqueeze") && opset_ < 13);
  if (op == "Split" && opset_ < 13) {  // split sizes: attribute -> input
    if (const auto* sp = get<std::vector<int64_t>>(p, "split")) {
      ir::Value* c = g_.add_constant(p.name + "_split", ir::Tensor::from_i64(*sp, {static_cast<int64_t>(sp->size())}));
      p.inputs.resize(1);
      p.inputs.push_back(c);
    }
    p.attrs.erase("split");
  }
  if (axes_attr) {
    if (const auto* axes = get<std::vector<int64_t>>(p, "axes")) {
      ir::Value* c = g_.add_constant(p.name + "_axes", ir::Tensor::from_i64(*axes, {static_cast<int64_t>(axes->size())}));
      p.inputs.resize(1);
      p.inputs.push_back(c);
    }
    p.attrs.erase("axes");
  } else if (op == "Split") {
    bool has_split = p.inputs.size() > 1 && p.inputs[1];
    if (!has_split && !p.attrs.count("num_outputs")) p.attrs["num_outputs"] = static_cast<int64_t>(p.outputs.size());
  } else if (op == "Cast") {
    const int64_t* to = get<int64_t>(p, "to");
    if (!to) fail(Kind::invalid, ctx + ": attribute 'to' is missing or not an int");
    p.attrs["to"] = dtype_attr_name(*to, ctx + " target");
    p.attrs.erase("saturate");
  } else if (op == "QuantizeLinear") {
    if (const int64_t* to = get<int64_t>(p, "output_dtype"); to && *to != 0)
      p.attrs["output_dtype"] = dtype_attr_name(*to, ctx + " output_dtype");
    else p.attrs.erase("output_dtype");
  } else if (op == "EyeLike" || op == "SequenceEmpty") {
    if (const int64_t* to = get<int64_t>(p, "dtype")) p.attrs["dtype"] = dtype_attr_name(*to, ctx + " dtype");
  } else if (op == "Dropout") {
    if (p.inputs.size() > 2 && p.inputs[2]) {  // training_mode: inference unless a constant true with ratio 0
      const ir::Value* tm = p.inputs[2];
      const ir::Value* ratio = p.inputs.size() > 1 ? p.inputs[1] : nullptr;
      const bool training = !tm->is_constant() || tm->constant().numel() != 1 || tm->constant().get_i64(0) != 0;
      const bool zero_ratio = ratio && ratio->is_constant() && ratio->constant().numel() == 1 && ratio->constant().get_f64(0) == 0;
      if (training && !zero_ratio) unsupported("training-mode Dropout");
    }
    // With its mask read, Dropout stays (the reference gives an all-true mask); otherwise an Identity.
    const bool mask = extra_output_used(1);
    p.op = mask ? "Dropout" : "Identity";
    p.inputs.resize(std::min<size_t>(p.inputs.size(), 1));
    p.outputs.resize(mask ? 2 : 1);
    p.attrs.clear();
  } else if (op == "HannWindow" || op == "HammingWindow" || op == "BlackmanWindow") {
    if (const int64_t* to = get<int64_t>(p, "output_datatype")) p.attrs["output_datatype"] = dtype_attr_name(*to, ctx + " output_datatype");
  } else if (op == "BatchNormalization") {
    const int64_t* tm = get<int64_t>(p, "training_mode");
    if ((tm && *tm) || extra_output_used(1)) unsupported("training-mode BatchNormalization");
    p.outputs.resize(1);
    p.attrs.erase("training_mode");
    p.attrs.erase("spatial");
  } else if (op == "MaxPool") {
    if (extra_output_used(1)) unsupported("MaxPool's Indices output");
    p.outputs.resize(1);
    if (const int64_t* so = get<int64_t>(p, "storage_order"); so && *so) unsupported("storage_order=1");
  } else if (op == "Resize") {
    std::string mode = get<std::string>(p, "mode") ? *get<std::string>(p, "mode") : "nearest";
    if (mode != "nearest" && mode != "linear" && mode != "cubic") unsupported("Resize mode '" + mode + "'");
    if (const int64_t* aa = get<int64_t>(p, "antialias"); aa && *aa) unsupported("Resize antialias=1");
    if (const auto* k = get<std::string>(p, "keep_aspect_ratio_policy"); k && *k != "stretch")
      unsupported("Resize keep_aspect_ratio_policy '" + *k + "'");
  } else if (op == "Pad") {
    if (const auto* m = get<std::string>(p, "mode"); m && *m != "constant" && *m != "reflect" && *m != "edge" && *m != "wrap")
      unsupported("Pad mode '" + *m + "'");
  } else if (op == "Gelu") {
    if (const auto* a = get<std::string>(p, "approximate"); a && *a != "none" && *a != "tanh")
      fail(Kind::invalid, ctx + ": Gelu approximate must be 'none' or 'tanh'");
  } else if (op == "PRelu" && source_opset_ > 0 && source_opset_ < 7) {
    // Opset 6 applied a [C] slope per channel; the version converter keeps it as is, where opset 7's
    // broadcasting would read it along the last axis: only a single slope means the same in both.
    const ir::Value* sl = p.inputs.size() > 1 ? p.inputs[1] : nullptr;
    if (!sl || !sl->is_constant() || sl->constant().numel() != 1)
      unsupported("an opset-" + std::to_string(source_opset_) + " PRelu with a slope per channel (the version "
                  "converter keeps its old broadcast; export at opset 7 or later)");
  } else if (op == "BitShift") {
    const auto* d = get<std::string>(p, "direction");
    if (!d || (*d != "LEFT" && *d != "RIGHT")) fail(Kind::invalid, ctx + ": BitShift direction must be 'LEFT' or 'RIGHT'");
  } else if (op == "LayerNormalization") {
    if (const int64_t* st = get<int64_t>(p, "stash_type"); st && *st != 1) unsupported("stash_type other than float");
  }
  for (const char* k : {"auto_pad", "mode", "coordinate_transformation_mode", "nearest_mode", "approximate"})
    if (p.attrs.count(k) && !get<std::string>(p, k)) fail(Kind::invalid, ctx + ": attribute '" + k + "' must be a string");
}

void Importer::add_nodes() {
  const auto& gp = m_.graph();
  for (const auto& n : gp.node())
    for (const auto& s : n.input()) used_names_.insert(s);
  for (const auto& o : gp.output()) used_names_.insert(o.name());

  // Pass 0: Constant nodes become constant values (any node may read them, wherever they appear).
  for (int i = 0; i < gp.node_size(); ++i) {
    const auto& n = gp.node(i);
    if (n.op_type() != "Constant" || !(n.domain().empty() || n.domain() == "ai.onnx")) continue;
    std::string ctx = where(n, i);
    if (n.output_size() != 1 || n.output(0).empty()) fail(Kind::invalid, ctx + " must have exactly one output");
    if (n.attribute_size() != 1) fail(Kind::invalid, ctx + " must have exactly one value attribute");
    const auto& a = n.attribute(0);
    const std::string& k = a.name();
    ir::Tensor t;
    if (k == "value" && a.type() == onnx::AttributeProto::TENSOR) t = to_tensor(a.t(), ctx + " value", base_dir_);
    else if (k == "value_float" && a.type() == onnx::AttributeProto::FLOAT) t = ir::Tensor::scalar_f32(a.f());
    else if (k == "value_floats" && a.type() == onnx::AttributeProto::FLOATS)
      t = ir::Tensor::from_f32({a.floats().begin(), a.floats().end()}, {a.floats_size()});
    else if (k == "value_int" && a.type() == onnx::AttributeProto::INT) t = ir::Tensor::from_i64({a.i()}, {});
    else if (k == "value_ints" && a.type() == onnx::AttributeProto::INTS)
      t = ir::Tensor::from_i64({a.ints().begin(), a.ints().end()}, {a.ints_size()});
    else if (k == "value_string" && a.type() == onnx::AttributeProto::STRING) t = ir::Tensor::from_strings({a.s()}, {});
    else if (k == "value_strings" && a.type() == onnx::AttributeProto::STRINGS)
      t = ir::Tensor::from_strings({a.strings().begin(), a.strings().end()}, {a.strings_size()});
    else if (k == "sparse_value")
      fail(Kind::unsupported, ctx + ": a " + k + " constant is not supported");
    else fail(Kind::invalid, ctx + " has an unknown or mistyped value attribute '" + k + "'");
    if (g_.find_value(n.output(0))) fail(Kind::invalid, ctx + " defines '" + n.output(0) + "', which is already defined");
    g_.add_constant(n.output(0), std::move(t));
  }
  // Pass 1: create every node output, so nodes may appear in any order (we sort later).
  std::map<std::string, ir::Value*> produced;
  for (int i = 0; i < gp.node_size(); ++i) {
    const auto& n = gp.node(i);
    if (n.op_type() == "Constant") continue;  // becomes a constant value in pass 2
    for (const auto& o : n.output()) {
      if (o.empty()) continue;
      if (g_.find_value(o)) fail(Kind::invalid, where(n, i) + " defines '" + o + "', which is already defined");
      produced[o] = g_.add_value(o);
    }
  }
  std::set<std::string> node_names;
  for (int i = 0; i < gp.node_size(); ++i) {
    const auto& n = gp.node(i);
    if (n.op_type() == "Constant") continue;
    std::string ctx = where(n, i);
    Pending p;
    p.op = n.op_type();
    p.name = n.name().empty() ? n.op_type() + "_" + std::to_string(i) : n.name();
    for (int k = 0; node_names.count(p.name); ++k) p.name = n.name() + "_" + std::to_string(k);
    node_names.insert(p.name);
    for (const auto& a : n.attribute()) {
      if (a.name().empty()) fail(Kind::invalid, ctx + " has an attribute without a name");
      if (p.attrs.count(a.name())) fail(Kind::invalid, ctx + " has attribute '" + a.name() + "' twice");
      p.attrs[a.name()] = convert_attr(a, ctx);
    }
    for (const auto& s : n.input()) {
      if (s.empty()) {
        p.inputs.push_back(nullptr);
        continue;
      }
      ir::Value* v = g_.find_value(s);
      if (!v) fail(Kind::invalid, ctx + " reads '" + s + "', which no node, input or initializer defines");
      p.inputs.push_back(v);
    }
    while (!p.inputs.empty() && !p.inputs.back()) p.inputs.pop_back();  // trailing absent optionals
    for (const auto& o : n.output()) p.outputs.push_back(o);
    if (p.outputs.empty()) fail(Kind::invalid, ctx + " has no outputs");
    upgrade(p, ctx);
    std::vector<ir::Value*> outs;
    for (const auto& o : p.outputs) outs.push_back(o.empty() ? g_.add_value(p.name + "_unused") : produced.at(o));
    g_.add_node_with_outputs(p.op, p.inputs, outs, std::move(p.attrs), p.name);
  }
  // Outputs of nodes we dropped (Dropout's mask, ...) go in run()'s remove_dead, once graph outputs are set:
  // here every node would look dead.
}

// Conv/pool auto_pad becomes explicit pads (the IR and the executors use pads only); needs inferred shapes.
void Importer::resolve_auto_pad() {
  for (ir::Node* n : g_.nodes()) {
    if (n->op() != "Conv" && n->op() != "MaxPool" && n->op() != "AveragePool") continue;
    std::string ap = n->attr_string("auto_pad", "NOTSET");
    if (ap == "NOTSET") {
      n->remove_attr("auto_pad");
      continue;
    }
    const ir::Shape& xs = n->input(0)->shape();
    const ir::Shape& ys = n->output(0)->shape();
    size_t sp = xs.size() - 2;
    std::vector<int64_t> kernel = n->attr_ints("kernel_shape", {});
    if (kernel.empty())
      for (size_t i = 2; i < n->input(1)->shape().size(); ++i) kernel.push_back(n->input(1)->shape()[i].value());
    auto strides = n->attr_ints("strides", std::vector<int64_t>(sp, 1));
    auto dil = n->attr_ints("dilations", std::vector<int64_t>(sp, 1));
    std::vector<int64_t> pads(2 * sp, 0);
    if (ap != "VALID") {
      for (size_t i = 0; i < sp; ++i) {
        Dim total = (ys[i + 2] - Dim(1)) * Dim(strides[i]) + Dim(dil[i] * (kernel[i] - 1) + 1) - xs[i + 2];
        if (!total.is_static())
          fail(Kind::unsupported, "node '" + n->name() + "' (" + n->op() + "): auto_pad=" + ap +
                                      " on symbolic dim " + xs[i + 2].str() + " needs explicit pads; export with fixed pads");
        int64_t t = std::max<int64_t>(0, total.value());
        pads[i] = ap == "SAME_UPPER" ? t / 2 : t - t / 2;
        pads[i + sp] = t - pads[i];
      }
    }
    n->set_attr("pads", pads);
    n->remove_attr("auto_pad");
  }
}

ir::Graph Importer::run(const ImportOptions& opts) {
  if (!m_.has_graph()) fail(Kind::invalid, "model has no graph");
  read_opsets();
  g_.name = m_.graph().name().empty() ? "main" : m_.graph().name();
  add_initializers();
  add_inputs();
  check_ops();
  add_nodes();
  std::vector<ir::Value*> outs;
  for (const auto& o : m_.graph().output()) {
    ir::Value* v = g_.find_value(o.name());
    if (!v) fail(Kind::invalid, "graph output '" + o.name() + "' is never defined");
    outs.push_back(v);
  }
  if (outs.empty()) fail(Kind::invalid, "model has no outputs");
  g_.set_outputs(outs);
  try {
    g_.sort();
    g_.remove_dead();
    if (opts.infer) {
      ir::infer_types(g_);
      resolve_auto_pad();
    }
    ir::verify(g_, opts.infer);
  } catch (const ir::ShapeUnsupported& e) {
    fail(Kind::unsupported, e.what());
  } catch (const ir::ShapeError& e) {
    fail(Kind::invalid, std::string("shape inference failed: ") + e.what());
  } catch (const ir::IrError& e) {
    fail(Kind::invalid, std::string("invalid graph: ") + e.what());
  } catch (const ImportError&) {
    throw;
  } catch (const std::exception& e) {  // a fuzzed model must not take the process down
    fail(Kind::invalid, std::string("shape inference failed: ") + e.what());
  }
  return std::move(g_);
}

std::string read_file(const std::string& path) {
  try {
    return support::read_input_file(path, "", support::kMaxModelBytes);
  } catch (const support::FileError& e) {
    fail(Kind::io, std::string(e.what()) + (std::strstr(e.what(), "-byte limit") ? "; store its weights as external data" : ""));
  }
}

std::string dir_of(const std::string& path) {
  std::string d = std::filesystem::path(path).parent_path().string();
  return d.empty() ? "." : d;
}

}  // namespace

int max_opset() { return kMaxOpset; }
const std::map<std::string, int>& op_oldest_opsets() { return supported_ops(); }

ir::Graph import_model_bytes(const std::string& bytes, const std::string& base_dir, const ImportOptions& opts) {
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    fail(Kind::unsupported, "model is larger than 2 GiB; store its weights as external data");
  onnx::ModelProto m;
  if (bytes.empty() || !m.ParseFromString(bytes))
    fail(Kind::invalid, "not a valid ONNX model: the protobuf does not parse (truncated or corrupt file?)");
  const int64_t source_opset = default_opset(m);
  convert_old_opset(m);
  return Importer(m, base_dir, source_opset < kMinOpset ? source_opset : 0).run(opts);
}

ir::Graph import_model(const std::string& path, const ImportOptions& opts) {
  std::string bytes = read_file(path);
  try {
    return import_model_bytes(bytes, dir_of(path), opts);
  } catch (const ImportError& e) {
    throw ImportError(e.kind, path + ": " + e.what());
  }
}

ir::Tensor load_tensor_pb(const std::string& path) {
  std::string bytes = read_file(path);
  onnx::TensorProto tp;
  if (bytes.size() > static_cast<size_t>(INT_MAX) || !tp.ParseFromString(bytes))
    fail(Kind::invalid, path + ": not a valid ONNX TensorProto (truncated or corrupt file?)");
  return to_tensor(tp, path + ": tensor '" + tp.name() + "'", dir_of(path));
}

ir::Tensor load_sequence_pb(const std::string& path, ir::DType elem) {
  std::string bytes = read_file(path);
  onnx::SequenceProto sp;
  if (bytes.size() > static_cast<size_t>(INT_MAX) || !sp.ParseFromString(bytes))
    fail(Kind::invalid, path + ": not a valid ONNX SequenceProto (truncated or corrupt file?)");
  if (sp.elem_type() != onnx::SequenceProto::TENSOR && sp.tensor_values_size() == 0 && sp.elem_type() != 0)
    fail(Kind::unsupported, path + ": a sequence of non-tensors, which sabre does not support");
  std::vector<ir::Tensor> elems;
  for (int i = 0; i < sp.tensor_values_size(); ++i) {
    elems.push_back(to_tensor(sp.tensor_values(i), path + ": element " + std::to_string(i), dir_of(path)));
    if (elems.back().dtype() != elem)
      fail(Kind::invalid, path + ": element " + std::to_string(i) + " is " + std::string(ir::name(elems.back().dtype())) +
                              ", not " + std::string(ir::name(elem)));
  }
  return ir::Tensor::sequence(elem, std::move(elems));
}

}  // namespace sabre::onnx_frontend
