#!/usr/bin/env bash
# One device call for issue 7's speed work: the ResNet/MobileNet stem's channels padded 3 -> 8 at the
# NHWC boundary (alignment-8 conv kernels instead of the alignment-1 analytic one), the native
# nchw_to_nhwc conversion (cast fused) and the vectorized NHWC pool. Their GPU tests (native kernels,
# session, conv kernels with the padded stem problem), native_bench, then ResNet-50 and MobileNetV2
# compiled --no-tune, compared with PyTorch fp16/fp32, ResNet-50 timed against eager and
# torch.compile and profiled at batch 1 and 32. Each step's limit is cut to what is left of DEADLINE
# (570 s); $OUT/main.log and $OUT/logs.tgz come back. Usage on the GPU host:
# bash scripts/gpu/cnn_speed_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-cnn-speed} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 bench/models/export_tv.py /tmp/tv > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=240 step build ninja -C $b -j16 sabre native_kernels_test runtime_session_test sabre_conv_gpu_test native_bench ${EXTRA_TARGETS:-}
TAIL=2 step native_tests $b/tests/gpu/native_kernels_test
grep -E "NchwToNhwc|Pool_|FAIL" $LOGS/native_tests.log | head -40
TAIL=3 step runtime_session $b/tests/gpu/runtime_session_test
LIMIT=150 TAIL=12 step conv_kernels $b/tests/gpu/sabre_conv_gpu_test -j 16 --work /tmp/convk
TAIL=40 step native_bench $b/native_bench
wait $exp; tail -2 $LOGS/export.log
LIMIT=120 TAIL=8 step compile_rn50 $b/sabre compile /tmp/tv/resnet50.onnx -o /tmp/rn50.sabre --dtype fp16 --dynamic batch=1..32 --no-tune
LIMIT=60 TAIL=7 step compare_rn50 python3 bench/models/tv_e2e.py compare resnet50 /tmp/tv /tmp/rn50.sabre $b/sabre 1 32 7
LIMIT=60 TAIL=8 step compile_mnv2 $b/sabre compile /tmp/tv/mobilenet_v2.onnx -o /tmp/mnv2.sabre --dtype fp16 --dynamic batch=1..32 --no-tune
LIMIT=60 TAIL=6 step compare_mnv2 python3 bench/models/tv_e2e.py compare mobilenet_v2 /tmp/tv /tmp/mnv2.sabre $b/sabre 1 32
LIMIT=120 TAIL=5 step latency_rn50 python3 bench/models/tv_e2e.py latency resnet50 /tmp/tv /tmp/rn50.sabre $b/sabre 1 32
for bs in 1 32; do
  LIMIT=20 TAIL=22 step profile_rn50_b$bs $b/sabre bench /tmp/rn50.sabre --dim batch=$bs --profile
done
${EXTRA_STEPS:-true}
} > $OUT/main.log 2>&1
finish
exit 0
