#!/usr/bin/env bash
# The whole GPU suite in one device call: configure and build what the ctest tests labelled `gpu`
# need (all cores), run each of them (gpu.e2e_models included) with what is left of a deadline, and
# optionally a compute-sanitizer memcheck pass; then write a record (commit, GPU, driver, date,
# pass/fail/skip and seconds per test) to $OUT/suite_latest.md, and to RECORD when given.
#
# usage (repository root, on the GPU host): bash scripts/gpu/suite.sh [--memcheck] [--tests REGEX] [RECORD.md]
#   --memcheck     also run compute-sanitizer --tool memcheck on the native kernels test, the
#                  runtime session and GEMM tests and one e2e model (bert_tiny's artifact)
#   --tests REGEX  only the gpu tests whose names match (a Python regex, searched), e.g. to finish in a second call
#                  what the first left unrun
# Environment: OUT (default /tmp/sabre-suite), DEADLINE (seconds, default 560: the device tool allows
# 600 a call), SABRE_COMMIT (the commit, where the tree has no .git), SUITE_BUILD (default /tmp/b),
# JOBS (default all cores). Where .carry/ exists (scripts/gpu/make_carry.sh), scripts/gpu/host_env.sh
# unpacks the carried Debian packages and CUTLASS headers first; elsewhere SABRE_CMAKE_ARGS is used
# as it is, so the script also runs (GPU tests skipped) on a machine without a GPU.
# Exit status: 0 when no test failed or was left unrun, else 1.
set -u
memcheck=0 tests_re="" record=""
while [ $# -gt 0 ]; do
  case "$1" in
    --memcheck) memcheck=1 ;;
    --tests) tests_re=${2:?--tests needs a regex}; shift ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "suite.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) record=$1 ;;
  esac
  shift
done
[ -f CMakeLists.txt ] && [ -d tests/gpu ] || { echo "suite.sh: run it from the repository root" >&2; exit 2; }
OUT=${OUT:-/tmp/sabre-suite}; mkdir -p "$OUT"
export DEADLINE=${DEADLINE:-560}
SECONDS=0
if [ -d .carry/debs ]; then
  # host_env.sh sets -e while it unpacks; a failure there is fatal by design.
  LOGS=${LOGS:-/tmp/suite_logs} source scripts/gpu/host_env.sh
fi
b=$(realpath -m "${SUITE_BUILD:-/tmp/b}")
LOGS=/tmp/suite_logs.$$; rm -rf "$LOGS"; mkdir -p "$LOGS"
JOBS=${JOBS:-$(nproc)}
# A Python with numpy and onnx for the Python-driven tests (the tree's .venv here, python3 there).
py=""
for c in "$PWD/.venv/bin/python" "$(command -v python3 || true)"; do
  if [ -x "$c" ] && "$c" -c 'import numpy, onnx' 2> /dev/null; then py=$c; break; fi
done
main_log=$OUT/suite.log
: > "$main_log"
say() { echo "$*" | tee -a "$main_log"; }
left() { echo $((DEADLINE - SECONDS)); }

# ---- facts for the record --------------------------------------------------------------------
commit=${SABRE_COMMIT:-}
if [ -z "$commit" ] && git rev-parse --git-dir > /dev/null 2>&1; then
  commit=$(git rev-parse HEAD)$(git diff --quiet HEAD 2> /dev/null || echo " (with uncommitted changes)")
fi
commit=${commit:-unknown (no .git here: pass SABRE_COMMIT=\$(git rev-parse HEAD))}
if command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L > /dev/null 2>&1; then
  gpu=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1)
  driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
else
  gpu="none (nvidia-smi not found or found no GPU)"; driver="-"
fi
cuda=$( (nvcc --version 2> /dev/null || echo "nvcc not found") | tail -1)
started=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
say "suite.sh: commit $commit; GPU $gpu; driver $driver; $cuda; $started; deadline ${DEADLINE} s"

# ---- results ---------------------------------------------------------------------------------
rows=()  # "name|result|seconds|note"
add_row() { rows+=("$1|$2|$3|$4"); say "$(printf '%-28s %-22s %5s s  %s' "$1" "$2" "$3" "$4")"; }

# phase NAME LIMIT CMD...: runs CMD with its output in $LOGS/NAME.log, at most LIMIT seconds and no
# later than the deadline; sets rc (124: ran out of time) and secs.
phase() {
  local name=$1 limit=$2; shift 2
  local l; l=$(left)
  [ "$limit" -gt "$l" ] && limit=$l
  secs=0
  if [ "$limit" -lt 5 ]; then rc=125; return; fi
  say "== $name (at $SECONDS s, limit $limit s)"
  local t0=$SECONDS
  timeout -k 10 "$limit" "$@" > "$LOGS/$name.log" 2>&1
  rc=$?
  secs=$((SECONDS - t0))
  tail -4 "$LOGS/$name.log" | sed 's/^/   | /' | tee -a "$main_log"
}

