#!/usr/bin/env bash
# The main job from a fresh machine: setup, build, then import and inspect the bundled BERT-style
# model and run it on the CPU reference executor with batch=2, seq=16. Outputs go to out/main.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${SABRE_BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh"
SABRE_BUILD_DIR="$build" "$root/scripts/build.sh" sabre
model="$root/models/bert_tiny.onnx"
set -x
"$build/sabre" inspect "$model" --dim batch=2 --dim seq=16
"$build/sabre" run --reference "$model" --dim batch=2 --dim seq=16 -o "$root/out/main"
