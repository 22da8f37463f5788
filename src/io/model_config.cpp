#include "io/model_config.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "stave/errors.h"
#include "util/json_limits.h"

namespace stave {
namespace {

using json = nlohmann::json;

[[noreturn]] void bad(const std::string& label, const std::string& what) {
  throw Error(ErrorKind::kInvalidModel, label + ": " + what);
}
[[noreturn]] void unsupported(const std::string& label, const std::string& what) {
  throw Error(ErrorKind::kUnsupported, label + ": " + what);
}

json parse(const std::string& text, const std::string& label) {
  if (text.size() > kMaxConfigBytes)
    bad(label, "is " + std::to_string(text.size()) + " bytes, larger than the limit of " +
                   std::to_string(kMaxConfigBytes) + " bytes for a configuration file");
  check_json_depth(text, label);
  try {
    json j = json::parse(text);
    if (!j.is_object()) bad(label, "is not a JSON object");
    return j;
  } catch (const json::exception& e) {
    bad(label, std::string("is not valid JSON (") + e.what() + ")");
  }
}

int64_t get_int(const json& obj, const char* key, const std::string& where, std::optional<int64_t> def = {}) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (def) return *def;
    bad(where, std::string("missing field \"") + key + "\"");
  }
  if (!it->is_number_integer()) bad(where, std::string("field \"") + key + "\" must be an integer");
  return it->get<int64_t>();
}

int64_t get_positive(const json& obj, const char* key, const std::string& where, std::optional<int64_t> def = {}) {
  int64_t v = get_int(obj, key, where, def);
  if (v <= 0) bad(where, std::string("field \"") + key + "\" must be positive, got " + std::to_string(v));
  if (v > (int64_t{1} << 31)) bad(where, std::string("field \"") + key + "\" is implausibly large");
  return v;
}

double get_double(const json& obj, const char* key, const std::string& where, double def) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return def;
  if (!it->is_number()) bad(where, std::string("field \"") + key + "\" must be a number");
  return it->get<double>();
}

bool get_bool(const json& obj, const char* key, const std::string& where, bool def) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return def;
  if (!it->is_boolean()) bad(where, std::string("field \"") + key + "\" must be true or false");
  return it->get<bool>();
}

std::string get_string(const json& obj, const char* key, const std::string& where, const std::string& def) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return def;
  if (!it->is_string()) bad(where, std::string("field \"") + key + "\" must be a string");
  return it->get<std::string>();
}

