#!/usr/bin/env bash
# One device call (2026-12-03, seventh session): cuBLASLt algorithms deployed as kernels.
# The GEMM GPU test's deployed-cuBLASLt cases (an algorithm fixed from the heuristic at one shape,
# emitted, compiled and run through the kernel ABI at every test shape against the CPU reference,
# outputs poisoned first); BERT-base tuned from this repo's DB (its cuBLASLt rows are measured again
# to learn their algorithms), then the same DB with --no-cublaslt, both against PyTorch in one run,
# and the tuned artifact against PyTorch fp16. $OUT/main.log, $OUT/logs.tgz and the DB come back.
# Usage on the GPU host: bash scripts/gpu/cublaslt_deploy_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-lt} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; git log --oneline -1 2>/dev/null
python3 bench/models/export_hf.py /tmp/hf bert > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=150 step build ninja -C $b -j16 sabre sabre_gemm_gpu_test gemm_tune_bench
deployed=$($b/tests/gpu/sabre_gemm_gpu_test --list --quick | grep '^deploy:')
LIMIT=150 TAIL=20 step gemm_lt_deployed $b/tests/gpu/sabre_gemm_gpu_test --quick --work /tmp/gemm_lt \
  $deployed cublaslt_tn_f16_f16_f32_bias_res --out $OUT/gemm_lt_deployed.md
wait $exp; tail -1 $LOGS/export.log
mkdir -p /tmp/warm && gunzip -c bench/results/bert_db_h200_2026-12-03.jsonl.gz > /tmp/warm/bert_db.jsonl
$b/sabre db import /tmp/warm/bert_db.jsonl --db /tmp/warm/tuning.db | tail -1
LIMIT=200 TAIL=8 step compile_bert_tuned $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert_tuned.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --tune --db /tmp/warm/tuning.db --cache-dir /tmp/warm/kernels
grep -o 'cublaslt_[a-z0-9_]*' /tmp/bert_tuned.sabre/plan.json | sort | uniq -c
LIMIT=60 TAIL=3 step compile_bert_cutlass $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert_cutlass.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --tune --no-cublaslt --db /tmp/warm/tuning.db --cache-dir /tmp/warm/kernels
$b/sabre db export --db /tmp/warm/tuning.db -o $OUT/bert_db.jsonl > /dev/null && gzip -f $OUT/bert_db.jsonl
LIMIT=110 TAIL=6 step latency_bert python3 bench/models/hf_e2e.py latency bert_base /tmp/hf /tmp/bert_tuned.sabre,/tmp/bert_cutlass.sabre $b/sabre 128 1 8 32
LIMIT=45 TAIL=8 step compare_bert python3 bench/models/hf_e2e.py compare bert_base /tmp/hf /tmp/bert_tuned.sabre $b/sabre 1:128 8:128 32:128 3:77 2:9
LIMIT=15 TAIL=12 step profile_bert_b8 $b/sabre bench /tmp/bert_tuned.sabre --dim batch=8 --dim seq=128 --profile
} > $OUT/main.log 2>&1
finish
exit 0
