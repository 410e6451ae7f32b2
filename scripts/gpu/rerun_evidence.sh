#!/usr/bin/env bash
# One device call for what the 2026-12-02 sessions left unmeasured, in priority order:
#  1. first GPU runs: runtime_session_test (ExecutionContext::profile) and native_bench (attention
#     and cast timed alone; attention took 41 us per BERT-base layer inside the model);
#  2. issue 7: ResNet-50 and MobileNetV2 re-exported with BatchNorm variances calibrated (means 0),
#     compared with PyTorch fp16 and fp32, ResNet-50 timed against eager and torch.compile;
#  3. issue 5: `sabre tune` of BERT-base from cold caches with the workload set sabre compile tunes
#     (74 points), then warm;
#  4. issue 5: the GEMM benchmark resumed from the committed DB (one shape left), with its summary.
# Each step's limit is cut to what is left of DEADLINE (570 s); $OUT/main.log, $OUT/logs.tgz and the
# bench DB ($OUT/bench_db.jsonl) come back. Usage on the GPU host: bash scripts/gpu/rerun_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-rerun} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
(python3 bench/models/export_tv.py /tmp/tv; python3 bench/models/export_hf.py /tmp/hf bert) > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=240 step build ninja -C $b -j16 sabre gemm_tune_bench native_bench runtime_session_test
TAIL=3 step runtime_session $b/tests/gpu/runtime_session_test
TAIL=20 step native_bench $b/native_bench
wait $exp; tail -3 $LOGS/export.log
LIMIT=120 TAIL=6 step compile_rn50 $b/sabre compile /tmp/tv/resnet50.onnx -o /tmp/rn50.sabre --dtype fp16 --dynamic batch=1..32 --no-tune
LIMIT=60 TAIL=7 step compare_rn50 python3 bench/models/tv_e2e.py compare resnet50 /tmp/tv /tmp/rn50.sabre $b/sabre 1 32 7
LIMIT=60 TAIL=6 step compile_mnv2 $b/sabre compile /tmp/tv/mobilenet_v2.onnx -o /tmp/mnv2.sabre --dtype fp16 --dynamic batch=1..32 --no-tune
LIMIT=60 TAIL=6 step compare_mnv2 python3 bench/models/tv_e2e.py compare mobilenet_v2 /tmp/tv /tmp/mnv2.sabre $b/sabre 1 32
LIMIT=120 TAIL=5 step latency_rn50 python3 bench/models/tv_e2e.py latency resnet50 /tmp/tv /tmp/rn50.sabre $b/sabre 1 32
LIMIT=30 TAIL=25 step profile_rn50_b32 $b/sabre bench /tmp/rn50.sabre --dim batch=32 --profile
rm -rf ~/.cache/sabre /tmp/tune.db
tune=($b/sabre tune /tmp/hf/bert_base.onnx --dim batch=1..32 --dim seq=1..128 --db /tmp/tune.db)
LIMIT=300 TAIL=8 step tune_cold "${tune[@]}"
TAIL=3 step tune_warm "${tune[@]}"
zcat bench/results/gemm_tune_db_h200_2026-12-02.jsonl.gz > /tmp/bench_db.jsonl
$b/sabre db import /tmp/bench_db.jsonl --db /tmp/bench.db
LIMIT=600 TAIL=12 step gemm_bench $b/gemm_tune_bench --top-k 4 --db /tmp/bench.db
$b/sabre db export --db /tmp/bench.db -o "$OUT/bench_db.jsonl"
} > $OUT/main.log 2>&1
finish
exit 0
