// Sequence values and STRING tensors: shape inference, the reference kernels (against values computed
// by hand from random inputs), .npy string round trips, and the refusals where they are not taken.
#include <gtest/gtest.h>

#include <random>

#include "ir/graph.h"
#include "ir/infer.h"
#include "ir/npy.h"
#include "random_tensor.h"
#include "reference/reference.h"

namespace {

using sabre::ir::AttrValue;
using sabre::ir::DType;
using sabre::ir::Graph;
using sabre::ir::Tensor;
using sabre::ir::TensorType;
using sabre::reference::ReferenceError;

Tensor rnd(std::vector<int64_t> dims, uint32_t seed) {
  std::mt19937 rng(seed);
  return sabre::test_util::random_f32(std::move(dims), rng);
}

Tensor scalar_i64(int64_t v) { return Tensor::from_i64({v}, {}); }

TensorType type_of(const Tensor& t) {
  TensorType ty{t.dtype(), sabre::ir::to_shape(t.is_sequence() ? std::vector<int64_t>{} : t.dims()), true, t.is_sequence()};
  if (t.is_sequence()) {
    ty.elem_rank_known = !t.elements().empty();
    if (ty.elem_rank_known) ty.shape = sabre::ir::to_shape(t.elements()[0].dims());
  }
  return ty;
}

// A graph of one node over graph inputs (shape-inferred like an import), run on the reference.
std::vector<Tensor> run_op(const std::string& op, const std::vector<Tensor>& ins,
                           std::map<std::string, AttrValue> attrs = {}) {
  Graph g;
  std::vector<sabre::ir::Value*> vals;
  std::map<std::string, Tensor> feeds;
  for (size_t i = 0; i < ins.size(); ++i) {
    const std::string name = "in" + std::to_string(i);
    vals.push_back(g.add_input(name, type_of(ins[i])));
    feeds[name] = ins[i];
  }
  auto* n = g.add_node(op, vals, 1, std::move(attrs), op + "_0");
  g.add_output(n->output(0));
  sabre::ir::infer_types(g);
  return sabre::reference::run(g, feeds);
}

void expect_same(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.dtype(), b.dtype());
  ASSERT_EQ(a.dims(), b.dims());
  for (int64_t i = 0; i < a.numel(); ++i) EXPECT_EQ(a.get_f64(i), b.get_f64(i)) << i;
}

TEST(Sequence, ConstructInsertEraseAtLength) {
  const Tensor x = rnd({2, 3}, 1), y = rnd({4, 3}, 2), z = rnd({1, 3}, 3);
  // SequenceConstruct keeps order; element shapes may differ (dim 0 here).
  Tensor s = run_op("SequenceConstruct", {x, y})[0];
  ASSERT_TRUE(s.is_sequence());
  ASSERT_EQ(s.elements().size(), 2u);
  expect_same(s.elements()[1], y);
  // Insert z at position -1: before the last element -> [x, z, y].
  Tensor s2 = run_op("SequenceInsert", {s, z, scalar_i64(-1)})[0];
  ASSERT_EQ(s2.elements().size(), 3u);
  expect_same(s2.elements()[0], x);
  expect_same(s2.elements()[1], z);
  expect_same(s2.elements()[2], y);
  // Without a position: appended.
  Tensor s3 = run_op("SequenceInsert", {s, z})[0];
  expect_same(s3.elements()[2], z);
  // Erase position 0 -> [z, y]; without a position the last goes.
  Tensor s4 = run_op("SequenceErase", {s2, scalar_i64(0)})[0];
  ASSERT_EQ(s4.elements().size(), 2u);
  expect_same(s4.elements()[0], z);
  EXPECT_EQ(run_op("SequenceErase", {s2})[0].elements().size(), 2u);
  expect_same(run_op("SequenceErase", {s2})[0].elements()[1], z);
  expect_same(run_op("SequenceAt", {s2, scalar_i64(-3)})[0], x);
  expect_same(run_op("SequenceAt", {s2, Tensor::from_i64({1}, {1})})[0], z);  // [1] as ONNX's test data gives
  EXPECT_EQ(run_op("SequenceLength", {s2})[0].get_i64(0), 3);
}

