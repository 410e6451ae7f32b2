// Reference executor tests: hand-computed values, independent naive loops, and expectations from
// onnx's numpy reference (tests/onnx/gen_reference_expected.py prints the k* tables below).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <climits>
#include <cmath>
#include <limits>
#include <optional>
#include <random>

#include "ir/graph.h"
#include "ir/infer.h"
#include "ir/printer.h"
#include "random_tensor.h"
#include "reference/reference.h"

namespace {

using sabre::ir::AttrValue;
using sabre::ir::Dim;
using sabre::ir::DType;
using sabre::ir::Graph;
using sabre::ir::Tensor;
using sabre::reference::ReferenceError;

// The generator's inputs: float32(sin(1.3 * i + phase)), no zeros.
Tensor seq(std::vector<int64_t> dims, double phase = 0.5) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(std::sin(1.3 * static_cast<double>(i) + phase));
  return Tensor::from_f32(v, std::move(dims));
}

Tensor random_f32(std::vector<int64_t> dims, uint32_t seed) {
  std::mt19937 rng(seed);
  return sabre::test_util::random_f32(std::move(dims), rng);
}

Tensor i64(std::vector<int64_t> v) { return Tensor::from_i64(v, {static_cast<int64_t>(v.size())}); }

// Runs one node whose inputs are graph inputs (nullopt: an absent optional input).
std::vector<Tensor> run_op(const std::string& op, const std::vector<std::optional<Tensor>>& ins,
                           std::map<std::string, AttrValue> attrs = {}, size_t nout = 1) {
  Graph g;
  std::vector<sabre::ir::Value*> vals;
  std::map<std::string, Tensor> feeds;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (!ins[i]) {
      vals.push_back(nullptr);
      continue;
    }
    std::string name = "in" + std::to_string(i);
    vals.push_back(g.add_input(name, {ins[i]->dtype(), sabre::ir::to_shape(ins[i]->dims()), true}));
    feeds[name] = *ins[i];
  }
  auto* n = g.add_node(op, vals, nout, std::move(attrs), op + "_0");
  for (size_t i = 0; i < nout; ++i) g.add_output(n->output(i));
  return sabre::reference::run(g, feeds);
}

void expect_values(const Tensor& t, const std::vector<int64_t>& dims, const std::vector<float>& want, double tol = 2e-5) {
  ASSERT_EQ(t.dims(), dims);
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(t.get_f64(i), want[i], tol * (1 + std::fabs(want[i]))) << "element " << i;
}

