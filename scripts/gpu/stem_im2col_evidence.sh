#!/usr/bin/env bash
# One device call for branch stem-im2col (the RGB stem as an im2col step + a GEMM instead of a
# channel-padded implicit-GEMM conv): the im2col kernel's GPU tests, the runtime tests (an im2col
# step feeding a gemm step through the session, graphs replayed), then ResNet-50 compiled --no-tune
# with the new stem and with --no-im2col-stem, each compared with PyTorch fp16 and profiled at batch
# 32 (the stem's steps: im2col + gemm against nchw_to_nhwc + conv), and both timed at batch 1 and 32.
# Then ResNet-50 with the new stem timed against eager and torch.compile. $OUT/main.log and
# $OUT/logs.tgz come back.
# Usage on the GPU host: bash scripts/gpu/stem_im2col_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-stem} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
python3 bench/models/export_tv.py /tmp/tv > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=200 step build ninja -C $b -j16 sabre native_kernels_test runtime_gemm_test runtime_session_test
TAIL=2 step im2col_tests $b/tests/gpu/native_kernels_test Im2col
grep -E "Im2col|FAIL" $LOGS/im2col_tests.log | head -20
TAIL=2 step native_errors $b/tests/gpu/native_kernels_test Errors
TAIL=8 step runtime_gemm $b/tests/gpu/runtime_gemm_test
TAIL=2 step runtime_session $b/tests/gpu/runtime_session_test
wait $exp; tail -2 $LOGS/export.log
LIMIT=150 TAIL=8 step compile_rn50 $b/sabre compile /tmp/tv/resnet50.onnx -o /tmp/rn50.sabre --dtype fp16 \
  --dynamic batch=1..32 --no-tune
# The old stem in the background (the cache has every other kernel by now), while the new one is checked.
(timeout 150 $b/sabre compile /tmp/tv/resnet50.onnx -o /tmp/rn50_pad.sabre --dtype fp16 --dynamic batch=1..32 \
  --no-tune --no-im2col-stem > $LOGS/compile_rn50_pad.log 2>&1; echo "rc=$?" >> $LOGS/compile_rn50_pad.log) &
pad=$!
LIMIT=40 TAIL=7 step compare_rn50 python3 bench/models/tv_e2e.py compare resnet50 /tmp/tv /tmp/rn50.sabre $b/sabre 1 32 7
LIMIT=10 TAIL=24 step profile_rn50_b32 $b/sabre bench /tmp/rn50.sabre --dim batch=32 --profile
wait $pad; tail -6 $LOGS/compile_rn50_pad.log
LIMIT=40 TAIL=7 step compare_rn50_pad python3 bench/models/tv_e2e.py compare resnet50 /tmp/tv /tmp/rn50_pad.sabre $b/sabre 1 32
LIMIT=10 TAIL=24 step profile_rn50_pad_b32 $b/sabre bench /tmp/rn50_pad.sabre --dim batch=32 --profile
for a in rn50 rn50_pad rn50 rn50_pad; do
  LIMIT=20 TAIL=3 step bench_${a}_b32 $b/sabre bench /tmp/$a.sabre --dim batch=32
  LIMIT=20 TAIL=3 step bench_${a}_b1 $b/sabre bench /tmp/$a.sabre --dim batch=1
done
LIMIT=60 TAIL=5 step latency_rn50 python3 bench/models/tv_e2e.py latency resnet50 /tmp/tv /tmp/rn50.sabre $b/sabre 1 32
} > $OUT/main.log 2>&1
finish
exit 0
