// GPU numerical test of the generated convolution kernels (issue 7) against a double-precision CPU
// reference conv. Compiles a few kernels (parallel nvcc through the product path, compile_conv_kernels),
// dlopens each, and runs every problem below on random inputs (never zeros) with the output and a
// guard region after it poisoned with NaN first. A kernel whose alignment does not divide C or K
// must refuse the problem (NOT_SUPPORTED) rather than run it; groups > 1 must be refused by the plain
// kernels, and the grouped kernels must run the grouped problems their groups fit and refuse the rest.
// Prints one line per (kernel, problem) and a summary; exits 77 without a GPU, 1 on any failure.
//
//   sabre_conv_gpu_test [-j N] [--work DIR] [NAME...]      (default: the kernels in kKernels)
#include <dlfcn.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "backends/cutlass/conv_spec.h"
#include "backends/cutlass/nvcc.h"
#include "ir/dtype.h"
#include "sabre/kernel_abi.h"
#include "conv_test_util.h"

namespace cb = sabre::cutlass_backend;
namespace fs = std::filesystem;

namespace {

using namespace sabre::conv_test;

// Every activation, bias with and without, the three residual forms, both dtypes, the three
// iterators, every catalog tile shape and the alignment-2 and alignment-1 fallbacks.
const char* const kKernels[] = {
    "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8_bias_relu",
    "sm80_conv_fprop_optimized_nhwc_bf16_bf16_f32_128x64x32_w64x32x32_s4_a8_bias_res_relu",
    "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_64x64x32_w32x32x32_s4_a8_bias_relu_res",
    "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_64x64x32_w32x32x32_s4_a8_bias_res",
    "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x64x32_w64x32x32_s4_a8_bias_silu",
    "sm80_conv_fprop_optimized_nhwc_bf16_bf16_f32_128x128x32_w64x64x32_s3_a8_bias_hardswish",
    "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128x64_w64x64x64_s3_a8_sigmoid",
    // relu6 (MobileNetV2's Clip(0, 6)): the functor the kernel defines; conv sums of 576 products
    // pass 6 often, so the clamp is exercised.
    "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x64x32_w64x32x32_s4_a8_bias_relu6",
    "sm80_conv_fprop_analytic_nhwc_f16_f16_f32_64x64x32_w32x32x32_s2_a1_bias_relu",
    "sm80_conv_fprop_analytic_nhwc_bf16_bf16_f32_64x64x32_w32x32x32_s4_a2_linear",
    // Serial split-K (partials through Y, activation and residual by the last slice): the bias form,
    // both residual forms it allows, both dtypes; on the C = 8 stem and C = 6 problems some slices
    // walk only masked channels and must still take their turn.
    "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_64x64x32_w32x32x32_s4_a8_splitk4_bias_relu",
    "sm80_conv_fprop_optimized_nhwc_bf16_bf16_f32_128x128x32_w64x64x32_s3_a8_splitk2_bias_res_relu",
    "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x64x32_w64x32x32_s4_a8_splitk8_bias_res",
    // relu6 after split-K: only the last slice may clamp (the partial sums pass through unclamped).
    "sm80_conv_fprop_optimized_nhwc_bf16_bf16_f32_64x64x32_w32x32x32_s4_a8_splitk4_bias_relu6",
    // Parallel split-K (f32 partials in the workspace, then the reduction kernel applies the whole
    // epilogue): the no-bias and residual-after forms serial split-K refuses, both dtypes, 2 to 16
    // slices (past the C = 8 stem's and C = 6's channel blocks some slices sum only zeros).
    "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_64x64x32_w32x32x32_s4_a8_splitkp16_bias_relu",
    "sm80_conv_fprop_optimized_nhwc_bf16_bf16_f32_64x64x32_w32x32x32_s4_a8_splitkp8_bias_relu_res",
    "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x64x32_w64x32x32_s4_a8_splitkp4_bias_res_relu",
    "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8_splitkp2_silu",
    "sm80_conv_fprop_optimized_nhwc_bf16_bf16_f32_64x64x32_w32x32x32_s4_a8_splitkp8_bias_relu6",
    // few_channels (the stem padded to 8 channels): K = R·S·C packed, one tap's 8 channels per
    // access, the k-tile past R·S·C read as zero taps. Every catalog tile, 3 and 4 stages, both
    // dtypes, the residual block epilogue; they must refuse every problem with C > 16 or C not a
    // multiple of 8.
    "sm80_conv_fprop_few_channels_nhwc_f16_f16_f32_128x64x32_w64x32x32_s4_a8_bias_relu",
    "sm80_conv_fprop_few_channels_nhwc_bf16_bf16_f32_256x64x32_w64x32x32_s3_a8_bias_relu",
    "sm80_conv_fprop_few_channels_nhwc_f16_f16_f32_64x64x32_w32x32x32_s4_a8_bias_res_relu",
    "sm80_conv_fprop_few_channels_nhwc_bf16_bf16_f32_64x64x32_w32x32x32_s4_a8_linear",
    // Grouped (CUTLASS's single-group fprop): every catalog tile N, both dtypes, with and without
    // bias and activation. They refuse dense problems and groups narrower than their tile N.
    "sm80_conv_fprop_grouped_optimized_nhwc_f16_f16_f32_128x32x32_w64x32x32_s4_a8_bias_relu",
    "sm80_conv_fprop_grouped_optimized_nhwc_bf16_bf16_f32_64x32x32_w32x32x32_s4_a8_bias",
    "sm80_conv_fprop_grouped_optimized_nhwc_f16_f16_f32_128x64x32_w64x32x32_s4_a8_linear",
    "sm80_conv_fprop_grouped_optimized_nhwc_bf16_bf16_f32_128x128x32_w64x64x32_s3_a8_bias_silu",
};

struct Problem {
  const char* label;
  int64_t n, h, w, c, k, r, s, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
  int64_t groups = 1;
  int64_t p() const { return (h + 2 * pad_h - dil_h * (r - 1) - 1) / stride_h + 1; }
  int64_t q() const { return (w + 2 * pad_w - dil_w * (s - 1) - 1) / stride_w + 1; }
};
const Problem kProblems[] = {
    {"3x3_s1_p1_c64", 2, 14, 14, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1},
    {"3x3_s2_p1_c64_k128_odd", 2, 15, 15, 64, 128, 3, 3, 1, 1, 2, 2, 1, 1},
    {"1x1_c64_k256", 3, 7, 7, 64, 256, 1, 1, 0, 0, 1, 1, 1, 1},
    {"1x1_s2_downsample", 2, 14, 14, 64, 64, 1, 1, 0, 0, 2, 2, 1, 1},
    {"3x3_dil2_p2", 1, 12, 12, 64, 64, 3, 3, 2, 2, 1, 1, 2, 2},
    {"3x2_s2x1_p1x0_hw_differ", 2, 10, 9, 64, 64, 3, 2, 1, 0, 2, 1, 1, 1},
    {"7x7_s2_p3_c3_stem", 2, 32, 32, 3, 64, 7, 7, 3, 3, 2, 2, 1, 1},
    // The stem as sabre compile lowers it: C padded to 8 at the NHWC boundary, so the aligned
    // (optimized, a8) kernels run it with C below the tile's K of 32 (codegen channel_padding).
    {"7x7_s2_p3_c8_padded_stem", 2, 32, 32, 8, 64, 7, 7, 3, 3, 2, 2, 1, 1},
    {"3x3_c6_k40", 1, 9, 9, 6, 40, 3, 3, 1, 1, 1, 1, 1, 1},
    // The padded stem at odd image sizes (batch 2 of 3x37x41 padded to 8 channels: P = 19, Q = 21,
    // partial tiles in M) and at ResNet's 224x224, batch 1 (M = 12544, GEMM K = 392: 12 full k-tiles
    // of 32 and one of 8); C = 16 takes two accesses per tap.
    {"7x7_s2_p3_c8_37x41_stem", 2, 37, 41, 8, 64, 7, 7, 3, 3, 2, 2, 1, 1},
    {"7x7_s2_p3_c8_224x224_stem_batch1", 1, 224, 224, 8, 64, 7, 7, 3, 3, 2, 2, 1, 1},
    {"3x3_c16_k32", 2, 11, 13, 16, 32, 3, 3, 1, 1, 1, 1, 1, 1},
    // ResNet-50's last 3x3 layer at batch 1: few output tiles over a deep R·S·C, the split-K case.
    {"3x3_c512_k512_7x7_batch1", 1, 7, 7, 512, 512, 3, 3, 1, 1, 1, 1, 1, 1},
    // Grouped: ResNeXt 32x4d's widths regrouped to groups of 32 (stride 1 and the stride-2 first
    // block of a stage), wider groups, dilation, 1x1, odd sizes, groups of 8 input channels, and 32
    // groups of 4 channels (regroup_convs's input), which every grouped kernel must refuse.
    {"g4_3x3_s1_p1_c128", 2, 14, 14, 128, 128, 3, 3, 1, 1, 1, 1, 1, 1, 4},
    {"g4_3x3_s2_p1_c128_odd", 2, 15, 15, 128, 128, 3, 3, 1, 1, 2, 2, 1, 1, 4},
    {"g2_3x3_s1_p1_c64_k128", 2, 9, 9, 64, 128, 3, 3, 1, 1, 1, 1, 1, 1, 2},
    {"g2_3x3_c256_k256_k128_groups", 1, 7, 7, 256, 256, 3, 3, 1, 1, 1, 1, 1, 1, 2},
    {"g4_3x3_dil2_p2_c64", 1, 12, 12, 64, 128, 3, 3, 2, 2, 1, 1, 2, 2, 4},
    {"g8_1x1_c64_k256", 3, 7, 7, 64, 256, 1, 1, 0, 0, 1, 1, 1, 1, 8},
    {"g2_3x3_c16_k64_11x13", 2, 11, 13, 16, 64, 3, 3, 1, 1, 1, 1, 1, 1, 2},
    {"g32_3x3_c128_4_channels", 2, 8, 8, 128, 128, 3, 3, 1, 1, 1, 1, 1, 1, 32},
};

using Kernel = ConvKernel<cb::ConvSpec>;

// Runs one kernel on one problem; prints one line; returns false on a failure.
bool run_case(const Kernel& kn, const Problem& pb, std::mt19937& rng) {
  Operands o;
  DeviceOperands d;
  sabre_conv_args a;
  if (!prepare_case(kn, pb, rng, o, d, a)) return false;

  // Grouped convolution is not what the plain kernels do: they must refuse it.
  if (!kn.spec.config.grouped && pb.groups == 1) {
    sabre_conv_args g = a;
    g.groups = 2;
    if (kn.entry.can_implement(&g) != SABRE_NOT_SUPPORTED) {
      std::printf("FAIL %s %s: groups=2 was not refused\n", kn.name.c_str(), pb.label);
      return false;
    }
  }

  // The channel rule of conv_spec.h (C a multiple of the alignment; few_channels only for C <= 16)
  // and its group rule (plain kernels: groups 1; grouped: groups > 1 of channels their tile fits).
  const bool fits = !cb::conv_channels_unsupported_reason(kn.spec.config, pb.c) && pb.k % kn.spec.config.alignment == 0 &&
                    !cb::conv_group_unsupported_reason(kn.spec.config, pb.groups, pb.c, pb.k);
  const int st = kn.entry.can_implement(&a);
  if (!fits) {
    if (st != SABRE_NOT_SUPPORTED) {
      std::printf("FAIL %s %s: c=%ld k=%ld outside the kernel's channel rule or alignment %d, but can_implement returned %d\n",
                  kn.name.c_str(), pb.label, long(pb.c), long(pb.k), kn.spec.config.alignment, st);
      return false;
    }
    std::printf("ok   %s %s: refused as expected (%s)\n", kn.name.c_str(), pb.label, kn.entry.last_error());
    return true;
  }
  // A poisoned workspace: a parallel split-K partial the conv leaves unwritten shows.
  if (!run_kernel(kn, pb, st, a, kn.spec.config.split_mode == cb::ConvSplitK::parallel, d, o)) return false;
  return check_case(kn, pb, kn.spec.config.split_mode == cb::ConvSplitK::serial ? kn.spec.config.split_k : 1, o);
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a crash or a ctest timeout still leaves every finished line
  int jobs = 8;
  std::string work = (fs::temp_directory_path() / "sabre_conv_gpu_test").string();
  std::vector<std::string> names;
  if (!parse_args(argc, argv, "sabre_conv_gpu_test", jobs, work, names)) return 2;
  const int sm = gpu_sm("conv GPU test");
  if (sm <= 0) return sm == 0 ? kSkip : 1;
  if (names.empty()) names.assign(std::begin(kKernels), std::end(kKernels));

  std::vector<Kernel> kernels;
  std::vector<cb::ConvSpec> specs;
  int failed = 0;
  for (const auto& n : names) {
    auto s = cb::parse_conv_kernel_name(n);
    if (!s) {
      std::printf("FAIL %s: not a conv kernel name\n", n.c_str());
      return 1;
    }
    if (auto why = cb::conv_unsupported_reason(*s, sm)) {
      std::printf("skip %s: %s\n", n.c_str(), why->c_str());
      continue;
    }
    kernels.push_back({n, *s, {}});
    specs.push_back(*s);
  }
  cb::NvccOptions opts;
  opts.target_sm = sm;
  const std::vector<Kernel> ready = load_built(kernels, cb::compile_conv_kernels(specs, work, opts, jobs), failed);
  std::mt19937 rng(20260702);
  int cases = 0;
  for (const auto& k : ready)
    for (const auto& pb : kProblems) {
      ++cases;
      if (!run_case(k, pb, rng)) ++failed;
    }
  std::printf("%d kernels built of %zu; %d cases; %d failures\n", int(ready.size()), specs.size(), cases, failed);
  return failed ? 1 : 0;
}
