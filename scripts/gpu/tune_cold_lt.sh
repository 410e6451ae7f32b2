#!/usr/bin/env bash
# One device call (2026-12-03, seventh session), after cublaslt_deploy_evidence.sh on the same
# (still warm) machine: issue 5's cold and warm `sabre tune` of BERT-base on this tree (cuBLASLt
# candidates now also record their deployable algorithm), then BERT-base's latency again, the tuned
# artifact that deploys cuBLASLt where it won against the CUTLASS-only one, against PyTorch.
# Usage on the GPU host: bash scripts/gpu/tune_cold_lt.sh
set -u
OUT=${OUT:-/tmp/sabre-tune-lt}; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=OFF
LIMIT=150 step build ninja -C $b -j16 sabre
[ -f /tmp/hf/bert_base.onnx ] || python3 bench/models/export_hf.py /tmp/hf bert > $OUT/export.log 2>&1
rm -rf /tmp/cold && mkdir -p /tmp/cold
tune=(env XDG_CACHE_HOME=/tmp/cold $b/sabre tune /tmp/hf/bert_base.onnx --dim batch=1..32 --dim seq=1..128 --db /tmp/cold/tune.db)
LIMIT=240 TAIL=14 step tune_cold "${tune[@]}"
TAIL=4 step tune_warm "${tune[@]}"
if [ -d /tmp/bert_tuned.sabre ] && [ -d /tmp/bert_cutlass.sabre ]; then
  LIMIT=110 TAIL=6 step latency_bert python3 bench/models/hf_e2e.py latency bert_base /tmp/hf /tmp/bert_tuned.sabre,/tmp/bert_cutlass.sabre $b/sabre 128 1 8 32
fi
} > $OUT/main.log 2>&1
finish
exit 0
