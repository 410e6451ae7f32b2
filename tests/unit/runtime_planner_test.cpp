// The activation memory planner: reuse by liveness, reshape views, peak, and no two buffers
// live at the same time ever overlap (checked on random chains).
#include <gtest/gtest.h>

#include <random>

#include "runtime/planner.h"

using namespace sabre::runtime;

namespace {


// x -> a -> b -> c -> y, each f32 [n]: a chain where only two activations live at once.
Plan chain_plan(int n_acts, int64_t n) {
  Plan p;
  p.tensors.push_back({"x", DType::f32, {n}, TensorKind::input, 0, 0});
  for (int i = 0; i < n_acts; ++i) p.tensors.push_back({"a" + std::to_string(i), DType::f32, {n}, TensorKind::activation, 0, 0});
  p.tensors.push_back({"y", DType::f32, {n}, TensorKind::output, 0, 0});
  p.inputs = {0};
  p.outputs = {n_acts + 1};
  for (int i = 0; i <= n_acts; ++i) p.steps.push_back(make_step("copy", "s" + std::to_string(i), {i}, {i + 1}));
  return p;
}

// Buffers whose live ranges overlap must not overlap in memory.
void expect_no_conflicts(const Plan& p, const std::vector<uint64_t>& bytes, const MemoryPlan& mp) {
  const size_t n = p.tensors.size();
  std::vector<int> first(n, -1), last(n, -1);
  for (size_t i = 0; i < p.steps.size(); ++i) {
    for (int t : p.steps[i].outputs) {
      int r = mp.alias_of[static_cast<size_t>(t)];
      if (first[static_cast<size_t>(r)] < 0) first[static_cast<size_t>(r)] = static_cast<int>(i);
      last[static_cast<size_t>(r)] = static_cast<int>(i);
    }
    for (int t : p.steps[i].inputs)
      if (t >= 0) last[static_cast<size_t>(mp.alias_of[static_cast<size_t>(t)])] = static_cast<int>(i);
  }
  for (size_t a = 0; a < n; ++a)
    for (size_t b = a + 1; b < n; ++b) {
      if (mp.alias_of[a] != static_cast<int>(a) || mp.alias_of[b] != static_cast<int>(b)) continue;
      if (mp.offset[a] < 0 || mp.offset[b] < 0 || bytes[a] == 0 || bytes[b] == 0) continue;
      bool live_together = first[a] <= last[b] && first[b] <= last[a];
      bool mem_overlap = static_cast<uint64_t>(mp.offset[a]) < mp.offset[b] + bytes[b] &&
                         static_cast<uint64_t>(mp.offset[b]) < mp.offset[a] + bytes[a];
      EXPECT_FALSE(live_together && mem_overlap) << p.tensors[a].name << " and " << p.tensors[b].name;
    }
  for (size_t t = 0; t < n; ++t) {
    if (mp.offset[t] < 0) continue;
    EXPECT_EQ(mp.offset[t] % kArenaAlignment, 0u);
    EXPECT_LE(mp.offset[t] + bytes[t], mp.peak_bytes);
  }
}

}  // namespace

TEST(RuntimePlanner, ChainReusesTwoBuffers) {
  Plan p = chain_plan(6, 1000);  // 4000 bytes each, 256-aligned to 4096
  auto bytes = tensor_bytes(p, {});
  MemoryPlan mp = plan_memory(p, bytes);
  EXPECT_EQ(mp.sum_bytes, 6u * 4000);
  EXPECT_EQ(mp.peak_bytes, 2u * 4096);
  EXPECT_EQ(mp.offset[0], -1);  // inputs and outputs are not in the arena
  EXPECT_EQ(mp.offset[7], -1);
  expect_no_conflicts(p, bytes, mp);
}

