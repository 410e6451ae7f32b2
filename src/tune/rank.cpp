#include "tune/rank.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>
#include <tuple>

#include "backends/cutlass/catalog.h"
#include "backends/cutlass/conv_sm90.h"
#include "backends/cutlass/conv_spec.h"

namespace sabre::tune {

using namespace cutlass_backend;

GpuModel GpuModel::for_sm(int target_sm) {
  GpuModel g;
  if (target_sm < 90) {
    g.sms = 108;
    g.peak_tflops = 312;
    g.hbm_tbps = 2.0;
    g.l2_tbps = 7;
    g.sm80_on_sm90 = 1.0;
  }
  return g;
}

GemmOperands problem_operands(const GemmProblem& p) {
  auto e = parse_elem(p.dtype);
  if (!e) throw std::invalid_argument("GEMM dtype '" + p.dtype + "' has no kernels: use f16, bf16 or f32");
  GemmOperands ops;
  ops.ab = ops.d = *e;
  if (p.layout == "tn")
    ops.layout = Layout::tn;
  else if (p.layout == "tt")
    ops.layout = Layout::tt;
  else
    throw std::invalid_argument("GEMM layout '" + p.layout + "' has no kernels: use tn or tt");
  return ops;
}

EpilogueSpec problem_epilogue(const GemmProblem& p) {
  auto e = parse_epilogue(p.epilogue);
  if (!e) throw std::invalid_argument("GEMM epilogue '" + p.epilogue + "' is not a kernel_spec.h epilogue name");
  return *e;
}

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// Output tiles of the data-parallel grid: a cluster launches whole, so partial clusters still count.
int64_t output_tiles(const KernelConfig& c, const GemmShape& shape) {
  return round_up(ceil_div(shape.m, c.tile.m), c.cluster_m) * round_up(ceil_div(shape.n, c.tile.n), c.cluster_n) *
         shape.batch;
}

}  // namespace

bool split_k_offered(const KernelConfig& c, const GemmShape& shape, const GpuModel& gpu) {
  if (!is_split_k(c.schedule)) return true;
  const int64_t tiles = output_tiles(c, shape);
  return 2 * tiles < gpu.sms && tiles * c.splits <= gpu.sms && ceil_div(shape.k, c.tile.k) >= 2 * c.splits;
}

double predict_us(const KernelSpec& s, const GemmShape& shape, int problem_alignment, const GpuModel& gpu,
                  int target_sm, double* compute_us) {
  const KernelConfig& c = s.config;
  if (c.alignment <= 0 || problem_alignment % c.alignment != 0) return std::numeric_limits<double>::infinity();
  const double bytes = elem_bytes(s.ops.ab), out_bytes = elem_bytes(s.ops.d);
  double peak = gpu.peak_tflops * 1e12 * (s.ops.ab == Elem::f32 ? 0.5 : 1.0);
  if (c.family == Family::sm80 && target_sm >= 90) peak *= gpu.sm80_on_sm90;
  const double per_sm = peak / gpu.sms;
  const int64_t tm = c.tile.m, tn = c.tile.n, tk = c.tile.k;

  // Operand feed: flops per byte a tile's k-step loads; small tiles starve the tensor cores.
  const double intensity = 2.0 * tm * tn / ((tm + tn) * bytes);
  double eff = intensity / (intensity + 12.0);
  // Loads narrower than 16 bytes take more instructions per byte (the alignment fallbacks).
  const double access = c.alignment * bytes;
  if (access < 16) eff *= 0.5 + 0.5 * access / 16.0;
  // Two stages cannot hide the global-load latency.
  if (c.family == Family::sm80 && c.stages <= 2) eff *= 0.7;

  // Tile and cluster quantization: a cluster launches whole, so partial clusters still cost.
  const int64_t tiles = output_tiles(c, shape);
  const int64_t k_iters = ceil_div(shape.k, tk);
  // Multicast halves one operand's L2 reads; it helps once the machine is full.
  if (c.cluster_m * c.cluster_n > 1 && tiles >= gpu.sms) eff *= 1.03;
  const double t_iter = 2.0 * tm * tn * tk / (per_sm * eff);  // seconds
  const double res_bytes = s.epi.residual != Residual::none ? out_bytes : 0;
  const double hbm_per_sm = gpu.hbm_tbps * 1e12 / gpu.sms;
  double t_epi = tm * tn * (out_bytes + res_bytes) / hbm_per_sm;
  if (c.schedule == Schedule::pingpong) t_epi *= 0.3;  // the other warpgroup's mainloop hides it

  double t_compute;
  if (c.schedule == Schedule::streamk) {
    // Work is balanced at k-iteration granularity; split tiles pay a reduction of partials.
    const int64_t units = tiles * k_iters;
    t_compute = ceil_div(units, gpu.sms) * t_iter * 1.05 + t_epi * ceil_div(tiles, gpu.sms);
    if (tiles < gpu.sms) {
      const int64_t splits = std::min<int64_t>(k_iters, ceil_div(gpu.sms, tiles));
      if (splits > 1) t_compute += (splits - 1) * tm * tn * 4.0 / (gpu.l2_tbps * 1e12 / gpu.sms) * 0.25 + 0.5e-6;
    }
    t_compute += gpu.streamk_fixed_us * 1e-6;
  } else if (is_split_k(c.schedule)) {
    // `splits` CTAs per tile, each over its share of the k-iterations. The deterministic reduction
    // is a turnstile: the earlier splits add their f32 partial tile into the workspace one after
    // another, then the last reads the sum and runs the epilogue; each pass moves a partial tile
    // through L2 (as a stream-K fixup does) and hands the lock on. The unordered one stores the
    // first partial, adds the middle ones at once as they arrive, then the last reads the sum:
    // three passes at most.
    const int64_t splits = c.splits;
    const double t_pass = tm * tn * 4.0 / (gpu.l2_tbps * 1e12 / gpu.sms) * 0.25 + gpu.lock_handoff_us * 1e-6;
    const int64_t passes = c.schedule == Schedule::splitk ? splits : std::min<int64_t>(splits, 3);
    const int64_t waves = ceil_div(tiles * splits, gpu.sms);
    t_compute = waves * (ceil_div(k_iters, splits) * t_iter + passes * t_pass + t_epi);
  } else {
    const int64_t waves = ceil_div(tiles, gpu.sms);
    t_compute = waves * (k_iters * t_iter + t_epi);
  }
  // Bandwidth floors: every operand once from HBM; every tile's operands from L2.
  const double hbm_bytes = (double(shape.m) * shape.k + double(shape.n) * shape.k) * bytes * shape.batch +
                           double(shape.m) * shape.n * (out_bytes + res_bytes) * shape.batch;
  const double t_hbm = hbm_bytes / (gpu.hbm_tbps * 1e12);
  const double l2_bytes = double(tiles) * shape.k * bytes * (double(tm) / c.cluster_n + double(tn) / c.cluster_m);
  const double t_l2 = l2_bytes / (gpu.l2_tbps * 1e12);
  if (compute_us) *compute_us = t_compute * 1e6 + gpu.launch_us;
  return std::max({t_compute, t_hbm, t_l2}) * 1e6 + gpu.launch_us;
}

