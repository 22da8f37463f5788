#!/usr/bin/env bash
# stave quantize on the BF16 fixture: a verified release whose config.json is the MXFP4
# fixture's; error cases answer with exit status 2 and a JSON error on stdout.
# Usage: bash tests/cli/quantize.sh <stave binary> <fixtures dir>
set -euo pipefail
stave="$1"
fixtures="$2"
bf16="$fixtures/public/model-bf16"
mxfp4="$fixtures/public/model-mxfp4"
. "$(dirname "$0")/checks.bash"  # require_fixtures: skip, or fail under STAVE_REQUIRE_FIXTURES
require_fixtures "$bf16"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$stave" quantize --in "$bf16" --out "$tmp/out" --no-progress > "$tmp/stdout"
grep -q "quantized 62 linears to MXFP4" "$tmp/stdout" || fail "summary: $(cat "$tmp/stdout")"
"$stave" verify "$tmp/out" > "$tmp/verify" || fail "verify: $(cat "$tmp/verify")"
grep -q "^verified" "$tmp/verify" || fail "verify output"
cmp "$tmp/out/config.json" "$mxfp4/config.json" || fail "config.json differs from the MXFP4 fixture's"
for f in tokenizer.json tokenizer_config.json processor_config.json chat_template.jinja joint_head.safetensors joint_head_config.json; do
  cmp "$tmp/out/$f" "$bf16/$f" || fail "$f not copied unchanged"
done
grep -q '"total_size": 19708896' "$tmp/out/model.safetensors.index.json" || fail "index total_size"

# Several shards with --shard-size (embed_tokens and lm_head are 9.7 MB each: shards of their own).
"$stave" quantize --in "$bf16" --out "$tmp/sharded" --shard-size 1MB --no-progress > /dev/null
[[ -f "$tmp/sharded/model-00004-of-00004.safetensors" ]] || fail "expected 4 shards: $(ls "$tmp/sharded")"
"$stave" verify "$tmp/sharded" > /dev/null || fail "verify sharded"

# The progress bar only when asked (stderr is not a terminal here).
"$stave" quantize --in "$bf16" --out "$tmp/p1" > /dev/null 2> "$tmp/err1"
[[ ! -s "$tmp/err1" ]] || fail "progress drawn on a non-terminal: $(cat "$tmp/err1")"
"$stave" quantize --in "$bf16" --out "$tmp/p2" --progress > /dev/null 2> "$tmp/err2"
grep -q "100%" "$tmp/err2" || fail "no progress with --progress"

# Refusals: exit status 2, JSON error naming the problem.
set +e
"$stave" quantize --in "$bf16" --out "$tmp/out" > "$tmp/e1"; rc=$?
set -e
[[ $rc -eq 2 ]] || fail "non-empty --out: exit $rc"
grep -q '"error"' "$tmp/e1" && grep -q "not empty" "$tmp/e1" || fail "non-empty --out message: $(cat "$tmp/e1")"
set +e
"$stave" quantize --in "$bf16" --out "$tmp/e2dir" --exclude model.language_model.layers.0.mlp.gate_proj > "$tmp/e2"; rc=$?
"$stave" quantize --in "$mxfp4" --out "$tmp/e3dir" > "$tmp/e3"; rc3=$?
"$stave" quantize --in "$bf16" --out "$tmp/e4dir" --scale-mode rceil > "$tmp/e4"; rc4=$?
set -e
[[ $rc -eq 2 ]] && grep -q "gate/up_proj" "$tmp/e2" || fail "split fused group: exit $rc $(cat "$tmp/e2")"
[[ $rc3 -eq 2 ]] && grep -q "already has a quantization_config" "$tmp/e3" || fail "quantized input: $(cat "$tmp/e3")"
[[ $rc4 -eq 2 ]] && grep -q "scale-mode" "$tmp/e4" || fail "bad scale mode: $(cat "$tmp/e4")"
# AWQ flags: --awq needs --calib, --calib needs --awq (exit 2, said so).
set +e
"$stave" quantize --in "$bf16" --out "$tmp/e5dir" --awq > "$tmp/e5"; rc5=$?
"$stave" quantize --in "$bf16" --out "$tmp/e6dir" --calib x.txt > "$tmp/e6"; rc6=$?
set -e
[[ $rc5 -eq 2 ]] && grep -q "needs --calib" "$tmp/e5" || fail "--awq without --calib: $(cat "$tmp/e5")"
[[ $rc6 -eq 2 ]] && grep -q "need --awq" "$tmp/e6" || fail "--calib without --awq: $(cat "$tmp/e6")"

# AWQ end to end: calibrate on a text file, fold the smoothing into the weights, quantize. The
# result verifies and decides, and differs from the plain quantization (the norm fold
# w' = (w + 1)/s - 1 and the scaled gate/up/down weights).
calib="$(cd "$(dirname "$0")/../data/awq" && pwd)/calib.txt"
"$stave" quantize --in "$bf16" --out "$tmp/awq" --awq --calib "$calib" --no-progress > "$tmp/awq.out" 2> "$tmp/awq.err" \
  || fail "quantize --awq: $(cat "$tmp/awq.out" "$tmp/awq.err")"
grep -q "AWQ: 8 samples" "$tmp/awq.err" || fail "AWQ calibration summary: $(cat "$tmp/awq.err")"
grep -q "quantized 62 linears to MXFP4" "$tmp/awq.out" || fail "AWQ summary: $(cat "$tmp/awq.out")"
"$stave" verify "$tmp/awq" > /dev/null || fail "verify AWQ release"
cmp -s "$tmp/awq/config.json" "$mxfp4/config.json" || fail "AWQ config.json differs from the MXFP4 fixture's"
if cmp -s "$tmp/awq/model.safetensors" "$tmp/out/model.safetensors" 2>/dev/null || \
   cmp -s "$tmp/awq/model-00001-of-00001.safetensors" "$tmp/out/model-00001-of-00001.safetensors" 2>/dev/null; then
  fail "AWQ changed no weight"
fi
case_dir="$fixtures/public/cases/000-docs-example"
"$stave" decide --model "$tmp/awq" --precision exact "$case_dir/request.json" > "$tmp/awq.decision" \
  || fail "decide on the AWQ release: $(cat "$tmp/awq.decision")"
grep -q '"answers"' "$tmp/awq.decision" || fail "AWQ decision: $(cat "$tmp/awq.decision")"
# stave eval: both quantized releases against the BF16 source on the fixture requests.
"$stave" eval --model "$tmp/awq" --against "$bf16" "$case_dir" > "$tmp/eval" 2>/dev/null || fail "eval: $(cat "$tmp/eval")"
grep -q "| 1 | 0 |" "$tmp/eval" || fail "eval table: $(cat "$tmp/eval")"
echo "quantize CLI: ok"
