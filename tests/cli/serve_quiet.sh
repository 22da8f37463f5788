#!/usr/bin/env bash
# `stave serve --quiet` silences the request lines only: the startup events and the warning
# that a `stave synth` model's weights are random still print; without --quiet a request line
# prints too.
# Usage: serve_quiet.sh STAVE_BINARY FIXTURES_DIR
set -uo pipefail
stave="$1"
model_src="$2/public/model-mxfp4"
. "$(dirname "$0")/checks.bash"
require_fixtures "$model_src"
model_src="$(cd "$model_src" && pwd)"
work="$(mktemp -d)"
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
# The fixture release, marked as `stave synth` output (links: nothing is copied).
mkdir "$work/model"
for f in "$model_src"/*; do ln -s "$f" "$work/model/"; done
echo '{}' >"$work/model/stave_synth.json"

serve_and_ask() {  # serve_and_ask LOG [--quiet]: start, wait until loaded, GET /health, stop
  local log="$1"; shift
  "$stave" serve --model "$work/model" --port 0 --threads 1 "$@" 2>"$log" >/dev/null &
  pid=$!
  local port=""
  for _ in $(seq 1 300); do
    port=$(grep -o 'http://127.0.0.1:[0-9]*' "$log" | head -1 | sed 's/.*://')
    if [ -n "$port" ] && grep -q '"loaded"' "$log"; then break; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$port" ]; then fail "serve $*: no listening address: $(cat "$log")"; return; fi
  exec 3<>"/dev/tcp/127.0.0.1/$port"
  printf 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' >&3
  head -1 <&3 >"$log.status"
  exec 3<&-
  sleep 0.2  # the request line is written after the response
  kill -TERM "$pid"; wait "$pid"; pid=""
}

serve_and_ask "$work/quiet.log" --quiet
grep -q "200" "$work/quiet.log.status" || fail "--quiet: /health: $(cat "$work/quiet.log.status")"
grep -q '"listening"' "$work/quiet.log" || fail "--quiet hid the listening event: $(cat "$work/quiet.log")"
grep -q '"loaded"' "$work/quiet.log" || fail "--quiet hid the loaded event"
grep -q 'RANDOM' "$work/quiet.log" || fail "--quiet hid the random-weights warning: $(cat "$work/quiet.log")"
grep -q '"path":"/health"' "$work/quiet.log" && fail "--quiet printed a request line"

serve_and_ask "$work/loud.log"
grep -q '"path":"/health"' "$work/loud.log" || fail "without --quiet no request line: $(cat "$work/loud.log")"
finish "serve --quiet"
