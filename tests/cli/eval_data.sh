#!/usr/bin/env bash
# `stave eval-data classify` as users run it: the example CSV becomes 12 labelled records with
# humanized option names; a short CSV row is reported by record number and skipped; a JSONL
# input with integer labels maps them through --labels-from FILE. No models needed.
# Usage: eval_data.sh STAVE_BINARY FIXTURES_DIR
set -uo pipefail
stave="$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
. "$(dirname "$0")/checks.bash"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

"$stave" eval-data classify --text-field text --label-field label --labels-from data \
  --instructions "Which banking intent?" "$root/examples/eval/support-intents.csv" >"$tmp/out.jsonl" 2>"$tmp/err" ||
  fail "classify csv: $(cat "$tmp/err")"
[ "$(wc -l <"$tmp/out.jsonl")" -eq 12 ] || fail "12 records expected, got $(wc -l <"$tmp/out.jsonl")"
grep -q '"top_up_by_bank_transfer":"Top up by bank transfer"' "$tmp/out.jsonl" || fail "humanized option: $(head -1 "$tmp/out.jsonl")"
grep -q '"labels":{"label":"card_declined"}' "$tmp/out.jsonl" || fail "labels member: $(head -1 "$tmp/out.jsonl")"
grep -q "12 records, 6 labels, 0 skipped" "$tmp/err" || fail "summary line: $(cat "$tmp/err")"

printf 'text,label\n"a, quoted ""text""",x\nshort\nplain,y\n' >"$tmp/in.csv"
"$stave" eval-data classify "$tmp/in.csv" >"$tmp/out2.jsonl" 2>"$tmp/err2" || fail "classify with a bad row: $(cat "$tmp/err2")"
[ "$(wc -l <"$tmp/out2.jsonl")" -eq 2 ] || fail "2 records expected: $(cat "$tmp/out2.jsonl")"
grep -q "record 2: has 1 fields, the header 2" "$tmp/err2" || fail "bad row report: $(cat "$tmp/err2")"
grep -q '"state":"a, quoted \\"text\\""' "$tmp/out2.jsonl" || fail "quoted CSV field: $(head -1 "$tmp/out2.jsonl")"

printf 'refund\ncard_arrival\n' >"$tmp/labels.txt"
printf '{"text": "where is my card", "label": 1}\n{"text": "x", "label": 2}\n' >"$tmp/in.jsonl"
"$stave" eval-data classify --labels-from "$tmp/labels.txt" "$tmp/in.jsonl" >"$tmp/out3.jsonl" 2>"$tmp/err3"
grep -q '"labels":{"label":"card_arrival"}' "$tmp/out3.jsonl" || fail "integer label by index: $(cat "$tmp/out3.jsonl")"
grep -q 'line 2: label "2" is not in the label set' "$tmp/err3" || fail "out-of-range label: $(cat "$tmp/err3")"

"$stave" eval-data classify --text-field nope "$root/examples/eval/support-intents.csv" >"$tmp/out4" 2>/dev/null
[ $? -eq 2 ] || fail "missing column should exit 2"
grep -q 'has no column \\"nope\\"' "$tmp/out4" || fail "missing column message: $(cat "$tmp/out4")"
finish eval_data
