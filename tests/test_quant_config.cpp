// Reading Quark quantization_config into a per-linear plan (src/formats/quark_config.h): the
// fixture's config, precedence rules on synthetic configs, each refusal, the checkpoint check
// and the plan-driven weight binding.
#include <filesystem>
#include <fstream>
#include <functional>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_temp.h"
#include "io/release.h"
#include "formats/linear_weight.h"
#include "model/model_check.h"
#include "ops/reference.h"
#include "formats/quark_config.h"
#include "stave/errors.h"
#include "test_errors.h"
#include "test_util.h"

namespace stave::quant {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

// The MXFP4 spec exactly as the fixture (and Quark 0.13) writes it.
json mx_spec(bool dynamic, const char* mode = "even") {
  return {{"dtype", "fp4"},          {"is_dynamic", dynamic},      {"qscheme", "per_group"},
          {"ch_axis", -1},           {"group_size", 32},           {"block_size", nullptr},
          {"symmetric", nullptr},    {"round_method", "half_even"}, {"scale_type", "float"},
          {"scale_format", "e8m0"},  {"scale_calculation_mode", mode}, {"mx_element_dtype", nullptr},
          {"observer_cls", "PerBlockMXObserver"}, {"is_scale_quant", false}};
}
json w4a4(const char* mode = "even") {
  return {{"weight", mx_spec(false, mode)}, {"input_tensors", mx_spec(true, mode)}, {"output_tensors", nullptr},
          {"bias", nullptr}};
}
json base_config() {
  return {{"quant_method", "quark"}, {"global_quant_config", w4a4()}, {"exclude", json::array()},
          {"algo_config", nullptr},  {"layer_type_quant_config", json::object()},
          {"layer_quant_config", json::object()}, {"kv_cache_quant_config", json::object()}};
}

using test::error_of;
#define EXPECT_CONTAINS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

const std::string kDown3 = "model.language_model.layers.3.mlp.down_proj";

TEST(QuarkConfig, FixtureConfigQuantizesEveryTextLinearW4A4) {
  STAVE_REQUIRE_FIXTURE("public/model-mxfp4/config.json");
  auto release = open_release(test::fixture("public/model-mxfp4"));
  auto plan = QuantPlan::from_model_config(release->config);
  ASSERT_TRUE(plan.has_value());
  int text = 0, excluded = 0;
  for (const auto& l : model_linears(release->config)) {
    const LinearQuant& q = plan->at(l.name);
    // fixtures/README.md: every language-model linear quantized; lm_head + every vision linear excluded.
    bool want = l.language_model && !l.is_lm_head;
    EXPECT_EQ(q.weight_mxfp4, want) << l.name;
    EXPECT_EQ(q.input_mxfp4, want) << l.name;
    if (want) {
      ++text;
      EXPECT_EQ(q.weight_scale_mode, mxfp4::ScaleMode::kEven);
      EXPECT_EQ(q.input_scale_mode, mxfp4::ScaleMode::kEven);
      EXPECT_EQ(q.rule, "global_quant_config");
    } else {
      ++excluded;
      EXPECT_CONTAINS(q.rule, "exclude");
    }
  }
  // 8 layers x 3 MLP linears + 6 GDN layers x 5 + 2 attention layers x 4.
  EXPECT_EQ(text, 8 * 3 + 6 * 5 + 2 * 4);
  EXPECT_EQ(excluded, 1 + 2 * 4 + 2);
  EXPECT_NO_THROW(plan->check_against(release->weights));
  EXPECT_NO_THROW(check_release_loadable(*release));
}

TEST(QuarkConfig, NoQuantizationConfigGivesNoPlan) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  auto release = open_release(test::fixture("public/model-bf16"));
  EXPECT_FALSE(QuantPlan::from_model_config(release->config).has_value());
}

