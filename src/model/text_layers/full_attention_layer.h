// The gated full-attention token mixer of a `full_attention` layer (transformers' Qwen3.5):
// q_proj packs query and gate per head; zero-centred q/k RMSNorm, partial interleaved M-RoPE,
// causal GQA attention, output ⊙ sigmoid(gate), o_proj.
#pragma once
#include <span>
#include <string>
#include <vector>

#include "formats/linear_weight.h"
#include "formats/tensor_names.h"
#include "io/model_config.h"
#include "io/tensor_store.h"
#include "model/text_layers/layer_input.h"
#include "model/text_layers/token_chunk.h"
#include "ops/backend.h"

namespace stave {
namespace quant {
class QuantPlan;
}

class FullAttentionLayer {
 public:
  // One sequence's KV cache: post-norm, post-RoPE keys and values of the tokens seen so far,
  // in the backend's memory.
  struct State {
    Tensor k, v;  // [capacity, n_kv·head_dim]
    int64_t length = 0;
    int64_t capacity = 0;
  };

  // Weights named by `names` (formats/tensor_names.h), resident on `backend`.
  FullAttentionLayer(const TensorStore& store, const AttentionTensorNames& names, const TextConfig& config,
                     const quant::QuantPlan* plan, const Backend& backend);

  // A cache with room for max_tokens tokens; forward grows it when more arrive.
  State new_state(const Backend& backend, int64_t max_tokens) const;

  // The input norm `in` forms -> y: [batch.rows, hidden], in the backend's memory; slice b
  // continues the cache *states[b], and its begin must equal that cache's length (tokens arrive
  // in order).
  void forward(const Backend& backend, const LayerInput& in, const TokenBatch& batch, std::span<State* const> states,
               float* y) const;

 private:
  void grow(const Backend& backend, State& cache, int64_t min_tokens) const;

  AttentionShape shape_;
  int64_t hidden_, rotary_dim_;
  float eps_;
  LinearWeight q_proj_, k_proj_, v_proj_, o_proj_;
  Tensor q_norm_, k_norm_;  // [head_dim], zero-centred (1 + w)
};

}  // namespace stave
