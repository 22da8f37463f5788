#!/usr/bin/env bash
# `stave serve --api-key-file`: the key comes from the file (never on the command line, so not in
# `ps`), /v1/models needs it and /health does not; binding beyond loopback without a key logs a
# warning; SIGTERM exits 0. Plain bash (/dev/tcp): no curl needed.
# Usage: serve_api_key.sh STAVE_BINARY FIXTURES_DIR
set -uo pipefail
stave="$1"
fixtures="$2"
model="$fixtures/public/model-mxfp4"
. "$(dirname "$0")/checks.bash"
require_fixtures "$model"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"; [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null' EXIT

# GET PATH [HEADER]: the status code of one request to 127.0.0.1:$port.
status_of() {
  exec 3<>"/dev/tcp/127.0.0.1/$port" || { echo 000; return; }
  printf 'GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n%s\r\n' "$1" "${2:+$2$'\r\n'}" >&3
  head -c 12 <&3 | sed -E 's/^HTTP\/1\.1 ([0-9]{3}).*/\1/'
  exec 3<&- 3>&-
}
# Starts the server with the given flags; sets pid and port (from the "listening" event).
start() {
  "$stave" serve --model "$model" --port 0 --threads 1 "$@" 2>"$tmp/log" &
  pid=$!
  port=""
  for _ in $(seq 1 600); do
    port=$(sed -nE 's/.*"address":"http:\/\/[^"]*:([0-9]+)".*/\1/p' "$tmp/log" | head -1)
    [ -n "$port" ] && return 0
    sleep 0.1
  done
  fail "no listening event: $(cat "$tmp/log")"
  return 1
}

printf 's3cret-key\n' >"$tmp/key"
if start --host 0.0.0.0 --api-key-file "$tmp/key"; then
  for _ in $(seq 1 600); do [ "$(status_of /health)" = 200 ] && break; sleep 0.2; done
  [ "$(status_of /health)" = 200 ] || fail "/health never 200: $(cat "$tmp/log")"
  [ "$(status_of /v1/models)" = 401 ] || fail "/v1/models without the key is not 401"
  [ "$(status_of /v1/models 'Authorization: Bearer wrong')" = 401 ] || fail "a wrong key is not 401"
  [ "$(status_of /v1/models 'Authorization: Bearer s3cret-key')" = 200 ] || fail "the file's key is not accepted"
  ps -o args= -p "$pid" | grep -q s3cret && fail "the key is visible in ps"
  grep -q 'beyond loopback' "$tmp/log" && fail "a warning although a key is set"
  kill -TERM "$pid"
  wait "$pid"
  status=$?
  pid=""
  [ $status -eq 0 ] || fail "exit status $status after SIGTERM"
fi

if start --host 0.0.0.0; then
  for _ in $(seq 1 50); do grep -q 'beyond loopback' "$tmp/log" && break; sleep 0.1; done
  grep -q '"event":"warning".*beyond loopback without an API key' "$tmp/log" || fail "no warning: $(cat "$tmp/log")"
  kill -TERM "$pid"
  wait "$pid"
  pid=""
fi

"$stave" serve --model "$model" --api-key-file "$tmp/missing" >/dev/null 2>&1
[ $? -ne 0 ] || fail "a missing key file is accepted"
finish serve_api_key
