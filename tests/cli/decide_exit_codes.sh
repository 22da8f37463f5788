#!/usr/bin/env bash
# `stave decide` exit statuses as README "Commands" states them: 0 when answered (every line of
# a --batch), 1 when some --batch lines hold errors, 2 when nothing could run (a bad request
# file, an unreadable batch, a usage error), always with {"error": ...} for 2.
# Usage: decide_exit_codes.sh STAVE_BINARY FIXTURES_DIR
set -uo pipefail
stave="$1"
cases="$2/public/cases"
model="$2/public/model-mxfp4"
. "$(dirname "$0")/checks.bash"
require_fixtures "$cases"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
readme="$(dirname "$0")/../../README.md"
grep -q 'exits 0 when every line was answered, 1 when some lines hold' "$readme" || fail "README does not state the --batch exit statuses"

status_of() { "$stave" decide --model "$model" --threads 1 "$@" >"$work/out" 2>/dev/null; echo $?; }
tr -d '\n' <"$cases/000-docs-example/request.json" >"$work/good.jsonl"; echo >>"$work/good.jsonl"
cp "$work/good.jsonl" "$work/mixed.jsonl"; echo '{"model": "clef"}' >>"$work/mixed.jsonl"
[ "$(status_of --batch "$work/good.jsonl")" -eq 0 ] || fail "all lines answered: not 0"
[ "$(status_of --batch "$work/mixed.jsonl")" -eq 1 ] || fail "a failing line: not 1"
[ "$(wc -l <"$work/out")" -eq 2 ] || fail "a failing line: $(wc -l <"$work/out") lines out"
[ "$(status_of --batch "$work/missing.jsonl")" -eq 2 ] || fail "missing batch file: not 2"
grep -q '"error"' "$work/out" || fail "missing batch file: no JSON error"
[ "$(status_of "$cases/000-docs-example/request.json")" -eq 0 ] || fail "one good request: not 0"
[ "$(status_of "$cases/020-err-no-questions/request.json")" -eq 2 ] || fail "one bad request: not 2"
grep -q '"error"' "$work/out" || fail "one bad request: no JSON error"
[ "$(status_of --bogus-flag x)" -eq 2 ] || fail "unknown flag: not 2"
grep -q '"error"' "$work/out" || fail "unknown flag: no JSON error"
finish "decide exit codes"
