// The text backbone against the reference fixtures, and properties that need no reference: the
// chunk size of the layer-major pass, explicit arange positions and embedding overrides.
//
// How close the fixtures can be matched (measured; docs/numerics.md has the table and the why):
//  - The exact path follows the reference's own fp32 operation order (torch 2.11 CPU: MKL sgemm
//    FMA chains, ATen's cascade sums, torch's chunked gated delta rule with MKL's triangular
//    solve, SLEEF's exp in the vectorized sigmoid/silu). Every linear, RMSNorm and gated RMSNorm
//    is bit-identical to the reference; torch.exp (GDN decays, softplus) and the vision tower
//    still differ in ~1% of elements by one ulp.
//  - MXFP4 model: bit-identical hidden states (|Δ| = 0) on every case of both models: the
//    activation quantizer snaps the remaining ulps away before they reach an MXFP4 tie.
//  - BF16 model: its random GDN heads often produce outputs hundreds of times smaller than the
//    terms they are summed from, and the per-head gated RMSNorm scales them back up, so the one-ulp
//    differences left grow ~100x through the 8 layers (public model: max 9.8e-4 over whole
//    sequences, logits ≤ 7e-5; the alt model stays ≤ 6.3e-5 everywhere). On the public model
//    short prefixes (before the noise has grown) are held to 1e-4, whole sequences to the
//    measured noise floor.

#include <gtest/gtest.h>

#include "io/release.h"
#include "io/safetensors.h"
#include "model/backbone.h"
#include "ops/backend.h"
#include "stave/errors.h"
#include "synth/synth_release.h"
#include "test_util.h"

