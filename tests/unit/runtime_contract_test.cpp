// The compiler's plans against the runtime's reading of them (docs/RUNTIME.md), without a GPU:
// bert_tiny and gpt2_block lowered by src/codegen, then every step checked with the runtime's own
// host-side code at the smallest and largest dims: known op, every dim param evaluates, GEMM
// dispatch finds a kernel for m, elementwise chains parse, compile to bytecode and broadcast over
// the step's shapes, softmax masks carry strides; the memory planner plans the whole thing.
#include <gtest/gtest.h>

#include <filesystem>

#include "backends/cutlass/patterns.h"
#include "codegen/lower.h"
#include "frontend/onnx/importer.h"
#include "partition/partitioner.h"
#include "runtime/planner.h"
#include "runtime/resolve.h"
#include "transform/canonicalize.h"

namespace sabre {
namespace {

namespace fs = std::filesystem;
using namespace runtime;

std::string model_path(const std::string& name) {
  for (const std::string& dir : {std::string(SABRE_SOURCE_DIR) + "/models", std::string(SABRE_BINARY_DIR) + "/models"}) {
    std::string p = dir + "/" + name + ".onnx";
    if (fs::exists(p)) return p;
  }
  return "";
}

Plan lowered(const std::string& name) {
  std::string p = model_path(name);
  if (p.empty()) throw std::runtime_error(name + ".onnx not found: build the models target");
  ir::Graph g = transform::canonicalize(onnx_frontend::import_model(p));
  g = partition::partition(std::move(g), cutlass_backend::pattern_table()).graph;
  codegen::LowerOptions o;
  o.dtype = ir::DType::f16;
  o.ranges = codegen::parse_dynamic("batch=1..8,seq=1..128");
  o.pick = [](const tune::GemmProblem& pr) { return tune::pick_kernels(pr, tune::PickOptions{}); };
  // Through JSON, as the runtime reads it.
  return Plan::from_json(codegen::lower(g, o).plan.to_json());
}

void check_plan(const Plan& plan, const Dims& dims) {
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& t : plan.tensors) {
    std::vector<int64_t> s;
    for (const auto& d : t.shape) s.push_back(d.eval(dims));
    shapes.push_back(s);
  }
  for (const Step& st : plan.steps) {
    SCOPED_TRACE(st.op + " " + st.name);
    EXPECT_TRUE(is_known_op(st.op));
    if (st.op == "gemm") {
      const GemmParams& g = st.as<GemmParams>();
      int64_t m = g.m.eval(dims);
      EXPECT_NO_THROW(g.n.eval(dims));
      EXPECT_NO_THROW(g.k.eval(dims));
      for (const auto* d : {&g.batch, &g.lda, &g.ldb, &g.ldd, &g.ldr, &g.stride_a, &g.stride_b, &g.stride_d, &g.stride_r})
        if (*d) EXPECT_NO_THROW((*d)->eval(dims));
      EXPECT_NO_THROW(select_gemm_kernel(st, m));
      EXPECT_GE(st.inputs.size(), 2u);
    } else if (st.op == "elementwise") {
      const native::ElementwiseChain& c = st.as<ElementwiseParams>().chain;
      EXPECT_NO_THROW(native::compile_program(c));
      EXPECT_EQ(c.inputs.size(), st.inputs.size());
      EXPECT_EQ(c.outputs.size(), st.outputs.size());
      std::vector<std::vector<int64_t>> in_dims;
      std::vector<const void*> ins;
      std::vector<void*> outs;
      alignas(256) static char fake[256];
      for (int t : st.inputs) {
        in_dims.push_back(shapes[static_cast<size_t>(t)]);
        ins.push_back(fake);
      }
      for (size_t k = 0; k < st.outputs.size(); ++k) outs.push_back(fake);
      EXPECT_NO_THROW(native::prepare_params(c, shapes[static_cast<size_t>(st.outputs[0])], in_dims, ins, outs));
    } else if (st.op == "softmax") {
      const SoftmaxParams& p = st.as<SoftmaxParams>();
      if (st.inputs.size() > 1 && st.inputs[1] >= 0) {
        EXPECT_EQ(eval_dims(p.mask_stride, dims).size(), 3u);
      }
      for (const auto* d : {&p.b, &p.h, &p.q, &p.cols})
        if (*d) EXPECT_NO_THROW((*d)->eval(dims));
    } else if (st.op == "slice") {
      EXPECT_NO_THROW(eval_dims(st.as<SliceParams>().starts, dims));
      EXPECT_NO_THROW(eval_dims(st.as<SliceParams>().ends, dims));
    } else if (st.op == "reshape") {
      int64_t a = 1, b = 1;
      for (int64_t d : shapes[static_cast<size_t>(st.inputs[0])]) a *= d;
      for (int64_t d : shapes[static_cast<size_t>(st.outputs[0])]) b *= d;
      EXPECT_EQ(a, b) << "a reshape view must keep the element count";
    }
  }
  std::map<std::string, int> ops;
  for (const Step& st : plan.steps) ++ops[st.op];
  EXPECT_GT(ops["gemm"], 0);
  EXPECT_GT(ops["elementwise"] + ops["layernorm"] + ops["softmax"], 0);
  MemoryPlan mp = plan_memory(plan, tensor_bytes(plan, dims));
  EXPECT_GT(mp.peak_bytes, 0u);
  EXPECT_LE(mp.peak_bytes, mp.sum_bytes + kArenaAlignment * plan.tensors.size());
}

TEST(RuntimeContract, BertTinyPlanIsRunnable) {
  Plan p = lowered("bert_tiny");
  check_plan(p, {{"batch", 1}, {"seq", 1}});
  check_plan(p, {{"batch", 8}, {"seq", 128}});
}

TEST(RuntimeContract, Gpt2BlockPlanIsRunnable) {
  Plan p = lowered("gpt2_block");
  check_plan(p, {{"batch", 1}, {"seq", 1}});
  check_plan(p, {{"batch", 8}, {"seq", 128}});
}

}  // namespace
}  // namespace sabre
