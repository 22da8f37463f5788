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

 private:
  LinearWeight gate_, up_, down_;
  int64_t intermediate_;
};

}  // namespace stave
