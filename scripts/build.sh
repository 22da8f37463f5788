#!/usr/bin/env bash
# Configures and builds stave into build/ (Release).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
# The CUDA backend is compiled whenever nvcc is there (CI has it; GPU tests skip without a GPU).
# STAVE_CUDA=OFF (or ON) in the environment overrides the detection.
cuda=()
nvcc="$(command -v nvcc || true)"
if [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ]; then nvcc=/usr/local/cuda/bin/nvcc; fi
case "${STAVE_CUDA:-auto}" in
  OFF|off|0) cuda=(-DSTAVE_CUDA=OFF) ;;
  *) if [ -n "$nvcc" ]; then cuda=(-DSTAVE_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc"); fi ;;
esac
cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "${cuda[@]}" "$@"
cmake --build build -j "$(nproc)"
