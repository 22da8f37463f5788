#!/usr/bin/env bash
# The public API stands alone: every header under include/stave includes only the standard
# library and other public headers, and compiles by itself with include/ as the only include
# path (no internal header, no private dependency such as nlohmann/json can leak to users).
# Usage: public_headers.sh SOURCE_DIR CXX
set -uo pipefail
src="$1"; cxx="$2"
. "$src/tests/cli/checks.bash"
headers=("$src"/include/stave/*.h)
[ -e "${headers[0]}" ] || { fail "no headers under $src/include/stave"; finish "public headers"; }
for h in "${headers[@]}"; do
  name="stave/$(basename "$h")"
  while IFS= read -r line; do
    inc=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^>"]+)[>"].*/\1/' <<<"$line")
    case "$line" in
      *\"stave/*) [ -f "$src/include/$inc" ] || fail "$name includes $inc, which is not a public header" ;;
      *\"*) fail "$name includes \"$inc\": public headers include \"stave/...\" or standard headers only" ;;
      *) [[ "$inc" == */* || "$inc" == *.* ]] && fail "$name includes <$inc>: not a standard header" ;;
    esac
  done < <(grep -E '^[[:space:]]*#[[:space:]]*include' "$h")
  out=$("$cxx" -std=c++20 -fsyntax-only -I "$src/include" -x c++ - 2>&1 <<<"#include <$name>") ||
    fail "$name does not compile alone with include/ as the only include path: $out"
done
finish "public headers (${#headers[@]})"
