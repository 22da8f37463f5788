#!/usr/bin/env bash
# Runs on the device machine, from a checkout with the payload pack_cuda.sh made (PAYLOAD=DIR,
# default ./payload): the GPU test suite, then
# `stave synth --preset clef-27b --format mxfp4` on local disk and decision latency at 512,
# 2048 and 8192 tokens on the H200 (bench_decide). Results and logs under $OUT.
#   bash tools/device/cuda_run.sh WORK_DIR   (OUT=DIR must be set: where results go)
#   WORK_DIR: a scratch folder on the device's local disk (unpacked fixtures, the synth release
#             and the serve request are kept there between runs on the same machine).
#   STEPS="tests bench torch" (default) — pick steps; "baseline" runs the baseline build's
#   bench_decide (pack_cuda.sh BASELINE_BUILD; BASELINE_FILTER narrows it), "stages" adds the
#   per-stage profile (STAGE_KERNELS="auto gemm": attention choices), "serve" the server under
#   concurrent load with and without --batch-tokens. FLA_DIR: the torch step's fla peer.
#   "elementwise": the element-wise ops at 27B shapes beside the compositions they replace.
#   "attention" (ATTENTION_SETTINGS: an A/B of the flash kernel's forms), "sdpa" (PyTorch's
#   SDPA backends), "linear" (LINEAR_SETTINGS: an A/B of bench_linear's FP8 products), "ncu"
#   (Nsight Compute on the flash kernel): see each step below.
#   COMPARE_GEMM_ATTENTION=1 — bench again with STAVE_CUDA_ATTENTION=gemm (same run).
#   LAYERS=N — synth N layers of clef-27b (same widths, the 3:1 layer pattern; default 64, the
#              whole model). The synth takes ~10 s per 4 layers on the device's 16 cores.
#   "fidelity": the MXFP4 fast-precision rule at full width on the GPU (docs/eval.md): a 4-layer
#   clef-flash-9b BF16 synth and its `stave quantize` MXFP4, then `stave eval --per-request
#   --device cuda` over FID_REQUESTS (default: the public fixture cases, the example requests and
#   the short-noul records) — MXFP4 vs BF16 (fast), and MXFP4 fast vs exact with the fast path as
#   shipped, with every kernel at its wider form (FP8 → BF16 products, chunked BF16 delta rule →
#   fp32 recurrence, BF16 → 3xTF32 flash attention), and with one kernel at a time back to fast.
#   FID_VARIANTS narrows the variants (names: quant default wide fp8 fp8fast fast chunk chunksplit plain
#   bf16attn fused block blockcpu defaultcpu; chunk = the chunked delta rule with plain BF16
#   operands, STAVE_CUDA_DELTA=chunk-bf16, alone at fast; chunksplit = with split operands (the
#   default); plain = the default but for plain BF16 operands in the delta rule; fused =
#   the fused MXFP4 GEMM and the fused input forms together; block = the fused GEMM with exact
#   block sums, STAVE_CUDA_FP8_ACCUM=block; …cpu: against the CPU's exact answers).
#   "delta": the chunked delta rule's kernels (bench_gated_delta, split by kernel) with the default
#   form (split operands) and with STAVE_CUDA_DELTA=chunk-bf16 (plain BF16), alternated twice
#   (DELTA_FORMS: other STAVE_CUDA_DELTA values; DELTA_SETTINGS: any settings, as AB_SETTINGS,
#   e.g. the register pass's STAVE_CUDA_DELTA_STATE forms; whole-out is the default), each after its op cases.
#   "fused": the fast norms (bench_elementwise) and bench_decide on the synth release with
#   STAVE_CUDA_FUSED_INPUT off and on (the norms and gates formed inside the FP8 input
#   quantization; decisions alternated twice), then the stage profile at STAGE_TOKENS (default
#   2048) with it on.
#   "ab": bench_decide on the synth release once per AB_SETTINGS entry, alternated twice; an entry
#   is VAR=VALUE[,VAR=VALUE…] or "-" for the defaults (e.g. AB_SETTINGS="- STAVE_CUDA_DELTA=chunk-bf16";
#   AB_FILTER narrows the benchmarks, default 'Decide/').
#   PACK_OUT=1: all results in one file, $OUT/results.tgz.
#   "sweep": bench_cuda_fp8_gemm (cuBLASLt's FP8 algorithms and settings at the 27B shapes) at
#   SWEEP_TOKENS rows (default 2048), then bench_decide once per STAVE_CUDA_FP8_ALGO in FP8_ALGOS
#   (e.g. "0 1 3"; empty: none).
set -uo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
# The folder pack_cuda.sh filled (OUT_DIR/payload); bin.tar.xz is unpacked once beside it.
payload="$(cd "${PAYLOAD:-$here/payload}" && pwd)" || { echo "PAYLOAD ${PAYLOAD:-$here/payload} is not a folder" >&2; exit 2; }
if [ ! -d "$payload/bin" ]; then tar -xJf "$payload/bin.tar.xz" -C "$payload" || exit 2; fi
cd "$here"
usage() { echo "usage: OUT=RESULTS_DIR bash tools/device/cuda_run.sh WORK_DIR" >&2; exit 2; }
[ $# -eq 1 ] && [ -n "$1" ] || usage
[ -n "${OUT:-}" ] || { echo "OUT is not set: the folder where results go" >&2; usage; }
work="$(mkdir -p "$1" && cd "$1" && pwd)" || { echo "cannot create WORK_DIR $1" >&2; exit 2; }
mkdir -p "$OUT"
# PACK_OUT=1: every result goes into one file, $OUT/results.tgz (written after each fidelity
# variant and at exit, also when a timeout stops the run), for transports that bring back only a
# few files; the loose files stay in a scratch folder.
if [ -n "${PACK_OUT:-}" ]; then
  packed_out="$OUT"
  OUT="$(mktemp -d)"
  pack_results() { tar -czf "$packed_out/results.tgz" -C "$OUT" . 2>/dev/null || true; }
  trap pack_results EXIT
  trap 'exit 143' TERM
else
  pack_results() { :; }
fi
steps="${STEPS:-tests bench torch}"
# A setting of AB_SETTINGS or DELTA_SETTINGS (VAR=VALUE[,VAR=VALUE…], or - for the defaults) as
# the words `env` takes.
setting_vars() { if [ "$1" = - ]; then echo ""; else echo "${1//,/ }"; fi; }
# For each entry of SETTINGS (one word-split string of such entries), one line in $OUT/FILE: LABEL,
# the entry's variables and the lines of the gtest binary's output (run under them, with
# --gtest_filter=FILTER, for at most LIMIT seconds) that match PATTERN:
#   settings_tests FILE LABEL LIMIT PATTERN SETTINGS BINARY FILTER
settings_tests() {
  local file=$1 label=$2 limit=$3 pattern=$4 settings=$5 binary=$6 filter=$7 setting vars
  for setting in $settings; do
    vars="$(setting_vars "$setting")"
    echo "== $label, ${vars:-the defaults}: $(env $vars timeout "$limit" "$binary" --gtest_filter="$filter" 2>&1 |
      grep -E "$pattern" | tr '\n' ' ')" | tee -a "$OUT/$file"
  done
}
# CMD… once per entry of SETTINGS under its variables, alternated twice (BENCH_TIMEOUT each), the
# output lines matching KEEP into $OUT/FILE: settings_alternated FILE KEEP SETTINGS CMD…
settings_alternated() {
  local file=$1 keep=$2 settings=$3 round setting vars
  shift 3
  for round in 1 2; do
    for setting in $settings; do
      vars="$(setting_vars "$setting")"
      echo "== round $round, ${vars:-the defaults}" | tee -a "$OUT/$file"
      env $vars timeout "${BENCH_TIMEOUT:-120}" "$@" 2>&1 | grep -E "$keep" | tee -a "$OUT/$file"
      pack_results
    done
  done
}
layers="${LAYERS:-64}"
cublas="$(find /usr/local /opt /usr/lib -name 'libcublas.so.13*' 2>/dev/null | head -1)"
export LD_LIBRARY_PATH="$payload/lib:${cublas:+$(dirname "$cublas"):}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
echo "cublas: $cublas"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv
fx=$work/fx
if [ ! -d $fx/public ]; then
  mkdir -p $fx && tar -xJf "$payload/fixtures.tar.xz" -C $fx
  cp $fx/public/model-bf16/model-00001-of-00002.safetensors $fx/public/model-bf16/tokenizer.json $fx/public/model-mxfp4/
