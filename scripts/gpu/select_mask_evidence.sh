#!/usr/bin/env bash
# One device call (thirteenth session, 2026-12-04): BERT-base's additive mask, Where(Cast<bool>(
# attention_mask), 0, finfo(f32).min), read by the fused attention as an i64 select mask, so the
# elementwise step that built it (one kernel ahead of the first layer) is gone: 90 steps, not 91.
#  Before: .carry/old_tree.tgz = `git archive f25ae65` (main before the change), built beside this one.
#  1. native_kernels_test Attention_* (the new i64 select cases under every block shape) and
#     native_bench's attention table (the i64 select against the f16 and f32 masks).
#  2. bench/results/bert_db_v5_h200_2026-12-04.jsonl.gz (this session's cold tune of BERT-base)
#     imported twice; this tree and the old one compile BERT-base from it (nothing to time; kernel
#     cache shared); the kernels the plans deploy differently (none expected).
#  3. hf_e2e.py latency with both artifacts, 3 rounds in alternating order, torch eager and
#     torch.compile in the same run; outputs of the new artifact against PyTorch fp16.
# Usage on the GPU host: bash scripts/gpu/select_mask_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-select-mask} LOGS=/tmp/steplogs; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
python3 bench/models/export_hf.py /tmp/hf bert > $LOGS/export.log 2>&1 &
exp=$!
build_old_tree &
old=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=150 step build ninja -C $b -j10 sabre native_kernels_test native_bench
TAIL=4 step attention_test $b/tests/gpu/native_kernels_test Attention_
grep -c "^PASS.*i64" $LOGS/attention_test.log | sed 's/^/i64 select cases passed: /'; grep "^FAIL" $LOGS/attention_test.log | head
TAIL=0 step native_bench $b/native_bench; grep -A25 "^attention, graph_us" $LOGS/native_bench.log
compile_bert_ab bench/results/bert_db_v5_h200_2026-12-04.jsonl.gz
LIMIT=150 TAIL=12 step latency_bert python3 bench/models/hf_e2e.py latency bert_base /tmp/hf \
  /tmp/bert_new.sabre,/tmp/bert_old.sabre $b/sabre 128 --rounds 3 1 2 8 32
LIMIT=100 TAIL=14 step compare_bert python3 bench/models/hf_e2e.py compare bert_base /tmp/hf /tmp/bert_new.sabre $b/sabre 1:128 2:128 8:128 32:128 3:77
date -u
} > $OUT/main.log 2>&1
finish
exit 0
