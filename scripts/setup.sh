#!/usr/bin/env bash
# Installs everything sabre needs on a fresh Debian 12 machine; safe to run again (a second run
# only checks). Debian packages through apt, Python packages pinned in scripts/requirements.txt
# into the project-local venv .venv, CUTLASS 4.2 headers from the nvidia-cutlass wheel.
# Environment: SABRE_PYTHON picks the interpreter for the venv (default python3).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

apt_packages=(
  cmake ninja-build g++ pkg-config
  libonnx-dev libprotobuf-dev protobuf-compiler libsqlite3-dev
  googletest libgtest-dev
  # libFuzzer and the sanitizers for tests/fuzz. clang 16, not bookworm's default 14: 14 rejects
  # C++20 that g++ 12 takes (lambdas capturing structured bindings), and the fuzz build compiles
  # every library the importer uses.
  clang-16 libclang-rt-16-dev
  python3 python3-venv python3-dev
  # Header-only libraries: the CLI parser, JSON, fast hashing, the Python binding, DLPack tensors.
  # scripts/gpu/make_carry.sh copies their headers to the GPU host, which has no package registry.
  libcli11-dev nlohmann-json3-dev libxxhash-dev pybind11-dev libdlpack-dev
  libonnx-testdata                  # ONNX node conformance data for tests/onnx
)
cutlass_pin="nvidia-cutlass==4.2.0.0"

missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${apt_packages[@]}"
else
  echo "setup: Debian packages present"
fi

# The venv is rebuilt only when the pins change: a stamp holds the hash of what was installed.
py="${SABRE_PYTHON:-python3}"
stamp=".venv/.sabre-setup-stamp"
want="$(cat scripts/requirements.txt; echo "$cutlass_pin")"
want_hash="$(printf '%s' "$want" | sha256sum | cut -d' ' -f1)"
if [[ -x .venv/bin/python && -f "$stamp" && "$(cat "$stamp")" == "$want_hash" ]]; then
  echo "setup: .venv up to date"
else
  [[ -x .venv/bin/python ]] || { echo "setup: creating .venv with $($py --version)"; "$py" -m venv .venv; }
  .venv/bin/python -m pip install -q --disable-pip-version-check -r scripts/requirements.txt
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps "$cutlass_pin"
  printf '%s\n' "$want_hash" > "$stamp"
  echo "setup: .venv ready"
fi

cutlass_dir="$(.venv/bin/python -c 'import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), "source"))')"
if [[ -f "$cutlass_dir/include/cutlass/cutlass.h" ]]; then
  echo "setup: CUTLASS headers at $cutlass_dir"
else
  echo "setup: error: CUTLASS headers not found under $cutlass_dir; remove .venv and run scripts/setup.sh again" >&2
  exit 1
fi

# The CUDA toolkit is not installed here: the CPU build and tests work without it.
nvcc="$(command -v nvcc || true)"
[[ -n "$nvcc" ]] || { [[ -x /usr/local/cuda/bin/nvcc ]] && nvcc=/usr/local/cuda/bin/nvcc; }
if [[ -n "$nvcc" ]]; then
  echo "setup: CUDA: $("$nvcc" --version | grep -o 'release [0-9.]*') ($nvcc)"
else
  echo "setup: CUDA toolkit not found: CPU-only build (GPU tests will report skipped)"
fi
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "setup: GPU: $(nvidia-smi -L | head -1)"
else
  echo "setup: no GPU visible"
fi
