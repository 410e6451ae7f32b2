// The pictures of sabre bench --profile (runtime/session_profile_report.h) over synthetic records:
// the trace parses back as JSON with one event per step per run, the chart is well-formed XML
// (python's parser) with a bar per op kind and per listed step.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "runtime/session_profile_report.h"

namespace sabre::runtime {
namespace {

ProfileRecord synthetic(size_t runs) {
  ProfileRecord r;
  r.model = "tiny <bert> & co";
  r.device = "NVIDIA H200";
  r.dims = {{"batch", 8}, {"seq", 128}};
  auto step = [&](const char* op, const char* name, const char* kernel, double us) {
    StepTime t;
    t.index = r.steps.size();
    t.op = op;
    t.name = name;
    t.kernel = kernel;
    t.us = us;
    for (size_t k = 0; k < runs; ++k) t.runs_us.push_back(us + 0.25 * double(k));
    t.input_shapes = {{8, 128, 768}, {768, 768}};
    t.output_shapes = {{8, 128, 768}};
    t.bytes = 2 * (8 * 128 * 768 * 2 + 768 * 768);
    if (std::string(op) == "gemm") t.flops = 2.0 * 8 * 128 * 768 * 768;
    r.steps.push_back(t);
  };
  step("gemm", "/encoder/layer.0/attention/self/query/MatMul", "sm90_ws_coop_f16_128x256x64_bias", 12.5);
  step("layernorm", "/encoder/layer.0/output/LayerNorm \"x<y\" & 'z'", "", 3.0);
  step("reshape", "", "", 0.0);
  step("gemm", "/encoder/layer.0/output/dense/MatMul", "sm90_ws_coop_f16_128x128x64", 9.0);
  step("softmax", "/encoder/layer.0/attention/self/Softmax", "", 2.5);
  return r;
}

TEST(ProfileReport, TraceHasOneEventPerStepPerRunAndParsesBack) {
  const ProfileRecord r = synthetic(4);
  const std::string text = chrome_trace(r).dump(1);
  const nlohmann::json j = nlohmann::json::parse(text);  // throws if not JSON
  ASSERT_TRUE(j.contains("traceEvents") && j["traceEvents"].is_array());
  size_t steps = 0, runs = 0;
  std::map<std::string, int> names;
  double last_end = 0;
  for (const auto& e : j["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("name"));
    if (e["ph"] != "X") continue;
    ASSERT_TRUE(e["ts"].is_number() && e["dur"].is_number() && e["dur"].get<double>() >= 0);
    if (e["cat"] == "run") {
      ++runs;
      continue;
    }
    ++steps;
    ++names[e["name"].get<std::string>()];
    // The steps of one run follow one another on the GPU track.
    EXPECT_NEAR(e["ts"].get<double>(), last_end, 1e-9);
    last_end = e["ts"].get<double>() + e["dur"].get<double>();
    const auto& a = e["args"];
    EXPECT_EQ(a["op"], e["cat"]);
    EXPECT_EQ(a["inputs"].size(), 2u);
    EXPECT_EQ(a["outputs"][0], nlohmann::json::array({8, 128, 768}));
    EXPECT_EQ(a.contains("flops"), e["cat"] == "gemm");
    EXPECT_EQ(a.contains("kernel"), e["cat"] == "gemm");
  }
  EXPECT_EQ(steps, r.steps.size() * 4);
  EXPECT_EQ(runs, 4u);
  EXPECT_EQ(names["gemm: /encoder/layer.0/attention/self/query/MatMul"], 4);
  EXPECT_EQ(names["reshape"], 4);  // a step with no node name is named by its op
  // The fourth run's first step took 12.5 + 3 * 0.25 us, laid after three whole runs.
  const double run = 12.5 + 3.0 + 0.0 + 9.0 + 2.5;
  bool found = false;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "X" && e["cat"] == "gemm" && e["args"]["run"] == 4 && e["args"]["step"] == 0) {
      EXPECT_NEAR(e["ts"].get<double>(), 3 * run + (0 + 1 + 2) * 0.25 * 5, 1e-9);
      EXPECT_NEAR(e["dur"].get<double>(), 12.5 + 0.75, 1e-9);
      found = true;
    }
  EXPECT_TRUE(found);
  EXPECT_EQ(j["otherData"]["dims"]["seq"], 128);
}

TEST(ProfileReport, StepsWithoutPerRunTimesGetOneEventOfTheirMedian) {
  ProfileRecord r = synthetic(0);
  const nlohmann::json j = chrome_trace(r);
  size_t steps = 0;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "X" && e["cat"] != "run") {
      ++steps;
      EXPECT_EQ(e["dur"].get<double>(), r.steps[e["args"]["step"].get<size_t>()].us);
    }
  EXPECT_EQ(steps, r.steps.size());
}

// Well-formed by python's own XML parser, which the CLI tests and CI have.
void expect_python_parses(const std::string& svg, const std::string& tag) {
  const auto dir = std::filesystem::path(SABRE_BINARY_DIR) / "tests" / "profile_report";
  std::filesystem::create_directories(dir);
  const auto path = dir / (tag + ".svg");
  std::ofstream(path) << svg;
  const std::string cmd = "python3 -c \"import sys, xml.etree.ElementTree as E; "
                          "r = E.parse(sys.argv[1]).getroot(); sys.exit(0 if r.tag.endswith('svg') else 3)\" '" +
                          path.string() + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << "python's XML parser refused " << path;
}

TEST(ProfileReport, ChartIsWellFormedSvgWithABarPerOpKindAndListedStep) {
  const ProfileRecord r = synthetic(3);
  const std::string svg = time_breakdown_svg(r, 3);
  expect_python_parses(svg, "top3");
  // Background, 4 op kinds, 3 steps.
  const std::regex rect("<rect ");
  const auto rects = std::distance(std::sregex_iterator(svg.begin(), svg.end(), rect), std::sregex_iterator());
  EXPECT_EQ(rects, 1 + 4 + 3);
  EXPECT_NE(svg.find("gemm (2 steps)"), std::string::npos);
  EXPECT_NE(svg.find("21.5 us  79.6%"), std::string::npos) << "gemm's 12.5 + 9 of 27 us";
  EXPECT_NE(svg.find("tiny &lt;bert&gt; &amp; co"), std::string::npos);
  EXPECT_EQ(svg.find("x<y"), std::string::npos);
  EXPECT_NE(svg.find("The 3 slowest steps"), std::string::npos);
  const std::string all = time_breakdown_svg(r, 0);
  expect_python_parses(all, "all");
  EXPECT_NE(all.find("Every step, slowest first"), std::string::npos);
  // An empty record still draws a valid (empty) chart.
  expect_python_parses(time_breakdown_svg(ProfileRecord{}, 15), "empty");
}

TEST(ProfileReport, LongNodeNamesAreClippedWholeCharacters) {
  ProfileRecord r = synthetic(1);
  // The label "#0 gemm: " + name is cut to 57 bytes and an ellipsis: a two-byte é at bytes 56..57
  // of the label must go whole (half of it would be invalid UTF-8, which the XML parser refuses).
  r.steps[0].name = std::string(47, 'a') + "\xc3\xa9" + std::string(40, 'b');
  const std::string svg = time_breakdown_svg(r, 0);
  expect_python_parses(svg, "long");
  EXPECT_NE(svg.find(std::string(47, 'a') + "\u2026"), std::string::npos);
}

TEST(ProfileReport, StepLabelNamesOpAndNode) {
  EXPECT_EQ(step_label("gemm", "/a/MatMul"), "gemm: /a/MatMul");
  EXPECT_EQ(step_label("reshape", ""), "reshape");
}

}  // namespace
}  // namespace sabre::runtime
