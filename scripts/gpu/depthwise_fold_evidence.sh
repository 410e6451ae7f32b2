#!/usr/bin/env bash
# One device call (2026-12-03, seventh session): the scalar depthwise kernel folded into the grouped
# kernel (depthwise is its case K = groups = C, same filter bytes); the native GPU cases of both
# (Depthwise_*, GroupedConv_*) against the reference executor. $OUT/main.log comes back.
# Usage on the GPU host: bash scripts/gpu/depthwise_fold_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-dw}; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=150 step build ninja -C $b -j16 native_kernels_test
for f in Depthwise_ GroupedConv_; do
  LIMIT=60 TAIL=3 step native_$f $b/tests/gpu/native_kernels_test $f
  grep -c "^PASS" $OUT/native_$f.log
done
} > $OUT/main.log 2>&1
cat $OUT/main.log
exit 0
