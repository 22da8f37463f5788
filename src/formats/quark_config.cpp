#include "formats/quark_config.h"

#include <nlohmann/json.hpp>

#include "formats/tensor_names.h"
#include "formats/name_match.h"
#include "stave/errors.h"
#include "util/json_limits.h"

namespace stave::quant {
namespace {

// ordered: layer_quant_config is matched first-to-last in the file's order, as vLLM does.
using json = nlohmann::ordered_json;

const char* kMxfp4Summary =
    "stave supports only OCP MXFP4: dtype \"fp4\", qscheme \"per_group\", group_size 32, scale_format \"e8m0\"";

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

std::string show(const json& v) { return v.dump(); }

// Type names Quark may use for nn.Linear in layer_type_quant_config.
bool is_linear_type_name(const std::string& t) {
  return t == "Linear" || t == "nn.Linear" || t == "torch.nn.Linear" || t == "torch.nn.modules.linear.Linear" ||
         t == "<class 'torch.nn.modules.linear.Linear'>";
}

bool empty_or_null(const json& v) { return v.is_null() || (v.is_object() && v.empty()) || (v.is_array() && v.empty()); }

}  // namespace

const char* scale_mode_name(mxfp4::ScaleMode mode) {
  switch (mode) {
    case mxfp4::ScaleMode::kEven: return "even";
    case mxfp4::ScaleMode::kFloor: return "floor";
    case mxfp4::ScaleMode::kCeil: return "ceil";
  }
  return "?";
}

std::optional<mxfp4::ScaleMode> parse_scale_mode(const std::string& name) {
  if (name == "even") return mxfp4::ScaleMode::kEven;
  if (name == "floor") return mxfp4::ScaleMode::kFloor;
  if (name == "ceil") return mxfp4::ScaleMode::kCeil;
  return std::nullopt;
}

struct QuarkConfig::Impl {
  std::string label;
  json global;                                        // a QuantizationConfig object, or null
  std::vector<std::pair<std::string, json>> by_name;  // layer_quant_config, in file order
  std::vector<NamePattern> by_name_patterns;
  std::optional<std::pair<std::string, json>> linear_type;  // layer_type_quant_config entry for Linear
  std::vector<NamePattern> exclude;

  // Checks one tensor spec (weight or input_tensors) of the config that applies to `layer`.
  mxfp4::ScaleMode check_spec(const json& spec, const std::string& layer, const std::string& where,
                              bool is_input) const {
    auto fail = [&](const std::string& field, const std::string& what) -> Error {
      return Error(ErrorKind::kUnsupported,
                   layer + ": " + label + " " + where + "." + field + " " + what + "; " + kMxfp4Summary);
    };
    if (!spec.is_object())
      throw Error(ErrorKind::kInvalidModel, layer + ": " + label + " " + where + " is not an object");
    auto field = [&](const char* name) -> const json* {
      auto it = spec.find(name);
      return it == spec.end() ? nullptr : &*it;
    };
    const json* dtype = field("dtype");
    if (!dtype || !dtype->is_string()) throw fail("dtype", dtype ? "is " + show(*dtype) : "is missing");
    if (dtype->get<std::string>() != "fp4") throw fail("dtype", "is " + show(*dtype));
    const json* qscheme = field("qscheme");
    if (!qscheme || !qscheme->is_string() || qscheme->get<std::string>() != "per_group")
      throw fail("qscheme", qscheme ? "is " + show(*qscheme) : "is missing");
    const json* group = field("group_size");
    if (!group || !group->is_number_integer() || group->get<int64_t>() != 32)
      throw fail("group_size", group ? "is " + show(*group) : "is missing");
    const json* fmt = field("scale_format");
    if (!fmt || !fmt->is_string() || fmt->get<std::string>() != "e8m0")
      throw fail("scale_format", fmt ? "is " + show(*fmt) : "is missing");
    if (const json* ax = field("ch_axis"); ax && !ax->is_null() && !(ax->is_number_integer() && ax->get<int64_t>() == -1))
      throw fail("ch_axis", "is " + show(*ax) + " (MXFP4 blocks run along the last axis, ch_axis -1)");
    if (const json* mx = field("mx_element_dtype"); mx && !mx->is_null())
      throw fail("mx_element_dtype", "is " + show(*mx));
    if (const json* sq = field("is_scale_quant"); sq && sq->is_boolean() && sq->get<bool>())
      throw fail("is_scale_quant", "is true (quantized scales)");
    const json* dyn = field("is_dynamic");
    if (dyn && !dyn->is_null() && !dyn->is_boolean()) throw fail("is_dynamic", "is " + show(*dyn));
    bool dynamic = dyn && dyn->is_boolean() && dyn->get<bool>();
    if (is_input && dyn && dyn->is_boolean() && !dynamic)
      throw fail("is_dynamic", "is false (a static input scale); stave quantizes activations dynamically");
    if (!is_input && dynamic) throw fail("is_dynamic", "is true (dynamic weight quantization)");
    mxfp4::ScaleMode mode = mxfp4::ScaleMode::kEven;  // Quark's default
    if (const json* m = field("scale_calculation_mode"); m && !m->is_null()) {
      auto parsed = m->is_string() ? parse_scale_mode(m->get<std::string>()) : std::nullopt;
      if (!parsed) throw fail("scale_calculation_mode", "is " + show(*m) + " (stave knows even, floor, ceil)");
      mode = *parsed;
    }
    return mode;
  }

