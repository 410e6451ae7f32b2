#!/usr/bin/env bash
# One device call (2026-12-03 session, fourth): issue 7's conv tuning. ResNet-50 compiled with
# tuning from cold caches (fresh kernel cache and DB; GEMM and conv workloads, conv top-k 2 plus
# each family's best), compared with PyTorch fp16, timed against eager and torch.compile and
# profiled at batch 1 and 32; then MobileNetV2 --no-tune profiled at batch 32 (its latency there was
# 3.4 ms against torch.compile's 1.3). $OUT/main.log and $OUT/logs.tgz come back.
# Usage on the GPU host: bash scripts/gpu/tuned_cnn_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-tunedcnn} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
python3 bench/models/export_tv.py /tmp/tv > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=200 step build ninja -C $b -j16 sabre
wait $exp; tail -2 $LOGS/export.log
rm -rf /tmp/cold && mkdir -p /tmp/cold
LIMIT=330 TAIL=14 step compile_rn50_tuned $b/sabre compile /tmp/tv/resnet50.onnx -o /tmp/rn50.sabre --dtype fp16 \
  --dynamic batch=1..32 --tune --top-k 2 --db /tmp/cold/tuning.db --cache-dir /tmp/cold/kernels
grep -E "^\[[0-9]+/[0-9]+\] conv" $LOGS/compile_rn50_tuned.log | head -200 > $LOGS/conv_tuning.log
grep -c "none correct" $LOGS/conv_tuning.log
LIMIT=30 TAIL=7 step compare_rn50 python3 bench/models/tv_e2e.py compare resnet50 /tmp/tv /tmp/rn50.sabre $b/sabre 1 32 7
LIMIT=50 TAIL=5 step latency_rn50 python3 bench/models/tv_e2e.py latency resnet50 /tmp/tv /tmp/rn50.sabre $b/sabre 1 32
for bs in 1 32; do
  LIMIT=10 TAIL=26 step profile_rn50_b$bs $b/sabre bench /tmp/rn50.sabre --dim batch=$bs --profile
done
LIMIT=60 TAIL=4 step compile_mnv2 $b/sabre compile /tmp/tv/mobilenet_v2.onnx -o /tmp/mnv2.sabre --dtype fp16 --dynamic batch=1..32 --no-tune
LIMIT=10 TAIL=30 step profile_mnv2_b32 $b/sabre bench /tmp/mnv2.sabre --dim batch=32 --profile
} > $OUT/main.log 2>&1
finish
exit 0