TEST(QuarkConfig, LayerQuantConfigFirstMatchThenLayerTypeThenGlobal) {
  json c = base_config();
  c["global_quant_config"] = nullptr;  // nothing quantized unless a rule says so
  c["layer_type_quant_config"] = {{"Linear", {{"weight", mx_spec(false)}, {"input_tensors", nullptr}}}};
  c["layer_quant_config"] = json::object();
  c["layer_quant_config"][kDown3] = w4a4("ceil");            // exact name
  c["layer_quant_config"]["*.mlp.down_proj"] = w4a4("floor");  // glob, after the exact key
  c["layer_quant_config"]["*.layers.1.*"] = {{"weight", nullptr}, {"input_tensors", nullptr}};
  QuarkConfig q = QuarkConfig::parse(c.dump());

  LinearQuant exact = q.resolve(kDown3);
  EXPECT_TRUE(exact.weight_mxfp4 && exact.input_mxfp4);
  EXPECT_EQ(exact.input_scale_mode, mxfp4::ScaleMode::kCeil);
  EXPECT_CONTAINS(exact.rule, "layer_quant_config[\"" + kDown3 + "\"]");

  LinearQuant glob = q.resolve("model.language_model.layers.5.mlp.down_proj");
  EXPECT_EQ(glob.input_scale_mode, mxfp4::ScaleMode::kFloor);
  EXPECT_EQ(glob.weight_scale_mode, mxfp4::ScaleMode::kFloor);

  // layers.1.mlp.down_proj matches the down_proj glob first (file order wins).
  EXPECT_TRUE(q.resolve("model.language_model.layers.1.mlp.down_proj").weight_mxfp4);
  EXPECT_FALSE(q.resolve("model.language_model.layers.1.mlp.up_proj").weight_mxfp4);

  LinearQuant by_type = q.resolve("model.language_model.layers.2.mlp.up_proj");
  EXPECT_TRUE(by_type.weight_mxfp4);
  EXPECT_FALSE(by_type.input_mxfp4);  // W4A16
  EXPECT_EQ(by_type.rule, "layer_type_quant_config[\"Linear\"]");

  // Without the type rule, the (null) global config applies.
  c["layer_type_quant_config"] = json::object();
  EXPECT_FALSE(QuarkConfig::parse(c.dump()).resolve("model.language_model.layers.2.mlp.up_proj").weight_mxfp4);

  // An exact key only matches the whole name.
  EXPECT_EQ(q.resolve("model.language_model.layers.3.mlp.down_proj_x").rule, "layer_type_quant_config[\"Linear\"]");
}

TEST(QuarkConfig, ExcludeNamesRegexesAndGlobsBeatLayerConfigs) {
  json c = base_config();
  c["layer_quant_config"] = {{"*down_proj", w4a4()}};
  c["exclude"] = {"lm_head", "re:model\\.visual\\..*", "re:.*layers\\.[67]\\.", "*.linear_attn.in_proj_a", kDown3};
  QuarkConfig q = QuarkConfig::parse(c.dump());
  EXPECT_FALSE(q.resolve("lm_head").weight_mxfp4);
  EXPECT_FALSE(q.resolve("model.visual.blocks.0.attn.qkv").weight_mxfp4);
  EXPECT_FALSE(q.resolve("model.language_model.layers.6.mlp.up_proj").weight_mxfp4);
  EXPECT_FALSE(q.resolve("model.language_model.layers.7.mlp.down_proj").weight_mxfp4);
  EXPECT_FALSE(q.resolve("model.language_model.layers.0.linear_attn.in_proj_a").weight_mxfp4);
  EXPECT_FALSE(q.resolve(kDown3).weight_mxfp4);  // exclude wins over layer_quant_config
  EXPECT_CONTAINS(q.resolve(kDown3).rule, "exclude");
  EXPECT_TRUE(q.resolve("model.language_model.layers.2.mlp.down_proj").weight_mxfp4);
  EXPECT_TRUE(q.resolve("model.language_model.layers.0.linear_attn.in_proj_b").weight_mxfp4);
  // re: is re.match: anchored at the start, so "visual" alone does not match "model.visual...".
  c["exclude"] = {"re:visual"};
  EXPECT_TRUE(QuarkConfig::parse(c.dump()).resolve("model.visual.blocks.0.attn.qkv").weight_mxfp4);
  // "lm_head" is an exact name: it does not exclude "lm_head_x".
  c["exclude"] = {"lm_head"};
  EXPECT_TRUE(QuarkConfig::parse(c.dump()).resolve("lm_head_x").weight_mxfp4);
}

TEST(QuarkConfig, RefusesOtherQuantMethodsByName) {
  json c = base_config();
  c["quant_method"] = "awq";
  std::string msg = error_of([&] { QuarkConfig::parse(c.dump()); });
  EXPECT_CONTAINS(msg, "quant_method \"awq\"");
  c.erase("quant_method");
  EXPECT_CONTAINS(error_of([&] { QuarkConfig::parse(c.dump()); }), "quant_method");
}

