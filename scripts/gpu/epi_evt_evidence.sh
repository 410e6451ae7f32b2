#!/usr/bin/env bash
# One device call (2026-12-03, eighth session): sm90 epilogues as EVT trees without LinComb's beta*C,
# gelu_erf16 in f16/bf16 gelu epilogues (template version 3).
#  1. The GEMM GPU test on a set of kernels covering every epilogue form the change touches (EVT with
#     and without bias and activation, the residual before and after it, split-K and stream-K, sm80
#     and f32 gelu) and the sm90 conv GPU test (its own list): CPU reference, outputs poisoned first.
#  2. BERT-base tuned from cold caches (the new template version leaves no usable DB), against
#     PyTorch eager and torch.compile in one run, and its outputs against PyTorch fp16.
# $OUT/main.log, $OUT/logs.tgz and the tuning DB come back.
# Usage on the GPU host: bash scripts/gpu/epi_evt_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-evt} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
python3 bench/models/export_hf.py /tmp/hf bert > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=150 step build ninja -C $b -j16 sabre sabre_gemm_gpu_test sabre_conv_sm90_gpu_test gemm_lib_bench
c=sm90_ws_coop_tn_f16_f16_f32_128x64x64_c1x1_a8 cb=sm90_ws_coop_tn_bf16_bf16_f32_128x64x64_c1x1_a8
cases="$c\_bias $c\_linear $c\_relu $c\_gelu $c\_bias_gelu $c\_gelutanh $c\_bias_silu $c\_relu6 $c\_bias_res $c\_bias_res_relu
 $c\_gelu_res $c\_bias_gelu_res $cb\_bias_gelu $cb\_linear $cb\_bias_relu6 sm90_ws_coop_tt_f16_f16_f32_128x64x64_c1x1_a8_bias_gelu
 sm90_ws_pingpong_tn_f16_f16_f32_128x192x64_c1x1_a8_bias_gelu sm90_ws_pingpong_tn_bf16_bf16_f32_128x192x64_c1x1_a8_bias
 sm90_ws_pingpong_tn_f16_f16_f32_64x64x64_c1x1_a8_bias sm90_ws_splitku4_tn_f16_f16_f32_128x32x64_c1x1_a8_bias
 sm90_ws_splitk4_tn_f16_f16_f32_128x64x64_c1x1_a8_bias_gelu sm90_ws_streamk_tn_f16_f16_f32_128x128x64_c1x1_a8_bias
 sm90_ws_coop_tn_f32_f32_f32_128x64x32_c1x1_a4_bias_gelu sm80_tc_tn_f16_f16_f32_128x256x32_w64x64x32_s3_a8_bias_gelu
 sm80_tc_tn_f32_f32_f32_128x256x16_w64x64x16_s3_a4_bias_gelu"
LIMIT=200 TAIL=10 step gemm_cases $b/tests/gpu/sabre_gemm_gpu_test --quick -j 16 --work /tmp/gemm_evt $cases --out $OUT/gemm_evt.md
wait $exp; tail -1 $LOGS/export.log
rm -rf /tmp/cold && mkdir -p /tmp/cold
LIMIT=220 TAIL=8 step compile_bert_tuned_cold $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert_tuned.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --tune --db /tmp/cold/tuning.db --cache-dir /tmp/cold/kernels
$b/sabre db export --db /tmp/cold/tuning.db -o $OUT/bert_db.jsonl > /dev/null 2>&1; gzip -f $OUT/bert_db.jsonl
grep -o '"kernel": *"[a-z0-9_]*gelu[a-z0-9_]*"' /tmp/bert_tuned.sabre/plan.json | sort | uniq -c
LIMIT=110 TAIL=6 step latency_bert python3 bench/models/hf_e2e.py latency bert_base /tmp/hf /tmp/bert_tuned.sabre $b/sabre 128 1 8 32
LIMIT=45 TAIL=8 step compare_bert python3 bench/models/hf_e2e.py compare bert_base /tmp/hf /tmp/bert_tuned.sabre $b/sabre 1:128 8:128 32:128 3:77 2:9
LIMIT=150 TAIL=4 step conv_sm90 $b/tests/gpu/sabre_conv_sm90_gpu_test -j 16 --work /tmp/conv_sm90
} > $OUT/main.log 2>&1
finish
exit 0
