#!/usr/bin/env bash
# One device call (2026-12-03, ninth session): where BERT-base's graph replay spends the time that
# its kernels' isolated times do not account for (0.10 / 0.18 / 0.24 ms at batch 1 / 8 / 32 last session).
#  1. BERT-base compiled from the v3 DB of bench/results (warm: nothing measured again, kernels compiled).
#  2. sabre bench at batch 1 / 8 / 32, seq 128, with PDL and without (SABRE_PDL=0), and at batch 32 a
#     long run while nvidia-smi samples SM clock, power and the clock event reasons every 20 ms.
#  3. Nsight Compute per-kernel durations of one plan run (--no-graphs, kernels serialized) with the
#     L2 left as the previous kernel left it (--cache-control none) and the clocks alone
#     (--clock-control none): the kernels' own times in context, summed against the graph's p50.
# $OUT/main.log and $OUT/logs.tgz come back.
# Usage on the GPU host: bash scripts/gpu/graph_gap_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-gap} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit,clocks.max.sm --format=csv,noheader; date -u
python3 bench/models/export_hf.py /tmp/hf bert > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=OFF
LIMIT=150 step build ninja -C $b -j16 sabre
mkdir -p /tmp/w && zcat bench/results/bert_db_v3_h200_2026-12-03.jsonl.gz > /tmp/w/db.jsonl
step db_import $b/sabre db import --db /tmp/w/tuning.db /tmp/w/db.jsonl
wait $exp; tail -1 $LOGS/export.log
LIMIT=200 TAIL=8 step compile_bert $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --tune --db /tmp/w/tuning.db --cache-dir /tmp/w/kernels
for bs in 1 8 32; do
  LIMIT=20 TAIL=5 step bench_b$bs $b/sabre bench /tmp/bert.sabre --dim batch=$bs --dim seq=128 --iters 1000
  SABRE_PDL=0 LIMIT=20 TAIL=5 step bench_nopdl_b$bs $b/sabre bench /tmp/bert.sabre --dim batch=$bs --dim seq=128 --iters 1000
done
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
  --format=csv,noheader -lms 20 > $LOGS/smi_b32.csv 2>&1 &
smi=$!
sleep 0.5
LIMIT=30 TAIL=5 step bench_long_b32 $b/sabre bench /tmp/bert.sabre --dim batch=32 --dim seq=128 --iters 6000
sleep 0.3; kill $smi
python3 - $LOGS/smi_b32.csv <<'PY'
import sys, statistics
rows = [l.strip().split(", ") for l in open(sys.argv[1]) if l.count(",") >= 5]
def num(s):
    try: return float(s.split()[0])
    except Exception: return None
clk = [num(r[1]) for r in rows]; pw = [num(r[3]) for r in rows]
busy = [(c, p, r[5]) for c, p, r in zip(clk, pw, rows) if p is not None and p > 200]
print(f"nvidia-smi: {len(rows)} samples, {len(busy)} above 200 W")
if busy:
    cs = [b[0] for b in busy]; ps = [b[1] for b in busy]
    print(f"  under load: SM clock median {statistics.median(cs):.0f} MHz (min {min(cs):.0f}, max {max(cs):.0f}), "
          f"power median {statistics.median(ps):.0f} W (max {max(ps):.0f})")
    reasons = {}
    for b in busy: reasons[b[2]] = reasons.get(b[2], 0) + 1
    print("  clock event reasons:", ", ".join(f"{k}: {v}" for k, v in sorted(reasons.items(), key=lambda kv: -kv[1])))
PY
for bs in 1 8 32; do
  p50=$(grep -oE "gpu ms +p50 [0-9.]+" $LOGS/bench_b$bs.log | awk '{print $4 * 1000}')
  LIMIT=60 TAIL=1 step ncu_b$bs ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
    --print-units base $b/sabre bench /tmp/bert.sabre --dim batch=$bs --dim seq=128 --warmup 1 --iters 1 --no-graphs
  python3 scripts/gpu/ncu_sum.py $LOGS/ncu_b$bs.log 2 $p50 | head -30
done
} > $OUT/main.log 2>&1
finish
exit 0
