// Reading an AMD Quark `quantization_config` (config.json) into a per-linear plan: for each
// linear layer of the checkpoint, is its weight MXFP4 and is its input dynamically MXFP4
// quantized (W4A4), with which scale rounding, as Quark's export writes the config.
//
// Resolution order for one layer (as vLLM's QuarkConfig does):
//   1. `exclude`: exact names, `re:`-prefixed regexes (matched at the start, Python re.match),
//      and fnmatch globs for entries with a `*` (Quark's own exclude syntax) -> not quantized;
//   2. `layer_quant_config`: first key that matches (fnmatch when it has a `*`, else exact);
//   3. `layer_type_quant_config["Linear"]` (every layer stave quantizes is an nn.Linear);
//   4. `global_quant_config`.
// The only quantization stave implements is OCP MXFP4 (fp4 / per_group 32 / e8m0): anything
// else that applies to a layer is refused with an Error naming the layer and the field.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/model_config.h"
#include "io/tensor_store.h"
#include "formats/mxfp4.h"

namespace stave::quant {

// What the plan says about one linear layer.
struct LinearQuant {
  bool weight_mxfp4 = false;   // weight stored as U8 codes + weight_scale
  bool input_mxfp4 = false;    // activation QDQ'd per 32-block before the product (W4A4)
  mxfp4::ScaleMode weight_scale_mode = mxfp4::ScaleMode::kEven;  // how the weight scales were chosen
  mxfp4::ScaleMode input_scale_mode = mxfp4::ScaleMode::kEven;   // how activation scales are chosen
  std::string rule;  // which part of the config decided, for messages: "exclude", "global_quant_config", ...
};

// A parsed quantization_config. Parsing checks the document's shape and the top-level
// features (quant_method, kv-cache and softmax quantization); a layer's specs are checked when
// the layer is resolved, so that the message can name it.
class QuarkConfig {
 public:
  // `label` names the source in messages (e.g. "config.json quantization_config").
  static QuarkConfig parse(const std::string& json_text, const std::string& label = "quantization_config");

  // The decision for one linear layer (checkpoint name without ".weight", e.g.
  // "model.language_model.layers.3.mlp.down_proj"). Throws Error(kUnsupported) naming the
  // layer and the field when the spec that applies is not MXFP4.
  LinearQuant resolve(const std::string& layer) const;

  // True when `layer` matches an entry of `exclude`.
  bool excluded(const std::string& layer) const;

  QuarkConfig(QuarkConfig&&) noexcept;
  QuarkConfig& operator=(QuarkConfig&&) noexcept;
  ~QuarkConfig();

 private:
  QuarkConfig();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The plan for every linear layer of a model (backbone, lm_head and vision tower).
class QuantPlan {
 public:
  // No plan: a release without quantization_config (each layer follows its stored dtype).
  QuantPlan() = default;
  // Resolves every linear named by the model's expected tensors (src/formats/tensor_names.h).
  // Throws as QuarkConfig::resolve does.
  static std::optional<QuantPlan> from_model_config(const ModelConfig& config);
  static QuantPlan from_config(const QuarkConfig& quark, const ModelConfig& config);

  // The decision for one layer; throws Error(kInvalidModel) for a name the plan does not know.
  const LinearQuant& at(const std::string& layer) const;
  const LinearQuant* find(const std::string& layer) const;
  const std::map<std::string, LinearQuant>& layers() const { return layers_; }

  // Checks the checkpoint against the plan: a layer the plan quantizes must be stored as U8
  // codes [out, in/2] + U8 weight_scale [out, in/32]; a layer it leaves alone must be a float
  // tensor. Throws Error(kInvalidModel) naming the tensor and the rule that decided.
  void check_against(const TensorStore& store) const;

 private:
  std::map<std::string, LinearQuant> layers_;
};

// The linear layers of a model, as checkpoint names without ".weight" with [out, in], in model
// order: text layers, lm_head, then the vision tower.
struct LinearLayer {
  std::string name;
  int64_t out = 0, in = 0;
  bool language_model = true;
  bool is_lm_head = false;
};
std::vector<LinearLayer> model_linears(const ModelConfig& config);

const char* scale_mode_name(mxfp4::ScaleMode mode);
// "even" / "floor" / "ceil"; nullopt otherwise.
std::optional<mxfp4::ScaleMode> parse_scale_mode(const std::string& name);

}  // namespace stave::quant
