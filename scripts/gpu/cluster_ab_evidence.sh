#!/usr/bin/env bash
# One device call (prepared 2026-12-03, ninth session; run 2026-12-04, tenth): do 2x1 and 2x2 clusters
# close the gap to cuBLASLt at M=1024, K=3072? Outcome: no, 2x2 lost at every shape timed, by up to
# 1.5x (bench/results/cluster_ab_h200_2026-12-04.txt); no catalog rows were added.
#  Why: at 1024x768x3072 (BERT-base's FFN2 at batch 8; issue 5's worst shape, 0.895-0.912 for CUTLASS)
#  cuBLASLt's first choice is a 64x96 tile (its 96x64) with a cluster of 2 along M (its c5), 10.07 us,
#  against our 64x96 clustered along N, 11.54. In 64x96 tiles (128 of them) the L2 reads are
#  128 * 3072 * 2 B * (64 / cn + 96 / cm): 101 MB at 1x2, 88 at 2x1, 63 at 2x2; at 11 TB/s that floor
#  alone is 9.1 / 8.0 / 5.7 us, so the kernel is L2-bound and 2x2 should take 1-2 us off.
#  Prediction (tune/rank.cpp's model, which put the 1x2 kernel at 11.65 us against 11.54 measured, and
#  64x96 c1x2 at 1024x2304x768 at 9.36 against 9.34): c2x1 10.5 us (cuBLASLt's analogue measured 10.07),
#  c2x2 9.2; at 1024x2304x768 c2x2 7.6 against 8.79 for the tuned 128x96 and 8.65 for cuBLASLt; at
#  1024x3072x768 c2x2 9.3 against 9.51 for the tuned coop 128x192. Every cuBLASLt first choice at M=1024
#  in the v3 DB has its cluster of 2 along our M (c5).
#  1. The GEMM GPU test (CPU reference, outputs poisoned) on the 2x1 and 2x2 kernels.
#  2. gemm_lib_bench at 1024x768x3072 and 1024x768x768 (bias) and 1024x768x3072 (bias_res, FFN2's form):
#     the catalog's 64x96 c1x2 and 64x128 c1x2 against 64x96 c2x1 / c2x2, 64x128 c2x2 and cuBLASLt's
#     deployed first choice; at 1024x2304x768 and 1024x3072x768 (bias) the tuned CUTLASS winner, the
#     2x2 kernels and cuBLASLt's first choice; interleaved rounds.
#  3. Issue 5's large shapes (8192^3, 4096^3, 16384x768x3072, 2048x11008x4096), where cuBLASLt's first
#     choice still won: the deployed CUTLASS winner against its 2x2 form.
# Usage on the GPU host: bash scripts/gpu/cluster_ab_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-cluster} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=150 step build ninja -C $b -j16 sabre gemm_lib_bench sabre_gemm_gpu_test
P=sm90_ws_pingpong_tn_f16_f16_f32
LT=cublaslt_tn_f16_f16_f32_bias_algo66_t27_s35_k1_r0_w0_o2_i0_c5
LT2304=cublaslt_tn_f16_f16_f32_bias_algo66_t184_s35_k1_r0_w0_o6_i0_c5
LT3072=cublaslt_tn_f16_f16_f32_bias_algo66_t31_s35_k1_r0_w0_o7_i0_c5
C=sm90_ws_coop_tn_f16_f16_f32
LTR=cublaslt_tn_f16_f16_f32_bias_res_algo66_t27_s35_k1_r0_w0_o2_i0_c5
LT24=cublaslt_tn_f16_f16_f32_bias_algo66_t24_s35_k1_r0_w0_o7_i0_c5
LT209=cublaslt_tn_f16_f16_f32_bias_algo66_t209_s35_k1_r0_w0_o4_i0_c3
kern="${P}_64x96x64_c1x2_a8_bias ${P}_64x96x64_c2x1_a8_bias ${P}_64x96x64_c2x2_a8_bias ${P}_64x128x64_c1x2_a8_bias
 ${P}_64x128x64_c2x2_a8_bias ${P}_64x128x64_c1x2_a8_bias_res ${P}_64x96x64_c2x2_a8_bias_res $LT $LTR
 ${P}_128x96x64_c1x1_a8_bias ${P}_128x96x64_c2x2_a8_bias ${C}_128x192x64_c1x1_a8_bias $LT2304 $LT3072
 ${C}_256x128x64_c1x2_a8_bias ${C}_256x128x64_c2x2_a8_bias ${C}_128x256x64_c2x1_a8_bias ${C}_128x256x64_c2x2_a8_bias $LT24
 ${P}_128x128x64_c1x2_a8_bias ${P}_128x128x64_c2x2_a8_bias $LT209"
