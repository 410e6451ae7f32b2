#!/usr/bin/env bash
# One device call (fifteenth session, 2026-12-04): the layernorm's new block rule (8, 4, 2 or 1 warps,
# the most that still give 64+ blocks) against the rule before, forced with SABRE_LN_WPB (4 / 2 / 1
# warps at BERT-base batch 32 / 8 / 1), with the r128w4 attention.
#  1. native_kernels_test LayerNorm* and Attention*.
#  2. BERT-base compiled from bench/results/bert_db_v5_h200_2026-12-04.jsonl.gz (carried kernel cache).
#  3. sabre bench gpu p50, 1000 runs, new / old at batch 32, 8, 1, 3 rounds in rotating order.
#  4. hf_e2e.py: outputs against PyTorch fp16, latency against eager and torch.compile.
# Usage on the GPU host: bash scripts/gpu/ln_rule_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-ln-rule} LOGS=/tmp/steplogs3 DEADLINE=${DEADLINE:-570}; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit,clocks.max.sm --format=csv,noheader; date -u
python3 bench/models/export_hf.py /tmp/hf bert > $LOGS/export.log 2>&1 &
exp=$!
carried_kernel_cache /tmp/w/kernels
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=200 step build ninja -C $b -j16 sabre native_kernels_test
LIMIT=60 TAIL=1 step native_ln $b/tests/gpu/native_kernels_test LayerNorm
LIMIT=60 TAIL=1 step native_attention $b/tests/gpu/native_kernels_test Attention
grep -E "^FAIL" $LOGS/native_ln.log $LOGS/native_attention.log | head -20
mkdir -p /tmp/w && zcat bench/results/bert_db_v5_h200_2026-12-04.jsonl.gz > /tmp/w/db.jsonl
$b/sabre db import --db /tmp/w/tuning.db /tmp/w/db.jsonl | tail -1
wait $exp; tail -1 $LOGS/export.log
LIMIT=200 TAIL=4 step compile_bert $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --tune --db /tmp/w/tuning.db --cache-dir /tmp/w/kernels
echo "== sabre bench: gpu ms p50, 1000 runs; new rule (unset) / old rule (SABRE_LN_WPB=4|2|1 at batch 32|8|1)"
run_v() {  # new|old batch round
  local old; case $2 in 32) old=4;; 8) old=2;; *) old=1;; esac
  local e=(); [ $1 = old ] && e=(SABRE_LN_WPB=$old)
  env "${e[@]}" timeout 30 $b/sabre bench /tmp/bert.sabre --dim batch=$2 --dim seq=128 --iters 1000 --no-clocks > $LOGS/ln_$1_b$2_r$3.log 2>&1
  echo "round $3 $1 b$2 $(grep -oE 'gpu ms +p50 [0-9.]+' $LOGS/ln_$1_b$2_r$3.log | awk '{print $4}')"
}
for r in 1 2 3; do
  case $r in 2) order="new old";; *) order="old new";; esac
  for bs in 32 8 1; do for v in $order; do run_v $v $bs $r; done; done
done | tee $LOGS/ln_ab.txt
LIMIT=60 TAIL=10 step compare_bert python3 bench/models/hf_e2e.py compare bert_base /tmp/hf /tmp/bert.sabre $b/sabre 32:128 1:128 8:128 3:77 5:100
LIMIT=120 TAIL=8 step latency_bert python3 bench/models/hf_e2e.py latency bert_base /tmp/hf /tmp/bert.sabre $b/sabre 128 1 8 32
date -u
} > $OUT/main.log 2>&1
finish
exit 0
