#!/usr/bin/env bash
# One device call (fifteenth session, 2026-12-04), on branch ln-probe (attn-mt2 plus two probe
# switches in layernorm.cu, NOT for main): SABRE_LN_WPB=N forces N warps a block (default: 4 at BERT's
# batch 32, 2 at 8, 1 at 1), SABRE_LN_TPR=16 puts two rows in a warp (768 halves: 6 chunks a lane).
#  1. native_kernels_test, all of it, then LayerNorm* again under each probe switch.
#  2. BERT-base compiled from bench/results/bert_db_v5_h200_2026-12-04.jsonl.gz with the carried kernel
#     cache (host_env.sh now puts CUTLASS where the workstation has it, so its keys can hit).
#  3. sabre bench gpu p50, 1000 runs: the layernorm variants at batch 32 (2 rounds, rotating), 8 and 1.
#  4. hf_e2e.py latency against eager and torch.compile (automatic layernorm).
# Usage on the GPU host: bash scripts/gpu/ln_probe_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-ln-probe} LOGS=/tmp/steplogs2 DEADLINE=${DEADLINE:-570}; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit,clocks.max.sm --format=csv,noheader; date -u
echo "tree at $root; CUTLASS_DIR=$CUTLASS_DIR"
python3 bench/models/export_hf.py /tmp/hf bert > $LOGS/export.log 2>&1 &
exp=$!
carried_kernel_cache /tmp/w/kernels
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=200 step build ninja -C $b -j16 sabre native_kernels_test
LIMIT=150 TAIL=2 step native_all $b/tests/gpu/native_kernels_test
grep -E "^FAIL" $LOGS/native_all.log | head -20
SABRE_LN_TPR=16 LIMIT=40 TAIL=1 step native_ln_tpr16 $b/tests/gpu/native_kernels_test LayerNorm
SABRE_LN_WPB=8 LIMIT=40 TAIL=1 step native_ln_wpb8 $b/tests/gpu/native_kernels_test LayerNorm
mkdir -p /tmp/w && zcat bench/results/bert_db_v5_h200_2026-12-04.jsonl.gz > /tmp/w/db.jsonl
$b/sabre db import --db /tmp/w/tuning.db /tmp/w/db.jsonl | tail -1
wait $exp; tail -1 $LOGS/export.log
LIMIT=200 TAIL=4 step compile_bert $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --tune --db /tmp/w/tuning.db --cache-dir /tmp/w/kernels
echo "== sabre bench: gpu ms p50, 1000 runs; layernorm probe switches"
run_v() {  # variant batch round
  local e=()
  case $1 in tpr16) e=(SABRE_LN_TPR=16);; wpb*) e=(SABRE_LN_WPB=${1#wpb});; esac
  env "${e[@]}" timeout 30 $b/sabre bench /tmp/bert.sabre --dim batch=$2 --dim seq=128 --iters 1000 --no-clocks > $LOGS/ln_$1_b$2_r$3.log 2>&1
  echo "round $3 $1 b$2 $(grep -oE 'gpu ms +p50 [0-9.]+' $LOGS/ln_$1_b$2_r$3.log | awk '{print $4}')"
}
{
for v in auto wpb1 wpb2 wpb8 wpb16 tpr16; do run_v $v 32 1; done
for v in tpr16 wpb16 wpb8 wpb2 wpb1 auto; do run_v $v 32 2; done
for v in auto wpb1 wpb4 wpb8 tpr16; do run_v $v 8 1; done
for v in auto wpb2 wpb4 tpr16; do run_v $v 1 1; done
} | tee $LOGS/ln_ab.txt
LIMIT=120 TAIL=8 step latency_bert python3 bench/models/hf_e2e.py latency bert_base /tmp/hf /tmp/bert.sabre $b/sabre 128 1 8 32
date -u
} > $OUT/main.log 2>&1
finish
exit 0
