// The gated full-attention token mixer of a `full_attention` layer (transformers' Qwen3.5):
// q_proj packs query and gate per head; zero-centred q/k RMSNorm, partial interleaved M-RoPE,
// causal GQA attention, output ⊙ sigmoid(gate), o_proj.
#pragma once
#include <string>
#include <vector>

#include "io/model_config.h"
#include "io/tensor_store.h"
#include "formats/linear_weight.h"
#include "model/text_layers/token_chunk.h"
#include "ops/backend.h"

namespace stave {
namespace quant {
class QuantPlan;
}

class FullAttentionLayer {
 public:
  // Per-sequence KV cache: post-norm, post-RoPE keys and values of the tokens seen so far.
  struct State {
    std::vector<float> k, v;  // [capacity, n_kv·head_dim]
    int64_t length = 0;
    int64_t capacity = 0;
  };

  // prefix: "model.language_model.layers.L.self_attn."
  FullAttentionLayer(const TensorStore& store, const std::string& prefix, const TextConfig& config, const quant::QuantPlan* plan);

  // A cache with room for max_tokens tokens; forward grows it when more arrive.
  State new_state(int64_t max_tokens) const;

  // x: [chunk.tokens, hidden] (normed input) -> y: [chunk.tokens, hidden].
  // chunk.begin must equal state.length (tokens arrive in order); the cache grows as needed.
  void forward(const Backend& backend, const float* x, const TokenChunk& chunk, State& state, float* y) const;

 private:
  void grow(State& state, int64_t min_tokens) const;

  AttentionShape shape_;
  int64_t rotary_dim_;
  float eps_;
  LinearWeight q_proj_, k_proj_, v_proj_, o_proj_;
  std::vector<float> q_norm_, k_norm_;  // [head_dim], zero-centred (1 + w)
};

}  // namespace stave
