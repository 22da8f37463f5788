#include "formats/linear_weight.h"

#include <cstring>

#include "formats/quark_config.h"
#include "stave/errors.h"
#include "util/bf16.h"

namespace stave {

size_t LinearWeight::row_bytes() const {
  switch (format) {
    case WeightFormat::kF32: return static_cast<size_t>(in) * 4;
    case WeightFormat::kBF16:
    case WeightFormat::kF16: return static_cast<size_t>(in) * 2;
    case WeightFormat::kMXFP4: return static_cast<size_t>(in) / 2;
  }
  return 0;
}

LinearWeight bind_linear(const TensorStore& store, const std::string& prefix, int64_t out, int64_t in,
                         bool quantize_input_if_mxfp4) {
  const TensorRef& t = store.get(prefix + ".weight");
  LinearWeight w;
  w.name = prefix;
  w.out = out;
  w.in = in;
  w.data = t.data;
  auto expect_shape = [&](const TensorRef& r, std::vector<int64_t> shape) {
    if (r.shape != shape) {
      std::string want = "[" + std::to_string(shape[0]) + ", " + std::to_string(shape[1]) + "]";
      throw Error(ErrorKind::kInvalidModel, r.name + " has shape " + r.shape_string() + ", expected " + want);
    }
  };
  switch (t.dtype) {
    case DType::kF32: w.format = WeightFormat::kF32; break;
    case DType::kBF16: w.format = WeightFormat::kBF16; break;
    case DType::kF16: w.format = WeightFormat::kF16; break;
    case DType::kU8: {
      w.format = WeightFormat::kMXFP4;
      if (in % 32 != 0)
        throw Error(ErrorKind::kUnsupported, prefix + ": MXFP4 needs in_features divisible by 32, got " + std::to_string(in));
      expect_shape(t, {out, in / 2});
      const TensorRef& s = store.get(prefix + ".weight_scale");
      if (s.dtype != DType::kU8)
        throw Error(ErrorKind::kUnsupported, s.name + " must be U8 (E8M0), got " + std::string(dtype_name(s.dtype)));
      expect_shape(s, {out, in / 32});
      w.scales = s.data;
      w.quantize_input = quantize_input_if_mxfp4;
      return w;
    }
    default:
      throw Error(ErrorKind::kUnsupported, t.name + " has unsupported dtype " + std::string(dtype_name(t.dtype)));
  }
  expect_shape(t, {out, in});
  return w;
}

LinearWeight bind_linear(const TensorStore& store, const std::string& prefix, int64_t out, int64_t in,
                         const quant::QuantPlan* plan) {
  if (!plan) return bind_linear(store, prefix, out, in);
  const quant::LinearQuant& q = plan->at(prefix);
  LinearWeight w = bind_linear(store, prefix, out, in, q.input_mxfp4);
  bool stored_mxfp4 = w.format == WeightFormat::kMXFP4;
  if (stored_mxfp4 != q.weight_mxfp4)
    throw Error(ErrorKind::kInvalidModel,
                prefix + ".weight is stored as " + (stored_mxfp4 ? "MXFP4 codes" : "a float tensor") +
                    ", but quantization_config (" + q.rule + ") " +
                    (q.weight_mxfp4 ? "quantizes it to MXFP4" : "leaves it unquantized"));
  w.input_scale_mode = q.input_scale_mode;
  return w;
}

std::vector<float> read_f32(const TensorRef& t, int64_t expected_numel) {
  if (t.numel() != expected_numel)
    throw Error(ErrorKind::kInvalidModel, t.name + " has " + std::to_string(t.numel()) + " elements, expected " +
                                              std::to_string(expected_numel));
  std::vector<float> out(static_cast<size_t>(expected_numel));
  switch (t.dtype) {
    case DType::kF32: std::memcpy(out.data(), t.data, out.size() * 4); break;
    case DType::kBF16: {
      const uint8_t* p = t.data;
      for (size_t i = 0; i < out.size(); ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = bf16_to_f32(h);
      }
      break;
    }
    case DType::kF16: {
      const uint8_t* p = t.data;
      for (size_t i = 0; i < out.size(); ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = f16_to_f32(h);
      }
      break;
    }
    default:
      throw Error(ErrorKind::kUnsupported, t.name + " has dtype " + std::string(dtype_name(t.dtype)) +
                                               ", expected a float type");
  }
  return out;
}

std::vector<float> read_f32(const TensorStore& store, const std::string& name, int64_t expected_numel) {
  return read_f32(store.get(name), expected_numel);
}

}  // namespace stave