// ---- expected values from onnx.reference (generated) ----
// ConvGroupsDil: shape [1, 4, 2, 3]
const std::vector<float> kConvGroupsDil = {0.935520351, 2.97054982, -2.64945364, 6.49135447, -3.14932632, 2.28281808, -0.585202217, -1.8660363, 3.19734073, -5.88261175, 4.31594419, -2.09978962, 0.334961593, -4.10145044, 3.00366521, -5.83605337, 1.50357771, -0.431092143, -1.31393886, 2.45439267, -4.28083849, 4.77425909, -3.38761187, -0.357140273};
// Conv1d: shape [2, 2, 3]
const std::vector<float> kConv1d = {-0.12490347, 1.49331319, -1.34720719, 0.331536978, -0.0524893962, -0.427627087, 2.14979506, -0.947320342, 0.212841466, 0.815087676, -0.728998721, 0.912528217};
// ResizeLinearHalfPixel: shape [1, 1, 5, 4]
const std::vector<float> kResizeLinearHalfPixel = {0.47942555, 0.726636589, 0.818469822, 0.196958482, 0.336322784, 0.578858554, 0.70168215, 0.222833425, -0.236088276, -0.0122536123, 0.234531477, 0.326333195, -0.808499336, -0.603365779, -0.232619181, 0.429832965, -0.951602101, -0.751143813, -0.349406838, 0.455707908};
// ResizeNearestAsymFloor: shape [1, 1, 4, 7]
const std::vector<float> kResizeNearestAsymFloor = {0.47942555, 0.47942555, 0.47942555, 0.973847628, 0.973847628, 0.0415806621, 0.0415806621, 0.47942555, 0.47942555, 0.47942555, 0.973847628, 0.973847628, 0.0415806621, 0.0415806621, -0.951602101, -0.951602101, -0.951602101, -0.550685525, -0.550685525, 0.656986594, 0.656986594, -0.951602101, -0.951602101, -0.951602101, -0.550685525, -0.550685525, 0.656986594, 0.656986594};
// ResizeLinearAlignSizes: shape [1, 1, 3, 5]
const std::vector<float> kResizeLinearAlignSizes = {0.47942555, 0.726636589, 0.973847628, 0.507714152, 0.0415806621, -0.236088276, -0.0122536123, 0.211581051, 0.280432343, 0.349283636, -0.951602101, -0.751143813, -0.550685525, 0.0531505346, 0.656986594};
// ResizeNearestPreferCeilSizes: shape [1, 1, 5, 4]
const std::vector<float> kResizeNearestPreferCeilSizes = {0.47942555, 0.973847628, 0.973847628, 0.0415806621, 0.47942555, 0.973847628, 0.973847628, 0.0415806621, -0.951602101, -0.550685525, -0.550685525, 0.656986594, -0.951602101, -0.550685525, -0.550685525, 0.656986594, -0.951602101, -0.550685525, -0.550685525, 0.656986594};
// ResizeCubic: shape [1, 1, 4, 6]
const std::vector<float> kResizeCubic = {0.577168047, 0.785315752, 1.14251542, 0.925473273, 0.256754458, -0.145454407, 0.105296604, 0.27815637, 0.568418384, 0.576984882, 0.299018264, 0.133817941, -0.671903431, -0.557164967, -0.377153099, 0.00300395535, 0.368629247, 0.593795955, -1.14377487, -1.06432438, -0.951250076, -0.345484465, 0.410893083, 0.873068333};
// SliceNegSteps: shape [2, 2]
const std::vector<float> kSliceNegSteps = {-0.849969029, 0.97935766, 0.788252056, -0.995436251};
// GeluNone: shape [2, 5]
const std::vector<float> kGeluNone = {1.33015025, 2.91645503, 0.0685626939, -0.0061468496, -0.0813828036, 1.92293882, 2.69731426, -0.157152429, -0.00421614666, -0.151807457};
// GeluTanh: shape [2, 5]
const std::vector<float> kGeluTanh = {1.32992125, 2.91689301, 0.0685626194, -0.00569150224, -0.0815423727, 1.92301166, 2.69778752, -0.157172695, -0.00379900867, -0.15198569};
// LayerNormY: shape [2, 3, 4]
const std::vector<float> kLayerNormY = {1.37861288, 1.11322594, -0.869392097, 0.919086397, 1.17053199, 0.813695669, -0.187119007, -0.390438139, 2.53634167, 0.117376469, 0.0157024264, -0.175778121, 0.709877491, -0.856639802, -0.907055438, -2.12026525, 0.791252673, -0.426506341, -1.68756759, -0.78557086, -0.525067508, 0.16941227, -1.7570734, -1.13214087};
// LayerNormMean: shape [2, 1, 1]
const std::vector<float> kLayerNormMean = {0.134647414, -0.130862162};
// LayerNormInv: shape [2, 1, 1]
const std::vector<float> kLayerNormInv = {1.43274832, 1.43199933};
// MaxPoolCeilDil: shape [1, 2, 3, 2]
const std::vector<float> kMaxPoolCeilDil = {0.47942555, 0.0415806621, 0.80378443, -0.14899902, 0.97935766, 0.280268162, 0.999911845, 0.480204791, 0.973645449, 0.804312468, 0.787705243, 0.979536772};
// AvgPoolIncludePad: shape [1, 2, 3, 3]
const std::vector<float> kAvgPoolIncludePad = {0.334714621, -0.0226405524, -0.317328125, 0.522395849, -0.192441612, -0.374613017, 0.331830144, -0.222903013, -0.160654917, 0.252103657, -0.309648633, -0.0143133663, 0.23841542, -0.501423538, 0.146645665, 0.0520996898, -0.330136746, 0.201424181};
// AvgPoolExcludePad: shape [1, 2, 3, 5]
const std::vector<float> kAvgPoolExcludePad = {0.753107905, 0.435818344, -0.519946098, -0.713988304, -0.454457402, 0.783593833, 0.199920461, -0.676636875, -0.56191957, -0.146673411, 0.746617913, -0.0531891584, -0.775073886, -0.36147356, 0.173738122, 0.567233205, -0.380039096, -0.770553291, -0.0322050899, 0.568930328, 0.35762313, -0.576224506, -0.665901899, 0.219968498, 0.791758537, 0.117224306, -0.72280103, -0.503921151, 0.453204393, 0.94642204};
// PadReflect: shape [4, 7]
const std::vector<float> kPadReflect = {0.656986594, -0.550685525, -0.951602101, -0.550685525, 0.656986594, -0.550685525, -0.951602101, 0.0415806621, 0.973847628, 0.47942555, 0.973847628, 0.0415806621, 0.973847628, 0.47942555, 0.656986594, -0.550685525, -0.951602101, -0.550685525, 0.656986594, -0.550685525, -0.951602101, 0.0415806621, 0.973847628, 0.47942555, 0.973847628, 0.0415806621, 0.973847628, 0.47942555};
// PadWrap: shape [3, 9]
const std::vector<float> kPadWrap = {0.973847628, 0.0415806621, 0.47942555, 0.973847628, 0.0415806621, 0.47942555, 0.973847628, 0.0415806621, 0.47942555, -0.550685525, 0.656986594, -0.951602101, -0.550685525, 0.656986594, -0.951602101, -0.550685525, 0.656986594, -0.951602101, 0.973847628, 0.0415806621, 0.47942555, 0.973847628, 0.0415806621, 0.47942555, 0.973847628, 0.0415806621, 0.47942555};
// PadEdge: shape [4, 4]
const std::vector<float> kPadEdge = {0.47942555, 0.47942555, 0.973847628, 0.0415806621, 0.47942555, 0.47942555, 0.973847628, 0.0415806621, 0.47942555, 0.47942555, 0.973847628, 0.0415806621, -0.951602101, -0.951602101, -0.550685525, 0.656986594};

// ---- validation ----

Graph add_graph(sabre::ir::Shape a, sabre::ir::Shape b) {
  Graph g;
  auto* x = g.add_input("x", {DType::f32, std::move(a), true});
  auto* y = g.add_input("y", {DType::f32, std::move(b), true});
  g.add_output(g.add_node("Add", {x, y}, 1)->output(0));
  return g;
}

std::string error_of(const Graph& g, const std::map<std::string, Tensor>& in) {
  try {
    sabre::reference::run(g, in);
  } catch (const ReferenceError& e) {
    return e.what();
  }
  return "";
}