write_record() {
  local f=$OUT/suite_latest.md pass=0 fail=0 skip=0 unrun=0 r
  for r in "${rows[@]}"; do
    case "$(echo "$r" | cut -d'|' -f2)" in
      passed) pass=$((pass + 1)) ;; skipped*) skip=$((skip + 1)) ;; "not run"*) unrun=$((unrun + 1)) ;; *) fail=$((fail + 1)) ;;
    esac
  done
  {
    echo "# GPU suite record (scripts/gpu/suite.sh)"
    echo
    echo "| | |"
    echo "|---|---|"
    echo "| commit | $commit |"
    echo "| GPU | $gpu |"
    echo "| driver | $driver |"
    echo "| CUDA | $cuda |"
    echo "| date | $started |"
    echo "| options | memcheck=$memcheck${tests_re:+, tests matching $tests_re} |"
    echo "| total | $pass passed, $fail failed, $skip skipped, $unrun not run; ${SECONDS} s |"
    echo
    echo "| test | result | seconds | note |"
    echo "|---|---|---:|---|"
    for r in "${rows[@]}"; do
      IFS='|' read -r n res s note <<< "$r"
      echo "| $n | $res | $s | ${note//|//} |"
    done
    echo
    echo "Logs: suite_logs.tgz beside this file (one log per test and phase)."
  } > "$f"
  [ -n "$record" ] && { mkdir -p "$(dirname "$record")"; cp "$f" "$record"; }
  tar czf "$OUT/suite_logs.tgz" -C "$LOGS" . 2> /dev/null
  say "record: $f${record:+ and $record}; $pass passed, $fail failed, $skip skipped, $unrun not run, ${SECONDS} s"
  [ "$fail" -eq 0 ] && [ "$unrun" -eq 0 ]
}
finish() { write_record; exit $?; }

# ---- configure and build ---------------------------------------------------------------------
# shellcheck disable=SC2086
phase configure 120 cmake -S . -B "$b" -G Ninja ${SABRE_CMAKE_ARGS:-} -DSABRE_TESTS=ON ${py:+-DSABRE_PYTHON=$py}
if [ "$rc" -ne 0 ]; then add_row configure failed "$secs" "exit $rc (log configure.log)"; finish; fi
add_row configure passed "$secs" ""

# The gpu tests, fast ones first. What they run: everything tests/gpu builds, sabre, and every
# argument of a test's command inside the build tree that is a ninja target (ctest lists a
# command only once its executable exists).
ctest --test-dir "$b" -L '^gpu$' --show-only=json-v1 > "$LOGS/tests.json" 2> "$LOGS/tests.err"
mapfile -t tests < <(python3 - "$LOGS/tests.json" "$b" "$tests_re" <<'EOF'
import json, re, sys
data, build, pat = json.load(open(sys.argv[1])), sys.argv[2].rstrip("/") + "/", sys.argv[3]
fast = ["gpu.native_kernels", "gpu.runtime_session", "gpu.runtime_gemm", "gpu.e2e_models"]
tests = [t for t in data.get("tests", []) if not pat or re.search(pat, t["name"])]
tests.sort(key=lambda t: (fast.index(t["name"]) if t["name"] in fast else len(fast), t["name"]))
for t in tests:
    timeout = next((p["value"] for p in t.get("properties", []) if p["name"] == "TIMEOUT"), 600)
    files = [a[len(build):] for a in t.get("command") or [] if a.startswith(build)]
    print(f"{t['name']}|{int(timeout)}|{' '.join(files)}")
EOF
)
known=$(ninja -C "$b" -t targets all 2> /dev/null | cut -d: -f1)
build_targets="sabre tests/gpu/all "
for t in $(printf '%s\n' "${tests[@]}" | cut -d'|' -f3 | tr ' ' '\n' | sort -u); do
  grep -qxF "$t" <<< "$known" && build_targets+="$t "
done
# python.gpu imports the package of this build (the extension module and its Python files).
if printf '%s\n' "${tests[@]}" | grep -q '^python\.'; then
  for t in sabre_python sabre_python_files; do grep -qxF "$t" <<< "$known" && build_targets+="$t "; done
fi
say "gpu tests: ${#tests[@]}; build targets: $build_targets"
if [ "${#tests[@]}" -eq 0 ]; then add_row "ctest -L gpu" failed 0 "no gpu tests${tests_re:+ match $tests_re} (log tests.err)"; finish; fi
# shellcheck disable=SC2086
phase build 400 ninja -C "$b" -j "$JOBS" $build_targets
if [ "$rc" -ne 0 ]; then add_row build failed "$secs" "exit $rc (log build.log)"; finish; fi
add_row build passed "$secs" "$JOBS jobs"