std::vector<Candidate> rank_candidates(const GemmProblem& p, int64_t m, int target_sm, size_t limit) {
  const GemmOperands ops = problem_operands(p);
  const EpilogueSpec epi = problem_epilogue(p);
  const GpuModel gpu = GpuModel::for_sm(target_sm);
  const GemmShape shape{m, p.n, p.k, p.batch};
  std::vector<Candidate> out;
  std::vector<Family> families = {Family::sm80};
  if (target_sm >= 90) families.insert(families.begin(), Family::sm90);
  for (Family f : families)
    for (const KernelConfig& c : catalog(f, ops, target_sm)) {
      KernelSpec s{c, ops, epi};
      if (unsupported_reason(s, target_sm)) continue;  // the epilogue may rule out what the catalog allowed
      if (!split_k_offered(c, shape, gpu)) continue;
      double compute = 0;
      double t = predict_us(s, shape, p.alignment, gpu, target_sm, &compute);
      if (!std::isfinite(t)) continue;
      out.push_back({s, kernel_name(s), t, compute});
    }
  // Ties between sm90 kernels go to the longer tile K (fewer k-steps), then every tie by name.
  std::sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) {
    if (a.predicted_us != b.predicted_us) return a.predicted_us < b.predicted_us;
    if (a.compute_us != b.compute_us) return a.compute_us < b.compute_us;
    const KernelConfig &x = a.spec.config, &y = b.spec.config;
    if (x.family == Family::sm90 && y.family == Family::sm90 && x.tile.k != y.tile.k) return x.tile.k > y.tile.k;
    return a.name < b.name;
  });
  // Of two sm90 kernels that differ only in tile K (same schedule, tile M x N, cluster and split), the
  // ranking keeps the one ahead: the 256-byte K wherever the model rates them the same (K a multiple
  // of 128 elements), since it was the faster of the two wherever both were timed
  // (bench/results/ktile_*); timing both would fill the top-k with pairs (split-K would drop out at
  // small M with long K).
  std::set<std::tuple<int, int, int, int, int, int>> seen;
  std::erase_if(out, [&](const Candidate& c) {
    const KernelConfig& k = c.spec.config;
    if (k.family != Family::sm90) return false;
    return !seen.insert({int(k.schedule), k.tile.m, k.tile.n, k.cluster_m, k.cluster_n, k.splits}).second;
  });
  if (limit && out.size() > limit) out.resize(limit);
  return out;
}