TEST(Reference, RejectsBadInputsWithClearMessages) {
  Dim b = Dim::symbol("batch"), s = Dim::symbol("seq");
  Graph g = add_graph({b, s}, {b, Dim(4)});
  Tensor x = random_f32({2, 4}, 1), y = random_f32({2, 4}, 2);
  EXPECT_EQ(error_of(g, {{"x", x}, {"y", y}}), "");
  EXPECT_NE(error_of(g, {{"x", x}}).find("missing input 'y'"), std::string::npos);
  EXPECT_NE(error_of(g, {{"x", x}, {"y", y}, {"z", y}}).find("unknown input 'z'"), std::string::npos);
  EXPECT_NE(error_of(g, {{"x", x}, {"y", y.cast(DType::f16)}}).find("dtype f16 but the graph expects f32"), std::string::npos);
  EXPECT_NE(error_of(g, {{"x", random_f32({2, 4, 1}, 3)}, {"y", y}}).find("rank 2"), std::string::npos);
  EXPECT_NE(error_of(g, {{"x", x}, {"y", random_f32({2, 5}, 4)}}).find("expects [batch,4]"), std::string::npos);
  // batch is 2 from x, 3 from y: the same symbol must bind to one value.
  std::string msg = error_of(g, {{"x", x}, {"y", random_f32({3, 4}, 5)}});
  EXPECT_NE(msg.find("symbol 'batch' is 2 from input 'x'"), std::string::npos) << msg;
}

TEST(Reference, PolynomialDimsCheckedAfterBinding) {
  Dim b = Dim::symbol("batch"), s = Dim::symbol("seq");
  Graph g;
  auto* x = g.add_input("x", {DType::f32, {b, s}, true});
  auto* y = g.add_input("y", {DType::f32, {b * s}, true});
  g.add_output(g.add_node("Identity", {x}, 1)->output(0));
  g.add_output(g.add_node("Identity", {y}, 1)->output(0));
  EXPECT_EQ(error_of(g, {{"x", random_f32({2, 3}, 1)}, {"y", random_f32({6}, 2)}}), "");
  std::string msg = error_of(g, {{"x", random_f32({2, 3}, 1)}, {"y", random_f32({5}, 2)}});
  EXPECT_NE(msg.find("batch*seq = 6"), std::string::npos) << msg;
}

TEST(Reference, ConstantsAndChainsAndRegisteredOps) {
  Graph g;
  auto* x = g.add_input("x", {DType::f32, {Dim(3)}, true});
  auto* c = g.add_constant("c", Tensor::from_f32({1.5f, -2.f, 4.f}, {3}));
  auto* m = g.add_node("Mul", {x, c}, 1)->output(0);
  auto* t = g.add_node("Twice", {m}, 1, {}, "twice", "sabre")->output(0);
  auto* r = g.add_node("Relu", {t}, 1)->output(0);
  g.add_output(r);
  g.add_output(m);  // an intermediate that is also an output survives freeing
  EXPECT_THROW(sabre::reference::run(g, {{"x", Tensor::from_f32({1, 2, 3}, {3})}}), ReferenceError);
  sabre::reference::register_kernel("sabre", "Twice", [](const sabre::ir::Node&, const std::vector<const Tensor*>& in) {
    Tensor o = *in[0];
    for (int64_t i = 0; i < o.numel(); ++i) o.set_f64(i, 2 * o.get_f64(i));
    return std::vector<Tensor>{o};
  });
  EXPECT_TRUE(sabre::reference::has_kernel("sabre", "Twice"));
  auto out = sabre::reference::run(g, {{"x", Tensor::from_f32({1, 2, 3}, {3})}});
  expect_values(out[0], {3}, {3, 0, 24});
  expect_values(out[1], {3}, {1.5f, -4, 12});
}

// ---- numerics ----

// Naive batched matmul with numpy broadcasting, in double.
std::vector<double> naive_matmul(const Tensor& a, const Tensor& b, int64_t batch_a, int64_t batch_b, int64_t M, int64_t K,
                                 int64_t N) {
  int64_t B = std::max(batch_a, batch_b);
  std::vector<double> c(B * M * N);
  for (int64_t bb = 0; bb < B; ++bb)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k)
          s += a.get_f64((bb % batch_a) * M * K + i * K + k) * b.get_f64((bb % batch_b) * K * N + k * N + j);
        c[(bb * M + i) * N + j] = s;
      }
  return c;
}

TEST(Reference, MatMulBroadcastsBatchAndVectors) {
  Tensor a = random_f32({3, 5, 300}, 7), b = random_f32({1, 300, 260}, 8);
  auto got = run_op("MatMul", {a, b})[0];
  ASSERT_EQ(got.dims(), (std::vector<int64_t>{3, 5, 260}));
  auto want = naive_matmul(a, b, 3, 1, 5, 300, 260);
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got.get_f64(i), want[i], 1e-4) << i;

  Tensor v = random_f32({300}, 9);
  auto mv = run_op("MatMul", {a, v})[0];  // [3,5,300] x [300] -> [3,5]
  ASSERT_EQ(mv.dims(), (std::vector<int64_t>{3, 5}));
  auto want_mv = naive_matmul(a, v, 3, 1, 5, 300, 1);
  for (size_t i = 0; i < want_mv.size(); ++i) ASSERT_NEAR(mv.get_f64(i), want_mv[i], 1e-4);
  auto vm = run_op("MatMul", {v, b})[0];  // [300] x [1,300,260] -> [1,260]
  ASSERT_EQ(vm.dims(), (std::vector<int64_t>{1, 260}));

  Tensor ai = Tensor::from_i64({1, 2, 3, 4, 5, 6}, {2, 3}), bi = Tensor::from_i64({7, 8, 9, 10, 11, 12}, {3, 2});
  auto mi = run_op("MatMul", {ai, bi})[0];
  EXPECT_EQ(mi.dtype(), DType::i64);
  EXPECT_EQ(mi.to_i64_vector(), (std::vector<int64_t>{58, 64, 139, 154}));
}

