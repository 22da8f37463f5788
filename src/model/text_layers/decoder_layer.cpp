#include "model/text_layers/decoder_layer.h"

#include <string>

#include "formats/tensor_names.h"

namespace stave {
namespace {

std::string layer_prefix(int64_t index) { return kTextPrefix + "layers." + std::to_string(index) + "."; }

void add_inplace(float* h, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) h[i] += y[i];
}

}  // namespace

DecoderLayer::DecoderLayer(const TensorStore& store, const TextConfig& config, int64_t index, const quant::QuantPlan* plan)
    : type_(config.layer_types.at(static_cast<size_t>(index))),
      hidden_(config.hidden_size),
      eps_(static_cast<float>(config.rms_norm_eps)),
      mlp_(store, layer_prefix(index) + "mlp.", config, plan) {
  const std::string p = layer_prefix(index);
  input_norm_ = read_f32(store, p + "input_layernorm.weight", hidden_);
  post_norm_ = read_f32(store, p + "post_attention_layernorm.weight", hidden_);
  if (type_ == LayerType::kLinearAttention)
    deltanet_ = std::make_unique<GatedDeltaNetLayer>(store, p + "linear_attn.", config, plan);
  else
    attention_ = std::make_unique<FullAttentionLayer>(store, p + "self_attn.", config, plan);
}

DecoderLayer::State DecoderLayer::new_state(int64_t max_tokens) const {
  State s;
  if (deltanet_) s.deltanet = deltanet_->new_state();
  if (attention_) s.attention = attention_->new_state(max_tokens);
  return s;
}

void DecoderLayer::forward(const Backend& backend, float* h, const TokenChunk& chunk, State& state,
                           const MlpInputObserver* mlp_input) const {
  const int64_t n = chunk.tokens * hidden_;
  std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));

  backend.rms_norm_zero_centered(h, chunk.tokens, hidden_, input_norm_.data(), eps_, x.data());
  if (deltanet_)
    deltanet_->forward(backend, x.data(), chunk, *state.deltanet, y.data());
  else
    attention_->forward(backend, x.data(), chunk, *state.attention, y.data());
  add_inplace(h, y.data(), n);

  backend.rms_norm_zero_centered(h, chunk.tokens, hidden_, post_norm_.data(), eps_, x.data());
  if (mlp_input && *mlp_input) (*mlp_input)(x.data(), chunk.tokens);
  mlp_.forward(backend, x.data(), chunk.tokens, y.data());
  add_inplace(h, y.data(), n);
}

}  // namespace stave
