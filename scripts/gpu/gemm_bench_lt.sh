#!/usr/bin/env bash
# One device call: the GEMM tuning benchmark (bench/gemm_tune_bench, bench/README.md) on one half of
# its shape set (DTYPE f16, the default, or bf16) or on both in one run with one geomean (DTYPE=all),
# with the deploy columns (what sabre compile deploys, cuBLASLt algorithms included). With
# IMPORT=FILE.jsonl.gz a DB of an earlier call is imported first (its rows count only where their
# build, template version included, is this one's). A warm machine's DB of an earlier call is kept.
# Rows print as they are measured; the DB comes back as $OUT/bench_db.jsonl.gz.
# Usage on the GPU host: [DTYPE=bf16|all] [IMPORT=bench/results/X.jsonl.gz] bash scripts/gpu/gemm_bench_lt.sh
set -u
OUT=${OUT:-/tmp/sabre-gemm-lt}; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=OFF
LIMIT=150 step build ninja -C $b -j16 sabre gemm_tune_bench
if [ ! -f /tmp/bench.db ] && [ -n "${IMPORT:-}" ]; then
  gunzip -c "$IMPORT" > /tmp/import.jsonl
  $b/sabre db import /tmp/import.jsonl --db /tmp/bench.db | tail -1
fi
LIMIT=$((DEADLINE - SECONDS - 15)) TAIL=60 step gemm_bench $b/gemm_tune_bench --top-k 4 --max-kernels 8 $([ "${DTYPE:-f16}" = all ] || echo --dtype ${DTYPE:-f16}) --db /tmp/bench.db
$b/sabre db export --db /tmp/bench.db -o "$OUT/bench_db.jsonl" && gzip -f "$OUT/bench_db.jsonl"
} > $OUT/main.log 2>&1
finish
exit 0
