#!/usr/bin/env bash
# Regenerates fuzz/corpus/fuzz_video: compiles make_video_seeds.cpp against Debian's FFmpeg
# libraries (scripts/install-deps.sh) and writes one tiny video per container/codec.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$root/fuzz/corpus/fuzz_video}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
g++ -std=c++20 -O1 -I"$root/tests" -I"$root/src" "$root/fuzz/tools/make_video_seeds.cpp" -o "$work/seeds" \
  $(pkg-config --cflags --libs libavformat libavcodec libswscale libavutil)
"$work/seeds" "$out"
