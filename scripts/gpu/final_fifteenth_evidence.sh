#!/usr/bin/env bash
# The fifteenth session's last device call (2026-12-04), on the landed tree: outputs against PyTorch
# fp16 for BERT-base and GPT-2 small, and BERT-base's latency against eager and torch.compile in two
# rounds; the runtime's GPU tests (the native kernels' ran in this session's calls 2 and 3).
#  1. BERT-base compiled from bench/results/bert_db_v5_h200_2026-12-04.jsonl.gz, GPT-2 --no-tune (batch
#     1..32, seq 1..128), each with its kernel cache built on the workstation (.carry/bert_kcache.tgz,
#     .carry/gpt2_kcache.tgz; where a key misses the compile builds that kernel here).
#  2. hf_e2e.py compare for both at several (batch, seq), including ones between tuned buckets.
#  3. hf_e2e.py latency for BERT-base, seq 128, batch 1 / 8 / 32, --rounds 2.
# Usage on the GPU host: bash scripts/gpu/final_fifteenth_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-final15} LOGS=/tmp/steplogs4 DEADLINE=${DEADLINE:-570}; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit,clocks.max.sm --format=csv,noheader; date -u
(python3 bench/models/export_hf.py /tmp/hf bert; python3 bench/models/export_hf.py /tmp/hf gpt2) > $LOGS/export.log 2>&1 &
exp=$!
mkdir -p /tmp/w/kernels_gpt2 && tar xzf .carry/gpt2_kcache.tgz -C /tmp/w/kernels_gpt2
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=200 step build ninja -C $b -j16 sabre runtime_gemm_test runtime_session_test
LIMIT=60 TAIL=2 step runtime_gemm $b/tests/gpu/runtime_gemm_test
LIMIT=60 TAIL=2 step runtime_session $b/tests/gpu/runtime_session_test
compile_bert_from_db
LIMIT=240 TAIL=5 step compile_gpt2 $b/sabre compile /tmp/hf/gpt2.onnx -o /tmp/gpt2.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --no-tune --cache-dir /tmp/w/kernels_gpt2
LIMIT=60 TAIL=12 step compare_bert python3 bench/models/hf_e2e.py compare bert_base /tmp/hf /tmp/bert.sabre $b/sabre 32:128 24:100 1:128 8:128 3:77 2:9
LIMIT=80 TAIL=14 step compare_gpt2 python3 bench/models/hf_e2e.py compare gpt2 /tmp/hf /tmp/gpt2.sabre $b/sabre 1:128 4:64 3:77 8:100 32:128 24:100
LIMIT=200 TAIL=10 step latency_bert python3 bench/models/hf_e2e.py latency bert_base /tmp/hf /tmp/bert.sabre $b/sabre 128 --rounds 2 1 8 32
date -u
} > $OUT/main.log 2>&1
finish
exit 0
