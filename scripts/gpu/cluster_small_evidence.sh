#!/usr/bin/env bash
# One device call (twelfth session, 2026-12-04): the narrow ping-pong tiles of 128-row problems in 1x2
# clusters (A multicast to the CTA pair, halving its L2 reads), as a lead: 64x16, 64x32 and 64x64 c1x2.
# Ran 09:52 UTC (bench/results/small_tile_h200_2026-12-04.txt, call 3): the cluster variants lost and their
# catalog rows were taken out after it, so on a later tree both artifacts would be the same.
#  Why: at M=128, total L2->SM traffic rose with the CTA count (24 CTAs of 64x64 2.5 TB/s, 48 of 64x32
#  4.2, 96 of 64x16 6.6 on 128x768x3072) while each CTA slowed, as if the L2's output bounded the
#  narrow tiles; A's rows are re-read by every CTA along N, so multicast should cut that share.
#  Before: .carry/old_tree.tgz = `git archive` of the tree with the 64x32 row only; .carry/kl_y.tgz the
#  c1x2 kernels (workstation, nvcc 13.0).
#  1. gemm_lib_bench (CPU-reference check, 3 interleaved rounds, rotated and L2-hot) at BERT's M=128 shapes.
#  2. BERT-base from the v4 DB: this tree (rows added: the tuner times the c1x2 candidates the ranking
#     now puts first) against the old tree (nothing to time); plans' kernel differences; hf_e2e latency
#     with both artifacts, 3 rounds; outputs against PyTorch fp16.
# Usage on the GPU host: bash scripts/gpu/cluster_small_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-cluster-small} LOGS=/tmp/steplogs3; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
python3 bench/models/export_hf.py /tmp/hf bert > $LOGS/export.log 2>&1 &
exp=$!
build_old_tree &
old=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=150 step build ninja -C $b -j10 sabre gemm_lib_bench
P=sm90_ws_pingpong_tn_f16_f16_f32
LT3072=cublaslt_tn_f16_f16_f32_bias_res_algo66_t312_s35_k1_r0_w0_o3_i0_c9
carried_kernels kl kl_small kl_y
for hot in "" --l2-hot; do
  LIMIT=40 TAIL=7 step ffn2$hot $b/gemm_lib_bench --epilogue bias_res --m 128 --n 768 --k 3072 --rounds 3 $hot \
    $(libs ${P}_64x64x64_c1x1_a8_bias_res ${P}_64x32x64_c1x1_a8_bias_res ${P}_64x32x64_c1x2_a8_bias_res ${P}_64x16x64_c1x2_a8_bias_res)
  LIMIT=40 TAIL=5 step outproj$hot $b/gemm_lib_bench --epilogue bias_res --m 128 --n 768 --k 768 --rounds 3 $hot \
    $(libs ${P}_64x32x64_c1x1_a8_bias_res ${P}_64x32x64_c1x2_a8_bias_res ${P}_64x16x64_c1x2_a8_bias_res)
  LIMIT=40 TAIL=4 step qkv$hot $b/gemm_lib_bench --epilogue bias --m 128 --n 2304 --k 768 --rounds 3 $hot \
    $(libs ${P}_64x64x64_c1x1_a8_bias ${P}_64x64x64_c1x2_a8_bias)
  LIMIT=40 TAIL=4 step ffn1$hot $b/gemm_lib_bench --epilogue bias_gelu --m 128 --n 3072 --k 768 --rounds 3 $hot \
    $(libs ${P}_64x64x64_c1x1_a8_bias_gelu ${P}_64x64x64_c1x2_a8_bias_gelu)
done
compile_bert_ab bench/results/bert_db_v4_h200_2026-12-04.jsonl.gz
LIMIT=120 TAIL=8 step latency_bert python3 bench/models/hf_e2e.py latency bert_base /tmp/hf \
  /tmp/bert_new.sabre,/tmp/bert_old.sabre $b/sabre 128 --rounds 3 1 2 8 32
LIMIT=60 TAIL=4 step compare_bert python3 bench/models/hf_e2e.py compare bert_base /tmp/hf /tmp/bert_new.sabre $b/sabre 1:128 2:128 3:77
$b/sabre db export --db /tmp/w/new.db -o $OUT/bert_db.jsonl && gzip -f $OUT/bert_db.jsonl
} > $OUT/main.log 2>&1
finish
exit 0
