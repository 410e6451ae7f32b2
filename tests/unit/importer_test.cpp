// ONNX importer: models built in memory with the protobuf API, each error kind with its message.
#ifndef ONNX_ML
#define ONNX_ML 1
#endif
#include <onnx/onnx_pb.h>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "frontend/onnx/importer.h"
#include "generated_models.h"
#include "ir/printer.h"
#include "reference/reference.h"

namespace sabre::onnx_frontend {
namespace {

namespace fs = std::filesystem;

// A small ModelProto builder: graph inputs, initializers, nodes, outputs.
struct Model {
  onnx::ModelProto m;
  explicit Model(int opset = 18) {
    m.set_ir_version(8);
    auto* o = m.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    m.mutable_graph()->set_name("t");
  }
  onnx::GraphProto& g() { return *m.mutable_graph(); }
  void input(const std::string& name, int dtype, const std::vector<std::string>& dims) {
    auto* vi = g().add_input();
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(dtype);
    auto* sh = tt->mutable_shape();
    for (const auto& d : dims) {
      auto* dim = sh->add_dim();
      if (d == "?") continue;
      if (std::isdigit(static_cast<unsigned char>(d[0]))) dim->set_dim_value(std::stoll(d));
      else dim->set_dim_param(d);
    }
  }
  onnx::TensorProto* init_f32(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& v) {
    auto* t = g().add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (auto d : dims) t->add_dims(d);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
    return t;
  }
  void init_i64(const std::string& name, const std::vector<int64_t>& v) {
    auto* t = g().add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (auto x : v) t->add_int64_data(x);
  }
  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& ins, const std::vector<std::string>& outs,
                        const std::string& name = "") {
    auto* n = g().add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& i : ins) n->add_input(i);
    for (const auto& o : outs) n->add_output(o);
    return n;
  }
  void output(const std::string& name) { g().add_output()->set_name(name); }
  std::string bytes() const { return m.SerializeAsString(); }
};

