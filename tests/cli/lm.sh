#!/usr/bin/env bash
# `stave perplexity` and `stave chat` as the project's checks call them: the exact JSON spelling
# of the issue, and the first fixture chat's prompt and greedy ids (exact precision).
# Usage: lm.sh STAVE_BINARY FIXTURES_DIR   (plain bash + grep/sed/tr: no jq or Python needed)
set -uo pipefail
stave="$1"
fixtures="$2"
model="$fixtures/public/model-bf16"
lm="$fixtures/public/lm/lm-bf16.json"
. "$(dirname "$0")/checks.bash"
require_fixtures "$fixtures/public/lm"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

num='-?[0-9][0-9.e+-]*'
# --ids: {"windows": [{"tokens": N, "mean_nll": x, "ppl": y}], "mean_nll": x, "ppl": y}
echo '[[151644, 872, 198, 7985, 825], [9707, 13, 2585]]' >"$tmp/ids.json"
got=$("$stave" perplexity --model "$model" --precision exact --threads 1 --ids "$tmp/ids.json")
[ $? -eq 0 ] || fail "perplexity --ids: exit status"
printf '%s' "$got" | grep -Eq "^\{\"windows\":\[\{\"tokens\":5,\"mean_nll\":$num,\"ppl\":$num\},\{\"tokens\":3,\"mean_nll\":$num,\"ppl\":$num\}\],\"mean_nll\":$num,\"ppl\":$num\}$" ||
  fail "perplexity --ids spelling: $got"
# --per-token adds "nll" with N - 1 values per window.
got=$("$stave" perplexity --model "$model" --precision fast --threads 1 --ids "$tmp/ids.json" --per-token)
printf '%s' "$got" | grep -Eq "\{\"tokens\":5,\"mean_nll\":$num,\"ppl\":$num,\"nll\":\[$num,$num,$num,$num\]\},\{\"tokens\":3,\"mean_nll\":$num,\"ppl\":$num,\"nll\":\[$num,$num\]\}" ||
  fail "perplexity --per-token spelling: $got"
# --text: the card's protocol (windows of --ctx tokens, the first --windows).
printf 'The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog again.' >"$tmp/t.txt"
got=$("$stave" perplexity --model "$model" --threads 1 --text "$tmp/t.txt" --ctx 4 --windows 3)
[ "$(printf '%s' "$got" | grep -o '"tokens":4' | wc -l)" -eq 3 ] || fail "perplexity --text: expected 3 windows of 4: $got"
# --ctx / --windows belong to --text: with --ids they are a usage error, not ignored.
"$stave" perplexity --model "$model" --ids "$tmp/ids.json" --ctx 4 >/dev/null 2>&1
[ $? -eq 2 ] || fail "perplexity --ids with --ctx: exit status"
# Bad input: exit status 2 and {"error": {"message": ...}}.
echo '[[1]]' >"$tmp/short.json"
got=$("$stave" perplexity --model "$model" --ids "$tmp/short.json" 2>/dev/null)
[ $? -eq 2 ] || fail "perplexity of a 1-token window: exit status"
printf '%s' "$got" | grep -q '^{"error":{"message":"window 0 has 1 tokens' || fail "perplexity error spelling: $got"

# stave chat --json: prompt ids and greedy ids of the first fixture chat.
first_array() { tr -d '\n' <"$lm" | grep -o "\"$1\": \[[^]]*\]" | head -1 | sed -E 's/.*\[(.*)\]/\1/' | tr -d ' '; }
echo '{"messages": [{"role": "user", "content": "Write one sentence about the sea."}], "max_tokens": 5}' >"$tmp/chat.json"
got=$("$stave" chat --model "$model" --precision exact --threads 1 --temperature 0 --max-tokens 24 --json "$tmp/chat.json")
[ $? -eq 0 ] || fail "chat: exit status"
want="{\"prompt_token_ids\":[$(first_array prompt_ids)],\"completion_token_ids\":[$(first_array greedy_ids)],\"text\":"
case "$got" in
  "$want"*',"finish_reason":"length"}') ;;
  *) fail "chat --json: $got" ;;
esac
# The request from stdin, its own max_tokens, streamed text.
got=$("$stave" chat --model "$model" --threads 1 --temperature 0 - <"$tmp/chat.json")
[ $? -eq 0 ] && [ -n "$got" ] || fail "chat from stdin"
got=$("$stave" chat --model "$model" --threads 1 --json - <<<'{"messages": []}' 2>/dev/null)
[ $? -eq 2 ] || fail "chat without messages: exit status"

finish lm