namespace stave {
namespace {

struct TextCase {
  std::string name;
  std::vector<int32_t> ids;
  std::vector<float> hidden;  // [L, H]
};

// Text-only cases of a cases folder: expected-<variant>.json has input_ids and no media (image
// and error cases skip).
std::vector<TextCase> text_cases(const std::string& cases_dir, const std::string& variant) {
  std::vector<TextCase> out;
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(cases_dir))
    if (e.is_directory()) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::string dir = cases_dir + "/" + name;
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

// max |Δ| over positions [begin, end) of two [L, H] arrays.
float max_abs_diff_rows(const std::vector<float>& a, const std::vector<float>& b, int64_t H, int64_t begin,
                        int64_t end) {
  float m = 0.0f;
  for (int64_t i = begin * H; i < end * H; ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

struct FixtureBounds {
  float prefix_tolerance;            // positions [0, prefix) (all of them when prefix < 0)
  int64_t prefix;
  float whole_tolerance;             // every position (checked when > 0)
};

void check_model(const std::string& label, const std::string& model_dir, const std::string& cases_dir,
                 const std::string& variant, const std::function<FixtureBounds(const std::string&)>& bounds) {
  auto release = open_release(model_dir);
  Backbone backbone(*release, reference_backend());
  const int64_t H = backbone.hidden_size();
  const auto cases = text_cases(cases_dir, variant);
  ASSERT_GE(cases.size(), 15u);
  float worst = 0.0f;
  for (const TextCase& c : cases) {
    SCOPED_TRACE(c.name);
    const int64_t L = static_cast<int64_t>(c.ids.size());
    ASSERT_EQ(c.hidden.size(), static_cast<size_t>(L * H));
    const std::vector<float> h = backbone.forward(c.ids);
    ASSERT_EQ(h.size(), c.hidden.size());
    const FixtureBounds b = bounds(c.name);
    const int64_t prefix = b.prefix < 0 ? L : std::min(b.prefix, L);
    const float d_prefix = max_abs_diff_rows(h, c.hidden, H, 0, prefix);
    const float d_all = max_abs_diff(h, c.hidden);
    int64_t first_over = -1;  // first position over 1e-4, for the log
    for (int64_t t = 0; t < L && first_over < 0; ++t)
      if (max_abs_diff_rows(h, c.hidden, H, t, t + 1) > 1e-4f) first_over = t;
    worst = std::max(worst, d_all);
    EXPECT_LE(d_prefix, b.prefix_tolerance) << "positions [0, " << prefix << ") of " << L;
    if (b.whole_tolerance > 0) {
      EXPECT_LE(d_all, b.whole_tolerance) << L << " tokens";
    }
    std::printf("[ backbone ] %s %-36s L=%5lld  max |Δ| %.3g (first %lld: %.3g; > 1e-4 from %lld)\n", label.c_str(),
                c.name.c_str(), static_cast<long long>(L), d_all, static_cast<long long>(prefix), d_prefix,
                static_cast<long long>(first_over));
  }
  std::printf("[ backbone ] %s: %zu cases, max |Δ| = %.3g\n", label.c_str(), cases.size(), worst);
}

void check_fixture_model(const std::string& variant, const std::function<FixtureBounds(const std::string&)>& bounds) {
  check_model(variant, test::fixture("public/model-" + variant), test::fixture("public/cases"), variant, bounds);
}

std::string synth_alt(const std::string& format) { return test::synth_alt_release(format, "backbone"); }

TEST(Backbone, MatchesBf16FixtureHiddenStates) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  // Observed: 0 (bit-identical) over whole sequences on 11 of 17 cases, ≤ 7.9e-5 on the rest,
  // since the RoPE tables follow MKL VML's cos/sin kernels and the softmax exp and softplus'
  // log1pf follow SLEEF (docs/numerics.md). Every case is held to the 1e-4.
  check_fixture_model("bf16", [](const std::string&) { return FixtureBounds{1e-4f, 32, 1e-4f}; });
}

TEST(Backbone, MatchesAltReferenceHiddenStates) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/tokenizer.json");
  const std::string cases = std::string(STAVE_SOURCE_DIR) + "/tests/data/alt/cases";
  // Observed ≤ 7.5e-5 on every case: held to 1e-4 over whole sequences.
  check_model("alt-bf16", synth_alt("bf16"), cases, "bf16",
              [](const std::string&) { return FixtureBounds{1e-4f, -1, 0.0f}; });
  // Bit-identical on every case (observed |Δ| = 0); held to 1e-4 over whole sequences.
  check_model("alt-mxfp4", synth_alt("mxfp4"), cases, "mxfp4",
              [](const std::string&) { return FixtureBounds{1e-4f, -1, 0.0f}; });
}

TEST(Backbone, MatchesMxfp4FixtureHiddenStates) {
  STAVE_REQUIRE_FIXTURE("public/model-mxfp4/config.json");
  // Every case, whole sequences, to 1e-4 (observed: bit-identical).
  check_fixture_model("mxfp4", [](const std::string&) { return FixtureBounds{1e-4f, -1, 0.0f}; });
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
  // 200 tokens: several GDN chunks of 64; chunk 1 is the per-token (decode-like) path. The
  // results differ only by rounding (other chunk boundaries round differently, amplified by this
  // model as explained above: observed ≤ 1e-3); a state not carried across chunks would differ
  // by O(1).
  const auto ids = some_ids(200, release->config.text.vocab_size);
  const std::vector<float> whole = Backbone(*release, reference_backend(), {1024}).forward(ids);
  for (int64_t chunk : {128, 64, 100, 37, 1}) {
    SCOPED_TRACE(chunk);
    const std::vector<float> h = Backbone(*release, reference_backend(), {chunk}).forward(ids);
    EXPECT_LE(max_abs_diff(h, whole), 5e-3f);
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

// Layer by layer, each layer leaves its MLP output for the next layer's first op to add
// (DecoderLayer::Carry): stepping equals forward() bit for bit, and a sequence whose last
// residual is still pending, or layers run out of order, are refused instead of giving hidden
// states without it.
TEST(Backbone, SteppedLayersHandTheirResidualOver) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  auto release = open_release(test::fixture("public/model-bf16"));
  Backbone backbone(*release, reference_backend());
  ASSERT_GE(backbone.num_layers(), 2);
  const auto ids = some_ids(40, release->config.text.vocab_size);
  Backbone::Sequence seq = backbone.start(ids);
  for (int64_t l = 0; l < backbone.num_layers(); ++l) backbone.run_layer(l, seq);
  EXPECT_EQ(backbone.finish(seq), backbone.forward(ids));

  Backbone::Sequence partial = backbone.start(ids);
  backbone.run_layer(0, partial);
  EXPECT_THROW(backbone.finish(partial), Error);
  Backbone::Sequence again = backbone.start(ids);
  backbone.run_layer(0, again);
  EXPECT_THROW(backbone.run_layer(0, again), Error);  // layer 1 holds the residual
}

}  // namespace
}  // namespace stave
