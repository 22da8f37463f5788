// The joint schema head's parameters (Clef release code), read once from
// joint_head.safetensors (BF16 in releases; F32/F16 accepted) into fp32, with every tensor's
// shape checked against expected_head_tensors(config).
#pragma once
#include <cstdint>
#include <vector>

#include "io/model_config.h"
#include "io/tensor_store.h"
#include "ops/multihead_attention.h"

namespace stave {

// nn.Linear: weight [out, in], bias [out] or empty.
struct HeadLinear {
  int64_t out = 0, in = 0;
  std::vector<float> weight;
  std::vector<float> bias;
  // y[rows, out] = x[rows, in] · weightᵀ + bias
  void apply(const float* x, int64_t rows, float* y) const;
};

// nn.LayerNorm(dim) with eps 1e-5 (the PyTorch default the reference keeps).
struct HeadLayerNorm {
  static constexpr float kEps = 1e-5f;
  std::vector<float> weight, bias;
  int64_t dim() const { return static_cast<int64_t>(weight.size()); }
  void apply(const float* x, int64_t rows, float* y) const;  // y may alias x
};

// nn.MultiheadAttention's parameters.
struct HeadAttention {
  std::vector<float> in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias;
  ref::MultiheadAttentionWeights view(int64_t embed_dim, int64_t heads) const;
};

// EvidenceRoutingLayer: options attend to the (per-layer normalised) memory, then an FFN.
struct EvidenceRoutingLayerWeights {
  HeadLayerNorm query_norm, memory_norm, feedforward_norm;
  HeadAttention attention;
  HeadLinear feedforward_in;   // feedforward.0: W -> F
  HeadLinear feedforward_out;  // feedforward.3: F -> W
};

// nn.TransformerDecoderLayer(norm_first=True, activation="gelu").
struct FieldDecoderLayerWeights {
  HeadAttention self_attn, cross_attn;  // self_attn, multihead_attn
  HeadLinear linear1, linear2;
  HeadLayerNorm norm1, norm2, norm3;
};

struct JointHeadWeights {
  JointHeadConfig config;
  HeadLayerNorm hidden_norm;  // over H
  HeadLinear memory_projection, question_projection, option_question_projection, global_projection,
      option_context_projection, option_lexical_projection;  // H -> W, no bias
  std::vector<float> type_embedding;                         // [3, W]: noul, choice, score
  std::vector<EvidenceRoutingLayerWeights> evidence_layers;
  HeadLayerNorm option_summary_norm;
  std::vector<FieldDecoderLayerWeights> layers;
  HeadLayerNorm field_norm, option_norm;
  HeadLinear residual_in;   // residual_scorer.0: 4W -> W
  HeadLinear residual_out;  // residual_scorer.3: W -> 1
  float prior_logit_scale = 0.0f, joint_logit_scale = 0.0f, residual_gate = 0.0f;
};

// Checks the config (positive sizes, width divisible by heads) and every tensor's presence,
// shape and float dtype; throws stave::Error(kInvalidModel) naming the tensor otherwise.
JointHeadWeights load_joint_head_weights(const JointHeadConfig& config, const TensorStore& head);

}  // namespace stave
