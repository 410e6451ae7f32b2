// Runs every golden case: parse the input IR, infer types, run the pass named by the directory,
// compare the printed result with <case>.expected.ir, and check numerics on random inputs:
// bit for bit for partition (composites run their bodies), to rounding for the rewrites.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

#include "backends/cutlass/patterns.h"
#include "ir/infer.h"
#include "ir/printer.h"
#include "partition/partitioner.h"
#include "partition/report.h"
#include "reference/reference.h"
#include "transform/canonicalize.h"
#include "transform/conv1d_as_conv2d.h"
#include "transform/fold_batchnorm.h"
#include "transform/fold_constants.h"
#include "transform/fuse_gelu.h"
#include "transform/fuse_layernorm.h"
#include "transform/layout_weights.h"
#include "transform/mark_gemm_bias.h"
#include "transform/regroup_convs.h"

namespace sabre {
namespace {

namespace fs = std::filesystem;

struct Case {
  std::string pass, name;
  fs::path input, expected;
};

// The pass a directory tests: its result graph, and report lines that go into the expected file.
struct Outcome {
  ir::Graph graph;
  std::string notes;
};
using PassFn = std::function<Outcome(ir::Graph)>;

const std::map<std::string, std::pair<PassFn, bool /*bit exact*/>>& passes() {
  static const std::map<std::string, std::pair<PassFn, bool>> table = {
      {"fold_constants", {[](ir::Graph g) { return Outcome{transform::fold_constants(std::move(g)), ""}; }, true}},
      {"fuse_gelu", {[](ir::Graph g) { return Outcome{transform::fuse_gelu(std::move(g)), ""}; }, false}},
      {"fuse_layernorm", {[](ir::Graph g) { return Outcome{transform::fuse_layernorm(std::move(g)), ""}; }, false}},
      {"fold_batchnorm", {[](ir::Graph g) { return Outcome{transform::fold_batchnorm(std::move(g)), ""}; }, false}},
      {"conv1d_as_conv2d", {[](ir::Graph g) { return Outcome{transform::conv1d_as_conv2d(std::move(g)), ""}; }, true}},
      {"layout_weights", {[](ir::Graph g) { return Outcome{transform::layout_weights(std::move(g)), ""}; }, true}},
      {"mark_gemm_bias", {[](ir::Graph g) { return Outcome{transform::mark_gemm_bias(std::move(g)), ""}; }, true}},
      // Multiples small enough for cases a reader can check by eye: new groups of 4 in and out channels.
      {"regroup_convs",
       {[](ir::Graph g) {
          return Outcome{transform::regroup_convs(std::move(g), transform::RegroupOptions{4, 4}), ""};
        },
        false}},
      {"partition",
       {[](ir::Graph g) {
          auto r = partition::partition(std::move(g), cutlass_backend::pattern_table());
          std::string notes;
          for (const auto& ri : r.regions) notes += "# region " + ri.composite + " " + ri.pattern + "\n";
          for (const auto& f : r.refusals) notes += "# refused " + f.pattern + " at " + f.nodes.back() + ": " + f.reason + "\n";
          return Outcome{std::move(r.graph), notes};
        },
        true}},
  };
  return table;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  fs::path root = fs::path(SABRE_SOURCE_DIR) / "tests" / "golden";
  for (const auto& [pass, fn] : passes()) {
    fs::path dir = root / pass;
    if (!fs::exists(dir)) continue;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& p : files) {
      std::string f = p.filename().string();
      if (p.extension() != ".ir" || f.find(".expected.") != std::string::npos) continue;
      std::string name = f.substr(0, f.size() - 3);
      out.push_back({pass, name, p, dir / (name + ".expected.ir")});
    }
  }
  return out;
}

std::string read(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::map<std::string, ir::Tensor> random_inputs(const ir::Graph& g, uint32_t seed) {
  std::mt19937 rng(seed);
  std::map<std::string, ir::Tensor> ins;
  for (const ir::Value* v : g.inputs()) {
    std::vector<int64_t> shape;
    for (const ir::Dim& d : v->shape()) {
      std::map<std::string, int64_t> b;
      for (const auto& s : d.symbols()) b[s] = 3;
      shape.push_back(*d.evaluate(b));
    }
    ir::Tensor t(v->dtype(), shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, std::uniform_real_distribution<double>(-2, 2)(rng));
    ins[v->name()] = std::move(t);
  }
  return ins;
}

class Golden : public ::testing::TestWithParam<Case> {};

TEST_P(Golden, MatchesExpectedAndKeepsValues) {
  const Case& c = GetParam();
  transform::register_ops();
  ir::Graph in = ir::parse_graph(read(c.input));
  ir::infer_types(in);
  const auto& [fn, exact] = passes().at(c.pass);
  Outcome out = fn(in.clone());
  ir::verify(out.graph);
  std::string text = ir::print(out.graph) + out.notes;
  if (const char* u = std::getenv("SABRE_UPDATE_GOLDEN"); u && std::string(u) == "1") {
    std::ofstream(c.expected) << text;
  } else {
    ASSERT_TRUE(fs::exists(c.expected)) << c.expected << " is missing (SABRE_UPDATE_GOLDEN=1 writes it)";
    EXPECT_EQ(text, read(c.expected)) << "golden " << c.pass << "/" << c.name;
  }
  auto ins = random_inputs(in, 5);
  auto want = reference::run(in, ins);
  auto got = reference::run(out.graph, ins);
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(got[o].dims(), want[o].dims());
    if (exact) {
      EXPECT_EQ(std::memcmp(got[o].bytes(), want[o].bytes(), want[o].nbytes()), 0) << "output " << o;
      continue;
    }
    for (int64_t i = 0; i < want[o].numel(); ++i)
      ASSERT_NEAR(got[o].get_f64(i), want[o].get_f64(i), 1e-4 * std::max(1.0, std::fabs(want[o].get_f64(i))))
          << "output " << o << " element " << i;
  }
}

// A pass whose folder is missing or holds no case would drop out of the cases above unseen.
TEST(GoldenCases, EveryPassHasCases) {
  std::map<std::string, int> count;
  for (const Case& c : cases()) ++count[c.pass];
  for (const auto& entry : passes())
    EXPECT_GE(count[entry.first], 1) << "tests/golden/" << entry.first << "/ holds no <case>.ir";
}

INSTANTIATE_TEST_SUITE_P(Cases, Golden, ::testing::ValuesIn(cases()), [](const auto& info) {
  std::string n = info.param.pass + "_" + info.param.name;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
});

}  // namespace
}  // namespace sabre
