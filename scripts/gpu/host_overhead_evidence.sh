#!/usr/bin/env bash
# One device call (prepared 2026-12-04, tenth session; run in the eleventh, results in
# bench/results/host_overhead_h200_2026-12-04.txt).
#  Why: ExecutionContext::run sized the GEMM/conv workspace on every run, replays included: for each
#  GEMM step it evaluated ~20 params (DimExpr strings parsed again), picked the kernel from the
#  dispatch table and called the kernel's workspace_size. On the workstation's CPU the parameter part
#  alone is 0.8 us a GEMM step (BERT-base: 49 steps, ~40 us). All of it precedes cudaGraphLaunch, so it
#  counts in the latency a caller sees and in `sabre bench`'s gpu ms (its start event is recorded
#  before run()). The branch launches a replay right after the input checks; prediction: BERT-base
#  20-40 us faster at every batch, more on a slower host CPU, and less spread between rounds.
#  Before: .carry/old_tree.tgz = `git archive main` (the tree without the change), built beside this one.
#  1. GPU tests of the run paths (runtime_session_test: replay, pointers changing, errors then good
#     runs, four threads; runtime_gemm_test: capture, replay, failure mid-capture, prefetch).
#  2. BERT-base from the v3 DB, compiled once; `sabre bench` by both builds at batch 1, 8, 32, 1000 runs,
#     3 rounds in rotating order: gpu ms p50 and host latency p50.
#  3. The latency against PyTorch in the same run (this tree).
# Usage on the GPU host: bash scripts/gpu/host_overhead_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-host} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
python3 bench/models/export_hf.py /tmp/hf bert > $LOGS/export.log 2>&1 &
exp=$!
mkdir -p /tmp/old && tar xzf .carry/old_tree.tgz -C /tmp/old
(cmake -S /tmp/old -B /tmp/b_old -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=OFF > $LOGS/old_build.log 2>&1 &&
 ninja -C /tmp/b_old -j6 sabre >> $LOGS/old_build.log 2>&1; echo "old build rc=$?" >> $LOGS/old_build.log) &
old=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=150 step build ninja -C $b -j10 sabre runtime_session_test runtime_gemm_test
LIMIT=60 TAIL=3 step runtime_session $b/tests/gpu/runtime_session_test
LIMIT=60 TAIL=3 step runtime_gemm $b/tests/gpu/runtime_gemm_test
wait $old; tail -1 $LOGS/old_build.log
mkdir -p /tmp/w && zcat bench/results/bert_db_v3_h200_2026-12-03.jsonl.gz > /tmp/w/db.jsonl
$b/sabre db import --db /tmp/w/tuning.db /tmp/w/db.jsonl
wait $exp; tail -1 $LOGS/export.log
LIMIT=220 TAIL=3 step compile_bert $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --tune --db /tmp/w/tuning.db --cache-dir /tmp/w/kernels
echo "== sabre bench A/B: gpu ms p50 / host latency p50, 1000 runs each; rounds rotate the order"
for r in 1 2 3; do
  case $r in 2) order="new old";; *) order="old new";; esac
  for v in $order; do
    bin=$b/sabre; [ $v = old ] && bin=/tmp/b_old/sabre
    for bs in 1 8 32; do
      timeout 30 $bin bench /tmp/bert.sabre --dim batch=$bs --dim seq=128 --iters 1000 --no-clocks > $LOGS/ab_${v}_b${bs}_r$r.log 2>&1
      echo "round $r $v b$bs $(grep -oE 'gpu ms +p50 [0-9.]+' $LOGS/ab_${v}_b${bs}_r$r.log | awk '{print $4}') $(grep -oE 'latency ms +p50 [0-9.]+' $LOGS/ab_${v}_b${bs}_r$r.log | awk '{print $4}')"
    done
  done
done | tee $LOGS/ab.txt
LIMIT=120 TAIL=6 step latency_bert python3 bench/models/hf_e2e.py latency bert_base /tmp/hf /tmp/bert.sabre $b/sabre 128 1 8 32
} > $OUT/main.log 2>&1
finish
exit 0