TEST(Reference, GemmTransposesAndBroadcastsC) {
  Tensor a = Tensor::from_f32({1, 2, 3, 4, 5, 6}, {3, 2});        // A^T is 2x3
  Tensor b = Tensor::from_f32({1, 0, -1, 2, 1, 0}, {2, 3});       // B^T is 3x2
  Tensor c = Tensor::from_f32({10, 20}, {2});
  auto y = run_op("Gemm", {a, b, c}, {{"transA", int64_t{1}}, {"transB", int64_t{1}}, {"alpha", 2.0}, {"beta", 0.5}})[0];
  // A^T = [[1,3,5],[2,4,6]], B^T = [[1,2],[0,1],[-1,0]]; A^T B^T = [[-4,5],[-4,8]]
  expect_values(y, {2, 2}, {-8 + 5, 10 + 10, -8 + 5, 16 + 10});
}

TEST(Reference, MatMulF16RoundsOncePerOutput) {
  // 1 + 2^-11 is a tie between two f16 values: round to even gives 1.0; f32 accumulation keeps it.
  Tensor a = Tensor::from_f32({1.0f, 1.0f}, {1, 2}).cast(DType::f16);
  Tensor b = Tensor::from_f32({1.0f, 0.00048828125f}, {2, 1}).cast(DType::f16);
  auto y = run_op("MatMul", {a, b})[0];
  EXPECT_EQ(y.dtype(), DType::f16);
  EXPECT_EQ(y.data<uint16_t>()[0], 0x3c00);  // 1.0
  Tensor b2 = Tensor::from_f32({1.0f, 0.00146484375f}, {2, 1}).cast(DType::f16);  // 1 + 3*2^-11 -> 1 + 2^-9
  EXPECT_EQ(run_op("MatMul", {a, b2})[0].data<uint16_t>()[0], 0x3c02);
}

TEST(Reference, CastRoundsTruncatesAndHandlesBool) {
  Tensor x = Tensor::from_f32({1.00048828125f, 1.00146484375f, -2.7f, 2.7f, 0.0f, 65520.f}, {6});
  auto h = run_op("Cast", {x}, {{"to", std::string("f16")}})[0];
  std::vector<uint16_t> bits(h.data<uint16_t>(), h.data<uint16_t>() + 6);
  EXPECT_EQ(bits[0], 0x3c00);  // tie -> even
  EXPECT_EQ(bits[1], 0x3c02);  // tie -> even (up)
  EXPECT_EQ(bits[5], 0x7c00);  // 65520 rounds to inf in f16
  auto bf = run_op("Cast", {Tensor::from_f32({1.00390625f, 1.01171875f}, {2})}, {{"to", std::string("bf16")}})[0];
  EXPECT_EQ(bf.data<uint16_t>()[0], 0x3f80);  // 1 + 2^-8: tie -> even = 1.0
  EXPECT_EQ(bf.data<uint16_t>()[1], 0x3f82);  // 1 + 3*2^-8: tie -> even = 1 + 2^-6
  auto i = run_op("Cast", {x}, {{"to", std::string("i32")}})[0];
  EXPECT_EQ(i.to_i64_vector(), (std::vector<int64_t>{1, 1, -2, 2, 0, 65520}));
  auto b = run_op("Cast", {x}, {{"to", std::string("bool")}})[0];
  EXPECT_EQ(b.to_i64_vector(), (std::vector<int64_t>{1, 1, 1, 1, 0, 1}));
  auto back = run_op("Cast", {b}, {{"to", std::string("f32")}})[0];
  expect_values(back, {6}, {1, 1, 1, 1, 0, 1});
}

TEST(Reference, IntegerDivTruncatesAndPowKeepsBaseType) {
  auto d = run_op("Div", {Tensor::from_i64({7, -7, 7, -7}, {4}), Tensor::from_i64({2, 2, -2, -2}, {4})})[0];
  EXPECT_EQ(d.to_i64_vector(), (std::vector<int64_t>{3, -3, -3, 3}));
  auto p = run_op("Pow", {Tensor::from_i64({2, 3, -2}, {3}), Tensor::from_f32({3.f, 2.f, 3.f}, {3})})[0];
  EXPECT_EQ(p.dtype(), DType::i64);
  EXPECT_EQ(p.to_i64_vector(), (std::vector<int64_t>{8, 9, -8}));
}