  // Interprets one QuantizationConfig object ({weight, input_tensors, output_tensors, bias}).
  LinearQuant interpret(const json& cfg, const std::string& layer, const std::string& where) const {
    LinearQuant q;
    q.rule = where;
    if (cfg.is_null()) return q;
    if (!cfg.is_object()) throw Error(ErrorKind::kInvalidModel, layer + ": " + label + " " + where + " is not an object");
    auto get = [&](const char* name) -> json {
      auto it = cfg.find(name);
      return it == cfg.end() ? json() : *it;
    };
    json out = get("output_tensors");
    if (!out.is_null())
      throw Error(ErrorKind::kUnsupported, layer + ": " + label + " " + where +
                                               ".output_tensors is set (output quantization is not supported)");
    json bias = get("bias");
    if (!bias.is_null())
      throw Error(ErrorKind::kUnsupported,
                  layer + ": " + label + " " + where + ".bias is set (bias quantization is not supported)");
    json weight = get("weight"), input = get("input_tensors");
    if (weight.is_null()) {
      if (!input.is_null())
        throw Error(ErrorKind::kUnsupported, layer + ": " + label + " " + where +
                                                 ".input_tensors is set without weight quantization "
                                                 "(activation-only quantization is not supported)");
      return q;
    }
    q.weight_mxfp4 = true;
    q.weight_scale_mode = check_spec(weight, layer, where + ".weight", false);
    if (!input.is_null()) {
      q.input_mxfp4 = true;
      q.input_scale_mode = check_spec(input, layer, where + ".input_tensors", true);
    }
    return q;
  }
};

QuarkConfig::QuarkConfig() : impl_(std::make_unique<Impl>()) {}
QuarkConfig::~QuarkConfig() = default;
QuarkConfig::QuarkConfig(QuarkConfig&&) noexcept = default;
QuarkConfig& QuarkConfig::operator=(QuarkConfig&&) noexcept = default;

QuarkConfig QuarkConfig::parse(const std::string& json_text, const std::string& label) {
  if (json_text.size() > kMaxConfigBytes)
    throw Error(ErrorKind::kInvalidModel, label + " is larger than the limit of " + std::to_string(kMaxConfigBytes) + " bytes");
  check_json_depth(json_text, label);
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    throw Error(ErrorKind::kInvalidModel, label + " is not valid JSON (" + e.what() + ")");
  }
  auto bad = [&](const std::string& what) { return Error(ErrorKind::kInvalidModel, label + " " + what); };
  auto unsupported = [&](const std::string& what) { return Error(ErrorKind::kUnsupported, label + " " + what); };
  if (!j.is_object()) throw bad("is not an object");

