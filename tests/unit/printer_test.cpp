// The IR text form: exact text for a known graph, round trips, elided constants, bad text.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "ir/printer.h"

using namespace sabre::ir;

namespace {

Dim sym(const char* s) { return Dim::symbol(s); }

// A graph touching every feature of the text form.
Graph make_rich_graph() {
  Graph g;
  g.name = "rich";
  Value* x = g.add_input("x", {DType::f32, {sym("batch"), sym("seq"), 2}, true});
  g.add_input("input:0", {DType::i64, {sym("batch"), sym("seq") + Dim(1)}, true});
  Value* w = g.add_constant("w", Tensor::from_f32({1.5f, -2.25f, 0.1f, 3e-8f}, {2, 2}));
  Tensor big(DType::f16, {4, 8});
  for (int64_t i = 0; i < big.numel(); ++i) big.set_f64(i, 0.37 * static_cast<double>(i) - 5);
  Value* wbig = g.add_constant("w.big/0", big);
  Value* idx = g.add_constant("idx", Tensor::from_i64({0, -1, 9007199254740993LL}, {3}));
  Tensor flag(DType::boolean, {});
  flag.set_f64(0, 1);
  Value* b = g.add_constant("flag", flag);

  Node* mm = g.add_node("MatMul", {x, w}, 1, {}, "mm0");
  mm->output(0)->set_type(DType::f32, {sym("batch"), sym("seq"), 2});
  Node* tr = g.add_node("Transpose", {mm->output(0)}, 1, {{"perm", std::vector<int64_t>{0, 2, 1}}});
  Node* sp = g.add_node("Split", {tr->output(0), nullptr}, 2, {{"axis", int64_t{-1}}, {"num_outputs", int64_t{2}}});
  sp->output(0)->set_type(DType::f32, {sym("batch"), 2, sym("seq")});
  Node* cast = g.add_node("Cast", {sp->output(1)}, 1,
                          {{"to", std::string("f16")},
                           {"alpha", 1.0},
                           {"scales", std::vector<double>{0.5, 1e-7, -3.0}},
                           {"names", std::vector<std::string>{"a", "b\"q"}},
                           {"none", std::vector<double>{}},
                           {"value", Tensor::from_f32({2.0f}, {1})}});
  Node* g2 = g.add_node("Gather", {wbig, idx}, 1, {{"axis", int64_t{0}}});
  Node* wh = g.add_node("Where", {b, g2->output(0), g2->output(0)}, 1);

  auto body = std::make_shared<Graph>();
  body->name = "region";
  Value* p = body->add_input("p", {DType::f32, {sym("batch"), 2, sym("seq")}, true});
  Node* r = body->add_node("Relu", {p}, 1);
  r->output(0)->set_type(DType::f32, {sym("batch"), 2, sym("seq")});
  body->add_output(r->output(0));
  Node* comp = g.add_node("Composite", {sp->output(0)}, 1,
                          {{"body", body}, {"pattern", std::string("relu")}}, "", "sabre");
  g.add_output(comp->output(0));
  g.add_output(cast->output(0));
  g.add_output(wh->output(0));
  return g;
}

}  // namespace

TEST(Printer, PrintsTheDocumentedForm) {
  Graph g;
  g.name = "small";
  Value* x = g.add_input("x", {DType::f32, {sym("batch"), 2}, true});
  Value* w = g.add_constant("w", Tensor::from_f32({1, 2, 3, 4}, {2, 2}));
  Node* mm = g.add_node("MatMul", {x, w}, 1, {}, "mm0");
  mm->output(0)->set_type(DType::f32, {sym("batch"), 2});
  Node* sm = g.add_node("Softmax", {mm->output(0)}, 1, {{"axis", int64_t{-1}}, {"eps", 1.0}});
  g.add_output(sm->output(0));
  EXPECT_EQ(print(g),
            "graph small(%x: f32[batch,2]) -> (%Softmax_out0) {\n"
            "  %w = const f32[2,2] [1, 2, 3, 4]\n"
            "  %mm0_out0: f32[batch,2] = MatMul(%x, %w) name=\"mm0\"\n"
            "  %Softmax_out0 = Softmax(%mm0_out0) {axis=-1, eps=1.0}\n"
            "}\n");
}

