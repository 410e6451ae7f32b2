// The analytic model: predicts a kernel's time on a problem from tile and wave quantization,
// arithmetic intensity, HBM/L2 traffic, cluster and alignment, and ranks the catalog with it.
// It picks kernels when there is no GPU to time on, and chooses which candidates the profiler
// times. Deterministic (ties break by kernel name). Tests: tests/unit/rank_test.cpp
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/cutlass/kernel_spec.h"
#include "tune/select.h"

namespace sabre::tune {

// What the model knows about a GPU. Defaults: H200 (132 SMs).
struct GpuModel {
  int sms = 132;
  double peak_tflops = 989;   // dense 16-bit tensor-core peak (TF32 is half)
  double hbm_tbps = 4.8;
  double l2_tbps = 11;
  double sm80_on_sm90 = 0.6;  // mma.sync kernels reach about this share of wgmma peak on Hopper
  double launch_us = 2.5;     // launch + pipeline fill + epilogue drain, per kernel
  // Split-K's serial reduction hands a lock from one split to the next through L2 (a fence, an
  // atomic, the next CTA's poll and its pass over the partial tile): a few microseconds a pass,
  // fitted to split-K GEMMs and convs timed on the GPU (bench/results/convsk_*). Much less makes the
  // model pick split-K where one CTA per tile is faster.
  double lock_handoff_us = 2.7;
  // What a stream-K kernel costs beyond its balanced work and fixups: it launches without PDL, after
  // the memset with which initialize zeroes its locks. Without this term the model ranked stream-K
  // first where a data-parallel kernel was faster; it is the smallest excess over the prediction
  // that stream-K kernels showed when timed (bench/results/gemm_tune_*).
  double streamk_fixed_us = 3.7;
  // The few_channels conv iterator gathers one filter tap's channels (16 bytes) from a different
  // pixel each access and recomputes (n,p,q,r,s) for it, so it runs well below the GEMM the model
  // would count it as; its time is scaled by the ratio measured on ResNet-50's padded stem
  // (bench/results/rn50_stem_*).
  double few_channels_slowdown = 2.6;
  // A conv grid of at most one CTA per SM (small batch, deep R·S·C) is latency-bound: each CTA
  // waits on its own few k-tiles in flight, whatever the tensor cores could do, so the throughput
  // model alone predicts it several times too fast. The floor is k-tiles per CTA times this per-tile
  // latency (fitted to small-batch 3x3 convs of both families, bench/results/stem_conv_* and
  // convsk_*), plus the launch.
  double conv_cta_iter_us = 0.25;
  static GpuModel for_sm(int target_sm);  // 90: H100/H200; 80: A100 (108 SMs, 312 TFLOPs)
};

struct GemmShape {
  int64_t m = 0, n = 0, k = 0, batch = 1;
};

struct Candidate {
  cutlass_backend::KernelSpec spec;
  std::string name;
  double predicted_us = 0;
  double compute_us = 0;  // the time without the bandwidth floors: breaks ties between candidates at a floor
};

// The operands and epilogue of a problem; throws std::invalid_argument (naming the field) for a
// dtype, layout or epilogue sabre has no kernels for.
cutlass_backend::GemmOperands problem_operands(const GemmProblem& p);
cutlass_backend::EpilogueSpec problem_epilogue(const GemmProblem& p);

// Predicted time of `s` on `shape`, microseconds; +inf when the kernel cannot run it (alignment).
// `compute_us`, where given, gets the part the bandwidth floors do not cover (the grid's mainloop
// and epilogue time): where the floors decide, every candidate predicts the same and the one with
// the most slack under the floor should win the tie (ResNet-50's 64-channel 1x1 convs and its stem
// GEMM at batch 32 tied so, and the name order put an sm80 kernel first).
double predict_us(const cutlass_backend::KernelSpec& s, const GemmShape& shape, int problem_alignment,
                  const GpuModel& gpu, int target_sm, double* compute_us = nullptr);

// Whether a split-K kernel (schedule splitk) is worth offering for `shape`: the data-parallel grid
// would fill fewer than half the SMs (tiles < SMs/2), all splits × tiles CTAs fit in one wave, and
// every split keeps at least 2 k-iterations (K/tileK >= 2·splits). True for every other schedule.
// Keeps split-K candidates, and their compiles, to the small-M problems they are for.
bool split_k_offered(const cutlass_backend::KernelConfig& c, const GemmShape& shape, const GpuModel& gpu);

// The catalog kernels (sm90 and the sm80 fallbacks on sm90 targets; sm80 on sm80) that pass the
// static filter, the problem's alignment and split_k_offered, fastest predicted first. `limit` 0:
// all of them.
std::vector<Candidate> rank_candidates(const GemmProblem& p, int64_t m, int target_sm, size_t limit = 0);

// The conv kernel families a conv pick may choose from (sabre compile --conv-kernels): automatic
// ranks both on an sm 90 target; sm80 keeps to the CUTLASS 2.x implicit GEMMs (conv_spec.h); sm90
// takes the 3.x TMA/wgmma kernels (conv_sm90.h) wherever one can run the conv and sm80 elsewhere.
enum class ConvKernels { automatic, sm80, sm90 };

// The conv kernels that can run `p` (at its batch p.n), fastest predicted first: the sm80 catalog
// configs with the widest alignment C and K allow that take p.c (conv_channels_unsupported_reason:
// few_channels only for C <= 16) and their serial split-K variants (offered as split_k_offered
// says, with whole channel tiles per slice at every filter tap), and on sm 90 the sm90 family as
// `family` allows, modelled over K padded to 64 channels as the GEMM schedule it runs (pingpong as
// pingpong; coop, and the non-persistent ws, as coop; at an exact tie a persistent kernel comes
// before a ws one). Each is predicted with predict_us on the implicit GEMM (M = N·P·Q, N = K) over
// the K its mainloop walks: R·S·C for few_channels, R·S·(C rounded up to the tile's K) for the
// optimized and analytic iterators, which take C in tile-K chunks at every tap (the padded stem's
// 8 channels fill a quarter of a 32-wide k-tile), and R·S·(C rounded up to 64) for sm90.
// Throws std::invalid_argument saying why when no conv kernel fits (grouped convs, an epilogue
// conv kernels are not generated with, a dtype). Tests: tests/unit/codegen_lower_test.cpp,
// tests/unit/conv_tune_test.cpp
struct ConvCandidate {
  std::string name;
  double predicted_us = 0;
  double compute_us = 0;  // as Candidate::compute_us: the tie-break at a bandwidth floor
};
std::vector<ConvCandidate> rank_conv_candidates(const ConvProblem& p, int target_sm,
                                                ConvKernels family = ConvKernels::automatic);

}  // namespace sabre::tune
