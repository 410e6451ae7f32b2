#!/usr/bin/env bash
# Builds .carry/ (git-ignored), what the GPU host lacks and host_env.sh unpacks there: the Debian
# packages sabre builds against and the ONNX backend test data (.carry/debs, fetched with apt-get
# download; the host has no package registry) and the CUTLASS headers from the project venv
# (.carry/cutlass_inc.tgz). Run here after scripts/setup.sh; pass .carry in the device tool's
# `carry`. About 17 MB.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
mkdir -p .carry/debs
(cd .carry/debs && apt-get download libonnx-dev libonnx1 libonnxifi libprotobuf-dev libprotobuf32 libprotobuf-lite32 \
   libsqlite3-0 libsqlite3-dev libgtest-dev libgmock-dev googletest libabsl20220623 zlib1g-dev \
   libcli11-dev nlohmann-json3-dev libxxhash-dev libxxhash0 pybind11-dev libdlpack-dev \
   libonnx-testdata)
cutlass="$(.venv/bin/python -c 'import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), "source"))')"
tar czf .carry/cutlass_inc.tgz -C "$cutlass" include tools/util/include
du -sh .carry
