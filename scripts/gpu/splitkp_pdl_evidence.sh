#!/usr/bin/env bash
# One device call (2026-12-03, sixth session): issue 7 with the sm80 conv kernels launched with PDL
# (parallel split-K's reduction too). The whole conv GPU test (every sm80 kernel goes through the new
# launch); runtime_session; ResNet-50 tuned (the DB of this session's first call: no new timing) and
# untuned, against PyTorch eager and torch.compile in 3 rounds (CUDA-event times), compared with
# PyTorch fp16, profiled at batch 1; MobileNetV2 untuned compared (the depthwise clamp param).
# $OUT/main.log and $OUT/logs.tgz come back.
# Usage on the GPU host: bash scripts/gpu/splitkp_pdl_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-splitkp-pdl} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
python3 bench/models/export_tv.py /tmp/tv > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=150 step build ninja -C $b -j16 sabre sabre_conv_gpu_test runtime_session_test
LIMIT=120 TAIL=1 step conv_kernels $b/tests/gpu/sabre_conv_gpu_test -j 16 --work /tmp/convk
grep -E "^FAIL" $LOGS/conv_kernels.log | head -20
LIMIT=60 TAIL=1 step runtime_session $b/tests/gpu/runtime_session_test
wait $exp; tail -2 $LOGS/export.log
mkdir -p /tmp/warm && gunzip -c bench/results/rn50_db_h200_2026-12-03.jsonl.gz > /tmp/warm/rn50_db.jsonl
$b/sabre db import /tmp/warm/rn50_db.jsonl --db /tmp/warm/tuning.db | tail -1
LIMIT=220 TAIL=4 step compile_rn50_tuned $b/sabre compile /tmp/tv/resnet50.onnx -o /tmp/rn50_tuned.sabre --dtype fp16 \
  --dynamic batch=1..32 --tune --top-k 2 --db /tmp/warm/tuning.db --cache-dir /tmp/warm/kernels
LIMIT=100 TAIL=3 step compile_rn50 $b/sabre compile /tmp/tv/resnet50.onnx -o /tmp/rn50.sabre --dtype fp16 \
  --dynamic batch=1..32 --no-tune --cache-dir /tmp/warm/kernels
LIMIT=150 TAIL=4 step latency_rn50 python3 bench/models/tv_e2e.py latency resnet50 /tmp/tv /tmp/rn50_tuned.sabre,/tmp/rn50.sabre $b/sabre 1 32
LIMIT=40 TAIL=7 step compare_rn50_tuned python3 bench/models/tv_e2e.py compare resnet50 /tmp/tv /tmp/rn50_tuned.sabre $b/sabre 1 32 7
LIMIT=20 TAIL=3 step profile_rn50_tuned_b1 $b/sabre bench /tmp/rn50_tuned.sabre --dim batch=1 --profile --steps 0
LIMIT=20 TAIL=3 step profile_rn50_b1 $b/sabre bench /tmp/rn50.sabre --dim batch=1 --profile --steps 0
LIMIT=100 TAIL=3 step compile_mnv2 $b/sabre compile /tmp/tv/mobilenet_v2.onnx -o /tmp/mnv2.sabre --dtype fp16 \
  --dynamic batch=1..32 --no-tune --cache-dir /tmp/warm/kernels
LIMIT=40 TAIL=7 step compare_mnv2 python3 bench/models/tv_e2e.py compare mobilenet_v2 /tmp/tv /tmp/mnv2.sabre $b/sabre 1 32 7
} > $OUT/main.log 2>&1
finish
exit 0