TextConfig parse_text(const json& t, const std::string& where) {
  TextConfig c;
  c.hidden_size = get_positive(t, "hidden_size", where);
  c.intermediate_size = get_positive(t, "intermediate_size", where);
  c.num_hidden_layers = get_positive(t, "num_hidden_layers", where);
  if (c.num_hidden_layers > kMaxLayers)
    bad(where, "num_hidden_layers " + std::to_string(c.num_hidden_layers) + " exceeds the limit of " +
                   std::to_string(kMaxLayers));
  c.num_attention_heads = get_positive(t, "num_attention_heads", where);
  c.num_key_value_heads = get_positive(t, "num_key_value_heads", where);
  c.head_dim = get_positive(t, "head_dim", where, c.hidden_size / c.num_attention_heads);
  c.linear_num_key_heads = get_positive(t, "linear_num_key_heads", where);
  c.linear_num_value_heads = get_positive(t, "linear_num_value_heads", where);
  c.linear_key_head_dim = get_positive(t, "linear_key_head_dim", where);
  c.linear_value_head_dim = get_positive(t, "linear_value_head_dim", where);
  c.linear_conv_kernel_dim = get_positive(t, "linear_conv_kernel_dim", where, 4);
  c.vocab_size = get_positive(t, "vocab_size", where);
  c.rms_norm_eps = get_double(t, "rms_norm_eps", where, 1e-6);
  c.max_position_embeddings = get_positive(t, "max_position_embeddings", where, 262144);
  c.tie_word_embeddings = get_bool(t, "tie_word_embeddings", where, false);

  if (get_bool(t, "attention_bias", where, false)) unsupported(where, "attention_bias = true is not supported");
  std::string act = get_string(t, "hidden_act", where, "silu");
  if (act != "silu") unsupported(where, "hidden_act \"" + act + "\" is not supported (only silu)");
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    bad(where, "num_attention_heads must be a multiple of num_key_value_heads");
  if (c.linear_num_value_heads % c.linear_num_key_heads != 0)
    bad(where, "linear_num_value_heads must be a multiple of linear_num_key_heads");
  // Products the model code forms; each factor is below 2^31, so these do not overflow.
  if (c.num_attention_heads * c.head_dim > kMaxWidth || c.linear_key_dim() > kMaxWidth || c.linear_value_dim() > kMaxWidth)
    bad(where, "attention widths (heads × head dim) exceed the limit of " + std::to_string(kMaxWidth));

  if (auto it = t.find("layer_types"); it != t.end() && !it->is_null()) {
    if (!it->is_array()) bad(where, "field \"layer_types\" must be an array");
    if (static_cast<int64_t>(it->size()) != c.num_hidden_layers)
      bad(where, "layer_types has " + std::to_string(it->size()) + " entries but num_hidden_layers is " +
                     std::to_string(c.num_hidden_layers));
    for (const auto& lt : *it) {
      if (!lt.is_string()) bad(where, "layer_types entries must be strings");
      auto s = lt.get<std::string>();
      if (s == "linear_attention") c.layer_types.push_back(LayerType::kLinearAttention);
      else if (s == "full_attention") c.layer_types.push_back(LayerType::kFullAttention);
      else unsupported(where, "layer type \"" + s + "\" is not supported");
    }
    if (static_cast<int64_t>(c.layer_types.size()) != c.num_hidden_layers)
      bad(where, "layer_types has " + std::to_string(c.layer_types.size()) + " entries but num_hidden_layers is " +
                     std::to_string(c.num_hidden_layers));
  } else {
    int64_t interval = get_positive(t, "full_attention_interval", where, 4);
    for (int64_t i = 0; i < c.num_hidden_layers; ++i)
      c.layer_types.push_back((i + 1) % interval == 0 ? LayerType::kFullAttention : LayerType::kLinearAttention);
  }

  // rope_parameters (transformers 5) or the legacy top-level fields.
  const json* rope = &t;
  if (auto it = t.find("rope_parameters"); it != t.end() && it->is_object()) rope = &*it;
  else if (auto it2 = t.find("rope_scaling"); it2 != t.end() && it2->is_object()) rope = &*it2;
  std::string rope_type = get_string(*rope, "rope_type", where, get_string(*rope, "type", where, "default"));
  if (rope_type != "default" && rope_type != "mrope")
    unsupported(where, "rope_type \"" + rope_type + "\" is not supported (only default)");
  c.rope_theta = get_double(*rope, "rope_theta", where, get_double(t, "rope_theta", where, 1e7));
  c.partial_rotary_factor =
      get_double(*rope, "partial_rotary_factor", where, get_double(t, "partial_rotary_factor", where, 0.25));
  if (!(c.partial_rotary_factor > 0.0 && c.partial_rotary_factor <= 1.0))
    bad(where, "partial_rotary_factor must be in (0, 1]");
  if (!std::isfinite(c.rope_theta) || c.rope_theta <= 0.0) bad(where, "rope_theta must be a positive number");
  c.mrope_interleaved = get_bool(*rope, "mrope_interleaved", where, true);
  if (!c.mrope_interleaved) unsupported(where, "mrope_interleaved = false is not supported");
  if (auto it = rope->find("mrope_section"); it != rope->end() && !it->is_null()) {
    if (!it->is_array() || it->size() != 3) bad(where, "mrope_section must be an array of 3 integers");
    for (int i = 0; i < 3; ++i) {
      if (!(*it)[i].is_number_integer() || (*it)[i].get<int64_t>() < 0 || (*it)[i].get<int64_t>() > c.head_dim)
        bad(where, "mrope_section must hold integers in [0, head_dim]");
      c.mrope_section[i] = (*it)[i].get<int64_t>();
    }
  }
  int64_t rot = c.rotary_dim();
  if (rot <= 0 || rot % 2 != 0 || rot > c.head_dim) bad(where, "partial_rotary_factor gives an invalid rotary dim");
  if (c.mrope_section[0] + c.mrope_section[1] + c.mrope_section[2] != rot / 2)
    bad(where, "mrope_section must sum to rotary_dim/2 = " + std::to_string(rot / 2));
  return c;
}

