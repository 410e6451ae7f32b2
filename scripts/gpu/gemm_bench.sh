#!/usr/bin/env bash
# One device call: the native fill/iota GPU tests and issue 5's GEMM tuning benchmark (DTYPE f16 or
# bf16, default both; rows print as they are measured). The benchmark's DB is copied to
# $OUT/bench_db.jsonl: copy it to .carry/bench_db.jsonl here and the next call resumes where this one stopped.
# Logs go to $OUT. Usage on the GPU host: [DTYPE=f16] bash scripts/gpu/gemm_bench.sh
set -u
OUT=${OUT:-/tmp/sabre-gemm}; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
T0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=200 step build ninja -C $b -j16 sabre gemm_tune_bench native_kernels_test
TAIL=4 step native_fill $b/tests/gpu/native_kernels_test Fill
TAIL=4 step native_iota $b/tests/gpu/native_kernels_test Iota
left=$(( ${BUDGET:-540} - (SECONDS - T0) ))
echo "== $left s left for the GEMM benchmark"
[ -f .carry/bench_db.jsonl ] && $b/sabre db import .carry/bench_db.jsonl --db /tmp/bench.db
LIMIT=$left TAIL=70 step gemm_bench $b/gemm_tune_bench --top-k ${TOPK:-4} --db /tmp/bench.db ${DTYPE:+--dtype $DTYPE}
$b/sabre db export --db /tmp/bench.db -o "$OUT/bench_db.jsonl"
exit 0
