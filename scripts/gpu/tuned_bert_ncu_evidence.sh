#!/usr/bin/env bash
# One device call (2026-12-03, fourth session): issue 6's tuned BERT-base with this session's kernels
# (attention rework, gelu_erf.h, N=96/192 tiles), and where its time goes without event overhead.
#  1. BERT-base compiled with tuning from cold caches (issue 6: at most 4 minutes) and --no-tune;
#     both timed in one run against PyTorch eager and torch.compile, the tuned one compared.
#  2. Per-kernel GPU time of one run at batch 1 and 32 under Nsight Compute (gpu__time_duration, no
#     clock control), next to sabre bench --profile (events between steps), and the plan's prologue
#     and attention steps: which kernels the gap to issue 6's targets is in.
#  3. ResNet-50 --no-tune, the same per-kernel view at batch 1 and 32.
# $OUT/main.log, $OUT/logs.tgz and the tuning DB ($OUT/bert_db.jsonl.gz) come back.
# Usage on the GPU host: bash scripts/gpu/tuned_bert_ncu_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-tunedbert} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
(python3 bench/models/export_hf.py /tmp/hf bert; python3 bench/models/export_tv.py /tmp/tv) > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=150 step build ninja -C $b -j16 sabre
wait $exp; tail -3 $LOGS/export.log
rm -rf /tmp/cold && mkdir -p /tmp/cold
LIMIT=240 TAIL=8 step compile_bert_tuned_cold $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert_tuned.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --tune --db /tmp/cold/tuning.db --cache-dir /tmp/cold/kernels
$b/sabre db export --db /tmp/cold/tuning.db -o $OUT/bert_db.jsonl > /dev/null 2>&1; gzip -f $OUT/bert_db.jsonl
LIMIT=60 TAIL=3 step compile_bert_untuned $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert.sabre --dtype fp16 \
  --dynamic batch=1..32,seq=1..128 --no-tune --cache-dir /tmp/cold/kernels
python3 - > $LOGS/bert_plan.log 2>&1 <<'EOF'
import json
p = json.load(open('/tmp/bert_tuned.sabre/plan.json'))
for i, s in enumerate(p['steps']):
    if i < 24 or s['op'] == 'attention' and i < 40:
        print(i, s['op'], s['name'], s['inputs'], s['outputs'], json.dumps(s.get('params', {}))[:700])
EOF
LIMIT=100 TAIL=6 step latency_bert python3 bench/models/hf_e2e.py latency bert_base /tmp/hf /tmp/bert_tuned.sabre,/tmp/bert.sabre $b/sabre 128 1 8 32
LIMIT=40 TAIL=14 step compare_bert python3 bench/models/hf_e2e.py compare bert_base /tmp/hf /tmp/bert_tuned.sabre $b/sabre 1:128 8:128 32:128 3:77 2:9
for bs in 1 8 32; do
  LIMIT=15 TAIL=2 step profile_bert_b$bs $b/sabre bench /tmp/bert_tuned.sabre --dim batch=$bs --dim seq=128 --profile
done
ncu_run() {  # ncu_run NAME ARTIFACT DIMS...: one run, every kernel's GPU time
  local name=$1 art=$2; shift 2
  LIMIT=90 TAIL=2 step $name ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
    $b/sabre bench $art "$@" --warmup 1 --iters 1 --no-graphs
}
ncu_run ncu_bert_b1 /tmp/bert_tuned.sabre --dim batch=1 --dim seq=128
ncu_run ncu_bert_b32 /tmp/bert_tuned.sabre --dim batch=32 --dim seq=128
LIMIT=90 TAIL=3 step compile_rn50 $b/sabre compile /tmp/tv/resnet50.onnx -o /tmp/rn50.sabre --dtype fp16 --dynamic batch=1..32 --no-tune
ncu_run ncu_rn50_b1 /tmp/rn50.sabre --dim batch=1
ncu_run ncu_rn50_b32 /tmp/rn50.sabre --dim batch=32
for bs in 1 32; do
  LIMIT=15 TAIL=2 step profile_rn50_b$bs $b/sabre bench /tmp/rn50.sabre --dim batch=$bs --profile
done
} > $OUT/main.log 2>&1
finish
exit 0
