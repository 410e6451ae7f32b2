#!/usr/bin/env bash
# Builds the sanitized importer fuzzer in its own clang build dir and fuzzes for N seconds.
# usage: run_fuzz.sh SOURCE_DIR FUZZ_BUILD_DIR SECONDS WORK_DIR
# Seeds: ~50 ONNX node-test models from libonnx-testdata. Any finding
# (crash, sanitizer report, leak, timeout, OOM) fails the test; its reproducer stays in WORK_DIR.
set -euo pipefail
src="$1" build="$2" seconds="$3" work="$4"
# clang 16 or later: clang 14 rejects C++20 that g++ 12 accepts (see scripts/setup.sh).
cxx="$(command -v clang++-16 || command -v clang++)"
cc="$(command -v clang-16 || command -v clang)"
san="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"

if [[ ! -f "$build/build.ninja" ]]; then
  # -O1 and assertions on: quicker to build on 2 cores, and a failed assert is a finding too.
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" -DSABRE_FUZZ=ON \
    -DCMAKE_CXX_FLAGS="$san -fsanitize=fuzzer-no-link" -DCMAKE_C_FLAGS="$san" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >"$work.configure.log" 2>&1 ||
    { mkdir -p "$(dirname "$work")"; cat "$work.configure.log"; echo "run_fuzz: configure failed"; exit 1; }
fi
ninja -C "$build" -j "${SABRE_JOBS:-$(nproc)}" sabre_importer_fuzz

rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
testdata=/usr/share/libonnx-testdata/data/node
if [[ -d "$testdata" ]]; then
  # Every 18th node test: a spread of ops, attributes and dtypes, the same set every run.
  i=0
  for d in "$testdata"/*/; do
    if (( i++ % 18 == 0 )) && [[ -f "$d/model.onnx" ]]; then cp "$d/model.onnx" "$work/corpus/$(basename "$d").onnx"; fi
  done
fi
# Inputs that once found a bug run first, every time.
cp "$src"/tests/fuzz/regressions/* "$work/corpus/" 2>/dev/null || true
echo "run_fuzz: $(ls "$work/corpus" | wc -l) seed models, fuzzing for $seconds s"

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:allocator_may_return_null=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
set +e
"$build/tests/fuzz/sabre_importer_fuzz" "$work/corpus" -max_total_time="$seconds" -timeout=10 \
  -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
  >"$work/fuzz.log" 2>&1
rc=$?
set -e
if ((rc != 0)) || compgen -G "$work/artifacts/*" >/dev/null; then
  grep -v '^#[0-9]' "$work/fuzz.log" | tail -n 80
  echo "run_fuzz: FINDING (exit $rc); reproducers in $work/artifacts:"
  ls -la "$work/artifacts"
  echo "reproduce: $build/tests/fuzz/sabre_importer_fuzz $work/artifacts/<file>"
  exit 1
fi
grep -E '^(Done|stat::)' "$work/fuzz.log"
echo "run_fuzz: no findings in $seconds s"
