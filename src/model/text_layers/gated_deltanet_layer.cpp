#include "model/text_layers/gated_deltanet_layer.h"

#include "stave/errors.h"

namespace stave {

GatedDeltaNetLayer::GatedDeltaNetLayer(const TensorStore& store, const DeltaNetTensorNames& names, const TextConfig& config,
                                       const quant::QuantPlan* plan, const Backend& backend) {
  dims_ = {config.linear_num_key_heads, config.linear_num_value_heads, config.linear_key_head_dim,
           config.linear_value_head_dim};
  key_dim_ = config.linear_key_dim();
  value_dim_ = config.linear_value_dim();
  conv_dim_ = config.linear_conv_dim();
  kernel_ = config.linear_conv_kernel_dim;
  eps_ = static_cast<float>(config.rms_norm_eps);
  const int64_t H = config.hidden_size, nv = dims_.n_v_heads;
  in_proj_qkv_ = bind_linear(store, names.in_proj_qkv, conv_dim_, H, plan);
  in_proj_z_ = bind_linear(store, names.in_proj_z, value_dim_, H, plan);
  in_proj_b_ = bind_linear(store, names.in_proj_b, nv, H, plan);
  in_proj_a_ = bind_linear(store, names.in_proj_a, nv, H, plan);
  out_proj_ = bind_linear(store, names.out_proj, H, value_dim_, plan);
  for (const LinearWeight* w : {&in_proj_qkv_, &in_proj_z_, &in_proj_b_, &in_proj_a_, &out_proj_}) backend.prepare(*w);
  auto resident = [&](const std::string& name, int64_t n) {
    return backend.to_device(Tensor::host(read_f32(store, name, n)));
  };
  conv_weight_ = resident(names.conv1d, conv_dim_ * kernel_);
  // A_log and norm.weight are F32 in the checkpoint; the fp32 reference keeps them as stored.
  A_log_ = resident(names.A_log, nv);
  dt_bias_ = resident(names.dt_bias, nv);
  norm_weight_ = resident(names.norm, dims_.d_v);
}

GatedDeltaNetLayer::State GatedDeltaNetLayer::new_state(const Backend& backend) const {
  State s;
  s.conv_history = backend.zeros({kernel_ - 1, conv_dim_});
  s.recurrent = backend.zeros({dims_.state_floats()});
  return s;
}

void GatedDeltaNetLayer::forward(const Backend& backend, const LayerInput& x, const TokenBatch& batch,
                                 std::span<State* const> states, float* y) const {
  const int64_t T = batch.rows, nv = dims_.n_v_heads;
  if (batch.slices.size() != states.size())
    throw Error(ErrorKind::kInternal, "a Gated DeltaNet step of " + std::to_string(batch.slices.size()) +
                                          " sequences with " + std::to_string(states.size()) + " states");
  const Tensor qkv = backend.empty({T, conv_dim_}), z = backend.empty({T, value_dim_});
  const Tensor b = backend.empty({T, nv}), a = backend.empty({T, nv});
  const Backend::LinearOutput outs[] = {{in_proj_qkv_, qkv.data<float>()},
                                        {in_proj_z_, z.data<float>()},
                                        {in_proj_b_, b.data<float>()},
                                        {in_proj_a_, a.data<float>()}};
  x.project(backend, T, outs);

  // Each sequence's conv continues its own history.
  const Tensor conv = backend.empty({T, conv_dim_});
  for (size_t s = 0; s < batch.slices.size(); ++s) {
    const SequenceSlice& q = batch.slices[s];
    if (q.tokens == 0) continue;
    backend.causal_conv1d_silu(qkv.data<float>() + q.row0 * conv_dim_, q.tokens, conv_dim_, conv_weight_.data<float>(),
                               kernel_, states[s]->conv_history.data<float>(), conv.data<float>() + q.row0 * conv_dim_);
  }

  const Tensor g = backend.empty({T, nv}), beta = backend.empty({T, nv});
  backend.gdn_gates(a.data<float>(), b.data<float>(), A_log_.data<float>(), dt_bias_.data<float>(), T, nv,
                    g.data<float>(), beta.data<float>());

  // The conv output row is [q | k | v] (plain concatenation, spec §2.1).
  GatedDeltaInput in;
  in.tokens = T;
  in.q = conv.data<float>();
  in.k = in.q + key_dim_;
  in.v = in.q + 2 * key_dim_;
  in.stride = conv_dim_;
  in.g = g.data<float>();
  in.beta = beta.data<float>();
  const Tensor core = backend.empty({T, value_dim_});
  const std::vector<int64_t> starts = batch.starts();
  std::vector<float*> recurrent;
  for (State* s : states) recurrent.push_back(s->recurrent.data<float>());
  backend.gated_delta_rule_packed(dims_, in, starts, recurrent, core.data<float>());

  // Gated RMSNorm per v head (z is v-head-major like the core output) and the output
  // projection, with qkv as the norm's scratch where the backend writes it.
  backend.gated_rms_norm_linear(out_proj_, core.data<float>(), z.data<float>(), dims_.d_v, norm_weight_.data<float>(),
                                eps_, qkv.data<float>(), T, y);
}

}  // namespace stave
