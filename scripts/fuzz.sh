#!/usr/bin/env bash
# Builds the libFuzzer targets (build-fuzz/, clang + ASan + UBSan) and runs each one for
# SECONDS (default 60) on a scratch copy of its seed corpus (fuzz/corpus/<target>/), so the
# committed seeds stay small. Fails when any target reports a finding; the crashing input is
# kept in build-fuzz/fuzz/findings/<target>/.
# Usage: scripts/fuzz.sh [SECONDS]      env: STAVE_FUZZ_BUILD (build folder), FUZZ_TARGETS, FUZZ_JOBS
set -euo pipefail
seconds="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${STAVE_FUZZ_BUILD:-$root/build-fuzz}"
targets="${FUZZ_TARGETS:-fuzz_safetensors fuzz_request fuzz_http_body}"

if [ ! -f "$build/build.ninja" ]; then
  CC="${CC:-clang}" CXX="${CXX:-clang++}" cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSTAVE_FUZZ=ON -DSTAVE_TESTS=OFF -DSTAVE_BENCH=OFF
fi
# shellcheck disable=SC2086
ninja -C "$build" -j"${FUZZ_JOBS:-2}" $targets

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
failed=0
for t in $targets; do
  seeds="$root/fuzz/corpus/$t"
  corpus="$scratch/$t"
  findings="$build/fuzz/findings/$t"
  mkdir -p "$corpus" "$findings"
  [ -d "$seeds" ] && cp -r "$seeds/." "$corpus/"
  dict_args=()
  dict="$root/fuzz/${t#fuzz_}.dict"
  [ -f "$dict" ] && dict_args=(-dict="$dict")
  echo "== $t: ${seconds}s on $(ls "$corpus" | wc -l) seeds"
  if "$build/fuzz/$t" "$corpus" "${dict_args[@]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
       -print_final_stats=1 -artifact_prefix="$findings/" >"$build/fuzz/$t.log" 2>&1; then
    grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|^#[0-9]+ *DONE" "$build/fuzz/$t.log" || true
    echo "== $t: no findings"
  else
    failed=1
    tail -n 60 "$build/fuzz/$t.log"
    echo "== $t: FINDING (input saved under $findings/, full log $build/fuzz/$t.log)"
  fi
done
exit $failed