// Mod's two sign conventions, and the integer divisors that trap in C (0, and -1 with INT64_MIN)
// defined as 0 like numpy's mod by zero; the GPU kernels' i_mod/i_fmod agree (ew_device.cuh).
TEST(Reference, ModSignsAndIntegerEdgeCases) {
  const int64_t lo = std::numeric_limits<int64_t>::min();
  auto a = Tensor::from_i64({7, -7, 7, -7, 5, lo, lo}, {7});
  auto b = Tensor::from_i64({3, 3, -3, -3, 0, -1, 3}, {7});
  EXPECT_EQ(run_op("Mod", {a, b})[0].to_i64_vector(), (std::vector<int64_t>{1, 2, -2, -1, 0, 0, 1}));
  EXPECT_EQ(run_op("Mod", {a, b}, {{"fmod", int64_t{1}}})[0].to_i64_vector(),
            (std::vector<int64_t>{1, -1, 1, -1, 0, 0, -2}));
  auto f = run_op("Mod", {Tensor::from_f32({5.5f, -5.5f, 5.5f}, {3}), Tensor::from_f32({2.f, 2.f, -2.f}, {3})},
                  {{"fmod", int64_t{1}}})[0];
  expect_values(f, {3}, {1.5f, -1.5f, 1.5f});
  // i32: INT32_MIN % -1 must not trap either.
  auto i32 = run_op("Mod", {Tensor::from_i64({INT32_MIN}, {1}).cast(DType::i32), Tensor::from_i64({-1}, {1}).cast(DType::i32)})[0];
  EXPECT_EQ(i32.to_i64_vector(), (std::vector<int64_t>{0}));
}

TEST(Reference, RoundingSignAndFloatPredicates) {
  expect_values(run_op("Round", {Tensor::from_f32({0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4f}, {6})})[0], {6},
                {0.f, 2.f, 2.f, -0.f, -2.f, 2.f});
  expect_values(run_op("Sign", {Tensor::from_f32({-3.f, 0.f, 2.f}, {3})})[0], {3}, {-1.f, 0.f, 1.f});
  EXPECT_EQ(run_op("Sign", {Tensor::from_i64({-9, 0, 4}, {3})})[0].to_i64_vector(), (std::vector<int64_t>{-1, 0, 1}));
  const float inf = std::numeric_limits<float>::infinity();
  auto x = Tensor::from_f32({-inf, inf, NAN, 1.f}, {4});
  EXPECT_EQ(run_op("IsInf", {x}, {{"detect_positive", int64_t{0}}})[0].to_i64_vector(), (std::vector<int64_t>{1, 0, 0, 0}));
  EXPECT_EQ(run_op("IsNaN", {x})[0].to_i64_vector(), (std::vector<int64_t>{0, 0, 1, 0}));
  // Softplus stays finite where e^x overflows.
  expect_values(run_op("Softplus", {Tensor::from_f32({1000.f, -1000.f, 0.f}, {3})})[0], {3}, {1000.f, 0.f, 0.6931472f});
  auto hm = run_op("Hardmax", {Tensor::from_f32({1.f, 3.f, 3.f, 0.f, -1.f, -2.f}, {2, 3})})[0];
  expect_values(hm, {2, 3}, {0.f, 1.f, 0.f, 1.f, 0.f, 0.f});  // the first maximum wins
}

TEST(Reference, BitShiftWrapsToU8) {
  auto a = Tensor::from_i64({200, 3, 255}, {3}).cast(DType::u8);
  auto b = Tensor::from_i64({1, 9, 7}, {3}).cast(DType::u8);
  EXPECT_EQ(run_op("BitShift", {a, b}, {{"direction", std::string("LEFT")}})[0].to_i64_vector(),
            (std::vector<int64_t>{144, 0, 128}));
  EXPECT_EQ(run_op("BitShift", {a, b}, {{"direction", std::string("RIGHT")}})[0].to_i64_vector(),
            (std::vector<int64_t>{100, 0, 1}));
}

// Direct convolution, independent of the im2col path.
TEST(Reference, ConvMatchesDirectLoopWithGroupsStridesDilationsPads) {
  const int64_t N = 2, C = 6, H = 9, W = 8, M = 4, G = 2, KH = 3, KW = 2;
  Tensor x = random_f32({N, C, H, W}, 11), w = random_f32({M, C / G, KH, KW}, 12), b = random_f32({M}, 13);
  const int64_t sh = 2, sw = 1, dh = 2, dw = 3, pt = 1, pl = 2, pb = 0, pr = 1;
  auto y = run_op("Conv", {x, w, b},
                  {{"group", G}, {"strides", std::vector<int64_t>{sh, sw}}, {"dilations", std::vector<int64_t>{dh, dw}},
                   {"pads", std::vector<int64_t>{pt, pl, pb, pr}}})[0];
  const int64_t OH = (H + pt + pb - dh * (KH - 1) - 1) / sh + 1, OW = (W + pl + pr - dw * (KW - 1) - 1) / sw + 1;
  ASSERT_EQ(y.dims(), (std::vector<int64_t>{N, M, OH, OW}));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double s = b.get_f64(m);
          int64_t g = m / (M / G);
          for (int64_t c = 0; c < C / G; ++c)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t ih = oh * sh - pt + kh * dh, iw = ow * sw - pl + kw * dw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                s += x.get_f64(((n * C + g * (C / G) + c) * H + ih) * W + iw) * w.get_f64(((m * (C / G) + c) * KH + kh) * KW + kw);
              }
          ASSERT_NEAR(y.get_f64(((n * M + m) * OH + oh) * OW + ow), s, 1e-5);
        }
}

