// The gated delta rule, chunk form (Yang et al., "Gated Delta Networks"; the WY / UT transform
// as flash-linear-attention's chunk_gated_delta_rule splits it), products on BF16 tensor cores
// (nvcuda::wmma 16×16×16, fp32 accumulation). Fast precision, d_k = d_v = 128, chunk C = 64.
//
// Per v head h (k head h / (n_v/n_k)), chunk of rows t0 … t0+len−1 (len ≤ 64, never crossing a
// sequence), q̂, k̂ the L2-normalised q (· d_k^{-1/2}) and k, G the within-chunk cumulative sum
// of g, and S the [d_k, d_v] state at the chunk's start:
//   1. qk_norm:  q̂, k̂ → BF16 [tokens, n_k, 128].
//   2. wu:       per (chunk, head): A = strictly-lower (β k̂) k̂ᵀ ⊙ exp(Gᵢ − Gⱼ),
//                T = (I + A)⁻¹ (fp32, by 16 × 16 blocks: invert_unit_lower),
//                W = T (β k̂ ⊙ exp(G)) (BF16), U = T (β v) (fp32) → scratch [chunk, n_v, 64, 128].
//   3. state:    per (sequence, head, 32 or 64 state columns), the chunks in order:
//                S_c = S (BF16 scratch); v_new = U − W S;  S ← exp(G_last) S + (k̂ ⊙ exp(G_last − G))ᵀ v_new.
//                The final S goes back to the caller's state. 3b (the default since 2026-12-06,
//                measured faster on an H100) is this pass with the state in registers, U, S_c and
//                v_new transposed in scratch; 3a (STAVE_CUDA_DELTA=chunk-shared) keeps it in shared
//                memory. By default (since 2026-12-07, below) 3b also forms step 4's first term
//                from the state it holds and writes it into the output, and S_c is not stored.
//   4. out:      per (chunk, head): O = (q̂ ⊙ exp(G)) S_c + (q̂ k̂ᵀ ⊙ causal(incl. diagonal) ⊙ exp(Gᵢ − Gⱼ)) v_new
//                (by default only the second term, added to what 3b wrote).
// Scratch is laid out per chunk with 64 rows whatever len is; rows ≥ len are zero (k̂, β, v
// read as 0), so W, U and v_new rows ≥ len are 0 and never reach a valid row. It takes
// 2·tokens·n_k·128 BF16 plus ~96 KiB per (chunk, v head): ~170 MB at 2048 tokens of the 27B's
// 48 heads, ~670 MB at 8192, from the stream-ordered pool; with split operands (below) twice the
// q̂, k̂ and ~144 KiB per (chunk, v head): ~255 MB at 2048, ~1.02 GB at 8192. Since 2026-12-07
// S_c is not stored by default (whole-out): 32 KiB per (chunk, v head) less, 64 KiB split.
// Split operands (the default since 2026-12-06; STAVE_CUDA_DELTA=chunk-bf16 for plain BF16
// operands): every operand but W is held as a BF16 pair
// hi + lo (lo = BF16(x − hi)) and each product runs as three (hi·hi' + hi·lo' + lo·hi'), which
// keeps ~16 significant bits of each operand instead of 8; the accumulation stays fp32. It takes
// the register pass (3b) and twice the scratch for q̂, k̂, S_c and v_new. The numpy emulation
// (tools/reference/probe_delta_rounding.py) puts the output's relative error at ~3e-5 this way,
// against 3.7e-3 with every operand in plain BF16. W stays one BF16 array: splitting it too (an
// experiment, 2026-12-06) cut the op suite's worst case from 2e-5 to 2e-6 but left the decisions'
// error where it was (0.0102 against 0.0097) for 12 % more time.
// Measured (H100, 27B shapes, 2048 tokens, per layer): 0.70 ms against 0.40 with plain BF16; on
// the 4-layer 9B-shape MXFP4 synth the decisions' error against exact precision (mean over
// requests of the max |Δp|) falls from 0.0236 to 0.0097 (docs/eval.md).
// Resources (ptxas, sm_90a; no spills): qk_norm 24 registers; wu 56 registers, 72,448 B shared
// (three blocks per SM); state 62 registers, 104,960 B; out 80 registers, 96,512 B (two each);
// the register pass (3b) 200 registers, 70,144 B, two warps per block. With split operands: wu
// 66 registers, 108,288 B (two blocks per SM); the register pass 184 registers, 104,960 B; out
// 128 registers, 177,408 B (one block per SM). (The defaults since 2026-12-07 differ: below.)
// How the register pass and the transform run (measured on an H100, 2026-12-07, bench_gated_delta,
// split operands, 27B shapes, ms per layer at 2048 / 8192 tokens):
// the default since then, STAVE_CUDA_DELTA_STATE=whole-out with STAVE_CUDA_DELTA_WU=wide, 0.571 /
// 2.15 against 0.680 / 2.58 for the earlier default (whole, narrow). whole-out has the pass form
// step 4's inter-chunk product: each warp forms (q̂ exp(G)) S_c for its 16 columns from the state
// it holds (the A fragments of Sᵀ Wᵀ again, q̂ double-buffered beside W and k̂, 64 columns per
// block to fit) and writes it into the output; S_c never goes to scratch (~96 MiB per 27B layer at
// 2048 tokens with split operands, written and read once each), and the output kernel only adds
// P v_new (two blocks of 8 warps per SM, without S_c's buffers): the output kernel 0.183 → 0.102
// ms, the pass 0.249 → 0.262. wide runs the transform with 8 warps per block in the same shared
// memory: 0.214 → 0.172 ms. Kept for A/B runs: STAVE_CUDA_DELTA_STATE=whole (S_c through scratch,
// 32 columns per block), =whole-prefetch (the same, the next chunk's Uᵀ copied into shared memory
// ahead; no faster: 0.251), =halves (two warps per 16 state columns, each with half of d_k, one
// exchange through shared memory per chunk; no faster: 0.252), STAVE_CUDA_DELTA_WU=narrow (4 warps).
// whole-out takes 255 registers with split operands (8 bytes spilled). Since later that day the
// pass is whole-out's work on warp-group MMA (STAVE_CUDA_DELTA_STATE=wgmma; first run on an H200:
// the op cases 9 / 9 with split and plain operands, the fixture decisions 12 / 12; the pass
// 0.264 → 0.233 ms per 27B layer at 2048 tokens, the delta rule 0.564 → 0.530), and since
// 2026-12-07 08:00 its tiles come by TMA (=wgmma-tma, the default; on an H100 the op cases 9 / 9
// both ways, the pass 0.232 → 0.169 ms, the delta rule 0.54 → 0.48). Since 2026-12-07 17:00 the
// transform also writes each chunk's exp(G) and exp(G_last − G) (x.gexp, x.gdec: two floats per
// row) for that pass, which no longer forms them, and the pass's shared loads are shared, not
// generic (Nsight Compute had both on its critical path): on an H100 the pass 0.167 → 0.123 ms,
// the transform 0.162 → 0.151, the delta rule 0.454 → 0.397 per 27B layer at 2048 tokens
// (1.69 → 1.45 at 8192).
// Files: this one holds the scratch, the switch and the order of the launches; step 1 and 2 are
// in gated_delta_transform.cu, 3a and 3b in gated_delta_state.cu (3b on warp-group MMA in
// gated_delta_state_wgmma.cu), 4 in gated_delta_output.cu,
// what they share in gated_delta_chunk_device.cuh, their launches in gated_delta_chunk_launch.h.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/gated_delta_chunk.h"
#include "backends/cuda/gated_delta_chunk_device.cuh"
#include "backends/cuda/gated_delta_chunk_launch.h"
#include "stave/errors.h"
#include "util/env_choice.h"

