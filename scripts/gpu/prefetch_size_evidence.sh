#!/usr/bin/env bash
# One device call (fourteenth session, 2026-12-04): the L2 weight prefetch left out for GEMMs and convs
# of 4 GFLOP or more at a run's shapes (runtime::prefetch_at_shapes; SABRE_PREFETCH_MAX_GFLOP, default
# 4), against prefetching every scheduled weight (SABRE_PREFETCH_MAX_GFLOP=0, the behaviour before).
# Run at aee4f51, whose rule had the GFLOP bound only; the landed rule adds a 2048-row bound, which
# gives the same schedules at batch 32 and 1 and the limit-0 one at batch 8 (the results file says more).
#  1. BERT-base compiled from bench/results/bert_db_v5_h200_2026-12-04.jsonl.gz (nothing to time).
#  2. sabre bench gpu p50 at batch 32, 8, 1, 1000 runs, limit 0 / 4, 2 rounds in rotating order, and
#     each batch's `l2 prefetch` line.
#  3. hf_e2e.py latency against PyTorch eager and torch.compile (defaults).
# Usage on the GPU host: bash scripts/gpu/prefetch_size_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-prefetch-size} LOGS=/tmp/steplogs DEADLINE=${DEADLINE:-345}; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit,clocks.max.sm --format=csv,noheader; date -u
python3 bench/models/export_hf.py /tmp/hf bert > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=OFF
LIMIT=150 step build ninja -C $b -j16 sabre
mkdir -p /tmp/w && zcat bench/results/bert_db_v5_h200_2026-12-04.jsonl.gz > /tmp/w/db.jsonl
$b/sabre db import --db /tmp/w/tuning.db /tmp/w/db.jsonl | tail -1
wait $exp; tail -1 $LOGS/export.log
LIMIT=200 TAIL=2 step compile_bert $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --tune --db /tmp/w/tuning.db --cache-dir /tmp/w/kernels
echo "== sabre bench A/B: gpu ms p50, 1000 runs; SABRE_PREFETCH_MAX_GFLOP 0 (every weight) / 4 (default)"
for r in 1 2; do
  case $r in 2) order="4 0";; *) order="0 4";; esac
  for bs in 32 8 1; do
    for v in $order; do
      SABRE_PREFETCH_MAX_GFLOP=$v timeout 30 $b/sabre bench /tmp/bert.sabre --dim batch=$bs --dim seq=128 --iters 1000 --no-clocks > $LOGS/ab_${v}_b${bs}_r$r.log 2>&1
      echo "round $r limit=$v b$bs $(grep -oE 'gpu ms +p50 [0-9.]+' $LOGS/ab_${v}_b${bs}_r$r.log | awk '{print $4}')"
      [ $r = 1 ] && grep "l2 prefetch" $LOGS/ab_${v}_b${bs}_r$r.log
    done
  done
done | tee $LOGS/ab.txt
LIMIT=100 TAIL=8 step latency_bert python3 bench/models/hf_e2e.py latency bert_base /tmp/hf /tmp/bert.sabre $b/sabre 128 1 8 32
date -u
} > $OUT/main.log 2>&1
finish
exit 0
