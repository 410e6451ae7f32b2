#!/usr/bin/env bash
# One device call for issue 6's evidence: build; export BERT-base and GPT-2 on the host; compile
# BERT-base with tuning from cold caches (timed) and GPT-2; compare both with PyTorch fp16 at
# several batch/seq values; BERT-base latency against PyTorch eager and torch.compile; then the
# same with --fuse-attention. Keep the logs to 8 files or fewer (the device tool returns 8).
# Logs go to $OUT. Usage on the GPU host: bash scripts/gpu/e2e_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-e2e}; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=OFF
LIMIT=200 step build ninja -C $b -j16 sabre gemm_tune_bench
step export python3 bench/models/export_hf.py /tmp/hf
rm -rf ~/.cache/sabre
LIMIT=300 TAIL=14 step compile_bert $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert_base.sabre --dtype fp16 --dynamic batch=1..32,seq=1..128
du -sh /tmp/bert_base.sabre /tmp/bert_base.sabre/kernels | tee -a "$OUT/compile_bert.log"
LIMIT=150 TAIL=14 step compile_gpt2 $b/sabre compile /tmp/hf/gpt2.onnx -o /tmp/gpt2.sabre --dtype fp16 --dynamic batch=1..8,seq=1..128 --no-tune
LIMIT=100 TAIL=20 step compare_bert python3 bench/models/hf_e2e.py compare bert_base /tmp/hf /tmp/bert_base.sabre $b/sabre 1:128 8:128 32:128 3:77 5:100 2:9
LIMIT=100 TAIL=12 step compare_gpt2 python3 bench/models/hf_e2e.py compare gpt2 /tmp/hf /tmp/gpt2.sabre $b/sabre 1:128 4:64 3:77 8:100
LIMIT=200 TAIL=8 step latency_bert python3 bench/models/hf_e2e.py latency bert_base /tmp/hf /tmp/bert_base.sabre $b/sabre 128 1 8 32
# The experimental fused attention (first GPU run of native::attention inside a model).
if [ -n "${FUSED:-1}" ]; then
  LIMIT=120 TAIL=6 step compile_bert_fused $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert_fused.sabre --dtype fp16 --dynamic batch=1..32,seq=1..128 --fuse-attention
  LIMIT=100 TAIL=16 step compare_bert_fused python3 bench/models/hf_e2e.py compare bert_base /tmp/hf /tmp/bert_fused.sabre $b/sabre 1:128 8:128 3:77 2:9
  LIMIT=200 TAIL=6 step latency_bert_fused python3 bench/models/hf_e2e.py latency bert_base /tmp/hf /tmp/bert_fused.sabre $b/sabre 128 1 8 32
fi
exit 0
