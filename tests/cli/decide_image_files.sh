#!/usr/bin/env bash
# `stave decide` (and `stave encode`) read local image files named in a request's `images`
# (paths relative to the request file) and answer exactly as with the same image inlined as a
# data URL; a missing file or one that is no image is an error naming images[i]; URLs stay
# refused.
# Usage: decide_image_files.sh STAVE_BINARY FIXTURES_DIR   (plain bash + jq)
set -uo pipefail
stave="$1"
cases="$2/public/cases"
model="$2/public/model-mxfp4"
. "$(dirname "$0")/checks.bash"
require_fixtures "$cases/017-image-one"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
inline="$cases/017-image-one/request.json"
url=$(jq -r '.images[0]' "$inline")
case "$url" in data:image/png\;base64,*) ;; *) fail "fixture image is not a PNG data URL"; finish images ;; esac
mkdir -p "$work/req/pics"
printf '%s' "${url#*,}" | base64 -d >"$work/req/pics/one.png"
jq '.images = ["pics/one.png"]' "$inline" >"$work/req/relative.json"
jq --arg p "$work/req/pics/one.png" '.images = [$p]' "$inline" >"$work/absolute.json"

"$stave" encode --model "$model" "$inline" >"$work/enc-inline.json" || fail "encode inline"
"$stave" encode --model "$model" "$work/req/relative.json" >"$work/enc-file.json" || fail "encode with a file"
cmp -s "$work/enc-inline.json" "$work/enc-file.json" || fail "encode: a file encodes otherwise than its data URL"
for req in "$inline" "$work/req/relative.json" "$work/absolute.json"; do
  "$stave" decide --model "$model" --precision exact --threads 1 "$req" >"$work/$(basename "$req").out" 2>/dev/null \
    || fail "decide $req: $(cat "$work/$(basename "$req").out")"
done
cmp -s "$work/request.json.out" "$work/relative.json.out" || fail "decide: relative file path answers otherwise"
cmp -s "$work/request.json.out" "$work/absolute.json.out" || fail "decide: absolute file path answers otherwise"

refused() {  # refused REQUEST TEXT
  "$stave" decide --model "$model" --threads 1 "$1" >"$work/err.out" 2>/dev/null
  local rc=$?
  [ $rc -eq 2 ] && grep -qF "$2" "$work/err.out" || fail "$(basename "$1"): exit $rc, $(cat "$work/err.out"), expected '$2'"
}
jq '.images = ["pics/missing.png"]' "$inline" >"$work/req/missing.json"
refused "$work/req/missing.json" "images[0]: no image file $work/req/pics/missing.png"
echo "not an image" >"$work/req/pics/text.png"
jq '.images = ["pics/text.png"]' "$inline" >"$work/req/text.json"
refused "$work/req/text.json" "images[0]: $work/req/pics/text.png is not a PNG, JPEG or WebP file"
jq '.images = ["https://example.com/a.png"]' "$inline" >"$work/req/url.json"
refused "$work/req/url.json" "images[0]: remote image URLs are not supported"
finish "decide with image files"