VisionConfig parse_vision(const json& v, const std::string& where) {
  VisionConfig c;
  c.present = true;
  c.depth = get_positive(v, "depth", where);
  if (c.depth > kMaxLayers)
    bad(where, "depth " + std::to_string(c.depth) + " exceeds the limit of " + std::to_string(kMaxLayers));
  c.hidden_size = get_positive(v, "hidden_size", where);
  c.intermediate_size = get_positive(v, "intermediate_size", where);
  c.num_heads = get_positive(v, "num_heads", where);
  c.in_channels = get_positive(v, "in_channels", where, 3);
  c.patch_size = get_positive(v, "patch_size", where, 16);
  c.temporal_patch_size = get_positive(v, "temporal_patch_size", where, 2);
  c.spatial_merge_size = get_positive(v, "spatial_merge_size", where, 2);
  c.num_position_embeddings = get_positive(v, "num_position_embeddings", where);
  c.out_hidden_size = get_positive(v, "out_hidden_size", where);
  c.hidden_act = get_string(v, "hidden_act", where, "gelu_pytorch_tanh");
  if (c.hidden_act != "gelu_pytorch_tanh") unsupported(where, "vision hidden_act \"" + c.hidden_act + "\" is not supported");
  if (c.hidden_size % c.num_heads != 0) bad(where, "vision hidden_size must be a multiple of num_heads");
  if (auto it = v.find("rope_parameters"); it != v.end() && it->is_object())
    c.rope_theta = get_double(*it, "rope_theta", where, 10000.0);
  if (auto it = v.find("deepstack_visual_indexes"); it != v.end() && it->is_array() && !it->empty())
    unsupported(where, "deepstack_visual_indexes is not supported");
  return c;
}

}  // namespace

ModelConfig parse_model_config(const std::string& json_text, const std::string& label) {
  json j = parse(json_text, label);
  ModelConfig c;
  c.model_type = get_string(j, "model_type", label, "");
  if (auto it = j.find("architectures"); it != j.end() && it->is_array() && !it->empty() && (*it)[0].is_string())
    c.architecture = (*it)[0].get<std::string>();
  if (c.model_type == "qwen3_5") {
    auto tc = j.find("text_config");
    if (tc == j.end() || !tc->is_object()) bad(label, "missing object \"text_config\"");
    c.text = parse_text(*tc, label + " text_config");
    if (auto vc = j.find("vision_config"); vc != j.end() && vc->is_object())
      c.vision = parse_vision(*vc, label + " vision_config");
  } else if (c.model_type == "qwen3_5_text") {
    c.text = parse_text(j, label);
  } else if (c.model_type.empty()) {
    bad(label, "missing field \"model_type\"");
  } else {
    unsupported(label, "model_type \"" + c.model_type +
                           "\" is not supported (stave runs Qwen3.5 Clef releases: model_type \"qwen3_5\")");
  }
  c.image_token_id = get_int(j, "image_token_id", label, -1);
  c.video_token_id = get_int(j, "video_token_id", label, -1);
  c.vision_start_token_id = get_int(j, "vision_start_token_id", label, -1);
  c.vision_end_token_id = get_int(j, "vision_end_token_id", label, -1);
  c.torch_dtype = get_string(j, "dtype", label, get_string(j, "torch_dtype", label, "bfloat16"));
  if (c.vision.present && c.vision.out_hidden_size != c.text.hidden_size)
    bad(label, "vision out_hidden_size must equal the text hidden_size");
  if (auto q = j.find("quantization_config"); q != j.end() && !q->is_null()) c.quantization_config_json = q->dump();
  else if (auto tq = j.find("text_config"); tq != j.end() && tq->is_object()) {
    if (auto q2 = tq->find("quantization_config"); q2 != tq->end() && !q2->is_null())
      c.quantization_config_json = q2->dump();
  }
  return c;
}

JointHeadConfig parse_joint_head_config(const std::string& json_text, const std::string& label) {
  json j = parse(json_text, label);
  JointHeadConfig c;
  c.hidden_size = get_positive(j, "hidden_size", label);
  c.width = get_positive(j, "width", label);
  c.routing_layers = get_int(j, "routing_layers", label);
  c.layers = get_int(j, "layers", label);
  c.heads = get_positive(j, "heads", label);
  c.feedforward = get_positive(j, "feedforward", label);
  if (c.routing_layers < 0 || c.layers < 0) bad(label, "layer counts must not be negative");
  if (c.width % c.heads != 0) bad(label, "width must be a multiple of heads");
  for (auto it = j.begin(); it != j.end(); ++it) {
    static const char* known[] = {"hidden_size", "width", "routing_layers", "layers", "heads", "feedforward", "dropout"};
    bool ok = false;
    for (auto k : known) ok = ok || it.key() == k;
    if (!ok) unsupported(label, "unknown field \"" + it.key() + "\"");
  }
  return c;
}

