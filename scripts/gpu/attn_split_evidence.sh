#!/usr/bin/env bash
# One device call (2026-12-03, ninth session): 128-row attention blocks whose 16 warps split each key
# tile two ways (rows128_split2, and rows64_split2), and the automatic rule that now picks the split
# for BERT-base at batch 8 and 32.
#  1. The native GPU tests' Attention_* cases, every block shape (the new two included), against the
#     double-precision reference, outputs poisoned first.
#  2. native_bench: every attention block shape at BERT-base's shapes (graph replay).
#  3. BERT-base compiled from the v3 DB (warm), sabre bench at batch 8 and 32 with the automatic choice
#     and with SABRE_ATTN forcing the old rows128 and rows64_split2, three rounds in rotating order;
#     then the latency against PyTorch in the same run and the outputs against PyTorch fp16.
# $OUT/main.log and $OUT/logs.tgz come back.
# Usage on the GPU host: bash scripts/gpu/attn_split_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-attn} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
python3 bench/models/export_hf.py /tmp/hf bert > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=150 step build ninja -C $b -j16 sabre native_bench native_kernels_test
LIMIT=120 TAIL=3 step attention_tests $b/tests/gpu/native_kernels_test Attention_
grep -E "^FAIL" $LOGS/attention_tests.log | head -20
LIMIT=60 TAIL=1 step native_bench $b/native_bench
sed -n '/attention, graph_us/,/^$/p' $LOGS/native_bench.log
mkdir -p /tmp/w && zcat bench/results/bert_db_v3_h200_2026-12-03.jsonl.gz > /tmp/w/db.jsonl
$b/sabre db import --db /tmp/w/tuning.db /tmp/w/db.jsonl
wait $exp; tail -1 $LOGS/export.log
LIMIT=200 TAIL=3 step compile_bert $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --tune --db /tmp/w/tuning.db --cache-dir /tmp/w/kernels
echo "== sabre bench A/B (gpu ms p50, 1000 runs each; rounds rotate the order)"
for r in 1 2 3; do
  case $r in 1) order="auto r128 r64x2";; 2) order="r128 r64x2 auto";; 3) order="r64x2 auto r128";; esac
  for v in $order; do
    for bs in 8 32; do
      env=""; [ $v = auto ] || env="SABRE_ATTN=$v"
      env $env timeout 30 $b/sabre bench /tmp/bert.sabre --dim batch=$bs --dim seq=128 --iters 1000 > $LOGS/ab_${v}_b${bs}_r$r.log 2>&1
      echo "round $r $v b$bs $(grep -oE 'gpu ms +p50 [0-9.]+' $LOGS/ab_${v}_b${bs}_r$r.log | awk '{print $4}')"
    done
  done
done | tee $LOGS/ab.txt
python3 - $LOGS/ab.txt <<'PY'
import sys, statistics
t = {}
for l in open(sys.argv[1]):
    f = l.split()
    if len(f) == 5 and f[0] == "round":
        try: t.setdefault((f[2], f[3]), []).append(float(f[4]))
        except ValueError: pass
for bs in ("b8", "b32"):
    print(bs, "  ".join(f"{v} {statistics.median(t[(v, bs)]):.4f}" for v in ("auto", "r128", "r64x2") if (v, bs) in t))
PY
LIMIT=120 TAIL=6 step latency_bert python3 bench/models/hf_e2e.py latency bert_base /tmp/hf /tmp/bert.sabre $b/sabre 128 1 8 32
LIMIT=60 TAIL=4 step compare_bert python3 bench/models/hf_e2e.py compare bert_base /tmp/hf /tmp/bert.sabre $b/sabre 1:128 8:128 32:128 3:77 2:9
} > $OUT/main.log 2>&1
finish
exit 0
