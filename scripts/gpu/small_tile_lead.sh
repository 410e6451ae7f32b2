#!/usr/bin/env bash
# One device call (prepared 2026-12-04, eleventh session; run in the twelfth, 09:33 UTC: results in
# bench/results/small_tile_h200_2026-12-04.txt, call 1; 64x32 won at N=768, the rest lost): narrower ping-pong tiles for
# BERT-base's GEMMs at batch 1 (M = 128), where issue 6's 0.35 ms target is 25 us away (0.375 ms).
#  Why: at M = 128 the 64x64 tiles leave most of the 132 SMs idle and each CTA walks all of K: FFN2
#  128x768x3072 is 24 CTAs x 48 k-steps (7.60 us in the v3 DB, the slowest GEMM of a layer; cuBLASLt's
#  first choice 7.89), the output projection 128x768x768 24 CTAs (4.07), QKV 128x2304x768 72 CTAs
#  (4.14), FFN1 128x3072x768 96 CTAs (4.63). Split-K, which cuts the k-steps a CTA walks, lost
#  (bench/results/split_ln_h200_2026-12-04.txt: +0.7 us a layer). A narrower N tile cuts the bytes a
#  CTA loads per k-step instead (64x32: 12 KB against 16 KB) and doubles the CTAs (48 for FFN2); 64x48
#  gives QKV 96 CTAs and FFN1 128 (one wave). The catalog has no pingpong tile narrower than 64; these
#  names were already allowed (kernel_spec: N a multiple of 16), so no code changes: only kernels.
#  Prediction: if the per-SM load rate bounds these kernels, FFN2 on 64x32 ~5.7 us (-1.9), on 64x16
#  less again unless A's re-reads from L2 (96 CTAs x 393 KB) bind first; QKV and FFN1 on 64x48 -10-20%.
#  1. GEMM GPU test (CPU reference, poisoned outputs) on the new tiles.
#  2. gemm_lib_bench, 5 interleaved rounds, rotated operands and --l2-hot (the runtime prefetches
#     weights into L2, so hot is closer to what the model sees): each M=128 shape with the 64x64 kernel
#     deployed now, the narrower tiles and cuBLASLt's first choice.
#  If a narrower tile wins by more than the spread: add catalog rows (src/backends/cutlass/catalog.cpp),
#  re-tune BERT-base's M=128 bucket, A/B the model.
# Before: .carry/kl_small.tgz (the kernels, built on the workstation with nvcc 13.0 for sm_90a).
# Usage on the GPU host: bash scripts/gpu/small_tile_lead.sh
set -u
OUT=${OUT:-/tmp/sabre-smalltile} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=150 step build ninja -C $b -j16 sabre gemm_lib_bench sabre_gemm_gpu_test
P=sm90_ws_pingpong_tn_f16_f16_f32
LT3072=cublaslt_tn_f16_f16_f32_bias_res_algo66_t312_s35_k1_r0_w0_o3_i0_c9
LT2304=cublaslt_tn_f16_f16_f32_bias_algo66_t92_s35_k1_r0_w0_o2_i0_c7
carried_kernels kl kl_small kl_x
C=sm90_ws_coop_tn_f16_f16_f32
LT27=cublaslt_tn_f16_f16_f32_bias_algo66_t27_s35_k1_r0_w0_o2_i0_c5
kern="${P}_64x64x64_c1x1_a8_bias_res ${P}_64x48x64_c1x1_a8_bias_res ${P}_64x32x64_c1x1_a8_bias_res
 ${P}_64x16x64_c1x1_a8_bias_res ${P}_64x64x64_c1x1_a8_bias ${P}_64x48x64_c1x1_a8_bias ${P}_64x32x64_c1x1_a8_bias
 ${P}_64x64x64_c1x1_a8_bias_gelu ${P}_64x48x64_c1x1_a8_bias_gelu $LT3072 $LT2304
 ${C}_128x32x64_c1x1_a8_bias_res ${C}_128x48x64_c1x1_a8_bias ${C}_128x48x64_c1x2_a8_bias $LT27"
missing=""; for k in $kern; do [ -f $L/$k.so ] || missing="$missing $k"; done
echo "kernels carried: $(ls $L/*.so 2>/dev/null | wc -l); to build:${missing:- none}"
[ -n "$missing" ] && LIMIT=150 TAIL=12 step kernels $b/sabre kernels build $missing -o $L -j 16
LIMIT=120 TAIL=8 step gemm_cases $b/tests/gpu/sabre_gemm_gpu_test --quick -j 16 --work /tmp/gemm_st \
  ${P}_64x48x64_c1x1_a8_bias_res ${P}_64x32x64_c1x1_a8_bias_res ${P}_64x16x64_c1x1_a8_bias_res \
  ${P}_64x48x64_c1x1_a8_bias ${P}_64x32x64_c1x1_a8_bias ${P}_64x48x64_c1x1_a8_bias_gelu \
  ${C}_128x32x64_c1x1_a8_bias_res ${C}_128x48x64_c1x1_a8_bias ${C}_128x48x64_c1x2_a8_bias --out $OUT/gemm_st.md
for hot in "" --l2-hot; do
  LIMIT=60 TAIL=8 step ffn2$hot $b/gemm_lib_bench --epilogue bias_res --m 128 --n 768 --k 3072 --rounds 5 $hot \
    $(libs ${P}_64x64x64_c1x1_a8_bias_res ${P}_64x48x64_c1x1_a8_bias_res ${P}_64x32x64_c1x1_a8_bias_res ${P}_64x16x64_c1x1_a8_bias_res ${C}_128x32x64_c1x1_a8_bias_res $LT3072)
  LIMIT=60 TAIL=8 step outproj$hot $b/gemm_lib_bench --epilogue bias_res --m 128 --n 768 --k 768 --rounds 5 $hot \
    $(libs ${P}_64x64x64_c1x1_a8_bias_res ${P}_64x48x64_c1x1_a8_bias_res ${P}_64x32x64_c1x1_a8_bias_res ${P}_64x16x64_c1x1_a8_bias_res ${C}_128x32x64_c1x1_a8_bias_res)
  LIMIT=60 TAIL=6 step qkv$hot $b/gemm_lib_bench --epilogue bias --m 128 --n 2304 --k 768 --rounds 5 $hot \
    $(libs ${P}_64x64x64_c1x1_a8_bias ${P}_64x48x64_c1x1_a8_bias ${P}_64x32x64_c1x1_a8_bias $LT2304)
  LIMIT=60 TAIL=5 step ffn1$hot $b/gemm_lib_bench --epilogue bias_gelu --m 128 --n 3072 --k 768 --rounds 5 $hot \
    $(libs ${P}_64x64x64_c1x1_a8_bias_gelu ${P}_64x48x64_c1x1_a8_bias_gelu)
  LIMIT=60 TAIL=8 step m1024k3072$hot $b/gemm_lib_bench --epilogue bias --m 1024 --n 768 --k 3072 --rounds 5 $hot \
    $(libs ${P}_64x96x64_c1x2_a8_bias ${P}_64x128x64_c1x2_a8_bias ${P}_64x48x64_c1x1_a8_bias ${C}_128x48x64_c1x1_a8_bias ${C}_128x48x64_c1x2_a8_bias $LT27)
done
} > $OUT/main.log 2>&1
finish
exit 0
