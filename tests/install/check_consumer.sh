#!/bin/sh
# sabre as a user installs it: `cmake --install` into a temporary prefix, then the example consumer
# (examples/run_artifact) built against that prefix twice, through find_package(sabre) and through
# pkg-config, each linking the installed libsabre_runtime.so, and run on a --plan-only artifact of
# a model that needs no generated kernel (tests/install/softmax.onnx: Softmax over [batch,16]):
# without a GPU it must say so and exit 77; with one it runs and prints the output.
# Usage: check_consumer.sh BUILD_DIR WORK_DIR SABRE_CLI MODEL.onnx   (ctest install.consumer)
set -eu
build=$1
work=$2
sabre=$3
model=$4
src=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "install.consumer: FAIL: $*"; exit 1; }
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix

for component in runtime dev; do
  cmake --install "$build" --prefix "$prefix" --component $component > "$work/install.log" 2>&1 ||
    { cat "$work/install.log"; fail "cmake --install --component $component"; }
done
lib=$(find "$prefix" -name 'libsabre_runtime.so.*.*.*' | head -1)
[ -n "$lib" ] || fail "no libsabre_runtime.so.X.Y.Z under $prefix"
libdir=$(dirname "$lib")
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ -e "$libdir/$soname" ] || fail "the SONAME link $soname is not installed"
[ -e "$libdir/libsabre_runtime.so" ] || fail "the development link libsabre_runtime.so is not installed"
[ -f "$prefix/include/sabre/sabre.h" ] || fail "include/sabre/sabre.h is not installed"
pcdir=$(dirname "$(find "$prefix" -name sabre.pc | head -1)")
[ -f "$pcdir/sabre.pc" ] || fail "sabre.pc is not installed"

# 1. find_package(sabre) -> sabre::runtime
cmake -S "$src/examples/run_artifact" -B "$work/with_cmake" -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" > "$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; fail "configuring the example"; }
cmake --build "$work/with_cmake" > "$work/cmake_build.log" 2>&1 || { cat "$work/cmake_build.log"; fail "building the example with CMake"; }

# 2. pkg-config
flags=$(PKG_CONFIG_PATH=$pcdir pkg-config --cflags --libs sabre) || fail "pkg-config --cflags --libs sabre"
mkdir -p "$work/with_pkgconfig"
# shellcheck disable=SC2086
cc -std=c11 -Wall -Wextra -Werror "$src/examples/run_artifact/run_artifact.c" $flags -Wl,-rpath,"$libdir" \
   -o "$work/with_pkgconfig/run_artifact" || fail "building the example with pkg-config ($flags)"

"$sabre" compile "$model" -o "$work/model.sabre" --plan-only > "$work/compile.log" 2>&1 ||
  { cat "$work/compile.log"; fail "sabre compile --plan-only"; }
gpu=no
if command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L > /dev/null 2>&1; then gpu=yes; fi

for exe in "$work/with_cmake/run_artifact" "$work/with_pkgconfig/run_artifact"; do
  used=$(ldd "$exe" | sed -n 's/.*libsabre_runtime[^ ]* => \([^ ]*\).*/\1/p')
  [ "$(readlink -f "$used")" = "$(readlink -f "$lib")" ] || fail "$exe loads '$used', not the installed $lib"
  rc=0
  "$exe" > "$work/usage.txt" 2>&1 || rc=$?
  [ $rc -eq 2 ] || fail "$exe without arguments exits $rc, want 2 (usage)"
  rc=0
  "$exe" "$work/model.sabre" > "$work/run.txt" 2>&1 || rc=$?
  if [ $rc -eq 77 ]; then
    grep -q "^skipped: no GPU to run on: no CUDA device" "$work/run.txt" || fail "exit 77 without the reason: $(cat "$work/run.txt")"
  elif [ $gpu = yes ] && [ $rc -eq 0 ]; then
    grep -q '^y \[1,16\]: 0\.0' "$work/run.txt" || fail "unexpected output: $(cat "$work/run.txt")"
  else
    fail "$exe on a --plan-only artifact (GPU: $gpu) exits $rc: $(cat "$work/run.txt")"
  fi
  echo "install.consumer: $exe: $(cat "$work/run.txt")"
done
echo "install.consumer: ok: find_package(sabre) and pkg-config builds link $lib"
