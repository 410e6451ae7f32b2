#!/usr/bin/env bash
# One device call (2026-12-03, fifth session): native::stem_conv's GPU numerical test and timing
# beside the im2col it replaces (native_bench), the GPU tests of the runtime's CUDA status checks
# landed untested last session (native kernels, runtime session, runtime GEMM), and BERT-base with
# the 99-step plan (simplify_masks' third rewrite) tuned from the carried DB (warm: no timing) and
# --no-tune, timed against PyTorch in one run and compared.
# $OUT/main.log and $OUT/logs.tgz come back.
# Usage on the GPU host: bash scripts/gpu/stem_kernel_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-stemk} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; git log --oneline -1 2>/dev/null
python3 bench/models/export_hf.py /tmp/hf bert > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=150 step build ninja -C $b -j16 sabre native_kernels_test native_bench runtime_session_test runtime_gemm_test
LIMIT=60 TAIL=4 step stem_tests $b/tests/gpu/native_kernels_test StemConv
grep -E "^FAIL" $LOGS/stem_tests.log | head -20
LIMIT=40 TAIL=2 step native_bench $b/native_bench
grep -E "kernel|im2col|stem_conv|maxpool 3x3/2 NHWC \[B,112,112,64\]" $LOGS/native_bench.log
LIMIT=90 TAIL=3 step native_tests $b/tests/gpu/native_kernels_test
grep -E "^FAIL" $LOGS/native_tests.log | head -20
LIMIT=60 TAIL=3 step runtime_session $b/tests/gpu/runtime_session_test
LIMIT=120 TAIL=3 step runtime_gemm $b/tests/gpu/runtime_gemm_test
wait $exp; tail -1 $LOGS/export.log
mkdir -p /tmp/warm && gunzip -c .carry/bert_db.jsonl.gz > /tmp/warm/bert_db.jsonl
$b/sabre db import /tmp/warm/bert_db.jsonl --db /tmp/warm/tuning.db | tail -1
LIMIT=120 TAIL=8 step compile_bert_tuned $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert_tuned.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --tune --db /tmp/warm/tuning.db --cache-dir /tmp/warm/kernels
LIMIT=60 TAIL=3 step compile_bert_untuned $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --no-tune --cache-dir /tmp/warm/kernels
LIMIT=100 TAIL=6 step latency_bert python3 bench/models/hf_e2e.py latency bert_base /tmp/hf /tmp/bert_tuned.sabre,/tmp/bert.sabre $b/sabre 128 1 8 32
LIMIT=40 TAIL=14 step compare_bert python3 bench/models/hf_e2e.py compare bert_base /tmp/hf /tmp/bert_tuned.sabre $b/sabre 1:128 8:128 32:128 3:77 2:9
} > $OUT/main.log 2>&1
finish
exit 0
