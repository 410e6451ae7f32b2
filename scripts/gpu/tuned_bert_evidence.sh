#!/usr/bin/env bash
# One device call (2026-12-03 session, second): issue 6's cold tuned compile. BERT-base compiled with
# tuning from cold caches (fresh kernel cache and tuning DB; fused attention, now the default),
# timed (target 240 s), compared with PyTorch fp16, timed against eager and torch.compile and
# profiled; then ResNet-50 --no-tune with the recalibrated split-K model, timed and profiled.
# $OUT/main.log and $OUT/logs.tgz come back.
# Usage on the GPU host: bash scripts/gpu/tuned_bert_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-tuned} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
(python3 bench/models/export_hf.py /tmp/hf bert; python3 bench/models/export_tv.py /tmp/tv) > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=200 step build ninja -C $b -j16 sabre
wait $exp; tail -2 $LOGS/export.log
rm -rf /tmp/cold && mkdir -p /tmp/cold
LIMIT=300 TAIL=12 step compile_bert_tuned_cold $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert_tuned.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --tune --db /tmp/cold/tuning.db --cache-dir /tmp/cold/kernels
LIMIT=90 TAIL=6 step latency_bert python3 bench/models/hf_e2e.py latency bert_base /tmp/hf /tmp/bert_tuned.sabre $b/sabre 128 1 8 32
LIMIT=15 TAIL=24 step profile_bert_b1 $b/sabre bench /tmp/bert_tuned.sabre --dim batch=1 --dim seq=128 --profile
LIMIT=40 TAIL=14 step compare_bert python3 bench/models/hf_e2e.py compare bert_base /tmp/hf /tmp/bert_tuned.sabre $b/sabre 1:128 8:128 32:128 3:77 2:9
LIMIT=100 TAIL=8 step compile_rn50 $b/sabre compile /tmp/tv/resnet50.onnx -o /tmp/rn50.sabre --dtype fp16 --dynamic batch=1..32 --no-tune
LIMIT=60 TAIL=5 step latency_rn50 python3 bench/models/tv_e2e.py latency resnet50 /tmp/tv /tmp/rn50.sabre $b/sabre 1 32
LIMIT=15 TAIL=24 step profile_rn50_b1 $b/sabre bench /tmp/rn50.sabre --dim batch=1 --profile
LIMIT=15 TAIL=10 step profile_bert_b32 $b/sabre bench /tmp/bert_tuned.sabre --dim batch=32 --dim seq=128 --profile
} > $OUT/main.log 2>&1
finish
exit 0
