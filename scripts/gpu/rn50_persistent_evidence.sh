#!/usr/bin/env bash
# One short device call (2026-12-03 third session, the last of its budget): the persistent sm90 conv
# kernels (pingpong/coop) checked against the CPU reference (sabre_conv_sm90_gpu_test, in the
# background), and ResNet-50 --no-tune, whose 3x3 convs the model now gives persistent kernels,
# compared with PyTorch fp16, timed against eager and torch.compile, and profiled at batch 32.
# $OUT/main.log and $OUT/logs.tgz come back.
# Usage on the GPU host: bash scripts/gpu/rn50_persistent_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-rn50p} LOGS=/tmp/steplogs; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-400}
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
python3 bench/models/export_tv.py /tmp/tv resnet50 > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
# SHORT=1 (a call with little device time left): ResNet-50 only, no kernel test.
if [ -z "${SHORT:-}" ]; then
  LIMIT=150 step build ninja -C $b -j16 sabre sabre_conv_sm90_gpu_test
  persistent=$(grep -oE '"sm90_conv_fprop_(pingpong|coop)_[a-z0-9_]+"' tests/gpu/conv_sm90_gpu_test.cpp | tr -d '"')
  (timeout 300 $b/tests/gpu/sabre_conv_sm90_gpu_test -j 6 --work /tmp/conv90p $persistent > $LOGS/conv_persistent_kernels.log 2>&1
   echo "rc=$?" >> $LOGS/conv_persistent_kernels.log) &
  ck=$!
else
  LIMIT=150 step build ninja -C $b -j16 sabre
fi
wait $exp; tail -1 $LOGS/export.log
LIMIT=160 TAIL=8 step compile_rn50 $b/sabre compile /tmp/tv/resnet50.onnx -o /tmp/rn50.sabre --dtype fp16 --dynamic batch=1..32 --no-tune
LIMIT=30 TAIL=6 step compare_rn50 python3 bench/models/tv_e2e.py compare resnet50 /tmp/tv /tmp/rn50.sabre $b/sabre 1 32
LIMIT=60 TAIL=5 step latency_rn50 python3 bench/models/tv_e2e.py latency resnet50 /tmp/tv /tmp/rn50.sabre $b/sabre 1 32
LIMIT=10 TAIL=30 step profile_rn50_b32 $b/sabre bench /tmp/rn50.sabre --dim batch=32 --profile
if [ -z "${SHORT:-}" ]; then
  LIMIT=10 TAIL=16 step profile_rn50_b1 $b/sabre bench /tmp/rn50.sabre --dim batch=1 --profile
  wait $ck; grep -E "^(FAIL)|Summary|^- |rc=" $LOGS/conv_persistent_kernels.log | head -30
fi
} > $OUT/main.log 2>&1
finish
exit 0
