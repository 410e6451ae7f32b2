#!/usr/bin/env bash
# One device call (2026-12-03 session, third): the sm90 conv family. Its GPU numerical test, then
# ResNet-50 compiled --no-tune with the conv picker ranking sm90 against sm80 kernels (default
# --conv-kernels auto), compared with PyTorch fp16, timed against eager and torch.compile, profiled
# at batch 1 and 32; MobileNetV2 compiled and compared. $OUT/main.log and $OUT/logs.tgz come back.
# Usage on the GPU host: bash scripts/gpu/sm90_conv_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-sm90conv} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
python3 bench/models/export_tv.py /tmp/tv > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=200 step build ninja -C $b -j16 sabre sabre_conv_sm90_gpu_test
LIMIT=150 TAIL=6 step conv_sm90_kernels $b/tests/gpu/sabre_conv_sm90_gpu_test -j 16 --work /tmp/conv90
grep -E "FAIL|kernels built" $LOGS/conv_sm90_kernels.log | head -30
wait $exp; tail -2 $LOGS/export.log
LIMIT=150 TAIL=8 step compile_rn50 $b/sabre compile /tmp/tv/resnet50.onnx -o /tmp/rn50.sabre --dtype fp16 --dynamic batch=1..32 --no-tune
LIMIT=40 TAIL=7 step compare_rn50 python3 bench/models/tv_e2e.py compare resnet50 /tmp/tv /tmp/rn50.sabre $b/sabre 1 32 7
LIMIT=60 TAIL=5 step latency_rn50 python3 bench/models/tv_e2e.py latency resnet50 /tmp/tv /tmp/rn50.sabre $b/sabre 1 32
for bs in 32 1; do
  LIMIT=15 TAIL=26 step profile_rn50_b$bs $b/sabre bench /tmp/rn50.sabre --dim batch=$bs --profile
done
LIMIT=90 TAIL=8 step compile_mnv2 $b/sabre compile /tmp/tv/mobilenet_v2.onnx -o /tmp/mnv2.sabre --dtype fp16 --dynamic batch=1..32 --no-tune
LIMIT=40 TAIL=6 step compare_mnv2 python3 bench/models/tv_e2e.py compare mobilenet_v2 /tmp/tv /tmp/mnv2.sabre $b/sabre 1 32
LIMIT=50 TAIL=5 step latency_mnv2 python3 bench/models/tv_e2e.py latency mobilenet_v2 /tmp/tv /tmp/mnv2.sabre $b/sabre 1 32
} > $OUT/main.log 2>&1
finish
exit 0
