// The lowering's passes (src/codegen/passes), one golden case per outcome: tests/golden/lower/
// <pass>/<case>.ir is a graph in IR text (partitioned here, as sabre compile does); <case>.expected.txt
// is the lowering's dump after <pass> (LowerOptions::dump_after), or "# error: ..." where the
// lowering throws. Every pass has a case where it fires, one where it has nothing to do and one
// where it refuses, the reason in the dump's header. A first line "# lower: OPTION ..." sets
// options: fuse_attention, conv (the analytic conv picker, sm 90), stem=S, no_pointwise_gemm,
// dtype=bf16, dynamic=RANGES|none (default batch=1..8), canonicalize. SABRE_UPDATE_GOLDEN=1 rewrites the expected files.
// Also: the dump option's errors and the refusal notes, and the plans of the models (digests in
// tests/golden/lower/plans.txt) that the split into passes kept unchanged.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "backends/cutlass/patterns.h"
#include "codegen/compile.h"
#include "codegen/lower.h"
#include "frontend/onnx/importer.h"
#include "generated_models.h"
#include "ir/infer.h"
#include "ir/printer.h"
#include "partition/partitioner.h"
#include "transform/canonicalize.h"
#include "tune/select.h"

namespace sabre {
namespace {

namespace fs = std::filesystem;

const fs::path kRoot = fs::path(SABRE_SOURCE_DIR) / "tests" / "golden" / "lower";

bool updating() {
  const char* u = std::getenv("SABRE_UPDATE_GOLDEN");
  return u && std::string(u) == "1";
}

std::string read(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The golden file at `p` holds `text` (or is rewritten to, under SABRE_UPDATE_GOLDEN=1).
void expect_golden(const fs::path& p, const std::string& text) {
  if (updating()) {
    std::ofstream(p) << text;
    return;
  }
  ASSERT_TRUE(fs::exists(p)) << p << " is missing (SABRE_UPDATE_GOLDEN=1 writes it)";
  EXPECT_EQ(text, read(p)) << "golden " << p;
}

codegen::LowerOptions base_options() {
  codegen::LowerOptions o;
  o.ranges = codegen::parse_dynamic("batch=1..8");
  o.pick = [](const tune::GemmProblem& p) { return tune::pick_kernels(p, tune::PickOptions{}); };
  o.dump_after = "none";
  return o;
}

struct Setup {
  codegen::LowerOptions lo = base_options();
  bool canonicalize = false;
};

// The options a case's "# lower: ..." line sets.
Setup setup_of(const std::string& text) {
  Setup s;
  const std::string tag = "# lower:";
  if (text.rfind(tag, 0) != 0) return s;
  std::stringstream ss(text.substr(tag.size(), text.find('\n') - tag.size()));
  std::string opt;
  while (ss >> opt) {
    if (opt == "fuse_attention") s.lo.fuse_attention = true;
    else if (opt == "conv")
      s.lo.pick_conv = [](const codegen::ConvProblem& p) { return codegen::analytic_conv_kernel(p, 90); };
    else if (opt.rfind("stem=", 0) == 0) s.lo.stem = codegen::parse_stem(opt.substr(5));
    else if (opt == "no_pointwise_gemm") s.lo.pointwise_gemm = false;
    else if (opt == "dtype=bf16") s.lo.dtype = ir::DType::bf16;
    else if (opt == "dynamic=none") s.lo.ranges.clear();
    else if (opt.rfind("dynamic=", 0) == 0) s.lo.ranges = codegen::parse_dynamic(opt.substr(8));
    else if (opt == "canonicalize") s.canonicalize = true;
    else ADD_FAILURE() << "unknown lower option '" << opt << "'";
  }
  return s;
}

struct Case {
  std::string pass, name;
  fs::path input;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.pass << "/" << c.name; }

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const std::string& pass : codegen::lowering_pass_names()) {
    const fs::path dir = kRoot / pass;
    if (!fs::exists(dir)) continue;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".ir") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& p : files) out.push_back({pass, p.stem().string(), p});
  }
  return out;
}

// The dump after `pass` of the case's graph, or "# error: <what the lowering threw>".
std::string lowered_dump(const Case& c) {
  transform::register_ops();
  const std::string text = read(c.input);
  Setup s = setup_of(text);
  ir::Graph g = ir::parse_graph(text);
  ir::infer_types(g);
  if (s.canonicalize) g = codegen::canonicalize_model(std::move(g), s.lo.fuse_attention);
  g = partition::partition(std::move(g), cutlass_backend::pattern_table()).graph;
  std::string dump;
  s.lo.dump_after = c.pass;
  s.lo.dump_sink = [&](const std::string& pass, const std::string& t) { dump += t; };
  try {
    codegen::lower(g, s.lo);
  } catch (const std::exception& e) {
    return dump + "# error: " + e.what() + "\n";
  }
  return dump;
}

class LowerPassGolden : public ::testing::TestWithParam<Case> {};

