#include "model/text_layers/decoder_layer.h"

#include <string>

#include "formats/tensor_names.h"
#include "stave/errors.h"

namespace stave {
DecoderLayer::DecoderLayer(const TensorStore& store, const TextConfig& config, int64_t index,
                           const quant::QuantPlan* plan, const Backend& backend)
    : type_(config.layer_types.at(static_cast<size_t>(index))),
      hidden_(config.hidden_size),
      eps_(static_cast<float>(config.rms_norm_eps)),
      mlp_(store, mlp_tensor_names(index), config, plan, backend) {
  input_norm_ = backend.to_device(Tensor::host(read_f32(store, input_norm_tensor_name(index), hidden_)));
  post_norm_ = backend.to_device(Tensor::host(read_f32(store, mlp_tensor_names(index).norm, hidden_)));
  if (type_ == LayerType::kLinearAttention)
    deltanet_ = std::make_unique<GatedDeltaNetLayer>(store, deltanet_tensor_names(index), config, plan, backend);
  else
    attention_ = std::make_unique<FullAttentionLayer>(store, attention_tensor_names(index), config, plan, backend);
}

DecoderLayer::State DecoderLayer::new_state(const Backend& backend, int64_t max_tokens) const {
  State s;
  if (deltanet_) s.deltanet = deltanet_->new_state(backend);
  if (attention_) s.attention = attention_->new_state(backend, max_tokens);
  return s;
}

void DecoderLayer::forward(const Backend& backend, float* h, const TokenBatch& batch, std::span<State* const> states,
                           const MlpInputObserver* mlp_input, const Carry* carry) const {
  const int64_t T = batch.rows, n = T * hidden_;
  const Tensor own = carry ? Tensor() : backend.empty({T, hidden_}), y = backend.empty({T, hidden_});
  float* const xp = carry ? carry->x : own.data<float>();
  // The MLP's output: the next layer's pending residual, or y (added here).
  const bool hand_over = carry && carry->next;
  float* const out = hand_over ? carry->residual : y.data<float>();
  if (carry && (carry->next || carry->pending) && !carry->residual)
    throw Error(ErrorKind::kInternal, "a decoder layer carry that hands a residual over without its buffer");

  const LayerInput in{h, carry && carry->pending ? carry->residual : nullptr, input_norm_.data<float>(), eps_, xp};
  if (deltanet_) {
    std::vector<GatedDeltaNetLayer::State*> mixer;
    for (State* s : states) mixer.push_back(&*s->deltanet);
    deltanet_->forward(backend, in, batch, mixer, y.data<float>());
  } else {
    std::vector<FullAttentionLayer::State*> mixer;
    for (State* s : states) mixer.push_back(&*s->attention);
    attention_->forward(backend, in, batch, mixer, y.data<float>());
  }
  // The residual add and the post-attention norm that reads it, in one op (with the MLP's
  // gate and up products, unless an observer needs the norm).
  if (mlp_input && *mlp_input) {
    if (backend.device() != Device::kCpu)
      throw Error(ErrorKind::kUnsupported, "the MLP input observer (AWQ calibration) runs on a CPU backend only");
    backend.add_rms_norm_zero_centered(h, y.data<float>(), T, hidden_, post_norm_.data<float>(), eps_, xp);
    (*mlp_input)(xp, T);
    mlp_.forward(backend, xp, T, out);
  } else {
    mlp_.forward_normed(backend, h, y.data<float>(), post_norm_.data<float>(), eps_, xp, T, out);
  }
  if (!hand_over) backend.add_inplace(h, out, n);
}

}  // namespace stave
