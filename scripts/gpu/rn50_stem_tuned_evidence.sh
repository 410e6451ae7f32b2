#!/usr/bin/env bash
# One device call (2026-12-03, fourth session, the last of its device time): issue 7 on ResNet-50.
#  1. The few-channels sm80 conv kernels' GPU numerical test (sabre_conv_gpu_test on FEWCH_KERNELS),
#     in the background while the untuned artifacts compile.
#  2. The RGB stem A/B, untuned, same run: --stem im2col (im2col step + GEMM) against --stem conv (the
#     channel-padded 7x7 conv on the few-channels kernels), sabre bench p50 at batch 1 and 32.
#  3. ResNet-50 tuned from cold caches with the faster stem at batch 32 (--top-k 2), compared with
#     PyTorch fp16, timed against eager and torch.compile next to the untuned artifact of that stem,
#     profiled at batch 1 and 32. The tuning DB comes back ($OUT/rn50_db.jsonl.gz).
# $OUT/main.log and $OUT/logs.tgz come back.
# Usage on the GPU host: bash scripts/gpu/rn50_stem_tuned_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-rn50stem} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
FEWCH_KERNELS=${FEWCH_KERNELS:-$(grep -oE '"sm80_conv_fprop_few_channels_[a-z0-9_]+"' tests/gpu/conv_gpu_test.cpp | tr -d '"' | sort -u)}
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
python3 bench/models/export_tv.py /tmp/tv > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=150 step build ninja -C $b -j16 sabre sabre_conv_gpu_test
(timeout 200 $b/tests/gpu/sabre_conv_gpu_test -j 4 --work /tmp/convfc $FEWCH_KERNELS > $LOGS/fewch_kernels.log 2>&1;
 echo "rc=$?" >> $LOGS/fewch_kernels.log) &
fc=$!
wait $exp; tail -2 $LOGS/export.log
mkdir -p /tmp/k
for stem in im2col conv; do
  LIMIT=120 TAIL=4 step compile_rn50_$stem $b/sabre compile /tmp/tv/resnet50.onnx -o /tmp/rn50_$stem.sabre --dtype fp16 \
    --dynamic batch=1..32 --no-tune --stem $stem -j 12 --cache-dir /tmp/k
done
grep -E "stem|im2col|few" $LOGS/compile_rn50_conv.log | head -5
wait $fc; echo "== fewch_kernels"; grep -E "^FAIL|kernels built|rc=" $LOGS/fewch_kernels.log | head -20
best=im2col best_us=1e9
for stem in im2col conv; do
  for bs in 1 32; do
    LIMIT=20 TAIL=3 step bench_${stem}_b$bs $b/sabre bench /tmp/rn50_$stem.sabre --dim batch=$bs --profile
    grep -E "p50|conv1|im2col|nchw_to_nhwc" $LOGS/bench_${stem}_b$bs.log | head -4
  done
  us=$(awk '/p50/ {print $4}' $LOGS/bench_${stem}_b32.log)
  if [ -n "$us" ] && awk -v a="$us" -v b="$best_us" 'BEGIN{exit !(a < b)}'; then best=$stem best_us=$us; fi
done
echo "stem for tuning: $best (batch-32 p50 $best_us ms)"
rm -rf /tmp/cold && mkdir -p /tmp/cold
LIMIT=300 TAIL=10 step compile_rn50_tuned $b/sabre compile /tmp/tv/resnet50.onnx -o /tmp/rn50_tuned.sabre --dtype fp16 \
  --dynamic batch=1..32 --tune --top-k 2 --stem $best --db /tmp/cold/tuning.db --cache-dir /tmp/cold/kernels
$b/sabre db export --db /tmp/cold/tuning.db -o $OUT/rn50_db.jsonl > /dev/null 2>&1; gzip -f $OUT/rn50_db.jsonl
LIMIT=70 TAIL=5 step latency_rn50 python3 bench/models/tv_e2e.py latency resnet50 /tmp/tv /tmp/rn50_tuned.sabre,/tmp/rn50_$best.sabre $b/sabre 1 32
LIMIT=40 TAIL=7 step compare_rn50_tuned python3 bench/models/tv_e2e.py compare resnet50 /tmp/tv /tmp/rn50_tuned.sabre $b/sabre 1 32 7
for bs in 1 32; do
  LIMIT=10 TAIL=3 step profile_rn50_b$bs $b/sabre bench /tmp/rn50_tuned.sabre --dim batch=$bs --profile
done
} > $OUT/main.log 2>&1
finish
exit 0
