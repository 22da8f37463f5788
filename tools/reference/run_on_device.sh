#!/usr/bin/env bash
# Runs make_reference.py on the GPU machine from .refdata/inputs.tar.xz; results in $OUT.
set -euo pipefail
mkdir -p /tmp/ref && tar -xJf .refdata/inputs.tar.xz -C /tmp/ref
P=/tmp/ref/fixtures/public
cp $P/model-bf16/model-00001-of-00002.safetensors $P/model-bf16/tokenizer.json $P/model-mxfp4/
cp $P/model-bf16/tokenizer.json /tmp/ref/alt-bf16/
PYTHONUNBUFFERED=1 python3 tools/reference/make_reference.py --fixtures /tmp/ref/fixtures \
  --alt-bf16 /tmp/ref/alt-bf16 --requests tools/reference/requests --out /tmp/refout 2>&1 | tee "$OUT/log.txt"
tar -C /tmp/refout -cJf "$OUT/refout.tar.xz" .
