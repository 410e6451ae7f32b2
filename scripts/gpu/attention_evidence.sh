#!/usr/bin/env bash
# One device call for the reworked fused attention (mma.sync, online softmax) and the joined Q/K/V
# projection (merge_qkv): the native kernels' GPU tests (the attention's printed); native_bench (stream and graph-replay
# times); BERT-base compiled --no-tune with --fuse-attention (the analytic picks, which the tuner's
# table puts within 2.4% of the tuned ones), compared with PyTorch fp16, timed against eager and
# torch.compile in the same run, profiled at batch 1 and 32; the unfused plan timed alone; the new
# split-K GEMM kernels' correctness tests.
# Each step's limit is cut to what is left of DEADLINE (570 s); $OUT/main.log and $OUT/logs.tgz come
# back. Usage on the GPU host: bash scripts/gpu/attention_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-attn} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
git log -1 --format='commit %h %s' 2>/dev/null | cut -c1-100
python3 bench/models/export_hf.py /tmp/hf bert > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=240 step build ninja -C $b -j16 sabre native_kernels_test native_bench sabre_gemm_gpu_test ${EXTRA_TARGETS:-}
TAIL=2 step native_tests $b/tests/gpu/native_kernels_test
grep -E "Attention|FAIL" $LOGS/native_tests.log | head -40
TAIL=26 step native_bench $b/native_bench
wait $exp; tail -1 $LOGS/export.log
dyn=(--dtype fp16 --dynamic batch=1..32,seq=1..128 --no-tune)
LIMIT=150 TAIL=7 step compile_fused $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert_fused.sabre "${dyn[@]}" --fuse-attention
LIMIT=60 TAIL=14 step compare_fused python3 bench/models/hf_e2e.py compare bert_base /tmp/hf /tmp/bert_fused.sabre $b/sabre 1:128 8:128 32:128 3:77 5:100 2:9
LIMIT=120 TAIL=6 step latency python3 bench/models/hf_e2e.py latency bert_base /tmp/hf /tmp/bert_fused.sabre $b/sabre 128 1 8 32
for bs in 1 32; do
  LIMIT=20 TAIL=22 step profile_fused_b$bs $b/sabre bench /tmp/bert_fused.sabre --dim batch=$bs --dim seq=128 --profile
done
# The unfused plan with the same analytic picks, for the difference the fusion makes.
LIMIT=130 TAIL=4 step compile_plain $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert_plain.sabre "${dyn[@]}"
for bs in 1 8 32; do
  LIMIT=20 TAIL=3 step bench_plain_b$bs $b/sabre bench /tmp/bert_plain.sabre --dim batch=$bs --dim seq=128
done
# Split-K GEMM kernels (new): correctness of each epilogue kind, workspace checks.
LIMIT=200 TAIL=12 step splitk_gemm $b/tests/gpu/sabre_gemm_gpu_test -j 16 --work /tmp/gk --quick \
  sm90_ws_splitk4_tn_f16_f16_f32_128x64x64_c1x1_a8_linear sm90_ws_splitk4_tn_f16_f16_f32_128x64x64_c1x1_a8_bias_gelu \
  sm90_ws_splitk4_tn_f16_f16_f32_128x64x64_c1x1_a8_bias_res sm90_ws_splitk4_tn_f16_f16_f32_128x64x64_c1x1_a8_bias_gelu_res \
  sm90_ws_streamk_tn_f16_f16_f32_128x128x64_c1x1_a8_bias
${EXTRA_STEPS:-true}
} > $OUT/main.log 2>&1
finish
exit 0