TEST(Reference, ConvAgreesWithOnnxReference) {
  auto y = run_op("Conv", {seq({1, 4, 5, 6}), seq({4, 2, 3, 2}, 1.1), seq({4}, 2.0)},
                  {{"group", int64_t{2}}, {"dilations", std::vector<int64_t>{2, 1}}, {"strides", std::vector<int64_t>{1, 2}},
                   {"pads", std::vector<int64_t>{1, 0, 0, 1}}})[0];
  expect_values(y, {1, 4, 2, 3}, kConvGroupsDil);
  auto y1 = run_op("Conv", {seq({2, 3, 7}), seq({2, 3, 3}, 0.2)},
                   {{"strides", std::vector<int64_t>{2}}, {"pads", std::vector<int64_t>{2, 1}}, {"dilations", std::vector<int64_t>{2}}})[0];
  expect_values(y1, {2, 2, 3}, kConv1d);
  // SAME_UPPER: output = ceil(in / stride), extra padding at the end.
  auto ys = run_op("Conv", {seq({1, 1, 5, 5}), seq({1, 1, 2, 2})}, {{"auto_pad", std::string("SAME_UPPER")}, {"strides", std::vector<int64_t>{2, 2}}})[0];
  EXPECT_EQ(ys.dims(), (std::vector<int64_t>{1, 1, 3, 3}));
}

TEST(Reference, ResizeModesAgreeWithOnnxReference) {
  Tensor x = seq({1, 1, 2, 3});
  expect_values(run_op("Resize", {x, std::nullopt, Tensor::from_f32({1, 1, 2.5f, 1.5f}, {4})}, {{"mode", std::string("linear")}})[0],
                {1, 1, 5, 4}, kResizeLinearHalfPixel);
  expect_values(run_op("Resize", {x, std::nullopt, Tensor::from_f32({1, 1, 2, 2.5f}, {4})},
                       {{"mode", std::string("nearest")}, {"coordinate_transformation_mode", std::string("asymmetric")},
                        {"nearest_mode", std::string("floor")}})[0],
                {1, 1, 4, 7}, kResizeNearestAsymFloor);
  expect_values(run_op("Resize", {x, std::nullopt, std::nullopt, i64({1, 1, 3, 5})},
                       {{"mode", std::string("linear")}, {"coordinate_transformation_mode", std::string("align_corners")}})[0],
                {1, 1, 3, 5}, kResizeLinearAlignSizes);
  expect_values(run_op("Resize", {x, std::nullopt, std::nullopt, i64({1, 1, 5, 4})},
                       {{"mode", std::string("nearest")}, {"nearest_mode", std::string("round_prefer_ceil")}})[0],
                {1, 1, 5, 4}, kResizeNearestPreferCeilSizes);
  expect_values(run_op("Resize", {x, std::nullopt, Tensor::from_f32({1, 1, 2, 2}, {4})}, {{"mode", std::string("cubic")}})[0],
                {1, 1, 4, 6}, kResizeCubic);
}

TEST(Reference, SliceNegativeStepsAndClamping) {
  auto y = run_op("Slice", {seq({4, 6}), i64({-1, 100}), i64({-100, 0}), i64({0, 1}), i64({-2, -3})})[0];
  expect_values(y, {2, 2}, kSliceNegSteps);
  // Hand-checked: rows 3,1 and cols 5,2 of a 4x6 iota.
  std::vector<int64_t> iota(24);
  for (int i = 0; i < 24; ++i) iota[i] = i;
  auto yi = run_op("Slice", {Tensor::from_i64(iota, {4, 6}), i64({-1, 100}), i64({-100, 0}), i64({0, 1}), i64({-2, -3})})[0];
  EXPECT_EQ(yi.to_i64_vector(), (std::vector<int64_t>{23, 20, 11, 8}));
  auto empty = run_op("Slice", {Tensor::from_i64(iota, {4, 6}), i64({2}), i64({2}), i64({1})})[0];
  EXPECT_EQ(empty.dims(), (std::vector<int64_t>{4, 0}));
}

TEST(Reference, GeluAndLayerNormAgreeWithOnnxReference) {
  Tensor xg = seq({2, 5});
  for (int64_t i = 0; i < xg.numel(); ++i) xg.set_f64(i, 3 * xg.get_f64(i));
  expect_values(run_op("Gelu", {xg})[0], {2, 5}, kGeluNone);
  expect_values(run_op("Gelu", {xg}, {{"approximate", std::string("tanh")}})[0], {2, 5}, kGeluTanh);
  auto ln = run_op("LayerNormalization", {seq({2, 3, 4}), seq({3, 4}, 0.9), seq({4}, 1.7)},
                   {{"axis", int64_t{1}}, {"epsilon", 1e-3}}, 3);
  expect_values(ln[0], {2, 3, 4}, kLayerNormY);
  expect_values(ln[1], {2, 1, 1}, kLayerNormMean);
  expect_values(ln[2], {2, 1, 1}, kLayerNormInv);
}

TEST(Reference, PoolsAgreeWithOnnxReference) {
  Tensor x = seq({1, 2, 5, 5});
  expect_values(run_op("MaxPool", {x},
                       {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}},
                        {"dilations", std::vector<int64_t>{1, 2}}, {"pads", std::vector<int64_t>{1, 0, 0, 0}},
                        {"ceil_mode", int64_t{1}}})[0],
                {1, 2, 3, 2}, kMaxPoolCeilDil);
  expect_values(run_op("AveragePool", {x},
                       {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}},
                        {"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"count_include_pad", int64_t{1}}, {"ceil_mode", int64_t{1}}})[0],
                {1, 2, 3, 3}, kAvgPoolIncludePad);
  expect_values(run_op("AveragePool", {x},
                       {{"kernel_shape", std::vector<int64_t>{3, 2}}, {"strides", std::vector<int64_t>{2, 1}},
                        {"pads", std::vector<int64_t>{1, 0, 1, 1}}})[0],
                {1, 2, 3, 5}, kAvgPoolExcludePad);
}

