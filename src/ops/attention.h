// Causal multi-head attention with grouped KV heads, computed without an L×L score matrix:
// each query walks the keys in tiles with an online (running max / running sum) softmax.
// Used by the Qwen3.5 gated full-attention layers.
#pragma once
#include <cstdint>

namespace stave {

struct AttentionShape {
  int64_t n_q_heads = 0;
  int64_t n_kv_heads = 0;  // divides n_q_heads; query head h reads kv head h / (n_q/n_kv)
  int64_t head_dim = 0;
  float scale = 1.0f;      // score = (q·k) · scale
};

inline constexpr int64_t kAttentionKeyTile = 64;

namespace ref {

// q: [tokens, n_q, d], the queries of absolute positions q_pos0 … q_pos0+tokens−1.
// k, v: [≥ q_pos0+tokens, n_kv, d], keys/values from position 0. Query at position p attends
// keys 0…p. out: [tokens, n_q, d] = softmax(q kᵀ · scale) v, in fp32.
void attention_causal(const AttentionShape& shape, const float* q, int64_t tokens, int64_t q_pos0, const float* k,
                      const float* v, float* out);

// Non-causal attention (vision tower): query row i, head h at q + i·q_stride + h·d attends every
// key row j < kv_rows of kv head h/(n_q/n_kv) at k/v + j·kv_stride + (h/group)·d; writes
// out + i·out_stride + h·d. HF eager attention with no mask, in torch's CPU orders (the FMA
// chains of MKL's sgemm and ATen's softmax, as attention_causal).
void attention_dense(const AttentionShape& shape, const float* q, int64_t q_stride, int64_t q_rows, const float* k,
                     const float* v, int64_t kv_stride, int64_t kv_rows, float* out, int64_t out_stride);

}  // namespace ref
}  // namespace stave
