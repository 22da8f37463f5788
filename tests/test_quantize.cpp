// stave quantize as a library call: the BF16 fixture must become the MXFP4 fixture's tensors
// byte for byte (names, dtypes, shapes, data), a loadable release with valid SHA256SUMS.
#include <filesystem>
#include <fstream>
#include <functional>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_temp.h"
#include "io/checksums.h"
#include "io/release.h"
#include "io/tensor_store.h"
#include "model/model_check.h"
#include "quantize/quantize_release.h"
#include "formats/quark_config.h"
#include "stave/errors.h"
#include "test_errors.h"
#include "synth/synth_release.h"
#include "test_util.h"

namespace stave::quantize {
namespace {
namespace fs = std::filesystem;

std::string temp_out(const std::string& name) {
  fs::path p = fs::path(stave::test::temp_dir()) / ("stave-quantize-" + name);
  fs::remove_all(p);
  return p.string();
}

using test::error_of;
#define EXPECT_CONTAINS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

bool same_bytes(const TensorRef& a, const TensorRef& b) {
  return a.nbytes == b.nbytes && std::equal(a.data, a.data + a.nbytes, b.data);
}

// Every tensor of `want` is in `got` with the same dtype, shape and bytes, and nothing else is.
void expect_same_tensors(const TensorStore& got, const TensorStore& want) {
  EXPECT_EQ(got.names(), want.names());
  for (const auto& name : want.names()) {
    const TensorRef* g = got.find(name);
    ASSERT_NE(g, nullptr) << name;
    const TensorRef& w = want.get(name);
    EXPECT_EQ(g->dtype, w.dtype) << name;
    EXPECT_EQ(g->shape, w.shape) << name;
    EXPECT_TRUE(same_bytes(*g, w)) << name;
  }
}

void expect_verified(const std::string& dir) {
  for (const auto& r : verify_sha256sums(dir)) EXPECT_EQ(r.status, ChecksumResult::Status::kOk) << r.file;
  auto release = open_release(dir);
  EXPECT_NO_THROW(check_release_loadable(*release));
}

TEST(Quantize, Bf16FixtureBecomesTheMxfp4FixtureByteForByte) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  STAVE_REQUIRE_FIXTURE("public/model-mxfp4/config.json");
  QuantizeOptions o;
  o.in_dir = test::fixture("public/model-bf16");
  o.out_dir = temp_out("fixture");
  QuantizeSummary s = quantize_release(o);
  EXPECT_EQ(s.quantized.size(), 62u);
  EXPECT_EQ(s.excluded.size(), 11u);
  EXPECT_EQ(s.shards, 1);

  expect_same_tensors(TensorStore::open_checkpoint(o.out_dir),
                      TensorStore::open_checkpoint(test::fixture("public/model-mxfp4")));
  expect_verified(o.out_dir);

  // config.json: the fixture's, byte for byte (input key order kept, quantization_config appended).
  EXPECT_EQ(read_file(o.out_dir + "/config.json"), read_file(test::fixture("public/model-mxfp4/config.json")));
  // Every non-weight file copied unchanged.
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "processor_config.json", "chat_template.jinja",
                        "joint_head.safetensors", "joint_head_config.json"})
    EXPECT_EQ(read_file(o.out_dir + "/" + f), read_file(test::fixture(std::string("public/model-bf16/") + f))) << f;
  auto index = nlohmann::json::parse(read_file(o.out_dir + "/model.safetensors.index.json"));
  auto want_index = nlohmann::json::parse(read_file(test::fixture("public/model-mxfp4/model.safetensors.index.json")));
  EXPECT_EQ(index["metadata"]["total_size"], want_index["metadata"]["total_size"]);
}