TEST(RuntimePlanner, ReshapeIsAViewThatKeepsItsSourceAlive) {
  // x -> a (copy) -> v = reshape(a) -> b (copy of x) -> y = v + b (as "concat" reading both)
  Plan p;
  p.tensors = {{"x", DType::f32, {64}, TensorKind::input, 0, 0},
               {"a", DType::f32, {64}, TensorKind::activation, 0, 0},
               {"v", DType::f32, {8, 8}, TensorKind::activation, 0, 0},
               {"b", DType::f32, {64}, TensorKind::activation, 0, 0},
               {"y", DType::f32, {128}, TensorKind::output, 0, 0}};
  p.inputs = {0};
  p.outputs = {4};
  p.steps = {make_step("copy", "s0", {0}, {1}),
             make_step("reshape", "s1", {1}, {2}),
             make_step("copy", "s2", {0}, {3}),
             make_step("concat", "s3", {2, 3}, {4})};
  auto bytes = tensor_bytes(p, {});
  MemoryPlan mp = plan_memory(p, bytes);
  EXPECT_EQ(mp.alias_of[2], 1);
  EXPECT_EQ(mp.offset[2], mp.offset[1]);
  // a must stay alive until s3 (through its view), so b cannot take its place.
  EXPECT_NE(mp.offset[3], mp.offset[1]);
  EXPECT_EQ(mp.peak_bytes, 2u * 256);
  expect_no_conflicts(p, bytes, mp);
}

TEST(RuntimePlanner, ReshapeOfAnInputAliasesTheInput) {
  Plan p;
  p.tensors = {{"x", DType::f16, {4, 16}, TensorKind::input, 0, 0},
               {"v", DType::f16, {64}, TensorKind::activation, 0, 0},
               {"y", DType::f16, {64}, TensorKind::output, 0, 0}};
  p.inputs = {0};
  p.outputs = {2};
  p.steps = {make_step("reshape", "r", {0}, {1}), make_step("copy", "c", {1}, {2})};
  MemoryPlan mp = plan_memory(p, tensor_bytes(p, {}));
  EXPECT_EQ(mp.alias_of[1], 0);
  EXPECT_EQ(mp.offset[1], -1);
  EXPECT_EQ(mp.peak_bytes, 0u);
}

TEST(RuntimePlanner, RandomGraphsNeverOverlapLiveBuffers) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    Plan p;
    p.symbols = {{"s", 1, 64}};
    p.tensors.push_back({"x", DType::f16, {DimExpr::parse("s"), 8}, TensorKind::input, 0, 0});
    p.inputs = {0};
    std::vector<int64_t> width = {8};
    int steps = 2 + static_cast<int>(rng() % 20);
    for (int i = 0; i < steps; ++i) {
      int id = static_cast<int>(p.tensors.size());
      int64_t w = 1 + static_cast<int64_t>(rng() % 300);
      bool last = i == steps - 1;
      bool view = !last && rng() % 4 == 0;
      int src = static_cast<int>(rng() % static_cast<unsigned>(id));
      if (view) w = width[static_cast<size_t>(src)];  // a view has its source's bytes
      width.push_back(w);
      p.tensors.push_back({"t" + std::to_string(id), DType::f16, {DimExpr::parse("s"), w},
                           last ? TensorKind::output : TensorKind::activation, 0, 0});
      std::vector<int> ins;
      int k = 1 + static_cast<int>(rng() % 3);
      for (int j = 0; j < k; ++j) ins.push_back(static_cast<int>(rng() % static_cast<unsigned>(id)));
      if (view) ins = {src};
      p.steps.push_back(make_step(view ? "reshape" : "concat", "s" + std::to_string(i), ins, {id}));
    }
    p.outputs = {static_cast<int>(p.tensors.size()) - 1};
    auto bytes = tensor_bytes(p, {{"s", 1 + static_cast<int64_t>(rng() % 64)}});
    MemoryPlan mp = plan_memory(p, bytes);
    EXPECT_LE(mp.peak_bytes, mp.sum_bytes + kArenaAlignment * p.tensors.size());
    expect_no_conflicts(p, bytes, mp);
  }
}

