#!/usr/bin/env bash
# One device call for branch native-cnn-speed (the vector depthwise and NHWC global-average-pool
# kernels): their GPU tests, then MobileNetV2 and ResNet-50 compiled --no-tune, compared with PyTorch
# fp16, timed against eager and torch.compile and profiled at batch 32. Merge the branch only if the
# tests pass and the outputs still match. $OUT/main.log and $OUT/logs.tgz come back.
# Usage on the GPU host: bash scripts/gpu/native_cnn_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-nativecnn} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
python3 bench/models/export_tv.py /tmp/tv > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=200 step build ninja -C $b -j16 sabre native_kernels_test
TAIL=2 step native_tests $b/tests/gpu/native_kernels_test
grep -E "Depthwise|GlobalAveragePool|FAIL" $LOGS/native_tests.log | head -60
wait $exp; tail -2 $LOGS/export.log
(timeout 150 $b/sabre compile /tmp/tv/resnet50.onnx -o /tmp/rn50.sabre --dtype fp16 --dynamic batch=1..32 --no-tune > $LOGS/compile_rn50.log 2>&1; echo "rc=$?" >> $LOGS/compile_rn50.log) &
rn=$!
LIMIT=120 TAIL=4 step compile_mnv2 $b/sabre compile /tmp/tv/mobilenet_v2.onnx -o /tmp/mnv2.sabre --dtype fp16 --dynamic batch=1..32 --no-tune
LIMIT=40 TAIL=6 step compare_mnv2 python3 bench/models/tv_e2e.py compare mobilenet_v2 /tmp/tv /tmp/mnv2.sabre $b/sabre 1 32
LIMIT=60 TAIL=5 step latency_mnv2 python3 bench/models/tv_e2e.py latency mobilenet_v2 /tmp/tv /tmp/mnv2.sabre $b/sabre 1 32
LIMIT=10 TAIL=24 step profile_mnv2_b32 $b/sabre bench /tmp/mnv2.sabre --dim batch=32 --profile
wait $rn; tail -4 $LOGS/compile_rn50.log
LIMIT=40 TAIL=7 step compare_rn50 python3 bench/models/tv_e2e.py compare resnet50 /tmp/tv /tmp/rn50.sabre $b/sabre 1 32 7
LIMIT=10 TAIL=12 step profile_rn50_b1 $b/sabre bench /tmp/rn50.sabre --dim batch=1 --profile
} > $OUT/main.log 2>&1
finish
exit 0