fi
export STAVE_FIXTURES=$fx
bin="$payload/bin"
ldd "$bin/stave_cuda_tests" | grep "not found" && echo "MISSING LIBRARIES"
if [[ " $steps " == *" tests "* ]]; then
  STAVE_PREBUILT="$bin" timeout "${TEST_TIMEOUT:-90}" bash scripts/cuda_device_tests.sh 2>&1 | tee "$OUT/cuda_tests.txt" | grep -v "^\[ *\(RUN\|OK\) *\]"
fi
rel=$work/clef-27b-mxfp4-L$layers
synth_release() {  # once per machine: the release stays on its local disk
  if [ ! -f $rel/config.json ]; then
    rm -rf $rel
    df -h "$work" | tail -1
    start=$SECONDS
    timeout "${SYNTH_TIMEOUT:-200}" "$bin/stave" synth --preset clef-27b --layers "$layers" --format mxfp4 --out $rel \
      --tokenizer $fx/public/model-bf16/tokenizer.json 2>&1 | tail -2 | tee "$OUT/synth.txt"
    echo "synth took $((SECONDS - start)) s" | tee -a "$OUT/synth.txt"
  fi
}
if [[ " $steps " == *" bench "* ]]; then
  synth_release
  du -sh $rel | tee -a "$OUT/synth.txt"
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > "$OUT/gpu_mem.txt" &
  smi=$!
  STAVE_BENCH_MODEL=$rel STAVE_BENCH_DEVICE=cuda STAVE_BENCH_PRECISION=fast \
    timeout "${BENCH_TIMEOUT:-120}" "$bin/bench_decide" --benchmark_counters_tabular=true 2>&1 | tee "$OUT/bench_mxfp4.txt"
  kill $smi
  echo "peak GPU memory used (MiB): $(sort -n "$OUT/gpu_mem.txt" | tail -1)" | tee -a "$OUT/bench_mxfp4.txt"
  if [ "${COMPARE_GEMM_ATTENTION:-0}" = 1 ]; then
    # The same benchmark with attention through the chunked cuBLAS products instead of the flash
    # kernel, in the same run (the before/after ratio of docs/benchmarks.md).
    STAVE_CUDA_ATTENTION=gemm STAVE_BENCH_MODEL=$rel STAVE_BENCH_DEVICE=cuda STAVE_BENCH_PRECISION=fast \
      timeout "${BENCH_TIMEOUT:-120}" "$bin/bench_decide" --benchmark_counters_tabular=true 2>&1 |
      tee "$OUT/bench_mxfp4_gemm_attention.txt"
  fi
