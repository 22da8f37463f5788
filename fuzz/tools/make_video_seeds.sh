#!/usr/bin/env bash
# Regenerates fuzz/corpus/fuzz_video: compiles make_video_seeds.cpp against Debian's FFmpeg
# libraries (scripts/install-deps.sh) and writes one tiny video per container/codec; with
# `--example FILE` it writes the README's example clip (examples/requests/clip.mp4) instead.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
if [ "${1:-}" = "--example" ]; then mode=(--example "${2:?usage: make_video_seeds.sh --example FILE}"); out=""; else
  out="${1:-$root/fuzz/corpus/fuzz_video}"; mode=("$out"); fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
[ -n "$out" ] && mkdir -p "$out"
g++ -std=c++20 -O1 -I"$root/tests" -I"$root/src" "$root/fuzz/tools/make_video_seeds.cpp" -o "$work/seeds" \
  $(pkg-config --cflags --libs libavformat libavcodec libswscale libavutil)
"$work/seeds" "${mode[@]}"
