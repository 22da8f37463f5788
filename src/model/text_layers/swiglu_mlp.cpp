#include "model/text_layers/swiglu_mlp.h"

#include <vector>

namespace stave {

SwiGluMlp::SwiGluMlp(const TensorStore& store, const std::string& prefix, const TextConfig& config, const quant::QuantPlan* plan)
    : intermediate_(config.intermediate_size) {
  const int64_t H = config.hidden_size, I = config.intermediate_size;
  gate_ = bind_linear(store, prefix + "gate_proj", I, H, plan);
  up_ = bind_linear(store, prefix + "up_proj", I, H, plan);
  down_ = bind_linear(store, prefix + "down_proj", H, I, plan);
}

void SwiGluMlp::forward(const Backend& backend, const float* x, int64_t tokens, float* y) const {
  const size_t n = static_cast<size_t>(tokens * intermediate_);
  std::vector<float> gate(n), up(n);
  backend.linear(gate_, x, tokens, gate.data());
  backend.linear(up_, x, tokens, up.data());
  backend.silu_mul(gate.data(), up.data(), static_cast<int64_t>(n), gate.data());
  backend.linear(down_, gate.data(), tokens, y);
}

}  // namespace stave
