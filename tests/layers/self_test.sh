#!/usr/bin/env bash
# The layer check must fail on a tree that breaks the layers (so it cannot pass by accident):
# a clean miniature tree passes; a downward include passes; an upward include, a folder without
# a layer and an example that includes an internal header each fail, naming file and line.
#   bash tests/layers/self_test.sh REPO_ROOT
set -euo pipefail
check="$1/scripts/check-layers.sh"
tree="$(mktemp -d)"
trap 'rm -rf "$tree"' EXIT

mkdir -p "$tree"/src/{util,model,decide} "$tree"/include/stave "$tree"/examples
echo '#pragma once' >"$tree/include/stave/errors.h"
printf '#pragma once\n#include "stave/errors.h"\n' >"$tree/src/util/base.h"
printf '#pragma once\n#include "util/base.h"\n' >"$tree/src/model/net.h"
printf '#include "model/net.h"\n#include <vector>\n' >"$tree/src/decide/use.cpp"
printf '#include "stave/errors.h"\n' >"$tree/examples/ok.cpp"

fail() { echo "FAIL: $*" >&2; exit 1; }
expect_fail() {  # expect_fail WHAT PATTERN: the check exits 1 and prints PATTERN
  local out rc=0
  out="$(bash "$check" "$tree" 2>&1)" || rc=$?
  [[ $rc == 1 ]] || fail "$1: exit $rc, expected 1; output: $out"
  grep -qF -- "$2" <<<"$out" || fail "$1: no '$2' in: $out"
}

bash "$check" "$tree" >/dev/null || fail "a clean tree was refused"

# An upward include: model (3) includes decide (4).
printf '#pragma once\n#include "util/base.h"\n#include "decide/use.h"\n' >"$tree/src/model/net.h"
echo '#pragma once' >"$tree/src/decide/use.h"
expect_fail "upward include" "src/model/net.h:3: includes decide/use.h from layer protocol (4) above its own layer model (3)"
printf '#pragma once\n#include "util/base.h"\n' >"$tree/src/model/net.h"
bash "$check" "$tree" >/dev/null || fail "the repaired tree was refused"

# A folder the table does not know.
mkdir "$tree/src/newthing" && echo '#pragma once' >"$tree/src/newthing/x.h"
expect_fail "unknown folder" "src/newthing: folder has no layer"
rm -r "$tree/src/newthing"

# An example that reaches into src/.
printf '#include "util/base.h"\n' >"$tree/examples/bad.cpp"
expect_fail "example with an internal header" "examples/bad.cpp:1: includes util/base.h"
rm "$tree/examples/bad.cpp"

# A public header that includes an internal one.
printf '#pragma once\n#include "util/base.h"\n' >"$tree/include/stave/errors.h"
expect_fail "public header with an internal header" "include/stave/errors.h:2: includes util/base.h"
echo "layers self-test: ok"
