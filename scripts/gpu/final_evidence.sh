#!/usr/bin/env bash
# One device call: the reworked attention and cast kernels' GPU tests; warm `sabre tune` of
# BERT-base against the tuning DB an earlier call measured (.carry/tune_db.jsonl); BERT-base with
# --fuse-attention compiled from that DB, compared with PyTorch fp16, timed against eager and
# torch.compile and profiled; then the GEMM tuning benchmark, resuming from .carry/bench_db.jsonl, in
# the time left. Each step's limit is cut to what is left of DEADLINE (default 570 s); the summary
# ($OUT/main.log), every log ($OUT/logs.tgz) and the bench DB ($OUT/bench_db.jsonl) come back.
# Usage on the GPU host: bash scripts/gpu/final_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-final} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 bench/models/export_hf.py /tmp/hf bert > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=240 step build ninja -C $b -j16 sabre native_kernels_test gemm_tune_bench
TAIL=24 step attention_cast bash -c "$b/tests/gpu/native_kernels_test Attention; $b/tests/gpu/native_kernels_test Cast"
wait $exp; tail -1 $LOGS/export.log
rm -f /tmp/tune.db; $b/sabre db import .carry/tune_db.jsonl --db /tmp/tune.db
TAIL=4 step tune_warm $b/sabre tune /tmp/hf/bert_base.onnx --dim batch=1..32 --dim seq=1..128 --db /tmp/tune.db
LIMIT=200 TAIL=8 step compile_fused $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert_fused.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --db /tmp/tune.db --fuse-attention
LIMIT=60 TAIL=12 step compare_fused python3 bench/models/hf_e2e.py compare bert_base /tmp/hf /tmp/bert_fused.sabre $b/sabre 1:128 8:128 32:128 3:77 5:100 2:9
LIMIT=150 TAIL=6 step latency_fused python3 bench/models/hf_e2e.py latency bert_base /tmp/hf /tmp/bert_fused.sabre $b/sabre 128 1 8 32
for bs in 1 32; do
  LIMIT=30 TAIL=30 step profile_fused_b$bs $b/sabre bench /tmp/bert_fused.sabre --dim batch=$bs --dim seq=128 --profile
done
[ -f .carry/bench_db.jsonl ] && $b/sabre db import .carry/bench_db.jsonl --db /tmp/bench.db
LIMIT=600 TAIL=90 step gemm_bench $b/gemm_tune_bench --top-k ${TOPK:-4} --db /tmp/bench.db
$b/sabre db export --db /tmp/bench.db -o "$OUT/bench_db.jsonl"
} > $OUT/main.log 2>&1
finish
exit 0