TEST(Sequence, PositionsOutOfRangeAreErrors) {
  const Tensor s = Tensor::sequence(DType::f32, {rnd({2}, 4), rnd({2}, 5)});
  EXPECT_THROW(run_op("SequenceAt", {s, scalar_i64(2)}), ReferenceError);
  EXPECT_THROW(run_op("SequenceAt", {s, scalar_i64(-3)}), ReferenceError);
  EXPECT_THROW(run_op("SequenceInsert", {s, rnd({2}, 6), scalar_i64(3)}), ReferenceError);
  EXPECT_NO_THROW(run_op("SequenceInsert", {s, rnd({2}, 6), scalar_i64(2)}));
  try {
    run_op("SequenceErase", {Tensor::sequence(DType::f32, {}), scalar_i64(0)});
    FAIL() << "erase from an empty sequence";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("empty sequence"), std::string::npos) << e.what();
  }
}

TEST(Sequence, SplitToSequenceAndConcatFromSequence) {
  const Tensor x = rnd({2, 5, 3}, 7);
  // Default: pieces of 1 along axis 1 (keepdims); keepdims=0 drops the axis.
  Tensor s = run_op("SplitToSequence", {x}, {{"axis", int64_t{1}}})[0];
  ASSERT_EQ(s.elements().size(), 5u);
  for (int64_t k = 0; k < 5; ++k) {
    const Tensor& e = s.elements()[k];
    ASSERT_EQ(e.dims(), (std::vector<int64_t>{2, 1, 3}));
    for (int64_t a = 0; a < 2; ++a)
      for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(e.data<float>()[a * 3 + c], x.data<float>()[(a * 5 + k) * 3 + c]);
  }
  Tensor s0 = run_op("SplitToSequence", {x}, {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}})[0];
  EXPECT_EQ(s0.elements()[0].dims(), (std::vector<int64_t>{2, 3}));
  // A scalar split: chunks of 2, the last shorter (2, 2, 1).
  Tensor s2 = run_op("SplitToSequence", {x, scalar_i64(2)}, {{"axis", int64_t{1}}})[0];
  ASSERT_EQ(s2.elements().size(), 3u);
  EXPECT_EQ(s2.elements()[2].dims(), (std::vector<int64_t>{2, 1, 3}));
  EXPECT_EQ(s2.elements()[2].data<float>()[0], x.data<float>()[4 * 3]);
  // Listed sizes must add up to the axis.
  Tensor s3 = run_op("SplitToSequence", {x, Tensor::from_i64({1, 4}, {2})}, {{"axis", int64_t{1}}})[0];
  EXPECT_EQ(s3.elements()[1].dims(), (std::vector<int64_t>{2, 4, 3}));
  EXPECT_THROW(run_op("SplitToSequence", {x, Tensor::from_i64({1, 3}, {2})}, {{"axis", int64_t{1}}}), ReferenceError);

  // Concatenating the pieces back gives x; with new_axis they stack along a new axis.
  expect_same(run_op("ConcatFromSequence", {s2}, {{"axis", int64_t{1}}})[0], x);
  Tensor st = run_op("ConcatFromSequence", {s0}, {{"axis", int64_t{-1}}, {"new_axis", int64_t{1}}})[0];
  ASSERT_EQ(st.dims(), (std::vector<int64_t>{2, 3, 5}));
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t k = 0; k < 5; ++k)
        EXPECT_EQ(st.data<float>()[(a * 3 + c) * 5 + k], x.data<float>()[(a * 5 + k) * 3 + c]);
}

TEST(Sequence, InferenceTypesSequencesAndJoinsShapes) {
  Graph g;
  auto* x = g.add_input("x", {DType::f32, sabre::ir::to_shape({2, 3}), true});
  auto* y = g.add_input("y", {DType::f32, sabre::ir::to_shape({4, 3}), true});
  auto* s = g.add_node("SequenceConstruct", {x, y}, 1, {}, "sc")->output(0);
  auto* at = g.add_node("SequenceAt", {s, g.add_constant("p", scalar_i64(0))}, 1, {}, "at")->output(0);
  g.add_output(at);
  sabre::ir::infer_types(g);
  EXPECT_TRUE(s->type().sequence);
  EXPECT_EQ(s->dtype(), DType::f32);
  ASSERT_EQ(at->shape().size(), 2u);
  EXPECT_FALSE(at->shape()[0].is_static());  // 2 vs 4: a fresh symbol
  EXPECT_EQ(at->shape()[1].value(), 3);
  EXPECT_FALSE(at->type().sequence);
}

