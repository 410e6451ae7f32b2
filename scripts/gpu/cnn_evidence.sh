#!/usr/bin/env bash
# One device call: the first GPU runs of the kernels added for issues 6 and 7 (native attention,
# depthwise, fill/iota; CUTLASS conv fprop), issue 7's end-to-end evidence (ResNet-50 and
# MobileNetV2 against PyTorch fp16) and the fused-attention BERT-base check. Steps run in priority
# order; each has its own limit, cut to what is left of DEADLINE (default 570 s), so the summary
# ($OUT/main.log) and every step's log ($OUT/logs.tgz) always come back.
# Usage on the GPU host: bash scripts/gpu/cnn_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-cnn} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
# Exports run on the CPU while ninja builds.
(python3 bench/models/export_tv.py /tmp/tv; python3 bench/models/export_hf.py /tmp/hf bert) > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=240 step build ninja -C $b -j16 sabre native_kernels_test sabre_conv_gpu_test
TAIL=30 step native_kernels $b/tests/gpu/native_kernels_test ${NATIVE_FILTER:-}
LIMIT=150 TAIL=20 step conv_kernels $b/tests/gpu/sabre_conv_gpu_test -j 16 --work /tmp/convk
wait $exp; tail -4 $LOGS/export.log
LIMIT=150 TAIL=14 step compile_rn50 $b/sabre compile /tmp/tv/resnet50.onnx -o /tmp/rn50.sabre --dtype fp16 --dynamic batch=1..32 --no-tune
LIMIT=60 TAIL=8 step compare_rn50 python3 bench/models/tv_e2e.py compare resnet50 /tmp/tv /tmp/rn50.sabre $b/sabre 1 32 7
LIMIT=120 TAIL=6 step compile_bert_fused $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert_fused.sabre --dtype fp16 --dynamic batch=1..32,seq=1..128 --fuse-attention --no-tune
LIMIT=60 TAIL=12 step compare_bert_fused python3 bench/models/hf_e2e.py compare bert_base /tmp/hf /tmp/bert_fused.sabre $b/sabre 1:128 8:128 3:77 2:9
LIMIT=150 TAIL=8 step latency_rn50 python3 bench/models/tv_e2e.py latency resnet50 /tmp/tv /tmp/rn50.sabre $b/sabre 1 32
LIMIT=100 TAIL=8 step compile_mnv2 $b/sabre compile /tmp/tv/mobilenet_v2.onnx -o /tmp/mnv2.sabre --dtype fp16 --dynamic batch=1..32 --no-tune
LIMIT=60 TAIL=8 step compare_mnv2 python3 bench/models/tv_e2e.py compare mobilenet_v2 /tmp/tv /tmp/mnv2.sabre $b/sabre 1 32
LIMIT=150 TAIL=6 step latency_bert_fused python3 bench/models/hf_e2e.py latency bert_base /tmp/hf /tmp/bert_fused.sabre $b/sabre 128 1 8 32
} > $OUT/main.log 2>&1
finish
exit 0
