#!/usr/bin/env bash
# Configures (once) and builds sabre with Ninja. Extra arguments are passed to ninja (targets).
# Environment: SABRE_BUILD_DIR (default build), SABRE_CMAKE_ARGS (extra configure flags),
# SABRE_JOBS (default: all cores).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${SABRE_BUILD_DIR:-$root/build}"
jobs="${SABRE_JOBS:-$(nproc)}"
if [[ ! -f "$build/build.ninja" ]]; then
  # shellcheck disable=SC2086
  cmake -S "$root" -B "$build" -G Ninja ${SABRE_CMAKE_ARGS:-}
fi
ninja -C "$build" -j "$jobs" "$@"