TEST(RuntimePlanner, ReadBeforeWriteIsABrokenPlan) {
  Plan p = chain_plan(2, 16);
  std::swap(p.steps[0], p.steps[1]);
  EXPECT_THROW(plan_memory(p, tensor_bytes(p, {})), PlanError);
}

// BERT's layer in miniature: gemm(x, Wq) -> attention -> reshape -> gemm(Wo) -> layernorm -> gemm(W1)
// -> gemm(W2) -> gemm(Wq again), with a bias too small to fetch. Which weights are fetched before
// which step, at leads 0, 1 and 2, counting kernel steps only.
TEST(RuntimePlanner, PrefetchScheduleLeadsEachGemmByKernelSteps) {
  Plan p;
  auto act = [&](const std::string& n) {
    p.tensors.push_back({n, DType::f16, {int64_t(128), int64_t(768)}, TensorKind::activation, 0, 0});
    return static_cast<int>(p.tensors.size()) - 1;
  };
  auto weight = [&](const std::string& n, uint64_t bytes) {
    p.tensors.push_back({n, DType::f16, {static_cast<int64_t>(bytes / 2)}, TensorKind::weight, 0, bytes});
    return static_cast<int>(p.tensors.size()) - 1;
  };
  p.tensors.push_back({"x", DType::f16, {int64_t(128), int64_t(768)}, TensorKind::input, 0, 0});
  const int wq = weight("Wq", 3 << 20), wo = weight("Wo", 1 << 20), w1 = weight("W1", 4 << 20),
            w2 = weight("W2", 4 << 20), bias = weight("b", 1536);
  const int q = act("q"), a = act("a"), av = act("av"), o = act("o"), h = act("h"), f = act("f"), y = act("y");
  p.tensors.push_back({"z", DType::f16, {int64_t(128), int64_t(768)}, TensorKind::output, 0, 0});
  const int z = static_cast<int>(p.tensors.size()) - 1;
  p.inputs = {0};
  p.outputs = {z};
  p.steps = {make_step("gemm", "qkv", {0, wq, bias, -1}, {q}),     make_step("attention", "attn", {q}, {a}),
             make_step("reshape", "view", {a}, {av}),              make_step("gemm", "out", {av, wo, bias, -1}, {o}),
             make_step("layernorm", "ln", {o}, {h}),               make_step("gemm", "ffn1", {h, w1, bias, -1}, {f}),
             make_step("gemm", "ffn2", {f, w2, bias, -1}, {y}),    make_step("gemm", "qkv2", {y, wq, bias, -1}, {z})};
  const uint64_t min_bytes = 64 << 10;

  for (const auto& at : prefetch_schedule(p, 0, min_bytes)) EXPECT_TRUE(at.empty());

  // Lead 1: each GEMM's weight before the kernel step just before it (the reshape between
  // attention and out-proj is no kernel, so Wo goes before attention). The first GEMM has no step
  // before it. qkv2's Wq is fetched again: qkv read it, but before the window (from ffn2 on).
  auto one = prefetch_schedule(p, 1, min_bytes);
  ASSERT_EQ(one.size(), p.steps.size());
  EXPECT_EQ(one[0], std::vector<int>{});
  EXPECT_EQ(one[1], std::vector<int>{wo});
  EXPECT_EQ(one[2], std::vector<int>{});
  EXPECT_EQ(one[4], std::vector<int>{w1});
  EXPECT_EQ(one[5], std::vector<int>{w2});
  EXPECT_EQ(one[6], std::vector<int>{wq});

  // Lead 2: two kernel steps ahead; nothing for bias (below min_bytes) anywhere.
  auto two = prefetch_schedule(p, 2, min_bytes);
  EXPECT_EQ(two[0], std::vector<int>{wo});
  EXPECT_EQ(two[1], std::vector<int>{});
  EXPECT_EQ(two[3], std::vector<int>{w1});
  EXPECT_EQ(two[4], std::vector<int>{w2});
  EXPECT_EQ(two[5], std::vector<int>{wq});
  for (const auto& at : two)
    for (int t : at) EXPECT_NE(t, bias);

  // A weight read again within the lead window is already on its way: not fetched twice.
  p.steps[4].inputs.push_back(w1);  // the layernorm step reads W1 too
  auto again = prefetch_schedule(p, 1, min_bytes);
  EXPECT_EQ(again[4], std::vector<int>{});
}