TEST(Quantize, AltShapesQuantizeLikeTheAltReferenceRelease) {
  // The "alt" Clef (every dimension differs from the fixture's): its MXFP4 release is the Quark
  // emulation of the BF16 one (tests/data/alt/README.md); quantizing the BF16 one must give it.
  STAVE_REQUIRE_FIXTURE("public/model-bf16/tokenizer.json");
  std::string bf16 = temp_out("alt-bf16"), mx = temp_out("alt-mxfp4");
  for (const auto& [dir, format] : {std::pair{bf16, "bf16"}, std::pair{mx, "mxfp4"}}) {
    synth::SynthOptions so;
    so.preset = "alt";
    so.seed = 1;
    so.format = format;
    so.out = dir;
    so.tokenizer = test::fixture("public/model-bf16/tokenizer.json");
    synth::synth_release(so);
  }
  QuantizeOptions o;
  o.in_dir = bf16;
  o.out_dir = temp_out("alt");
  quantize_release(o);
  expect_same_tensors(TensorStore::open_checkpoint(o.out_dir), TensorStore::open_checkpoint(mx));
  expect_verified(o.out_dir);
}

TEST(Quantize, ReshardsBySizeKeepingDtypesAndAlignment) {
  STAVE_REQUIRE_FIXTURE("public/model-mxfp4/config.json");
  QuantizeOptions o;
  o.in_dir = test::fixture("public/model-bf16");
  o.out_dir = temp_out("shards");
  o.shard_bytes = 100'000;  // embed_tokens and lm_head (9.7 MB each) get shards of their own
  QuantizeSummary s = quantize_release(o);
  EXPECT_GT(s.shards, 3);
  TensorStore got = TensorStore::open_checkpoint(o.out_dir);
  EXPECT_EQ(static_cast<int>(got.files().size()), s.shards);
  expect_same_tensors(got, TensorStore::open_checkpoint(test::fixture("public/model-mxfp4")));
  expect_verified(o.out_dir);
  for (const auto& name : got.names()) {
    const TensorRef& t = got.get(name);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % dtype_size(t.dtype), 0u) << name << " is misaligned";
  }
  EXPECT_EQ(got.get("model.language_model.layers.0.linear_attn.A_log").dtype, DType::kF32);
  // Shards hold at most shard_bytes unless one tensor (pair) alone is larger.
  for (const auto& f : got.files()) {
    SafetensorsFile sf(f);
    uint64_t n = 0;
    for (const auto& t : sf.tensors()) n += t.nbytes;
    if (sf.tensors().size() > 2) {
      EXPECT_LE(n, o.shard_bytes) << f;
    }
  }
  auto index = nlohmann::json::parse(read_file(o.out_dir + "/model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), got.total_bytes());
}

TEST(Quantize, ExcludedLinearsStayBf16AndAreListedByName) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  QuantizeOptions o;
  o.in_dir = test::fixture("public/model-bf16");
  o.out_dir = temp_out("exclude");
  o.exclude = {"re:model\\.language_model\\.layers\\.0\\.mlp\\.", "model.language_model.layers.3.self_attn.o_proj"};
  QuantizeSummary s = quantize_release(o);
  EXPECT_EQ(s.quantized.size(), 62u - 4u);
  TensorStore bf16 = TensorStore::open_checkpoint(test::fixture("public/model-bf16"));
  TensorStore got = TensorStore::open_checkpoint(o.out_dir);
  for (const char* l : {"model.language_model.layers.0.mlp.gate_proj", "model.language_model.layers.0.mlp.up_proj",
                        "model.language_model.layers.0.mlp.down_proj", "model.language_model.layers.3.self_attn.o_proj"}) {
    std::string w = std::string(l) + ".weight";
    EXPECT_EQ(got.get(w).dtype, DType::kBF16) << l;
    EXPECT_TRUE(same_bytes(got.get(w), bf16.get(w))) << l;
    EXPECT_FALSE(got.contains(std::string(l) + ".weight_scale")) << l;
  }
  EXPECT_EQ(got.get("model.language_model.layers.1.mlp.down_proj.weight").dtype, DType::kU8);
  auto cfg = nlohmann::json::parse(read_file(o.out_dir + "/config.json"));
  auto exclude = cfg["quantization_config"]["exclude"].get<std::vector<std::string>>();
  EXPECT_TRUE(std::is_sorted(exclude.begin(), exclude.end()));
  EXPECT_EQ(exclude.size(), 11u + 4u);
  EXPECT_NE(std::find(exclude.begin(), exclude.end(), "model.language_model.layers.3.self_attn.o_proj"), exclude.end());
  // The plan read back from the written config agrees with what was written.
  expect_verified(o.out_dir);
}

