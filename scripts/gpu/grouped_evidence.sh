#!/usr/bin/env bash
# One short device call (2026-12-03, sixth session, the budget's last ~250 s): the native grouped-conv
# kernel. native_kernels_test's GroupedConv_* and Depthwise_* cases against the reference, then a
# two-grouped-conv ONNX model (bench/models/export_grouped.py) compiled and run with
# --compare-reference at batch 1 and 3. $OUT/main.log comes back.
set -u
OUT=${OUT:-/tmp/sabre-grouped}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-150}
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=100 TAIL=2 step build ninja -C $b -j16 sabre native_kernels_test
LIMIT=30 TAIL=2 step grouped_tests $b/tests/gpu/native_kernels_test GroupedConv
grep -E "^FAIL" $OUT/grouped_tests.log | head
LIMIT=30 TAIL=2 step depthwise_tests $b/tests/gpu/native_kernels_test Depthwise
grep -E "^FAIL" $OUT/depthwise_tests.log | head
python3 bench/models/export_grouped.py /tmp/grouped.onnx
LIMIT=30 TAIL=3 step compile_grouped $b/sabre compile /tmp/grouped.onnx -o /tmp/grouped.sabre --dtype fp16 --no-tune --dynamic batch=1..4
for bs in 1 3; do
  LIMIT=20 TAIL=4 step run_grouped_b$bs $b/sabre run /tmp/grouped.sabre --dim batch=$bs --compare-reference -o /tmp/grouped_out$bs
done
} > $OUT/main.log 2>&1
cat $OUT/main.log
exit 0