fi
if [[ " $steps " == *" baseline "* ]]; then
  # The same benchmark on the baseline build (pack_cuda.sh BASELINE_BUILD) on the same release,
  # right after `bench` (or in the next call on the same machine): before and after in one run.
  # BASELINE_FILTER: a --benchmark_filter (e.g. 'Decide/' for the batch-1 rows only).
  synth_release
  [ -x "$payload/baseline/bench_decide" ] || { echo "no baseline in $payload (pack_cuda.sh BASELINE_BUILD=DIR)" >&2; exit 2; }
  cat "$payload/baseline/commit.txt" 2>/dev/null | tee "$OUT/bench_mxfp4_baseline.txt"
  STAVE_BENCH_MODEL=$rel STAVE_BENCH_DEVICE=cuda STAVE_BENCH_PRECISION=fast \
    timeout "${BENCH_TIMEOUT:-120}" "$payload/baseline/bench_decide" --benchmark_counters_tabular=true \
    ${BASELINE_FILTER:+--benchmark_filter=$BASELINE_FILTER} 2>&1 | tee -a "$OUT/bench_mxfp4_baseline.txt"
fi
if [[ " $steps " == *" stages "* ]]; then
  synth_release
  # Per-stage profile (synchronizes between stages), automatic (flash) and cuBLAS attention.
  for kernel in ${STAGE_KERNELS:-auto gemm}; do
    STAVE_CUDA_ATTENTION=$kernel STAVE_STAGES=1 timeout "${BENCH_TIMEOUT:-120}" "$bin/stave" bench \
      --model $rel --device cuda --prompt-tokens "${STAGE_TOKENS:-512,2048,8192}" 2>&1 |
      tee "$OUT/stages_$kernel.txt"
  done