namespace {
ImageProcessorConfig parse_processor_fields(const json* p, const std::string& label, ImageProcessorConfig c);
}  // namespace

ImageProcessorConfig parse_image_processor_config(const std::string& json_text, const std::string& label) {
  json j = parse(json_text, label);
  const json* p = &j;
  if (auto it = j.find("image_processor"); it != j.end() && it->is_object()) p = &*it;
  return parse_processor_fields(p, label, ImageProcessorConfig{});
}

VideoProcessorConfig default_video_processor_config(const ImageProcessorConfig& image) {
  VideoProcessorConfig v;
  v.present = image.present;
  v.frame = image;
  v.frame.min_pixels = 128 * 32 * 32;  // Qwen3VLVideoProcessor.size
  v.frame.max_pixels = 32 * 32 * 768;
  return v;
}

VideoProcessorConfig parse_video_processor_config(const std::string& json_text, const std::string& label) {
  json j = parse(json_text, label);
  const json* p = &j;
  if (auto it = j.find("video_processor"); it != j.end() && it->is_object()) p = &*it;
  else if (j.contains("image_processor")) return VideoProcessorConfig{};  // processor_config.json without video
  VideoProcessorConfig v = default_video_processor_config(ImageProcessorConfig{});
  v.frame = parse_processor_fields(p, label, v.frame);
  v.present = true;
  v.do_sample_frames = get_bool(*p, "do_sample_frames", label, true);
  if (auto it = p->find("fps"); it != p->end() && !it->is_null()) {
    v.fps = get_double(*p, "fps", label, 2.0);
    if (!(v.fps > 0 && v.fps <= 1000)) bad(label, "fps must be in (0, 1000]");
  }
  if (auto it = p->find("num_frames"); it != p->end() && !it->is_null()) {
    v.num_frames = get_positive(*p, "num_frames", label);
  }
  v.min_frames = get_positive(*p, "min_frames", label, 4);
  v.max_frames = get_positive(*p, "max_frames", label, 768);
  if (v.min_frames > v.max_frames) bad(label, "min_frames is larger than max_frames");
  if (v.max_frames > 100000) bad(label, "max_frames must be at most 100000");
  if (auto it = p->find("cap_pixels_per_frame"); it != p->end() && !it->is_null())
    v.cap_pixels_per_frame = get_bool(*p, "cap_pixels_per_frame", label, false);
  return v;
}

namespace {
ImageProcessorConfig parse_processor_fields(const json* p, const std::string& label, ImageProcessorConfig c) {
  c.present = true;
  c.do_convert_rgb = get_bool(*p, "do_convert_rgb", label, true);
  c.do_resize = get_bool(*p, "do_resize", label, true);
  c.do_rescale = get_bool(*p, "do_rescale", label, true);
  c.do_normalize = get_bool(*p, "do_normalize", label, true);
  c.patch_size = get_positive(*p, "patch_size", label, 16);
  c.temporal_patch_size = get_positive(*p, "temporal_patch_size", label, 2);
  c.merge_size = get_positive(*p, "merge_size", label, 2);
  c.resample = static_cast<int>(get_int(*p, "resample", label, 3));
  c.rescale_factor = get_double(*p, "rescale_factor", label, 1.0 / 255.0);
  for (const char* key : {"image_mean", "image_std"}) {
    auto it = p->find(key);
    if (it == p->end() || it->is_null()) continue;
    if (!it->is_array() || it->size() != 3) bad(label, std::string(key) + " must be an array of 3 numbers");
    auto& dst = std::string(key) == "image_mean" ? c.image_mean : c.image_std;
    for (int i = 0; i < 3; ++i) {
      if (!(*it)[i].is_number()) bad(label, std::string(key) + " must be an array of 3 numbers");
      dst[i] = (*it)[i].get<double>();
    }
  }
  if (auto it = p->find("size"); it != p->end() && it->is_object()) {
    c.min_pixels = get_positive(*it, "shortest_edge", label, c.min_pixels);
    c.max_pixels = get_positive(*it, "longest_edge", label, c.max_pixels);
  }
  c.min_pixels = get_positive(*p, "min_pixels", label, c.min_pixels);
  c.max_pixels = get_positive(*p, "max_pixels", label, c.max_pixels);
  if (c.min_pixels > c.max_pixels) bad(label, "min_pixels is larger than max_pixels");
  return c;
}
}  // namespace

}  // namespace stave
