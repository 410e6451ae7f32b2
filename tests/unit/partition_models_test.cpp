// Whole models: canonicalization keeps the outputs (to rounding), partitioning keeps them bit for
// bit in f32 (composites evaluated from their bodies), and the BERT-style model sends >= 99% of its
// GEMM FLOPs to CUTLASS with FFN1 as gemm+bias+gelu and the residual adds fused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "backends/cutlass/patterns.h"
#include "frontend/onnx/importer.h"
#include "partition/partitioner.h"
#include "partition/report.h"
#include "reference/reference.h"
#include "transform/canonicalize.h"

namespace sabre {
namespace {

namespace fs = std::filesystem;

// Models the tests know: the bundled one, and the others when make_models.py has written them.
std::vector<std::string> model_paths() {
  std::vector<std::string> out;
  for (const char* name : {"bert_tiny", "bert_tiny_op13", "gpt2_block", "resnet_block"})
    for (const std::string& dir : {std::string(SABRE_SOURCE_DIR) + "/models", std::string(SABRE_BINARY_DIR) + "/models"}) {
      std::string p = dir + "/" + name + ".onnx";
      if (fs::exists(p)) {
        out.push_back(p);
        break;
      }
    }
  return out;
}

std::map<std::string, ir::Tensor> random_inputs(const ir::Graph& g, uint32_t seed) {
  std::mt19937 rng(seed);
  std::map<std::string, int64_t> dims = {{"batch", 2}, {"seq", 7}};
  std::map<std::string, ir::Tensor> ins;
  for (const ir::Value* v : g.inputs()) {
    std::vector<int64_t> shape;
    for (const ir::Dim& d : v->shape()) shape.push_back(*d.evaluate(dims));
    ir::Tensor t(v->dtype(), shape);
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (ir::is_float(v->dtype())) {
        t.set_f64(i, std::uniform_real_distribution<double>(-1, 1)(rng));
      } else if (v->name().find("mask") != std::string::npos) {
        t.set_f64(i, (i % shape.back()) < 3 ? 1 : static_cast<double>(rng() % 2));
      } else {
        t.set_f64(i, static_cast<double>(rng() % 60));
      }
    }
    ins[v->name()] = std::move(t);
  }
  return ins;
}

TEST(PartitionModels, CanonicalizeKeepsOutputsAndPartitionKeepsBits) {
  auto paths = model_paths();
  ASSERT_FALSE(paths.empty()) << "models/bert_tiny.onnx is bundled with the repository";
  for (const std::string& path : paths) {
    SCOPED_TRACE(path);
    ir::Graph orig = onnx_frontend::import_model(path);
    auto ins = random_inputs(orig, 11);
    auto want = reference::run(orig, ins);

    ir::Graph canon = transform::canonicalize(orig.clone());
    auto got_c = reference::run(canon, ins);
    ASSERT_EQ(got_c.size(), want.size());
    for (size_t o = 0; o < want.size(); ++o) {
      ASSERT_EQ(got_c[o].dims(), want[o].dims());
      double max_err = 0, max_ref = 0;
      for (int64_t i = 0; i < want[o].numel(); ++i) {
        max_err = std::max(max_err, std::fabs(got_c[o].get_f64(i) - want[o].get_f64(i)));
        max_ref = std::max(max_ref, std::fabs(want[o].get_f64(i)));
      }
      EXPECT_LE(max_err, 1e-4 * std::max(1.0, max_ref)) << "output " << o << " after canonicalize";
    }

    auto r = partition::partition(canon.clone(), cutlass_backend::pattern_table());
    EXPECT_FALSE(r.regions.empty());
    ir::verify(r.graph);
    auto got_p = reference::run(r.graph, ins);
    ASSERT_EQ(got_p.size(), got_c.size());
    for (size_t o = 0; o < got_c.size(); ++o) {
      ASSERT_EQ(got_p[o].dims(), got_c[o].dims());
      ASSERT_EQ(got_p[o].dtype(), got_c[o].dtype());
      EXPECT_EQ(std::memcmp(got_p[o].bytes(), got_c[o].bytes(), got_c[o].nbytes()), 0)
          << "output " << o << " differs after partitioning";
    }
  }
}

TEST(PartitionModels, BertOffloadsGemmFlopsWithFusedEpilogues) {
  ir::Graph g = onnx_frontend::import_model(std::string(SABRE_SOURCE_DIR) + "/models/bert_tiny.onnx");
  g = transform::canonicalize(std::move(g));
  auto r = partition::partition(std::move(g), cutlass_backend::pattern_table());
  auto rep = partition::make_report(r, {{"batch", 4}, {"seq", 128}});
  EXPECT_GE(rep.flops.share(), 0.99);
  int bias_gelu = 0, bias_res = 0, batched = 0;
  for (const auto& ri : r.regions) {
    bias_gelu += ri.pattern == "cutlass.gemm_bias_gelu";
    bias_res += ri.pattern == "cutlass.gemm_bias_res";
    batched += ri.pattern == "cutlass.batched_gemm";
  }
  EXPECT_EQ(bias_gelu, 2) << "FFN1 of each layer as gemm+bias+gelu";
  EXPECT_EQ(bias_res, 4) << "attention output and FFN2 of each layer with their residual adds";
  EXPECT_EQ(batched, 4) << "Q·Kᵀ and P·V of each layer";
  std::string text = partition::format_report(rep, "cutlass");
  EXPECT_NE(text.find("cutlass.gemm_bias_gelu"), std::string::npos);
  EXPECT_NE(text.find("intermediate/dense/MatMul"), std::string::npos);
  EXPECT_NE(text.find("[batch,seq,"), std::string::npos) << "shapes print with symbolic dims";
}

}  // namespace
}  // namespace sabre
