#!/usr/bin/env bash
# One device call (2026-12-03, seventh session): every plain cuBLASLt case of the GEMM GPU test (f16,
# bf16, f32/TF32; tn and tt; six epilogues) on the quick shapes, through the reworked LtGemm (its
# algorithms rebuilt from their configuration before they run); LT_CASES (a grep -E pattern over the
# test's --list, e.g. ^deploy:) picks other cases. $OUT/main.log comes back.
# Usage on the GPU host: bash scripts/gpu/lt_refactor_check.sh
set -u
OUT=${OUT:-/tmp/sabre-ltcheck}; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=150 step build ninja -C $b -j16 sabre_gemm_gpu_test
names=$($b/tests/gpu/sabre_gemm_gpu_test --list | grep -E "${LT_CASES:-^cublaslt_}")
LIMIT=120 TAIL=12 step gemm_lt_plain $b/tests/gpu/sabre_gemm_gpu_test --quick --work /tmp/gemm_lt $names --out $OUT/gemm_lt_plain.md
} > $OUT/main.log 2>&1
cat $OUT/main.log
exit 0
