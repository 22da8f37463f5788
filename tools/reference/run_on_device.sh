#!/usr/bin/env bash
# Runs make_reference.py on the GPU machine from .refdata/inputs.tar.xz; results in $OUT.
#   OUT=RESULTS_DIR bash tools/reference/run_on_device.sh WORK_DIR
#   WORK_DIR: a scratch folder on the device's local disk (the unpacked inputs and the outputs)
set -euo pipefail
usage() { echo "usage: OUT=RESULTS_DIR bash tools/reference/run_on_device.sh WORK_DIR" >&2; exit 2; }
[ $# -eq 1 ] && [ -n "$1" ] || usage
[ -n "${OUT:-}" ] || { echo "OUT is not set: the folder where results go" >&2; usage; }
[ -f .refdata/inputs.tar.xz ] || { echo "no .refdata/inputs.tar.xz here (tools/reference/pack_inputs.sh makes it)" >&2; exit 2; }
work="$1"
mkdir -p "$work/ref" "$work/refout" "$OUT" && tar -xJf .refdata/inputs.tar.xz -C "$work/ref"
P="$work/ref/fixtures/public"
cp "$P/model-bf16/model-00001-of-00002.safetensors" "$P/model-bf16/tokenizer.json" "$P/model-mxfp4/"
cp "$P/model-bf16/tokenizer.json" "$work/ref/alt-bf16/"
PYTHONUNBUFFERED=1 python3 tools/reference/make_reference.py --fixtures "$work/ref/fixtures" \
  --alt-bf16 "$work/ref/alt-bf16" --requests tools/reference/requests --out "$work/refout" 2>&1 | tee "$OUT/log.txt"
tar -C "$work/refout" -cJf "$OUT/refout.tar.xz" .