TEST_P(LowerPassGolden, DumpMatches) {
  const Case& c = GetParam();
  expect_golden(c.input.parent_path() / (c.name + ".expected.txt"), lowered_dump(c));
}

INSTANTIATE_TEST_SUITE_P(Cases, LowerPassGolden, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.pass + "_" + i.param.name; });

// Each pass: a case named fires*, one nothing*, one refused*, and each says so in its dump. A pass
// that refuses by throwing (bind_symbols, emit_steps) has the error in its refused case.
TEST(LowerPassGolden, EveryPassFiresHasNothingToDoAndRefuses) {
  for (const std::string& pass : codegen::lowering_pass_names()) {
    std::map<std::string, int> kinds;
    for (const Case& c : cases()) {
      if (c.pass != pass) continue;
      const std::string kind = c.name.substr(0, c.name.find('_'));
      ++kinds[kind];
      const fs::path expected = c.input.parent_path() / (c.name + ".expected.txt");
      if (!fs::exists(expected)) continue;  // DumpMatches reports it
      const std::string head = read(expected).substr(0, read(expected).find('\n'));
      const std::string dump = read(expected);
      if (kind == "fires") {
        EXPECT_NE(head.find(": fired "), std::string::npos) << c.name << ": " << head;
      } else if (kind == "nothing") {
        EXPECT_TRUE(head.find("nothing to do") != std::string::npos || head.find("skipped") != std::string::npos)
            << c.name << ": " << head;
      } else if (kind == "refused") {
        EXPECT_TRUE(head.find("refused ") != std::string::npos || dump.find("# error: ") != std::string::npos)
            << c.name << ": " << head;
      }
    }
    for (const char* k : {"fires", "nothing", "refused"})
      EXPECT_GE(kinds[k], 1) << "tests/golden/lower/" << pass << "/ has no " << k << "_<case>.ir";
  }
}

// ---- dumping ------------------------------------------------------------------------------------

ir::Graph small_graph() {
  transform::register_ops();
  ir::Graph g = ir::parse_graph(R"(graph g(%x: f32[batch,8]) -> (%y) {
    %y = Relu(%x)
  })");
  ir::infer_types(g);
  return g;
}

TEST(LowerDump, UnknownPassIsAnErrorListingThePasses) {
  auto o = base_options();
  o.dump_after = "emit_steps,fuse_gelu";
  try {
    codegen::lower(small_graph(), o);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--dump-after names 'fuse_gelu', which is no lowering pass"), std::string::npos) << m;
    for (const std::string& p : codegen::lowering_pass_names()) EXPECT_NE(m.find(p), std::string::npos) << p;
  }
  EXPECT_THROW(codegen::parse_dump_after("all,nope"), std::invalid_argument);
  EXPECT_EQ(codegen::parse_dump_after("all"), codegen::lowering_pass_names());
  EXPECT_TRUE(codegen::parse_dump_after("none").empty());
}

TEST(LowerDump, AllDumpsEveryPassInOrderAndTheLastShowsThePlan) {
  auto o = base_options();
  o.dump_after = "all";
  std::vector<std::string> seen;
  std::string last;
  o.dump_sink = [&](const std::string& pass, const std::string& text) {
    seen.push_back(pass);
    last = text;
  };
  codegen::lower(small_graph(), o);
  EXPECT_EQ(seen, codegen::lowering_pass_names());
  EXPECT_NE(last.find("# lowering after emit_steps: fired 1\n"), std::string::npos) << last;
  EXPECT_NE(last.find("step 1 elementwise \"Relu_0\" (t1) -> (t2)"), std::string::npos) << last;
}

// The environment variables name the passes and the file when the options do not.
TEST(LowerDump, EnvironmentVariablesSelectPassesAndFile) {
  const fs::path file = fs::temp_directory_path() / ("sabre_dump_" + std::to_string(::getpid()) + ".txt");
  fs::remove(file);
  auto o = base_options();
  o.dump_after = "";
  ::setenv("SABRE_DUMP_AFTER", "group_elementwise", 1);
  ::setenv("SABRE_DUMP_FILE", file.c_str(), 1);
  codegen::lower(small_graph(), o);
  ::setenv("SABRE_DUMP_AFTER", "bogus", 1);
  EXPECT_THROW(codegen::lower(small_graph(), o), std::invalid_argument);
  ::unsetenv("SABRE_DUMP_AFTER");
  ::unsetenv("SABRE_DUMP_FILE");
  const std::string text = read(file);
  fs::remove(file);
  EXPECT_EQ(text.rfind("# lowering after group_elementwise: ", 0), 0u) << text;
  EXPECT_EQ(text.find("emit_steps"), std::string::npos) << text;
}

