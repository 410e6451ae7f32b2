#!/usr/bin/env bash
# One device call (2026-12-03, fifth session, the last of its device time: DEADLINE 280 s): issue 7
# with stem_conv copying the next tile's f32 input rows by cp.async during this tile's MMAs.
# stem_conv's GPU test and native_bench rows; ResNet-50 tuned from last session's DB (--top-k 2 as it
# was made: warm, no timing) and untuned, both timed against PyTorch eager and torch.compile in one
# run, the tuned one compared with PyTorch fp16 and profiled.
# $OUT/main.log and $OUT/logs.tgz come back.
# Usage on the GPU host: bash scripts/gpu/stem_async_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-stemasync} LOGS=/tmp/steplogs DEADLINE=${DEADLINE:-280}; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
python3 bench/models/export_tv.py /tmp/tv > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=150 step build ninja -C $b -j16 sabre native_kernels_test native_bench
LIMIT=60 TAIL=2 step stem_tests $b/tests/gpu/native_kernels_test StemConv
grep -E "^FAIL" $LOGS/stem_tests.log | head -20
LIMIT=40 TAIL=1 step native_bench $b/native_bench
grep -E "^kernel|im2col f32|stem_conv" $LOGS/native_bench.log
wait $exp; tail -2 $LOGS/export.log
mkdir -p /tmp/warm && gunzip -c bench/results/rn50_db_h200_2026-12-03.jsonl.gz > /tmp/warm/rn50_db.jsonl
$b/sabre db import /tmp/warm/rn50_db.jsonl --db /tmp/warm/tuning.db | tail -1
LIMIT=240 TAIL=8 step compile_rn50_tuned $b/sabre compile /tmp/tv/resnet50.onnx -o /tmp/rn50_tuned.sabre --dtype fp16 \
  --dynamic batch=1..32 --tune --top-k 2 --db /tmp/warm/tuning.db --cache-dir /tmp/warm/kernels
LIMIT=120 TAIL=3 step compile_rn50 $b/sabre compile /tmp/tv/resnet50.onnx -o /tmp/rn50.sabre --dtype fp16 \
  --dynamic batch=1..32 --no-tune --cache-dir /tmp/warm/kernels
LIMIT=90 TAIL=5 step latency_rn50 python3 bench/models/tv_e2e.py latency resnet50 /tmp/tv /tmp/rn50_tuned.sabre,/tmp/rn50.sabre $b/sabre 1 32
LIMIT=40 TAIL=7 step compare_rn50_tuned python3 bench/models/tv_e2e.py compare resnet50 /tmp/tv /tmp/rn50_tuned.sabre $b/sabre 1 32 7
for bs in 1 32; do
  LIMIT=15 TAIL=3 step profile_rn50_tuned_b$bs $b/sabre bench /tmp/rn50_tuned.sabre --dim batch=$bs --profile
  grep -E "p50|stem_conv  " $LOGS/profile_rn50_tuned_b$bs.log | head -3
done
} > $OUT/main.log 2>&1
finish
exit 0
