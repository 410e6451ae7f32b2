#!/usr/bin/env bash
# The main job from a fresh machine: setup, build, inspect and partition the bundled BERT-style
# model, run it on the CPU reference executor (batch=2, seq=16; outputs in out/main), and, where
# there is a GPU, compile it into an artifact, run that against the CPU reference and time it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${SABRE_BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh"
SABRE_BUILD_DIR="$build" "$root/scripts/build.sh" sabre
model="$root/models/bert_tiny.onnx"
set -x
"$build/sabre" inspect "$model" --dim batch=2 --dim seq=16
"$build/sabre" partition "$model"
"$build/sabre" run --reference "$model" --dim batch=2 --dim seq=16 -o "$root/out/main"
set +x
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  set -x
  "$build/sabre" compile "$model" -o "$root/out/bert_tiny.sabre" --dtype fp16 --dynamic batch=1..8,seq=1..128 -j "$(nproc)"
  "$build/sabre" run "$root/out/bert_tiny.sabre" --model "$model" --dim batch=2 --dim seq=16 --compare-reference \
    -o "$root/out/main-gpu"
  "$build/sabre" bench "$root/out/bert_tiny.sabre" --dim batch=8 --dim seq=128
else
  echo "main.sh: no NVIDIA GPU here: skipped 'sabre compile' (GEMM kernels are compiled for the GPU"
  echo "main.sh: it runs on), the GPU run against the CPU reference, and 'sabre bench'."
fi
