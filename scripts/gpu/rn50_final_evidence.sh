#!/usr/bin/env bash
# One device call (2026-12-03, sixth session, the last): issue 7's latency evidence with parallel
# split-K and PDL sm80 convs. ResNet-50 tuned (this session's DB: no new timing) and untuned, against
# PyTorch eager and torch.compile in 5 rounds of CUDA-event medians; the tuned artifact profiled at
# batch 32; MobileNetV2 untuned in 3 rounds. $OUT/main.log and $OUT/logs.tgz come back.
# Usage on the GPU host: bash scripts/gpu/rn50_final_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-rn50-final} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
python3 bench/models/export_tv.py /tmp/tv > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=OFF
LIMIT=150 step build ninja -C $b -j16 sabre
wait $exp; tail -2 $LOGS/export.log
mkdir -p /tmp/warm && gunzip -c bench/results/rn50_db_h200_2026-12-03.jsonl.gz > /tmp/warm/rn50_db.jsonl
$b/sabre db import /tmp/warm/rn50_db.jsonl --db /tmp/warm/tuning.db | tail -1
LIMIT=200 TAIL=4 step compile_rn50_tuned $b/sabre compile /tmp/tv/resnet50.onnx -o /tmp/rn50_tuned.sabre --dtype fp16 \
  --dynamic batch=1..32 --tune --top-k 2 --db /tmp/warm/tuning.db --cache-dir /tmp/warm/kernels
LIMIT=100 TAIL=3 step compile_rn50 $b/sabre compile /tmp/tv/resnet50.onnx -o /tmp/rn50.sabre --dtype fp16 \
  --dynamic batch=1..32 --no-tune --cache-dir /tmp/warm/kernels
SABRE_BENCH_ROUNDS=5 LIMIT=180 TAIL=4 step latency_rn50 python3 bench/models/tv_e2e.py latency resnet50 /tmp/tv /tmp/rn50_tuned.sabre,/tmp/rn50.sabre $b/sabre 1 32
LIMIT=20 TAIL=3 step profile_rn50_tuned_b32 $b/sabre bench /tmp/rn50_tuned.sabre --dim batch=32 --profile --steps 0
LIMIT=90 TAIL=3 step compile_mnv2 $b/sabre compile /tmp/tv/mobilenet_v2.onnx -o /tmp/mnv2.sabre --dtype fp16 \
  --dynamic batch=1..32 --no-tune --cache-dir /tmp/warm/kernels
SABRE_BENCH_ROUNDS=3 LIMIT=100 TAIL=4 step latency_mnv2 python3 bench/models/tv_e2e.py latency mobilenet_v2 /tmp/tv /tmp/mnv2.sabre $b/sabre 1 32
} > $OUT/main.log 2>&1
finish
exit 0
