#!/usr/bin/env bash
# Packs what make_reference.py reads into .refdata/inputs.tar.xz (one file under the device
# machine's 64 MiB transfer limit): the shared fixtures, without the files that repeat, and the
# "alt" synthetic release (stave synth --preset alt --seed 1).
#   bash tools/reference/pack_inputs.sh FIXTURES_DIR   (FIXTURES_DIR holds public/)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
if [ $# -ne 1 ] || [ -z "$1" ]; then echo "usage: bash tools/reference/pack_inputs.sh FIXTURES_DIR" >&2; exit 2; fi
fixtures="$1"
[ -d "$fixtures/public" ] || { echo "FIXTURES_DIR $fixtures has no public/ folder" >&2; exit 2; }
stave="${STAVE:-$root/build/stave}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/fixtures" "$root/.refdata"
cp -r "$fixtures/public" "$work/fixtures/"
chmod -R u+w "$work/fixtures"
rm "$work/fixtures/public/model-mxfp4/model-00001-of-00002.safetensors" \
   "$work/fixtures/public/model-mxfp4/tokenizer.json"
"$stave" synth --preset alt --seed 1 --out "$work/alt-bf16" --tokenizer "$fixtures/public/model-bf16/tokenizer.json" >/dev/null
rm "$work/alt-bf16/tokenizer.json"
tar -C "$work" -cf - fixtures alt-bf16 | xz -6 -T2 > "$root/.refdata/inputs.tar.xz"
ls -la "$root/.refdata/inputs.tar.xz"
