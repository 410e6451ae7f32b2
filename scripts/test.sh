#!/usr/bin/env bash
# The whole test suite from a fresh machine: setup, build, ctest. Tests labelled gpu report
# skipped where no GPU is present. Extra arguments go to ctest (e.g. -L unit, -LE fuzz, -R cli).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${SABRE_BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh"
SABRE_BUILD_DIR="$build" "$root/scripts/build.sh"
start=$SECONDS
set +e
ctest --test-dir "$build" --output-on-failure -j "${SABRE_JOBS:-$(nproc)}" "$@"
rc=$?
set -e
echo "test.sh: ctest finished in $((SECONDS - start)) s with exit code $rc"
exit $rc
