// The Gated DeltaNet token mixer of a `linear_attention` layer (transformers' Qwen3.5):
// in_proj_qkv → causal conv + SiLU → L2-normalised q/k, gated delta rule → gated RMSNorm
// with silu(z) → out_proj.
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

class GatedDeltaNetLayer {
 public:
  // Per-sequence state, carried across chunks (and what a decode cache would keep).
  struct State {
    std::vector<float> conv_history;  // [kernel-1, conv_dim] pre-conv inputs of the last tokens
    std::vector<float> recurrent;     // [n_v, d_k, d_v] delta-rule state, fp32
  };

  // prefix: "model.language_model.layers.L.linear_attn."
  GatedDeltaNetLayer(const TensorStore& store, const std::string& prefix, const TextConfig& config, const quant::QuantPlan* plan);

  State new_state() const;

  // x: [chunk.tokens, hidden] (normed input) -> y: [chunk.tokens, hidden]
  void forward(const Backend& backend, const float* x, const TokenChunk& chunk, State& state, float* y) const;

 private:
  GatedDeltaDims dims_;
  int64_t key_dim_, value_dim_, conv_dim_, kernel_;
  float eps_;
  LinearWeight in_proj_qkv_, in_proj_z_, in_proj_b_, in_proj_a_, out_proj_;
  std::vector<float> conv_weight_;  // [conv_dim, kernel]
  std::vector<float> A_log_, dt_bias_;  // [n_v]
  std::vector<float> norm_weight_;      // [d_v], plain weight of the gated norm
};

}  // namespace stave