# ---- the tests, one at a time (the kernel-building ones use every core themselves) -------------
run_test() {
  local name timeout l eff cut line note
  IFS='|' read -r name timeout _ <<< "$1"
  # ctest's own timeout ends the test (and what it started) before the deadline; the outer one
  # in phase() is only a backstop.
  l=$(left); eff=$timeout; cut=""
  if [ $((l - 20)) -lt "$eff" ]; then eff=$((l - 20)); cut=1; fi
  if [ "$eff" -lt 10 ]; then add_row "$name" "not run (time)" 0 "the deadline came first"; return; fi
  phase "$name" $((eff + 15)) ctest --test-dir "$b" -R "^${name//./\\.}\$" -V --timeout "$eff"
  line=$(grep -E "Test +#[0-9]+: " "$LOGS/$name.log" | tail -1)
  case "$line" in
    *"Skipped"*)
      note=$(grep -iE "^[0-9]+: .*(skip|no CUDA|no GPU)" "$LOGS/$name.log" | sed -E 's/^[0-9]+: //' | head -1 | cut -c1-200)
      add_row "$name" skipped "$secs" "$note" ;;
    *"Passed"*) add_row "$name" passed "$secs" "" ;;
    *"Timeout"*)
      if [ -n "$cut" ]; then add_row "$name" "not run (time)" "$secs" "stopped at the deadline after $eff s"
      else add_row "$name" "failed (timeout)" "$secs" "over its ctest TIMEOUT of $timeout s"; fi ;;
    *)
      if [ "$rc" -eq 124 ]; then add_row "$name" "not run (time)" "$secs" "stopped at the deadline"; return; fi
      # The test's own last words (ctest -V prefixes them with the test number).
      note=$(grep -E "^[0-9]+: ." "$LOGS/$name.log" | grep -iE "fail|error" | tail -2 | sed -E 's/^[0-9]+: //' | tr '\n' ' ' | cut -c1-240)
      add_row "$name" failed "$secs" "${note:-see $name.log}" ;;
  esac
}

# compute-sanitizer memcheck of one binary: run_memcheck NAME BINARY ARGS...
run_memcheck() {
  local name=memcheck.$1 bin=$2 summary; shift 2
  if [ -z "$cs" ]; then add_row "$name" "not run" 0 "compute-sanitizer not found"; return; fi
  if [ ! -x "$bin" ]; then add_row "$name" "not run" 0 "$bin not built"; return; fi
  phase "$name" 200 "$cs" --tool memcheck --error-exitcode 86 --print-limit 20 "$bin" "$@"
  summary=$(grep -E "ERROR SUMMARY" "$LOGS/$name.log" | tail -1 | sed 's/^=* *//')
  # Some sandboxes (gVisor) refuse the sanitizer the device: nothing was checked.
  if grep -q "Device not supported" "$LOGS/$name.log"; then
    add_row "$name" "not run" "$secs" "compute-sanitizer: Device not supported on this machine"; return
  fi
  case $rc in
    125) add_row "$name" "not run (time)" 0 "the deadline came first" ;;
    0) add_row "$name" passed "$secs" "$summary" ;;
    77) add_row "$name" skipped "$secs" "no GPU" ;;
    124) add_row "$name" "not run (time)" "$secs" "stopped at the deadline" ;;
    86) add_row "$name" "failed (memcheck)" "$secs" "$summary" ;;
    *) add_row "$name" failed "$secs" "exit $rc; $(grep -iE "fail|error" "$LOGS/$name.log" | head -1 | cut -c1-160)" ;;
  esac
}

# The quick tests and the end-to-end one first, then memcheck (it needs the e2e artifact), then the
# tests that build many CUTLASS kernels (the ones a deadline may leave for a second call).
n_fast=0
for t in "${tests[@]}"; do
  case "${t%%|*}" in gpu.native_kernels|gpu.runtime_session|gpu.runtime_gemm|gpu.e2e_models) n_fast=$((n_fast + 1)) ;; esac
done
for t in "${tests[@]:0:$n_fast}"; do run_test "$t"; done
if [ "$memcheck" -eq 1 ]; then
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
  run_memcheck runtime_session "$b/tests/gpu/runtime_session_test"
  run_memcheck runtime_gemm "$b/tests/gpu/runtime_gemm_test"
  e2e=$b/tests/gpu/e2e
  if [ -d "$e2e/artifacts/bert_tiny" ]; then
    run_memcheck e2e_bert_tiny "$b/tests/gpu/sabre_e2e_run" "$e2e/artifacts/bert_tiny" "$e2e"/cases/bert_tiny/case0 \
      "$e2e"/cases/bert_tiny/case4
  else
    add_row memcheck.e2e_bert_tiny "not run" 0 "no e2e artifact (gpu.e2e_models did not run or did not compile it)"
  fi
  run_memcheck native_kernels "$b/tests/gpu/native_kernels_test"
fi
for t in "${tests[@]:$n_fast}"; do run_test "$t"; done
unrun=$(for r in "${rows[@]}"; do case "$r" in gpu.*"|not run"*) echo "${r%%|*}" ;; esac; done | sed 's/\./\\./g' | paste -sd'|')
[ -n "$unrun" ] && say "not run for lack of time: finish them with  bash scripts/gpu/suite.sh --tests '^($unrun)\$'"
finish
