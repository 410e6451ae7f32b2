#!/usr/bin/env bash
# One device call for issue 5's evidence: build, export BERT-base on the host, `sabre tune` it from
# cold caches and again warm, then the GEMM tuning benchmark for one dtype (DTYPE, default f16)
# in the time left. Logs go to $OUT. Usage on the GPU host: bash scripts/gpu/tune_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-tune}; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
b=/tmp/b
T0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=OFF
LIMIT=200 step build ninja -C $b -j16 sabre gemm_tune_bench
step export python3 bench/models/export_hf.py /tmp/hf bert
rm -rf ~/.cache/sabre /tmp/tune.db
tune=($b/sabre tune /tmp/hf/bert_base.onnx --dim batch=1..32 --dim seq=1..512 --db /tmp/tune.db)
LIMIT=330 TAIL=40 step tune_cold "${tune[@]}"
TAIL=12 step tune_warm "${tune[@]}"
$b/sabre db export --db /tmp/tune.db -o "$OUT/tune_db.jsonl" > /dev/null 2>&1
left=$(( ${BUDGET:-560} - (SECONDS - T0) ))
echo "== $left s left for the GEMM benchmark"
if [ $left -gt 60 ]; then
  LIMIT=$left TAIL=60 step gemm_bench_${DTYPE:-f16} $b/gemm_tune_bench --dtype ${DTYPE:-f16} --top-k ${TOPK:-6} --db /tmp/bench.db
fi
exit 0
