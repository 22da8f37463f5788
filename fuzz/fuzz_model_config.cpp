// A release's configuration files on arbitrary bytes: every input goes through
// parse_model_config (config.json), parse_joint_head_config (joint_head_config.json) and
// parse_image_processor_config (processor_config.json / preprocessor_config.json). A config that
// parses must give consistent dimensions, and its Quark quantization_config (when present) must
// resolve for every linear layer of the model or be refused with stave::Error. Anything else — a
// crash, a sanitizer report, another exception type, a broken invariant — is a finding.
// Seeds: the fixture releases' config files (fuzz/corpus/fuzz_model_config/).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "io/model_config.h"
#include "formats/quark_config.h"
#include "stave/errors.h"

namespace {

void check_text(const stave::TextConfig& t) {
  if (t.hidden_size <= 0 || t.num_hidden_layers <= 0 || t.num_hidden_layers > stave::kMaxLayers) std::abort();
  if (static_cast<int64_t>(t.layer_types.size()) != t.num_hidden_layers) std::abort();
  const int64_t rot = t.rotary_dim();
  if (rot <= 0 || rot > t.head_dim || rot % 2 != 0) std::abort();
  if (t.mrope_section[0] + t.mrope_section[1] + t.mrope_section[2] != rot / 2) std::abort();
  if (t.num_attention_heads % t.num_key_value_heads != 0) std::abort();
  (void)t.linear_conv_dim();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const stave::ModelConfig c = stave::parse_model_config(text, "config.json");
    check_text(c.text);
    if (c.vision.present && c.vision.out_hidden_size != c.text.hidden_size) std::abort();
    try {
      const auto plan = stave::quant::QuantPlan::from_model_config(c);
      if (plan && plan->layers().size() != stave::quant::model_linears(c).size()) std::abort();
    } catch (const stave::Error&) {
    }
  } catch (const stave::Error&) {
  }
  try {
    const stave::JointHeadConfig h = stave::parse_joint_head_config(text, "joint_head_config.json");
    if (h.width <= 0 || h.heads <= 0 || h.width % h.heads != 0 || h.layers < 0 || h.routing_layers < 0) std::abort();
  } catch (const stave::Error&) {
  }
  try {
    const stave::ImageProcessorConfig p = stave::parse_image_processor_config(text, "processor_config.json");
    if (p.min_pixels > p.max_pixels || p.patch_size <= 0 || p.merge_size <= 0) std::abort();
  } catch (const stave::Error&) {
  }
  return 0;
}
