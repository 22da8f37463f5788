#!/usr/bin/env bash
# Every numeric option of every command checks its range: a negative count, a port past
# 65535, a zero where at least one is needed, or text where a number belongs is a usage
# error naming the option, exit status 2 with {"error": ...} on stdout — before any model is
# loaded (the model path here does not exist), never a silent wrap (--port 99999 once bound
# 34463).
# Usage: option_ranges.sh STAVE_BINARY FIXTURES_DIR
set -uo pipefail
stave="$1"
. "$(dirname "$0")/checks.bash"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
m="$work/no-model"
refused() {  # refused OPTION ARGS...: the command must refuse, naming OPTION
  local option="$1"; shift
  timeout 20 "$stave" "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  [ $rc -eq 2 ] || { fail "stave $*: exit $rc, expected 2 ($(cat "$work/out" "$work/err"))"; return; }
  grep -q '^{"error":{"message":' "$work/out" || fail "stave $*: no JSON error: $(cat "$work/out")"
  grep -qF -- "$option" "$work/out" || fail "stave $*: the error does not name $option: $(cat "$work/out")"
}
refused --port        serve --model "$m" --port 99999
refused --port        serve --model "$m" --port -1
refused --port        serve --model "$m" --port 80x
refused --threads     serve --model "$m" --threads -1
refused --batch-tokens serve --model "$m" --batch-tokens -1
refused --max-length  serve --model "$m" --max-length 0
refused --max-questions serve --model "$m" --max-questions -1
refused --max-options serve --model "$m" --max-options -3
refused --max-score-levels serve --model "$m" --max-score-levels 0
refused --max-id-length serve --model "$m" --max-id-length -1
refused --max-body-bytes serve --model "$m" --max-body-bytes -1
refused --max-running serve --model "$m" --max-running 0
refused --max-queue   serve --model "$m" --max-queue -1
refused --max-decode-batch serve --model "$m" --max-decode-batch 0
refused --timeout-ms  serve --model "$m" --timeout-ms 0
refused --http-threads serve --model "$m" --http-threads -2
refused --threads     decide --model "$m" --threads -1 req.json
refused --max-state-tokens decide --model "$m" --max-state-tokens -1 req.json
refused --max-length  decide --model "$m" --max-length -5 req.json
refused --pack        decide --model "$m" --pack 0 --batch in.jsonl
refused --pack        decide --model "$m" --pack 100000 --batch in.jsonl
refused --max-length  encode --model "$m" --max-length 0 req.json
refused --threads     bench --model "$m" --threads -1
refused --repeat      bench --model "$m" --repeat 0
refused --warmup      bench --model "$m" --warmup -1
refused --questions   bench --model "$m" --questions 0
refused --batch       bench --model "$m" --batch 0
refused --threads     eval --model "$m" --against "$m" --threads -1 req.json
refused --max-length  eval --model "$m" --against "$m" --max-length 0 req.json
refused --calib-samples quantize --in "$m" --out "$work/q" --calib-samples 0
refused --seq-len     quantize --in "$m" --out "$work/q" --seq-len -1
refused --shard-size  quantize --in "$m" --out "$work/q" --shard-size -5MB
refused --prompt-tokens bench --model "$m" --prompt-tokens 512,-5
refused --image       bench --model "$m" --image 0x-3
refused --layers      synth --out "$work/s" --layers 0
refused --seed        synth --out "$work/s" --seed -1
refused --shard-size  synth --out "$work/s" --shard-size 0
# In range, the same commands go on to the model, which is missing: a different error.
timeout 20 "$stave" decide --model "$m" --threads 0 --max-state-tokens 0 "$work/none.json" >"$work/out" 2>&1
grep -q "request file\|cannot read\|does not exist" "$work/out" || fail "in-range options refused: $(cat "$work/out")"
finish "option ranges"