fi
if [[ " $steps " == *" elementwise "* ]] && [ -x "$bin/bench_elementwise" ]; then
  timeout "${BENCH_TIMEOUT:-120}" "$bin/bench_elementwise" --benchmark_min_time=0.05 2>&1 | tee "$OUT/bench_elementwise.txt"
fi
if [[ " $steps " == *" serve "* ]]; then
  [ -n "${SERVE_MODEL:-}" ] || synth_release
  smodel="${SERVE_MODEL:-$rel}"
  # `stave serve --device cuda` under concurrent load: CLIENTS clients, each posting a request
  # of about SERVE_TOKENS tokens as fast as answers come, for SERVE_SECONDS; once with the
  # prefill coalescer (--batch-tokens) and once without, same server options otherwise.
  state=""
  # With the Qwen3 tokenizer the sentence is 10 tokens and the rest of the request 278 (the
  # runs of 2026-12-04 ~19:00 UTC divided by 12 instead: 42 sentences, 698 tokens).
  for _ in $(seq "$(( (${SERVE_TOKENS:-512} - 278) / 10 ))"); do state+="Our checkout started returning errors and orders are blocked. "; done
  printf '{"model":"clef","state":"%s","questions":{"department":{"type":"choice","criteria":{"billing":"Payments","technical":"Bugs or outages"}},"urgency":{"type":"score","criteria":["Can wait","This week","Today"]},"outage":{"type":"noul","instructions":"Is a service down?"}}}' \
    "$state" > "$work/serve_request.json"
  # --threads × --max-running ≤ cores (docs/serve.md): OpenMP teams of the heads' host work
  # that oversubscribe the cores wait at every barrier.
  threads="${SERVE_THREADS:-$(( $(nproc) / ${MAX_RUNNING:-8} ))}"
  (( threads > 0 )) || threads=1
  for batch in "${BATCH_TOKENS:-16384}" 0; do
    port=18990
    "$bin/stave" serve --model "$smodel" --device "${SERVE_DEVICE:-cuda}" --port $port --threads "$threads" \
      --max-running "${MAX_RUNNING:-8}" --max-queue 64 --batch-tokens "$batch" --quiet &
    sp=$!
    healthy() {  # GET /health without curl (the device image may lack it)
      { exec 3<>/dev/tcp/127.0.0.1/$port; } 2>/dev/null || return 1
      printf 'GET /health HTTP/1.0\r\n\r\n' >&3
      grep -q '"ok"' <&3
      local r=$?
      exec 3<&-
      return $r
    }
    for _ in $(seq 120); do healthy && break; sleep 1; done
    echo "== serve --batch-tokens $batch --max-running ${MAX_RUNNING:-8} --threads $threads, ${CLIENTS:-16} clients" |
      tee -a "$OUT/serve.txt"
    timeout "${SERVE_TIMEOUT:-120}" "$bin/serve_load" --port $port --clients "${CLIENTS:-16}" \
      --seconds "${SERVE_SECONDS:-30}" --request "$work/serve_request.json" --server-pid $sp 2>&1 | tee -a "$OUT/serve.txt"
    kill -TERM $sp; wait $sp
  done
fi
if [[ " $steps " == *" torch "* ]]; then
  synth_release
  timeout "${TORCH_TIMEOUT:-200}" env PYTHONUNBUFFERED=1 python3 tools/reference/cuda_baseline.py \
    "$rel" 2>&1 | tail -15 | tee "$OUT/torch.txt"