namespace stave::cuda::dev {
namespace {

using delta_chunk::bf16;
using delta_chunk::ChunkGrid;
using delta_chunk::ChunkScratch;
using delta_chunk::kC;
using delta_chunk::kD;

// One stream-ordered allocation carved into the scratch arrays (256-byte aligned each).
class Scratch {
 public:
  Scratch(size_t bytes, cudaStream_t s) : s_(s) { STAVE_CUDA_CHECK(cudaMallocAsync(&base_, bytes, s)); }
  ~Scratch() { cudaFreeAsync(base_, s_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  template <class T>
  T* take(size_t count) {
    T* p = reinterpret_cast<T*>(static_cast<unsigned char*>(base_) + used_);
    used_ += round_up(count * sizeof(T));
    return p;
  }
  static size_t round_up(size_t b) { return (b + 255) / 256 * 256; }

 private:
  void* base_ = nullptr;
  size_t used_ = 0;
  cudaStream_t s_;
};

// The benchmark profile (gated_delta_chunk.h): five events around the four kernels.
struct Profiler {
  bool on = false;
  cudaEvent_t ev[5] = {};
  GatedDeltaChunkProfile totals;
  void mark(int i, cudaStream_t s) {
    if (on) STAVE_CUDA_CHECK(cudaEventRecord(ev[i], s));
  }
  void collect() {
    if (!on) return;
    STAVE_CUDA_CHECK(cudaEventSynchronize(ev[4]));
    float ms[4];
    for (int i = 0; i < 4; ++i) STAVE_CUDA_CHECK(cudaEventElapsedTime(&ms[i], ev[i], ev[i + 1]));
    totals.qk_norm_ms += ms[0];
    totals.wu_ms += ms[1];
    totals.state_ms += ms[2];
    totals.out_ms += ms[3];
    ++totals.calls;
  }
};
Profiler g_profiler;

}  // namespace

void gated_delta_chunk_profile(bool on) {
  if (on && !g_profiler.ev[0])
    for (cudaEvent_t& e : g_profiler.ev) STAVE_CUDA_CHECK(cudaEventCreate(&e));
  g_profiler.on = on;
  g_profiler.totals = {};
}

GatedDeltaChunkProfile gated_delta_chunk_profile_read() { return g_profiler.totals; }

namespace {

// STAVE_CUDA_DELTA: "auto" (the default: the chunk form where it applies, with split operands
// over the register pass, 3b), "chunk-split" (the same), "chunk-bf16" (the chunk form with plain
// BF16 operands over the register pass: the default until 2026-12-06, ~1.8× faster, ~2.4× the
// decision error; "chunk-registers", its name while it was an experiment, is the same),
// "chunk-shared" (plain BF16 operands, the earlier pass 3a with the state in shared memory) or
// "recurrent" (the per-token recurrence everywhere).
enum class DeltaChoice { kSplit, kBf16, kChunkShared, kRecurrent };
DeltaChoice delta_choice_from_env() {
  return env_choice<DeltaChoice>("STAVE_CUDA_DELTA", {{"auto", DeltaChoice::kSplit},
                                                      {"chunk-split", DeltaChoice::kSplit},
                                                      {"chunk-bf16", DeltaChoice::kBf16},
                                                      {"chunk-registers", DeltaChoice::kBf16},
                                                      {"chunk-shared", DeltaChoice::kChunkShared},
                                                      {"recurrent", DeltaChoice::kRecurrent}});
}

// STAVE_CUDA_DELTA_STATE: how the register pass (3b) is run (delta_chunk::StatePass): "wgmma-tma"
// (the default since 2026-12-07 08:00: whole-out's work on Hopper's warp-group MMA,
// gated_delta_state_wgmma.cu, with the W, k̂ and q̂ tiles loaded by TMA; on an H100 the pass
// 0.232 → 0.169 ms per 27B layer at 2048 tokens and 0.92 → 0.65 at 8192 against "wgmma"; where the
// driver's tensor-map entry point is missing it runs as "wgmma"), "wgmma" (the same with the tiles
// copied by cp.async; the default before: against "whole-out" 0.264 → 0.233 ms and 1.03 → 0.91
// on an H200), "whole-out" (the default before: one warp per 16 state columns, all of
// d_k, 64 columns per block, Uᵀ copied ahead into shared memory, and the pass forms the
// inter-chunk output (q̂ exp(G)) S_c into the output itself: S_c never goes to scratch, the output
// kernel adds only the intra-chunk part), "whole" (32 columns per block, Uᵀ read from global
// memory, S_c through scratch), "whole-prefetch" (the same, the next chunk's Uᵀ copied ahead) or
// "halves" (two warps per 16 columns, each with half of d_k; the two halves of v_new's sum meet
// in shared memory; Uᵀ copied ahead).
delta_chunk::StatePass state_pass_from_env() {
  using delta_chunk::StatePass;
  return env_choice<StatePass>("STAVE_CUDA_DELTA_STATE", {{"wgmma-tma", StatePass::kWgmmaTma},
                                                          {"wgmma", StatePass::kWgmma},
                                                          {"whole-out", StatePass::kWholeOut},
                                                          {"whole", StatePass::kWhole},
                                                          {"whole-prefetch", StatePass::kWholePrefetch},
                                                          {"halves", StatePass::kHalves}});
}

// STAVE_CUDA_DELTA_WU: the transform's (step 2) block, "wide" (the default since 2026-12-07: 8 warps)
// or "narrow" (4 warps in the same shared memory).
bool wu_wide_from_env() { return env_choice<bool>("STAVE_CUDA_DELTA_WU", {{"wide", true}, {"narrow", false}}); }

}  // namespace

bool gated_delta_chunk_applies(const GatedDeltaDims& dims, int64_t tokens, int64_t sequences) {
  if (delta_choice_from_env() == DeltaChoice::kRecurrent) return false;
  return dims.d_k == kD && dims.d_v == kD && dims.n_k_heads > 0 && dims.n_v_heads % dims.n_k_heads == 0 &&
         tokens > sequences;
}

void gated_delta_rule_chunked(const GatedDeltaDims& dims, const GatedDeltaInput& in, std::span<const int64_t> starts,
                              float* states, float* out, cudaStream_t s) {
  const int64_t T = in.tokens;
  if (T <= 0) return;
  if (dims.d_k != kD || dims.d_v != kD || dims.n_k_heads <= 0 || dims.n_v_heads % dims.n_k_heads != 0)
    throw Error(ErrorKind::kInternal, "chunked gated delta rule: needs d_k = d_v = 128 and n_v a multiple of n_k");
  const int64_t n_seq = static_cast<int64_t>(starts.size()) - 1;
  if (n_seq < 1 || n_seq > 65535 || starts.front() != 0 || starts.back() != T || T >= (int64_t{1} << 31))
    throw Error(ErrorKind::kInternal, "chunked gated delta rule: bad sequence offsets for " + std::to_string(T) +
                                          " tokens");
  const int nk = static_cast<int>(dims.n_k_heads), nv = static_cast<int>(dims.n_v_heads);
  // Chunks of 64 from each sequence's first row; the table only for several sequences.
  std::vector<int> t0s, lens, first{0};
  for (int64_t b = 0; b < n_seq; ++b) {
    if (starts[b + 1] < starts[b])
      throw Error(ErrorKind::kInternal, "chunked gated delta rule: sequence offsets go down");
    for (int64_t t = starts[b]; t < starts[b + 1]; t += kC) {
      t0s.push_back(static_cast<int>(t));
      lens.push_back(static_cast<int>(std::min<int64_t>(kC, starts[b + 1] - t)));
    }
    first.push_back(static_cast<int>(t0s.size()));
  }
  const int nc = static_cast<int>(t0s.size());
  const DeltaChoice choice = delta_choice_from_env();
  const bool split = choice == DeltaChoice::kSplit;
  const bool registers = choice != DeltaChoice::kChunkShared;  // the register pass (3b); split operands need it
  const delta_chunk::StatePass pass = state_pass_from_env();
  const bool wgmma = registers && (pass == delta_chunk::StatePass::kWgmma || pass == delta_chunk::StatePass::kWgmmaTma);
  const bool inter_in_pass = wgmma || (registers && pass == delta_chunk::StatePass::kWholeOut);  // no S_c scratch
  const size_t halves = split ? 2 : 1;
  const size_t sc_halves = inter_in_pass ? 0 : halves;
  const size_t per_chunk = static_cast<size_t>(nc) * nv;
  const size_t qk = static_cast<size_t>(T) * nk * kD;
  Scratch scratch(2 * halves * Scratch::round_up(qk * sizeof(bf16)) +
                      (wgmma ? 3 : 1) * Scratch::round_up(per_chunk * kC * sizeof(float)) +
                      Scratch::round_up(per_chunk * kC * kD * sizeof(bf16)) +
                      Scratch::round_up(per_chunk * kC * kD * sizeof(float)) +
                      sc_halves * Scratch::round_up(per_chunk * kD * kD * sizeof(bf16)) +
                      halves * Scratch::round_up(per_chunk * kC * kD * sizeof(bf16)) +
                      Scratch::round_up((2 * nc + n_seq + 1) * sizeof(int)),
                  s);
  ChunkScratch x;
  x.qn = scratch.take<bf16>(qk);
  x.kn = scratch.take<bf16>(qk);
  x.gcum = scratch.take<float>(per_chunk * kC);
  if (wgmma) {
    x.gexp = scratch.take<float>(per_chunk * kC);
    x.gdec = scratch.take<float>(per_chunk * kC);
  }
  x.W = scratch.take<bf16>(per_chunk * kC * kD);
  x.U = scratch.take<float>(per_chunk * kC * kD);
  if (!inter_in_pass) x.Sc = scratch.take<bf16>(per_chunk * kD * kD);
  x.vnew = scratch.take<bf16>(per_chunk * kC * kD);
  if (split) {
    x.qn_lo = scratch.take<bf16>(qk);
    x.kn_lo = scratch.take<bf16>(qk);
    if (!inter_in_pass) x.Sc_lo = scratch.take<bf16>(per_chunk * kD * kD);
    x.vnew_lo = scratch.take<bf16>(per_chunk * kC * kD);
  }
  int* table = nullptr;
  if (n_seq > 1) {
    std::vector<int> host = t0s;
    host.insert(host.end(), lens.begin(), lens.end());
    host.insert(host.end(), first.begin(), first.end());
    table = scratch.take<int>(host.size());
    // From pageable memory: staged before the call returns, so `host` may go.
    STAVE_CUDA_CHECK(cudaMemcpyAsync(table, host.data(), host.size() * sizeof(int), cudaMemcpyHostToDevice, s));
  }

  const ChunkGrid grid{T, table, nc, nk, nv, static_cast<int>(n_seq)};
  g_profiler.mark(0, s);
  delta_chunk::launch_qk_norm(in, grid, x, s);
  g_profiler.mark(1, s);
  delta_chunk::launch_transform(in, grid, x, registers, split, wu_wide_from_env(), s);
  g_profiler.mark(2, s);
  if (wgmma)
    delta_chunk::launch_state_wgmma(grid, x, split, pass == delta_chunk::StatePass::kWgmmaTma, states, out, s);
  else if (registers)
    delta_chunk::launch_state_registers(grid, x, split, pass, states, out, s);
  else
    delta_chunk::launch_state_shared(grid, x, states, s);
  g_profiler.mark(3, s);
  delta_chunk::launch_output(grid, x, registers, split, inter_in_pass, out, s);
  g_profiler.mark(4, s);
  g_profiler.collect();
}

}  // namespace stave::cuda::dev
