#!/usr/bin/env bash
# One device call: programmatic dependent launch (PDL) for the native kernels, the generated
# elementwise kernels and the SM90 GEMMs; the unordered split-K GEMMs (splitku); the relu6 epilogue;
# the reworked native depthwise, global-average-pool, layernorm, NCHW->NHWC and pooling kernels.
# Runs the native GPU tests, the split-K and relu6 GEMM and conv cases and the native bench, then
# BERT-base --no-tune: compared with PyTorch fp16 and timed with PDL on and off (SABRE_PDL=0) in
# the same run, then MobileNetV2 --no-tune compared, timed and profiled. $OUT/main.log and $OUT/logs.tgz come back.
# Usage on the GPU host: bash scripts/gpu/pdl_splitku_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-pdl} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
(python3 bench/models/export_hf.py /tmp/hf bert; python3 bench/models/export_tv.py /tmp/tv) > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=240 step build ninja -C $b -j16 sabre native_kernels_test sabre_gemm_gpu_test sabre_conv_gpu_test sabre_conv_sm90_gpu_test native_bench
# The kernel cases compile their kernels (most of their time) while the native tests run.
kcases() {
  $b/tests/gpu/sabre_gemm_gpu_test -j 8 --work /tmp/gk --quick \
    sm90_ws_splitku4_tn_f16_f16_f32_128x32x64_c1x1_a8_bias_res sm90_ws_splitku8_tn_f16_f16_f32_128x64x64_c1x1_a8_bias_gelu \
    sm90_ws_splitku4_tn_bf16_bf16_f32_128x64x64_c1x1_a8_bias_gelu_res sm90_ws_pingpong_tn_f16_f16_f32_64x64x64_c1x1_a8_bias_res \
    sm90_ws_coop_tn_f16_f16_f32_128x64x64_c1x1_a8_bias_relu6 sm90_ws_coop_tn_bf16_bf16_f32_128x64x64_c1x1_a8_relu6 \
    sm80_tc_tn_f16_f16_f32_128x256x32_w64x64x32_s3_a8_bias_relu6 > $LOGS/gemm_cases.log 2>&1
  echo "rc=$?" >> $LOGS/gemm_cases.log
  $b/tests/gpu/sabre_conv_gpu_test -j 4 --work /tmp/ck \
    sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x64x32_w64x32x32_s4_a8_bias_relu6 \
    sm80_conv_fprop_optimized_nhwc_bf16_bf16_f32_64x64x32_w32x32x32_s4_a8_splitk4_bias_relu6 > $LOGS/conv_cases.log 2>&1
  echo "rc=$?" >> $LOGS/conv_cases.log
  $b/tests/gpu/sabre_conv_sm90_gpu_test -j 4 --work /tmp/ck9 \
    sm90_conv_fprop_nhwc_f16_f16_f32_128x64x64_c1x1_a8_bias_relu6 sm90_conv_fprop_nhwc_bf16_bf16_f32_128x128x64_c1x1_a8_relu6 \
    > $LOGS/conv_sm90_cases.log 2>&1
  echo "rc=$?" >> $LOGS/conv_sm90_cases.log
}
timeout 240 bash -c "$(declare -f kcases); b=$b LOGS=$LOGS kcases" &
kc=$!
TAIL=2 step native_tests $b/tests/gpu/native_kernels_test
grep -E "FAIL|passed|failed" $LOGS/native_tests.log | head -20
wait $exp; tail -2 $LOGS/export.log
LIMIT=120 TAIL=6 step compile_bert $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --no-tune
wait $kc
echo "== gemm_cases"; tail -16 $LOGS/gemm_cases.log
for t in conv_cases conv_sm90_cases; do echo "== $t: $(grep -c '^ok' $LOGS/$t.log) ok"; grep -E "^FAIL|rc=" $LOGS/$t.log | head; done
LIMIT=60 TAIL=45 step native_bench $b/native_bench
LIMIT=40 TAIL=14 step compare_bert python3 bench/models/hf_e2e.py compare bert_base /tmp/hf /tmp/bert.sabre $b/sabre 1:128 8:128 3:77
for pdl in 1 0 1; do
  LIMIT=20 TAIL=3 step bench_bert_pdl${pdl}_b1 env SABRE_PDL=$pdl $b/sabre bench /tmp/bert.sabre --dim batch=1 --dim seq=128
  LIMIT=20 TAIL=3 step bench_bert_pdl${pdl}_b8 env SABRE_PDL=$pdl $b/sabre bench /tmp/bert.sabre --dim batch=8 --dim seq=128
done
LIMIT=60 TAIL=6 step latency_bert python3 bench/models/hf_e2e.py latency bert_base /tmp/hf /tmp/bert.sabre $b/sabre 128 1 8 32
LIMIT=100 TAIL=4 step compile_mnv2 $b/sabre compile /tmp/tv/mobilenet_v2.onnx -o /tmp/mnv2.sabre --dtype fp16 --dynamic batch=1..32 --no-tune
LIMIT=40 TAIL=6 step compare_mnv2 python3 bench/models/tv_e2e.py compare mobilenet_v2 /tmp/tv /tmp/mnv2.sabre $b/sabre 1 32
LIMIT=60 TAIL=5 step latency_mnv2 python3 bench/models/tv_e2e.py latency mobilenet_v2 /tmp/tv /tmp/mnv2.sabre $b/sabre 1 32
LIMIT=10 TAIL=20 step profile_mnv2_b32 $b/sabre bench /tmp/mnv2.sabre --dim batch=32 --profile
} > $OUT/main.log 2>&1
finish
exit 0