fi
if [[ " $steps " == *" fidelity "* ]]; then
  fid=$work/fidelity
  if [ ! -f $fid/mxfp4/config.json ]; then
    rm -rf $fid && mkdir -p $fid
    "$bin/stave" synth --preset clef-flash-9b --layers 4 --format bf16 --out $fid/bf16 \
      --tokenizer $fx/public/model-bf16/tokenizer.json 2>&1 | tail -1 | tee "$OUT/fidelity_models.txt"
    "$bin/stave" quantize --in $fid/bf16 --out $fid/mxfp4 --no-progress 2>&1 | tail -1 | tee -a "$OUT/fidelity_models.txt"
  fi
  requests=${FID_REQUESTS:-}
  if [ -z "$requests" ]; then
    mkdir -p $fid/requests
    cp -r $fx/public/cases $fid/requests/ && cp examples/requests/support-ticket.json examples/requests/batch.jsonl $fid/requests/
    "$bin/jq" -c '.request' examples/eval/short-noul.jsonl > $fid/requests/noul.jsonl
    requests=$fid/requests
  fi
  fid_eval() {  # NAME AGAINST AGAINST_PRECISION [VAR=VALUE ...]: one comparison, its summary in $OUT
    local name=$1 against=$2 against_precision=$3
    shift 3
    env "$@" timeout "${FID_TIMEOUT:-200}" "$bin/stave" eval --per-request --device cuda --threads "$(nproc)" \
      --model $fid/mxfp4 --precision fast --against "$against" --against-precision "$against_precision" \
      ${against_device:+--against-device "$against_device"} \
      --summary-json "$OUT/fidelity_$name.json" $requests > "$OUT/fidelity_$name.txt" 2>&1
    echo "$name: $(grep -o '"mean_max_abs_dp": [0-9.e-]*' "$OUT/fidelity_$name.json" 2>/dev/null)" \
      "$(grep -o '"top_agreements": [0-9]*' "$OUT/fidelity_$name.json" 2>/dev/null)" | tee -a "$OUT/fidelity.txt"
    pack_results
  }
  wide=(STAVE_CUDA_LINEAR=bf16 STAVE_CUDA_DELTA=recurrent STAVE_CUDA_ATTENTION=flash)
  for v in ${FID_VARIANTS:-quant default wide fp8 chunk bf16attn}; do
    case $v in
      quant) fid_eval quant $fid/bf16 fast ;;  # what MXFP4 itself adds (the rule's denominator)
      default) fid_eval default $fid/mxfp4 exact ;;
      wide) fid_eval wide $fid/mxfp4 exact "${wide[@]}" ;;
      fp8) fid_eval fp8 $fid/mxfp4 exact STAVE_CUDA_DELTA=recurrent STAVE_CUDA_ATTENTION=flash ;;
      fp8fast) fid_eval fp8fast $fid/mxfp4 exact STAVE_CUDA_DELTA=recurrent STAVE_CUDA_ATTENTION=flash STAVE_CUDA_FP8_ACCUM=fast ;;
      fast) fid_eval fast $fid/mxfp4 exact STAVE_CUDA_FP8_ACCUM=fast ;;
      chunk) fid_eval chunk $fid/mxfp4 exact STAVE_CUDA_LINEAR=bf16 STAVE_CUDA_ATTENTION=flash STAVE_CUDA_DELTA=chunk-bf16 ;;
      chunksplit) fid_eval chunksplit $fid/mxfp4 exact STAVE_CUDA_LINEAR=bf16 STAVE_CUDA_ATTENTION=flash STAVE_CUDA_DELTA=chunk-split ;;
      plain) fid_eval plain $fid/mxfp4 exact STAVE_CUDA_DELTA=chunk-bf16 ;;
      bf16attn) fid_eval bf16attn $fid/mxfp4 exact STAVE_CUDA_LINEAR=bf16 STAVE_CUDA_DELTA=recurrent ;;
      fused) fid_eval fused $fid/mxfp4 exact STAVE_CUDA_LINEAR=fp8-fused STAVE_CUDA_FUSED_INPUT=on ;;
      block) fid_eval block $fid/mxfp4 exact STAVE_CUDA_LINEAR=fp8-fused STAVE_CUDA_FP8_ACCUM=block ;;
      blockcpu) against_device=cpu fid_eval blockcpu $fid/mxfp4 exact STAVE_CUDA_LINEAR=fp8-fused STAVE_CUDA_FP8_ACCUM=block ;;
      defaultcpu) against_device=cpu fid_eval defaultcpu $fid/mxfp4 exact ;;
      *) echo "unknown FID_VARIANTS entry $v (quant default wide fp8 fp8fast fast chunk chunksplit plain bf16attn fused block blockcpu defaultcpu)" >&2 ;;
    esac
  done
