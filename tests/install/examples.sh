#!/usr/bin/env bash
# The C++ library as a package: `cmake --install` into a prefix inside the build folder, then
# examples/ configured and built against it alone (find_package(stave CONFIG) -> stave::stave),
# and examples/decide.cpp compiled with pkg-config's flags; both programs answer a request.
# Usage: examples.sh SOURCE_DIR BUILD_DIR FIXTURES_DIR
set -uo pipefail
src="$1"; build="$2"; fixtures="$3"
. "$src/tests/cli/checks.bash"
work="$build/install-test"  # inside the build folder: removed and remade each run
rm -rf "$work" && mkdir -p "$work"
prefix="$work/prefix"

cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "cmake --install"; finish install; }
[ -f "$prefix/include/stave/stave.h" ] || fail "no include/stave/stave.h"
ls "$prefix"/lib*/libstave.so* >/dev/null 2>&1 || ls "$prefix"/lib/*/libstave.so* >/dev/null 2>&1 || fail "no libstave.so"
[ -x "$prefix/bin/stave" ] || fail "no bin/stave"
pc=$(find "$prefix" -name stave.pc | head -1)
[ -n "$pc" ] || fail "no stave.pc"

generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
cmake -S "$src/examples" -B "$work/examples" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "configure examples"; finish install; }
grep -q "stave" "$work/examples/CMakeCache.txt" || fail "examples cache"
grep -q "stave_DIR:PATH=$prefix" "$work/examples/CMakeCache.txt" || fail "find_package found stave elsewhere: $(grep stave_DIR "$work/examples/CMakeCache.txt")"
cmake --build "$work/examples" >"$work/build.log" 2>&1 || { cat "$work/build.log"; fail "build examples"; finish install; }

pkg_dir="$(dirname "$pc")"
flags=$(PKG_CONFIG_PATH="$pkg_dir" pkg-config --cflags --libs stave) || fail "pkg-config stave"
libdir=$(PKG_CONFIG_PATH="$pkg_dir" pkg-config --variable=libdir stave)
c++ -O1 "$src/examples/decide.cpp" -o "$work/decide-pc" $flags -Wl,-rpath,"$libdir" >"$work/pc.log" 2>&1 \
  || { cat "$work/pc.log"; fail "compile with pkg-config flags: $flags"; }

model="$fixtures/public/model-mxfp4"
request="$fixtures/public/cases/000-docs-example/request.json"
require_fixtures "$model"
for program in "$work/examples/example_decide" "$work/decide-pc"; do
  [ -x "$program" ] || { fail "$program was not built"; continue; }
  "$program" "$model" "$request" >"$work/out.txt" 2>&1 || fail "$program: $(cat "$work/out.txt")"
  grep -q "both threads agree" "$work/out.txt" || fail "$program output: $(cat "$work/out.txt")"
  grep -q '^{"model":"clef","answers"' "$work/out.txt" || fail "$program printed no response: $(head -c 300 "$work/out.txt")"
done
# example_batch: validate, parse and decide_batch a JSONL file through the public API. Each
# answer is the one the installed CLI prints for the same line; a line that breaks the protocol
# is reported with the field at fault and skipped.
batch="$work/batch.jsonl"
{ echo '{"model":"clef","state":"x","questions":{"a":{"type":"maybe","instructions":"?"}}}'
  cat "$src/examples/requests/batch.jsonl"; } >"$batch"
if [ -x "$work/examples/example_batch" ]; then
  "$work/examples/example_batch" "$model" "$batch" >"$work/batch.out" 2>"$work/batch.err" \
    || fail "example_batch: $(cat "$work/batch.err")"
  grep -q '^line 1: questions\.a\.type: ' "$work/batch.err" || fail "example_batch did not report line 1's type: $(cat "$work/batch.err")"
  "$prefix/bin/stave" decide --model "$model" --precision exact --batch "$src/examples/requests/batch.jsonl" \
    >"$work/batch-cli.out" 2>/dev/null || fail "stave decide --batch: $(head -c 300 "$work/batch-cli.out")"
  [ "$(wc -l <"$work/batch.out")" -eq 2 ] || fail "example_batch printed $(wc -l <"$work/batch.out") answers, not 2"
  cmp -s "$work/batch.out" "$work/batch-cli.out" || fail "example_batch and stave decide --batch differ: $(diff "$work/batch.out" "$work/batch-cli.out" | head -c 600)"
else
  fail "example_batch was not built"
fi
# The programs use the installed library, not the build folder's.
# (ldd's output is read whole first: `ldd | grep -q` under pipefail fails when grep stops early
# and ldd, still writing, gets SIGPIPE.)
libs=$(ldd "$work/examples/example_decide")
grep -q "$prefix" <<<"$libs" || fail "example_decide does not load the installed libstave: $(grep stave <<<"$libs")"
finish "install + examples"
