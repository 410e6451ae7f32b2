#!/usr/bin/env bash
# One device call (fifteenth session, 2026-12-04): fused attention with 128-row blocks of four warps
# that own 32 rows each (AttentionKernel::rows128_w4, "r128w4"; three blocks an SM at 168 registers),
# which the automatic choice takes where 128-row blocks of eight warps would need more than one wave
# at two an SM (BERT-base at batch 32: 384 blocks, 1.45 waves).
#  1. native_kernels_test Attention* (every case runs every block shape forced, and auto).
#  2. BERT-base compiled from bench/results/bert_db_v5_h200_2026-12-04.jsonl.gz (nothing to time;
#     the carried kernel cache where its keys hit).
#  3. sabre bench gpu p50, 1000 runs: batch 32 with SABRE_ATTN=r128 (the previous automatic choice)
#     against the automatic one (r128w4), 3 rounds in rotating order; batch 8 and 1 once (auto is
#     unchanged there); one --profile run of each at batch 32.
#  4. hf_e2e.py: outputs against PyTorch fp16, then latency against eager and torch.compile.
#  5. native_bench (each block shape alone, graph replay).
# Usage on the GPU host: bash scripts/gpu/attn_w4_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-attn-w4} LOGS=/tmp/steplogs DEADLINE=${DEADLINE:-570}; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit,clocks.max.sm --format=csv,noheader; date -u
python3 bench/models/export_hf.py /tmp/hf bert > $LOGS/export.log 2>&1 &
exp=$!
carried_kernel_cache /tmp/w/kernels
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=200 step build ninja -C $b -j16 sabre native_kernels_test native_bench
LIMIT=90 TAIL=3 step native_attention $b/tests/gpu/native_kernels_test Attention
grep -cE "^PASS.*_r128w4 " $LOGS/native_attention.log | sed 's/^/r128w4 cases passed: /'
grep -E "^FAIL" $LOGS/native_attention.log | head -20
mkdir -p /tmp/w && zcat bench/results/bert_db_v5_h200_2026-12-04.jsonl.gz > /tmp/w/db.jsonl
$b/sabre db import --db /tmp/w/tuning.db /tmp/w/db.jsonl | tail -1
wait $exp; tail -1 $LOGS/export.log
LIMIT=200 TAIL=3 step compile_bert $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --tune --db /tmp/w/tuning.db --cache-dir /tmp/w/kernels
echo "== sabre bench A/B: gpu ms p50, 1000 runs; SABRE_ATTN=r128 (before) / unset (auto: r128w4 at batch 32)"
for r in 1 2 3; do
  case $r in 2) order="auto r128";; *) order="r128 auto";; esac
  for v in $order; do
    if [ $v = auto ]; then e=; else e=$v; fi
    SABRE_ATTN=$e timeout 30 $b/sabre bench /tmp/bert.sabre --dim batch=32 --dim seq=128 --iters 1000 --no-clocks > $LOGS/ab_${v}_r$r.log 2>&1
    echo "round $r $v b32 $(grep -oE 'gpu ms +p50 [0-9.]+' $LOGS/ab_${v}_r$r.log | awk '{print $4}')"
  done
done | tee $LOGS/ab.txt
for bs in 8 1; do
  timeout 30 $b/sabre bench /tmp/bert.sabre --dim batch=$bs --dim seq=128 --iters 1000 --no-clocks > $LOGS/b$bs.log 2>&1
  echo "auto b$bs $(grep -oE 'gpu ms +p50 [0-9.]+' $LOGS/b$bs.log | awk '{print $4}')"
done
for v in r128 r128w4; do
  SABRE_ATTN=$v LIMIT=30 TAIL=0 step profile_$v $b/sabre bench /tmp/bert.sabre --dim batch=32 --dim seq=128 --profile
  grep -E "^profile|^  attention " $LOGS/profile_$v.log
done
LIMIT=70 TAIL=10 step compare_bert python3 bench/models/hf_e2e.py compare bert_base /tmp/hf /tmp/bert.sabre $b/sabre 32:128 24:100 1:128 8:128 3:77
LIMIT=120 TAIL=8 step latency_bert python3 bench/models/hf_e2e.py latency bert_base /tmp/hf /tmp/bert.sabre $b/sabre 128 1 8 32
LIMIT=60 TAIL=0 step native_bench $b/native_bench
grep -A24 "attention, graph_us" $LOGS/native_bench.log
date -u
} > $OUT/main.log 2>&1
finish
exit 0
