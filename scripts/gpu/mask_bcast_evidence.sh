#!/usr/bin/env bash
# One device call (thirteenth session, 2026-12-04): the fused attention with a [B,1,1,K] i64 select
# mask (BERT-base's) loading each key's mask once for a thread's two query rows, against loading it
# per row (SABRE_ATTN_BCAST=0, the kernel of the commit before), in one build and one artifact.
#  1. native_kernels_test Attention_* both ways; native_bench's attention table both ways.
#  2. BERT-base compiled from bench/results/bert_db_v5_h200_2026-12-04.jsonl.gz (nothing to time);
#     `sabre bench` gpu p50 at batch 1, 2, 8, 32, 1000 runs, SABRE_ATTN_BCAST 0 / 1, 3 rounds rotating.
#  3. Outputs against PyTorch fp16; hf_e2e.py latency against PyTorch (shared rows, the default).
# Usage on the GPU host: bash scripts/gpu/mask_bcast_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-mask-bcast} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
python3 bench/models/export_hf.py /tmp/hf bert > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=150 step build ninja -C $b -j16 sabre native_kernels_test native_bench
TAIL=3 step attention_test $b/tests/gpu/native_kernels_test Attention_
TAIL=3 step attention_test_nobcast env SABRE_ATTN_BCAST=0 $b/tests/gpu/native_kernels_test Attention_
TAIL=0 step native_bench $b/native_bench; grep -A24 "^attention, graph_us" $LOGS/native_bench.log | grep -E "graph_us|i64|1,1,K\] f(16|32) mask"
TAIL=0 step native_bench_nobcast env SABRE_ATTN_BCAST=0 $b/native_bench; grep -A24 "^attention, graph_us" $LOGS/native_bench_nobcast.log | grep -E "i64"
mkdir -p /tmp/w && zcat bench/results/bert_db_v5_h200_2026-12-04.jsonl.gz > /tmp/w/db.jsonl
$b/sabre db import --db /tmp/w/tuning.db /tmp/w/db.jsonl | tail -1
wait $exp; tail -1 $LOGS/export.log
LIMIT=200 TAIL=4 step compile_bert $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --tune --db /tmp/w/tuning.db --cache-dir /tmp/w/kernels
echo "== sabre bench A/B: gpu ms p50, 1000 runs each; rounds rotate the order"
for r in 1 2 3; do
  case $r in 2) order="1 0";; *) order="0 1";; esac
  for v in $order; do
    for bs in 1 2 8 32; do
      SABRE_ATTN_BCAST=$v timeout 30 $b/sabre bench /tmp/bert.sabre --dim batch=$bs --dim seq=128 --iters 1000 --no-clocks > $LOGS/ab_${v}_b${bs}_r$r.log 2>&1
      echo "round $r bcast=$v b$bs $(grep -oE 'gpu ms +p50 [0-9.]+' $LOGS/ab_${v}_b${bs}_r$r.log | awk '{print $4}')"
    done
  done
done | tee $LOGS/ab.txt
LIMIT=60 TAIL=14 step compare_bert python3 bench/models/hf_e2e.py compare bert_base /tmp/hf /tmp/bert.sabre $b/sabre 1:128 32:128 3:77
LIMIT=100 TAIL=8 step latency_bert python3 bench/models/hf_e2e.py latency bert_base /tmp/hf /tmp/bert.sabre $b/sabre 128 1 8 32
date -u
} > $OUT/main.log 2>&1
finish
exit 0
