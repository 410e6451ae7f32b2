// conv_routes: every Conv of a model named with the route it takes and why (issue 34).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "backends/cutlass/patterns.h"
#include "codegen/compile.h"
#include "codegen/conv_routes.h"
#include "ir/infer.h"
#include "partition/partitioner.h"
#include "partition/report.h"

namespace sabre {
namespace {

// x [batch, 64, 8, 8] into six 3x3 convs side by side, each a graph output: dense, two 32-channel
// groups (the CUTLASS grouped kernels' widths), 16 groups of 4 (too narrow; sabre compile's
// regrouping widens them), depthwise over 64 channels and over 6, and a grouped conv with
// asymmetric pads that nothing runs.
ir::Graph six_convs() {
  ir::Graph g;
  ir::Value* x = g.add_input("x", {ir::DType::f32, {ir::Dim::symbol("batch"), ir::Dim(64), ir::Dim(8), ir::Dim(8)}, true});
  ir::Value* x6 = g.add_input("x6", {ir::DType::f32, {ir::Dim::symbol("batch"), ir::Dim(6), ir::Dim(8), ir::Dim(8)}, true});
  auto conv = [&](const std::string& name, ir::Value* in, int64_t c, int64_t group, std::vector<int64_t> pads = {1, 1, 1, 1}) {
    std::vector<float> v(static_cast<size_t>(c * (c / group) * 9));
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.01f * static_cast<float>(i % 17) - 0.08f;
    ir::Value* w = g.add_constant(name + ".w", ir::Tensor::from_f32(v, {c, c / group, 3, 3}));
    std::map<std::string, ir::AttrValue> a = {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"pads", pads}, {"group", group}};
    g.add_output(g.add_node("Conv", {in, w}, 1, a, name)->output(0));
  };
  conv("dense", x, 64, 1);
  conv("wide_groups", x, 64, 2);
  conv("narrow_groups", x, 64, 16);
  conv("depthwise64", x, 64, 64);
  conv("depthwise6", x6, 6, 6);
  conv("asymmetric", x, 64, 16, {0, 0, 1, 1});
  ir::infer_types(g);
  return g;
}

std::map<std::string, codegen::ConvRoute> routes_of(ir::Graph g) {
  partition::PartitionResult r = partition::partition(std::move(g), cutlass_backend::pattern_table());
  const partition::PartitionReport rep = partition::make_report(r);
  std::map<std::string, codegen::ConvRoute> out;
  for (auto& cr : codegen::conv_routes(rep, r.graph)) out[cr.node] = cr;
  return out;
}

TEST(ConvRoutes, EveryConvNamedWithItsRoute) {
  auto routes = routes_of(six_convs());
  ASSERT_EQ(routes.size(), 6u);
  EXPECT_EQ(routes["dense"].route, codegen::kRouteCutlassDense) << routes["dense"].why;
  EXPECT_EQ(routes["wide_groups"].route, codegen::kRouteCutlassGrouped) << routes["wide_groups"].why;
  EXPECT_NE(routes["wide_groups"].why.find("2 groups of 32 input and 32 output channels"), std::string::npos)
      << routes["wide_groups"].why;
  // Without sabre compile's canonicalization nothing widens the 4-channel groups.
  EXPECT_EQ(routes["narrow_groups"].route, codegen::kRouteNativeGrouped) << routes["narrow_groups"].why;
  EXPECT_NE(routes["narrow_groups"].why.find("not taken by CUTLASS"), std::string::npos) << routes["narrow_groups"].why;
  EXPECT_EQ(routes["depthwise64"].route, codegen::kRouteNativeDepthwise);
  EXPECT_NE(routes["depthwise64"].why.find("vector body"), std::string::npos) << routes["depthwise64"].why;
  EXPECT_EQ(routes["depthwise6"].route, codegen::kRouteNativeDepthwise);
  EXPECT_NE(routes["depthwise6"].why.find("tiled body"), std::string::npos) << routes["depthwise6"].why;
  EXPECT_EQ(routes["asymmetric"].route, codegen::kRouteNone) << routes["asymmetric"].why;
  EXPECT_FALSE(routes["asymmetric"].why.empty());
  const std::string text = codegen::format_conv_routes(codegen::conv_routes(
      partition::make_report(partition::partition(six_convs(), cutlass_backend::pattern_table())),
      partition::partition(six_convs(), cutlass_backend::pattern_table()).graph));
  EXPECT_EQ(text.rfind("conv routes (6):\n", 0), 0u) << text;
  EXPECT_NE(text.find("\n  dense: cutlass dense (one group: pattern cutlass.conv2d"), std::string::npos) << text;
}

// As sabre compile canonicalizes: the 4-channel groups are regrouped into CUTLASS's widths, and the
// report says so.
TEST(ConvRoutes, RegroupedConvSaysSo) {
  auto routes = routes_of(codegen::canonicalize_model(six_convs(), false));
  EXPECT_EQ(routes["narrow_groups"].route, codegen::kRouteCutlassGrouped) << routes["narrow_groups"].why;
  EXPECT_NE(routes["narrow_groups"].why.find("regroup_convs widened"), std::string::npos) << routes["narrow_groups"].why;
  EXPECT_EQ(routes["depthwise64"].route, codegen::kRouteNativeDepthwise);
}

}  // namespace
}  // namespace sabre
