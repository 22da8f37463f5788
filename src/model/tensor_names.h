// The tensors a Qwen3.5 Clef release must hold, derived from its config: names as the
// checkpoint spells them and logical shapes ([out, in] for linears). One list, used by the
// loader, `stave verify`, `stave quantize` and `stave synth`, so they cannot disagree.
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

std::vector<ExpectedTensor> expected_backbone_tensors(const ModelConfig& config);
std::vector<ExpectedTensor> expected_vision_tensors(const ModelConfig& config);
std::vector<ExpectedTensor> expected_head_tensors(const JointHeadConfig& config);

}  // namespace stave
