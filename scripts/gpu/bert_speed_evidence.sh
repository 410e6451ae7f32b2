#!/usr/bin/env bash
# (Historical: SABRE_ATTN_V1 and the previous attention kernel were removed after this call measured them.)
# One device call (2026-12-03 third session): the reworked attention kernel (A/B against the
# previous one, SABRE_ATTN_V1=1), gelu(erf) epilogues through gelu_erf.h instead of erff, sm90 GEMM
# tiles with N = 96/192, and the warp-per-pixels im2col. GPU tests first (native kernels, the new
# GEMM kernels and gelu epilogues against the CPU reference), native_bench, then BERT-base --no-tune
# compared with PyTorch fp16, timed against eager and torch.compile (and with SABRE_ATTN_V1=1) and
# profiled; the M=1024 GEMMs against cuBLASLt (the stem's im2col: native_bench).
# $OUT/main.log and $OUT/logs.tgz come back.
# Usage on the GPU host: bash scripts/gpu/bert_speed_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-bert} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
(python3 bench/models/export_hf.py /tmp/hf bert) > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=200 step build ninja -C $b -j16 sabre native_kernels_test native_bench sabre_gemm_gpu_test gemm_tune_bench
# The GEMM cases compile their kernels (most of their time) while the native tests and BERT run.
($b/tests/gpu/sabre_gemm_gpu_test -j 6 --work /tmp/gk --quick \
  sm90_ws_pingpong_tn_f16_f16_f32_64x96x64_c1x2_a8_bias sm90_ws_pingpong_tn_f16_f16_f32_128x96x64_c1x1_a8_bias \
  sm90_ws_pingpong_tn_f16_f16_f32_128x192x64_c1x1_a8_bias sm90_ws_pingpong_tn_f16_f16_f32_128x192x64_c1x1_a8_bias_res \
  sm90_ws_pingpong_tn_f16_f16_f32_128x192x64_c1x1_a8_bias_gelu_res sm90_ws_coop_tn_f16_f16_f32_128x192x64_c1x1_a8_bias \
  sm90_ws_pingpong_tt_f16_f16_f32_128x96x64_c1x1_a8_bias_gelu sm90_ws_pingpong_tn_bf16_bf16_f32_128x128x64_c1x1_a8_bias_gelu \
  sm80_tc_tn_f16_f16_f32_64x64x32_w32x32x32_s5_a8_bias_gelu > $LOGS/gemm_cases.log 2>&1; echo "rc=$?" >> $LOGS/gemm_cases.log) &
gk=$!
TAIL=3 step native_tests $b/tests/gpu/native_kernels_test
grep -E "FAIL" $LOGS/native_tests.log | head -20
LIMIT=90 TAIL=70 step native_bench $b/native_bench
wait $exp; tail -3 $LOGS/export.log
LIMIT=150 TAIL=6 step compile_bert $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --no-tune
LIMIT=40 TAIL=14 step compare_bert python3 bench/models/hf_e2e.py compare bert_base /tmp/hf /tmp/bert.sabre $b/sabre 1:128 8:128 32:128 3:77 2:9
LIMIT=90 TAIL=6 step latency_bert python3 bench/models/hf_e2e.py latency bert_base /tmp/hf /tmp/bert.sabre $b/sabre 128 1 8 32
for bs in 1 8 32; do
  SABRE_ATTN_V1=1 LIMIT=15 TAIL=3 step bench_bert_attnv1_b$bs $b/sabre bench /tmp/bert.sabre --dim batch=$bs --dim seq=128
  LIMIT=15 TAIL=3 step bench_bert_b$bs $b/sabre bench /tmp/bert.sabre --dim batch=$bs --dim seq=128
done
LIMIT=15 TAIL=24 step profile_bert_b32 $b/sabre bench /tmp/bert.sabre --dim batch=32 --dim seq=128 --profile
LIMIT=15 TAIL=24 step profile_bert_b8 $b/sabre bench /tmp/bert.sabre --dim batch=8 --dim seq=128 --profile
wait $gk; tail -14 $LOGS/gemm_cases.log
LIMIT=170 TAIL=14 step gemm_m1024 $b/gemm_tune_bench --m 1024 --dtype f16 --top-k 4 --max-kernels 6 --db /tmp/g1024.db
} > $OUT/main.log 2>&1
$b/sabre db export --db /tmp/g1024.db -o $OUT/g1024.jsonl > /dev/null 2>&1; gzip -f $OUT/g1024.jsonl
finish
exit 0
