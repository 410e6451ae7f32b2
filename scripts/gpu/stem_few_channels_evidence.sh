#!/usr/bin/env bash
# One device call for branch fewch (the RGB stem padded to 8 channels on few_channels conv kernels,
# sabre compile --stem conv, against the default im2col step + GEMM): the few_channels kernels' GPU
# numerics (gpu.conv_kernels' cases, stem-shaped ones included), then ResNet-50 compiled --no-tune
# both ways, each compared with PyTorch fp16, profiled at batch 32 (the stem's steps: im2col + gemm
# against nchw_to_nhwc + conv) and timed at batch 1 and 32. $OUT/main.log and $OUT/logs.tgz come back.
# Usage on the GPU host: bash scripts/gpu/stem_few_channels_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-fewch} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
python3 bench/models/export_tv.py /tmp/tv > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=200 step build ninja -C $b -j16 sabre sabre_conv_gpu_test
LIMIT=200 TAIL=4 step conv_few_channels $b/tests/gpu/sabre_conv_gpu_test -j 16 --work /tmp/convk \
  sm80_conv_fprop_few_channels_nhwc_f16_f16_f32_128x64x32_w64x32x32_s4_a8_bias_relu \
  sm80_conv_fprop_few_channels_nhwc_bf16_bf16_f32_256x64x32_w64x32x32_s3_a8_bias_relu \
  sm80_conv_fprop_few_channels_nhwc_f16_f16_f32_64x64x32_w32x32x32_s4_a8_bias_res_relu \
  sm80_conv_fprop_few_channels_nhwc_bf16_bf16_f32_64x64x32_w32x32x32_s4_a8_linear \
  sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x64x32_w64x32x32_s4_a8_bias_relu
grep -E "FAIL|stem|c16" $LOGS/conv_few_channels.log | head -30
wait $exp; tail -2 $LOGS/export.log
for s in im2col conv; do
  LIMIT=150 TAIL=12 step compile_rn50_$s $b/sabre compile /tmp/tv/resnet50.onnx -o /tmp/rn50_$s.sabre --dtype fp16 \
    --dynamic batch=1..32 --no-tune --stem $s
  grep -E "note: conv .*(im2col|padded)" $LOGS/compile_rn50_$s.log
  LIMIT=40 TAIL=7 step compare_rn50_$s python3 bench/models/tv_e2e.py compare resnet50 /tmp/tv /tmp/rn50_$s.sabre $b/sabre 1 32
  LIMIT=10 TAIL=24 step profile_rn50_${s}_b32 $b/sabre bench /tmp/rn50_$s.sabre --dim batch=32 --profile
done
for s in im2col conv im2col conv; do
  LIMIT=20 TAIL=3 step bench_${s}_b32 $b/sabre bench /tmp/rn50_$s.sabre --dim batch=32
  LIMIT=20 TAIL=3 step bench_${s}_b1 $b/sabre bench /tmp/rn50_$s.sabre --dim batch=1
done
} > $OUT/main.log 2>&1
finish
exit 0
