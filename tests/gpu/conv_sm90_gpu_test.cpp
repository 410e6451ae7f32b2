// GPU numerical test of the sm90 conv kernels (conv_sm90.h: TMA im2col + warp-specialized wgmma,
// 3.x epilogues) against a double-precision CPU reference conv. Compiles the kernels below
// (parallel nvcc through the product path, compile_sm90_conv_kernels), dlopens each, and runs every
// problem on random inputs (never zeros) with the output and a guard region after it poisoned with
// NaN first. Problems the kernels cannot take (C or K not a multiple of 8, stride above 8, groups > 1)
// must be refused with NOT_SUPPORTED and a message, never run. Needs an sm_90 GPU: exits 77 without
// a GPU or on another arch, 1 on any failure.
//
//   sabre_conv_sm90_gpu_test [-j N] [--work DIR] [NAME...]      (default: the kernels in kKernels)
#include <dlfcn.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "backends/cutlass/conv_sm90.h"
#include "backends/cutlass/nvcc.h"
#include "ir/dtype.h"
#include "sabre/kernel_abi.h"
#include "conv_test_util.h"

namespace cb = sabre::cutlass_backend;
namespace fs = std::filesystem;

namespace {

using namespace sabre::conv_test;

// Every epilogue form (per-column bias fusion op with and without the residual as its source, the
// no-bias fusion op with and without it, the EVT tree with and without the bias), both dtypes, every
// catalog row of each schedule and a 1x2 cluster (X tiles multicast), for ws and for the persistent
// schedules (whose adapter, scheduler and PDL launch are sabre's: every form again there).
const char* const kKernels[] = {
    "sm90_conv_fprop_nhwc_f16_f16_f32_128x128x64_c1x1_a8_bias_relu",
    "sm90_conv_fprop_nhwc_bf16_bf16_f32_128x128x64_c1x1_a8_bias_relu",
    "sm90_conv_fprop_nhwc_f16_f16_f32_128x64x64_c1x1_a8_bias_res_relu",
    "sm90_conv_fprop_nhwc_bf16_bf16_f32_128x128x64_c2x1_a8_bias_relu_res",
    "sm90_conv_fprop_nhwc_f16_f16_f32_64x128x64_c1x1_a8_bias_res",
    "sm90_conv_fprop_nhwc_f16_f16_f32_64x128x64_c1x1_a8_silu",
    "sm90_conv_fprop_nhwc_bf16_bf16_f32_128x64x64_c1x1_a8_bias_hardswish",
    "sm90_conv_fprop_nhwc_f16_f16_f32_128x128x64_c2x1_a8_relu_res",
    "sm90_conv_fprop_nhwc_bf16_bf16_f32_64x128x64_c1x1_a8_res_relu",
    "sm90_conv_fprop_nhwc_f16_f16_f32_128x64x64_c1x1_a8_linear",
    "sm90_conv_fprop_nhwc_f16_f16_f32_64x128x64_c1x2_a8_bias_sigmoid",
    // relu6 (MobileNetV2's Clip(0, 6)): the functor the kernel defines, with and without bias.
    "sm90_conv_fprop_nhwc_f16_f16_f32_128x64x64_c1x1_a8_bias_relu6",
    "sm90_conv_fprop_nhwc_bf16_bf16_f32_128x128x64_c1x1_a8_relu6",
    // Persistent pingpong (rows 128x64, 128x128, 64x128) and cooperative (128x128 c1x1 and c2x1,
    // 256x64, 256x128).
    "sm90_conv_fprop_pingpong_nhwc_f16_f16_f32_128x64x64_c1x1_a8_bias_relu",
    "sm90_conv_fprop_pingpong_nhwc_f16_f16_f32_128x64x64_c1x1_a8_bias_res_relu",
    "sm90_conv_fprop_pingpong_nhwc_bf16_bf16_f32_128x128x64_c1x1_a8_bias_relu_res",
    "sm90_conv_fprop_pingpong_nhwc_f16_f16_f32_64x128x64_c1x1_a8_res_relu",
    "sm90_conv_fprop_pingpong_nhwc_bf16_bf16_f32_64x128x64_c1x1_a8_bias_relu6",
    "sm90_conv_fprop_pingpong_nhwc_f16_f16_f32_128x128x64_c1x2_a8_linear",
    "sm90_conv_fprop_coop_nhwc_f16_f16_f32_128x128x64_c1x1_a8_bias_relu",
    "sm90_conv_fprop_coop_nhwc_bf16_bf16_f32_128x128x64_c2x1_a8_bias_res_relu",
    "sm90_conv_fprop_coop_nhwc_f16_f16_f32_256x64x64_c1x1_a8_bias_res_relu",
    "sm90_conv_fprop_coop_nhwc_f16_f16_f32_256x128x64_c1x1_a8_relu_res",
    "sm90_conv_fprop_coop_nhwc_bf16_bf16_f32_256x64x64_c1x1_a8_silu",
};

struct Problem {
  const char* label;
  int64_t n, h, w, c, k, r, s, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
  int64_t pad_h_end = -1, pad_w_end = -1;  // -1: the begin padding (symmetric)
  const char* refusal = nullptr;           // substring of the message every kernel must refuse with
  int64_t p() const { return (h + pad_h + (pad_h_end < 0 ? pad_h : pad_h_end) - dil_h * (r - 1) - 1) / stride_h + 1; }
  int64_t q() const { return (w + pad_w + (pad_w_end < 0 ? pad_w : pad_w_end) - dil_w * (s - 1) - 1) / stride_w + 1; }
};
const Problem kProblems[] = {
    {"3x3_s1_p1_c64", 2, 14, 14, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1},
    {"3x3_s2_p1_c64_k128_odd", 2, 15, 15, 64, 128, 3, 3, 1, 1, 2, 2, 1, 1},
    {"1x1_c64_k256", 3, 7, 7, 64, 256, 1, 1, 0, 0, 1, 1, 1, 1},
    {"1x1_c256_k64_28x28", 4, 28, 28, 256, 64, 1, 1, 0, 0, 1, 1, 1, 1},
    {"1x1_s2_downsample", 2, 14, 14, 64, 64, 1, 1, 0, 0, 2, 2, 1, 1},
    {"3x3_dil2_p2", 1, 12, 12, 64, 64, 3, 3, 2, 2, 1, 1, 2, 2},
    {"3x3_dil3_s2_p1", 2, 17, 17, 64, 64, 3, 3, 1, 1, 2, 2, 3, 3},
    {"3x2_s2x1_p1x0_hw_differ", 2, 10, 9, 64, 64, 3, 2, 1, 0, 2, 1, 1, 1},
    // The stem as sabre compile lowers it (C padded to 8): C far below the tile's 64 channels, 7x7, stride 2.
    {"7x7_s2_p3_c8_padded_stem", 2, 32, 32, 8, 64, 7, 7, 3, 3, 2, 2, 1, 1},
    {"7x7_s1_p3_c16_k32", 1, 10, 10, 16, 32, 7, 7, 3, 3, 1, 1, 1, 1},
    // Channel counts that are multiples of 8 but not of the tiles: partial k-blocks and N tiles.
    {"3x3_c24_k40", 1, 9, 9, 24, 40, 3, 3, 1, 1, 1, 1, 1, 1},
    {"3x3_c96_k72", 2, 11, 11, 96, 72, 3, 3, 1, 1, 1, 1, 1, 1},
    // ResNet-50's last 3x3 layer at batch 1: few output tiles over a deep R·S·C.
    {"3x3_c512_k512_7x7_batch1", 1, 7, 7, 512, 512, 3, 3, 1, 1, 1, 1, 1, 1},
    // More output tiles than the H200's 132 SMs, so a persistent CTA walks several tiles (its pipeline
    // state carried across them) and pingpong's second warpgroup gets tiles: the 3x3 for every tile
    // but 256x128 (98 tiles), the 1x1 (196 of them) for that one too.
    {"3x3_c64_k256_56x56_many_tiles", 4, 56, 56, 64, 256, 3, 3, 1, 1, 1, 1, 1, 1},
    {"1x1_c64_k256_56x56_many_tiles", 8, 56, 56, 64, 256, 1, 1, 0, 0, 1, 1, 1, 1},
    // Asymmetric padding (ONNX pads end != begin): only p and q say so; the kernel derives the end padding.
    {"3x3_p1_end0", 1, 10, 10, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1, 0, 0},
    {"3x3_s2_p0_end1", 2, 14, 14, 64, 64, 3, 3, 0, 0, 2, 2, 1, 1, 1, 1},
    // End padding 0 where the exact one, (p-1)*stride + span - h - pad, is -1: the extent floors.
    {"3x3_dil2_s2_p2_end0", 2, 14, 14, 64, 64, 3, 3, 2, 2, 2, 2, 2, 2, 0, 0},
    // Refusals: TMA needs 16-byte channel rows; its im2col traversal stride is at most 8.
    {"3x3_c6_k40_refused", 1, 9, 9, 6, 40, 3, 3, 1, 1, 1, 1, 1, 1, -1, -1, "alignment"},
    {"7x7_s2_p3_c3_stem_refused", 2, 32, 32, 3, 64, 7, 7, 3, 3, 2, 2, 1, 1, -1, -1, "alignment"},
    {"3x3_c64_k36_refused", 1, 9, 9, 64, 36, 3, 3, 1, 1, 1, 1, 1, 1, -1, -1, "alignment"},
    {"1x1_s9_refused", 1, 19, 19, 64, 64, 1, 1, 0, 0, 9, 9, 1, 1, -1, -1, "stride above 8"},
};

using Kernel = ConvKernel<cb::Sm90ConvSpec>;

// Runs one kernel on one problem; prints one line; returns false on a failure.
bool run_case(const Kernel& kn, const Problem& pb, std::mt19937& rng) {
  Operands o;
  DeviceOperands d;
  sabre_conv_args a;
  if (!prepare_case(kn, pb, rng, o, d, a)) return false;

  // Grouped convolution is not what these kernels do: all must refuse it, in can_implement and run.
  sabre_conv_args g = a;
  g.groups = 2;
  if (kn.entry.can_implement(&g) != SABRE_NOT_SUPPORTED || kn.entry.run(&g, nullptr) != SABRE_NOT_SUPPORTED) {
    std::printf("FAIL %s %s: groups=2 was not refused\n", kn.name.c_str(), pb.label);
    return false;
  }

  const int st = kn.entry.can_implement(&a);
  if (pb.refusal) {
    if (st != SABRE_NOT_SUPPORTED || !std::strstr(kn.entry.last_error(), pb.refusal)) {
      std::printf("FAIL %s %s: must be refused with '%s', can_implement returned %d (%s)\n", kn.name.c_str(), pb.label,
                  pb.refusal, st, st ? kn.entry.last_error() : "");
      return false;
    }
    if (kn.entry.run(&a, nullptr) != SABRE_NOT_SUPPORTED) {
      std::printf("FAIL %s %s: run did not refuse what can_implement refused\n", kn.name.c_str(), pb.label);
      return false;
    }
    if (!read_y(kn, pb, d, o, "the refusal")) return false;
    for (uint16_t b : o.yb)
      if (b != nan_bits(kn.spec.elem)) {
        std::printf("FAIL %s %s: refused, yet Y was written\n", kn.name.c_str(), pb.label);
        return false;
      }
    std::printf("ok   %s %s: refused as expected (%s)\n", kn.name.c_str(), pb.label, kn.entry.last_error());
    return true;
  }
  if (!run_kernel(kn, pb, st, a, false, d, o)) return false;
  return check_case(kn, pb, /*serial_splits=*/1, o);
}

// n = 0 is an empty no-op that must not touch Y (and needs no pointers to be read).
bool run_empty(const Kernel& kn) {
  sabre_conv_args a{};
  a.n = 0, a.h = a.w = 8, a.c = a.k = 64, a.r = a.s = 3, a.p = a.q = 8;
  a.pad_h = a.pad_w = 1, a.stride_h = a.stride_w = 1, a.dil_h = a.dil_w = 1, a.groups = 1;
  // 16-byte aligned, never dereferenced.
  a.x = a.filter = a.bias = a.residual = reinterpret_cast<void*>(uintptr_t(256));
  a.y = reinterpret_cast<void*>(uintptr_t(256));
  bool ok = kn.entry.can_implement(&a) == SABRE_OK && kn.entry.workspace_size(&a) == 0 &&
            kn.entry.run(&a, nullptr) == SABRE_OK;
  std::printf("%s %s n=0: empty no-op%s%s\n", ok ? "ok  " : "FAIL", kn.name.c_str(), ok ? "" : ": ",
              ok ? "" : kn.entry.last_error());
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a crash or a ctest timeout still leaves every finished line
  int jobs = 8;
  std::string work = (fs::temp_directory_path() / "sabre_conv_sm90_gpu_test").string();
  std::vector<std::string> names;
  if (!parse_args(argc, argv, "sabre_conv_sm90_gpu_test", jobs, work, names)) return 2;
  const int sm = gpu_sm("sm90 conv GPU test");
  if (sm <= 0) return sm == 0 ? kSkip : 1;
  if (sm != 90) {
    std::printf("sm90 conv kernels run only on sm_90 (wgmma, TMA im2col): skipped on sm_%d\n", sm);
    return kSkip;
  }
  if (names.empty()) names.assign(std::begin(kKernels), std::end(kKernels));

  std::vector<Kernel> kernels;
  std::vector<cb::Sm90ConvSpec> specs;
  for (const auto& n : names) {
    auto s = cb::parse_sm90_conv_kernel_name(n);
    if (!s) {
      std::printf("FAIL %s: not an sm90 conv kernel name\n", n.c_str());
      return 1;
    }
    if (auto why = cb::sm90_conv_unsupported_reason(*s, sm)) {
      std::printf("FAIL %s: %s\n", n.c_str(), why->c_str());
      return 1;
    }
    kernels.push_back({n, *s, {}});
    specs.push_back(*s);
  }
  cb::NvccOptions opts;
  opts.target_sm = sm;
  int failed = 0;
  const std::vector<Kernel> ready = load_built(kernels, cb::compile_sm90_conv_kernels(specs, work, opts, jobs), failed);
  std::mt19937 rng(20260703);
  int cases = 0;
  for (const auto& k : ready) {
    ++cases;
    if (!run_empty(k)) ++failed;
    for (const auto& pb : kProblems) {
      ++cases;
      if (!run_case(k, pb, rng)) ++failed;
    }
  }
  std::printf("%d kernels built of %zu; %d cases; %d failures\n", int(ready.size()), specs.size(), cases, failed);
  return failed ? 1 : 0;
}
