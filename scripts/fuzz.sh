#!/usr/bin/env bash
# Builds the libFuzzer targets (build-fuzz/: clang, ASan + UBSan, the image decoders built from
# Debian's sources with the same flags by scripts/fuzz-decoders.sh) and runs every one of them:
# first on its regression inputs (fuzz/regressions/<target>/), then for SECONDS of fuzzing on
# a scratch copy of its seed corpus (fuzz/corpus/<target>/) with its dictionary
# (fuzz/<name>.dict, where the format has keywords). The targets are every fuzz/fuzz_*.cpp.
# Fails when any target reports a finding: the input is saved in build-fuzz/fuzz/findings/<target>/
# and copied to fuzz/regressions/<target>/ (commit it with the fix). docs/fuzzing.md says more.
# Usage: scripts/fuzz.sh [SECONDS]   (default 20, what CI runs)
#        scripts/fuzz.sh --long      (600 s per target, for releases; logs in build-fuzz/fuzz/logs/)
# env: FUZZ_TARGETS (a subset, space-separated), STAVE_FUZZ_BUILD (build folder),
#      STAVE_FUZZ_DEPS (where the instrumented decoders are cached, default build-fuzz-deps/),
#      STAVE_FUZZ_SYSTEM_DECODERS=1 (link the uninstrumented system decoders instead),
#      STAVE_FIXTURES (fixture folder: fuzz_request loads its Qwen3 tokenizer.json from there),
#      STAVE_REQUIRE_FIXTURES=1 (a missing tokenizer fixture fails instead of being skipped),
#      FUZZ_JOBS (build parallelism), FUZZ_NICE (niceness of the fuzzing processes).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds=20
case "${1:-}" in
  --long) seconds=600 ;;
  "") ;;
  *[!0-9]*) echo "usage: scripts/fuzz.sh [SECONDS | --long]" >&2; exit 2 ;;
  *) seconds="$1" ;;
esac
build="${STAVE_FUZZ_BUILD:-$root/build-fuzz}"
deps="${STAVE_FUZZ_DEPS:-$root/build-fuzz-deps}"
all_targets="$(cd "$root/fuzz" && ls fuzz_*.cpp | sed 's/\.cpp$//' | tr '\n' ' ')"
targets="${FUZZ_TARGETS:-$all_targets}"

decoders=""
if [ "${STAVE_FUZZ_SYSTEM_DECODERS:-0}" != 1 ]; then
  FUZZ_JOBS="${FUZZ_JOBS:-2}" "$root/scripts/fuzz-decoders.sh" "$deps"
  decoders="$(cd "$deps" && pwd)"
fi
if [ ! -f "$build/build.ninja" ] || ! grep -qx "STAVE_FUZZ_DECODERS:PATH=$decoders" "$build/CMakeCache.txt"; then
  # -O1 and line tables only: the usual fuzzing trade of speed against build time and reports
  # (at -O1 clang does not vectorize, so the kernels' `omp simd` loops would each warn).
  CC="${CC:-clang}" CXX="${CXX:-clang++}" cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -gline-tables-only -Wno-pass-failed" "-DCMAKE_C_FLAGS_RELEASE=-O1 -gline-tables-only" \
    -DSTAVE_FUZZ=ON -DSTAVE_TESTS=OFF -DSTAVE_BENCH=OFF "-DSTAVE_FUZZ_DECODERS=$decoders" >/dev/null
fi
# shellcheck disable=SC2086
ninja -C "$build" -j"${FUZZ_JOBS:-2}" $targets

# fuzz_request runs the real Qwen3 tokenizer of the fixture release.
fixtures="${STAVE_FIXTURES:-$root/../shared/fixtures}"
if [ -z "${STAVE_FUZZ_TOKENIZER:-}" ]; then
  if [ -f "$fixtures/public/model-bf16/tokenizer.json" ]; then
    export STAVE_FUZZ_TOKENIZER="$fixtures/public/model-bf16/tokenizer.json"
  elif [ "${STAVE_REQUIRE_FIXTURES:-0}" = 1 ]; then
    echo "fuzz: $fixtures/public/model-bf16/tokenizer.json is missing (STAVE_REQUIRE_FIXTURES=1)" >&2
    exit 1
  fi
fi

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
logs="$build/fuzz/logs"
mkdir -p "$logs"
failed=""
for t in $targets; do
  bin="$build/fuzz/$t"
  log="$logs/$t.log"
  if [ "$seconds" -ge 600 ]; then log="$logs/$t-long.log"; fi
  findings="$build/fuzz/findings/$t"
  regressions="$root/fuzz/regressions/$t"
  rm -rf "$findings"
  mkdir -p "$findings"
  dict_args=()
  [ -f "$root/fuzz/${t#fuzz_}.dict" ] && dict_args=(-dict="$root/fuzz/${t#fuzz_}.dict")
  common=(-timeout=25 -rss_limit_mb=2560 -malloc_limit_mb=2048 -artifact_prefix="$findings/")

  # 1. Every input that once failed must now pass.
  if [ -d "$regressions" ] && [ -n "$(ls -A "$regressions")" ]; then
    if ! "$bin" "${common[@]}" "$regressions"/* >"$log" 2>&1; then
      tail -n 40 "$log"
      echo "== $t: a regression input fails again (full log $log)"
      failed+=" $t"
      continue
    fi
  fi

  # 2. Fuzzing, from the seeds.
  corpus="$scratch/$t"
  mkdir -p "$corpus"
  [ -d "$root/fuzz/corpus/$t" ] && cp -r "$root/fuzz/corpus/$t/." "$corpus/"
  echo "== $t: ${seconds}s on $(ls "$corpus" | wc -l) seeds"
  if nice -n "${FUZZ_NICE:-0}" "$bin" "$corpus" "${dict_args[@]}" "${common[@]}" -max_total_time="$seconds" \
       -print_final_stats=1 >>"$log" 2>&1; then
    grep -E "^#[0-9]+[[:space:]]+DONE" "$log" | tail -n 1 || true
    echo "== $t: no findings"
  else
    failed+=" $t"
    tail -n 60 "$log"
    mkdir -p "$regressions"
    for f in "$findings"/*; do [ -f "$f" ] && cp "$f" "$regressions/"; done
    echo "== $t: FINDING: input saved under $findings/ and copied to fuzz/regressions/$t/ (full log $log)"
  fi
done
if [ -n "$failed" ]; then
  echo "fuzz: findings in:$failed"
  exit 1
fi
echo "fuzz: $(wc -w <<<"$targets") targets, ${seconds}s each, no findings"
