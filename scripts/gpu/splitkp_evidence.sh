#!/usr/bin/env bash
# One device call (2026-12-03, sixth session): issue 7 with parallel split-K sm80 conv kernels (f32
# partials in the workspace, a reduction kernel applying the epilogue) for ResNet-50's batch-1 3x3
# convs. The conv GPU test on the parallel kernels (and one serial one beside them); the owed
# runtime_session test (the stem_conv/depthwise clamp param as one "clamp" pair); ResNet-50 tuned
# from last session's DB (--top-k 2: the new candidates are compiled and timed), timed against
# PyTorch eager and torch.compile in one run, the tuned artifact twice (first and last) to see
# whether the first sabre bench after PyTorch runs slower; compared with PyTorch fp16; profiled
# step by step at batch 1 and 32 (every step).
# $OUT/main.log and $OUT/logs.tgz come back.
# Usage on the GPU host: bash scripts/gpu/splitkp_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-splitkp} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; git log --oneline -1 2>/dev/null
python3 bench/models/export_tv.py /tmp/tv > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=150 step build ninja -C $b -j16 sabre sabre_conv_gpu_test runtime_session_test
LIMIT=90 TAIL=3 step conv_splitkp $b/tests/gpu/sabre_conv_gpu_test -j 16 --work /tmp/convk \
  sm80_conv_fprop_optimized_nhwc_f16_f16_f32_64x64x32_w32x32x32_s4_a8_splitkp16_bias_relu \
  sm80_conv_fprop_optimized_nhwc_bf16_bf16_f32_64x64x32_w32x32x32_s4_a8_splitkp8_bias_relu_res \
  sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x64x32_w64x32x32_s4_a8_splitkp4_bias_res_relu \
  sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8_splitkp2_silu \
  sm80_conv_fprop_optimized_nhwc_bf16_bf16_f32_64x64x32_w32x32x32_s4_a8_splitkp8_bias_relu6 \
  sm80_conv_fprop_optimized_nhwc_f16_f16_f32_64x64x32_w32x32x32_s4_a8_splitk4_bias_relu
grep -E "^FAIL" $LOGS/conv_splitkp.log | head -20
LIMIT=60 TAIL=3 step runtime_session $b/tests/gpu/runtime_session_test
wait $exp; tail -2 $LOGS/export.log
mkdir -p /tmp/warm && gunzip -c bench/results/rn50_db_h200_2026-12-03.jsonl.gz > /tmp/warm/rn50_db.jsonl
$b/sabre db import /tmp/warm/rn50_db.jsonl --db /tmp/warm/tuning.db | tail -1
LIMIT=260 TAIL=8 step compile_rn50_tuned $b/sabre compile /tmp/tv/resnet50.onnx -o /tmp/rn50_tuned.sabre --dtype fp16 \
  --dynamic batch=1..32 --tune --top-k 2 --db /tmp/warm/tuning.db --cache-dir /tmp/warm/kernels
$b/sabre db export --db /tmp/warm/tuning.db -o $OUT/rn50_db.jsonl > /dev/null 2>&1 && gzip -f $OUT/rn50_db.jsonl
for bs in 1 32; do
  LIMIT=20 TAIL=4 step profile_rn50_tuned_b$bs $b/sabre bench /tmp/rn50_tuned.sabre --dim batch=$bs --profile --steps 0
done
LIMIT=90 TAIL=5 step latency_rn50 python3 bench/models/tv_e2e.py latency resnet50 /tmp/tv /tmp/rn50_tuned.sabre,/tmp/rn50_tuned.sabre $b/sabre 1 32
LIMIT=40 TAIL=7 step compare_rn50_tuned python3 bench/models/tv_e2e.py compare resnet50 /tmp/tv /tmp/rn50_tuned.sabre $b/sabre 1 32 7
} > $OUT/main.log 2>&1
finish
exit 0
