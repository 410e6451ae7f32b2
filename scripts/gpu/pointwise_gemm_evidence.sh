#!/usr/bin/env bash
# One device call (2026-12-03 third session): 1x1 stride-1 convs as GEMM steps (LowerOptions::
# pointwise_gemm) and the rank tie-break at the bandwidth floor. ResNet-50 compiled --no-tune with
# and without --no-pointwise-gemm, both compared with PyTorch fp16, profiled at batch 32 and 1 and
# timed A/B (alternating); then ResNet-50 and MobileNetV2 timed against eager and torch.compile in
# one run, MobileNetV2 compared too. $OUT/main.log and $OUT/logs.tgz come back.
# Usage on the GPU host: bash scripts/gpu/pointwise_gemm_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-pw} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; git log --oneline -1 2>/dev/null
python3 bench/models/export_tv.py /tmp/tv > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=200 step build ninja -C $b -j16 sabre runtime_gemm_test
TAIL=8 step runtime_gemm $b/tests/gpu/runtime_gemm_test
wait $exp; tail -2 $LOGS/export.log
LIMIT=170 TAIL=8 step compile_rn50 $b/sabre compile /tmp/tv/resnet50.onnx -o /tmp/rn50.sabre --dtype fp16 \
  --dynamic batch=1..32 --no-tune
(timeout 150 $b/sabre compile /tmp/tv/resnet50.onnx -o /tmp/rn50_conv.sabre --dtype fp16 --dynamic batch=1..32 \
  --no-tune --no-pointwise-gemm > $LOGS/compile_rn50_conv.log 2>&1; echo "rc=$?" >> $LOGS/compile_rn50_conv.log) &
cv=$!
LIMIT=40 TAIL=7 step compare_rn50 python3 bench/models/tv_e2e.py compare resnet50 /tmp/tv /tmp/rn50.sabre $b/sabre 1 32 7
LIMIT=10 TAIL=34 step profile_rn50_b32 $b/sabre bench /tmp/rn50.sabre --dim batch=32 --profile
LIMIT=10 TAIL=34 step profile_rn50_b1 $b/sabre bench /tmp/rn50.sabre --dim batch=1 --profile
wait $cv; tail -6 $LOGS/compile_rn50_conv.log
for a in rn50 rn50_conv rn50 rn50_conv; do
  LIMIT=20 TAIL=3 step bench_${a}_b32 $b/sabre bench /tmp/$a.sabre --dim batch=32
  LIMIT=20 TAIL=3 step bench_${a}_b1 $b/sabre bench /tmp/$a.sabre --dim batch=1
done
LIMIT=60 TAIL=5 step latency_rn50 python3 bench/models/tv_e2e.py latency resnet50 /tmp/tv /tmp/rn50.sabre $b/sabre 1 32
LIMIT=120 TAIL=6 step compile_mnv2 $b/sabre compile /tmp/tv/mobilenet_v2.onnx -o /tmp/mnv2.sabre --dtype fp16 --dynamic batch=1..32 --no-tune
LIMIT=40 TAIL=7 step compare_mnv2 python3 bench/models/tv_e2e.py compare mobilenet_v2 /tmp/tv /tmp/mnv2.sabre $b/sabre 1 32
LIMIT=60 TAIL=5 step latency_mnv2 python3 bench/models/tv_e2e.py latency mobilenet_v2 /tmp/tv /tmp/mnv2.sabre $b/sabre 1 32
LIMIT=10 TAIL=30 step profile_mnv2_b32 $b/sabre bench /tmp/mnv2.sabre --dim batch=32 --profile
} > $OUT/main.log 2>&1
finish
exit 0
