#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "io/checksums.h"
#include "io/release.h"
#include "model/model_check.h"
#include "stave/errors.h"
#include "test_util.h"

namespace stave {
namespace {
namespace fs = std::filesystem;

TEST(Release, OpensBf16Fixture) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  auto r = open_release(test::fixture("public/model-bf16"));
  EXPECT_EQ(r->config.model_type, "qwen3_5");
  EXPECT_EQ(r->config.text.hidden_size, 32);
  EXPECT_EQ(r->config.text.num_hidden_layers, 8);
  EXPECT_EQ(r->config.text.layer_types[3], LayerType::kFullAttention);
  EXPECT_EQ(r->config.text.layer_types[0], LayerType::kLinearAttention);
  EXPECT_EQ(r->config.text.rotary_dim(), 8);
  EXPECT_EQ(r->config.vision.depth, 2);
  EXPECT_EQ(r->head_config.width, 32);
  EXPECT_TRUE(r->image_processor.present);
  EXPECT_EQ(r->image_processor.max_pixels, 65536);
  EXPECT_TRUE(r->config.quantization_config_json.empty());
  EXPECT_NO_THROW(check_release_loadable(*r));
}

TEST(Release, OpensMxfp4FixtureWithQuantConfig) {
  STAVE_REQUIRE_FIXTURE("public/model-mxfp4/config.json");
  auto r = open_release(test::fixture("public/model-mxfp4"));
  EXPECT_NE(r->config.quantization_config_json.find("quark"), std::string::npos);
  EXPECT_NO_THROW(check_release_loadable(*r));
}

TEST(Release, FixtureChecksumsMatch) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/SHA256SUMS");
  for (auto& r : verify_sha256sums(test::fixture("public/model-bf16")))
    EXPECT_EQ(r.status, ChecksumResult::Status::kOk) << r.file;
}

TEST(ModelConfig, RejectsUnsupportedModelTypeByName) {
  try {
    parse_model_config(R"({"model_type":"llama"})", "config.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("\"llama\""), std::string::npos);
  }
}

TEST(ModelConfig, FullAttentionIntervalDerivesLayerTypes) {
  auto c = parse_model_config(R"({"model_type":"qwen3_5","text_config":{
    "hidden_size":64,"intermediate_size":96,"num_hidden_layers":8,"num_attention_heads":4,
    "num_key_value_heads":2,"head_dim":32,"linear_num_key_heads":2,"linear_num_value_heads":6,
    "linear_key_head_dim":16,"linear_value_head_dim":8,"vocab_size":512,"full_attention_interval":4,
    "rope_parameters":{"rope_type":"default","rope_theta":10000,"partial_rotary_factor":0.25,
    "mrope_section":[2,1,1],"mrope_interleaved":true}}})",
                              "c");
  ASSERT_EQ(c.text.layer_types.size(), 8u);
  EXPECT_EQ(c.text.layer_types[3], LayerType::kFullAttention);
  EXPECT_EQ(c.text.layer_types[7], LayerType::kFullAttention);
  EXPECT_EQ(c.text.layer_types[4], LayerType::kLinearAttention);
}

TEST(ModelConfig, RejectsBadMropeSection) {
  EXPECT_THROW(parse_model_config(R"({"model_type":"qwen3_5","text_config":{
    "hidden_size":64,"intermediate_size":96,"num_hidden_layers":4,"num_attention_heads":4,
    "num_key_value_heads":2,"head_dim":32,"linear_num_key_heads":2,"linear_num_value_heads":6,
    "linear_key_head_dim":16,"linear_value_head_dim":8,"vocab_size":512,
    "rope_parameters":{"partial_rotary_factor":0.25,"mrope_section":[3,1,1]}}})",
                                  "c"),
               Error);
}

TEST(Release, ResolvesRepoIdThroughHfCache) {
  fs::path home = fs::path(::testing::TempDir()) / "hfhome";
  fs::remove_all(home);
  fs::path repo = home / "hub" / "models--Org--Name";
  fs::create_directories(repo / "refs");
  fs::create_directories(repo / "snapshots" / "abc123");
  std::ofstream(repo / "refs" / "main") << "abc123\n";
  setenv("HF_HOME", home.c_str(), 1);
  EXPECT_EQ(resolve_model_path("Org/Name"), (repo / "snapshots" / "abc123").string());
  try {
    resolve_model_path("Org/Missing");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("download"), std::string::npos);
  }
  unsetenv("HF_HOME");
}

}  // namespace
}  // namespace stave
