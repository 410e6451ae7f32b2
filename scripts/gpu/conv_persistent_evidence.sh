#!/usr/bin/env bash
# One device call: sabre's persistent sm90 conv kernels (conv_sm90.h: the conv mainloop in CUTLASS's
# persistent pingpong and cooperative GEMM kernels, launched with PDL) on the H200.
#  1. Their GPU numerical test: sabre_conv_sm90_gpu_test on every persistent kernel of its list and
#     two ws kernels as the control (every epilogue form, f16 and bf16, clusters 2x1 and 1x2, strides,
#     dilation, asymmetric padding, residual before and after the activation, refusals, and problems
#     with more output tiles than SMs, so persistent CTAs walk several tiles).
#  2. conv_schedule_bench: every catalog row (ws, pingpong, coop) with bias_relu on ResNet-50's 3x3
#     convs at batch 32 and 1, checked and timed as `sabre tune` times; the persistent kernels again
#     with SABRE_PDL=0 (--pdl-ab).
# About 6-7 minutes on a 16-core host (build ~2.5, test ~2, bench ~2). $OUT/main.log and $OUT/logs.tgz
# come back. The full ctest entry (gpu.conv_sm90_kernels: every kernel of the list, ws included) also
# runs the persistent kernels.
# Usage on the GPU host: bash scripts/gpu/conv_persistent_evidence.sh   (device call: carry [".carry"])
set -u
OUT=${OUT:-/tmp/sabre-convpersistent} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=200 step build ninja -C $b -j16 sabre_conv_sm90_gpu_test conv_schedule_bench
persistent=$(grep -oE '"sm90_conv_fprop_(pingpong|coop)_[a-z0-9_]+"' tests/gpu/conv_sm90_gpu_test.cpp | tr -d '"')
LIMIT=180 TAIL=3 step conv_persistent_kernels $b/tests/gpu/sabre_conv_sm90_gpu_test -j 16 --work /tmp/conv90p \
  $persistent sm90_conv_fprop_nhwc_f16_f16_f32_128x64x64_c1x1_a8_bias_res_relu \
  sm90_conv_fprop_nhwc_bf16_bf16_f32_128x128x64_c2x1_a8_bias_relu_res
grep -E "^(FAIL|built)|kernels built" $LOGS/conv_persistent_kernels.log | head -40
grep -E "many_tiles" $LOGS/conv_persistent_kernels.log | head -30
LIMIT=200 TAIL=24 step conv_schedule_bench $b/conv_schedule_bench --pdl-ab -j 16 --cache /tmp/kcache --db /tmp/convsched.db
grep -vE "^built" $LOGS/conv_schedule_bench.log | head -200
} > $OUT/main.log 2>&1
finish
exit 0
