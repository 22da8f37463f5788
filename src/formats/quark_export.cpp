#include "formats/quark_export.h"

#include "formats/tensor_names.h"
#include "formats/mxfp4.h"
#include "formats/quark_config.h"

namespace stave::quark {

void quantize_row_mxfp4(const float* row, int64_t k, uint8_t* codes, uint8_t* scales, mxfp4::ScaleMode mode) {
  uint8_t c[mxfp4::kBlock];
  for (int64_t b = 0; b < k / mxfp4::kBlock; ++b) {
    int e = mxfp4::quantize_block(row + b * mxfp4::kBlock, mxfp4::kBlock, c, mode);
    if (scales) scales[b] = mxfp4::export_scale_byte(e);
    if (codes)
      for (int j = 0; j < mxfp4::kBlock / 2; ++j)
        codes[b * (mxfp4::kBlock / 2) + j] = static_cast<uint8_t>(c[2 * j] | (c[2 * j + 1] << 4));
  }
}

std::vector<std::string> default_mxfp4_excludes(const ModelConfig& config) {
  std::vector<std::string> out{"lm_head"};
  for (const auto& e : expected_vision_tensors(config))
    if (e.role == TensorRole::kLinear) out.push_back(e.name.substr(0, e.name.size() - 7));
  return out;
}

nlohmann::ordered_json mxfp4_quantization_config(const std::vector<std::string>& exclude, mxfp4::ScaleMode mode) {
  using ojson = nlohmann::ordered_json;
  auto spec = [mode](bool dynamic) {
    return ojson{{"dtype", "fp4"},
                 {"is_dynamic", dynamic},
                 {"qscheme", "per_group"},
                 {"ch_axis", -1},
                 {"group_size", 32},
                 {"block_size", nullptr},
                 {"symmetric", nullptr},
                 {"round_method", "half_even"},
                 {"scale_type", "float"},
                 {"scale_format", "e8m0"},
                 {"scale_calculation_mode", quant::scale_mode_name(mode)},
                 {"mx_element_dtype", nullptr},
                 {"observer_cls", "PerBlockMXObserver"},
                 {"is_scale_quant", false},
                 {"enable_buffer_reuse", false},
                 {"max_input_numel", 4194304}};
  };
  return ojson{{"quant_method", "quark"},
               {"global_quant_config",
                {{"weight", spec(false)},
                 {"input_tensors", spec(true)},
                 {"output_tensors", nullptr},
                 {"bias", nullptr},
                 {"target_device", nullptr}}},
               {"exclude", exclude},
               {"algo_config", nullptr},
               {"softmax_quant_spec", nullptr},
               {"layer_type_quant_config", ojson::object()},
               {"layer_quant_config", ojson::object()},
               {"kv_cache_quant_config", ojson::object()},
               {"kv_cache_post_rope", false},
               {"quant_mode", "eager_mode"},
               {"version", "0.13"},
               {"export",
                {{"kv_cache_group", ojson::array()},
                 {"min_kv_scale", 0.0},
                 {"pack_method", "reorder"},
                 {"weight_format", "real_quantized"},
                 {"weight_merge_groups", nullptr}}}};
}

}  // namespace stave::quark
