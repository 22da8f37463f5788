# Sourced by the CLI contract tests (tests/cli/*.sh; this file is not one: CTest runs *.sh).
#   require_fixtures DIR  — without DIR: skip (exit 0), or fail when STAVE_REQUIRE_FIXTURES is set
#   fail MESSAGE          — report one failed check and go on
#   finish NAME           — exit 1 when any check failed, else report NAME's checks passed
failures=0
require_fixtures() {
  if [ ! -d "$1" ]; then
    if [ "${STAVE_REQUIRE_FIXTURES:-0}" != "0" ]; then echo "missing fixtures: $1"; exit 1; fi
    echo "fixtures not found ($1); skipping"; exit 0
  fi
}
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
finish() {
  if [ $failures -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
  echo "$1: all checks passed"
}
