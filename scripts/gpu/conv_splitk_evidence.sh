#!/usr/bin/env bash
# One device call (2026-12-03 session, first): conv split-K and per-batch conv dispatch, the
# reworked attention kernel. In priority order: the conv kernels' GPU test (split-K variants on a
# batch-1 7x7x512 layer) and the native kernels' tests and bench (attention); ResNet-50 compiled
# --no-tune (the model now picks tiles and split-K per batch bucket), compared with PyTorch fp16,
# timed against eager and torch.compile, profiled at batch 1 and 32; BERT-base --fuse-attention
# --no-tune compiled alongside, timed and profiled (the attention kernel's effect), compared;
# MobileNetV2 compared. Each step's limit is cut to what is left of DEADLINE (570 s); $OUT/main.log
# and $OUT/logs.tgz come back.
# Usage on the GPU host: bash scripts/gpu/conv_splitk_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-convsk} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
(python3 bench/models/export_tv.py /tmp/tv; python3 bench/models/export_hf.py /tmp/hf bert) > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=240 step build ninja -C $b -j16 sabre native_kernels_test native_bench sabre_conv_gpu_test
LIMIT=100 TAIL=14 step conv_kernels $b/tests/gpu/sabre_conv_gpu_test -j 16 --work /tmp/convk
grep -E "splitk|FAIL" $LOGS/conv_kernels.log | head -40
TAIL=2 step native_tests $b/tests/gpu/native_kernels_test
grep -E "Attention|FAIL" $LOGS/native_tests.log | head -30; grep -c "^PASS" $LOGS/native_tests.log
TAIL=2 step native_bench $b/native_bench
grep -i -E "attention" $LOGS/native_bench.log | head -20
wait $exp; tail -3 $LOGS/export.log
(timeout 200 $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert_fused.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --no-tune --fuse-attention > $LOGS/compile_bert.log 2>&1; echo "rc=$?" >> $LOGS/compile_bert.log) &
bt=$!
LIMIT=150 TAIL=8 step compile_rn50 $b/sabre compile /tmp/tv/resnet50.onnx -o /tmp/rn50.sabre --dtype fp16 --dynamic batch=1..32 --no-tune
LIMIT=40 TAIL=7 step compare_rn50 python3 bench/models/tv_e2e.py compare resnet50 /tmp/tv /tmp/rn50.sabre $b/sabre 1 32 7
LIMIT=70 TAIL=5 step latency_rn50 python3 bench/models/tv_e2e.py latency resnet50 /tmp/tv /tmp/rn50.sabre $b/sabre 1 32
for bs in 1 32; do
  LIMIT=15 TAIL=24 step profile_rn50_b$bs $b/sabre bench /tmp/rn50.sabre --dim batch=$bs --profile
done
wait $bt; echo "== compile_bert"; tail -6 $LOGS/compile_bert.log
LIMIT=110 TAIL=6 step latency_bert python3 bench/models/hf_e2e.py latency bert_base /tmp/hf /tmp/bert_fused.sabre $b/sabre 128 1 8 32
LIMIT=15 TAIL=20 step profile_bert_b1 $b/sabre bench /tmp/bert_fused.sabre --dim batch=1 --dim seq=128 --profile
LIMIT=60 TAIL=14 step compare_bert python3 bench/models/hf_e2e.py compare bert_base /tmp/hf /tmp/bert_fused.sabre $b/sabre 1:128 8:128 32:128 3:77 2:9
LIMIT=60 TAIL=8 step compile_mnv2 $b/sabre compile /tmp/tv/mobilenet_v2.onnx -o /tmp/mnv2.sabre --dtype fp16 --dynamic batch=1..32 --no-tune
LIMIT=40 TAIL=6 step compare_mnv2 python3 bench/models/tv_e2e.py compare mobilenet_v2 /tmp/tv /tmp/mnv2.sabre $b/sabre 1 32
} > $OUT/main.log 2>&1
finish
exit 0
