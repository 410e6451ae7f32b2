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
# Kernel-cache keys hold the compile's -I flags. Where this tree sits where the workstation's does
# (/work/main), the CUTLASS headers also go where the workstation's venv has them, so a kernel cache
# built there (carried_kernel_cache) hits here.
cutlass_dir=$deps/cutlass
if [ "$root" = /work/main ]; then
  cutlass_dir=$root/.venv/lib/python3.11/site-packages/cutlass_library/source
  [ -d $cutlass_dir/include ] || { mkdir -p $cutlass_dir && tar xzf "$root"/.carry/cutlass_inc.tgz -C $cutlass_dir; }
fi
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

# build_old_tree: for an A/B against an older build, unpacks .carry/old_tree.tgz (a `git archive` of it)
# into /tmp/old and builds its sabre in /tmp/b_old with 6 jobs (this tree's build keeps the rest); the
# log is $LOGS/old_build.log, its last line the exit status. Run it in the background and wait for it.
build_old_tree() {
  mkdir -p /tmp/old && tar xzf "$root"/.carry/old_tree.tgz -C /tmp/old &&
    cmake -S /tmp/old -B /tmp/b_old -G Ninja $SABRE_CMAKE_ARGS -DSABRE_TESTS=OFF > "$LOGS/old_build.log" 2>&1 &&
    ninja -C /tmp/b_old -j6 sabre >> "$LOGS/old_build.log" 2>&1
  echo "old build rc=$?" >> "$LOGS/old_build.log"
}

# carried_kernels NAME...: the kernels built ahead on the workstation, .carry/NAME.tgz for each NAME
# that is there, unpacked into $L; libs KERNEL... prints gemm_lib_bench's NAME=PATH arguments for them.
L=/tmp/kl
carried_kernels() {
  mkdir -p $L
  for t in "$@"; do [ -f "$root/.carry/$t.tgz" ] && tar xzf "$root/.carry/$t.tgz" -C $L; done
  return 0
}
libs() { for k in "$@"; do printf "%s=%s/%s.so " $k $L $k; done; }

# carried_kernel_cache DIR: the compile cache BERT-base's tuned artifact needs (.carry/bert_kcache.tgz:
# `sabre compile` from bench/results/bert_db_v5_h200_2026-12-04.jsonl.gz on the workstation, no GPU,
# picking from that DB), unpacked into DIR for --cache-dir. Its keys hold the workstation's `nvcc
# --version` (13.0 V13.0.88) and -I flags (hence cutlass_dir above): where either differs here, nothing
# hits and the compile builds as before.
carried_kernel_cache() {
  mkdir -p "$1"; [ -f "$root/.carry/bert_kcache.tgz" ] && tar xzf "$root/.carry/bert_kcache.tgz" -C "$1"
  nvcc --version | tail -2
}

# plan_kernel_diff NEW OLD: the GEMM kernels one artifact's plan deploys and the other's does not, each
# line headed new or old.
plan_kernels() { grep -oE '"(sm90|cublaslt)[a-z0-9_]+"' "$1/plan.json" | sort -u; }
plan_kernel_diff() { diff <(plan_kernels "$1") <(plan_kernels "$2") | grep '^[<>]' | sed 's/^</new/;s/^>/old/'; }

# compile_bert_ab DB.jsonl.gz: BERT-base (/tmp/hf/bert_base.onnx, exported by the background job $exp)
# compiled from one imported DB twice, by this tree into /tmp/bert_new.sabre (timing what the DB lacks)
# and by the older one (build_old_tree, background job $old) into /tmp/bert_old.sabre, one kernel cache;
# then the kernels the two plans deploy differently.
compile_bert_ab() {
  mkdir -p /tmp/w && zcat "$1" > /tmp/w/db.jsonl
  $b/sabre db import --db /tmp/w/new.db /tmp/w/db.jsonl | tail -1
  $b/sabre db import --db /tmp/w/old.db /tmp/w/db.jsonl | tail -1
  wait $exp; tail -1 $LOGS/export.log
  LIMIT=240 TAIL=12 step compile_new $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert_new.sabre --dtype fp16 \
    --dynamic batch=1..32,seq=1..128 --tune --db /tmp/w/new.db --cache-dir /tmp/w/kernels
  wait $old; tail -1 $LOGS/old_build.log
  LIMIT=120 TAIL=3 step compile_old /tmp/b_old/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert_old.sabre --dtype fp16 \
    --dynamic batch=1..32,seq=1..128 --tune --db /tmp/w/old.db --cache-dir /tmp/w/kernels
  echo "== kernels deployed by one plan and not the other"
  plan_kernel_diff /tmp/bert_new.sabre /tmp/bert_old.sabre
}

# compile_bert_from_db [DB.jsonl.gz]: BERT-base (/tmp/hf/bert_base.onnx, exported by the background job
# $exp) compiled into /tmp/bert.sabre from a committed tuning DB (default bench/results/
# bert_db_v5_h200_2026-12-04.jsonl.gz, imported into /tmp/w/tuning.db; nothing new to time) with the
# carried kernel cache in /tmp/w/kernels (carried_kernel_cache), as step compile_bert.
compile_bert_from_db() {
  carried_kernel_cache /tmp/w/kernels > /dev/null
  zcat "${1:-bench/results/bert_db_v5_h200_2026-12-04.jsonl.gz}" > /tmp/w/db.jsonl
  $b/sabre db import --db /tmp/w/tuning.db /tmp/w/db.jsonl | tail -1
  wait $exp; tail -2 $LOGS/export.log
  LIMIT=200 TAIL=4 step compile_bert $b/sabre compile /tmp/hf/bert_base.onnx -o /tmp/bert.sabre --dtype fp16 \
    --dynamic batch=1..32,seq=1..128 --tune --db /tmp/w/tuning.db --cache-dir /tmp/w/kernels
}
