#include "formats/tensor_names.h"

namespace stave {

std::string text_layer_prefix(int64_t layer) { return kTextPrefix + "layers." + std::to_string(layer) + "."; }

MlpTensorNames mlp_tensor_names(int64_t layer) {
  const std::string p = text_layer_prefix(layer);
  return {p + "mlp.gate_proj", p + "mlp.up_proj", p + "mlp.down_proj", p + "post_attention_layernorm.weight"};
}

DeltaNetTensorNames deltanet_tensor_names(int64_t layer) {
  const std::string a = text_layer_prefix(layer) + "linear_attn.";
  return {a + "in_proj_qkv", a + "in_proj_z", a + "in_proj_b",  a + "in_proj_a",  a + "out_proj",
          a + "conv1d.weight", a + "A_log", a + "dt_bias", a + "norm.weight"};
}

AttentionTensorNames attention_tensor_names(int64_t layer) {
  const std::string a = text_layer_prefix(layer) + "self_attn.";
  return {a + "q_proj", a + "k_proj", a + "v_proj", a + "o_proj", a + "q_norm.weight", a + "k_norm.weight"};
}

std::string input_norm_tensor_name(int64_t layer) { return text_layer_prefix(layer) + "input_layernorm.weight"; }

std::vector<ExpectedTensor> expected_backbone_tensors(const ModelConfig& config) {
  const TextConfig& t = config.text;
  std::vector<ExpectedTensor> out;
  const int64_t H = t.hidden_size;
  out.push_back({kEmbedTokens + ".weight", {t.vocab_size, H}, TensorRole::kEmbedding});
  for (int64_t l = 0; l < t.num_hidden_layers; ++l) {
    const MlpTensorNames mlp = mlp_tensor_names(l);
    out.push_back({input_norm_tensor_name(l), {H}, TensorRole::kNorm});
    out.push_back({mlp.norm, {H}, TensorRole::kNorm});
    out.push_back({mlp.gate + ".weight", {t.intermediate_size, H}, TensorRole::kLinear});
    out.push_back({mlp.up + ".weight", {t.intermediate_size, H}, TensorRole::kLinear});
    out.push_back({mlp.down + ".weight", {H, t.intermediate_size}, TensorRole::kLinear});
    if (t.layer_types[l] == LayerType::kLinearAttention) {
      const DeltaNetTensorNames n = deltanet_tensor_names(l);
      const int64_t nv = t.linear_num_value_heads;
      out.push_back({n.in_proj_qkv + ".weight", {t.linear_conv_dim(), H}, TensorRole::kLinear});
      out.push_back({n.in_proj_z + ".weight", {t.linear_value_dim(), H}, TensorRole::kLinear});
      out.push_back({n.in_proj_b + ".weight", {nv, H}, TensorRole::kLinear});
      out.push_back({n.in_proj_a + ".weight", {nv, H}, TensorRole::kLinear});
      out.push_back({n.conv1d, {t.linear_conv_dim(), 1, t.linear_conv_kernel_dim}, TensorRole::kParameter});
      out.push_back({n.A_log, {nv}, TensorRole::kParameter});
      out.push_back({n.dt_bias, {nv}, TensorRole::kParameter});
      out.push_back({n.norm, {t.linear_value_head_dim}, TensorRole::kNorm});
      out.push_back({n.out_proj + ".weight", {H, t.linear_value_dim()}, TensorRole::kLinear});
    } else {
      const AttentionTensorNames n = attention_tensor_names(l);
      const int64_t d = t.head_dim;
      out.push_back({n.q_proj + ".weight", {2 * t.num_attention_heads * d, H}, TensorRole::kLinear});
      out.push_back({n.k_proj + ".weight", {t.num_key_value_heads * d, H}, TensorRole::kLinear});
      out.push_back({n.v_proj + ".weight", {t.num_key_value_heads * d, H}, TensorRole::kLinear});
      out.push_back({n.o_proj + ".weight", {H, t.num_attention_heads * d}, TensorRole::kLinear});
      out.push_back({n.q_norm, {d}, TensorRole::kNorm});
      out.push_back({n.k_norm, {d}, TensorRole::kNorm});
    }
  }
  out.push_back({kFinalNorm, {H}, TensorRole::kNorm});
  out.push_back({kLmHead + ".weight", {t.vocab_size, H}, TensorRole::kLmHead});
  return out;
}

std::vector<ExpectedTensor> expected_vision_tensors(const ModelConfig& config) {
  std::vector<ExpectedTensor> out;
  const VisionConfig& v = config.vision;
  if (!v.present) return out;
  const int64_t E = v.hidden_size;
  const int64_t merged = E * v.spatial_merge_size * v.spatial_merge_size;
  auto add = [&](std::string name, std::vector<int64_t> shape, TensorRole role) {
    out.push_back({kVisionPrefix + name, std::move(shape), role, false});
  };
  add("patch_embed.proj.weight", {E, v.in_channels, v.temporal_patch_size, v.patch_size, v.patch_size},
      TensorRole::kParameter);
  add("patch_embed.proj.bias", {E}, TensorRole::kParameter);
  add("pos_embed.weight", {v.num_position_embeddings, E}, TensorRole::kParameter);
  for (int64_t b = 0; b < v.depth; ++b) {
    std::string p = "blocks." + std::to_string(b) + ".";
    add(p + "norm1.weight", {E}, TensorRole::kNorm);
    add(p + "norm1.bias", {E}, TensorRole::kNorm);
    add(p + "norm2.weight", {E}, TensorRole::kNorm);
    add(p + "norm2.bias", {E}, TensorRole::kNorm);
    add(p + "attn.qkv.weight", {3 * E, E}, TensorRole::kLinear);
    add(p + "attn.qkv.bias", {3 * E}, TensorRole::kParameter);
    add(p + "attn.proj.weight", {E, E}, TensorRole::kLinear);
    add(p + "attn.proj.bias", {E}, TensorRole::kParameter);
    add(p + "mlp.linear_fc1.weight", {v.intermediate_size, E}, TensorRole::kLinear);
    add(p + "mlp.linear_fc1.bias", {v.intermediate_size}, TensorRole::kParameter);
    add(p + "mlp.linear_fc2.weight", {E, v.intermediate_size}, TensorRole::kLinear);
    add(p + "mlp.linear_fc2.bias", {E}, TensorRole::kParameter);
  }
  add("merger.norm.weight", {E}, TensorRole::kNorm);
  add("merger.norm.bias", {E}, TensorRole::kNorm);
  add("merger.linear_fc1.weight", {merged, merged}, TensorRole::kLinear);
  add("merger.linear_fc1.bias", {merged}, TensorRole::kParameter);
  add("merger.linear_fc2.weight", {v.out_hidden_size, merged}, TensorRole::kLinear);
  add("merger.linear_fc2.bias", {v.out_hidden_size}, TensorRole::kParameter);
  return out;
}

std::vector<ExpectedTensor> expected_head_tensors(const JointHeadConfig& c) {
  std::vector<ExpectedTensor> out;
  const int64_t H = c.hidden_size, W = c.width, F = c.feedforward;
  auto add = [&](std::string name, std::vector<int64_t> shape, TensorRole role) {
    out.push_back({std::move(name), std::move(shape), role, false});
  };
  add("hidden_norm.weight", {H}, TensorRole::kNorm);
  add("hidden_norm.bias", {H}, TensorRole::kNorm);
  for (const char* proj : {"memory_projection", "question_projection", "option_question_projection",
                           "global_projection", "option_context_projection", "option_lexical_projection"})
    add(std::string(proj) + ".weight", {W, H}, TensorRole::kLinear);
  add("type_embedding.weight", {3, W}, TensorRole::kParameter);
  auto mha = [&](const std::string& p) {
    add(p + "in_proj_weight", {3 * W, W}, TensorRole::kLinear);
    add(p + "in_proj_bias", {3 * W}, TensorRole::kParameter);
    add(p + "out_proj.weight", {W, W}, TensorRole::kLinear);
    add(p + "out_proj.bias", {W}, TensorRole::kParameter);
  };
  auto ln = [&](const std::string& p) {
    add(p + ".weight", {W}, TensorRole::kNorm);
    add(p + ".bias", {W}, TensorRole::kNorm);
  };
  for (int64_t l = 0; l < c.routing_layers; ++l) {
    std::string p = "evidence_layers." + std::to_string(l) + ".";
    ln(p + "query_norm");
    ln(p + "memory_norm");
    mha(p + "attention.");
    ln(p + "feedforward_norm");
    add(p + "feedforward.0.weight", {F, W}, TensorRole::kLinear);
    add(p + "feedforward.0.bias", {F}, TensorRole::kParameter);
    add(p + "feedforward.3.weight", {W, F}, TensorRole::kLinear);
    add(p + "feedforward.3.bias", {W}, TensorRole::kParameter);
  }
  ln("option_summary_norm");
  for (int64_t l = 0; l < c.layers; ++l) {
    std::string p = "layers." + std::to_string(l) + ".";
    mha(p + "self_attn.");
    mha(p + "multihead_attn.");
    add(p + "linear1.weight", {F, W}, TensorRole::kLinear);
    add(p + "linear1.bias", {F}, TensorRole::kParameter);
    add(p + "linear2.weight", {W, F}, TensorRole::kLinear);
    add(p + "linear2.bias", {W}, TensorRole::kParameter);
    ln(p + "norm1");
    ln(p + "norm2");
    ln(p + "norm3");
  }
  ln("field_norm");
  ln("option_norm");
  add("residual_scorer.0.weight", {W, 4 * W}, TensorRole::kLinear);
  add("residual_scorer.0.bias", {W}, TensorRole::kParameter);
  add("residual_scorer.3.weight", {1, W}, TensorRole::kLinear);
  add("residual_scorer.3.bias", {1}, TensorRole::kParameter);
  add("prior_logit_scale", {}, TensorRole::kParameter);
  add("joint_logit_scale", {}, TensorRole::kParameter);
  add("residual_gate", {}, TensorRole::kParameter);
  return out;
}

}  // namespace stave
