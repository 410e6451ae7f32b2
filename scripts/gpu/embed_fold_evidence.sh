#!/usr/bin/env bash
# One device call (eleventh session, 2026-12-04): BERT-base's embeddings as one embed_layernorm step
# (five steps fewer: the position-ids Slice, three Gathers, the Add chain), the pooler's GEMM reading
# the [CLS] rows in place (no Gather), the pooler's Tanh writing pooler_output in f32 (no cast step):
# 99 -> 92 steps. At batch 1 every step is worth 2-4 us of graph time.
#  Before: .carry/old_tree.tgz = `git archive 2b43046` (main before the change), built beside this one.
#  1. GPU tests: native_kernels_test's EmbedLayerNorm_* and LayerNorm_*; runtime_session_test.
#  2. BERT-base from the v3 DB compiled by both builds (kernel cache shared); outputs of the new one
#     against PyTorch fp16; `sabre bench` of both, 1000 runs, 3 rounds in rotating order.
#  3. The latency against PyTorch in the same run (this tree); bert_tiny through `sabre run
#     --compare-reference` with the ids read in place (seq <= 64) and through the views (seq <= 128).
# Usage on the GPU host: bash scripts/gpu/embed_fold_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-embed} LOGS=/tmp/steplogs; mkdir -p "$OUT"
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
LIMIT=150 step build ninja -C $b -j10 sabre runtime_session_test native_kernels_test
mkdir -p /tmp/w && zcat bench/results/bert_db_v3_h200_2026-12-03.jsonl.gz > /tmp/w/db.jsonl
$b/sabre db import --db /tmp/w/tuning.db /tmp/w/db.jsonl
wait $exp; tail -1 $LOGS/export.log
LIMIT=220 TAIL=3 step compile_bert $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --tune --db /tmp/w/tuning.db --cache-dir /tmp/w/kernels > $LOGS/compile.out 2>&1 &
cpid=$!
LIMIT=60 TAIL=4 step native_ln $b/tests/gpu/native_kernels_test LayerNorm
grep -E "^FAIL|EmbedLayerNorm" $LOGS/native_ln.log | head -30
LIMIT=60 TAIL=2 step runtime_session $b/tests/gpu/runtime_session_test
wait $cpid; cat $LOGS/compile.out
wait $old; tail -1 $LOGS/old_build.log
LIMIT=120 TAIL=3 step compile_bert_old /tmp/b_old/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert_old.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --tune --db /tmp/w/tuning.db --cache-dir /tmp/w/kernels
LIMIT=120 TAIL=14 step compare_bert python3 bench/models/hf_e2e.py compare bert_base /tmp/hf /tmp/bert.sabre $b/sabre 1:128 8:128 32:128 3:77 2:9
echo "== sabre bench A/B: gpu ms p50 / host latency p50, 1000 runs each; rounds rotate the order"
for r in 1 2 3; do
  case $r in 2) order="new old";; *) order="old new";; esac
  for v in $order; do
    bin=$b/sabre art=/tmp/bert.sabre; [ $v = old ] && bin=/tmp/b_old/sabre art=/tmp/bert_old.sabre
    for bs in 1 8 32; do
      timeout 30 $bin bench $art --dim batch=$bs --dim seq=128 --iters 1000 --no-clocks > $LOGS/ab_${v}_b${bs}_r$r.log 2>&1
      echo "round $r $v b$bs $(grep -oE 'gpu ms +p50 [0-9.]+' $LOGS/ab_${v}_b${bs}_r$r.log | awk '{print $4}') $(grep -oE 'latency ms +p50 [0-9.]+' $LOGS/ab_${v}_b${bs}_r$r.log | awk '{print $4}')"
    done
  done
done | tee $LOGS/ab.txt
LIMIT=120 TAIL=6 step latency_bert python3 bench/models/hf_e2e.py latency bert_base /tmp/hf /tmp/bert.sabre $b/sabre 128 1 8 32
for r in 64 128; do
  LIMIT=90 TAIL=2 step tiny_compile_$r $b/sabre compile models/bert_tiny.onnx -o /tmp/tiny$r.sabre --no-tune \
    --dynamic batch=1..4,seq=1..$r --cache-dir /tmp/w/kernels
  grep -c embed_layernorm /tmp/tiny$r.sabre/plan.json
  LIMIT=30 TAIL=4 step tiny_run_$r $b/sabre run /tmp/tiny$r.sabre --model models/bert_tiny.onnx --dim batch=3 --dim seq=37 --compare-reference
done
} > $OUT/main.log 2>&1
finish
exit 0
