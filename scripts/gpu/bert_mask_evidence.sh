#!/usr/bin/env bash
# One device call (2026-12-03, fourth session): BERT-base with transform::simplify_masks (the
# padding mask read as [B,1,1,K], 117 -> 100 plan steps), tuned from the DB of this session's
# cold tuning run (.carry/bert_db.jsonl.gz: warm, no timing) and --no-tune, both timed in one run
# against PyTorch eager and torch.compile, compared, profiled; one run of each kernel under Nsight
# Compute at batch 1 and 32; then the persistent sm90 conv kernels' own GPU numerical test (every
# pingpong/coop kernel of tests/gpu/conv_sm90_gpu_test.cpp's list, two ws kernels as the control).
# $OUT/main.log and $OUT/logs.tgz come back.
# Usage on the GPU host: bash scripts/gpu/bert_mask_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-bertmask} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
python3 bench/models/export_hf.py /tmp/hf bert > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=150 step build ninja -C $b -j16 sabre sabre_conv_sm90_gpu_test
wait $exp; tail -1 $LOGS/export.log
mkdir -p /tmp/warm && gunzip -c .carry/bert_db.jsonl.gz > /tmp/warm/bert_db.jsonl
$b/sabre db import /tmp/warm/bert_db.jsonl --db /tmp/warm/tuning.db | tail -1
LIMIT=150 TAIL=8 step compile_bert_tuned $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert_tuned.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --tune --db /tmp/warm/tuning.db --cache-dir /tmp/warm/kernels
LIMIT=60 TAIL=3 step compile_bert_untuned $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --no-tune --cache-dir /tmp/warm/kernels
LIMIT=100 TAIL=6 step latency_bert python3 bench/models/hf_e2e.py latency bert_base /tmp/hf /tmp/bert_tuned.sabre,/tmp/bert.sabre $b/sabre 128 1 8 32
LIMIT=40 TAIL=14 step compare_bert python3 bench/models/hf_e2e.py compare bert_base /tmp/hf /tmp/bert_tuned.sabre $b/sabre 1:128 8:128 32:128 3:77 2:9
for bs in 1 8 32; do
  LIMIT=15 TAIL=3 step profile_bert_b$bs $b/sabre bench /tmp/bert_tuned.sabre --dim batch=$bs --dim seq=128 --profile
done
persistent=$(grep -oE '"sm90_conv_fprop_(pingpong|coop)_[a-z0-9_]+"' tests/gpu/conv_sm90_gpu_test.cpp | tr -d '"')
LIMIT=240 TAIL=3 step conv_persistent_kernels $b/tests/gpu/sabre_conv_sm90_gpu_test -j 16 --work /tmp/conv90p \
  $persistent sm90_conv_fprop_nhwc_f16_f16_f32_128x64x64_c1x1_a8_bias_res_relu \
  sm90_conv_fprop_nhwc_bf16_bf16_f32_128x128x64_c2x1_a8_bias_relu_res
grep -E "^(FAIL|PASS)|kernels built|passed|failed" $LOGS/conv_persistent_kernels.log | tail -30
for bs in 1 32; do
  LIMIT=60 TAIL=2 step ncu_bert_b$bs ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
    $b/sabre bench /tmp/bert_tuned.sabre --dim batch=$bs --dim seq=128 --warmup 1 --iters 1 --no-graphs
done
} > $OUT/main.log 2>&1
finish
exit 0
