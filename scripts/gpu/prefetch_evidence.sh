#!/usr/bin/env bash
# One device call (prepared 2026-12-04, tenth session): the L2 weight prefetch (docs/RUNTIME.md section 5).
#  Why: BERT-base's GEMMs at batch 1 and 8 ran 0.3-1.0 us faster with their operands in L2 than rotated
#  past it (bench/results/swizzle_l2_h200_2026-12-04.txt): about 2 us a layer at batch 1, 2.7 at batch 8.
#  The runtime now asks the L2 for each GEMM's weights on a side stream while the kernel before it runs.
#  1. GPU tests of the new paths: runtime_gemm_test (prefetch fork/join in capture, replay, a failed
#     capture after the fork, no graphs, SABRE_PREFETCH=0 bit-identical), native_kernels_test L2Prefetch_*,
#     runtime_session_test.
#  2. BERT-base compiled from the v3 DB; sabre bench with SABRE_PREFETCH=0 / 1 / 2 at batch 1, 8, 32,
#     1000 runs each, three rounds in rotating order; the median of the rounds.
#  3. The latency against PyTorch in the same run (default setting) and the outputs against PyTorch fp16.
# Usage on the GPU host: bash scripts/gpu/prefetch_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-prefetch} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
python3 bench/models/export_hf.py /tmp/hf bert > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=150 step build ninja -C $b -j16 sabre runtime_gemm_test runtime_session_test native_kernels_test
mkdir -p /tmp/w && zcat bench/results/bert_db_v3_h200_2026-12-03.jsonl.gz > /tmp/w/db.jsonl
$b/sabre db import --db /tmp/w/tuning.db /tmp/w/db.jsonl
wait $exp; tail -1 $LOGS/export.log
LIMIT=220 TAIL=3 step compile_bert $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --tune --db /tmp/w/tuning.db --cache-dir /tmp/w/kernels > $LOGS/compile.out 2>&1 &
cpid=$!
LIMIT=60 TAIL=4 step runtime_gemm $b/tests/gpu/runtime_gemm_test
grep -E "^FAIL|prefetch" $LOGS/runtime_gemm.log | head -20
LIMIT=60 TAIL=2 step runtime_session $b/tests/gpu/runtime_session_test
LIMIT=60 TAIL=6 step prefetch_kernel $b/tests/gpu/native_kernels_test L2Prefetch
wait $cpid; cat $LOGS/compile.out
echo "== sabre bench A/B (gpu ms p50, 1000 runs each; rounds rotate the order)"
for r in 1 2 3; do
  case $r in 1) order="0 1 2";; 2) order="1 2 0";; 3) order="2 0 1";; esac
  for v in $order; do
    for bs in 1 8 32; do
      SABRE_PREFETCH=$v timeout 30 $b/sabre bench /tmp/bert.sabre --dim batch=$bs --dim seq=128 --iters 1000 > $LOGS/ab_${v}_b${bs}_r$r.log 2>&1
      echo "round $r $v b$bs $(grep -oE 'gpu ms +p50 [0-9.]+' $LOGS/ab_${v}_b${bs}_r$r.log | awk '{print $4}')"
    done
  done
done | tee $LOGS/ab.txt
grep -h "l2 prefetch\|gpu clocks" $LOGS/ab_1_b32_r1.log $LOGS/ab_0_b32_r1.log $LOGS/ab_2_b1_r1.log
python3 - $LOGS/ab.txt <<'PY'
import sys, statistics
t = {}
for l in open(sys.argv[1]):
    f = l.split()
    if len(f) == 5 and f[0] == "round":
        try: t.setdefault((f[2], f[3]), []).append(float(f[4]))
        except ValueError: pass
for bs in ("b1", "b8", "b32"):
    print(bs, "  ".join(f"SABRE_PREFETCH={v} {statistics.median(t[(v, bs)]):.4f}" for v in ("0", "1", "2") if (v, bs) in t))
PY
LIMIT=120 TAIL=6 step latency_bert python3 bench/models/hf_e2e.py latency bert_base /tmp/hf /tmp/bert.sabre $b/sabre 128 1 8 32
LIMIT=60 TAIL=4 step compare_bert python3 bench/models/hf_e2e.py compare bert_base /tmp/hf /tmp/bert.sabre $b/sabre 1:128 8:128 32:128 3:77 2:9
} > $OUT/main.log 2>&1
finish
exit 0