// sabre compile checks the passes to dump after before it imports anything (not after tuning).
TEST(LowerDump, CompileRefusesAnUnknownPassBeforeAnyWork) {
  const fs::path out = fs::temp_directory_path() / ("sabre_dump_compile_" + std::to_string(::getpid()));
  fs::remove_all(out);
  codegen::CompileOptions o;
  o.plan_only = true;
  o.tune = codegen::CompileOptions::Tune::never;
  o.dump_after = "fuse_attenion";
  std::vector<std::string> said;
  o.progress = [&](const std::string& s) { said.push_back(s); };
  try {
    codegen::compile_model(std::string(SABRE_SOURCE_DIR) + "/models/bert_tiny.onnx", out.string(), o);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'fuse_attenion', which is no lowering pass"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(said.empty()) << said.front();
  EXPECT_FALSE(fs::exists(out));
}

// ---- refusals become notes --------------------------------------------------------------------

TEST(LowerNotes, EveryRefusedFusionIsANoteWithItsReason) {
  transform::register_ops();
  ir::Graph g = ir::parse_graph(R"(graph g(%a: f32[batch,8], %b: f32[batch,8]) -> (%y, %s) {
    %gamma = const f32[8] [1, 1, 1, 1, 1, 1, 1, 1]
    %beta = const f32[8] [0, 0, 0, 0, 0, 0, 0, 0]
    %s = Add(%a, %b)
    %y = LayerNormalization(%s, %gamma, %beta) {axis=-1} name="ln"
  })");
  ir::infer_types(g);
  codegen::Lowered low = codegen::lower(g, base_options());
  int said = 0;
  for (const auto& n : low.notes)
    said += n == "fuse_layernorm_residual: at ln: residual Add_0 not absorbed: the Add's output is a model output";
  EXPECT_EQ(said, 1) << "notes: " << ::testing::PrintToString(low.notes);
  // The same, per pass, for tools that report fusions.
  ASSERT_EQ(low.passes.size(), codegen::lowering_pass_names().size());
  for (const codegen::PassReport& r : low.passes) {
    if (r.name == "fuse_layernorm_residual") {
      EXPECT_EQ(r.refused, std::vector<std::string>{"ln: residual Add_0 not absorbed: the Add's output is a model output"});
    } else if (r.name == "fuse_attention") {
      EXPECT_NE(r.skipped.find("attention fusion is off"), std::string::npos);
    } else if (r.name == "emit_steps") {
      EXPECT_EQ(r.fired, 2);  // the Add and the LayerNorm
    }
  }
}

// ---- the plans of the models, unchanged by the split into passes -------------------------------

std::string digest(const codegen::Lowered& low) {
  std::string all = low.plan.to_json();
  all.append(reinterpret_cast<const char*>(low.weights.data()), low.weights.size());
  for (const auto& k : low.gemm_kernels) all += "\ngemm " + k;
  for (const auto& k : low.ew_kernels) all += "\new " + k.name + "\n" + k.source;
  for (const auto& k : low.conv_kernels) all += "\nconv " + k;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH3_64bits(all.data(), all.size())));
  return std::string(hex) + " " + std::to_string(low.plan.steps.size()) + " steps";
}

TEST(LowerPlans, ModelPlansMatchTheirDigests) {
  transform::register_ops();
  std::vector<std::pair<std::string, std::string>> models = {
      {"bert_tiny", std::string(SABRE_SOURCE_DIR) + "/models/bert_tiny.onnx"}};
  for (const char* m : {"bert_tiny_op13", "bert_tiny_where", "gpt2_block", "resnet_block", "cnn_stem"}) {
    const std::string p = test_util::generated_model(m);
    SABRE_REQUIRE_GENERATED_MODEL(p);
    if (fs::exists(p)) models.push_back({m, p});
  }
  struct Variant {
    const char* name;
    std::function<void(codegen::LowerOptions&)> set;
  };
  const std::vector<Variant> variants = {
      {"default", [](codegen::LowerOptions&) {}},
      {"bf16", [](codegen::LowerOptions& o) { o.dtype = ir::DType::bf16; }},
      {"no_fuse_attention", [](codegen::LowerOptions& o) { o.fuse_attention = false; }},
      {"stem_im2col", [](codegen::LowerOptions& o) { o.stem = codegen::Stem::im2col; }},
      {"stem_conv", [](codegen::LowerOptions& o) { o.stem = codegen::Stem::conv; }},
      {"no_pointwise_gemm", [](codegen::LowerOptions& o) { o.pointwise_gemm = false; }},
  };
  std::string text;
  for (const auto& [name, path] : models) {
    for (const Variant& v : variants) {
      codegen::LowerOptions o = base_options();
      o.ranges.clear();  // the defaults, so that no model's symbols are refused
      o.fuse_attention = true;
      o.pick_conv = [](const codegen::ConvProblem& p) { return codegen::analytic_conv_kernel(p, 90); };
      v.set(o);
      ir::Graph g = codegen::canonicalize_model(onnx_frontend::import_model(path), o.fuse_attention);
      g = partition::partition(std::move(g), cutlass_backend::pattern_table()).graph;
      text += name + " " + v.name + ": " + digest(codegen::lower(g, o)) + "\n";
    }
  }
  expect_golden(kRoot / "plans.txt", text);
}

}  // namespace
}  // namespace sabre
