#!/usr/bin/env bash
# One device call (2026-12-03, eighth session), after epi_evt_evidence.sh: the same-run A/B that call
# lacked. BERT-base from commit f2cfebb (template version 2, its tuning DB in bench/results) against
# this tree (version 3, the DB that call measured), both run by this tree's runtime in one latency
# run with PyTorch; and the GEMM GPU test on the epilogue forms the EVT change touches (that call's
# list was lost to a quoting slip). f2cfebb's tree comes as .carry/old_tree.tgz (git archive).
# Usage on the GPU host: bash scripts/gpu/epi_ab_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-ab} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
python3 bench/models/export_hf.py /tmp/hf bert > $LOGS/export.log 2>&1 &
exp=$!
mkdir -p /tmp/old && tar xzf .carry/old_tree.tgz -C /tmp/old
(cmake -S /tmp/old -B /tmp/b_old -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=OFF > $LOGS/old_build.log 2>&1 &&
 ninja -C /tmp/b_old -j8 sabre >> $LOGS/old_build.log 2>&1; echo "old build rc=$?" >> $LOGS/old_build.log) &
old=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=150 step build ninja -C $b -j8 sabre sabre_gemm_gpu_test
wait $old; tail -1 $LOGS/old_build.log; wait $exp; tail -1 $LOGS/export.log
mkdir -p /tmp/v2 /tmp/v3
gunzip -c bench/results/bert_db_h200_2026-12-03.jsonl.gz > /tmp/v2/db.jsonl; /tmp/b_old/sabre db import /tmp/v2/db.jsonl --db /tmp/v2/tuning.db | tail -1
gunzip -c bench/results/bert_db_v3_h200_2026-12-03.jsonl.gz > /tmp/v3/db.jsonl; $b/sabre db import /tmp/v3/db.jsonl --db /tmp/v3/tuning.db | tail -1
dims="--dtype fp16 --dynamic batch=1..32,seq=1..128 --tune"
(LIMIT=200 TAIL=4 step compile_v2 /tmp/b_old/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert_v2.sabre $dims --db /tmp/v2/tuning.db --cache-dir /tmp/v2/k) > $LOGS/cv2.out 2>&1 &
c2=$!
LIMIT=200 TAIL=4 step compile_v3 $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert_v3.sabre $dims --db /tmp/v3/tuning.db --cache-dir /tmp/v3/k
wait $c2; cat $LOGS/cv2.out
c=sm90_ws_coop_tn_f16_f16_f32_128x64x64_c1x1_a8 cb=sm90_ws_coop_tn_bf16_bf16_f32_128x64x64_c1x1_a8
cases="${c}_linear ${c}_relu ${c}_gelu ${c}_bias_gelu ${c}_bias_silu ${c}_relu6 ${c}_bias_res_relu ${c}_gelu_res ${c}_bias_gelu_res
 ${cb}_linear ${cb}_bias_gelu sm90_ws_splitku4_tn_f16_f16_f32_128x32x64_c1x1_a8_bias sm90_ws_streamk_tn_f16_f16_f32_128x128x64_c1x1_a8_bias
 sm90_ws_coop_tn_f32_f32_f32_128x64x32_c1x1_a4_bias_gelu sm80_tc_tn_f32_f32_f32_128x256x16_w64x64x16_s3_a4_bias_gelu"
LIMIT=150 TAIL=10 step gemm_cases $b/tests/gpu/sabre_gemm_gpu_test --quick -j 16 --work /tmp/gemm_evt $cases --out $OUT/gemm_evt.md
LIMIT=110 TAIL=6 step latency_ab python3 bench/models/hf_e2e.py latency bert_base /tmp/hf /tmp/bert_v2.sabre,/tmp/bert_v3.sabre $b/sabre 128 1 8 32
} > $OUT/main.log 2>&1
finish
exit 0
