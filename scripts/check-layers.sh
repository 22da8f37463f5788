#!/usr/bin/env bash
# The layer check: fails when a file includes a header from a layer above its own.
#
#   bash scripts/check-layers.sh [ROOT]     (ROOT: the repository; default: this script's)
#
# The table below is the one place the layers are written down (docs/architecture.md describes
# them). A folder's layer is that of the longest path in the table that prefixes it; a file may
# include headers of its own layer and of layers below. Every folder under src/ must have a row,
# so a new folder is a decision, not an accident. Rows marked `public` may include only the
# public headers (include/stave). The public headers are the API's vocabulary: they include no
# other header of the project, so every layer may use them.
#
# Exit status: 0 when every include points down, 1 with one line per violation
# (`file:line: includes HEADER from layer X above its own layer Y`), 2 for a bad ROOT.
set -euo pipefail

root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
[[ -d "$root/src" ]] || { echo "check-layers: $root has no src/ folder" >&2; exit 2; }
cd "$root"

# path            layer  name (bottom to top)
table='
include/stave     0      public
src/util          0      base
src/io            0      base
src/text          0      base
src/ops           1      ops
src/formats       1      ops
src/backends      2      backends
src/model         3      model
src/vision        3      model
src/decide        4      protocol
src/generate      4      protocol
src/engine        5      engine
src/quantize      5      engine
src/server        6      tools
src/eval          6      tools
src/export        6      tools
src/synth         6      tools
src/measure       6      tools
apps              7      front
python            7      front
tools             7      front
bench             7      front
fuzz              7      front
examples          7      public
'

# Every file that can include something, and every folder under src/.
mapfile -t files < <(find include/stave src apps python tools bench fuzz examples -type f \
  \( -name '*.h' -o -name '*.hpp' -o -name '*.cpp' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) \
  2>/dev/null | LC_ALL=C sort)
(( ${#files[@]} > 0 )) || { echo "check-layers: no source files under $root" >&2; exit 2; }

{
  echo "$table" | awk 'NF == 3 { print "T", $1, $2, $3 }'
  find src -mindepth 1 -type d | awk '{ print "D", $0 }'
  printf 'F %s\n' "${files[@]}"
  # Quoted includes, and <stave/...> which names a public header.
  grep -Hn -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*("[^"]+"|<stave/[^>]+>)' "${files[@]}" |
    awk '{ print "I", $0 }'
} | awk '
function layer_of(path,    p, best) {
  best = ""
  for (p in layer) if ((path == p || index(path, p "/") == 1) && length(p) > length(best)) best = p
  return best
}
function dirname(path) { sub(/\/[^\/]*$/, "", path); return path }
$1 == "T" { layer[$2] = $3; lname[$2] = $4; if ($4 == "public") public[$2] = 1; next }
$1 == "D" { dirs[++nd] = $2; next }
$1 == "F" { exists[$2] = 1; next }
$1 == "I" {
  line = substr($0, 3)
  split(line, part, ":"); file = part[1]; lineno = part[2]
  if (match(line, /"[^"]+"/)) hdr = substr(line, RSTART + 1, RLENGTH - 2)
  else { match(line, /<stave\/[^>]+>/); hdr = substr(line, RSTART + 1, RLENGTH - 2) }
  # Resolve as the compiler does with -Isrc -Iinclude: next to the file first, then src/, include/.
  target = ""
  if (exists[dirname(file) "/" hdr]) target = dirname(file) "/" hdr
  else if (exists["src/" hdr]) target = "src/" hdr
  else if (exists["include/" hdr]) target = "include/" hdr
  if (target == "") next  # a system or third-party header
  from = layer_of(file); to = layer_of(target)
  if (from == "") { if (!(file in orphan)) { orphan[file] = 1; printf "%s: is in no layer of scripts/check-layers.sh\n", file; bad++ }; next }
  if (to == "") next
  if (from in public && !(to in public)) {
    printf "%s:%s: includes %s from layer %s (%s), but %s may include only the public headers\n",
           file, lineno, hdr, lname[to], layer[to], from
    bad++
  } else if (layer[to] > layer[from]) {
    printf "%s:%s: includes %s from layer %s (%s) above its own layer %s (%s)\n",
           file, lineno, hdr, lname[to], layer[to], lname[from], layer[from]
    bad++
  }
}
END {
  for (i = 1; i <= nd; ++i)
    if (layer_of(dirs[i]) == "") { printf "%s: folder has no layer in scripts/check-layers.sh\n", dirs[i]; bad++ }
  if (bad) { printf "check-layers: %d violation(s)\n", bad; exit 1 }
  print "check-layers: every include points down"
}'
