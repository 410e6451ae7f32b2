#!/usr/bin/env bash
# One device call (prepared 2026-12-04, tenth session), after prefetch_evidence.sh: the L2 weight prefetch
# is on by default, so the other models must still match PyTorch with it, and a conv model shows whether
# prefetching conv filters pays. GPT-2 small and ResNet-50 compiled untuned (the analytic model picks;
# no DB is needed), compared with PyTorch fp16; ResNet-50 and GPT-2 timed with SABRE_PREFETCH=0 / 1,
# two rounds in opposite orders.
# Usage on the GPU host: bash scripts/gpu/prefetch_models_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-prefetch2} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
(python3 bench/models/export_tv.py /tmp/tv resnet50; python3 bench/models/export_hf.py /tmp/hf gpt2) > $LOGS/export.log 2>&1 &
exp=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=OFF
LIMIT=150 step build ninja -C $b -j16 sabre
wait $exp; tail -3 $LOGS/export.log
(LIMIT=240 TAIL=8 step compile_gpt2 $b/sabre compile /tmp/hf/gpt2.onnx -o /tmp/gpt2.sabre --dtype fp16 \
   --dynamic batch=1..8,seq=1..128 --no-tune -j 8) > $LOGS/cg.out 2>&1 &
cg=$!
LIMIT=240 TAIL=8 step compile_rn50 $b/sabre compile /tmp/tv/resnet50.onnx -o /tmp/rn50.sabre --dtype fp16 \
  --dynamic batch=1..32 --no-tune -j 8
wait $cg; cat $LOGS/cg.out
LIMIT=60 TAIL=8 step compare_rn50 python3 bench/models/tv_e2e.py compare resnet50 /tmp/tv /tmp/rn50.sabre $b/sabre 1 32 7
LIMIT=80 TAIL=8 step compare_gpt2 python3 bench/models/hf_e2e.py compare gpt2 /tmp/hf /tmp/gpt2.sabre $b/sabre 1:128 4:64 3:77 8:100
echo "== sabre bench A/B (gpu ms p50, 1000 runs each; rounds rotate the order)"
for r in 1 2; do
  case $r in 1) order="0 1";; 2) order="1 0";; esac
  for v in $order; do
    for m in "rn50 batch=1" "rn50 batch=32" "gpt2 batch=1 --dim seq=128" "gpt2 batch=8 --dim seq=128"; do
      set -- $m; a=$1; shift
      echo "round $r $v $a $1 $(SABRE_PREFETCH=$v timeout 30 $b/sabre bench /tmp/$a.sabre --dim $* --iters 1000 --no-clocks 2>&1 | grep -oE 'gpu ms +p50 [0-9.]+' | awk '{print $4}')"
    done
  done
done | tee $LOGS/ab.txt
$b/sabre bench /tmp/rn50.sabre --dim batch=32 --iters 10 | grep "l2 prefetch"
$b/sabre bench /tmp/gpt2.sabre --dim batch=8 --dim seq=128 --iters 10 | grep "l2 prefetch"
} > $OUT/main.log 2>&1
finish
exit 0
