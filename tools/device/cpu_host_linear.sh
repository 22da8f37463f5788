#!/usr/bin/env bash
# Runs on the device machine's host CPU (16 Emerald Rapids cores with AMX) from a checkout with
# the payload pack_cuda.sh made (PAYLOAD=DIR, default ./payload): the CPU linear op tests at
# level amx (the AMX-BF16 W4A4 and AMX-BF16 kernels' tests skip on CPUs without AMX, so here
# they must run: the summary line counts the skipped ones), then bench_linear's W4A4 prefill
# kernels side by side — dispatch (`w4a4`), AVX-512-BF16 (`w4a4_bf16`), AVX-512 VNNI
# (`w4a4_vnni`), AMX-INT8 (`w4a4_int8_amx`), AMX-BF16 (`w4a4_amx_bf16`) — at the 9B / 27B MLP
# shapes, M = 512 and 2048 (FLOP/s column), all threads and one thread, then at M = 8..64 (the
# dispatch threshold), and bench_peak's AMX / AVX-512 peaks. Results under $OUT.
#   OUT=RESULTS_DIR bash tools/device/cpu_host_linear.sh
#   THREADS=16 (default: the host's cores)  MIN_TIME=0.3 (seconds per benchmark)
set -uo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
payload="$(cd "${PAYLOAD:-$here/payload}" && pwd)" || { echo "PAYLOAD ${PAYLOAD:-$here/payload} is not a folder" >&2; exit 2; }
if [ ! -d "$payload/bin" ]; then tar -xJf "$payload/bin.tar.xz" -C "$payload" || exit 2; fi
[ -n "${OUT:-}" ] || { echo "usage: OUT=RESULTS_DIR bash tools/device/cpu_host_linear.sh" >&2; exit 2; }
mkdir -p "$OUT"
cd "$here"
bin="$payload/bin"
export LD_LIBRARY_PATH="$payload/lib:${LD_LIBRARY_PATH:-}"
threads="${THREADS:-$(nproc)}"
min_time="${MIN_TIME:-0.3}"
lscpu | grep -E "Model name|^CPU\(s\)" | tee "$OUT/cpu.txt"
# STAVE_TEST_TRACE names each case of the every-level linear test before it runs (a crash there
# then shows its level, format and shape in tests.txt).
STAVE_TEST_TRACE=1 STAVE_CPU_ISA=amx "$bin/stave_tests" --gtest_filter='CpuLinear.*:CpuFeatures.*:CpuIsa.*:Devices/BackendOps.*/cpu_*' 2>&1 | tee "$OUT/tests.txt" |
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure" | head -40
shapes='(mlp_up_5120x17408|mlp_down_17408x5120|9b_mlp_up_4096x12288|9b_mlp_down_12288x4096)'
OMP_NUM_THREADS=$threads OMP_PROC_BIND=close "$bin/bench_linear" --benchmark_min_time="$min_time" \
  --benchmark_filter="^(w4a4|w4a4_bf16|w4a4_vnni|w4a4_int8_amx|w4a4_amx_bf16)/$shapes/(512|2048)/" 2>&1 | tee "$OUT/linear.txt"
# The dispatch threshold (kW4A4AmxBf16MinRows = 64, VNNI below): the kernels at small M, all threads.
OMP_NUM_THREADS=$threads OMP_PROC_BIND=close "$bin/bench_linear" --benchmark_min_time="$min_time" \
  --benchmark_filter="^(w4a4_int8|w4a4_bf16|w4a4_vnni|w4a4_amx_bf16|w4a4_int8_amx)/9b_mlp_up_4096x12288/(8|16|32|64)/" 2>&1 |
  tee "$OUT/linear_small_m.txt"
OMP_NUM_THREADS=1 "$bin/bench_linear" --benchmark_min_time="$min_time" \
  --benchmark_filter="^(w4a4_bf16|w4a4_vnni|w4a4_int8_amx|w4a4_amx_bf16)/9b_mlp_up_4096x12288/512/" 2>&1 | tee "$OUT/linear_1thread.txt"
OMP_NUM_THREADS=$threads "$bin/bench_peak" --benchmark_min_time=0.2 --benchmark_filter='Amx|Bf16Dp|Vnni' 2>&1 |
  tee "$OUT/peak.txt" | tail -5
