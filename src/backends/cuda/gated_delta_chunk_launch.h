// The chunked gated delta rule's kernel launches (gated_delta_chunk.cu has the algorithm and
// calls them in order): step 1 and 2 in gated_delta_transform.cu, the sequential passes 3a / 3b
// in gated_delta_state.cu, step 4 in gated_delta_output.cu.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/gated_delta_net.h"

namespace stave::cuda::dev::delta_chunk {

// The scratch of one call: q̂, k̂ (and their lo halves), G, W, U, S_c, v_new (and theirs).
// gexp, gdec (the warp-group pass's; null otherwise): exp(G) and exp(G_last − G) per chunk row,
// written by the transform so that the pass reads each chunk's factors instead of forming them.
struct ChunkScratch {
  __nv_bfloat16 *qn, *kn, *qn_lo = nullptr, *kn_lo = nullptr;
  float* gcum;
  float *gexp = nullptr, *gdec = nullptr;
  __nv_bfloat16* W;
  float* U;
  __nv_bfloat16 *Sc = nullptr, *vnew = nullptr, *Sc_lo = nullptr, *vnew_lo = nullptr;
};

// The call's shape: tokens, the chunk table (device; null for one sequence), chunks, k and v
// heads, sequences.
struct ChunkGrid {
  int64_t tokens;
  const int* table;
  int nc, nk, nv, n_seq;
};

// 1. q̂, k̂ (and their lo halves where x has them).
void launch_qk_norm(const GatedDeltaInput& in, const ChunkGrid& g, const ChunkScratch& x, cudaStream_t s);
// 2. G, W and U (U transposed for the register pass; split operands need it so); wide: 8 warps
// per block instead of 4.
void launch_transform(const GatedDeltaInput& in, const ChunkGrid& g, const ChunkScratch& x, bool u_transposed,
                      bool split, bool wide, cudaStream_t s);
// 3a. The sequential pass with the state in shared memory (plain BF16 operands).
void launch_state_shared(const ChunkGrid& g, const ChunkScratch& x, float* states, cudaStream_t s);
// How the register pass (3b) is run: one warp per 16 state columns with Uᵀ read from global
// memory (kWhole) or copied ahead through shared memory (kWholePrefetch), or two warps per 16
// columns, each with half of d_k, Uᵀ copied ahead (kHalves); kWholeOut: as kWholePrefetch, and
// the pass writes the inter-chunk output (q̂ exp(G)) S_c into out instead of S_c into scratch.
// kWgmma: kWholeOut's work on warp-group MMA; kWgmmaTma: the same with W, k̂ and q̂ tiles loaded
// by TMA (one thread, an mbarrier per buffer set) instead of cp.async by every thread.
enum class StatePass { kWhole, kWholePrefetch, kHalves, kWholeOut, kWgmma, kWgmmaTma };
// 3b. The sequential pass with the state in registers, with or without split operands; out is
// written only with kWholeOut (x.Sc is then not needed).
void launch_state_registers(const ChunkGrid& g, const ChunkScratch& x, bool split, StatePass pass, float* states,
                            float* out, cudaStream_t s);
// 3b on Hopper's warp-group MMA (StatePass::kWgmma, gated_delta_state_wgmma.cu): the kWholeOut
// pass's work, out written with the inter-chunk part, x.Sc not needed.
void launch_state_wgmma(const ChunkGrid& g, const ChunkScratch& x, bool split, bool tma, float* states, float* out,
                        cudaStream_t s);
// 4. The outputs (S_c and v_new transposed after the register pass; split operands need it so).
// inter_done: out already holds the inter-chunk part (StatePass::kWholeOut); the kernel adds the
// intra-chunk part to it.
void launch_output(const ChunkGrid& g, const ChunkScratch& x, bool transposed, bool split, bool inter_done, float* out,
                   cudaStream_t s);

}  // namespace stave::cuda::dev::delta_chunk
