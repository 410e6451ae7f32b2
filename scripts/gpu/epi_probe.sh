#!/usr/bin/env bash
# One device call (2026-12-03, eighth session): where BERT's FFN1 bias+gelu(erf) epilogue time goes.
# The 4096x3072x768 GEMM measured 37.0 us with bias+gelu(erf), 31.4 with bias+gelu(tanh) and 29.1
# with bias alone (same pingpong 128x192 kernel). Variants of the generated source (written by
# scripts/gpu/epi_variants/make_variants.py from commit f2cfebb's emitted kernels; each says what it
# changes; call 1's coop and gelutanh kernels are that commit's `sabre kernels emit NAME`, to put
# beside them) are built with sabre's nvcc flags and timed
# side by side by bench/gemm_lib_bench (the tuner's measurement, interleaved rounds); then Nsight
# Compute's view of the bias and bias+gelu kernels (no clock control).
# Call 2 (CALL=2 ONLY=...): the degree-5 polynomial and beta-free EVT variants at M=4096 and 1024.
# Usage on the GPU host: [CALL=2 ONLY=regex] bash scripts/gpu/epi_probe.sh
set -u
OUT=${OUT:-/tmp/sabre-epi} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
V=scripts/gpu/epi_variants L=/tmp/epilibs; mkdir -p $L
python3 $V/make_variants.py
build_variant() {
  local f=$1 t0=$SECONDS
  nvcc -std=c++17 -O3 --expt-relaxed-constexpr -DNDEBUG -gencode arch=compute_90a,code=sm_90a \
    -I$CUTLASS_DIR/include -I$CUTLASS_DIR/tools/util/include -Iinclude -Xcompiler -fPIC -shared \
    -Xptxas -v -o $L/$(basename $f .cu).so $f > $LOGS/nvcc_$(basename $f .cu).log 2>&1
  echo "built $(basename $f .cu) rc=$? in $((SECONDS - t0)) s"
}
export -f build_variant; export L LOGS CUTLASS_DIR
(ls $V/*.cu | grep -E "${ONLY:-.}" | xargs -P 10 -I{} bash -c 'build_variant {}' > $LOGS/variants.log 2>&1) &
vpid=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=OFF
LIMIT=200 step build ninja -C $b -j6 gemm_lib_bench
wait $vpid; cat $LOGS/variants.log
grep -h "registers\|spill" $LOGS/nvcc_*.log | grep -i "device_kernel\|Used\|spill" | sort | uniq -c | head -30 > $LOGS/ptxas.log
P=sm90_ws_pingpong_tn_f16_f16_f32_128x192x64_c1x1_a8
G=$P\_bias_gelu
if [ "${CALL:-1}" = 1 ]; then
args="--m 4096 --n 3072 --k 768 --rounds 5"
LIMIT=120 TAIL=10 step gelu $b/gemm_lib_bench --epilogue bias_gelu $args $G=$L/$G.so $G=$L/x2alu.so $G=$L/epi64x64.so \
  sm90_ws_coop_tn_f16_f16_f32_256x128x64_c1x1_a8_bias_gelu=$L/sm90_ws_coop_tn_f16_f16_f32_256x128x64_c1x1_a8_bias_gelu.so \
  sm90_ws_coop_tn_f16_f16_f32_128x192x64_c1x1_a8_bias_gelu=$L/sm90_ws_coop_tn_f16_f16_f32_128x192x64_c1x1_a8_bias_gelu.so
LIMIT=60 TAIL=6 step bias $b/gemm_lib_bench --epilogue bias $args $P\_bias=$L/$P\_bias.so $G=$L/identity.so
LIMIT=60 TAIL=6 step gelutanh $b/gemm_lib_bench --epilogue bias_gelutanh $args $P\_bias_gelutanh=$L/$P\_bias_gelutanh.so
ncu_one() {  # ncu_one NAME EPI KERNEL LIB
  LIMIT=90 TAIL=4 step ncu_$1 ncu --clock-control none --target-processes all -k regex:device_kernel --launch-skip 30 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section InstructionStats --section SchedulerStats \
    --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats \
    $b/gemm_lib_bench --epilogue $2 --m 4096 --n 3072 --k 768 --rounds 1 $3=$4
}
ncu_one bias bias $P\_bias $L/$P\_bias.so
ncu_one gelu bias_gelu $G $L/$G.so
ncu_one gelutanh bias_gelutanh $P\_bias_gelutanh $L/$P\_bias_gelutanh.so
else
# Call 2: the degree-5 tail polynomial and an EVT without the beta*C term, alone and together.
for m in 4096 1024; do
  args="--m $m --n 3072 --k 768 --rounds 5"
  LIMIT=100 TAIL=8 step gelu_m$m $b/gemm_lib_bench --epilogue bias_gelu $args $G=$L/$G.so $G=$L/d5.so $G=$L/evt8.so \
    $G=$L/evt5.so $G=$L/evt5_64.so
  LIMIT=60 TAIL=5 step bias_m$m $b/gemm_lib_bench --epilogue bias $args $P\_bias=$L/$P\_bias.so $P\_bias=$L/bias_evt.so
done
fi
} > $OUT/main.log 2>&1
finish
exit 0