TEST(Reference, PadModesAgreeWithOnnxReference) {
  Tensor x = seq({2, 3});
  expect_values(run_op("Pad", {x, i64({1, 2, 1, 2})}, {{"mode", std::string("reflect")}})[0], {4, 7}, kPadReflect);
  expect_values(run_op("Pad", {x, i64({0, 2, 1, 4})}, {{"mode", std::string("wrap")}})[0], {3, 9}, kPadWrap);
  expect_values(run_op("Pad", {x, i64({2, 1, 0, 0})}, {{"mode", std::string("edge")}})[0], {4, 4}, kPadEdge);
  auto c = run_op("Pad", {x, i64({1, 0, 0, 1}), Tensor::scalar_f32(7.5f)})[0];
  ASSERT_EQ(c.dims(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(c.get_f64(0), 7.5);
  EXPECT_EQ(c.get_f64(4), x.get_f64(0));
  EXPECT_EQ(c.get_f64(7), 7.5);
}

TEST(Reference, ShapeOpsHandChecked) {
  Tensor x = random_f32({2, 3, 4}, 21);
  EXPECT_EQ(run_op("Reshape", {x, i64({0, -1})})[0].dims(), (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(run_op("Reshape", {Tensor(DType::f32, {0, 3}), i64({0, 3})}, {{"allowzero", int64_t{1}}})[0].dims(),
            (std::vector<int64_t>{0, 3}));
  auto t = run_op("Transpose", {x}, {{"perm", std::vector<int64_t>{2, 0, 1}}})[0];
  ASSERT_EQ(t.dims(), (std::vector<int64_t>{4, 2, 3}));
  EXPECT_EQ(t.get_f64((3 * 2 + 1) * 3 + 2), x.get_f64((1 * 3 + 2) * 4 + 3));
  auto parts = run_op("Split", {x}, {{"axis", int64_t{2}}, {"num_outputs", int64_t{3}}}, 3);
  EXPECT_EQ(parts[0].dims(), (std::vector<int64_t>{2, 3, 2}));
  EXPECT_EQ(parts[2].dims(), (std::vector<int64_t>{2, 3, 0}));  // ceil(4/3)=2: 2, 2, 0
  auto g = run_op("Gather", {x, Tensor::from_i64({-1, 0}, {2})}, {{"axis", int64_t{1}}})[0];
  ASSERT_EQ(g.dims(), (std::vector<int64_t>{2, 2, 4}));
  EXPECT_EQ(g.get_f64(0), x.get_f64(8));
  auto sh = run_op("Shape", {x}, {{"start", int64_t{-2}}})[0];
  EXPECT_EQ(sh.to_i64_vector(), (std::vector<int64_t>{3, 4}));
  auto e = run_op("Expand", {Tensor::from_f32({1, 2}, {2, 1}), i64({3, 1, 4})})[0];
  EXPECT_EQ(e.dims(), (std::vector<int64_t>{3, 2, 4}));
  EXPECT_EQ(e.get_f64(5), 2);
  auto r = run_op("Range", {Tensor::from_i64({10}, {}), Tensor::from_i64({1}, {}), Tensor::from_i64({-3}, {})})[0];
  EXPECT_EQ(r.to_i64_vector(), (std::vector<int64_t>{10, 7, 4}));
  auto tri = run_op("Trilu", {Tensor::from_i64({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3}), Tensor::from_i64({-1}, {})},
                    {{"upper", int64_t{0}}})[0];
  EXPECT_EQ(tri.to_i64_vector(), (std::vector<int64_t>{0, 0, 0, 4, 0, 0, 7, 8, 0}));
  auto sq = run_op("Squeeze", {Tensor(DType::f32, {1, 3, 1})})[0];
  EXPECT_EQ(sq.dims(), (std::vector<int64_t>{3}));
  auto us = run_op("Unsqueeze", {Tensor(DType::f32, {3}), i64({-1, 0})})[0];
  EXPECT_EQ(us.dims(), (std::vector<int64_t>{1, 3, 1}));
}

TEST(Reference, ReductionsKeepdimsAndNoop) {
  Tensor x = Tensor::from_f32({1, 2, 3, 4, 5, 6}, {2, 3});
  expect_values(run_op("ReduceSum", {x, i64({1})}, {{"keepdims", int64_t{0}}})[0], {2}, {6, 15});
  expect_values(run_op("ReduceMean", {x, i64({-2})})[0], {1, 3}, {2.5, 3.5, 4.5});
  expect_values(run_op("ReduceMax", {x})[0], {1, 1}, {6});
  expect_values(run_op("ReduceSum", {x, i64({})}, {{"noop_with_empty_axes", int64_t{1}}})[0], {2, 3}, {1, 2, 3, 4, 5, 6});
  expect_values(run_op("Softmax", {Tensor::from_f32({0, std::log(3.f)}, {1, 2})}, {{"axis", int64_t{0}}})[0], {1, 2}, {1, 1});
  expect_values(run_op("Softmax", {Tensor::from_f32({0, std::log(3.f)}, {1, 2})})[0], {1, 2}, {0.25, 0.75});
}

// A 2-layer BERT-style encoder (hidden 256, 4 heads, seq 128, FFN 1024) on the reference executor:
// a finite output of the right shape in which each sequence is computed on its own, i.e. the second
// sequence of a batch of 2 is what a batch of 1 holding it gives (the head reshapes and transposes
// mix sequences when they get the batch dim wrong). How fast it runs is for a benchmark, not a test.
TEST(Reference, SmallEncoderKeepsSequencesApart) {
  const int64_t S = 128, Hd = 256, NH = 4, F = 4 * Hd;
  Graph g;
  auto* x = g.add_input("x", {DType::f32, {Dim::symbol("batch"), Dim(S), Dim(Hd)}, true});
  uint32_t seed = 100;
  auto w = [&](std::vector<int64_t> d) { return g.add_constant("", random_f32(std::move(d), seed++)); };
  auto node = [&](const std::string& op, std::vector<sabre::ir::Value*> in, std::map<std::string, AttrValue> a = {}) {
    return g.add_node(op, std::move(in), 1, std::move(a))->output(0);
  };
  auto shape = [&](std::vector<int64_t> s) { return g.add_constant("", i64(std::move(s))); };
  sabre::ir::Value* h = x;
  for (int layer = 0; layer < 2; ++layer) {
    auto heads = [&](sabre::ir::Value* v) {
      return node("Transpose", {node("Reshape", {v, shape({0, S, NH, Hd / NH})})}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
    };
    auto q = heads(node("Add", {node("MatMul", {h, w({Hd, Hd})}), w({Hd})}));
    auto k = heads(node("Add", {node("MatMul", {h, w({Hd, Hd})}), w({Hd})}));
    auto v = heads(node("Add", {node("MatMul", {h, w({Hd, Hd})}), w({Hd})}));
    auto kt = node("Transpose", {k}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
    auto scores = node("Div", {node("MatMul", {q, kt}), g.add_constant("", Tensor::scalar_f32(8.f))});
    auto ctx = node("MatMul", {node("Softmax", {scores}), v});
    ctx = node("Reshape", {node("Transpose", {ctx}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}}), shape({0, S, Hd})});
    auto attn = node("Add", {node("MatMul", {ctx, w({Hd, Hd})}), h});
    h = node("LayerNormalization", {attn, w({Hd}), w({Hd})});
    auto ff = node("Gelu", {node("Add", {node("MatMul", {h, w({Hd, F})}), w({F})})});
    h = node("LayerNormalization", {node("Add", {node("MatMul", {ff, w({F, Hd})}), h}), w({Hd}), w({Hd})});
  }
  g.add_output(h);
  const Tensor x2 = random_f32({2, S, Hd}, 1);
  Tensor x1(DType::f32, {1, S, Hd});
  for (int64_t i = 0; i < x1.numel(); ++i) x1.set_f64(i, x2.get_f64(S * Hd + i));
  auto out2 = sabre::reference::run(g, {{"x", x2}});
  auto out1 = sabre::reference::run(g, {{"x", x1}});
  ASSERT_EQ(out2[0].dims(), (std::vector<int64_t>{2, S, Hd}));
  ASSERT_EQ(out1[0].dims(), (std::vector<int64_t>{1, S, Hd}));
  for (int64_t i = 0; i < out2[0].numel(); ++i) ASSERT_TRUE(std::isfinite(out2[0].get_f64(i))) << i;
  for (int64_t i = 0; i < out1[0].numel(); ++i) {
    const double want = out1[0].get_f64(i), got = out2[0].get_f64(S * Hd + i);
    ASSERT_NEAR(got, want, 1e-5 * std::max(1.0, std::fabs(want))) << "element " << i << " of the second sequence";
  }
  // The sequences differ, so equal halves would not pass by accident.
  EXPECT_NE(out2[0].get_f64(0), out2[0].get_f64(S * Hd));
}

// A partitioned region (sabre.Composite) is inferred and evaluated by the IR and the reference
// themselves: a graph read back from an artifact or a test runs without the partitioner.
TEST(Reference, CompositeRunsItsBodyWithoutThePartitioner) {
  auto body = std::make_shared<Graph>(sabre::ir::parse_graph(R"(graph region(%a: f32[2,3], %b: f32[2,3]) -> (%y) {
    %s = Add(%a, %b)
    %y = Relu(%s)
  })"));
  Graph g = sabre::ir::parse_graph(R"(graph g(%x: f32[2,3], %z: f32[2,3]) -> (%w) {
    %w = Neg(%x)
  })");
  sabre::ir::Node* c = g.add_node("Composite", {g.inputs()[0], g.inputs()[1]}, 1,
                                  {{"body", AttrValue(body)}, {"pattern", AttrValue(std::string("test.add_relu"))}},
                                  "region0", "sabre");
  g.set_outputs({c->output(0)});
  g.remove_dead();
  sabre::ir::infer_types(g);
  EXPECT_EQ(sabre::ir::str(g.outputs()[0]->shape()), "[2,3]");
  Tensor x = random_f32({2, 3}, 7), z = random_f32({2, 3}, 8);
  auto out = sabre::reference::run(g, {{"x", x}, {"z", z}});
  ASSERT_EQ(out.size(), 1u);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(out[0].get_f64(i), std::max(0.0f, float(x.get_f64(i)) + float(z.get_f64(i))));
}

}  // namespace
