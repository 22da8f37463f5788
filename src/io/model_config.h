// The parts of a release's config.json (Qwen3_5ForConditionalGeneration) that stave uses,
// read and checked once. Every dimension the model code uses comes from here.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace stave {

enum class LayerType { kLinearAttention, kFullAttention };

struct TextConfig {
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t linear_num_key_heads = 0;
  int64_t linear_num_value_heads = 0;
  int64_t linear_key_head_dim = 0;
  int64_t linear_value_head_dim = 0;
  int64_t linear_conv_kernel_dim = 4;
  int64_t vocab_size = 0;
  double rms_norm_eps = 1e-6;
  std::vector<LayerType> layer_types;
  // rope_parameters
  double rope_theta = 1e7;
  double partial_rotary_factor = 0.25;
  std::array<int64_t, 3> mrope_section{11, 11, 10};
  bool mrope_interleaved = true;
  int64_t max_position_embeddings = 262144;
  bool tie_word_embeddings = false;

  int64_t rotary_dim() const { return static_cast<int64_t>(head_dim * partial_rotary_factor); }
  int64_t linear_key_dim() const { return linear_num_key_heads * linear_key_head_dim; }
  int64_t linear_value_dim() const { return linear_num_value_heads * linear_value_head_dim; }
  int64_t linear_conv_dim() const { return 2 * linear_key_dim() + linear_value_dim(); }
};

struct VisionConfig {
  bool present = false;
  int64_t depth = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_heads = 0;
  int64_t in_channels = 3;
  int64_t patch_size = 16;
  int64_t temporal_patch_size = 2;
  int64_t spatial_merge_size = 2;
  int64_t num_position_embeddings = 0;
  int64_t out_hidden_size = 0;
  std::string hidden_act = "gelu_pytorch_tanh";
  double rope_theta = 10000.0;
};

struct ModelConfig {
  std::string model_type;  // "qwen3_5"
  std::string architecture;
  TextConfig text;
  VisionConfig vision;
  int64_t image_token_id = -1;
  int64_t video_token_id = -1;
  int64_t vision_start_token_id = -1;
  int64_t vision_end_token_id = -1;
  std::string torch_dtype;                 // "bfloat16"
  std::string quantization_config_json;    // raw JSON text of quantization_config, "" if absent
};

// Limits on what a configuration file may ask for, refused before anything is allocated:
// the file's size, the number of layers (text or vision) and the attention widths.
inline constexpr size_t kMaxConfigBytes = size_t{16} << 20;
inline constexpr int64_t kMaxLayers = 1024;
inline constexpr int64_t kMaxWidth = int64_t{1} << 24;

// Parses config.json text; `label` names the file in errors (stave::Error kInvalidModel or
// kUnsupported naming the field).
ModelConfig parse_model_config(const std::string& json_text, const std::string& label);

struct JointHeadConfig {
  int64_t hidden_size = 0;
  int64_t width = 0;
  int64_t routing_layers = 0;
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t feedforward = 0;
};
JointHeadConfig parse_joint_head_config(const std::string& json_text, const std::string& label);

// Image/video preprocessing settings, from preprocessor_config.json (flat) or
// processor_config.json (nested under "image_processor").
struct ImageProcessorConfig {
  bool present = false;
  bool do_convert_rgb = true, do_resize = true, do_rescale = true, do_normalize = true;
  std::array<double, 3> image_mean{0.5, 0.5, 0.5};
  std::array<double, 3> image_std{0.5, 0.5, 0.5};
  int64_t patch_size = 16, temporal_patch_size = 2, merge_size = 2;
  int64_t min_pixels = 65536, max_pixels = 16777216;  // size.shortest_edge / size.longest_edge
  int resample = 3;                                    // PIL id: 3 = bicubic
  double rescale_factor = 1.0 / 255.0;
};
ImageProcessorConfig parse_image_processor_config(const std::string& json_text, const std::string& label);

// Video preprocessing settings (transformers' Qwen3VLVideoProcessor): the "video_processor"
// object of processor_config.json, or video_preprocessor_config.json (flat). `frame` holds
// the per-frame fields (mean/std, patch, temporal patch, merge, resample, rescale) and the
// pixel budget over all frames (size.shortest_edge / size.longest_edge). Defaults are the
// class's: fps 2, min_frames 4, max_frames 768, size 131072 ... 786432.
struct VideoProcessorConfig {
  bool present = false;
  ImageProcessorConfig frame;
  bool do_sample_frames = true;
  double fps = 2.0;                    // frames sampled per second of video
  int64_t num_frames = 0;              // > 0: a fixed frame count instead of fps (exclusive with fps)
  int64_t min_frames = 4, max_frames = 768;
  bool cap_pixels_per_frame = false;   // off in 5.17 (qwen-vl-utils' per-frame cap when on)
};
VideoProcessorConfig default_video_processor_config(const ImageProcessorConfig& image);
VideoProcessorConfig parse_video_processor_config(const std::string& json_text, const std::string& label);

}  // namespace stave
