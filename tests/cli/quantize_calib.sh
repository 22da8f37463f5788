#!/usr/bin/env bash
# `stave quantize --awq --calib FILE`: an empty calibration file (/dev/null included) is said to
# be empty, a missing one missing; both exit 2 with a JSON error, before anything is written.
# Usage: quantize_calib.sh STAVE_BINARY FIXTURES_DIR
set -uo pipefail
stave="$1"
bf16="$2/public/model-bf16"
. "$(dirname "$0")/checks.bash"
require_fixtures "$bf16"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
: >"$work/empty.txt"
check() {  # check CALIB EXPECTED_TEXT
  "$stave" quantize --in "$bf16" --out "$work/out" --awq --calib "$1" >"$work/stdout" 2>/dev/null
  local rc=$?
  [ $rc -eq 2 ] || fail "--calib $1: exit $rc, expected 2"
  grep -q '"error"' "$work/stdout" && grep -qF "$2" "$work/stdout" || fail "--calib $1: $(cat "$work/stdout"), expected '$2'"
  [ ! -e "$work/out" ] || fail "--calib $1: wrote $work/out"
}
check /dev/null "calibration file /dev/null is empty"
check "$work/empty.txt" "calibration file $work/empty.txt is empty"
check "$work/missing.txt" "calibration file $work/missing.txt does not exist"
finish "quantize --calib"