std::vector<ConvCandidate> rank_conv_candidates(const ConvProblem& p, int target_sm, ConvKernels family) {
  if (p.groups < 1 || p.c % p.groups || p.k % p.groups)
    throw std::invalid_argument("groups=" + std::to_string(p.groups) + " does not divide c=" + std::to_string(p.c) +
                                " and k=" + std::to_string(p.k));
  const bool grouped = p.groups > 1;
  auto elem = parse_elem(p.dtype);
  if (!elem || (*elem != Elem::f16 && *elem != Elem::bf16))
    throw std::invalid_argument("dtype " + p.dtype + ": conv kernels take f16 or bf16");
  auto epi = parse_epilogue(p.epilogue);
  const auto epis = conv_epilogues();
  if (!epi || std::find(epis.begin(), epis.end(), *epi) == epis.end())
    throw std::invalid_argument("epilogue " + p.epilogue + ": conv kernels are not generated with it");
  int best_align = 0;
  for (const ConvConfig& c : conv_catalog(*elem, target_sm))
    if (c.alignment <= p.alignment && c.grouped == grouped) best_align = std::max(best_align, c.alignment);
  if (best_align == 0)
    throw std::invalid_argument("no conv config for alignment " + std::to_string(p.alignment) + " on sm" +
                                std::to_string(target_sm));
  // A grouped conv is `groups` implicit GEMMs of N = k/groups over K = r·s·c/groups, side by side
  // in one grid: the GEMM model's batch.
  const int64_t cg = p.c / p.groups;
  const GemmShape shape{p.n * p.p * p.q, p.k / p.groups, p.r * p.s * cg, p.groups};
  const GpuModel gpu = GpuModel::for_sm(target_sm);
  const GemmOperands ops{*elem, *elem, Layout::tn};
  std::vector<ConvCandidate> sm80, sm90;
  // GpuModel::conv_cta_iter_us: a grid of at most one CTA per SM takes at least its k-tiles per CTA
  // one after another at the latency-bound rate.
  auto latency_floor = [&](int64_t ctas, int64_t k_tiles_per_cta) {
    return ctas <= gpu.sms ? double(k_tiles_per_cta) * gpu.conv_cta_iter_us + gpu.launch_us : 0.0;
  };
  for (const ConvConfig& base : conv_catalog(*elem, target_sm)) {
    if (base.alignment != best_align || conv_channels_unsupported_reason(base, p.c) ||
        conv_group_unsupported_reason(base, p.groups, p.c, p.k))
      continue;
    // The GEMM K the mainloop walks: optimized and analytic take C in chunks of the tile's K at
    // every filter tap (R·S·ceil(C/tileK) k-tiles; the stem padded to 8 channels fills a quarter
    // of each 32-wide tile), few_channels packs (r,s,c) into K = R·S·C.
    const int64_t c_walked = base.iter == ConvIter::few_channels ? cg : (cg + base.tile.k - 1) / base.tile.k * base.tile.k;
    const GemmShape walked{shape.m, shape.n, p.r * p.s * c_walked, shape.batch};
    for (int split = 1; split <= kMaxConvSplitK; split *= 2)
      for (ConvSplitK mode : {ConvSplitK::serial, ConvSplitK::parallel}) {
      const bool parallel = mode == ConvSplitK::parallel;
      if (split == 1 && parallel) continue;
      ConvConfig c = base;
      c.split_k = split;
      c.split_mode = mode;
      // The slices interleave the channel blocks of every tap: a split that does not divide them
      // leaves slices with less work (or none) that still cost a pass or a partial.
      if (split > 1 && p.c % (int64_t(c.tile.k) * split) != 0) continue;
      if (split > 1 && !parallel && !conv_split_k_allowed(*epi)) continue;
      const ConvSpec spec{c, *elem, *epi};
      if (conv_unsupported_reason(spec, target_sm)) continue;
      KernelConfig g;
      g.family = Family::sm80;
      g.schedule = split > 1 ? Schedule::splitk : Schedule::multistage;
      g.tile = c.tile, g.warp = c.warp, g.stages = c.stages, g.alignment = c.alignment, g.splits = split;
      if (!split_k_offered(g, walked, gpu)) continue;
      ConvCandidate cand{conv_kernel_name(spec), 0, 0};
      if (parallel) {
        // The conv part is a data-parallel grid of `split` times the tiles, each over 1/split of the
        // k-tiles, storing f32 with no epilogue: a batched GEMM of batch `split` (no hand-over between
        // slices). Then the reduction kernel reads every partial and writes Y (and reads R): a
        // bandwidth-bound pass and one more launch.
        KernelConfig d = g;
        d.schedule = Schedule::multistage, d.splits = 1;
        const GemmShape slice{walked.m, walked.n, walked.k / split, split};
        const GemmOperands partial{*elem, Elem::f32, Layout::tn};
        double compute = 0;
        double conv_us = predict_us(KernelSpec{d, partial, EpilogueSpec{}}, slice, p.alignment, gpu, target_sm, &compute);
        const double floor = latency_floor(output_tiles(g, walked) * split, slice.k / c.tile.k);
        conv_us = std::max(conv_us, floor), compute = std::max(compute, floor);
        const double out = double(shape.m) * shape.n;
        const double bytes = split * out * 4 + out * elem_bytes(*elem) * (epi->residual != Residual::none ? 2 : 1);
        const double reduce_us = bytes / (gpu.hbm_tbps * 1e12) * 1e6 + gpu.launch_us;
        cand.predicted_us = conv_us + reduce_us;
        cand.compute_us = compute + reduce_us;
      } else {
        cand.predicted_us = predict_us(KernelSpec{g, ops, *epi}, walked, p.alignment, gpu, target_sm, &cand.compute_us);
        // Serial slices also hand the tile on, one pass each after the first.
        const double floor = latency_floor(output_tiles(g, walked) * split, walked.k / c.tile.k / split) +
                             (split - 1) * gpu.lock_handoff_us;
        cand.predicted_us = std::max(cand.predicted_us, floor), cand.compute_us = std::max(cand.compute_us, floor);
      }
      if (base.iter == ConvIter::few_channels)
        for (double* us : {&cand.predicted_us, &cand.compute_us})
          *us = (*us - gpu.launch_us) * gpu.few_channels_slowdown + gpu.launch_us;
      sm80.push_back(cand);
      }
  }
  if (target_sm == 90 && family != ConvKernels::sm80 && !grouped) {
    for (const Sm90ConvConfig& c : sm90_conv_catalog(*elem)) {
      const Sm90ConvSpec spec{c, *elem, *epi};
      if (c.alignment > p.alignment || sm90_conv_unsupported_reason(spec, target_sm)) continue;
      KernelConfig g;
      g.family = Family::sm90;
      // The persistent kernels are the GEMM's own schedules around the conv mainloop, so the GEMM
      // model's pingpong (epilogue under the other warpgroup's mainloop) and coop (data-parallel
      // waves) describe them. ws (one CTA per tile, its epilogue alone) is modelled as coop too, as it
      // was before the persistent schedules: the model has no term for what persistence saves over it
      // (the next tile's first loads during the epilogue, a CTA's setup per tile), so a ws kernel and
      // a coop one of the same tile predict the same and the tie goes to the persistent one below.
      g.schedule = c.schedule == Sm90ConvSchedule::pingpong ? Schedule::pingpong : Schedule::coop;
      g.tile = c.tile, g.cluster_m = c.cluster_m, g.cluster_n = c.cluster_n, g.alignment = c.alignment;
      const int64_t c_padded = (p.c + c.tile.k - 1) / c.tile.k * c.tile.k;
      const GemmShape padded{shape.m, shape.n, p.r * p.s * c_padded, 1};
      ConvCandidate cand{sm90_conv_kernel_name(spec), 0, 0};
      cand.predicted_us = predict_us(KernelSpec{g, ops, *epi}, padded, p.alignment, gpu, target_sm, &cand.compute_us);
      const double floor = latency_floor(output_tiles(g, padded), padded.k / c.tile.k);
      cand.predicted_us = std::max(cand.predicted_us, floor), cand.compute_us = std::max(cand.compute_us, floor);
      sm90.push_back(cand);
    }
  }
  std::vector<ConvCandidate> out = family == ConvKernels::sm90 && !sm90.empty() ? sm90 : sm80;
  if (family == ConvKernels::automatic) out.insert(out.end(), sm90.begin(), sm90.end());
  out.erase(std::remove_if(out.begin(), out.end(), [](const ConvCandidate& c) { return !std::isfinite(c.predicted_us); }),
            out.end());
  if (out.empty())
    throw std::invalid_argument("no conv kernel the model can time for alignment " + std::to_string(p.alignment));
  auto persistent = [](const ConvCandidate& c) {
    auto s = parse_sm90_conv_kernel_name(c.name);
    return s && s->config.schedule != Sm90ConvSchedule::ws;
  };
  std::sort(out.begin(), out.end(), [&](const ConvCandidate& a, const ConvCandidate& b) {
    if (a.predicted_us != b.predicted_us) return a.predicted_us < b.predicted_us;
    if (a.compute_us != b.compute_us) return a.compute_us < b.compute_us;
    if (persistent(a) != persistent(b)) return persistent(a);
    return a.name < b.name;
  });
  return out;
}

}  // namespace sabre::tune
