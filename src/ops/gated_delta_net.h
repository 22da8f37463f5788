// Gated DeltaNet math (transformers' Qwen3.5 / flash-linear-attention): the gates, the delta-rule recurrence in its
// chunked (prefill) and per-token (decode, and test oracle) forms, and the gated RMSNorm that
// reads its output. fp32 throughout, as HF's torch fallback.
#pragma once
#include <cstdint>

namespace stave {

struct GatedDeltaDims {
  int64_t n_k_heads = 0;  // q/k heads
  int64_t n_v_heads = 0;  // v heads; a multiple of n_k_heads. v head j reads q/k head j / (n_v/n_k)
  int64_t d_k = 0;
  int64_t d_v = 0;
  int64_t state_floats() const { return n_v_heads * d_k * d_v; }
};

// One call's tokens. Token t's q is q + t·stride ([n_k, d_k] contiguous), likewise k, and v
// ([n_v, d_v]); the three usually point into one conv output row [q | k | v].
// q and k are raw: the op L2-normalises them (eps 1e-6) and scales q by d_k^{-1/2}
// (HF use_qk_l2norm_in_kernel=True).
struct GatedDeltaInput {
  int64_t tokens = 0;
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t stride = 0;           // floats between consecutive tokens of q, k and v
  const float* g = nullptr;     // [tokens, n_v] log-decay (≤ 0)
  const float* beta = nullptr;  // [tokens, n_v]
};

inline constexpr int64_t kGatedDeltaChunk = 64;  // HF / FLA chunk size

namespace ref {

// g[t,h] = −exp(A_log[h]) · softplus(a[t,h] + dt_bias[h]);  beta[t,h] = sigmoid(b[t,h]).
// a, b, g, beta: [tokens, n_v]; A_log, dt_bias: [n_v].
void gdn_gates(const float* a, const float* b, const float* A_log, const float* dt_bias, int64_t tokens,
               int64_t n_v, float* g, float* beta);

// Per token and v head, with S the head's state [d_k, d_v] (fp32):
//   S ← exp(g)·S;  e = β (v − Sᵀk̂);  S ← S + k̂ eᵀ;  o = Sᵀq̂   (output from the updated state)
// state: [n_v, d_k, d_v], carried in and out. out: [tokens, n_v·d_v].
void gated_delta_rule_recurrent(const GatedDeltaDims& dims, const GatedDeltaInput& in, float* state, float* out);

// The same recurrence computed chunk by chunk (HF torch_chunk_gated_delta_rule): inside a
// chunk of `chunk` tokens the intra-chunk terms come from a unit-lower-triangular solve, and
// the state is updated once per chunk. Chunks start at this call's first token; a short last
// chunk equals HF's zero padding. Equal to the recurrent form up to fp32 rounding.
void gated_delta_rule_chunked(const GatedDeltaDims& dims, const GatedDeltaInput& in, float* state, float* out,
                              int64_t chunk = kGatedDeltaChunk);

// Qwen3_5RMSNormGated over rows of `dim` (one v head each):
//   y = w ⊙ (x / sqrt(mean(x²) + eps)) · silu(z)    (plain weight, shared by all heads)
void gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t dim, const float* w, float eps, float* y);

}  // namespace ref
}  // namespace stave