// A sequence input whose elements nothing describes stays undescribed after an insert (its elements
// may have any shape: claiming the inserted tensor's shape would let shape folding fold wrong values);
// inserting into a SequenceEmpty gives exactly the tensor's shape.
TEST(Sequence, InsertIntoUndescribedSequenceKeepsShapeUnknown) {
  Graph g;
  TensorType undescribed{DType::f32, {}, true, true};
  undescribed.elem_rank_known = false;
  auto* s = g.add_input("s", undescribed);
  auto* x = g.add_input("x", {DType::f32, sabre::ir::to_shape({3}), true});
  auto* ins = g.add_node("SequenceInsert", {s, x}, 1, {}, "ins")->output(0);
  auto* e = g.add_node("SequenceEmpty", {}, 1, {{"dtype", std::string("f32")}}, "empty")->output(0);
  auto* ins2 = g.add_node("SequenceInsert", {e, x}, 1, {}, "ins2")->output(0);
  g.add_output(ins);
  g.add_output(ins2);
  sabre::ir::infer_types(g);
  EXPECT_TRUE(ins->type().sequence);
  EXPECT_FALSE(ins->type().elem_rank_known);
  EXPECT_TRUE(ins2->type().elem_rank_known);
  EXPECT_EQ(ins2->shape(), sabre::ir::to_shape({3}));
}

TEST(Sequence, OtherOpsRefuseSequencesAndStrings) {
  Graph g;
  auto* x = g.add_input("x", {DType::f32, sabre::ir::to_shape({2}), true});
  auto* s = g.add_node("SequenceConstruct", {x}, 1, {}, "sc")->output(0);
  g.add_output(g.add_node("Relu", {s}, 1, {}, "relu")->output(0));
  try {
    sabre::ir::infer_types(g);
    FAIL() << "Relu of a sequence";
  } catch (const sabre::ir::ShapeUnsupported& e) {
    EXPECT_NE(std::string(e.what()).find("'relu' (Relu)"), std::string::npos) << e.what();
  }
  // The reference refuses a string tensor for an op not written for strings (no crash on its bytes).
  Graph h;
  auto* t = h.add_input("t", {DType::str, sabre::ir::to_shape({2}), true});
  h.add_output(h.add_node("Neg", {t}, 1, {}, "neg")->output(0));
  try {
    sabre::reference::run(h, {{"t", Tensor::from_strings({"a", "b"}, {2})}});
    FAIL() << "Neg of strings";
  } catch (const ReferenceError& e) {
    EXPECT_NE(std::string(e.what()).find("string tensor"), std::string::npos) << e.what();
  }
}

// Random lowercase words, some of them stopwords, some upper-cased.
std::vector<std::string> random_words(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  const std::vector<std::string> pool = {"monday", "Monday", "tuesday", "WEDNESday", "x", "thursday", "MONDAY"};
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) out.push_back(pool[rng() % pool.size()]);
  return out;
}

TEST(Strings, StringNormalizerAgainstHandComputed) {
  const std::vector<std::string> words = random_words(12, 11);
  for (int sensitive : {0, 1}) {
    for (const std::string action : {"NONE", "LOWER", "UPPER"}) {
      std::vector<std::string> want;
      for (const std::string& w : words) {
        std::string low = w, up = w;
        for (char& c : low) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        for (char& c : up) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        if (sensitive ? w == "monday" : low == "monday") continue;
        want.push_back(action == "NONE" ? w : action == "LOWER" ? low : up);
      }
      if (want.empty()) want.push_back("");
      Tensor y = run_op("StringNormalizer", {Tensor::from_strings(words, {1, 12})},
                        {{"case_change_action", action},
                         {"is_case_sensitive", int64_t{sensitive}},
                         {"stopwords", std::vector<std::string>{"monday"}}})[0];
      ASSERT_EQ(y.dtype(), DType::str);
      EXPECT_EQ(y.dims(), (std::vector<int64_t>{1, static_cast<int64_t>(want.size())}));
      EXPECT_EQ(y.strings(), want) << action << " sensitive=" << sensitive;
    }
  }
  // Every word a stopword: one empty string.
  Tensor y = run_op("StringNormalizer", {Tensor::from_strings({"monday", "monday"}, {2})},
                    {{"stopwords", std::vector<std::string>{"monday"}}})[0];
  EXPECT_EQ(y.strings(), std::vector<std::string>{""});
}

