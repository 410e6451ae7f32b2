#!/usr/bin/env bash
# One device call (twelfth session, 2026-12-04): the catalog's new 64x32 ping-pong row (the first call
# of the session, bench/results/small_tile_h200_2026-12-04.txt, timed it faster than 64x64 at
# 128x768x3072 and 128x768x768) tuned into BERT-base and timed end to end against the same model
# compiled without it.
#  Before: .carry/old_tree.tgz = `git archive 8aa9c4c` (main without the row), built beside this one.
#  1. The v3 BERT DB imported twice. This tree's `sabre compile --tune` on one copy times only what the
#     DB lacks (the 64x32 candidates the ranking now offers); the old tree compiles from the other copy
#     (nothing to time). Kernel cache shared.
#  2. Outputs of the new artifact against PyTorch fp16; hf_e2e.py latency with both artifacts, 3 rounds
#     in alternating order, torch eager and torch.compile in the same run.
#  3. The tuned DB comes back ($OUT/bert_db.jsonl.gz) and what the two plans deploy differently.
# Usage on the GPU host: bash scripts/gpu/small_tile_model_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-smalltile-model} LOGS=/tmp/steplogs2; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u
python3 bench/models/export_hf.py /tmp/hf bert > $LOGS/export.log 2>&1 &
exp=$!
build_old_tree &
old=$!
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=OFF
LIMIT=150 step build ninja -C $b -j10 sabre
compile_bert_ab bench/results/bert_db_v3_h200_2026-12-03.jsonl.gz
$b/sabre db show --db /tmp/w/new.db --workload "n=768" > $LOGS/db_show_768.txt 2>&1; head -40 $LOGS/db_show_768.txt
LIMIT=150 TAIL=10 step latency_bert python3 bench/models/hf_e2e.py latency bert_base /tmp/hf \
  /tmp/bert_new.sabre,/tmp/bert_old.sabre $b/sabre 128 --rounds 3 1 2 8 32
LIMIT=100 TAIL=14 step compare_bert python3 bench/models/hf_e2e.py compare bert_base /tmp/hf /tmp/bert_new.sabre $b/sabre 1:128 2:128 8:128 32:128 3:77
$b/sabre db export --db /tmp/w/new.db -o $OUT/bert_db.jsonl && gzip -f $OUT/bert_db.jsonl
} > $OUT/main.log 2>&1
finish
exit 0
