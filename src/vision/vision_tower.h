// The Qwen3.5 vision tower (transformers' Qwen3_5VisionModel, no DeepStack):
// Conv3d patch embedding as a matmul, interpolated learned position embeddings, 2-D rotary,
// `depth` pre-LN blocks (LayerNorm eps 1e-6, full non-causal attention within each temporal
// group of each item, MLP with hidden_act: tanh-GELU in Qwen3.5), then the merger (LayerNorm
// over hidden, 2x2 blocks concatenated, fc1, exact GELU, fc2 -> text hidden size).
// Computation is fp32 throughout (the fixtures' reference is fp32); weights are read as stored
// (BF16 in releases; never quantized: Quark excludes the vision linears).
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "io/model_config.h"
#include "io/tensor_store.h"
#include "formats/linear_weight.h"
#include "ops/backend.h"

namespace stave {

class VisionTower {
 public:
  // Binds every vision weight (names from expected_vision_tensors); `weights` must outlive the
  // tower. Throws stave::Error(kInvalidModel) naming a missing or misshapen tensor.
  VisionTower(const ModelConfig& config, const TensorStore& weights, const Backend& backend = reference_backend());

  struct Output {
    std::vector<float> last_hidden_state;  // [patches, hidden] after the blocks (before the merger)
    std::vector<float> merged;             // [patches / merge², out_hidden_size]
  };

  // pixel_values: [rows, C*T*P*P], the processor output of every item, concatenated in item
  // order; grids: each item's (t, h, w). Returns the merged features in the same order: the
  // rows that replace the <|image_pad|> embeddings, one per pad token.
  Output forward(const float* pixel_values, int64_t rows, const std::vector<std::array<int64_t, 3>>& grids) const;

  const VisionConfig& config() const { return config_; }
  int64_t row_size() const { return patch_dim_; }

 private:
  struct Block {
    std::vector<float> norm1_w, norm1_b, norm2_w, norm2_b;
    std::vector<float> qkv_b, proj_b, fc1_b, fc2_b;
    LinearWeight qkv, proj, fc1, fc2;
  };

  void attention(const Block& b, const float* x, int64_t n, const std::vector<int64_t>& segments, const float* cos,
                 const float* sin, float* out) const;

  VisionConfig config_;
  const Backend& backend_;
  int64_t patch_dim_ = 0, head_dim_ = 0, side_ = 0;
  std::vector<float> patch_b_, pos_table_;
  LinearWeight patch_;
  std::vector<Block> blocks_;
  std::vector<float> merger_norm_w_, merger_norm_b_, merger_fc1_b_, merger_fc2_b_;
  LinearWeight merger_fc1_, merger_fc2_;
};

}  // namespace stave
