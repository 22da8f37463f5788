#!/usr/bin/env bash
# The GPU test command, on a machine with an NVIDIA Hopper GPU (sm_90a) and nvcc: configures a
# build with -DSTAVE_CUDA=ON into build-cuda/, builds stave_cuda_tests and stave_tests and runs
# the GPU instances: the op suite and the decode-step suite over the CUDA backend (stave_tests'
# Devices/*cuda* instances), then stave_cuda_tests (what only CUDA has, and the public fixture
# cases on the GPU, exact and fast).
# Fixtures come from ../shared/fixtures or $STAVE_FIXTURES. Arguments go to the test binary
# (e.g. --gtest_filter=CudaOps.*).
#   STAVE_PREBUILT=DIR  run DIR/stave_cuda_tests instead of building (a machine without the
#                       build dependencies; tools/device/cuda_run.sh uses this)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
if [ -n "${STAVE_PREBUILT:-}" ]; then
  bin="$STAVE_PREBUILT"
else
  nvcc="${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
  generator=()
  if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
  cmake -S . -B build-cuda "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DSTAVE_CUDA=ON \
    -DCMAKE_CUDA_COMPILER="$nvcc" -DSTAVE_BENCH=OFF
  cmake --build build-cuda -j "$(nproc)" --target stave_cuda_tests stave_tests
  bin=build-cuda/tests/cuda
  suite=build-cuda/tests
fi
nvidia-smi -L 2>/dev/null || echo "nvidia-smi not found"
status=0
"${suite:-$bin}/stave_tests" --gtest_filter='Devices/*cuda*' || status=1
# The small-M MXFP4 kernel (src/backends/cuda/linear_small_m.h; by default M ≤ 4) once more up to
# its limit (STAVE_CUDA_SMALL_M=mxfp4: M ≤ 16) and once switched off (today's expansion path at
# every M), under the op suite's linear cases and the MXFP4 fast-precision model suites.
for small_m in mxfp4 off; do
  echo "== again with STAVE_CUDA_SMALL_M=$small_m"
  STAVE_CUDA_SMALL_M=$small_m "${suite:-$bin}/stave_tests" \
    --gtest_filter='Devices/BackendOps.LinearEveryFormat/cuda_fast:Devices/*mxfp4_cuda_fast*' || status=1
done
# The chunked delta rule with plain BF16 operands (STAVE_CUDA_DELTA=chunk-bf16, the default
# until split operands) and its earlier pass (chunk-shared, the state in shared memory) under the
# op suite's delta-rule cases and the fast-precision model suites.
for delta in chunk-bf16 chunk-shared; do
  echo "== again with STAVE_CUDA_DELTA=$delta"
  STAVE_CUDA_DELTA=$delta "${suite:-$bin}/stave_tests" \
    --gtest_filter='Devices/BackendOps.GatedDelta*cuda_fast*:Devices/*cuda_fast*' || status=1
done
# The register pass's other forms (STAVE_CUDA_DELTA_STATE; wgmma-tma is the default) with split
# and with plain BF16 operands, and the transform at 4 warps (STAVE_CUDA_DELTA_WU=narrow; wide is
# the default), under the op suite's delta-rule cases.
for state in whole-out wgmma whole whole-prefetch halves; do
  for delta in auto chunk-bf16; do
    echo "== again with STAVE_CUDA_DELTA_STATE=$state STAVE_CUDA_DELTA=$delta"
    STAVE_CUDA_DELTA_STATE=$state STAVE_CUDA_DELTA=$delta "${suite:-$bin}/stave_tests" \
      --gtest_filter='Devices/BackendOps.GatedDelta*cuda*' || status=1
  done
done
echo "== again with STAVE_CUDA_DELTA_WU=narrow"
STAVE_CUDA_DELTA_WU=narrow "${suite:-$bin}/stave_tests" --gtest_filter='Devices/BackendOps.GatedDelta*cuda*' || status=1
# The BF16 flash attention on mma.sync (STAVE_CUDA_FLASH_BF16=mma; wgmma is the default) under the
# op suite and the fast-precision model suites (CudaOps.AttentionCausalFlashBf16 runs every form).
for flash in mma; do
  echo "== again with STAVE_CUDA_FLASH_BF16=$flash"
  STAVE_CUDA_FLASH_BF16=$flash "${suite:-$bin}/stave_tests" --gtest_filter='Devices/*cuda_fast*' || status=1
