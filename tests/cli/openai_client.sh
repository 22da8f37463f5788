#!/usr/bin/env bash
# `stave serve` answering the official `openai` npm client (tests/integration/openai_client):
# models.list, a chat completion whole and streamed, a text completion (logprobs in each); the greedy answer must
# be the one `stave chat --json --temperature 0` gives for the same messages.
# Usage: openai_client.sh STAVE_BINARY FIXTURES_DIR   (needs node and npm; the npm registry,
# or an npm cache that holds the locked packages)
set -uo pipefail
stave="$1"
fixtures="$2"
model="$fixtures/public/model-bf16"
client_dir="$(cd "$(dirname "$0")/../integration/openai_client" && pwd)"
. "$(dirname "$0")/checks.bash"
require_fixtures "$model"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  if [ "${STAVE_REQUIRE_FIXTURES:-0}" != "0" ]; then echo "node/npm not found (scripts/install-deps.sh installs them)"; exit 1; fi
  echo "node/npm not found; skipping"; exit 0
fi
tmp=$(mktemp -d)
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

# The locked client, into the folder's git-ignored node_modules.
if [ ! -f "$client_dir/node_modules/openai/package.json" ]; then
  (cd "$client_dir" && npm ci --no-audit --no-fund >"$tmp/npm.log" 2>&1) || { cat "$tmp/npm.log"; echo "npm ci failed"; exit 1; }
fi

# Port 0: the server picks a free one and says which in its "listening" event.
"$stave" serve --model "$model" --precision exact --threads 1 --host 127.0.0.1 --port 0 2>"$tmp/serve.log" &
server_pid=$!
base=""
for _ in $(seq 1 600); do
  base=$(grep -o '"address":"http://127.0.0.1:[0-9]*"' "$tmp/serve.log" | head -1 | sed -E 's/.*"(http[^"]*)"/\1/')
  if [ -n "$base" ] && grep -q '"event":"loaded"' "$tmp/serve.log"; then break; fi
  kill -0 "$server_pid" 2>/dev/null || { cat "$tmp/serve.log"; echo "stave serve exited"; exit 1; }
  sleep 0.1
done
[ -n "$base" ] || { cat "$tmp/serve.log"; echo "stave serve did not start"; exit 1; }

got=$(node "$client_dir/client.mjs" "$base/v1" "$client_dir/request.json")
[ $? -eq 0 ] || fail "the openai client failed: $got"
want=$("$stave" chat --model "$model" --precision exact --threads 1 --temperature 0 --json "$client_dir/request.json")
[ $? -eq 0 ] || fail "stave chat failed: $want"

field() { node -e 'const j = JSON.parse(process.argv[1]); console.log(JSON.stringify(j[process.argv[2]]))' "$1" "$2"; }
want_text=$(field "$want" text)
[ "$(field "$got" text)" = "$want_text" ] || fail "chat.completions text $(field "$got" text) != stave chat $want_text"
[ "$(field "$got" streamed)" = "$want_text" ] || fail "streamed text $(field "$got" streamed) != stave chat $want_text"
[ "$(field "$got" finish_reason)" = "$(field "$want" finish_reason)" ] || fail "finish_reason: $got vs $want"
[ "$(field "$got" streamed_finish_reason)" = "$(field "$want" finish_reason)" ] || fail "streamed finish_reason: $got"
want_tokens=$(node -e 'console.log(JSON.parse(process.argv[1]).completion_token_ids.length)' "$want")
[ "$(field "$got" completion_tokens)" = "$want_tokens" ] || fail "usage.completion_tokens: $got vs $want_tokens"
[ "$(field "$got" chunks)" -gt 2 ] || fail "the stream came in one piece: $got"
# The logprobs tokens, joined, spell the text (unless a token holds part of a character: U+FFFD).
case "$want_text" in
  *$'ï¿½'*) ;;
  *) [ "$(field "$got" logprob_tokens)" = "$want_text" ] || fail "logprobs tokens $(field "$got" logprob_tokens) != text $want_text" ;;
esac
echo "client: $got"
echo "stave chat: $want"
finish openai_client
