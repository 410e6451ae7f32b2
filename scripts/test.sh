#!/usr/bin/env bash
# The whole test suite from a fresh machine: setup, build, ctest. Tests labelled gpu report
# skipped where no GPU is present; a test whose prerequisite is missing reports skipped and names
# it. Ends with a line per skipped test and its reason, and "test.sh: N passed, N failed, N skipped".
# The exit status is ctest's. Extra arguments go to ctest (e.g. -L unit, -LE fuzz, -R cli).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${SABRE_BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh"
SABRE_BUILD_DIR="$build" "$root/scripts/build.sh"
start=$SECONDS
junit="$build/ctest-results.xml"
rm -f "$junit"
set +e
ctest --test-dir "$build" --output-on-failure --output-junit "$junit" -j "${SABRE_JOBS:-$(nproc)}" "$@"
rc=$?
set -e
echo "test.sh: ctest finished in $((SECONDS - start)) s with exit code $rc"
# A line per skipped test with its reason, a line per failure, then the counts as the last line.
python="$root/.venv/bin/python"
[[ -x "$python" ]] || python=python3
"$python" "$root/scripts/ctest_summary.py" "$junit" || true
exit $rc
