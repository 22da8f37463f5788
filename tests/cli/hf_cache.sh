#!/usr/bin/env bash
# Repo ids through a Hugging Face cache (a fake one, built here from the fixture release):
# HF_HUB_CACHE and HF_HOME, --revision as a branch under refs/ or a commit hash, and a model
# that is not cached: exit 2 with the download command, --revision included.
# Usage: hf_cache.sh STAVE_BINARY FIXTURES_DIR
set -uo pipefail
stave="$1"
model="$2/public/model-mxfp4"
request="$2/public/cases/000-docs-example/request.json"
. "$(dirname "$0")/checks.bash"
require_fixtures "$model"
model="$(cd "$model" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
main=0123456789abcdef0123456789abcdef01234567
dev=89abcdef0123456789abcdef0123456789abcdef
repo="$work/home/hub/models--Org--Clef"
mkdir -p "$repo/refs" "$repo/snapshots/$main" "$repo/snapshots/$dev"
for f in "$model"/*; do ln -s "$f" "$repo/snapshots/$main/"; ln -s "$f" "$repo/snapshots/$dev/"; done
printf '%s' "$main" >"$repo/refs/main"
printf '%s' "$dev" >"$repo/refs/dev"
rm "$repo/snapshots/$dev/tokenizer.json"  # so that resolving to the dev snapshot shows

"$stave" encode --model "$model" "$request" >"$work/folder.json" || fail "encode from the folder"
encode() { env -u HF_HUB_CACHE -u HF_HOME "$@" "$stave" encode --model Org/Clef "${extra[@]}" "$request" >"$work/out" 2>/dev/null; }
extra=()
encode HF_HOME="$work/home" || fail "HF_HOME: $(cat "$work/out")"
cmp -s "$work/out" "$work/folder.json" || fail "HF_HOME: encodes otherwise than the folder"
encode HF_HOME="$work/nowhere" HF_HUB_CACHE="$work/home/hub" || fail "HF_HUB_CACHE: $(cat "$work/out")"
cmp -s "$work/out" "$work/folder.json" || fail "HF_HUB_CACHE: encodes otherwise than the folder"
extra=(--revision "$main")
encode HF_HOME="$work/home" || fail "--revision HASH: $(cat "$work/out")"
extra=(--revision dev)
encode HF_HOME="$work/home"
grep -q "snapshots/$dev has no tokenizer.json" "$work/out" || fail "--revision dev did not pick refs/dev: $(cat "$work/out")"
extra=(--revision v2)
encode HF_HOME="$work/home"
grep -qF 'huggingface-cli download Org/Clef --revision v2`' "$work/out" || fail "missing revision: $(cat "$work/out")"
extra=()
encode HF_HOME="$work/empty"; rc=$?
[ $rc -eq 2 ] || fail "not cached: exit $rc"
grep -qF 'is not in the Hugging Face cache' "$work/out" && grep -qF '`huggingface-cli download Org/Clef`' "$work/out" \
  || fail "not cached: $(cat "$work/out")"
env -u HF_HUB_CACHE HF_HOME="$work/home" "$stave" decide --model Org/Clef --revision "$main" --threads 1 "$request" >"$work/decide.json" 2>/dev/null \
  || fail "decide --revision: $(cat "$work/decide.json")"
grep -q '"answers"' "$work/decide.json" || fail "decide --revision: no answers"
finish "hf cache"