L=/tmp/kl
# Kernels built ahead on the workstation (same nvcc 13.0, sm_90a) come in .carry/kl.tgz; only missing ones build here.
mkdir -p $L; [ -f .carry/kl.tgz ] && tar xzf .carry/kl.tgz -C $L
missing=""; for k in $kern; do [ -f $L/$k.so ] || missing="$missing $k"; done
echo "kernels carried: $(ls $L/*.so 2>/dev/null | wc -l); to build:${missing:- none}"
[ -n "$missing" ] && LIMIT=200 TAIL=12 step kernels $b/sabre kernels build $missing -o $L -j 16
# The gpu clocks line of sabre bench (NVML, loaded at run time) had not run on a GPU before this call.
[ -e .carry/bert_tiny.sabre ] && LIMIT=60 TAIL=12 step clocks_bert_tiny $b/sabre bench .carry/bert_tiny.sabre --dim batch=8 --dim seq=128 --iters 3000
LIMIT=120 TAIL=8 step gemm_cases $b/tests/gpu/sabre_gemm_gpu_test --quick -j 16 --work /tmp/gemm_cl \
  ${P}_64x96x64_c2x1_a8_bias ${P}_64x96x64_c2x2_a8_bias ${P}_64x128x64_c2x2_a8_bias ${P}_64x96x64_c2x2_a8_bias_res \
  ${P}_128x96x64_c2x2_a8_bias ${C}_256x128x64_c2x2_a8_bias ${C}_128x256x64_c2x2_a8_bias ${P}_128x128x64_c2x2_a8_bias --out $OUT/gemm_cl.md
bias="${P}_64x96x64_c1x2_a8_bias ${P}_64x96x64_c2x1_a8_bias ${P}_64x96x64_c2x2_a8_bias ${P}_64x128x64_c1x2_a8_bias
 ${P}_64x128x64_c2x2_a8_bias $LT"
libs() { for k in "$@"; do printf "%s=%s/%s.so " $k $L $k; done; }
for k in 3072 768; do
  LIMIT=90 TAIL=10 step bias_k$k $b/gemm_lib_bench --epilogue bias --m 1024 --n 768 --k $k --rounds 5 $(libs $bias)
done
LIMIT=90 TAIL=8 step bias_n2304 $b/gemm_lib_bench --epilogue bias --m 1024 --n 2304 --k 768 --rounds 5 \
  $(libs ${P}_128x96x64_c1x1_a8_bias ${P}_64x96x64_c1x2_a8_bias ${P}_64x96x64_c2x2_a8_bias ${P}_128x96x64_c2x2_a8_bias $LT2304)
LIMIT=90 TAIL=8 step bias_n3072 $b/gemm_lib_bench --epilogue bias --m 1024 --n 3072 --k 768 --rounds 5 \
  $(libs ${C}_128x192x64_c1x1_a8_bias ${P}_64x96x64_c2x2_a8_bias ${P}_128x96x64_c2x2_a8_bias $LT3072)
LIMIT=90 TAIL=6 step bias_res_k3072 $b/gemm_lib_bench --epilogue bias_res --m 1024 --n 768 --k 3072 --rounds 5 \
  $(libs ${P}_64x128x64_c1x2_a8_bias_res ${P}_64x96x64_c2x2_a8_bias_res $LTR)
# Issue 5's large shapes, where cuBLASLt's first choice (t24, c5) still wins: the deployed CUTLASS winner against 2x2.
for shape in "8192 8192 8192" "4096 4096 4096" "16384 768 3072"; do
  set -- $shape
  LIMIT=90 TAIL=8 step bias_$1x$2x$3 $b/gemm_lib_bench --epilogue bias --m $1 --n $2 --k $3 --rounds 5 \
    $(libs ${C}_256x128x64_c1x2_a8_bias ${C}_256x128x64_c2x2_a8_bias ${C}_128x256x64_c2x1_a8_bias ${C}_128x256x64_c2x2_a8_bias $LT24)
done
LIMIT=90 TAIL=8 step bias_2048x11008x4096 $b/gemm_lib_bench --epilogue bias --m 2048 --n 11008 --k 4096 --rounds 5 \
  $(libs ${P}_128x128x64_c1x2_a8_bias ${P}_128x128x64_c2x2_a8_bias $LT209)
} > $OUT/main.log 2>&1
finish
exit 0