TEST(Printer, RoundTripsEveryFeature) {
  Graph g = make_rich_graph();
  std::string text = print(g);
  Graph parsed = parse_graph(text);
  EXPECT_EQ(print(parsed), text);
  // Spot checks that the text says what we built.
  EXPECT_NE(text.find("%\"input:0\": i64[batch,seq+1]"), std::string::npos) << text;
  EXPECT_NE(text.find("Split(%Transpose_out0, _) {axis=-1, num_outputs=2}"), std::string::npos) << text;
  EXPECT_NE(text.find("= sabre.Composite(%Split_out0) {body=graph region(%p: f32[batch,2,seq]) -> (%Relu_out0) {\n"
                      "      %Relu_out0: f32[batch,2,seq] = Relu(%p)\n    }, pattern=\"relu\"}"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("names=[\"a\", \"b\\\"q\"]"), std::string::npos) << text;
  EXPECT_NE(text.find("none=floats[]"), std::string::npos) << text;
  EXPECT_NE(text.find("%w.big/0 = const f16[4,8] @"), std::string::npos) << text;
  EXPECT_NE(text.find("[0, -1, 9007199254740993]"), std::string::npos) << text;
  EXPECT_NE(text.find("%flag = const bool[] [true]"), std::string::npos) << text;
  // Parsed structure, not only text.
  verify(parsed, /*require_types=*/false);
  ASSERT_EQ(parsed.outputs().size(), 3u);
  const Node* comp = parsed.outputs()[0]->producer();
  EXPECT_EQ(comp->domain(), "sabre");
  EXPECT_EQ(comp->op(), "Composite");
  EXPECT_EQ(comp->attr_graph("body")->inputs().size(), 1u);
  EXPECT_EQ(parsed.find_value("idx")->constant().data<int64_t>()[2], 9007199254740993LL);
  const Node* split = parsed.find_value("Split_out0")->producer();
  EXPECT_EQ(split->num_inputs(), 2u);
  EXPECT_EQ(split->input(1), nullptr);
  EXPECT_FALSE(parsed.find_value("Transpose_out0")->type().known);
  EXPECT_EQ(parsed.find_value("mm0_out0")->producer()->name(), "mm0");
}

TEST(Printer, SameGraphPrintsSameTextAndClonesAgree) {
  Graph g = make_rich_graph();
  EXPECT_EQ(print(g), print(make_rich_graph())) << "a graph built again (other addresses) prints the same";
  EXPECT_EQ(print(g.clone()), print(g));
}

TEST(Printer, FloatsRoundTripBitExactly) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1e4f, 1e4f);
  std::vector<float> vals(16);
  for (auto& v : vals) v = u(rng) * std::pow(10.0f, static_cast<float>(static_cast<int>(rng() % 20) - 10));
  vals[0] = std::numeric_limits<float>::denorm_min();
  vals[1] = -0.0f;
  vals[2] = std::numeric_limits<float>::infinity();
  Graph g;
  g.name = "f";
  Value* c = g.add_constant("c", Tensor::from_f32(vals, {16}));
  Tensor h(DType::bf16, {3});
  h.set_f64(0, 0.1);
  h.set_f64(1, -65504.0);
  h.set_f64(2, 3.0e38);
  Value* hc = g.add_constant("h", h);
  Tensor d(DType::f64, {2});
  d.set_f64(0, 0.1);
  d.set_f64(1, 1.0 / 3.0);
  Value* dc = g.add_constant("d", d);
  Node* n = g.add_node("Op", {c, hc, dc}, 1, {{"eps", 1.0 / 3.0}, {"tiny", 4.9e-324}, {"big", -1e300}});
  g.add_output(n->output(0));
  Graph p = parse_graph(print(g));
  const Tensor& pc = p.find_value("c")->constant();
  EXPECT_EQ(std::memcmp(pc.bytes(), g.find_value("c")->constant().bytes(), 64), 0) << print(g);
  EXPECT_EQ(std::memcmp(p.find_value("h")->constant().bytes(), h.bytes(), 6), 0);
  EXPECT_EQ(std::memcmp(p.find_value("d")->constant().bytes(), d.bytes(), 16), 0);
  const Node* pn = p.outputs()[0]->producer();
  EXPECT_EQ(pn->attr_float("eps"), 1.0 / 3.0);
  EXPECT_EQ(pn->attr_float("tiny"), 4.9e-324);
  EXPECT_EQ(pn->attr_float("big"), -1e300);
}