void attr_int(onnx::NodeProto* n, const std::string& k, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
void attr_ints(onnx::NodeProto* n, const std::string& k, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::INTS);
  for (auto x : v) a->add_ints(x);
}
void attr_str(onnx::NodeProto* n, const std::string& k, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// Runs f, expects an ImportError of `kind` whose message contains every piece of `needles`.
template <class F>
std::string expect_error(F f, ImportError::Kind kind, const std::vector<std::string>& needles) {
  try {
    f();
  } catch (const ImportError& e) {
    EXPECT_EQ(static_cast<int>(e.kind), static_cast<int>(kind)) << e.what();
    for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << "missing '" << n << "' in: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no ImportError";
  return "";
}

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("sabre_importer_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

Model linear_model() {
  Model m;
  m.input("x", onnx::TensorProto::FLOAT, {"batch size", "?", "4"});
  m.init_f32("w", {4, 3}, random_floats(12, 1));
  m.init_f32("b", {3}, random_floats(3, 2));
  m.node("MatMul", {"x", "w"}, {"xw"}, "mm");
  m.node("Add", {"xw", "b"}, {"y"}, "add");
  m.output("y");
  return m;
}

TEST(Importer, LinearModelGetsSymbolicTypes) {
  Model m = linear_model();
  ir::Graph g = import_model_bytes(m.bytes(), ".");
  ASSERT_EQ(g.inputs().size(), 1u);
  EXPECT_EQ(ir::str(g.inputs()[0]->shape()), "[batch_size,unk_x_1,4]");
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(ir::str(g.outputs()[0]->shape()), "[batch_size,unk_x_1,3]");
  EXPECT_EQ(g.outputs()[0]->dtype(), ir::DType::f32);
  const ir::Value* w = g.find_value("w");
  ASSERT_TRUE(w && w->is_constant());
  auto ref = random_floats(12, 1);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(w->constant().data<float>()[i], ref[i]);
}

TEST(Importer, InitializerListedAsInputIsAConstant) {
  Model m = linear_model();
  m.input("w", onnx::TensorProto::FLOAT, {"4", "3"});  // IR<4 style
  ir::Graph g = import_model_bytes(m.bytes(), ".");
  EXPECT_EQ(g.inputs().size(), 1u);
  EXPECT_TRUE(g.find_value("w")->is_constant());
}

TEST(Importer, TruncatedFileIsInvalid) {
  std::string b = linear_model().bytes();
  for (size_t cut : {b.size() / 2, b.size() - 3, size_t{5}})
    expect_error([&] { import_model_bytes(b.substr(0, cut), "."); }, ImportError::Kind::invalid,
                 {"not a valid ONNX model", "truncated or corrupt"});
}

TEST(Importer, CorruptBytesAreInvalid) {
  std::string junk(64, '\xff');
  expect_error([&] { import_model_bytes(junk, "."); }, ImportError::Kind::invalid, {"not a valid ONNX model"});
  expect_error([&] { import_model_bytes("", "."); }, ImportError::Kind::invalid, {"not a valid ONNX model"});
}

TEST(Importer, MissingFileIsIo) {
  expect_error([&] { import_model("/nonexistent/dir/model.onnx"); }, ImportError::Kind::io,
               {"cannot read", "/nonexistent/dir/model.onnx", "No such file or directory"});
}

TEST(Importer, ExternalDataIsRead) {
  fs::path dir = temp_dir("ext");
  auto vals = random_floats(12, 7);
  {
    std::ofstream f(dir / "weights.bin", std::ios::binary);
    f << std::string(16, 'x');  // data starts at offset 16
    f.write(reinterpret_cast<const char*>(vals.data()), 48);
  }
  Model m = linear_model();
  auto* w = m.g().mutable_initializer(0);
  w->clear_raw_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto kv = [&](const char* k, const std::string& v) {
    auto* e = w->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  kv("location", "weights.bin");
  kv("offset", "16");
  kv("length", "48");
  {
    std::ofstream f(dir / "model.onnx", std::ios::binary);
    f << m.bytes();
  }
  ir::Graph g = import_model((dir / "model.onnx").string());
  const ir::Value* wv = g.find_value("w");
  ASSERT_TRUE(wv && wv->is_constant());
  for (int i = 0; i < 12; ++i) EXPECT_EQ(wv->constant().data<float>()[i], vals[i]);

  fs::remove(dir / "weights.bin");
  expect_error([&] { import_model((dir / "model.onnx").string()); }, ImportError::Kind::io,
               {"initializer 'w'", "weights.bin", "cannot open external data file"});
  fs::remove_all(dir);
}

TEST(Importer, ExternalDataOutsideModelDirIsRefused) {
  Model m = linear_model();
  auto* w = m.g().mutable_initializer(0);
  w->clear_raw_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* e = w->add_external_data();
  e->set_key("location");
  e->set_value("../../etc/passwd");
  expect_error([&] { import_model_bytes(m.bytes(), "/tmp"); }, ImportError::Kind::invalid, {"initializer 'w'", "inside the model's directory"});
}

TEST(Importer, UnsupportedOpsAreListedTogether) {
  Model m;
  m.input("x", onnx::TensorProto::FLOAT, {"2", "3"});
  m.node("Relu", {"x"}, {"a"}, "ok");
  m.node("RoiAlign", {"a"}, {"b"}, "hm");
  auto* n = m.node("FusedThing", {"b"}, {"c"}, "custom");
  n->set_domain("com.example");
  auto* o = m.m.add_opset_import();
  o->set_domain("com.example");
  o->set_version(3);
  m.node("RoiAlign", {"c"}, {"d"}, "hm2");
  m.output("d");
  std::string msg = expect_error([&] { import_model_bytes(m.bytes(), "."); }, ImportError::Kind::unsupported,
                                 {"3 node(s)", "RoiAlign", "com.example.FusedThing", "node 'hm': op 'RoiAlign' domain 'ai.onnx' opset 18",
                                  "node 'custom': op 'FusedThing' domain 'com.example' opset 3", "node 'hm2'"});
  std::string first = msg.substr(0, msg.find('\n'));
  EXPECT_NE(first.find("sabre does not support"), std::string::npos) << first;
  EXPECT_EQ(first.find("hm2"), std::string::npos) << "the first line is a summary: " << first;
}

TEST(Importer, BadDtypeNamesTheTensor) {
  Model m = linear_model();
  auto* t = m.g().add_initializer();
  t->set_name("u16_weights");
  t->set_data_type(onnx::TensorProto::UINT16);
  t->add_dims(2);
  t->add_int32_data(1);
  t->add_int32_data(2);
  expect_error([&] { import_model_bytes(m.bytes(), "."); }, ImportError::Kind::unsupported, {"u16_weights", "UINT16"});
}

TEST(Importer, DataSizeMismatchIsInvalid) {
  Model m = linear_model();
  m.g().mutable_initializer(0)->add_dims(1000);  // claims 4*3*1000 elements, holds 12
  expect_error([&] { import_model_bytes(m.bytes(), "."); }, ImportError::Kind::invalid, {"initializer 'w'", "bytes of raw data"});
  Model m2 = linear_model();
  m2.g().mutable_initializer(1)->set_dims(0, -3);
  expect_error([&] { import_model_bytes(m2.bytes(), "."); }, ImportError::Kind::invalid, {"initializer 'b'", "negative dim"});
}

TEST(Importer, UndefinedAndDuplicateNamesAreInvalid) {
  Model m = linear_model();
  m.node("Relu", {"nowhere"}, {"z"}, "r");
  expect_error([&] { import_model_bytes(m.bytes(), "."); }, ImportError::Kind::invalid, {"node 'r' (Relu)", "'nowhere'"});
  Model m2 = linear_model();
  m2.node("Relu", {"x"}, {"y"}, "dup");
  expect_error([&] { import_model_bytes(m2.bytes(), "."); }, ImportError::Kind::invalid, {"node 'dup'", "already defined"});
}

TEST(Importer, TypedFieldsCarryHalfAndBool) {
  Model m;
  m.input("x", onnx::TensorProto::FLOAT16, {"2"});
  auto* h = m.g().add_initializer();
  h->set_name("h");
  h->set_data_type(onnx::TensorProto::FLOAT16);
  h->add_dims(2);
  h->add_int32_data(ir::float_to_half(1.5f));
  h->add_int32_data(ir::float_to_half(-0.25f));
  auto* c = m.g().add_initializer();
  c->set_name("c");
  c->set_data_type(onnx::TensorProto::BOOL);
  c->add_dims(2);
  c->add_int32_data(1);
  c->add_int32_data(0);
  m.node("Add", {"x", "h"}, {"s"});
  m.node("Where", {"c", "s", "x"}, {"y"});
  m.output("y");
  ir::Graph g = import_model_bytes(m.bytes(), ".");
  const ir::Tensor& ht = g.find_value("h")->constant();
  EXPECT_EQ(ht.dtype(), ir::DType::f16);
  EXPECT_EQ(ht.get_f64(0), 1.5);
  EXPECT_EQ(ht.get_f64(1), -0.25);
  const ir::Tensor& ct = g.find_value("c")->constant();
  EXPECT_EQ(ct.dtype(), ir::DType::boolean);
  EXPECT_EQ(ct.get_i64(0), 1);
  EXPECT_EQ(ct.get_i64(1), 0);
  EXPECT_EQ(g.outputs()[0]->dtype(), ir::DType::f16);
}

TEST(Importer, ConstantNodesBecomeConstants) {
  Model m;
  m.input("x", onnx::TensorProto::FLOAT, {"2", "3"});
  auto* c = m.node("Constant", {}, {"k"});
  auto* a = c->add_attribute();
  a->set_name("value_float");
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(2.5f);
  auto* s = m.node("Constant", {}, {"shape"});
  attr_ints(s, "value_ints", {3, 2});
  m.node("Mul", {"x", "k"}, {"xk"});
  m.node("Reshape", {"xk", "shape"}, {"y"});
  m.output("y");
  ir::Graph g = import_model_bytes(m.bytes(), ".");
  for (const ir::Node* n : g.nodes()) EXPECT_NE(n->op(), "Constant");
  EXPECT_EQ(g.find_value("k")->constant().get_f64(0), 2.5);
  EXPECT_EQ(ir::str(g.outputs()[0]->shape()), "[3,2]");
}

// The importer only imports: a static shape subgraph stays computed (known to inference) until
// a caller folds it (transform::fold_shapes, which canonicalize and sabre inspect run).
TEST(Importer, LeavesShapeSubgraphsToTheCallers) {
  Model m;
  m.input("x", onnx::TensorProto::FLOAT, {"2", "3"});
  m.node("Shape", {"x"}, {"s"});
  m.node("Reshape", {"x", "s"}, {"y"});
  m.output("y");
  ir::Graph g = import_model_bytes(m.bytes(), ".");
  ASSERT_EQ(g.num_nodes(), 2u);
  EXPECT_EQ(g.find_value("s")->producer()->op(), "Shape");
  ASSERT_TRUE(g.find_value("s")->known_dims());
  EXPECT_EQ(ir::str(g.outputs()[0]->shape()), "[2,3]");
}

// The opset-13 forms (axes/split attributes or implicit) and the opset-18 forms give the same IR.
TEST(Importer, Opset13And18ReduceMeanAndSplitAgree) {
  auto build = [](int opset) {
    Model m(opset);
    m.input("x", onnx::TensorProto::FLOAT, {"batch", "4", "6"});
    auto* r = m.node("ReduceMean", {"x"}, {"r"}, "rm");
    if (opset < 18) {
      attr_ints(r, "axes", {-1});
    } else {
      m.init_i64("axes", {-1});
      r->add_input("axes");
    }
    attr_int(r, "keepdims", 1);
    auto* sp = m.node("Split", {"x"}, {"a", "b"}, "sp");
    attr_int(sp, "axis", 2);
    if (opset >= 18) attr_int(sp, "num_outputs", 2);
    m.output("r");
    m.output("a");
    m.output("b");
    return import_model_bytes(m.bytes(), ".");
  };
  ir::Graph g13 = build(13), g18 = build(18);
  for (const ir::Graph* g : {&g13, &g18}) {
    const ir::Node* rm = g->outputs()[0]->producer();
    ASSERT_EQ(rm->op(), "ReduceMean");
    ASSERT_EQ(rm->num_inputs(), 2u);
    ASSERT_TRUE(rm->input(1)->is_constant());
    EXPECT_EQ(rm->input(1)->constant().to_i64_vector(), std::vector<int64_t>{-1});
    EXPECT_FALSE(rm->has_attr("axes"));
    EXPECT_EQ(ir::str(g->outputs()[0]->shape()), "[batch,4,1]");
    const ir::Node* sp = g->outputs()[1]->producer();
    ASSERT_EQ(sp->op(), "Split");
    EXPECT_EQ(sp->attr_int("num_outputs"), 2);
    EXPECT_EQ(sp->input(1), nullptr);
    EXPECT_EQ(ir::str(g->outputs()[1]->shape()), "[batch,4,3]");
    EXPECT_EQ(ir::str(g->outputs()[2]->shape()), "[batch,4,3]");
  }
}

TEST(Importer, CastTargetBecomesSabreDtypeName) {
  Model m;
  m.input("x", onnx::TensorProto::FLOAT, {"n"});
  attr_int(m.node("Cast", {"x"}, {"y"}, "c"), "to", onnx::TensorProto::FLOAT16);
  m.output("y");
  ir::Graph g = import_model_bytes(m.bytes(), ".");
  EXPECT_EQ(g.outputs()[0]->producer()->attr_string("to"), "f16");
  EXPECT_EQ(g.outputs()[0]->dtype(), ir::DType::f16);
}

TEST(Importer, UnsupportedAttributeValues) {
  Model m;
  m.input("x", onnx::TensorProto::FLOAT, {"1", "3", "4", "4"});
  m.init_f32("scales", {4}, {1, 1, 2, 2});
  auto* r = m.node("Resize", {"x", "", "scales"}, {"y"}, "rs");
  attr_int(r, "antialias", 1);
  m.output("y");
  expect_error([&] { import_model_bytes(m.bytes(), "."); }, ImportError::Kind::unsupported, {"node 'rs' (Resize)", "antialias"});

  Model b;
  b.input("x", onnx::TensorProto::FLOAT, {"1", "3", "4", "4"});
  for (const char* p : {"s", "bb", "mean", "var"}) b.init_f32(p, {3}, {1, 2, 3});
  attr_int(b.node("BatchNormalization", {"x", "s", "bb", "mean", "var"}, {"y"}, "bn"), "training_mode", 1);
  b.output("y");
  expect_error([&] { import_model_bytes(b.bytes(), "."); }, ImportError::Kind::unsupported, {"node 'bn'", "training-mode"});
}

TEST(Importer, AutoPadBecomesExplicitPads) {
  Model m;
  m.input("x", onnx::TensorProto::FLOAT, {"1", "2", "7", "7"});
  m.init_f32("w", {4, 2, 3, 3}, random_floats(72, 3));
  auto* c = m.node("Conv", {"x", "w"}, {"y"}, "conv");
  attr_str(c, "auto_pad", "SAME_UPPER");
  attr_ints(c, "strides", {2, 2});
  m.output("y");
  ir::Graph g = import_model_bytes(m.bytes(), ".");
  const ir::Node* n = g.outputs()[0]->producer();
  EXPECT_FALSE(n->has_attr("auto_pad"));
  EXPECT_EQ(n->attr_ints("pads"), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(ir::str(g.outputs()[0]->shape()), "[1,4,4,4]");
}

// Below opset 13 the ONNX library's version converter brings the model to 13 first: opset 11's
// Softmax(axis=1) on [2,3,4] normalises each batch's 12 values (the 2-D coercion), and must still.
TEST(Importer, OldOpsetIsConvertedWithOnnxVersionConverter) {
  Model m(11);
  m.input("x", onnx::TensorProto::FLOAT, {"2", "3", "4"});
  attr_int(m.node("Softmax", {"x"}, {"y"}, "sm"), "axis", 1);
  m.output("y");
  ir::Graph g = import_model_bytes(m.bytes(), ".");
  ir::Tensor x = ir::Tensor::from_f32(random_floats(24, 5), {2, 3, 4});
  ir::Tensor y = reference::run(g, {{"x", x}})[0];
  ASSERT_EQ(y.dims(), (std::vector<int64_t>{2, 3, 4}));
  for (int b = 0; b < 2; ++b) {
    double sum = 0;
    for (int i = 0; i < 12; ++i) sum += std::exp(x.get_f64(b * 12 + i));
    for (int i = 0; i < 12; ++i) EXPECT_NEAR(y.get_f64(b * 12 + i), std::exp(x.get_f64(b * 12 + i)) / sum, 1e-6);
  }
}

// What the converter cannot convert (Softmax 12->13 needs the input's rank; a Reshape to a run-time
// shape hides it) is refused naming the node and the opset.
TEST(Importer, OldOpsetTheConverterCannotConvertIsRefusedNamingTheNode) {
  Model m(11);
  m.input("x", onnx::TensorProto::FLOAT, {"2", "12"});
  m.input("shape", onnx::TensorProto::INT64, {"3"});
  m.node("Reshape", {"x", "shape"}, {"r"}, "reshape");
  attr_int(m.node("Softmax", {"r"}, {"y"}, "sm"), "axis", 1);
  m.output("y");
  expect_error([&] { import_model_bytes(m.bytes(), "."); }, ImportError::Kind::unsupported,
               {"opset 11", "node 'sm' (Softmax)", "to opset 13"});
}

TEST(Importer, LoadTensorPb) {
  fs::path dir = temp_dir("pb");
  onnx::TensorProto t;
  t.set_name("input_0");
  t.set_data_type(onnx::TensorProto::INT64);
  t.add_dims(3);
  for (int64_t v : {7, -2, 40}) t.add_int64_data(v);
  {
    std::ofstream f(dir / "input_0.pb", std::ios::binary);
    f << t.SerializeAsString();
  }
  ir::Tensor x = load_tensor_pb((dir / "input_0.pb").string());
  EXPECT_EQ(x.dtype(), ir::DType::i64);
  EXPECT_EQ(x.to_i64_vector(), (std::vector<int64_t>{7, -2, 40}));
  {
    std::ofstream f(dir / "bad.pb", std::ios::binary);
    f << std::string(10, '\xff');
  }
  expect_error([&] { load_tensor_pb((dir / "bad.pb").string()); }, ImportError::Kind::invalid, {"bad.pb", "TensorProto"});
  fs::remove_all(dir);
}

// Every ONNX node test model either imports or is refused with an ImportError: never anything else.
TEST(Importer, OnnxNodeTestsNeverCrash) {
  fs::path root = "/usr/share/libonnx-testdata/data/node";
  if (!fs::exists(root)) GTEST_SKIP() << "libonnx-testdata is not installed";
  int ok = 0, total = 0;
  for (const auto& e : fs::directory_iterator(root)) {
    fs::path p = e.path() / "model.onnx";
    if (!fs::exists(p)) continue;
    ++total;
    try {
      import_model(p.string());
      ++ok;
    } catch (const ImportError& err) {
      EXPECT_NE(err.kind, ImportError::Kind::io) << p << ": " << err.what();
    }
  }
  // 321 of 932 imported when this test was written; most others use ops sabre does not support.
  EXPECT_GE(ok, 300) << "of " << total;
}

TEST(Importer, BertModelImportsSymbolically) {
  fs::path p = fs::path(SABRE_SOURCE_DIR) / "models" / "bert_tiny.onnx";
  if (!fs::exists(p)) GTEST_SKIP() << p << " not generated (scripts/make_models.py)";
  ir::Graph g = import_model(p.string());
  ASSERT_FALSE(g.outputs().empty());
  EXPECT_EQ(ir::str(g.outputs()[0]->shape()).substr(0, 11), "[batch,seq,");
  // The attention reshapes are symbolic: [batch,seq,heads,head_dim].
  bool saw_reshape = false;
  for (const ir::Node* n : g.nodes())
    if (n->op() == "Reshape" && n->output(0)->shape().size() == 4) {
      saw_reshape = true;
      EXPECT_EQ(n->output(0)->shape()[0], ir::Dim::symbol("batch"));
      EXPECT_EQ(n->output(0)->shape()[1], ir::Dim::symbol("seq"));
    }
  EXPECT_TRUE(saw_reshape);
}

}  // namespace
}  // namespace sabre::onnx_frontend

namespace sabre::onnx_frontend {
namespace {
// Every example model (scripts/make_models.py) imports with fully symbolic shapes: no unknown dims anywhere.
TEST(Importer, ExampleModelsHaveNoUnknownDims) {
  for (const char* name : {"bert_tiny", "bert_tiny_op13", "bert_tiny_ext", "bert_tiny_where", "gpt2_block",
                           "resnet_block", "cnn_stem"}) {
    const std::string p = test_util::generated_model(name);
    SABRE_REQUIRE_GENERATED_MODEL(p);
    ir::Graph g = import_model(p);
    ASSERT_FALSE(g.nodes().empty()) << name;
    for (const ir::Node* n : g.nodes())
      for (const ir::Value* v : n->outputs())
        EXPECT_EQ(ir::str(v->shape()).find("unk_"), std::string::npos) << name << ": " << v->name() << " " << ir::str(v->shape());
  }
}
}  // namespace
}  // namespace sabre::onnx_frontend
