#!/usr/bin/env bash
# `stave eval --perplexity`: the card's perplexity of both models on one text file, reported beside
# the decision metrics. Each model's figure must be the one `stave perplexity --text` gives for the
# same file, --ctx and --windows (that command is checked against the reference's NLLs by the
# LanguageModel tests), and the relative change must be (model − against) / against.
# Usage: eval_perplexity.sh STAVE_BINARY FIXTURES_DIR
set -uo pipefail
stave="$1"
fixtures="$2"
bf16="$fixtures/public/model-bf16"
mxfp4="$fixtures/public/model-mxfp4"
. "$(dirname "$0")/checks.bash"
require_fixtures "$mxfp4"
command -v jq >/dev/null || { echo "jq is missing (scripts/install-deps.sh installs it)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'The quick brown fox jumps over the lazy dog. A second sentence follows the first one, and a third one follows it.' >"$tmp/t.txt"

ppl_of() { "$stave" perplexity --model "$1" --precision fast --threads 1 --text "$tmp/t.txt" --ctx 6 --windows 3 | jq -r .ppl; }
want_m=$(ppl_of "$mxfp4")
want_a=$(ppl_of "$bf16")
[ -n "$want_m" ] && [ "$want_m" != null ] || fail "stave perplexity gave no ppl for MXFP4"

# Perplexity alone (no --data): {"perplexity": {...}}.
got=$("$stave" eval --model "$mxfp4" --against "$bf16" --precision fast --against-precision fast --threads 1 \
        --perplexity "$tmp/t.txt" --ctx 6 --windows 3 --json)
[ $? -eq 0 ] || fail "eval --perplexity: exit status"
[ "$(jq -r .perplexity.windows <<<"$got")" = 3 ] || fail "windows: $got"
[ "$(jq -r .perplexity.tokens <<<"$got")" = 18 ] || fail "tokens: $got"
jq -e --argjson m "$want_m" --argjson a "$want_a" '
  (.perplexity.model.ppl == $m) and (.perplexity.against.ppl == $a)
  and (((.perplexity.relative_change - (($m - $a) / $a)) | fabs) < 1e-12)' <<<"$got" >/dev/null ||
  fail "eval's perplexities differ from stave perplexity's ($want_m, $want_a): $got"

# With --data: the decision summary keeps its keys and gains "perplexity".
case_dir="$fixtures/public/cases/000-docs-example"
printf '{"request": %s, "labels": {}}\n' "$(jq -c . "$case_dir/request.json")" >"$tmp/data.jsonl"
got=$("$stave" eval --model "$mxfp4" --precision fast --threads 1 --data "$tmp/data.jsonl" \
        --perplexity "$tmp/t.txt" --ctx 6 --windows 3 --json)
jq -e --argjson m "$want_m" '(.records == 1) and (.perplexity.model.ppl == $m) and (.perplexity | has("against") | not)' \
  <<<"$got" >/dev/null || fail "eval --data --perplexity: $got"

# A text too short for one window is a clear error (exit 2), not a perplexity of nothing.
printf 'short' >"$tmp/short.txt"
out=$("$stave" eval --model "$mxfp4" --precision fast --perplexity "$tmp/short.txt" --ctx 64 --json 2>&1)
st=$?
[ $st -eq 2 ] || fail "short text: exit status $st"
grep -q 'not one window of --ctx 64' <<<"$out" || fail "short text message: $out"
out=$("$stave" eval --model "$mxfp4" --perplexity "$tmp/t.txt" --ctx 1 2>&1)
[ $? -eq 2 ] || fail "--ctx 1 accepted: $out"
# --device / --against-device: a device the build does not know is refused by name, for either side.
out=$("$stave" eval --model "$mxfp4" --against "$bf16" --device nowhere "$fixtures/public/cases/000-docs-example" 2>&1)
[ $? -eq 2 ] || fail "--device nowhere accepted: $out"
grep -q 'not \\"nowhere\\"' <<<"$out" || fail "--device message: $out"
out=$("$stave" eval --model "$mxfp4" --against "$bf16" --against-device nowhere "$fixtures/public/cases/000-docs-example" 2>&1)
[ $? -eq 2 ] || fail "--against-device nowhere accepted: $out"
grep -q 'not \\"nowhere\\"' <<<"$out" || fail "--against-device message: $out"
finish eval_perplexity
