#include "model/text_layers/gated_deltanet_layer.h"

namespace stave {

GatedDeltaNetLayer::GatedDeltaNetLayer(const TensorStore& store, const std::string& prefix, const TextConfig& config,
                                       const quant::QuantPlan* plan) {
  dims_ = {config.linear_num_key_heads, config.linear_num_value_heads, config.linear_key_head_dim,
           config.linear_value_head_dim};
  key_dim_ = config.linear_key_dim();
  value_dim_ = config.linear_value_dim();
  conv_dim_ = config.linear_conv_dim();
  kernel_ = config.linear_conv_kernel_dim;
  eps_ = static_cast<float>(config.rms_norm_eps);
  const int64_t H = config.hidden_size, nv = dims_.n_v_heads;
  in_proj_qkv_ = bind_linear(store, prefix + "in_proj_qkv", conv_dim_, H, plan);
  in_proj_z_ = bind_linear(store, prefix + "in_proj_z", value_dim_, H, plan);
  in_proj_b_ = bind_linear(store, prefix + "in_proj_b", nv, H, plan);
  in_proj_a_ = bind_linear(store, prefix + "in_proj_a", nv, H, plan);
  out_proj_ = bind_linear(store, prefix + "out_proj", H, value_dim_, plan);
  conv_weight_ = read_f32(store, prefix + "conv1d.weight", conv_dim_ * kernel_);
  // A_log and norm.weight are F32 in the checkpoint; the fp32 reference keeps them as stored.
  A_log_ = read_f32(store, prefix + "A_log", nv);
  dt_bias_ = read_f32(store, prefix + "dt_bias", nv);
  norm_weight_ = read_f32(store, prefix + "norm.weight", dims_.d_v);
}

GatedDeltaNetLayer::State GatedDeltaNetLayer::new_state() const {
  State s;
  s.conv_history.assign(static_cast<size_t>((kernel_ - 1) * conv_dim_), 0.0f);
  s.recurrent.assign(static_cast<size_t>(dims_.state_floats()), 0.0f);
  return s;
}

void GatedDeltaNetLayer::forward(const Backend& backend, const float* x, const TokenChunk& chunk, State& state,
                                 float* y) const {
  const int64_t T = chunk.tokens, nv = dims_.n_v_heads;
  std::vector<float> qkv(T * conv_dim_), z(T * value_dim_), b(T * nv), a(T * nv);
  backend.linear(in_proj_qkv_, x, T, qkv.data());
  backend.linear(in_proj_z_, x, T, z.data());
  backend.linear(in_proj_b_, x, T, b.data());
  backend.linear(in_proj_a_, x, T, a.data());

  std::vector<float> conv(T * conv_dim_);
  backend.causal_conv1d_silu(qkv.data(), T, conv_dim_, conv_weight_.data(), kernel_, state.conv_history.data(),
                             conv.data());

  std::vector<float> g(T * nv), beta(T * nv);
  backend.gdn_gates(a.data(), b.data(), A_log_.data(), dt_bias_.data(), T, nv, g.data(), beta.data());

  // The conv output row is [q | k | v] (plain concatenation, spec §2.1).
  GatedDeltaInput in;
  in.tokens = T;
  in.q = conv.data();
  in.k = conv.data() + key_dim_;
  in.v = conv.data() + 2 * key_dim_;
  in.stride = conv_dim_;
  in.g = g.data();
  in.beta = beta.data();
  std::vector<float> core(T * value_dim_);
  // One token (decode, or a chunk of one) takes the per-token recurrence, as HF does.
  if (T == 1)
    backend.gated_delta_rule_recurrent(dims_, in, state.recurrent.data(), core.data());
  else
    backend.gated_delta_rule(dims_, in, state.recurrent.data(), core.data());

  // Gated RMSNorm per v head (z is v-head-major like the core output), reusing qkv as scratch.
  float* normed = qkv.data();
  backend.gated_rms_norm(core.data(), z.data(), T * nv, dims_.d_v, norm_weight_.data(), eps_, normed);
  backend.linear(out_proj_, normed, T, y);
}

}  // namespace stave
