#!/usr/bin/env bash
# Runs make_video_reference.py on the GPU machine from .refdata/inputs.tar.xz (made by
# pack_inputs.sh); the results come back in $OUT/video-refout.tar.xz, to unpack into
# tests/data/video/ (next to the committed video_preprocessor_config.json).
set -euo pipefail
work="${WORK:-$(mktemp -d)}"
mkdir -p "$work/ref" "$work/out"
tar -xJf .refdata/inputs.tar.xz -C "$work/ref"
P="$work/ref/fixtures/public"
cp "$P/model-bf16/model-00001-of-00002.safetensors" "$P/model-bf16/tokenizer.json" "$P/model-mxfp4/"
cp "$P/model-bf16/tokenizer.json" "$work/ref/alt-bf16/"
PYTHONUNBUFFERED=1 python3 tools/reference/make_video_reference.py --fixtures "$work/ref/fixtures" \
  --alt-bf16 "$work/ref/alt-bf16" --video-config tests/data/video/video_preprocessor_config.json \
  --out "$work/out" 2>&1 | tee "$OUT/video-log.txt"
# The log kept beside the data names the scratch folder as $WORK, not as this machine's path.
sed "s|$work|\$WORK|g" "$OUT/video-log.txt" > "$work/out/make_video_reference.log"
tar -C "$work/out" -cJf "$OUT/video-refout.tar.xz" .