done
# The norms and gates composed instead of formed inside the FP8 input quantization
# (STAVE_CUDA_FUSED_INPUT=off) under the op suite and the fast-precision model suites.
echo "== again with STAVE_CUDA_FUSED_INPUT=off"
STAVE_CUDA_FUSED_INPUT=off "${suite:-$bin}/stave_tests" --gtest_filter='Devices/*cuda_fast*' || status=1
STAVE_CUDA_FUSED_INPUT=off "$bin/stave_cuda_tests" --gtest_filter='*Fixture*:*Decision*:*Fast*' || status=1
# The fused MXFP4 GEMM (STAVE_CUDA_LINEAR=fp8-fused, off by default until measured) under the
# op suite's linear cases, the fast-precision model suites and the fixture decisions.
echo "== again with STAVE_CUDA_LINEAR=fp8-fused (and with exact block sums)"
STAVE_CUDA_LINEAR=fp8-fused "${suite:-$bin}/stave_tests" --gtest_filter='Devices/*cuda_fast*' || status=1
STAVE_CUDA_LINEAR=fp8-fused "$bin/stave_cuda_tests" --gtest_filter='*Fixture*:*Decision*:*Fast*' || status=1
STAVE_CUDA_LINEAR=fp8-fused STAVE_CUDA_FP8_ACCUM=block "$bin/stave_cuda_tests" --gtest_filter='*Fixture*:*Decision*' || status=1
# The weights' FP8 expansions kept resident (STAVE_CUDA_FP8_WEIGHTS=resident, off by default
# until measured) under the fast-precision model suites and the fixture decisions.
echo "== again with STAVE_CUDA_FP8_WEIGHTS=resident"
STAVE_CUDA_FP8_WEIGHTS=resident "${suite:-$bin}/stave_tests" --gtest_filter='Devices/*mxfp4_cuda_fast*' || status=1
STAVE_CUDA_FP8_WEIGHTS=resident "$bin/stave_cuda_tests" --gtest_filter='*Fixture*:*Decision*:*Fast*' || status=1
# The expansion's earlier forms (the defaults since 2026-12-07: four weights ahead by the
# byte-table kernel): one weight ahead by the float kernel, under the fast-precision model suites
# and the fixture decisions.
echo "== again with STAVE_CUDA_EXPAND_DEPTH=1 STAVE_CUDA_EXPAND_KERNEL=float"
STAVE_CUDA_EXPAND_DEPTH=1 STAVE_CUDA_EXPAND_KERNEL=float "${suite:-$bin}/stave_tests" \
  --gtest_filter='Devices/*mxfp4_cuda_fast*' || status=1
STAVE_CUDA_EXPAND_DEPTH=1 STAVE_CUDA_EXPAND_KERNEL=float "$bin/stave_cuda_tests" \
  --gtest_filter='*Fixture*:*Decision*:*Fast*' || status=1
# The heuristic's tiles below 1,024 rows (STAVE_CUDA_FP8_CLUSTER=pairs, the default before
# the row-fitting tiles) under the fast-precision model suites and the fixture decisions.
echo "== again with STAVE_CUDA_FP8_CLUSTER=pairs"
STAVE_CUDA_FP8_CLUSTER=pairs "${suite:-$bin}/stave_tests" --gtest_filter='Devices/*mxfp4_cuda_fast*' || status=1
STAVE_CUDA_FP8_CLUSTER=pairs "$bin/stave_cuda_tests" --gtest_filter='*Fixture*:*Decision*:*Fast*' || status=1
# The fused MXFP4 GEMM's own tests in a process of their own: a kernel fault poisons the CUDA
# context, and every later test in the same process would fail with it.
if [ $# -eq 0 ]; then
  "$bin/stave_cuda_tests" --gtest_filter='-CudaLinearFp8.Fused*' || status=1
  echo "== the fused MXFP4 GEMM"
  "$bin/stave_cuda_tests" --gtest_filter='CudaLinearFp8.Fused*' || status=1
else
  "$bin/stave_cuda_tests" "$@" || status=1
fi
exit $status
