// The tensors a Qwen3.5 Clef release must hold, derived from its config: names as the
// checkpoint spells them and logical shapes ([out, in] for linears). One table, used by the
// loader and `stave verify` (model/model_check), `stave quantize` and AWQ (src/quantize),
// `stave synth`, Quark's config and export (formats/quark_*) and the GGUF export (which checks
// every tensor it reads against it), so they cannot disagree. It sits below the model so that
// formats and tools can use it without depending on the model's code.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/model_config.h"

namespace stave {

enum class TensorRole {
  kLinear,       // nn.Linear weight [out, in]; may be stored as Quark MXFP4 (weight + weight_scale)
  kEmbedding,    // embed_tokens [vocab, hidden]
  kLmHead,       // lm_head [vocab, hidden] (a linear, but only its rows are gathered)
  kNorm,         // norm weights and biases
  kParameter,    // A_log, dt_bias, conv1d, position embeddings, biases, scalars
};

struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
  TensorRole role;
  bool language_model = true;  // false for the vision tower
};

inline const std::string kTextPrefix = "model.language_model.";
inline const std::string kVisionPrefix = "model.visual.";

// "model.language_model.layers.<layer>.": the prefix of one text layer's tensors.
std::string text_layer_prefix(int64_t layer);

// One text layer's MLP: its three linears (names without ".weight") and the RMSNorm before it.
struct MlpTensorNames {
  std::string gate, up, down;  // mlp.gate_proj, mlp.up_proj, mlp.down_proj
  std::string norm;            // post_attention_layernorm.weight
};
MlpTensorNames mlp_tensor_names(int64_t layer);

// A linear_attention layer's Gated DeltaNet (linears without ".weight", parameters in full).
struct DeltaNetTensorNames {
  std::string in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, out_proj;
  std::string conv1d, A_log, dt_bias, norm;
};
DeltaNetTensorNames deltanet_tensor_names(int64_t layer);

// A full_attention layer's gated attention (linears without ".weight", norms in full).
struct AttentionTensorNames {
  std::string q_proj, k_proj, v_proj, o_proj;
  std::string q_norm, k_norm;
};
AttentionTensorNames attention_tensor_names(int64_t layer);

// The RMSNorm before a layer's token mixer (input_layernorm.weight).
std::string input_norm_tensor_name(int64_t layer);

// The embedding (without ".weight") and the final norm (in full).
inline const std::string kEmbedTokens = kTextPrefix + "embed_tokens";
inline const std::string kFinalNorm = kTextPrefix + "norm.weight";
// The untied output projection (without ".weight"); absent when tie_word_embeddings holds.
inline const std::string kLmHead = "lm_head";

std::vector<ExpectedTensor> expected_backbone_tensors(const ModelConfig& config);
std::vector<ExpectedTensor> expected_vision_tensors(const ModelConfig& config);
std::vector<ExpectedTensor> expected_head_tensors(const JointHeadConfig& config);

}  // namespace stave
