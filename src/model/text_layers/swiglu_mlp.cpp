#include "model/text_layers/swiglu_mlp.h"

namespace stave {

SwiGluMlp::SwiGluMlp(const TensorStore& store, const MlpTensorNames& names, const TextConfig& config,
                     const quant::QuantPlan* plan, const Backend& backend)
    : intermediate_(config.intermediate_size) {
  const int64_t H = config.hidden_size, I = config.intermediate_size;
  gate_ = bind_linear(store, names.gate, I, H, plan);
  up_ = bind_linear(store, names.up, I, H, plan);
  down_ = bind_linear(store, names.down, H, I, plan);
  for (const LinearWeight* w : {&gate_, &up_, &down_}) backend.prepare(*w);
}

void SwiGluMlp::forward_normed(const Backend& backend, float* h, const float* residual, const float* norm_w, float eps,
                               float* x, int64_t tokens, float* y) const {
  const Tensor gate = backend.empty({tokens, intermediate_}), up = backend.empty({tokens, intermediate_});
  const Backend::LinearOutput outs[] = {{gate_, gate.data<float>()}, {up_, up.data<float>()}};
  backend.add_rms_norm_linear_shared(h, residual, tokens, gate_.in, norm_w, eps, x, outs);
  backend.silu_mul_linear(down_, gate.data<float>(), up.data<float>(), tokens, y);
}

void SwiGluMlp::forward(const Backend& backend, const float* x, int64_t tokens, float* y) const {
  const Tensor gate = backend.empty({tokens, intermediate_}), up = backend.empty({tokens, intermediate_});
  const Backend::LinearOutput outs[] = {{gate_, gate.data<float>()}, {up_, up.data<float>()}};
  backend.linear_shared_input(x, tokens, outs);
  backend.silu_mul_linear(down_, gate.data<float>(), up.data<float>(), tokens, y);
}

}  // namespace stave
