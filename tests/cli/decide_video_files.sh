#!/usr/bin/env bash
# `stave decide` / `stave encode` read local video files named in a request's `videos` (paths
# relative to the request file), and arrays of image files as a video's frames; the answer is
# the same as with the file inlined as a data URL; a missing file or one that is no video is an
# error naming videos[i]; URLs stay refused. The video is examples/requests/clip.mp4 (made by
# fuzz/tools/make_video_seeds.sh --example with FFmpeg's encoder).
# Usage: decide_video_files.sh STAVE_BINARY FIXTURES_DIR   (plain bash + jq)
set -uo pipefail
stave="$1"
model="$2/public/model-bf16"
root="$(cd "$(dirname "$0")/../.." && pwd)"
. "$(dirname "$0")/checks.bash"
require_fixtures "$model"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/req/clips"
cp "$root/examples/requests/clip.mp4" "$work/req/clips/clip.mp4"
jq '.videos = ["clips/clip.mp4"]' "$root/examples/requests/video-clip.json" >"$work/req/relative.json"
jq --arg d "data:video/mp4;base64,$(base64 -w0 "$work/req/clips/clip.mp4")" '.videos = [$d]' \
  "$root/examples/requests/video-clip.json" >"$work/inline.json"

"$stave" encode --model "$model" "$work/inline.json" >"$work/enc-inline.json" || fail "encode inline"
"$stave" encode --model "$model" "$work/req/relative.json" >"$work/enc-file.json" || fail "encode with a file"
cmp -s "$work/enc-inline.json" "$work/enc-file.json" || fail "encode: a file encodes otherwise than its data URL"
jq -e '.media.video_grid_thw | length == 1' "$work/enc-file.json" >/dev/null || fail "encode: no video_grid_thw"
for req in "$work/inline.json" "$work/req/relative.json"; do
  "$stave" decide --model "$model" --threads 1 "$req" >"$work/$(basename "$req").out" 2>/dev/null \
    || fail "decide $req: $(cat "$work/$(basename "$req").out")"
done
cmp -s "$work/inline.json.out" "$work/relative.json.out" || fail "decide: a file path answers otherwise than its data URL"

refused() {  # refused REQUEST TEXT
  "$stave" decide --model "$model" --threads 1 "$1" >"$work/err.out" 2>/dev/null
  local rc=$?
  [ $rc -eq 2 ] && grep -qF "$2" "$work/err.out" || fail "$(basename "$1"): exit $rc, $(cat "$work/err.out"), expected '$2'"
}
jq '.videos = ["clips/missing.mp4"]' "$work/req/relative.json" >"$work/req/missing.json"
refused "$work/req/missing.json" "videos[0]: no video file $work/req/clips/missing.mp4"
echo "not a video" >"$work/req/clips/text.mp4"
jq '.videos = ["clips/text.mp4"]' "$work/req/relative.json" >"$work/req/text.json"
refused "$work/req/text.json" "videos[0]: $work/req/clips/text.mp4 is not an MP4, WebM or MKV file"
jq '.videos = [["clips/missing.png"]]' "$work/req/relative.json" >"$work/req/frames.json"
refused "$work/req/frames.json" "videos[0]: frame 0: no image file $work/req/clips/missing.png"
jq '.videos = ["https://example.com/a.mp4"]' "$work/req/relative.json" >"$work/req/url.json"
refused "$work/req/url.json" "videos[0]: remote video URLs are not supported"
finish "decide with video files"