  auto method = j.find("quant_method");
  if (method == j.end() || !method->is_string()) throw bad("has no quant_method string");
  if (method->get<std::string>() != "quark")
    throw unsupported("quant_method " + quoted(method->get<std::string>()) +
                      " is not supported (stave reads AMD Quark MXFP4 checkpoints: quant_method \"quark\")");

  if (auto kv = j.find("kv_cache_quant_config"); kv != j.end() && !empty_or_null(*kv))
    throw unsupported("kv_cache_quant_config is set (kv-cache quantization is not supported)");
  if (auto sm = j.find("softmax_quant_spec"); sm != j.end() && !sm->is_null())
    throw unsupported("softmax_quant_spec is set (attention softmax quantization is not supported)");

  QuarkConfig c;
  Impl& impl = *c.impl_;
  impl.label = label;
  if (auto g = j.find("global_quant_config"); g != j.end()) {
    if (!g->is_null() && !g->is_object()) throw bad("global_quant_config is not an object");
    impl.global = *g;
  }
  if (auto l = j.find("layer_quant_config"); l != j.end() && !l->is_null()) {
    if (!l->is_object()) throw bad("layer_quant_config is not an object");
    for (auto it = l->begin(); it != l->end(); ++it) {
      impl.by_name_patterns.emplace_back(it.key(), label + " layer_quant_config[" + quoted(it.key()) + "]");
      impl.by_name.emplace_back(it.key(), it.value());
    }
  }
  if (auto t = j.find("layer_type_quant_config"); t != j.end() && !t->is_null()) {
    if (!t->is_object()) throw bad("layer_type_quant_config is not an object");
    for (auto it = t->begin(); it != t->end(); ++it) {
      if (is_linear_type_name(it.key())) {
        impl.linear_type.emplace(it.key(), it.value());
      } else if (!it.value().is_null()) {
        throw unsupported("layer_type_quant_config[" + quoted(it.key()) +
                          "] is set (stave quantizes only Linear layers)");
      }
    }
  }
  if (auto ex = j.find("exclude"); ex != j.end() && !ex->is_null()) {
    if (!ex->is_array()) throw bad("exclude is not an array");
    for (size_t i = 0; i < ex->size(); ++i) {
      const json& e = (*ex)[i];
      if (!e.is_string()) throw bad("exclude[" + std::to_string(i) + "] is not a string");
      impl.exclude.emplace_back(e.get<std::string>(), label + " exclude[" + std::to_string(i) + "]");
    }
  }
  return c;
}

bool QuarkConfig::excluded(const std::string& layer) const {
  for (const auto& p : impl_->exclude)
    if (p.matches(layer)) return true;
  return false;
}

LinearQuant QuarkConfig::resolve(const std::string& layer) const {
  const Impl& impl = *impl_;
  for (const auto& p : impl.exclude)
    if (p.matches(layer)) {
      LinearQuant q;
      q.rule = "exclude " + quoted(p.text());
      return q;
    }
  for (size_t i = 0; i < impl.by_name.size(); ++i)
    if (impl.by_name_patterns[i].matches(layer))
      return impl.interpret(impl.by_name[i].second, layer, "layer_quant_config[" + quoted(impl.by_name[i].first) + "]");
  if (impl.linear_type)
    return impl.interpret(impl.linear_type->second, layer,
                          "layer_type_quant_config[" + quoted(impl.linear_type->first) + "]");
  return impl.interpret(impl.global, layer, "global_quant_config");
}

