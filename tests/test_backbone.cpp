// The text backbone against the reference fixtures: for every text-only public case, the
// final-normed hidden states of the BF16 and MXFP4 fixture models must match the reference's
// `last_hidden_state` (fp32) to 1e-4. Plus properties that need no reference: the chunk size
// of the layer-major pass, explicit arange positions and embedding overrides change nothing.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "io/release.h"
#include "io/safetensors.h"
#include "model/backbone.h"
#include "ops/backend.h"
#include "stave/errors.h"
#include "test_util.h"

namespace stave {
namespace {

struct TextCase {
  std::string name;
  std::vector<int32_t> ids;
  std::vector<float> hidden;  // [L, H]
};

// Text-only cases: expected-<variant>.json has input_ids and no media (image and error cases skip).
std::vector<TextCase> text_cases(const std::string& variant) {
  std::vector<TextCase> out;
  for (const std::string& name : test::fixture_cases()) {
    const std::string dir = test::fixture("public/cases/" + name);
    const auto expected = test::read_json(dir + "/expected-" + variant + ".json");
    if (!expected.contains("input_ids") || expected.contains("media")) continue;
    TextCase c;
    c.name = name;
    for (const auto& v : expected["input_ids"]) c.ids.push_back(v.get<int32_t>());
    SafetensorsFile f(dir + "/hidden-" + variant + ".safetensors");
    const TensorRef* t = f.find("last_hidden_state");
    if (t == nullptr || t->dtype != DType::kF32) throw std::runtime_error(name + ": no F32 last_hidden_state");
    c.hidden.resize(static_cast<size_t>(t->numel()));
    std::memcpy(c.hidden.data(), t->data, c.hidden.size() * sizeof(float));
    out.push_back(std::move(c));
  }
  return out;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

void check_fixture_model(const std::string& variant) {
  auto release = open_release(test::fixture("public/model-" + variant));
  Backbone backbone(*release, reference_backend());
  const int64_t H = backbone.hidden_size();
  const auto cases = text_cases(variant);
  ASSERT_GE(cases.size(), 15u);
  float worst = 0.0f;
  for (const TextCase& c : cases) {
    SCOPED_TRACE(c.name);
    ASSERT_EQ(c.hidden.size(), c.ids.size() * static_cast<size_t>(H));
    const std::vector<float> h = backbone.forward(c.ids);
    ASSERT_EQ(h.size(), c.hidden.size());
    const float d = max_abs_diff(h, c.hidden);
    worst = std::max(worst, d);
    EXPECT_LE(d, 1e-4f) << c.ids.size() << " tokens";
  }
  std::printf("[ backbone ] %s: %zu cases, max |Δ| = %.3g\n", variant.c_str(), cases.size(), worst);
}

TEST(Backbone, MatchesBf16FixtureHiddenStates) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  check_fixture_model("bf16");
}

TEST(Backbone, MatchesMxfp4FixtureHiddenStates) {
  STAVE_REQUIRE_FIXTURE("public/model-mxfp4/config.json");
  check_fixture_model("mxfp4");
}

// A fixed pseudo-random token sequence of n ids below `vocab`.
std::vector<int32_t> some_ids(int64_t n, int64_t vocab) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  uint32_t s = 12345;
  for (auto& id : ids) {
    s = s * 1664525u + 1013904223u;
    id = static_cast<int32_t>((s >> 8) % static_cast<uint32_t>(vocab));
  }
  return ids;
}

TEST(Backbone, ChunkSizeDoesNotChangeTheResult) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  auto release = open_release(test::fixture("public/model-bf16"));
  const auto ids = some_ids(300, release->config.text.vocab_size);
  const std::vector<float> whole = Backbone(*release, reference_backend(), {1024}).forward(ids);
  for (int64_t chunk : {256, 64, 100, 37, 1}) {
    SCOPED_TRACE(chunk);
    const std::vector<float> h = Backbone(*release, reference_backend(), {chunk}).forward(ids);
    EXPECT_LE(max_abs_diff(h, whole), 2e-5f);
  }
}

TEST(Backbone, ExplicitTextPositionsEqualTheDefault) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  auto release = open_release(test::fixture("public/model-bf16"));
  Backbone backbone(*release, reference_backend(), {64});
  const auto ids = some_ids(150, release->config.text.vocab_size);
  std::vector<int32_t> pos(3 * ids.size());
  for (size_t r = 0; r < 3; ++r)
    for (size_t t = 0; t < ids.size(); ++t) pos[r * ids.size() + t] = static_cast<int32_t>(t);
  EXPECT_EQ(backbone.forward(ids, pos), backbone.forward(ids));
  // Non-trivial H/W rows must change the output (they feed the full-attention layers).
  for (size_t t = 50; t < 60; ++t) pos[ids.size() + t] += 3;
  EXPECT_GT(max_abs_diff(backbone.forward(ids, pos), backbone.forward(ids)), 1e-4f);
}

TEST(Backbone, EmbeddingOverrideActsLikeThatRowsToken) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  auto release = open_release(test::fixture("public/model-bf16"));
  Backbone backbone(*release, reference_backend());
  const int64_t H = backbone.hidden_size();
  auto ids = some_ids(90, release->config.text.vocab_size);
  // Take the embedding rows of tokens 7 and 8 from the table, place them at positions 20 and 70.
  const TensorRef& table = release->weights.get("model.language_model.embed_tokens.weight");
  ASSERT_EQ(table.dtype, DType::kBF16);
  std::vector<float> rows(2 * H);
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t i = 0; i < H; ++i) {
      uint16_t b;
      std::memcpy(&b, table.data + ((7 + r) * H + i) * 2, 2);
      const uint32_t bits = static_cast<uint32_t>(b) << 16;
      std::memcpy(&rows[r * H + i], &bits, 4);
    }
  const EmbeddingOverride overrides[] = {{20, rows.data()}, {70, rows.data() + H}};
  const std::vector<float> with_overrides = backbone.forward(ids, {}, overrides);
  ids[20] = 7;
  ids[70] = 8;
  EXPECT_EQ(with_overrides, backbone.forward(ids));
}

TEST(Backbone, RejectsTokenIdsOutsideTheVocabulary) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  auto release = open_release(test::fixture("public/model-bf16"));
  Backbone backbone(*release, reference_backend());
  const std::vector<int32_t> bad{1, 2, static_cast<int32_t>(release->config.text.vocab_size)};
  EXPECT_THROW(backbone.forward(bad), Error);
  const std::vector<int32_t> negative{-1};
  EXPECT_THROW(backbone.forward(negative), Error);
  EXPECT_TRUE(backbone.forward(std::vector<int32_t>{}).empty());
}

}  // namespace
}  // namespace stave
