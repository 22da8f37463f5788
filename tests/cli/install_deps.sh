#!/usr/bin/env bash
# README's first command works as root on an image without sudo, and for a user with sudo:
# scripts/install-deps.sh elevates itself only when it is not root. Runs the script dry
# (STAVE_DEPS_DRY_RUN=1) with stub id/sudo/npm on a PATH that holds nothing else.
# Usage: install_deps.sh STAVE_BINARY FIXTURES_DIR   (neither is used)
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
. "$(dirname "$0")/checks.bash"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
bash_bin="$(command -v bash)"

# The README's first command: no sudo in front; the script is run with bash.
first=$(awk '/^```sh/{getline; print; exit}' "$root/README.md")
case "$first" in
  "bash scripts/install-deps.sh "*) ;;
  *) fail "README's first command does not start with 'bash scripts/install-deps.sh': $first" ;;
esac

# stubs: id -u prints $FAKE_UID; sudo logs itself and runs the rest; npm exists (skips nodejs).
make_bin() {  # make_bin DIR with_sudo
  mkdir -p "$1"
  printf '#!%s\n[ "$1" = "-u" ] && echo "$FAKE_UID"\n' "$bash_bin" >"$1/id"
  printf '#!%s\necho npm\n' "$bash_bin" >"$1/npm"
  if [ "$2" = yes ]; then printf '#!%s\necho "[sudo]"; "$@"\n' "$bash_bin" >"$1/sudo"; fi
  chmod +x "$1"/*
}
make_bin "$work/nosudo" no
make_bin "$work/withsudo" yes
run_deps() {  # run_deps BIN UID -> output in $work/out, status in $status
  env -i PATH="$1" FAKE_UID="$2" STAVE_DEPS_DRY_RUN=1 "$bash_bin" "$root/scripts/install-deps.sh" >"$work/out" 2>&1
  status=$?
}

run_deps "$work/nosudo" 0
[ $status -eq 0 ] || fail "as root without sudo: exit $status: $(cat "$work/out")"
grep -q "^apt-get install" "$work/out" || fail "as root: apt-get not run directly: $(cat "$work/out")"
grep -q "sudo" "$work/out" && fail "as root: sudo used: $(cat "$work/out")"
grep -q "pybind11-dev" "$work/out" || fail "pybind11-dev is not installed"

run_deps "$work/withsudo" 1000
[ $status -eq 0 ] || fail "as a user with sudo: exit $status: $(cat "$work/out")"
grep -q "^sudo apt-get install" "$work/out" || fail "as a user: apt-get not run through sudo: $(cat "$work/out")"

run_deps "$work/nosudo" 1000
[ $status -ne 0 ] || fail "as a user without sudo: succeeded"
grep -q "run this as root" "$work/out" || fail "as a user without sudo: $(cat "$work/out")"
finish "install-deps"