TEST(QuarkConfig, RefusesUnsupportedSpecsNamingLayerAndField) {
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
    std::string field;
  };
  std::vector<Case> cases = {
      {"int4 weights", [](json& g) { g["weight"]["dtype"] = "int4"; }, "global_quant_config.weight.dtype is \"int4\""},
      {"fp8 inputs", [](json& g) { g["input_tensors"]["dtype"] = "fp8_e4m3"; },
       "global_quant_config.input_tensors.dtype is \"fp8_e4m3\""},
      {"group 64", [](json& g) { g["weight"]["group_size"] = 64; }, "global_quant_config.weight.group_size is 64"},
      {"per_tensor", [](json& g) { g["weight"]["qscheme"] = "per_tensor"; },
       "global_quant_config.weight.qscheme is \"per_tensor\""},
      {"fp32 scales", [](json& g) { g["weight"]["scale_format"] = "float32"; },
       "global_quant_config.weight.scale_format is \"float32\""},
      {"static input", [](json& g) { g["input_tensors"]["is_dynamic"] = false; },
       "global_quant_config.input_tensors.is_dynamic is false (a static input scale)"},
      {"dynamic weight", [](json& g) { g["weight"]["is_dynamic"] = true; }, "global_quant_config.weight.is_dynamic is true"},
      {"ch_axis 0", [](json& g) { g["weight"]["ch_axis"] = 0; }, "global_quant_config.weight.ch_axis is 0"},
      {"scale mode", [](json& g) { g["weight"]["scale_calculation_mode"] = "rceil"; },
       "global_quant_config.weight.scale_calculation_mode is \"rceil\""},
      {"output quantization", [](json& g) { g["output_tensors"] = mx_spec(true); },
       "global_quant_config.output_tensors is set"},
      {"bias quantization", [](json& g) { g["bias"] = mx_spec(false); }, "global_quant_config.bias is set"},
      {"input only", [](json& g) { g["weight"] = nullptr; }, "global_quant_config.input_tensors is set without weight"},
  };
  for (const auto& c : cases) {
    json cfg = base_config();
    c.edit(cfg["global_quant_config"]);
    QuarkConfig q = QuarkConfig::parse(cfg.dump());  // specs are checked per layer
    std::string msg = error_of([&] { q.resolve(kDown3); });
    EXPECT_CONTAINS(msg, kDown3 + ":") << c.what;
    EXPECT_CONTAINS(msg, c.field) << c.what;
  }
  // A bad spec in a layer_quant_config entry names that entry.
  json cfg = base_config();
  cfg["layer_quant_config"] = {{"*.mlp.*", w4a4()}};
  cfg["layer_quant_config"]["*.mlp.*"]["weight"]["dtype"] = "int8";
  std::string msg = error_of([&] { QuarkConfig::parse(cfg.dump()).resolve(kDown3); });
  EXPECT_CONTAINS(msg, "layer_quant_config[\"*.mlp.*\"].weight.dtype is \"int8\"");
}

TEST(QuarkConfig, RefusesKvCacheSoftmaxAndNonLinearTypeQuantization) {
  json c = base_config();
  c["kv_cache_quant_config"] = {{"*k_proj", {{"output_tensors", mx_spec(true)}}}};
  EXPECT_CONTAINS(error_of([&] { QuarkConfig::parse(c.dump()); }), "kv_cache_quant_config");
  c = base_config();
  c["softmax_quant_spec"] = mx_spec(true);
  EXPECT_CONTAINS(error_of([&] { QuarkConfig::parse(c.dump()); }), "softmax_quant_spec");
  c = base_config();
  c["layer_type_quant_config"] = {{"Conv2d", w4a4()}};
  EXPECT_CONTAINS(error_of([&] { QuarkConfig::parse(c.dump()); }), "layer_type_quant_config[\"Conv2d\"]");
  c = base_config();
  c["exclude"] = {"re:model.(visual"};
  EXPECT_CONTAINS(error_of([&] { QuarkConfig::parse(c.dump()); }), "exclude[0]");
  EXPECT_CONTAINS(error_of([&] { QuarkConfig::parse("[1]"); }), "not an object");
}

// A copy of the MXFP4 fixture release with another quantization_config (big files linked).
std::string release_with_config(const json& quant, const std::string& name) {
  fs::path src = test::fixture("public/model-mxfp4");
  fs::path dst = fs::path(stave::test::temp_dir()) / name;
  fs::remove_all(dst);
  fs::create_directories(dst);
  for (const auto& e : fs::directory_iterator(src))
    if (e.path().filename() != "config.json") fs::create_symlink(e.path(), dst / e.path().filename());
  json cfg = json::parse(read_file((src / "config.json").string()));
  cfg["quantization_config"] = quant;
  std::ofstream(dst / "config.json") << cfg.dump(2);
  return dst.string();
}

