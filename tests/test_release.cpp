#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "test_temp.h"
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

// A fake Hugging Face cache in the test's temp dir, laid out as huggingface_hub writes it.
class HfCache : public ::testing::Test {
 protected:
  static constexpr const char* kMain = "0123456789abcdef0123456789abcdef01234567";
  static constexpr const char* kDev = "89abcdef0123456789abcdef0123456789abcdef";
  static constexpr const char* kOld = "fedcba9876543210fedcba9876543210fedcba98";
  void SetUp() override {
    for (const char* v : {"HF_HOME", "HF_HUB_CACHE", "XDG_CACHE_HOME"})
      if (const char* old = std::getenv(v)) saved_.emplace_back(v, old);
    for (const char* v : {"HF_HOME", "HF_HUB_CACHE", "XDG_CACHE_HOME"}) unsetenv(v);
    root_ = fs::path(stave::test::temp_dir()) / "stave-hf-cache";
    fs::remove_all(root_);
  }
  void TearDown() override {
    for (const char* v : {"HF_HOME", "HF_HUB_CACHE", "XDG_CACHE_HOME"}) unsetenv(v);
    for (const auto& [k, v] : saved_) setenv(k.c_str(), v.c_str(), 1);
    fs::remove_all(root_);
  }
  // hub/models--Org--Name with refs main and pr/1 -> snapshots, and one snapshot no ref names.
  fs::path make_repo(const fs::path& hub) {
    fs::path repo = hub / "models--Org--Name";
    fs::create_directories(repo / "refs" / "pr");
    for (const char* c : {kMain, kDev, kOld}) fs::create_directories(repo / "snapshots" / c);
    std::ofstream(repo / "refs" / "main") << kMain;  // huggingface_hub writes no newline
    std::ofstream(repo / "refs" / "pr" / "1") << kDev << "\n";
    std::ofstream(repo / "refs" / "v1.0") << kOld;
    return repo;
  }
  static std::string error_of(const std::string& model, const std::string& revision = "") {
    try {
      resolve_model_path(model, revision);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  fs::path root_;
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST_F(HfCache, HfHomeAndRevisions) {
  fs::path repo = make_repo(root_ / "home" / "hub");
  setenv("HF_HOME", (root_ / "home").c_str(), 1);
  EXPECT_EQ(resolve_model_path("Org/Name"), (repo / "snapshots" / kMain).string());
  EXPECT_EQ(resolve_model_path("Org/Name", "main"), (repo / "snapshots" / kMain).string());
  EXPECT_EQ(resolve_model_path("Org/Name", "pr/1"), (repo / "snapshots" / kDev).string());  // a branch under refs/
  EXPECT_EQ(resolve_model_path("Org/Name", "v1.0"), (repo / "snapshots" / kOld).string());  // a tag
  EXPECT_EQ(resolve_model_path("Org/Name", kOld), (repo / "snapshots" / kOld).string());    // a commit hash
}

TEST_F(HfCache, HubCacheWinsOverHfHome) {
  fs::path repo = make_repo(root_ / "elsewhere");
  make_repo(root_ / "home" / "hub");
  fs::remove_all(root_ / "home" / "hub" / "models--Org--Name" / "snapshots" / kMain);
  setenv("HF_HOME", (root_ / "home").c_str(), 1);
  setenv("HF_HUB_CACHE", (root_ / "elsewhere").c_str(), 1);
  EXPECT_EQ(resolve_model_path("Org/Name"), (repo / "snapshots" / kMain).string());
  unsetenv("HF_HUB_CACHE");
  EXPECT_NE(error_of("Org/Name").find("has no snapshot " + std::string(kMain)), std::string::npos);
}

TEST_F(HfCache, XdgCacheHome) {
  fs::path repo = make_repo(root_ / "xdg" / "huggingface" / "hub");
  setenv("XDG_CACHE_HOME", (root_ / "xdg").c_str(), 1);
  EXPECT_EQ(resolve_model_path("Org/Name"), (repo / "snapshots" / kMain).string());
}

TEST_F(HfCache, MissingNamesTheDownloadCommand) {
  make_repo(root_ / "home" / "hub");
  setenv("HF_HOME", (root_ / "home").c_str(), 1);
  const std::string missing = error_of("Org/Missing");
  EXPECT_NE(missing.find("is not in the Hugging Face cache"), std::string::npos) << missing;
  EXPECT_NE(missing.find("`huggingface-cli download Org/Missing`"), std::string::npos) << missing;
  const std::string branch = error_of("Org/Name", "dev");
  EXPECT_NE(branch.find("no revision dev"), std::string::npos) << branch;
  EXPECT_NE(branch.find("`huggingface-cli download Org/Name --revision dev`"), std::string::npos) << branch;
  const std::string hash = error_of("Org/Name", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
  EXPECT_NE(hash.find("no snapshot aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"), std::string::npos) << hash;
  EXPECT_NE(hash.find("--revision aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa`"), std::string::npos) << hash;
}

TEST_F(HfCache, RefusesBadRevisionsAndRefs) {
  fs::path repo = make_repo(root_ / "home" / "hub");
  setenv("HF_HOME", (root_ / "home").c_str(), 1);
  EXPECT_NE(error_of("Org/Name", "../../x").find("is not a branch, tag or commit hash"), std::string::npos);
  EXPECT_NE(error_of("Org/Name", "/etc").find("is not a branch, tag or commit hash"), std::string::npos);
  std::ofstream(repo / "refs" / "main", std::ios::trunc) << "../../../etc\n";
  EXPECT_NE(error_of("Org/Name").find("does not hold a commit hash"), std::string::npos);
  // A folder is a folder: a revision does not apply to it.
  EXPECT_NE(error_of(root_.string(), "main").find("applies to a Hugging Face repo id"), std::string::npos);
}

}  // namespace
}  // namespace stave