TEST(Quantize, RefusesBadExcludesOutputsAndInputs) {
  STAVE_REQUIRE_FIXTURE("public/model-mxfp4/config.json");
  QuantizeOptions o;
  o.in_dir = test::fixture("public/model-bf16");
  o.out_dir = temp_out("refusals");
  o.exclude = {"model.language_model.layers.3.self_attn.q_proj"};
  EXPECT_CONTAINS(error_of([&] { quantize_release(o); }), "q/k/v_proj");
  o.exclude = {"model.language_model.layers.0.mlp.gate_proj"};
  EXPECT_CONTAINS(error_of([&] { quantize_release(o); }), "gate/up_proj");
  o.exclude = {"model.language_model.layers.0.mlp.nothing"};
  EXPECT_CONTAINS(error_of([&] { quantize_release(o); }), "matches no linear");
  o.exclude = {"re:model.(x"};
  EXPECT_CONTAINS(error_of([&] { quantize_release(o); }), "does not compile");
  o.exclude = {};
  EXPECT_FALSE(fs::exists(o.out_dir));  // nothing written on refusal

  fs::create_directories(o.out_dir);
  std::ofstream(o.out_dir + "/stray") << "x";
  EXPECT_CONTAINS(error_of([&] { quantize_release(o); }), "is not empty");
  fs::remove_all(o.out_dir);

  o.in_dir = test::fixture("public/model-mxfp4");
  EXPECT_CONTAINS(error_of([&] { quantize_release(o); }), "already has a quantization_config");
}

TEST(Quantize, FloorScaleModeIsWrittenAndReadBack) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  QuantizeOptions o;
  o.in_dir = test::fixture("public/model-bf16");
  o.out_dir = temp_out("floor");
  o.scale_mode = mxfp4::ScaleMode::kFloor;
  quantize_release(o);
  auto release = open_release(o.out_dir);
  auto plan = quant::QuantPlan::from_model_config(release->config);
  ASSERT_TRUE(plan);
  const auto& q = plan->at("model.language_model.layers.2.mlp.up_proj");
  EXPECT_EQ(q.weight_scale_mode, mxfp4::ScaleMode::kFloor);
  EXPECT_EQ(q.input_scale_mode, mxfp4::ScaleMode::kFloor);
  // Floor scales (OCP) are never above "even" ones, and differ somewhere on real weights.
  TensorStore even = TensorStore::open_checkpoint(test::fixture("public/model-mxfp4"));
  int lower = 0;
  for (const auto& n : release->weights.names()) {
    if (n.size() < 13 || n.compare(n.size() - 13, 13, ".weight_scale") != 0) continue;
    const TensorRef& f = release->weights.get(n);
    const TensorRef& e = even.get(n);
    for (size_t i = 0; i < f.nbytes; ++i) {
      if (e.data[i] == 1) continue;  // an all-zero block: floor uses eps 2^-23, even 2^-127 (byte 1)
      EXPECT_LE(f.data[i], e.data[i]) << n;
      lower += f.data[i] < e.data[i];
    }
  }
  EXPECT_GT(lower, 0);
}

TEST(Quantize, ParsesByteSizes) {
  EXPECT_EQ(parse_byte_size("5GB"), 5'000'000'000ull);
  EXPECT_EQ(parse_byte_size("500mb"), 500'000'000ull);
  EXPECT_EQ(parse_byte_size("2GiB"), 2ull << 30);
  EXPECT_EQ(parse_byte_size("4096"), 4096ull);
  EXPECT_EQ(parse_byte_size("10kB"), 10'000ull);
  EXPECT_CONTAINS(error_of([] { parse_byte_size("5 parsecs"); }), "unknown unit");
  EXPECT_CONTAINS(error_of([] { parse_byte_size("GB"); }), "not a number");
  EXPECT_CONTAINS(error_of([] { parse_byte_size("0"); }), "positive");
}

}  // namespace
}  // namespace stave::quantize
