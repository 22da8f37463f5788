// The decoder MLP: down(silu(gate(x)) ⊙ up(x)), no biases.
#pragma once
#include <string>

#include "formats/linear_weight.h"
#include "formats/tensor_names.h"
#include "io/model_config.h"
#include "io/tensor_store.h"
#include "ops/backend.h"

namespace stave {
namespace quant {
class QuantPlan;
}

class SwiGluMlp {
 public:
  // Weights named by `names` (formats/tensor_names.h), made resident on `backend`.
  SwiGluMlp(const TensorStore& store, const MlpTensorNames& names, const TextConfig& config, const quant::QuantPlan* plan,
            const Backend& backend);

  // x: [tokens, hidden] -> y: [tokens, hidden], in the backend's memory.
  void forward(const Backend& backend, const float* x, int64_t tokens, float* y) const;
  // The same on x = rms_norm_zero_centered(h += residual; norm_w) (the residual add and the
  // post-attention norm before the MLP, in one backend op with the gate and up products, so a
  // backend may quantize the norm for them as it forms it). h [tokens, hidden] is updated; x is
  // scratch [tokens, hidden]; y may be residual (read before it is written).
  void forward_normed(const Backend& backend, float* h, const float* residual, const float* norm_w, float eps,
                      float* x, int64_t tokens, float* y) const;

 private:
  LinearWeight gate_, up_, down_;
  int64_t intermediate_;
};

}  // namespace stave
