#!/usr/bin/env bash
# One device call (prepared 2026-12-04, tenth session): two probes, each a question the next change depends on.
#  1. How much of BERT-base's GEMM time at batch 1 and 8 is waiting on HBM for the weights? gemm_lib_bench
#     with the kernels the v3 DB deploys, operands rotated past L2 (as the tuner times) against --l2-hot (one
#     operand set, left in L2). A large difference would make prefetching the next GEMM's weights into L2,
#     during the kernels before it, worth building; a small one says the M=128 GEMMs are bound by their few
#     CTAs' own load rate, which only more CTAs (split-K) change.
#  2. Does the persistent scheduler's swizzle or raster order pay on issue 5's large shapes? CUTLASS's
#     defaults (swizzle 1, heuristic raster) are what every sabre kernel runs. The three deployed CUTLASS
#     winners there are rebuilt by scripts/gpu/swizzle/patch_swizzle.py to read SABRE_SWZ (swizzle size, then
#     M or N for the raster) and timed beside the unpatched build under SABRE_SWZ = 2, 4, 8, 1M and 1N.
# Kernels built ahead on the workstation come in .carry/kl.tgz (unpatched) and .carry/swz.tgz (patched).
# Usage on the GPU host: bash scripts/gpu/swizzle_l2_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-swz} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=OFF
LIMIT=150 step build ninja -C $b -j16 sabre gemm_lib_bench
P=sm90_ws_pingpong_tn_f16_f16_f32 C=sm90_ws_coop_tn_f16_f16_f32
LT2304=cublaslt_tn_f16_f16_f32_bias_algo66_t184_s35_k1_r0_w0_o6_i0_c5
LTR=cublaslt_tn_f16_f16_f32_bias_res_algo66_t27_s35_k1_r0_w0_o2_i0_c5
L=/tmp/kl; mkdir -p $L
[ -f .carry/kl.tgz ] && tar xzf .carry/kl.tgz -C $L
[ -f .carry/swz.tgz ] && tar xzf .carry/swz.tgz -C $L
kern="${P}_64x64x64_c1x1_a8_bias ${P}_64x64x64_c1x1_a8_bias_res ${P}_64x64x64_c1x1_a8_bias_gelu ${P}_64x96x64_c1x2_a8_bias_res
 ${C}_128x192x64_c1x1_a8_bias_gelu $LT2304 $LTR ${P}_128x192x64_c1x1_a8_bias ${C}_256x128x64_c1x2_a8_bias ${C}_128x256x64_c2x1_a8_bias"
missing=""; for k in $kern; do [ -f $L/$k.so ] || missing="$missing $k"; done
echo "kernels carried: $(ls $L/*.so | wc -l); to build:${missing:- none}"
[ -n "$missing" ] && LIMIT=200 TAIL=12 step kernels $b/sabre kernels build $missing -o $L -j 16
for k in ${P}_128x192x64_c1x1_a8_bias ${C}_256x128x64_c1x2_a8_bias ${C}_128x256x64_c2x1_a8_bias; do
  [ -f $L/swz_$k.so ] && continue
  $b/sabre kernels emit $k -o $L/$k.cu && python3 scripts/gpu/swizzle/patch_swizzle.py $L/$k.cu $L/swz_$k.cu &&
  nvcc -std=c++17 -O3 --expt-relaxed-constexpr -DNDEBUG -gencode arch=compute_90a,code=sm_90a -I$CUTLASS_DIR/include \
    -I$CUTLASS_DIR/tools/util/include -Iinclude -Xcompiler -fPIC -shared -o $L/swz_$k.so $L/swz_$k.cu &
done; wait
lib() { printf "%s=%s/%s.so " $1 $L $1; }
echo "== 1. rotated past L2 against --l2-hot (median of 3 rounds, us)"
l2() {  # EPI M N K KERNEL
  for mode in rotated l2hot; do
    flag=""; [ $mode = l2hot ] && flag=--l2-hot
    LIMIT=40 TAIL=1 step l2_${mode}_$1_$2x$3x$4 $b/gemm_lib_bench --epilogue $1 --m $2 --n $3 --k $4 --rounds 3 $flag $(lib $5)
  done
}
l2 bias 128 2304 768 ${P}_64x64x64_c1x1_a8_bias
l2 bias_res 128 768 768 ${P}_64x64x64_c1x1_a8_bias_res
l2 bias_gelu 128 3072 768 ${P}_64x64x64_c1x1_a8_bias_gelu
l2 bias_res 128 768 3072 ${P}_64x64x64_c1x1_a8_bias_res
l2 bias 1024 2304 768 $LT2304
l2 bias_res 1024 768 768 ${P}_64x96x64_c1x2_a8_bias_res
l2 bias_gelu 1024 3072 768 ${C}_128x192x64_c1x1_a8_bias_gelu
l2 bias_res 1024 768 3072 $LTR
echo "== 2. scheduler swizzle / raster (the unpatched build is the control in each run)"
swz() {  # M N K KERNEL
  for s in 2 4 8 1M 1N; do
    SABRE_SWZ=$s LIMIT=60 TAIL=2 step swz${s}_$1x$2x$3 $b/gemm_lib_bench --epilogue bias --m $1 --n $2 --k $3 --rounds 2 \
      $(lib $4) $4=$L/swz_$4.so
  done
}
swz 16384 2304 768 ${P}_128x192x64_c1x1_a8_bias
swz 4096 3072 768 ${P}_128x192x64_c1x1_a8_bias
swz 16384 768 3072 ${C}_128x256x64_c2x1_a8_bias
swz 4096 4096 4096 ${C}_256x128x64_c1x2_a8_bias
} > $OUT/main.log 2>&1
finish
exit 0
