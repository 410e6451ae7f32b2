// The GPU tests' bounds and comparison (tests/gpu/numerics.h), on the host: a GEMM of the GPU
// test's m_ragged shape (333x200, k = 264) computed as a kernel computes it (operands in the dtype,
// f32 accumulation, the result rounded to the output dtype) passes; one wrong or unwritten element
// fails, where the relative L2 tolerances the GPU tests used before let it through.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "../gpu/numerics.h"
#include "ir/dtype.h"

namespace {

using sabre::gpu_test::Bound;
using sabre::gpu_test::Comparison;
using sabre::gpu_test::Num;

float round_to(Num n, float v) {
  switch (n) {
    case Num::f16: return sabre::ir::half_to_float(sabre::ir::float_to_half(v));
    case Num::bf16: return sabre::ir::bf16_to_float(sabre::ir::float_to_bf16(v));
    case Num::tf32: {  // 10 mantissa bits, round to nearest even
      uint32_t u;
      std::memcpy(&u, &v, 4);
      u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
      std::memcpy(&v, &u, 4);
      return v;
    }
    case Num::f32: return v;
  }
  return v;
}

constexpr int64_t kM = 333, kN = 200, kK = 264;
constexpr float kAlpha = 0.75f;

// y = alpha * A·Bᵀ + bias: `got` as a kernel computes it, `ref` in double from the same operands.
struct Gemm {
  std::vector<double> got, ref;
  double scale = 0;  // dot_scale
  Bound bound;
};

Gemm simulate(Num in, Num mul, Num out) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> a(static_cast<size_t>(kM * kK)), b(static_cast<size_t>(kN * kK)), bias(static_cast<size_t>(kN));
  for (auto* v : {&a, &b, &bias})
    for (float& x : *v) x = round_to(in, u(rng));
  std::vector<float> am(a), bm(b);  // as the tensor cores multiply them
  for (auto* v : {&am, &bm})
    for (float& x : *v) x = round_to(mul, x);
  Gemm g;
  g.got.resize(size_t(kM * kN));
  g.ref.resize(size_t(kM * kN));
  for (int64_t i = 0; i < kM; ++i)
    for (int64_t j = 0; j < kN; ++j) {
      float acc = 0;
      double exact = 0;
      for (int64_t k = 0; k < kK; ++k) {
        acc += am[size_t(i * kK + k)] * bm[size_t(j * kK + k)];
        exact += double(a[size_t(i * kK + k)]) * b[size_t(j * kK + k)];
      }
      g.got[size_t(i * kN + j)] = round_to(out, kAlpha * acc + bias[size_t(j)]);
      g.ref[size_t(i * kN + j)] = kAlpha * exact + bias[size_t(j)];
    }
  g.scale = sabre::gpu_test::dot_scale(kAlpha, kK, sabre::gpu_test::rms(a), sabre::gpu_test::rms(b),
                                        sabre::gpu_test::rms(bias));
  g.bound = sabre::gpu_test::gemm_bound(mul, out, kK, g.scale);
  return g;
}

struct Case {
  const char* name;
  Num in, mul, out;
  double old_rel_l2;  // the relative L2 tolerance gemm_gpu_test.cpp and conv_test_util.h used alone
};
const Case kCases[] = {{"f16", Num::f16, Num::f16, Num::f16, 5e-3},
                       {"bf16", Num::bf16, Num::bf16, Num::bf16, 2e-2},
                       {"tf32", Num::f32, Num::tf32, Num::f32, 1e-2}};

TEST(GpuNumerics, KernelLikeRoundingPasses) {
  for (const Case& c : kCases) {
    Gemm g = simulate(c.in, c.mul, c.out);
    Comparison r = sabre::gpu_test::compare(g.got, g.ref, g.bound);
    EXPECT_TRUE(r.ok()) << c.name << ": " << r.summary();
    EXPECT_EQ(r.n, kM * kN);
    std::printf("%s: %s\n", c.name, r.summary().c_str());
  }
}

TEST(GpuNumerics, OneWrongElementIn333x200Fails) {
  for (const Case& c : kCases) {
    Gemm g = simulate(c.in, c.mul, c.out);
    // One element off by half the sum's typical size (a wrong index, a dropped k-tile for one row).
    const size_t bad = 12345;
    g.got[bad] = g.ref[bad] + 0.5 * g.scale;
    Comparison r = sabre::gpu_test::compare(g.got, g.ref, g.bound);
    EXPECT_FALSE(r.ok()) << c.name << ": " << r.summary();
    EXPECT_EQ(r.over, 1) << c.name;
    EXPECT_EQ(r.worst, int64_t(bad)) << c.name;
    // What the GPU tests checked before: the relative L2 error alone, which this element passes.
    EXPECT_LT(r.rel_l2, c.old_rel_l2) << c.name << ": the old tolerance would have caught it too";
  }
}

TEST(GpuNumerics, OneUnwrittenElementFails) {
  Gemm g = simulate(Num::f16, Num::f16, Num::f16);
  g.got[777] = std::nan("");  // a poisoned element the kernel never wrote
  Comparison r = sabre::gpu_test::compare(g.got, g.ref, g.bound);
  EXPECT_FALSE(r.ok()) << r.summary();
  EXPECT_EQ(r.nonfinite, 1);
  EXPECT_EQ(r.worst, 777);
}

TEST(GpuNumerics, NothingComparedIsNotAPass) {
  Comparison r = sabre::gpu_test::compare(std::vector<double>{}, std::vector<double>{}, Bound{1, 1, 1});
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(sabre::gpu_test::compare(std::vector<double>{1, 2}, std::vector<double>{1}, Bound{1, 1, 1}).ok());
}

// The bounds follow the dtype and the reduction length: wider formats and shorter sums are tighter.
TEST(GpuNumerics, BoundsFollowDtypeAndReductionLength) {
  const Bound f16 = sabre::gpu_test::gemm_bound(Num::f16, Num::f16, 256, 1.0);
  const Bound bf16 = sabre::gpu_test::gemm_bound(Num::bf16, Num::bf16, 256, 1.0);
  const Bound f32 = sabre::gpu_test::gemm_bound(Num::f32, Num::f32, 256, 1.0);
  EXPECT_LT(f16.rtol, bf16.rtol);
  EXPECT_LT(f16.rel_l2, bf16.rel_l2);
  EXPECT_LT(f32.rel_l2, f16.rel_l2);
  EXPECT_LT(sabre::gpu_test::gemm_bound(Num::f32, Num::f32, 16, 1.0).atol,
            sabre::gpu_test::gemm_bound(Num::f32, Num::f32, 1 << 20, 1.0).atol);
  EXPECT_DOUBLE_EQ(sabre::gpu_test::gemm_bound(Num::f16, Num::f16, 256, 2.0).atol, 2 * f16.atol);
}

}  // namespace
