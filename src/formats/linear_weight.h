// A linear layer's weight as the checkpoint stores it, used in place from the mapped file.
// y = x · Wᵀ with W [out, in]. Quark MXFP4 weights stay packed (codes + E8M0 scales); when
// the layer is W4A4 the activation is MXFP4-quantized before the product (Quark semantics).
#pragma once
#include <cstdint>
#include <string>

#include "io/tensor_store.h"
#include "formats/mxfp4.h"

namespace stave {
namespace quant {
class QuantPlan;
}

enum class WeightFormat { kF32, kBF16, kF16, kMXFP4 };

struct LinearWeight {
  std::string name;  // checkpoint name without ".weight", for messages
  int64_t out = 0, in = 0;
  WeightFormat format = WeightFormat::kBF16;
  const void* data = nullptr;       // [out, in] floats, or MXFP4 codes [out, in/2]
  const uint8_t* scales = nullptr;  // MXFP4: E8M0 bytes [out, in/32]
  bool quantize_input = false;      // W4A4: MXFP4 QDQ of the activation before the product
  mxfp4::ScaleMode input_scale_mode = mxfp4::ScaleMode::kEven;  // scale rounding of that QDQ
  const float* bias = nullptr;      // optional [out], fp32 (owned by the model)

  size_t row_bytes() const;
};

// Binds `prefix`.weight (and .weight_scale for MXFP4) from the store and checks its shape.
// `quantize_input` comes from the quantization config (see src/formats/quark_config.h).
LinearWeight bind_linear(const TensorStore& store, const std::string& prefix, int64_t out, int64_t in,
                         bool quantize_input_if_mxfp4 = true);

// The same, with the release's quantization plan (src/formats/quark_config.h): whether the
// activation is quantized, and with which scale mode, comes from quantization_config, and a
// weight stored otherwise than the plan says is an Error naming it. A null plan (a release
// without quantization_config) behaves as the overload above.
LinearWeight bind_linear(const TensorStore& store, const std::string& prefix, int64_t out, int64_t in,
                         const quant::QuantPlan* plan);

// Reads any float tensor (F32/BF16/F16) into fp32, checking the element count.
std::vector<float> read_f32(const TensorRef& t, int64_t expected_numel);
std::vector<float> read_f32(const TensorStore& store, const std::string& name, int64_t expected_numel);

}  // namespace stave