TEST(QuarkConfig, CheckpointMismatchesNameTheTensor) {
  STAVE_REQUIRE_FIXTURE("public/model-mxfp4/config.json");
  json fixture_q = json::parse(read_file(test::fixture("public/model-mxfp4/config.json")))["quantization_config"];

  // The plan excludes a layer that the checkpoint stores as MXFP4.
  json q = fixture_q;
  q["exclude"].push_back(kDown3);
  auto r1 = open_release(release_with_config(q, "quant-cfg-excl"));
  std::string msg = error_of([&] { check_release_loadable(*r1); });
  EXPECT_CONTAINS(msg, kDown3 + ".weight is stored as U8");
  EXPECT_CONTAINS(msg, "exclude");

  // The plan quantizes lm_head, stored as BF16.
  q = fixture_q;
  q["exclude"].erase(0);  // "lm_head"
  auto r2 = open_release(release_with_config(q, "quant-cfg-lmhead"));
  msg = error_of([&] { check_release_loadable(*r2); });
  EXPECT_CONTAINS(msg, "lm_head.weight is stored as BF16");

  // The fixture's plan applied to the BF16 checkpoint.
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  auto bf16 = open_release(test::fixture("public/model-bf16"));
  auto plan = QuantPlan::from_config(QuarkConfig::parse(fixture_q.dump()), bf16->config);
  msg = error_of([&] { plan.check_against(bf16->weights); });
  EXPECT_CONTAINS(msg, "model.language_model.layers.");
  EXPECT_CONTAINS(msg, "is stored as BF16, but quantization_config (global_quant_config) quantizes it");

  // An unsupported spec refuses the release at load, naming the layer.
  q = fixture_q;
  q["global_quant_config"]["weight"]["dtype"] = "int4";
  auto r3 = open_release(release_with_config(q, "quant-cfg-int4"));
  msg = error_of([&] { check_release_loadable(*r3); });
  EXPECT_CONTAINS(msg, "model.language_model.layers.");
  EXPECT_CONTAINS(msg, "weight.dtype is \"int4\"");
}

TEST(QuarkConfig, BindLinearTakesInputQuantizationFromThePlan) {
  STAVE_REQUIRE_FIXTURE("public/model-mxfp4/config.json");
  auto release = open_release(test::fixture("public/model-mxfp4"));
  const int64_t H = release->config.text.hidden_size, I = release->config.text.intermediate_size;
  auto plan = QuantPlan::from_model_config(release->config);
  ASSERT_TRUE(plan);

  LinearWeight w = bind_linear(release->weights, kDown3, H, I, &*plan);
  EXPECT_EQ(w.format, WeightFormat::kMXFP4);
  EXPECT_TRUE(w.quantize_input);
  EXPECT_EQ(w.input_scale_mode, mxfp4::ScaleMode::kEven);
  LinearWeight head = bind_linear(release->weights, "lm_head", release->config.text.vocab_size, H, &*plan);
  EXPECT_EQ(head.format, WeightFormat::kBF16);
  EXPECT_FALSE(head.quantize_input);

  // No plan: the default (MXFP4 weights are W4A4).
  LinearWeight d = bind_linear(release->weights, kDown3, H, I, static_cast<const QuantPlan*>(nullptr));
  EXPECT_TRUE(d.quantize_input);

  // W4A16 and a floor input scale, from the config.
  json q = json::parse(read_file(test::fixture("public/model-mxfp4/config.json")))["quantization_config"];
  q["layer_quant_config"] = {{"*.mlp.down_proj", {{"weight", mx_spec(false)}, {"input_tensors", nullptr}}},
                             {"*.mlp.up_proj", w4a4("floor")}};
  auto plan2 = QuantPlan::from_config(QuarkConfig::parse(q.dump()), release->config);
  EXPECT_FALSE(bind_linear(release->weights, kDown3, H, I, &plan2).quantize_input);
  LinearWeight up = bind_linear(release->weights, "model.language_model.layers.3.mlp.up_proj", I, H, &plan2);
  EXPECT_TRUE(up.quantize_input);
  EXPECT_EQ(up.input_scale_mode, mxfp4::ScaleMode::kFloor);

  // The floor mode reaches the reference linear: x is MXFP4-QDQ'd with floor scales.
  std::vector<float> x(static_cast<size_t>(H));
  for (int64_t i = 0; i < H; ++i) x[i] = 0.37f * static_cast<float>(i % 7) - 1.1f;
  x[5] = 7.5f;  // even: scale 2 (7.5 -> 8 -> 4 x 2); floor: scale 1, 7.5 saturates to 6
  std::vector<float> y(static_cast<size_t>(I)), want(static_cast<size_t>(I)), xq(x.size()), wrow(x.size());
  ref::linear(up, x.data(), 1, y.data());
  mxfp4::qdq_row(x.data(), H, xq.data(), mxfp4::ScaleMode::kFloor);
  EXPECT_EQ(xq[5], 6.0f);
  for (int64_t n = 0; n < I; ++n) {
    ref::weight_row_f32(up, n, wrow.data());
    float acc = 0;
    for (int64_t k = 0; k < H; ++k) acc += xq[k] * wrow[k];
    want[n] = acc;
  }
  EXPECT_EQ(y, want);
}

}  // namespace
}  // namespace stave::quant