// At a run's shapes the schedule leaves out the weights of GEMMs with at least kPrefetchMaxRows
// (2048) rows and max_flops: a [M, 768] x [768, 768] GEMM is 2*M*768*768 flops (4.8 GFLOP at M = 4096).
// Entries of other steps stay; max_flops <= 0 keeps all.
TEST(RuntimePlanner, PrefetchAtShapesDropsWeightsOfLargeGemms) {
  Plan p;
  p.tensors.push_back({"x", DType::f16, {DimExpr::parse("m"), int64_t(768)}, TensorKind::input, 0, 0});
  p.tensors.push_back({"Wa", DType::f16, {int64_t(768), int64_t(768)}, TensorKind::weight, 0, 768 * 768 * 2});
  p.tensors.push_back({"Wb", DType::f16, {int64_t(64), int64_t(768)}, TensorKind::weight, 0, 64 * 768 * 2});
  p.tensors.push_back({"h", DType::f16, {DimExpr::parse("m"), int64_t(768)}, TensorKind::activation, 0, 0});
  p.tensors.push_back({"n", DType::f16, {DimExpr::parse("m"), int64_t(768)}, TensorKind::activation, 0, 0});
  p.tensors.push_back({"y", DType::f16, {DimExpr::parse("m"), int64_t(768)}, TensorKind::activation, 0, 0});
  p.tensors.push_back({"z", DType::f16, {DimExpr::parse("m"), int64_t(64)}, TensorKind::output, 0, 0});
  p.inputs = {0};
  p.outputs = {6};
  p.steps = {make_step("layernorm", "ln0", {0}, {3}),
             make_step("layernorm", "ln1", {3}, {4}),
             make_step("gemm", "big", {4, 1, -1, -1}, {5}),
             make_step("gemm", "small", {5, 2, -1, -1}, {6})};
  const auto sched = prefetch_schedule(p, 1, 64 << 10);
  ASSERT_EQ(sched[1], std::vector<int>{1});  // Wa before ln1
  ASSERT_EQ(sched[2], std::vector<int>{2});  // Wb before big
  auto shapes = [&](int64_t m) {
    std::vector<std::vector<int64_t>> s;
    for (const auto& t : p.tensors) {
      std::vector<int64_t> sh;
      for (const auto& d : t.shape) sh.push_back(d.eval({{"m", m}}));
      s.push_back(sh);
    }
    return s;
  };
  ASSERT_EQ(kPrefetchMaxRows, 2048);
  EXPECT_EQ(prefetch_at_shapes(p, sched, shapes(1024), 4e9), sched);  // 1.2 GFLOP, 1024 rows: kept
  EXPECT_EQ(prefetch_at_shapes(p, sched, shapes(1024), 1e9), sched);  // over the flops, under the rows: kept
  const auto at4096 = prefetch_at_shapes(p, sched, shapes(4096), 4e9);
  EXPECT_EQ(at4096[1], std::vector<int>{});   // big: 4.8 GFLOP at 4096 rows, its weight left out
  EXPECT_EQ(at4096[2], std::vector<int>{2});  // small: 2*4096*64*768 = 0.4 GFLOP, kept
  EXPECT_EQ(prefetch_at_shapes(p, sched, shapes(4096), 5e9), sched);  // under the flops: kept
  EXPECT_EQ(prefetch_at_shapes(p, sched, shapes(4096), 0), sched);
}
