#!/usr/bin/env bash
# Packs what the GPU run needs into OUT_DIR/payload, for a device machine that has CUDA and
# Python but not stave's build dependencies: the binaries built here with -DSTAVE_CUDA=ON
# (stave, the test and benchmark binaries, jq) and the shared libraries they need that such a
# machine may lack (one xz tarball, bin.tar.xz), and the public fixtures (another, the
# duplicate shard and tokenizer of the MXFP4 model dropped). On the device, from a checkout of
# the same commit, `PAYLOAD=OUT_DIR/payload tools/device/cuda_run.sh` unpacks and runs.
# Build with -DSTAVE_VIDEO=OFF for the device: FFmpeg's libraries and theirs would not fit the
# transfer (and the GPU run decodes no video).
#   bash tools/device/pack_cuda.sh OUT_DIR FIXTURES_DIR   [BUILD=build folder, default ./build]
#   BASELINE_BUILD=DIR: also pack that (older) build's bench_decide as payload/baseline, so that
#   cuda_run.sh measures before and after in the same run (e.g. a worktree of the commit before
#   a change, configured and built with -DSTAVE_CUDA=ON).
#   OUT_DIR is emptied and refilled (its packed fixtures are kept unless REPACK_FIXTURES=1);
#   FIXTURES_DIR holds public/ (the reference fixtures).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
if [ $# -ne 2 ] || [ -z "$1" ] || [ -z "$2" ]; then
  echo "usage: bash tools/device/pack_cuda.sh OUT_DIR FIXTURES_DIR" >&2; exit 2
fi
out="$1"
fixtures="$2"
build="${BUILD:-$root/build}"
[ -d "$fixtures/public" ] || { echo "FIXTURES_DIR $fixtures has no public/ folder" >&2; exit 2; }
mkdir -p "$out"
keep="$(mktemp)"
if [ -f "$out/payload/fixtures.tar.xz" ]; then cp "$out/payload/fixtures.tar.xz" "$keep"; fi
rm -rf "$out" && mkdir -p "$out"
mkdir -p "$out/payload/bin" "$out/payload/lib"
for b in "$build/stave" "$build/tests/cuda/stave_cuda_tests" "$build/bench/bench_decide" "$build/bench/bench_peak" \
         "$build/bench/bench_linear" "$build/bench/serve_load" "$build/tests/stave_tests" \
         "$build/bench/bench_cuda_attention" "$build/bench/bench_cuda_fp8_gemm" "$build/bench/bench_gated_delta" "$build/bench/bench_elementwise"; do
  if [ -x "$b" ]; then strip -o "$out/payload/bin/$(basename "$b")" "$b"; fi
done
cp "$(command -v jq)" "$out/payload/bin/"  # the comparison script reads JSON with it
if [ -n "${BASELINE_BUILD:-}" ]; then
  [ -x "$BASELINE_BUILD/bench/bench_decide" ] || { echo "BASELINE_BUILD $BASELINE_BUILD has no bench/bench_decide" >&2; exit 2; }
  mkdir -p "$out/payload/baseline"
  strip -o "$out/payload/baseline/bench_decide" "$BASELINE_BUILD/bench/bench_decide"
  git -C "$BASELINE_BUILD/.." log -1 --format='%h %s' > "$out/payload/baseline/commit.txt" 2>/dev/null || true
fi
# Non-core libraries (glibc, libstdc++ and the CUDA libraries come from the device machine).
for b in "$out"/payload/bin/* "$out"/payload/baseline/bench_decide; do
  [ -x "$b" ] || continue
  ldd "$b" | awk '$3 ~ /^\// {print $3}'
done | sort -u | grep -v -E '/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s|libcublas|libcublasLt|libcudart)\.so' \
  | while read -r lib; do cp -L "$lib" "$out/payload/lib/"; done
tar -C "$out/payload" -cf - bin lib | xz -6 -T2 > "$out/payload/bin.tar.xz"
rm -rf "$out/payload/bin" "$out/payload/lib"
work="$(mktemp -d)"
trap 'rm -rf "$work" "$keep"' EXIT
if [ -s "$keep" ]; then  # fixtures already packed (REPACK_FIXTURES=1 to redo)
  if [ "${REPACK_FIXTURES:-0}" != "1" ]; then cp "$keep" "$out/payload/fixtures.tar.xz"; du -sh "$out"; exit 0; fi
fi
cp -r "$fixtures/public" "$work/"
chmod -R u+w "$work/public"
rm "$work/public/model-mxfp4/model-00001-of-00002.safetensors" "$work/public/model-mxfp4/tokenizer.json"
tar -C "$work" -cf - public | xz -6 -T2 > "$out/payload/fixtures.tar.xz"
du -sh "$out" "$out"/payload/*
