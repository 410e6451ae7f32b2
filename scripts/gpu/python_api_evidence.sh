#!/usr/bin/env bash
# One device call (issue 31): build the shared runtime, the Python package and the runtime's GPU test
# on the GPU host, then run the C API checks (DLTensor in model order, host tensors staged), the
# Python GPU test (a small model compiled with its kernels, run from NumPy and from PyTorch CUDA
# tensors without copies, compared with the reference) and the installed-package consumer (the
# example runs a kernel-free artifact on the GPU). The Python package needs Python.h on the host:
# without it the python.* tests report skipped and say why. Last, bench/python_api_bench.py: BERT-base
# through the Python API against `sabre bench` (its table in $OUT/python_api_h200_DATE.md).
# Usage on the GPU host, from the repo root: bash scripts/gpu/python_api_evidence.sh
set -u
OUT=${OUT:-/tmp/sabre-python}; mkdir -p "$OUT"
source scripts/gpu/host_env.sh
step configure cmake -S . -B $b -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=ON
LIMIT=300 step build ninja -C $b -j16 sabre sabre_python sabre_python_files sabre_runtime_shared runtime_session_test
TAIL=12 step runtime_session $b/tests/gpu/runtime_session_test
LIMIT=240 TAIL=60 step python_and_install ctest --test-dir $b -R '^(python|install)\.' --output-on-failure -V
# BERT-base through the Python API on torch CUDA tensors against `sabre bench` on the same artifact.
LIMIT=420 TAIL=12 step python_api_bench env PYTHONPATH=$b/python python3 bench/python_api_bench.py \
  --work /tmp/pyapi --sabre $b/sabre --out "$OUT/python_api_h200_$(date -u +%F).md"
exit 0
