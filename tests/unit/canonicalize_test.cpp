// The canonicalize pipeline: passes run in the documented order, each can dump the IR, and the
// opset-13 BERT comes out with LayerNormalization, Gelu and tn weights.
#include <gtest/gtest.h>

#include <filesystem>

#include "frontend/onnx/importer.h"
#include "generated_models.h"
#include "ir/printer.h"
#include "transform/canonicalize.h"

namespace sabre {
namespace {

TEST(Canonicalize, DumpsAfterEveryPassInOrder) {
  ir::Graph g = ir::parse_graph(R"(graph g(%x: f32[2,4]) -> (%y) {
    %w = const f32[4,2] [1, 2, 3, 4, 5, 6, 7, 8]
    %y = MatMul(%x, %w)
  })");
  std::vector<std::string> seen;
  transform::PassOptions o;
  o.dump_to = [&](const std::string& after, const ir::Graph&) { seen.push_back(after); };
  g = transform::canonicalize(std::move(g), o);
  std::vector<std::string> want = {"fold_shapes",      "fold_constants", "fold_shapes",    "simplify_masks",
                                   "unflatten_gemm",   "fuse_gelu",      "fuse_layernorm", "fold_batchnorm",
                                   "conv1d_as_conv2d", "fold_constants", "layout_weights", "mark_gemm_bias"};
  EXPECT_EQ(seen, want);
  // regroup_convs runs where asked (sabre compile's canonicalize_model), before the weight layouts.
  seen.clear();
  o.regroup = transform::RegroupOptions{};
  transform::canonicalize(ir::parse_graph(R"(graph g(%x: f32[2,4]) -> (%y) {
    %w = const f32[4,2] [1, 2, 3, 4, 5, 6, 7, 8]
    %y = MatMul(%x, %w)
  })"), o);
  want.insert(want.end() - 2, "regroup_convs");
  EXPECT_EQ(seen, want);
  EXPECT_NE(ir::print(g).find("sabre.MatMulTransB"), std::string::npos);
}

TEST(Canonicalize, Opset13BertGetsLayerNormGeluAndTnWeights) {
  const std::string path = test_util::generated_model("bert_tiny_op13");
  SABRE_REQUIRE_GENERATED_MODEL(path);
  ir::Graph g = transform::canonicalize(onnx_frontend::import_model(path));
  std::map<std::string, int> ops;
  for (const ir::Node* n : g.nodes()) ops[(n->domain().empty() ? "" : n->domain() + ".") + n->op()]++;
  EXPECT_EQ(ops["LayerNormalization"], 5);  // embeddings + 2 per layer
  EXPECT_EQ(ops["Gelu"], 2);
  EXPECT_EQ(ops["sabre.MatMulTransB"], 13);  // 6 per layer + pooler
  EXPECT_EQ(ops["ReduceMean"], 0);
  EXPECT_EQ(ops["Erf"], 0);
}

}  // namespace
}  // namespace sabre
