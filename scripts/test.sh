#!/usr/bin/env bash
# The test command: builds, runs the whole CTest suite (unit, fixture and CLI tests), then a
# short fuzzing run of every fuzz target. Fixtures are read from ../shared/fixtures
# (STAVE_FIXTURES overrides); STAVE_REQUIRE_FIXTURES=1 (set by CI) turns a missing fixture into
# a failure instead of a skip.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
"$root/scripts/build.sh"
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive} ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 900
if [ -x "$root/scripts/fuzz.sh" ] && [ "${STAVE_SKIP_FUZZ:-0}" != "1" ]; then
  "$root/scripts/fuzz.sh" "${STAVE_FUZZ_SECONDS:-20}"
fi
