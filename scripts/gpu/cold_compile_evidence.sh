#!/usr/bin/env bash
# One device call (fifteenth session, 2026-12-04): issue 6's compile-time evidence on the landed tree:
# `sabre compile` of BERT-base with tuning from cold caches (an empty tuning DB, an empty kernel cache)
# in one command, dynamic batch 1..32 and seq 1..128; its time and the artifact's size without weights.
# Usage on the GPU host: bash scripts/gpu/cold_compile_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-cold} LOGS=/tmp/steplogs5 DEADLINE=${DEADLINE:-330}; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc; date -u
python3 bench/models/export_hf.py /tmp/hf bert > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=OFF
LIMIT=150 step build ninja -C $b -j16 sabre
wait $exp; tail -1 $LOGS/export.log
rm -rf /tmp/cold && mkdir -p /tmp/cold
LIMIT=240 TAIL=9 step compile_cold $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/cold/bert.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --tune --db /tmp/cold/tuning.db --cache-dir /tmp/cold/kernels
date -u
} > $OUT/main.log 2>&1
finish
exit 0
