// The Gated DeltaNet token mixer of a `linear_attention` layer (transformers' Qwen3.5):
// in_proj_qkv → causal conv + SiLU → L2-normalised q/k, gated delta rule → gated RMSNorm
// with silu(z) → out_proj.
#pragma once
#include <span>
#include <string>

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

class GatedDeltaNetLayer {
 public:
  // One sequence's state, carried across steps (what a decode cache keeps), in the backend's
  // memory.
  struct State {
    Tensor conv_history;  // [kernel-1, conv_dim] pre-conv inputs of the last tokens
    Tensor recurrent;     // [n_v, d_k, d_v] delta-rule state, fp32
  };

  // Weights named by `names` (formats/tensor_names.h), resident on `backend`.
  GatedDeltaNetLayer(const TensorStore& store, const DeltaNetTensorNames& names, const TextConfig& config,
                     const quant::QuantPlan* plan, const Backend& backend);

  // A zero state.
  State new_state(const Backend& backend) const;

  // The input norm `in` forms -> y: [batch.rows, hidden], in the backend's memory; slice b of
  // the batch continues *states[b].
  void forward(const Backend& backend, const LayerInput& in, const TokenBatch& batch, std::span<State* const> states,
               float* y) const;

 private:
  GatedDeltaDims dims_;
  int64_t key_dim_, value_dim_, conv_dim_, kernel_;
  float eps_;
  LinearWeight in_proj_qkv_, in_proj_z_, in_proj_b_, in_proj_a_, out_proj_;
  Tensor conv_weight_;       // [conv_dim, kernel]
  Tensor A_log_, dt_bias_;   // [n_v]
  Tensor norm_weight_;       // [d_v], plain weight of the gated norm
};

}  // namespace stave