TEST(Strings, EqualCastAndIdentity) {
  const std::vector<std::string> a = random_words(6, 12), b = random_words(6, 13);
  Tensor eq = run_op("Equal", {Tensor::from_strings(a, {2, 3}), Tensor::from_strings(b, {2, 3})})[0];
  ASSERT_EQ(eq.dtype(), DType::boolean);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(eq.get_i64(static_cast<int64_t>(i)), a[i] == b[i] ? 1 : 0) << i;
  // Broadcast against one string.
  Tensor eq1 = run_op("Equal", {Tensor::from_strings(a, {2, 3}), Tensor::from_strings({a[4]}, {1})})[0];
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(eq1.get_i64(static_cast<int64_t>(i)), a[i] == a[4] ? 1 : 0);

  // Float -> string -> float is exact (shortest round-trip text); NaN and infinities as ONNX spells them.
  Tensor x = rnd({3, 4}, 14);
  x.mutable_data<float>()[0] = std::numeric_limits<float>::infinity();
  x.mutable_data<float>()[1] = std::numeric_limits<float>::quiet_NaN();
  Tensor s = run_op("Cast", {x}, {{"to", std::string("string")}})[0];
  ASSERT_EQ(s.dtype(), DType::str);
  EXPECT_EQ(s.strings()[0], "INF");
  EXPECT_EQ(s.strings()[1], "NaN");
  EXPECT_EQ(std::stof(s.strings()[5]), x.data<float>()[5]);
  Tensor back = run_op("Cast", {s}, {{"to", std::string("f32")}})[0];
  for (int64_t i = 2; i < 12; ++i) EXPECT_EQ(back.data<float>()[i], x.data<float>()[i]) << i;
  EXPECT_TRUE(std::isnan(back.data<float>()[1]));
  EXPECT_THROW(run_op("Cast", {Tensor::from_strings({"1.5x"}, {1})}, {{"to", std::string("f32")}}), ReferenceError);
  EXPECT_EQ(run_op("Identity", {Tensor::from_strings(a, {6})})[0].strings(), a);
}

TEST(Strings, NpyRoundTripsUnicodeAndReadsBytes) {
  const Tensor t = Tensor::from_strings({"monday", "", "caf\xc3\xa9", "\xe2\x82\xac 5"}, {2, 2});
  const Tensor back = sabre::ir::parse_npy(sabre::ir::serialize_npy(t), "t.npy");
  EXPECT_EQ(back.dtype(), DType::str);
  EXPECT_EQ(back.dims(), t.dims());
  EXPECT_EQ(back.strings(), t.strings());
  EXPECT_NE(sabre::ir::serialize_npy(t).find("'descr': '<U6'"), std::string::npos);
  // numpy's |S3 (bytes): NUL-padded.
  std::string header = "{'descr': '|S3', 'fortran_order': False, 'shape': (2,), }";
  header.append(64 - (10 + header.size() + 1) % 64, ' ');
  header += '\n';
  std::string file = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header;
  file += std::string("ab\0xyz", 6);
  const Tensor bytes = sabre::ir::parse_npy(file, "b.npy");
  EXPECT_EQ(bytes.strings(), (std::vector<std::string>{"ab", "xyz"}));
  EXPECT_THROW(sabre::ir::parse_npy(file.substr(0, file.size() - 2), "short.npy"), sabre::ir::NpyError);
  // Bytes that are not UTF-8 (or an overlong form) are written as |S, as they are, and read back equal.
  const Tensor raw = Tensor::from_strings({"\x81\x81", "ok", "\xc1\x81"}, {3});
  const std::string raw_file = sabre::ir::serialize_npy(raw);
  EXPECT_NE(raw_file.find("'descr': '|S2'"), std::string::npos);
  EXPECT_EQ(sabre::ir::parse_npy(raw_file, "raw.npy").strings(), raw.strings());
}

}  // namespace
