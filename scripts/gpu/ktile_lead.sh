#!/usr/bin/env bash
# One device call (twelfth session, 2026-12-04), a lead: sm90 tiles with a 256-byte K (128 f16 a
# k-step, half the k-steps and pipeline handoffs of the catalog's 128-byte K) for the small tiles that
# BERT-base's M=128 GEMMs and issue 5's 1024x768x3072 use; catalog rows for them only in this tree.
# Ran 10:13 UTC (bench/results/ktile_h200_2026-12-04.txt): K=128 won every M=128 shape; 64x128 c1x2 lost and
# its row was taken out after the call. The DB was not exported (no step did); the log is the record.
#  1. gemm_lib_bench (CPU-reference check, graph replay, operands rotated past L2, 3 rounds): each
#     K=128 kernel against its K=64 twin (and cuBLASLt's first choice at 1024x768x3072).
#  2. issue 5's benchmark with the v4 DB imported: only the K=128 candidates the ranking now offers are
#     compiled and timed; the geomean against cuBLASLt.
#  Before: .carry/kl_z.tgz (the step-1 kernels, built on the workstation with nvcc 13.0).
# Usage on the GPU host: bash scripts/gpu/ktile_lead.sh
set -u
OUT=${OUT:-/tmp/sabre-ktile}; mkdir -p "$OUT"
export DEADLINE=${DEADLINE:-270}
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=120 step build ninja -C $b -j16 sabre gemm_lib_bench gemm_tune_bench
P=sm90_ws_pingpong_tn_f16_f16_f32
LT27=cublaslt_tn_f16_f16_f32_bias_algo66_t27_s35_k1_r0_w0_o2_i0_c5
carried_kernels kl kl_small kl_z
LIMIT=25 TAIL=4 step ffn2 $b/gemm_lib_bench --epilogue bias_res --m 128 --n 768 --k 3072 --rounds 3 \
  $(libs ${P}_64x32x64_c1x1_a8_bias_res ${P}_64x32x128_c1x1_a8_bias_res)
LIMIT=25 TAIL=4 step qkv $b/gemm_lib_bench --epilogue bias --m 128 --n 2304 --k 768 --rounds 3 \
  $(libs ${P}_64x64x64_c1x1_a8_bias ${P}_64x64x128_c1x1_a8_bias)
LIMIT=25 TAIL=4 step ffn1 $b/gemm_lib_bench --epilogue bias_gelu --m 128 --n 3072 --k 768 --rounds 3 \
  $(libs ${P}_64x64x64_c1x1_a8_bias_gelu ${P}_64x64x128_c1x1_a8_bias_gelu)
LIMIT=30 TAIL=7 step m1024k3072 $b/gemm_lib_bench --epilogue bias --m 1024 --n 768 --k 3072 --rounds 3 \
  $(libs ${P}_64x96x64_c1x2_a8_bias ${P}_64x96x128_c1x2_a8_bias ${P}_64x128x64_c1x2_a8_bias ${P}_64x128x128_c1x2_a8_bias $LT27)
gunzip -c bench/results/gemm_tune_db_v4_h200_2026-12-04.jsonl.gz > /tmp/import.jsonl
$b/sabre db import /tmp/import.jsonl --db /tmp/bench.db | tail -1
LIMIT=$((DEADLINE - SECONDS - 10)) TAIL=16 step gemm_bench $b/gemm_tune_bench --top-k 4 --max-kernels 8 --db /tmp/bench.db
} > $OUT/main.log 2>&1
finish
exit 0
