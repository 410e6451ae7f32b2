#!/usr/bin/env bash
# One device call: the M=128 GEMM shapes (BERT-base at batch 1) with 16 candidates each, so the
# unordered split-K kernels are timed against the data-parallel ones and cuBLASLt (the DB comes back);
# BERT-base compiled with tuning from cold caches (target 240 s), compared with PyTorch fp16 and timed
# against eager and torch.compile, profiled at batch 1; ResNet-50 --no-tune compared, timed and
# profiled. $OUT/main.log, $OUT/logs.tgz and $OUT/g128.jsonl.gz come back.
# Usage on the GPU host: bash scripts/gpu/tuned_e2e_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-e2e} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
(python3 bench/models/export_hf.py /tmp/hf bert; python3 bench/models/export_tv.py /tmp/tv) > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=150 step build ninja -C $b -j16 sabre gemm_tune_bench
LIMIT=${G128_LIMIT:-170} TAIL=24 step gemm_m128 $b/gemm_tune_bench --m 128 --dtype f16 --top-k 16 --max-kernels 16 --db /tmp/g128.db
$b/sabre db export --db /tmp/g128.db -o $OUT/g128.jsonl > /dev/null 2>&1; gzip -f $OUT/g128.jsonl
wait $exp; tail -2 $LOGS/export.log
(timeout 150 $b/sabre compile /tmp/tv/resnet50.onnx -o /tmp/rn50.sabre --dtype fp16 --dynamic batch=1..32 --no-tune > $LOGS/compile_rn50.log 2>&1; echo "rc=$?" >> $LOGS/compile_rn50.log) &
rn=$!
rm -rf /tmp/cold && mkdir -p /tmp/cold
LIMIT=240 TAIL=12 step compile_bert_tuned_cold $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert_tuned.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --tune --db /tmp/cold/tuning.db --cache-dir /tmp/cold/kernels
wait $rn; tail -6 $LOGS/compile_rn50.log
LIMIT=90 TAIL=6 step latency_bert python3 bench/models/hf_e2e.py latency bert_base /tmp/hf /tmp/bert_tuned.sabre $b/sabre 128 1 8 32
LIMIT=15 TAIL=24 step profile_bert_b1 $b/sabre bench /tmp/bert_tuned.sabre --dim batch=1 --dim seq=128 --profile
LIMIT=40 TAIL=14 step compare_bert python3 bench/models/hf_e2e.py compare bert_base /tmp/hf /tmp/bert_tuned.sabre $b/sabre 1:128 8:128 32:128 3:77 2:9
LIMIT=40 TAIL=7 step compare_rn50 python3 bench/models/tv_e2e.py compare resnet50 /tmp/tv /tmp/rn50.sabre $b/sabre 1 32 7
LIMIT=60 TAIL=5 step latency_rn50 python3 bench/models/tv_e2e.py latency resnet50 /tmp/tv /tmp/rn50.sabre $b/sabre 1 32
LIMIT=10 TAIL=18 step profile_rn50_b32 $b/sabre bench /tmp/rn50.sabre --dim batch=32 --profile
LIMIT=10 TAIL=12 step profile_rn50_b1 $b/sabre bench /tmp/rn50.sabre --dim batch=1 --profile
} > $OUT/main.log 2>&1
finish
exit 0
