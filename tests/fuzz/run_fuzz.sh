#!/usr/bin/env bash
# The sanitized (clang, ASan + UBSan) build the fuzzers and the CLI's sanitizer run share, and one
# fuzzer's run. ctest: fuzz.build, then fuzz.<target> (tests/fuzz/CMakeLists.txt).
#
#   run_fuzz.sh build SOURCE_DIR FUZZ_BUILD_DIR            configure (once) and build every fuzzer and sabre
#   run_fuzz.sh run SOURCE_DIR FUZZ_BUILD_DIR TARGET SECONDS WORK_DIR
#
# A run reads, in this order: the regressions (tests/fuzz/regressions/TARGET: inputs that once
# found a bug, every run), the committed seeds (tests/fuzz/seeds/TARGET) and the persistent corpus
# $SABRE_FUZZ_CORPUS/TARGET (default ${XDG_CACHE_HOME:-~/.cache}/sabre/fuzz/TARGET), which keeps
# what earlier runs on this machine learned; new inputs go into it. Any finding (crash, sanitizer
# report, leak, timeout, OOM) fails the run; its reproducer is kept in WORK_DIR/artifacts.
set -euo pipefail
mode="$1" src="$2" build="$3"

configure_and_build() {
  # clang 16 or later: clang 14 rejects C++20 that g++ 12 accepts (see scripts/setup.sh).
  local cxx cc san
  cxx="$(command -v clang++-16 || command -v clang++)"
  cc="$(command -v clang-16 || command -v clang)"
  san="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
  # -O1 and assertions on: quicker to build on 2 cores, and a failed assert is a finding too.
  # No CUDA: nothing fuzzed or run here needs a GPU, and the native kernels would cost nvcc time.
  local args=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g"
              "-DCMAKE_C_COMPILER=$cc" "-DCMAKE_CXX_COMPILER=$cxx" -DSABRE_FUZZ=ON
              -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON
              "-DCMAKE_CXX_FLAGS=$san -fsanitize=fuzzer-no-link" "-DCMAKE_C_FLAGS=$san"
              "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined")
  if [[ -n "${SABRE_FUZZ_CMAKE_ARGS:-}" ]]; then
    # shellcheck disable=SC2206
    args+=($SABRE_FUZZ_CMAKE_ARGS)
  fi
  # Reconfigure from scratch when these flags change (a build dir from an older script).
  local stamp="${args[*]}"
  if [[ ! -f "$build/build.ninja" || "$(cat "$build/.sabre_fuzz_flags" 2>/dev/null)" != "$stamp" ]]; then
    rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
    mkdir -p "$build"
    cmake -S "$src" -B "$build" "${args[@]}" >"$build/configure.log" 2>&1 ||
      { cat "$build/configure.log"; echo "run_fuzz: configure failed"; exit 1; }
    echo "$stamp" >"$build/.sabre_fuzz_flags"
  fi
  ninja -C "$build" -j "${SABRE_JOBS:-$(nproc)}" sabre_importer_fuzz sabre_npy_fuzz sabre_artifact_fuzz \
    sabre_db_import_fuzz sabre
}

if [[ "$mode" == build ]]; then
  configure_and_build
  exit 0
fi

target="$4" seconds="$5" work="$6"
fuzzer="$build/tests/fuzz/sabre_${target}_fuzz"
[[ -x "$fuzzer" ]] || { echo "run_fuzz: $fuzzer is not built (ctest runs fuzz.build first)"; exit 1; }
corpus="${SABRE_FUZZ_CORPUS:-${XDG_CACHE_HOME:-$HOME/.cache}/sabre/fuzz}/$target"
seeds="$src/tests/fuzz/seeds/$target"
regressions="$src/tests/fuzz/regressions/$target"
rm -rf "$work"
mkdir -p "$work/artifacts" "$corpus" "$seeds" "$regressions"

extra=()
if [[ "$target" == importer && -d /usr/share/libonnx-testdata/data/node ]]; then
  # Besides the committed seeds: every 18th ONNX node-test model, a spread of ops and dtypes.
  mkdir -p "$work/onnx_node_tests"
  i=0
  for d in /usr/share/libonnx-testdata/data/node/*/; do
    if (( i++ % 18 == 0 )) && [[ -f "$d/model.onnx" ]]; then cp "$d/model.onnx" "$work/onnx_node_tests/$(basename "$d").onnx"; fi
  done
  extra+=("$work/onnx_node_tests")
fi
# A persistent corpus that grew past what a 60 s run can read is merged down (libFuzzer keeps the
# inputs that add coverage).
if (( $(find "$corpus" -type f | wc -l) > 20000 )); then
  rm -rf "$corpus.merged" && mkdir -p "$corpus.merged"
  "$fuzzer" -merge=1 -max_total_time=120 "$corpus.merged" "$corpus" >"$work/merge.log" 2>&1 &&
    rm -rf "$corpus" && mv "$corpus.merged" "$corpus"
fi
echo "run_fuzz: $target: $(find "$regressions" -type f | wc -l) regressions, $(find "$seeds" -type f | wc -l) seeds," \
  "$(find "$corpus" -type f | wc -l) inputs in $corpus; fuzzing for $seconds s"

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:allocator_may_return_null=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
set +e
# The first directory is where new inputs go: the persistent corpus.
"$fuzzer" "$corpus" "$regressions" "$seeds" "${extra[@]}" -max_total_time="$seconds" -timeout=10 \
  -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
  >"$work/fuzz.log" 2>&1
rc=$?
set -e
if ((rc != 0)) || compgen -G "$work/artifacts/*" >/dev/null; then
  grep -v '^#[0-9]' "$work/fuzz.log" | tail -n 80
  echo "run_fuzz: $target: FINDING (exit $rc); reproducer(s):"
  ls -la "$work/artifacts"
  for f in "$work/artifacts"/*; do
    [[ -f "$f" ]] || continue
    echo "  reproduce: $fuzzer $f"
    echo "  once fixed, keep it so every run checks it: cp $f $src/tests/fuzz/regressions/$target/<what-it-broke>"
  done
  exit 1
fi
grep -E '^(Done|stat::)' "$work/fuzz.log"
echo "run_fuzz: $target: no findings in $seconds s; corpus now $(find "$corpus" -type f | wc -l) inputs"
