// The gated delta rule in its chunked WY / UT-transform form on BF16 tensor cores, operands as
// BF16 hi + lo pairs by default (fast precision, prefill): what ref::gated_delta_rule_chunked
// computes, for d_k = d_v = 128.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

#include "ops/gated_delta_net.h"

namespace stave::cuda::dev {

// Whether the chunk kernels take these shapes (d_k = d_v = 128, n_v a multiple of n_k) and the
// call is worth it (more tokens than sequences: all-one-token calls, i.e. decode, keep the
// recurrence). STAVE_CUDA_DELTA=recurrent pins the recurrence (for A/B runs); every other value
// lets the shapes decide: unset, "auto" or "chunk-split" the chunk form with split operands (BF16
// hi + lo pairs, the default), "chunk-bf16" (or "chunk-registers") with plain BF16 operands,
// "chunk-shared" plain BF16 with the earlier pass (state in shared memory); anything else is an
// Error.
bool gated_delta_chunk_applies(const GatedDeltaDims& dims, int64_t tokens, int64_t sequences);

// in.tokens rows split into sequences by host `starts` (sequences + 1 offsets, starts[0] = 0,
// last = in.tokens); sequence b's state is the b-th [n_v, d_k, d_v] block of `states` (fp32,
// device), read and written back. out: [tokens, n_v·d_v] (device). Scratch comes from the
// device's stream-ordered pool (cudaMallocAsync on `s`).
void gated_delta_rule_chunked(const GatedDeltaDims& dims, const GatedDeltaInput& in, std::span<const int64_t> starts,
                              float* states, float* out, cudaStream_t s);

// Benchmarks: while on, each gated_delta_rule_chunked call records CUDA events between its four
// kernels, waits for them, and adds each kernel's time (ms) to the totals read here; the call
// count says how many calls they sum. Process-wide, not thread-safe; off by default.
struct GatedDeltaChunkProfile {
  double qk_norm_ms = 0, wu_ms = 0, state_ms = 0, out_ms = 0;
  int64_t calls = 0;
};
void gated_delta_chunk_profile(bool on);
GatedDeltaChunkProfile gated_delta_chunk_profile_read();

}  // namespace stave::cuda::dev
