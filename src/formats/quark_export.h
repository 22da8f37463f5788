// Writing Quark `hf_format` MXFP4: the packed row layout and the quantization_config block.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/model_config.h"
#include "formats/mxfp4.h"

namespace stave::quark {

// Quantizes one row of k (multiple of 32) values as Quark does for a static weight: "even"
// scales (or `mode`), RNE E2M1, codes packed low nibble = even column into codes[k/2], scale bytes as
// Quark exports them (an all-zero block is written as byte 1) into scales[k/32]. Either
// output may be null.
void quantize_row_mxfp4(const float* row, int64_t k, uint8_t* codes, uint8_t* scales,
                        mxfp4::ScaleMode mode = mxfp4::ScaleMode::kEven);

// Names of the linears Quark's export lists as excluded for a full-LM MXFP4 release:
// lm_head and every vision linear (explicit names, checkpoint naming, without ".weight").
std::vector<std::string> default_mxfp4_excludes(const ModelConfig& config);

// The quantization_config of a Quark MXFP4 (W4A4, dynamic activations) export, with the same
// fields and values as Quark 0.13 writes (and the fixture holds); `mode` is the
// scale_calculation_mode of both weights and activations.
nlohmann::ordered_json mxfp4_quantization_config(const std::vector<std::string>& exclude,
                                                 mxfp4::ScaleMode mode = mxfp4::ScaleMode::kEven);

}  // namespace stave::quark