TEST(Printer, ElidedConstantsParseToDeterministicFillersAndPrintTheirHash) {
  const std::string text =
      "graph e(%x: f32[4]) -> (%y) {\n"
      "  %w = const f32[32,4] @0123456789abcdef\n"
      "  %i = const i64[20] @fedcba9876543210\n"
      "  %y = Add(%x, %w)\n"
      "}\n";
  Graph a = parse_graph(text);
  Graph b = parse_graph(text);
  EXPECT_EQ(print(a), text);
  const Tensor& wa = a.find_value("w")->constant();
  ASSERT_EQ(wa.dtype(), DType::f32);
  ASSERT_EQ(wa.dims(), (std::vector<int64_t>{32, 4}));
  EXPECT_EQ(std::memcmp(wa.bytes(), b.find_value("w")->constant().bytes(), wa.nbytes()), 0);
  double lo = 1, hi = -1;
  for (int64_t k = 0; k < wa.numel(); ++k) {
    lo = std::min(lo, wa.get_f64(k));
    hi = std::max(hi, wa.get_f64(k));
  }
  EXPECT_GE(lo, -1.0);
  EXPECT_LT(hi, 1.0);
  EXPECT_LT(lo, -0.5);  // spread out, not a constant fill
  EXPECT_GT(hi, 0.5);
  const Tensor& ia = a.find_value("i")->constant();
  ASSERT_EQ(ia.dtype(), DType::i64);
  for (int64_t k = 0; k < ia.numel(); ++k) {
    EXPECT_GE(ia.get_i64(k), 0);
    EXPECT_LT(ia.get_i64(k), 4);
  }
  // A real tensor prints its own content hash.
  Graph g;
  g.name = "r";
  Tensor t(DType::f32, {17});
  for (int k = 0; k < 17; ++k) t.set_f64(k, k * 0.5);
  char expect[40];
  std::snprintf(expect, sizeof expect, "@%016llx", static_cast<unsigned long long>(t.content_hash()));
  g.add_output(g.add_constant("t", t));
  EXPECT_NE(print(g).find(expect), std::string::npos) << print(g);
}

TEST(Printer, SubgraphsReadOuterValues) {
  const std::string text =
      "graph outer(%x: f32[2]) -> (%y) {\n"
      "  %y = If(%x) {then_branch=graph t() -> (%z) {\n"
      "      %z = Relu(%x)\n"
      "    }}\n"
      "}\n";
  Graph g = parse_graph(text);
  EXPECT_EQ(print(g), text);
  const Graph& body = *g.find_value("y")->producer()->attr_graph("then_branch");
  EXPECT_EQ(body.outputs()[0]->producer()->input(0), g.inputs()[0]);
}

TEST(Printer, CommentsAndLooseSpacingParse) {
  Graph g = parse_graph(
      "# a hand-written golden file\n"
      "graph  h ( %a :f32[ batch , 3 ] ) -> ( %b ) {   # header\n"
      "  %b : f32[batch,3] = Relu( %a )   # trailing\n"
      "}\n");
  EXPECT_EQ(print(g), "graph h(%a: f32[batch,3]) -> (%b) {\n  %b: f32[batch,3] = Relu(%a)\n}\n");
}

struct BadText {
  const char* text;
  const char* message;
};

class PrinterErrors : public ::testing::TestWithParam<BadText> {};

TEST_P(PrinterErrors, SayWhereAndWhat) {
  try {
    parse_graph(GetParam().text);
    FAIL() << "parsed: " << GetParam().text;
  } catch (const IrError& e) {
    EXPECT_EQ(std::string(e.what()), GetParam().message);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Bad, PrinterErrors,
    ::testing::Values(
        BadText{"grph g() -> () {}", "line 1:1: expected 'graph NAME(...) -> (...) {' at the start"},
        BadText{"graph g(%x: f32[2]) -> (%y) {\n  %y = Relu(%q)\n}", "line 2:13: value %q is used before it is defined"},
        BadText{"graph g(%x: f33[2]) -> () {}",
                "line 1:13: unknown dtype 'f33' (expected f32, f16, bf16, f64, i64, i32, i8, u8 or bool)"},
        BadText{"graph g(%x: f32[a**b]) -> () {}",
                "line 1:17: bad dim 'a**b' (expected a number or a polynomial like batch*seq+1)"},
        BadText{"graph g() -> (%w) {\n  %w = const f32[2,2] [1, 2, 3]\n}",
                "line 2:23: constant has 3 values but f32[2,2] needs 4"},
        BadText{"graph g(%x: f32[2]) -> (%x) {\n  %x = Relu(%x)\n}", "line 2:3: value %x is defined twice"},
        BadText{"graph g(%x: f32[2]) -> (%y) {\n  %y = Relu(%x)\n", "line 3:1: graph 'g' is not closed with '}'"},
        BadText{"graph g(%x: f32[2]) -> (%nope) {\n}", "line 1:25: graph output %nope is never defined"},
        BadText{"graph g() -> () {\n  %w = const f32[20] @12ab\n}", "line 2:23: expected 16 hex digits after '@'"},
        BadText{"graph g(%x: f32[2]) -> (%y) {\n  %y = Relu(%x) {a=1, a=2}\n}",
                "line 2:23: attribute 'a' is given twice"},
        BadText{"graph g(%x: f32[2]) -> (%y) {\n  %y = Relu(%x) {s=\"abc}\n}", "line 2:20: string is not closed"},
        BadText{"graph g() -> (%w) {\n  %w = const i8[2] [1, 300]\n}", "line 2:24: value 300 does not fit i8"},
        BadText{"graph g() -> () {} extra", "line 1:20: unexpected text after the graph's closing '}'"}));
