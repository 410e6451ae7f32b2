#!/usr/bin/env bash
# One device call (eleventh session, 2026-12-04): the LayerNorm's f32 copy of a model output
# (BERT-base's last_hidden_state without a cast step: 92 -> 91 steps) and the state of issue 6 at the
# end of the session.
#  1. GPU tests: native_kernels_test LayerNorm_* (with the f32 copy) and EmbedLayerNorm_*;
#     runtime_session_test, runtime_gemm_test.
#  2. BERT-base from the v3 DB: outputs against PyTorch fp16; latency against PyTorch in 3 rounds.
#  3. GPT-2 small, untuned: outputs against PyTorch fp16 (its lowering went through the same changes).
# Usage on the GPU host: bash scripts/gpu/final_eleventh_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-final11} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
(python3 bench/models/export_hf.py /tmp/hf bert; python3 bench/models/export_hf.py /tmp/hf gpt2) > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=150 step build ninja -C $b -j16 sabre runtime_session_test runtime_gemm_test native_kernels_test
mkdir -p /tmp/w && zcat bench/results/bert_db_v3_h200_2026-12-03.jsonl.gz > /tmp/w/db.jsonl
$b/sabre db import --db /tmp/w/tuning.db /tmp/w/db.jsonl
wait $exp; tail -2 $LOGS/export.log
LIMIT=200 TAIL=3 step compile_bert $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --tune --db /tmp/w/tuning.db --cache-dir /tmp/w/kernels -j 8 > $LOGS/compile.out 2>&1 &
cpid=$!
# GPT-2 compiles beside it (CPU only), so that nothing compiles while latency is measured.
LIMIT=240 TAIL=8 step compile_gpt2 $b/sabre compile /tmp/hf/gpt2.onnx -o /tmp/gpt2.sabre --dtype fp16 \
  --dynamic batch=1..8,seq=1..128 --no-tune --cache-dir /tmp/w/kernels_gpt2 -j 8 > $LOGS/compile_gpt2.out 2>&1 &
gpid=$!
LIMIT=60 TAIL=4 step native_ln $b/tests/gpu/native_kernels_test LayerNorm
grep -E "^FAIL|f32copy" $LOGS/native_ln.log | head -30
LIMIT=60 TAIL=2 step runtime_session $b/tests/gpu/runtime_session_test
LIMIT=60 TAIL=2 step runtime_gemm $b/tests/gpu/runtime_gemm_test
wait $cpid; cat $LOGS/compile.out | tail -4
grep -o '"f32_copy"' /tmp/bert.sabre/plan.json | wc -l
wait $gpid; tail -4 $LOGS/compile_gpt2.out
LIMIT=90 TAIL=14 step compare_bert python3 bench/models/hf_e2e.py compare bert_base /tmp/hf /tmp/bert.sabre $b/sabre 1:128 8:128 32:128 3:77 2:9
LIMIT=200 TAIL=12 step latency_bert python3 bench/models/hf_e2e.py latency bert_base /tmp/hf /tmp/bert.sabre $b/sabre 128 --rounds 3 1 8 32
LIMIT=80 TAIL=10 step compare_gpt2 python3 bench/models/hf_e2e.py compare gpt2 /tmp/hf /tmp/gpt2.sabre $b/sabre 1:128 4:64 3:77 8:100
} > $OUT/main.log 2>&1
finish
exit 0
