#include "model/model_check.h"

#include "formats/tensor_names.h"
#include "formats/quark_config.h"
#include "stave/errors.h"

namespace stave {
namespace {

bool is_float(DType t) { return t == DType::kBF16 || t == DType::kF32 || t == DType::kF16; }

void check_one(const TensorStore& store, const ExpectedTensor& e, const std::string& where) {
  const TensorRef* t = store.find(e.name);
  if (!t) throw Error(ErrorKind::kInvalidModel, where + " is missing tensor \"" + e.name + "\"");
  bool mxfp4 = e.role == TensorRole::kLinear && t->dtype == DType::kU8;
  if (mxfp4) {
    // Quark MXFP4: weight U8 [out, in/2], weight_scale U8 [out, in/32].
    int64_t out = e.shape[0], in = e.shape[1];
    if (in % 32 != 0)
      throw Error(ErrorKind::kUnsupported, e.name + ": MXFP4 needs in_features divisible by 32, got " + std::to_string(in));
    if (t->shape != std::vector<int64_t>{out, in / 2})
      throw Error(ErrorKind::kInvalidModel, e.name + " (MXFP4 codes) has shape " + t->shape_string() + ", expected [" +
                                                std::to_string(out) + ", " + std::to_string(in / 2) + "]");
    const TensorRef* s = store.find(e.name.substr(0, e.name.size() - 6) + "weight_scale");
    if (!s) throw Error(ErrorKind::kInvalidModel, e.name + " is stored as U8 codes but has no weight_scale");
    if (s->dtype != DType::kU8 || s->shape != std::vector<int64_t>{out, in / 32})
      throw Error(ErrorKind::kInvalidModel, e.name + "_scale has " + std::string(dtype_name(s->dtype)) + " " +
                                                s->shape_string() + ", expected U8 [" + std::to_string(out) + ", " +
                                                std::to_string(in / 32) + "]");
    return;
  }
  if (!is_float(t->dtype))
    throw Error(ErrorKind::kUnsupported, e.name + " has dtype " + std::string(dtype_name(t->dtype)) +
                                             " (expected BF16, F16 or F32)");
  if (t->shape != e.shape) {
    std::string want = "[";
    for (size_t i = 0; i < e.shape.size(); ++i) want += (i ? ", " : "") + std::to_string(e.shape[i]);
    want += "]";
    throw Error(ErrorKind::kInvalidModel, e.name + " has shape " + t->shape_string() + ", expected " + want);
  }
}

}  // namespace

void check_release_loadable(const Release& release) {
  for (const auto& e : expected_backbone_tensors(release.config)) check_one(release.weights, e, "checkpoint");
  for (const auto& e : expected_vision_tensors(release.config)) check_one(release.weights, e, "checkpoint");
  for (const auto& e : expected_head_tensors(release.head_config)) check_one(release.head, e, "joint_head.safetensors");
  // With a quantization_config, every linear must be stored as the plan says (quantized ones
  // as MXFP4, excluded ones as floats), and every spec that applies must be one stave runs.
  if (auto plan = quant::QuantPlan::from_model_config(release.config)) plan->check_against(release.weights);
}

}  // namespace stave