fi
if [[ " $steps " == *" delta "* ]]; then
  # DELTA_SETTINGS: entries as AB_SETTINGS's (VAR=VALUE[,VAR=VALUE…] or - for the defaults), e.g.
  # "- STAVE_CUDA_DELTA_STATE=whole STAVE_CUDA_DELTA_STATE=halves,STAVE_CUDA_DELTA_WU=narrow";
  # without it, one entry per DELTA_FORMS value of STAVE_CUDA_DELTA. The op suite's delta-rule
  # cases run once per entry before the timings.
  settings="${DELTA_SETTINGS:-}"
  if [ -z "$settings" ]; then
    for pass in ${DELTA_FORMS:-auto chunk-bf16}; do settings+=" STAVE_CUDA_DELTA=$pass"; done
  fi
  settings_tests bench_delta.txt "op cases" 60 'PASSED|FAILED' "$settings" "$bin/stave_tests" \
    'Devices/BackendOps.GatedDelta*cuda*'
  settings_alternated bench_delta.txt gated_delta "$settings" "$bin/bench_gated_delta" --benchmark_filter=_chunk/ \
    --benchmark_min_time=0.2 --benchmark_counters_tabular=true
fi
# bench_decide on the synth release once per setting (VAR=VALUE[,VAR=VALUE…] or - for the
# defaults), alternated twice, into $OUT/FILE: decide_alternated FILE FILTER SETTING...
decide_alternated() {
  local file=$1 filter=$2
  shift 2
  synth_release
  settings_alternated "$file" Decide "$*" env STAVE_BENCH_MODEL="$rel" STAVE_BENCH_DEVICE=cuda \
    STAVE_BENCH_PRECISION=fast "$bin/bench_decide" --benchmark_filter="$filter" --benchmark_counters_tabular=true
}
if [[ " $steps " == *" ab "* ]]; then
  # shellcheck disable=SC2086
  decide_alternated bench_ab.txt "${AB_FILTER:-Decide/}" ${AB_SETTINGS:--}
fi
if [[ " $steps " == *" fused "* ]]; then
  # The standalone fast norms in their earlier and their grouped layout.
  for fused in off on; do
    echo "== STAVE_CUDA_FUSED_INPUT=$fused" | tee -a "$OUT/bench_norms.txt"
    STAVE_CUDA_FUSED_INPUT=$fused timeout "${BENCH_TIMEOUT:-120}" "$bin/bench_elementwise" \
      --benchmark_filter='^fast/(add_rms_norm|rms_norm|gated_rms_norm)' 2>&1 | grep -E "^fast/" | tee -a "$OUT/bench_norms.txt"
  done
  decide_alternated bench_fused.txt 'Decide/' STAVE_CUDA_FUSED_INPUT=off STAVE_CUDA_FUSED_INPUT=on
  STAVE_CUDA_FUSED_INPUT=on STAVE_STAGES=1 timeout "${BENCH_TIMEOUT:-120}" "$bin/stave" bench --model $rel --device cuda \
    --prompt-tokens "${STAGE_TOKENS:-2048}" 2>&1 | tee "$OUT/stages_fused.txt"
fi
if [[ " $steps " == *" sweep "* ]]; then
  timeout "${BENCH_TIMEOUT:-120}" "$bin/bench_cuda_fp8_gemm" --benchmark_filter="/${SWEEP_TOKENS:-2048}/" \
    --benchmark_min_time=0.03s --benchmark_counters_tabular=true 2>&1 | tee "$OUT/fp8_sweep.txt"
  if [ -n "${FP8_ALGOS:-}" ]; then synth_release; fi
  for algo in ${FP8_ALGOS:-}; do
    echo "== STAVE_CUDA_FP8_ALGO=$algo" | tee -a "$OUT/bench_fp8_algo.txt"
    STAVE_CUDA_FP8_ALGO=$algo STAVE_BENCH_MODEL=$rel STAVE_BENCH_DEVICE=cuda STAVE_BENCH_PRECISION=fast \
      timeout "${BENCH_TIMEOUT:-120}" "$bin/bench_decide" --benchmark_filter='Decide/' 2>&1 | grep -E "Decide/" |
      tee -a "$OUT/bench_fp8_algo.txt"
  done
