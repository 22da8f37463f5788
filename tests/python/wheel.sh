#!/usr/bin/env bash
# The wheel `pip install .` builds (pyproject.toml -> python/backend/stave_build_backend.py),
# made with pip from this build folder's module, installed into a fresh venv with no index, then
# imported there: stave.load(...).systemone(...) answers as `stave decide` does.
# Usage: wheel.sh PYTHON SOURCE_DIR BUILD_DIR STAVE_CLI FIXTURES_DIR
set -uo pipefail
python="$1"; src="$2"; build="$3"; stave="$4"; fixtures="$5"
. "$src/tests/cli/checks.bash"
model="$fixtures/public/model-mxfp4"
request="$fixtures/public/cases/000-docs-example/request.json"
require_fixtures "$model"
if ! "$python" -m pip --version >/dev/null 2>&1; then
  echo "pip is missing for $python (Debian: python3-pip)"; exit 1
fi
work="$build/python-wheel-test"  # inside the build folder: removed and remade each run
rm -rf "$work" && mkdir -p "$work"

# pip's isolated build environment installs nothing (requires = []): no network needed.
(cd "$src" && "$python" -m pip wheel --no-deps --no-index --config-settings "build-dir=$build" -w "$work/wheels" .) \
  >"$work/pip-wheel.log" 2>&1 || { cat "$work/pip-wheel.log"; fail "pip wheel failed"; finish wheel; }
wheel=$(ls "$work"/wheels/stave-*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] || { fail "no wheel in $work/wheels"; finish wheel; }
"$python" - "$wheel" <<'PY' || fail "the wheel's RECORD does not match its files"
import base64, hashlib, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
record = [n for n in z.namelist() if n.endswith(".dist-info/RECORD")][0]
rows = [l.split(",") for l in z.read(record).decode().splitlines() if l]
assert sorted(r[0] for r in rows) == sorted(z.namelist()), "RECORD lists other files"
for name, digest, size in rows:
    if name == record: continue
    data = z.read(name)
    want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    assert digest == want and int(size) == len(data), name
assert any(n.startswith("stave.") and n.endswith(".so") for n in z.namelist()), "no extension module"
PY

"$python" -m venv "$work/venv" >"$work/venv.log" 2>&1 || { cat "$work/venv.log"; fail "venv"; finish wheel; }
"$work/venv/bin/python" -m pip install --no-index --no-deps "$wheel" >"$work/pip-install.log" 2>&1 \
  || { cat "$work/pip-install.log"; fail "pip install of the wheel failed"; finish wheel; }
(cd "$work" && "$work/venv/bin/python" -c "
import json, sys, stave
assert stave.__file__.startswith(sys.prefix), stave.__file__   # the installed copy, not the build's
print(json.dumps(stave.load(sys.argv[1], threads=1).systemone(json.load(open(sys.argv[2])))))
" "$model" "$request") >"$work/answer.json" 2>"$work/answer.err" || fail "import from the venv: $(cat "$work/answer.err")"
"$stave" decide --model "$model" --threads 1 "$request" >"$work/cli.json" 2>/dev/null
"$python" -c "import json,sys; a,b=(json.load(open(p)) for p in sys.argv[1:]); sys.exit(a!=b)" \
  "$work/answer.json" "$work/cli.json" || fail "the installed module answers otherwise than stave decide"
finish "python wheel"
