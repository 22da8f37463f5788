#!/usr/bin/env bash
# Runs on the device machine's host CPU (16 Emerald Rapids cores: AVX-512, VNNI, AMX) from the
# folder pack_cuda.sh filled: synthesizes 9B- and 27B-shaped releases with fewer layers on local
# disk, then tools/compare/llama_cpp.sh (stave bench beside llama-bench, one table with ratios)
# and bench_peak (the machine's int8/bf16/fp32 peaks) in the same run. Results under $OUT.
#   OUT=RESULTS_DIR bash tools/device/cpu_host_bench.sh WORK_DIR
#   WORK_DIR: a scratch folder on local disk (unpacked fixtures, the synth releases, the
#             comparison's work files; kept between runs on the same machine)
#   LLAMA_BENCH=PATH   a llama-bench you built for this CPU (required; never fetched here)
#   MODELS="flash9b:8:mxfp4 ..."  preset-short:layers:format items (default below)
#   TOKENS=512,2048 THREADS=16 REPEAT=2
set -uo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
# The folder pack_cuda.sh filled (OUT_DIR/payload); bin.tar.xz is unpacked once beside it.
payload="$(cd "${PAYLOAD:-$here/payload}" && pwd)" || { echo "PAYLOAD ${PAYLOAD:-$here/payload} is not a folder" >&2; exit 2; }
if [ ! -d "$payload/bin" ]; then tar -xJf "$payload/bin.tar.xz" -C "$payload" || exit 2; fi
cd "$here"
usage() { echo "usage: OUT=RESULTS_DIR LLAMA_BENCH=PATH bash tools/device/cpu_host_bench.sh WORK_DIR" >&2; exit 2; }
[ $# -eq 1 ] && [ -n "$1" ] || usage
[ -n "${OUT:-}" ] || { echo "OUT is not set: the folder where results go" >&2; usage; }
work="$(mkdir -p "$1" && cd "$1" && pwd)" || { echo "cannot create WORK_DIR $1" >&2; exit 2; }
mkdir -p "$OUT"
bin="$payload/bin"
export LD_LIBRARY_PATH="$payload/lib:${LD_LIBRARY_PATH:-}"
export PATH="$bin:$PATH"  # jq travels in the payload too
llama="${LLAMA_BENCH:?set LLAMA_BENCH to a llama-bench binary}"
models="${MODELS:-flash9b:8:mxfp4 flash9b:8:bf16 c27b:8:mxfp4 c27b:8:bf16}"
tokens="${TOKENS:-512,2048}"
threads="${THREADS:-16}"
repeat="${REPEAT:-2}"
fx=$work/fx
if [ ! -d $fx/public ]; then mkdir -p $fx && tar -xJf "$payload/fixtures.tar.xz" -C $fx; fi
tok=$fx/public/model-bf16/tokenizer.json
lscpu | grep -E "Model name|^CPU\(s\)|Flags" | cut -c1-400 | tee "$OUT/cpu.txt"
"$bin/bench_peak" --benchmark_min_time=0.2 2>&1 | tee "$OUT/peak.txt" | tail -8
args=()
for m in $models; do
  IFS=: read -r short layers fmt <<< "$m"
  case "$short" in flash9b) preset=clef-flash-9b ;; c27b) preset=clef-27b ;; *) preset="$short" ;; esac
  dir="$work/$short-L$layers-$fmt"
  if [ ! -f "$dir/config.json" ]; then
    start=$SECONDS
    "$bin/stave" synth --preset "$preset" --layers "$layers" --format "$fmt" --out "$dir" --tokenizer "$tok" 2>&1 | tail -1
    echo "synth $dir: $((SECONDS - start)) s" | tee -a "$OUT/synth.txt"
  fi
  args+=(--model "$dir")
done
OMP_PROC_BIND="${OMP_PROC_BIND:-close}" bash tools/compare/llama_cpp.sh "$llama" "${args[@]}" --tokens "$tokens" \
  --threads "$threads" --repeat "$repeat" --work "$work/compare" --stave "$bin/stave" --spin 2>&1 | tee "$OUT/compare.txt"
tar -C "$work/compare" -czf "$OUT/compare_json.tgz" $(cd "$work/compare" && ls *.json) 2>/dev/null || true
