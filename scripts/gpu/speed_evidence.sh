#!/usr/bin/env bash
# One device call for the 2026-12-02 evening's speed work, in priority order: the native kernels'
# GPU tests (the mma.sync attention, nchw_to_nhwc, the vector pool) and native_bench (stream and
# graph-replay times); BERT-base --fuse-attention (Q/K/V joined by merge_qkv) compiled --no-tune,
# compared with PyTorch fp16 and timed against eager and torch.compile, profiled; ResNet-50 (stem
# channels padded to 8) compiled --no-tune alongside, compared, timed, profiled; MobileNetV2
# compared; then the conv kernels' and split-K GEMM kernels' GPU tests. Each step's limit is cut to
# what is left of DEADLINE (570 s); $OUT/main.log and $OUT/logs.tgz come back.
# Usage on the GPU host: bash scripts/gpu/speed_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-speed} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
(python3 bench/models/export_hf.py /tmp/hf bert; python3 bench/models/export_tv.py /tmp/tv) > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=240 step build ninja -C $b -j16 sabre native_kernels_test native_bench runtime_session_test sabre_conv_gpu_test sabre_gemm_gpu_test
TAIL=2 step native_tests $b/tests/gpu/native_kernels_test
grep -E "Attention|NchwToNhwc|FAIL" $LOGS/native_tests.log | head -40; grep -c "^PASS" $LOGS/native_tests.log
TAIL=40 step native_bench $b/native_bench
wait $exp; tail -3 $LOGS/export.log
# ResNet-50 compiles (6 SM80 conv kernels) while BERT-base's 17 SM90 GEMM kernels do.
(timeout 200 $b/sabre compile /tmp/tv/resnet50.onnx -o /tmp/rn50.sabre --dtype fp16 --dynamic batch=1..32 --no-tune > $LOGS/compile_rn50.log 2>&1; echo "rc=$?" >> $LOGS/compile_rn50.log) &
rn=$!
LIMIT=180 TAIL=7 step compile_bert $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert_fused.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --no-tune --fuse-attention
LIMIT=60 TAIL=14 step compare_bert python3 bench/models/hf_e2e.py compare bert_base /tmp/hf /tmp/bert_fused.sabre $b/sabre 1:128 8:128 32:128 3:77 2:9
LIMIT=110 TAIL=6 step latency_bert python3 bench/models/hf_e2e.py latency bert_base /tmp/hf /tmp/bert_fused.sabre $b/sabre 128 1 8 32
LIMIT=15 TAIL=20 step profile_bert_b1 $b/sabre bench /tmp/bert_fused.sabre --dim batch=1 --dim seq=128 --profile
wait $rn; echo "== compile_rn50"; tail -8 $LOGS/compile_rn50.log
LIMIT=40 TAIL=7 step compare_rn50 python3 bench/models/tv_e2e.py compare resnet50 /tmp/tv /tmp/rn50.sabre $b/sabre 1 32 7
LIMIT=70 TAIL=5 step latency_rn50 python3 bench/models/tv_e2e.py latency resnet50 /tmp/tv /tmp/rn50.sabre $b/sabre 1 32
for bs in 32 1; do
  LIMIT=15 TAIL=20 step profile_rn50_b$bs $b/sabre bench /tmp/rn50.sabre --dim batch=$bs --profile
done
LIMIT=15 TAIL=20 step profile_bert_b32 $b/sabre bench /tmp/bert_fused.sabre --dim batch=32 --dim seq=128 --profile
TAIL=3 step runtime_session $b/tests/gpu/runtime_session_test
LIMIT=120 TAIL=12 step splitk_gemm $b/tests/gpu/sabre_gemm_gpu_test -j 16 --work /tmp/gk \
  sm90_ws_splitk4_tn_f16_f16_f32_128x64x64_c1x1_a8_linear sm90_ws_splitk4_tn_f16_f16_f32_128x64x64_c1x1_a8_bias_gelu \
  sm90_ws_splitk4_tn_f16_f16_f32_128x64x64_c1x1_a8_bias_res sm90_ws_splitk4_tn_f16_f16_f32_128x64x64_c1x1_a8_bias_gelu_res \
  sm90_ws_streamk_tn_f16_f16_f32_128x128x64_c1x1_a8_bias
LIMIT=120 TAIL=12 step conv_kernels $b/tests/gpu/sabre_conv_gpu_test -j 16 --work /tmp/convk
LIMIT=60 TAIL=8 step compile_mnv2 $b/sabre compile /tmp/tv/mobilenet_v2.onnx -o /tmp/mnv2.sabre --dtype fp16 --dynamic batch=1..32 --no-tune
LIMIT=40 TAIL=6 step compare_mnv2 python3 bench/models/tv_e2e.py compare mobilenet_v2 /tmp/tv /tmp/mnv2.sabre $b/sabre 1 32
} > $OUT/main.log 2>&1
finish
exit 0
