// A Quark `quantization_config` (quant::QuarkConfig, the one parser of it: config.json keeps it
// as raw JSON text and QuantPlan reads it) on arbitrary bytes, resolved for every linear layer
// of a small Qwen3.5 model with a vision tower: `exclude` (exact, re: regexes, fnmatch globs),
// layer_quant_config, layer_type_quant_config and global_quant_config. It must either throw
// stave::Error or give each layer a decision whose input quantization implies weight
// quantization.
// Seeds: the MXFP4 fixture's quantization_config and variants using each rule
// (fuzz/corpus/fuzz_quark_config/).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "io/model_config.h"
#include "formats/quark_config.h"
#include "stave/errors.h"

namespace {

// Four text layers (three linear-attention, one full), a two-block vision tower.
const char* const kModel = R"({"model_type": "qwen3_5", "architectures": ["Qwen3_5ForConditionalGeneration"],
 "text_config": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4,
   "num_key_value_heads": 2, "head_dim": 16, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
   "linear_key_head_dim": 16, "linear_value_head_dim": 16, "vocab_size": 512,
   "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25,
                       "mrope_section": [1, 1, 0], "mrope_interleaved": true}},
 "vision_config": {"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
   "num_position_embeddings": 64, "out_hidden_size": 64}})";

const stave::ModelConfig& model() {
  static const stave::ModelConfig c = stave::parse_model_config(kModel, "fuzz model");
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)model();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto quark = stave::quant::QuarkConfig::parse(text, "quantization_config");
    (void)quark.excluded("model.visual.blocks.0.attn.qkv");
    const auto plan = stave::quant::QuantPlan::from_config(quark, model());
    for (const auto& [name, q] : plan.layers()) {
      if (q.input_mxfp4 && !q.weight_mxfp4) std::abort();
      if (q.rule.empty()) std::abort();
    }
  } catch (const stave::Error&) {
  }
  return 0;
}
