#!/usr/bin/env bash
# `stave decide --batch IN.jsonl`: one line out per request line, in order, errors as
# {"error": {"message", "line"}} lines and exit status 1; `--pack N` (answer N requests
# together through Engine::decide_batch) gives the same lines, including when a group holds a
# request that cannot be encoded (the group is then answered one by one).
# Usage: decide_batch.sh STAVE_BINARY FIXTURES_DIR   (plain bash + grep/sed)
set -uo pipefail
stave="$1"
fixtures="$2"
cases="$fixtures/public/cases"
model="$fixtures/public/model-bf16"
. "$(dirname "$0")/checks.bash"
require_fixtures "$cases"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

one_line() { tr -d '\n' <"$1"; echo; }
{
  one_line "$cases/000-docs-example/request.json"
  one_line "$cases/001-card-example/request.json"
  echo '{"model": "clef", "state": "truncated'          # line 3: not JSON
  echo
  one_line "$cases/004-unicode-state/request.json"        # line 4 (blank lines are skipped)
  one_line "$cases/015-long-state-truncated/request.json" # line 5: too long under --truncate refuse
  one_line "$cases/000-docs-example/request.json"
} >"$work/in.jsonl"

for pack in 1 2 4; do
  "$stave" decide --model "$model" --threads 1 --max-length 512 --truncate refuse --batch "$work/in.jsonl" \
    --pack $pack --out "$work/out-$pack.jsonl" 2>"$work/err-$pack.txt"
  status=$?
  [ $status -eq 1 ] || fail "--pack $pack: exit status $status, expected 1 (two lines fail)"
  [ "$(wc -l <"$work/out-$pack.jsonl")" -eq 6 ] || fail "--pack $pack: $(wc -l <"$work/out-$pack.jsonl") lines, expected 6"
  sed -n 3p "$work/out-$pack.jsonl" | grep -q '"line":3' || fail "--pack $pack: line 3 is not its parse error"
  sed -n 5p "$work/out-$pack.jsonl" | grep -q '"line":5' || fail "--pack $pack: line 5 is not its length error"
  for l in 1 2 4 6; do
    sed -n ${l}p "$work/out-$pack.jsonl" | grep -q '"answers"' || fail "--pack $pack: line $l has no answers"
  done
done
cmp -s "$work/out-1.jsonl" "$work/out-2.jsonl" || fail "--pack 2 answers differ from --pack 1"
cmp -s "$work/out-1.jsonl" "$work/out-4.jsonl" || fail "--pack 4 answers differ from --pack 1"
sed -n 1p "$work/out-1.jsonl" | cmp -s - <(sed -n 6p "$work/out-1.jsonl") || fail "the same request answered twice differs"

"$stave" decide --model "$model" --pack 0 --batch "$work/in.jsonl" >"$work/bad.txt" 2>&1
[ $? -eq 2 ] || fail "--pack 0 accepted"
grep -q -- "--pack:\? must be between 1 and 4096" "$work/bad.txt" || fail "--pack 0: $(cat "$work/bad.txt")"

finish "decide --batch"
