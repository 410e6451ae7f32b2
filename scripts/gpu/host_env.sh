#!/usr/bin/env bash
# Sourced on the GPU host (device tool): unpacks the Debian libraries sabre builds against
# (carried as .debs in .carry/debs, since that host has no package registry) and the CUTLASS
# headers (.carry/cutlass_inc.tgz, from the nvidia-cutlass wheel) into /opt/sabre-deps, and
# exports what CMake needs to find them; defines step() for the one-call scripts beside it.
set -e
root=$(pwd)
deps=/opt/sabre-deps
if [ ! -f $deps/.done ]; then
  mkdir -p $deps/cutlass
  for f in "$root"/.carry/debs/*.deb; do dpkg -x "$f" $deps; done
  tar xzf "$root"/.carry/cutlass_inc.tgz -C $deps/cutlass
  touch $deps/.done
fi
export SABRE_DEPS=$deps
# Kernel-cache keys hold the headers' contents, not their paths, so a kernel cache built on the
# workstation (carried_kernel_cache) hits here with the headers unpacked anywhere.
cutlass_dir=$deps/cutlass
# One call's conventions: step logs in $LOGS (default $OUT; elsewhere, finish tars them into
# $OUT/logs.tgz, since the device tool returns at most 8 files), a call-wide DEADLINE in seconds of
# $SECONDS (default 570 of the device tool's 600), the build in $b.
export LOGS=${LOGS:-$OUT}; mkdir -p "$LOGS"
export DEADLINE=${DEADLINE:-570}
export PYTHONUNBUFFERED=1
b=/tmp/b
export CUTLASS_DIR=$cutlass_dir
export LD_LIBRARY_PATH=$deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export CMAKE_PREFIX_PATH=$deps/usr:${CMAKE_PREFIX_PATH:-}
export SABRE_CMAKE_ARGS="-DCUTLASS_DIR=$CUTLASS_DIR -DProtobuf_INCLUDE_DIR=$deps/usr/include \
 -DProtobuf_LIBRARY=$deps/usr/lib/x86_64-linux-gnu/libprotobuf.so \
 -DONNX_PROTO_LIB=$deps/usr/lib/x86_64-linux-gnu/libonnx_proto.so \
 -DSQLite3_INCLUDE_DIR=$deps/usr/include -DSQLite3_LIBRARY=$deps/usr/lib/x86_64-linux-gnu/libsqlite3.so \
 -DGTest_DIR=$deps/usr/lib/x86_64-linux-gnu/cmake/GTest -DCMAKE_CXX_FLAGS=-I$deps/usr/include"
set +e

# step NAME CMD...: runs CMD with a time limit (LIMIT, default 120 s, cut to what is left before
# DEADLINE, in the script's $SECONDS, when that is set), its output to $LOGS/NAME.log (LOGS defaults
# to $OUT), then prints the exit status, the seconds taken and the log's last TAIL lines (default 6).
step() {
  local name=$1; shift; local t0=$SECONDS; local limit=${LIMIT:-120}
  if [ -n "${DEADLINE:-}" ] && [ $((DEADLINE - SECONDS)) -lt "$limit" ]; then limit=$((DEADLINE - SECONDS)); fi
  if [ "$limit" -lt 5 ]; then echo "== $name: skipped, the call's time is spent"; return 124; fi
  echo "== $name"; timeout "$limit" "$@" > "${LOGS:-$OUT}/$name.log" 2>&1; local rc=$?
  echo "   rc=$rc in $((SECONDS - t0)) s"; tail -"${TAIL:-6}" "${LOGS:-$OUT}/$name.log"; return $rc
}

# finish: the step logs into $OUT/logs.tgz (when they are not in $OUT) and the summary ($OUT/main.log) to stdout.
finish() { [ "$LOGS" = "$OUT" ] || tar czf "$OUT/logs.tgz" -C "$LOGS" .; cat "$OUT/main.log"; }

# carried_kernel_cache DIR: kernel compile caches built ahead on the workstation (.carry/*_kcache.tgz,
# from `sabre compile --cache-dir` with the arch given), unpacked into DIR for --cache-dir. Their keys
# hold the workstation's `nvcc --version`: where that differs here, nothing hits and the compile
# builds as before.
carried_kernel_cache() {
  mkdir -p "$1"
  local f; for f in "$root"/.carry/*_kcache.tgz; do [ -f "$f" ] && tar xzf "$f" -C "$1"; done
  echo "kernel cache $1: $(ls "$1" | grep -c '\.so$') kernels carried"
  nvcc --version | tail -2
}
