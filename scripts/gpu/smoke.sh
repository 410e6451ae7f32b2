#!/usr/bin/env bash
# One device call: build on the GPU host, run the runtime's GPU tests, compile the bundled model
# into an artifact and run it against the CPU reference. Logs go to $OUT (the device tool's folder).
# Usage on the GPU host, from the repo root: bash scripts/gpu/smoke.sh
set -u
OUT=${OUT:-/tmp/sabre-smoke}; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=200 step build ninja -C $b -j16 sabre runtime_session_test runtime_gemm_test
step runtime_session $b/tests/gpu/runtime_session_test
step runtime_gemm $b/tests/gpu/runtime_gemm_test
LIMIT=150 TAIL=12 step compile $b/sabre compile models/bert_tiny.onnx -o /tmp/bert_tiny.sabre --dtype fp16 --dynamic batch=1..8,seq=1..128 -j 16
TAIL=12 step run $b/sabre run /tmp/bert_tiny.sabre --model models/bert_tiny.onnx --dim batch=2 --dim seq=16 --compare-reference -o /tmp/run_out
TAIL=12 step bench $b/sabre bench /tmp/bert_tiny.sabre --dim batch=8 --dim seq=128
exit 0
