#!/usr/bin/env bash
# One device call for issue 5's evidence and issue 6's latency profile: build; export BERT-base on
# the host; `sabre tune` it from cold caches (timed) and again warm; compile it with that tuning
# (plain and --fuse-attention) and profile both with `sabre bench --profile`; then the GEMM tuning
# benchmark (both dtypes, resuming from .carry/bench_db.jsonl when present) in the time left.
# Each step's limit is cut to what is left of DEADLINE (default 570 s); the summary ($OUT/main.log),
# every log ($OUT/logs.tgz), the tuning DB (tune_db.jsonl) and the bench DB (bench_db.jsonl) come back.
# Usage on the GPU host: bash scripts/gpu/tune_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-tune} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 bench/models/export_hf.py /tmp/hf bert > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=OFF
LIMIT=240 step build ninja -C $b -j16 sabre gemm_tune_bench
wait $exp; tail -1 $LOGS/export.log
rm -rf ~/.cache/sabre /tmp/tune.db
tune=($b/sabre tune /tmp/hf/bert_base.onnx --dim batch=1..32 --dim seq=1..128 --db /tmp/tune.db)
LIMIT=300 TAIL=45 step tune_cold "${tune[@]}"
TAIL=6 step tune_warm "${tune[@]}"
$b/sabre db export --db /tmp/tune.db -o "$OUT/tune_db.jsonl" > /dev/null 2>&1
for v in plain fused; do
  extra=(); [ $v = fused ] && extra=(--fuse-attention)
  LIMIT=120 TAIL=8 step compile_$v $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert_$v.sabre --dtype fp16 \
    --dynamic batch=1..32,seq=1..128 --db /tmp/tune.db "${extra[@]}"
  for bs in 1 32; do
    LIMIT=40 TAIL=30 step profile_${v}_b$bs $b/sabre bench /tmp/bert_$v.sabre --dim batch=$bs --dim seq=128 --profile
  done
done
[ -f .carry/bench_db.jsonl ] && $b/sabre db import .carry/bench_db.jsonl --db /tmp/bench.db
LIMIT=600 TAIL=90 step gemm_bench $b/gemm_tune_bench --top-k ${TOPK:-4} --db /tmp/bench.db
$b/sabre db export --db /tmp/bench.db -o "$OUT/bench_db.jsonl"
} > $OUT/main.log 2>&1
finish
exit 0