fi
# STEPS=attention: the fast attention kernels side by side at the 27B / 9B shapes. With
# ATTENTION_SETTINGS (entries as AB_SETTINGS's, e.g. "STAVE_CUDA_FLASH_TILE=plain
# STAVE_CUDA_FLASH_TILE=lean"): the attention op test once per entry, then the benchmarks matching
# ATTENTION_FILTER (default 'wgmma_27b/(2048|8192)') once per entry, alternated twice.
if [[ " $steps " == *" attention "* ]]; then
  if [ -z "${ATTENTION_SETTINGS:-}" ]; then
    timeout "${BENCH_TIMEOUT:-120}" "$bin/bench_cuda_attention" --benchmark_counters_tabular=true 2>&1 |
      tee "$OUT/bench_attention.txt"
  else
    settings_tests bench_attention.txt "op test" 90 'PASSED|FAILED|Failure' "$ATTENTION_SETTINGS" \
      "$bin/stave_cuda_tests" 'CudaOps.Attention*'
    settings_alternated bench_attention.txt '^BM_' "$ATTENTION_SETTINGS" "$bin/bench_cuda_attention" \
      --benchmark_filter="${ATTENTION_FILTER:-wgmma_27b/(2048|8192)}" --benchmark_min_time=0.2s \
      --benchmark_counters_tabular=true
  fi
  pack_results
fi
# STEPS=sdpa: PyTorch's SDPA backends (flash, cuDNN, memory-efficient) at the same shapes
# (tools/reference/sdpa_backends.py), beside bench_cuda_attention's figures.
if [[ " $steps " == *" sdpa "* ]]; then
  timeout "${BENCH_TIMEOUT:-120}" env PYTHONUNBUFFERED=1 python3 tools/reference/sdpa_backends.py 2048 8192 2>&1 |
    tee "$OUT/sdpa_backends.txt"
  pack_results
fi
# STEPS=linear: bench_linear's products matching LINEAR_FILTER (default '^cuda_fp8/mlp_down') once
# per LINEAR_SETTINGS entry (as AB_SETTINGS's; default: the register and the staged row
# quantization, STAVE_CUDA_QUANT_ROWS), alternated twice, after the FP8 linear tests under each.
if [[ " $steps " == *" linear "* ]]; then
  settings="${LINEAR_SETTINGS:-STAVE_CUDA_QUANT_ROWS=registers STAVE_CUDA_QUANT_ROWS=staged}"
  settings_tests bench_linear.txt tests 120 'PASSED|FAILED|Failure' "$settings" "$bin/stave_cuda_tests" \
    'CudaLinearFp8.*:*Fixture*:*Decision*'
  settings_alternated bench_linear.txt '^cuda' "$settings" "$bin/bench_linear" \
    --benchmark_filter="${LINEAR_FILTER:-^cuda_fp8/mlp_down}" --benchmark_min_time=0.1s
  pack_results
fi
# STEPS=ncu: Nsight Compute (where the machine has it) on the BF16 flash kernel at the 27B's
# heads and 8192 tokens, once per ATTENTION_SETTINGS entry (or once with the defaults).
if [[ " $steps " == *" ncu "* ]]; then
  ncu="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
  for setting in ${ATTENTION_SETTINGS:--}; do
    vars="$(setting_vars "$setting")"
    echo "== ${vars:-the defaults}" >> "$OUT/ncu_attention.txt"
    env $vars timeout "${BENCH_TIMEOUT:-120}" "$ncu" --kernel-name regex:wgmma --launch-skip 2 --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section ComputeWorkloadAnalysis \
      "$bin/bench_cuda_attention" --benchmark_filter='bf16_wgmma_27b/8192' --benchmark_min_time=0.01s \
      >> "$OUT/ncu_attention.txt" 2>&1
  done
  pack_results
fi