std::vector<LinearLayer> model_linears(const ModelConfig& config) {
  std::vector<LinearLayer> out;
  auto add = [&](const ExpectedTensor& e) {
    if (e.role != TensorRole::kLinear && e.role != TensorRole::kLmHead) return;
    const std::string suffix = ".weight";
    std::string name = e.name.substr(0, e.name.size() - suffix.size());
    out.push_back({name, e.shape[0], e.shape[1], e.language_model, e.role == TensorRole::kLmHead});
  };
  for (const auto& e : expected_backbone_tensors(config)) add(e);
  for (const auto& e : expected_vision_tensors(config)) add(e);
  return out;
}

std::optional<QuantPlan> QuantPlan::from_model_config(const ModelConfig& config) {
  if (config.quantization_config_json.empty()) return std::nullopt;
  return from_config(QuarkConfig::parse(config.quantization_config_json, "config.json quantization_config"), config);
}

QuantPlan QuantPlan::from_config(const QuarkConfig& quark, const ModelConfig& config) {
  QuantPlan plan;
  for (const auto& l : model_linears(config)) plan.layers_[l.name] = quark.resolve(l.name);
  return plan;
}

const LinearQuant* QuantPlan::find(const std::string& layer) const {
  auto it = layers_.find(layer);
  return it == layers_.end() ? nullptr : &it->second;
}

const LinearQuant& QuantPlan::at(const std::string& layer) const {
  const LinearQuant* q = find(layer);
  if (!q) throw Error(ErrorKind::kInvalidModel, "the quantization plan has no linear layer \"" + layer + "\"");
  return *q;
}

void QuantPlan::check_against(const TensorStore& store) const {
  // Shapes of float weights are checked by the model check; here only the storage kind and
  // the MXFP4 pair's consistency.
  for (const auto& [layer, q] : layers_) {
    const std::string wname = layer + ".weight";
    const TensorRef* w = store.find(wname);
    if (!w) throw Error(ErrorKind::kInvalidModel, "checkpoint is missing tensor \"" + wname + "\"");
    const TensorRef* s = store.find(layer + ".weight_scale");
    bool is_float = w->dtype == DType::kBF16 || w->dtype == DType::kF32 || w->dtype == DType::kF16;
    if (q.weight_mxfp4) {
      if (w->dtype != DType::kU8)
        throw Error(ErrorKind::kInvalidModel,
                    wname + " is stored as " + std::string(dtype_name(w->dtype)) +
                        ", but quantization_config (" + q.rule +
                        ") quantizes it to MXFP4: expected U8 codes and a U8 weight_scale");
      if (!s)
        throw Error(ErrorKind::kInvalidModel, wname + " is quantized by quantization_config (" + q.rule +
                                                  ") but the checkpoint has no " + layer + ".weight_scale");
      if (s->dtype != DType::kU8)
        throw Error(ErrorKind::kInvalidModel,
                    s->name + " is " + std::string(dtype_name(s->dtype)) + ", expected U8 (E8M0 scale bytes)");
      if (w->rank() != 2 || s->rank() != 2 || s->shape[0] != w->shape[0] || s->shape[1] * 16 != w->shape[1])
        throw Error(ErrorKind::kInvalidModel, wname + " " + w->shape_string() + " and its weight_scale " +
                                                  s->shape_string() +
                                                  " do not describe MXFP4 blocks ([out, in/2] and [out, in/32])");
    } else {
      if (w->dtype == DType::kU8)
        throw Error(ErrorKind::kInvalidModel, wname + " is stored as U8 (MXFP4 codes), but quantization_config (" +
                                                  q.rule + ") leaves it unquantized: expected a float tensor");
      if (!is_float)
        throw Error(ErrorKind::kUnsupported, wname + " has dtype " + std::string(dtype_name(w->dtype)) +
                                                 " (expected BF16, F16 or F32)");
    }
  }
}

}  // namespace stave::quant
