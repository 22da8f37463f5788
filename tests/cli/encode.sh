#!/usr/bin/env bash
# `stave encode` against the reference fixtures: ids and spans identical to expected-bf16.json,
# and an invalid request gives {"error": {"message": <the reference's text>}} with exit status 2.
# Usage: encode.sh STAVE_BINARY FIXTURES_DIR   (plain bash + sed/tr: no jq or Python needed)
set -uo pipefail
stave="$1"
fixtures="$2"
cases="$fixtures/public/cases"
model="$fixtures/public/model-bf16"
. "$(dirname "$0")/checks.bash"
require_fixtures "$cases"

# The "input_ids" and "questions" members of an expected file, whitespace removed (the chosen
# cases have no spaces inside their ids), as `stave encode` prints them.
expected_encoding() {
  tr -d ' \n\t' <"$1" | sed -E 's/.*("input_ids":\[[^]]*\],"questions":\[.*\]),"logits".*/{\1}/'
}
max_length_of() {
  tr -d ' \n\t' <"$1" | sed -E 's/.*"max_length":([0-9]+).*/\1/'
}

for name in 000-docs-example 015-long-state-truncated; do
  dir="$cases/$name"
  want=$(expected_encoding "$dir/expected-bf16.json")
  got=$("$stave" encode --model "$model" --max-length "$(max_length_of "$dir/expected-bf16.json")" "$dir/request.json")
  status=$?
  [ $status -eq 0 ] || fail "$name: exit status $status"
  [ "$(printf '%s' "$got" | tr -d ' \n\t')" = "$want" ] || fail "$name: ids/spans differ from expected-bf16.json"
done

# The request on stdin (non-ASCII option ids).
dir="$cases/008-unsorted-choice-keys"
got=$("$stave" encode --model "$model" - <"$dir/request.json")
[ "$(printf '%s' "$got" | tr -d ' \n\t')" = "$(expected_encoding "$dir/expected-bf16.json")" ] || fail "stdin request"

# An image request: ids, spans and the media fields (grid, mm_token_type_ids, token_offset).
dir="$cases/018-image-two"
got=$("$stave" encode --model "$model" "$dir/request.json" | tr -d ' \n\t')
want_media=$(tr -d ' \n\t' <"$dir/expected-bf16.json" | sed -E 's/.*"media":(\{[^}]*\}).*/\1/')
case "$got" in
  "$(expected_encoding "$dir/expected-bf16.json" | sed 's/}$//'),\"media\":"*) ;;
  *) fail "image request: ids/spans differ" ;;
esac
case "$got" in *"\"media\":$want_media}") ;; *) fail "image request: media differs ($want_media)" ;; esac

# Invalid requests: the reference's message, exit status 2.
for name in 021-err-bad-type 023-err-schema-too-long; do
  dir="$cases/$name"
  message=$(tr -d '\n' <"$dir/expected-bf16.json" | sed -E 's/.*"error": *"([^"]*)".*/\1/')
  got=$("$stave" encode --model "$model" --max-length "$(max_length_of "$dir/expected-bf16.json")" "$dir/request.json" 2>/dev/null)
  status=$?
  [ $status -eq 2 ] || fail "$name: exit status $status, expected 2"
  [ "$got" = "{\"error\":{\"message\":\"$message\"}}" ] || fail "$name: printed $got"
done

# Not JSON at all: a clear message, exit status 2.
got=$(printf '{"model":' | "$stave" encode --model "$model" - 2>/dev/null)
status=$?
[ $status -eq 2 ] || fail "truncated JSON: exit status $status"
case "$got" in *'"error":{"message":"invalid JSON at byte'*) ;; *) fail "truncated JSON: printed $got" ;; esac

finish "encode CLI"
