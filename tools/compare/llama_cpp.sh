#!/usr/bin/env bash
# stave bench beside llama-bench on the same model shapes, threads and prompt lengths.
#
#   tools/compare/llama_cpp.sh LLAMA_BENCH [--model DIR]... [--tokens 512,2048] [--threads N]
#                              [--repeat R] [--work DIR] [--stave PATH] [--spin]
#
# LLAMA_BENCH is the path of a llama-bench binary you built yourself (this script never fetches
# or builds llama.cpp). Each --model is a stave release folder (e.g. from `stave synth`); its
# backbone is exported once with `stave export-gguf` (llama.cpp's qwen35 architecture, same
# weights) into the work folder. Prints one Markdown table: prefill tokens/s of both engines
# and their ratio, plus stave's whole decision (backbone + joint head). Both engines wait for
# work without spinning (OMP_WAIT_POLICY=passive, llama-bench --poll 0) unless --spin is given:
# on a machine shared with other jobs a spinning thread steals the core its partner needs.
set -euo pipefail

usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -ge 1 ] || usage
llama_bench="$1"; shift
[ -x "$llama_bench" ] || { echo "llama_cpp.sh: $llama_bench is not an executable llama-bench" >&2; exit 2; }
root="$(cd "$(dirname "$0")/../.." && pwd)"
stave="$root/build/stave"
models=(); tokens="512,2048"; threads="$(nproc)"; repeat=3; work="$root/build/compare"; spin=0
while [ $# -gt 0 ]; do
  case "$1" in
    --model) models+=("$2"); shift 2 ;;
    --tokens) tokens="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --stave) stave="$2"; shift 2 ;;
    --spin) spin=1; shift ;;
    *) usage ;;
  esac
done
[ ${#models[@]} -gt 0 ] || { echo "llama_cpp.sh: give at least one --model DIR" >&2; exit 2; }
[ -x "$stave" ] || { echo "llama_cpp.sh: $stave not found (bash scripts/build.sh)" >&2; exit 2; }
command -v jq >/dev/null || { echo "llama_cpp.sh: jq is needed (apt-get install jq)" >&2; exit 2; }
mkdir -p "$work"
poll=(--poll 0)
if [ "$spin" = 1 ]; then poll=(); else export OMP_WAIT_POLICY=passive; fi

rows=()
for dir in "${models[@]}"; do
  name="$(basename "$dir")"
  gguf="$work/$name.gguf"
  if [ ! -s "$gguf" ] || [ "$dir/config.json" -nt "$gguf" ]; then
    "$stave" export-gguf --model "$dir" --out "$gguf" >&2
  fi
  "$stave" bench --model "$dir" --prompt-tokens "$tokens" --threads "$threads" --repeat "$repeat" --warmup 1 \
    --json "$work/$name.stave.json" >&2
  "$llama_bench" -m "$gguf" -p "$tokens" -n 0 -t "$threads" -r "$repeat" "${poll[@]}" -o json > "$work/$name.llama.json"
  fmt="$(jq -r .weight_format "$work/$name.stave.json")"
  layers="$(jq -r .num_layers "$work/$name.stave.json")"
  IFS=, read -ra lens <<< "$tokens"
  for n in "${lens[@]}"; do
    s_tps="$(jq -r --argjson n "$n" '.results[] | select(.prompt_tokens == $n) | .prefill_tokens_per_s' "$work/$name.stave.json")"
    s_ms="$(jq -r --argjson n "$n" '.results[] | select(.prompt_tokens == $n) | .total_ms.p50' "$work/$name.stave.json")"
    l_tps="$(jq -r --argjson n "$n" '.[] | select(.n_prompt == $n and .n_gen == 0) | .avg_ts' "$work/$name.llama.json")"
    ratio="$(awk -v a="$s_tps" -v b="$l_tps" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')"
    rows+=("$(printf '| %s | %s | %s | pp%s | %.1f | %.1f | %.1f | %s |' "$name" "$fmt" "$layers" "$n" "$s_ms" "$s_tps" "$l_tps" "$ratio")")
  done
done

echo "threads: $threads, repeat: $repeat, spin: $spin; llama-bench: $llama_bench; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| model | format | layers | test | stave decision ms p50 | stave prefill t/s | llama.cpp pp t/s | stave / llama.cpp |"
echo "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: |"
printf '%s\n' "${rows[@]}"
