// One Qwen3.5 decoder layer (transformers' Qwen3.5): pre-norm residual blocks
//   h += mixer(NormZC(h; input_layernorm));  h += mlp(NormZC(h; post_attention_layernorm))
// where the mixer is a Gated DeltaNet or a gated full attention, by layer type.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "io/model_config.h"
#include "io/tensor_store.h"
#include "model/text_layers/full_attention_layer.h"
#include "model/text_layers/gated_deltanet_layer.h"
#include "model/text_layers/swiglu_mlp.h"
#include "model/text_layers/token_chunk.h"
#include "ops/backend.h"

namespace stave {
namespace quant {
class QuantPlan;
}

class DecoderLayer {
 public:
  // One sequence's state for this layer, in the backend's memory.
  struct State {
    std::optional<GatedDeltaNetLayer::State> deltanet;
    std::optional<FullAttentionLayer::State> attention;
  };

  // index: the layer number L (names "model.language_model.layers.L.*"); weights resident on
  // `backend`.
  DecoderLayer(const TensorStore& store, const TextConfig& config, int64_t index, const quant::QuantPlan* plan,
               const Backend& backend);

  LayerType type() const { return type_; }
  // A fresh state; a full-attention layer's cache starts with room for max_tokens tokens.
  State new_state(const Backend& backend, int64_t max_tokens) const;

  // Sees the MLP's input (the post_attention_layernorm output) [tokens, hidden] of a step;
  // AWQ calibration collects it (src/quantize/awq_backbone_source.h). Host backends only: the
  // pointer is in the backend's memory.
  using MlpInputObserver = std::function<void(const float* x, int64_t tokens)>;

  // h: the residual stream rows of the batch [batch.rows, hidden], updated in place; slice b
  // of the batch continues *states[b].
  //
  // Layers run in order can hand the last residual add over (`carry`), so that it happens in
  // the next layer's first op together with its input norm and the products over it
  // (Backend::add_rms_norm_linear_shared): with `next`, the layer leaves its MLP output in
  // `residual` [batch.rows, hidden] instead of adding it to h; with `pending`, the layer adds
  // the previous layer's `residual` first. x [batch.rows, hidden] is the norms' scratch. h is the
  // same as without a carry once the pending residual is added (the last layer has no `next`).
  struct Carry {
    float* x = nullptr;
    float* residual = nullptr;
    bool pending = false;
    const DecoderLayer* next = nullptr;
  };
  void forward(const Backend& backend, float* h, const TokenBatch& batch, std::span<State* const> states,
               const MlpInputObserver* mlp_input = nullptr, const Carry* carry = nullptr) const;

 private:
  LayerType type_;
  int64_t hidden_;
  float eps_;
  Tensor input_norm_, post_norm_;  // zero-centred (1 + w)
  std::unique_ptr<GatedDeltaNetLayer> deltanet_;
  std::unique_ptr<FullAttentionLayer> attention_;
  SwiGluMlp mlp_;
};

}  // namespace stave
