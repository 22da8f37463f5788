// fp32 reference of torch.nn.MultiheadAttention in inference mode (batch_first, no mask, no
// dropout), the attention the joint schema head uses everywhere: Q/K/V are the three row blocks of in_proj_weight
// (+ in_proj_bias), each split into `heads` heads of embed_dim/heads dims; every head computes
// softmax(Q·Kᵀ/sqrt(head_dim))·V; the heads are concatenated and passed through out_proj.
#pragma once
#include <cstdint>
#include <vector>

namespace stave::ref {

// Views of fp32 weights owned elsewhere (the head reads its bf16 file to fp32 once).
struct MultiheadAttentionWeights {
  int64_t embed_dim = 0;
  int64_t heads = 0;
  const float* in_proj_weight = nullptr;  // [3E, E]: rows 0..E-1 = q, E..2E-1 = k, 2E..3E-1 = v
  const float* in_proj_bias = nullptr;    // [3E]
  const float* out_proj_weight = nullptr; // [E, E]
  const float* out_proj_bias = nullptr;   // [E]

  int64_t head_dim() const { return embed_dim / heads; }
};

// Keys and values after their input projections, [Nk, E] each. Projecting them once lets a
// caller reuse them (the memory is the same for every query batch of a layer).
struct ProjectedKeyValues {
  int64_t rows = 0;
  std::vector<float> keys;
  std::vector<float> values;
};

// K = key·Wkᵀ + bk, V = value·Wvᵀ + bv.
ProjectedKeyValues mha_project_key_values(const MultiheadAttentionWeights& w, const float* key, const float* value,
                                          int64_t rows);

// context[Nq, E] = concat_h softmax(Q_h·K_hᵀ/sqrt(d))·V_h for queries already projected
// (q = query·Wqᵀ + bq): mha_attend without its two projections, for callers that run those
// elsewhere (the joint head, through its backend). Needs kv.rows >= 1.
void mha_context(const MultiheadAttentionWeights& w, const float* q, int64_t query_rows, const ProjectedKeyValues& kv,
                 float* context);

// out[Nq, E] = out_proj(concat_h softmax(Q_h·K_hᵀ/sqrt(d))·V_h) with Q = query·Wqᵀ + bq.
// Needs kv.rows >= 1. `out` must not alias `query`.
void mha_attend(const MultiheadAttentionWeights& w, const float* query, int64_t query_rows,
                const ProjectedKeyValues& kv, float* out);

// The whole module: attention of query [Nq, E] over key/value [Nk, E].
void multihead_attention(const MultiheadAttentionWeights& w, const float* query, int64_t query_rows, const float* key,
                         const float* value, int64_t key_rows, float* out);

}  // namespace stave::ref
