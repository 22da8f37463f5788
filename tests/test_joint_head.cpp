// The fp32 joint schema head against the reference's logits (fixtures: hidden states the
// reference head read, its input ids, spans and fp32 logits), plus checks of its pieces.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>

#include <gtest/gtest.h>

#include "io/release.h"
#include "io/safetensors.h"
#include "model/head_lexical.h"
#include "model/joint_head.h"
#include "formats/tensor_names.h"
#include "ops/multihead_attention.h"
#include "formats/mxfp4.h"
#include "stave/errors.h"
#include "test_util.h"
#include "util/bf16.h"

namespace stave {
namespace {

namespace fs = std::filesystem;

std::vector<HeadQuestion> questions_from(const nlohmann::json& expected) {
  std::vector<HeadQuestion> out;
  for (const auto& q : expected.at("questions")) {
    HeadQuestion e;
    e.id = q.at("id").get<std::string>();
    e.type = q.at("type").get<int>();
    e.question_span = {q.at("question_span")[0].get<int64_t>(), q.at("question_span")[1].get<int64_t>()};
    for (const auto& s : q.at("option_spans")) e.option_spans.push_back({s[0].get<int64_t>(), s[1].get<int64_t>()});
    e.option_ids = q.at("option_ids").get<std::vector<std::string>>();
    out.push_back(std::move(e));
  }
  return out;
}

struct HiddenStates {
  std::vector<float> values;
  int64_t rows = 0, cols = 0;
};

HiddenStates read_hidden(const std::string& path) {
  SafetensorsFile f(path);
  const TensorRef* t = f.find("last_hidden_state");
  EXPECT_NE(t, nullptr) << path;
  HiddenStates h;
  if (!t) return h;
  EXPECT_EQ(t->dtype, DType::kF32);
  EXPECT_EQ(t->rank(), 2);
  h.rows = t->shape[0];
  h.cols = t->shape[1];
  h.values.resize(static_cast<size_t>(t->numel()));
  std::memcpy(h.values.data(), t->data, h.values.size() * sizeof(float));
  return h;
}

// Runs the head of `model` on every case that has logits; returns the max |Δlogit|.
double check_fixture_logits(const std::string& model, const std::string& variant) {
  auto release = open_release(test::fixture("public/" + model));
  const JointHead head(*release);
  double max_delta = 0.0;
  int cases = 0;
  for (const std::string& name : test::fixture_cases()) {
    const std::string dir = test::fixture("public/cases/" + name);
    const nlohmann::json expected = test::read_json(dir + "/expected-" + variant + ".json");
    if (!expected.contains("logits")) continue;
    SCOPED_TRACE(name + " (" + variant + ")");
    const HiddenStates hidden = read_hidden(dir + "/hidden-" + variant + ".safetensors");
    EXPECT_EQ(hidden.cols, release->head_config.hidden_size);
    const auto ids = expected.at("input_ids").get<std::vector<int32_t>>();
    const auto questions = questions_from(expected);
    const auto logits = head.forward(hidden.values.data(), hidden.rows, ids, questions);
    const auto& want = expected.at("logits");
    EXPECT_EQ(logits.size(), want.size());
    for (size_t i = 0; i < logits.size() && i < want.size(); ++i) {
      EXPECT_EQ(logits[i].size(), want[i].size()) << "question " << i;
      if (logits[i].size() != want[i].size()) continue;
      for (size_t j = 0; j < logits[i].size(); ++j) {
        const double d = std::fabs(static_cast<double>(logits[i][j]) - want[i][j].get<double>());
        max_delta = std::max(max_delta, d);
        EXPECT_LE(d, 1e-4) << "question " << questions[i].id << " option " << questions[i].option_ids[j];
      }
    }
    ++cases;
  }
  EXPECT_GE(cases, 19) << "expected every non-error public case (000-018) to have logits";
  std::cout << "[joint head " << variant << "] " << cases << " cases, max |dlogit| = " << max_delta << "\n";
  return max_delta;
}

TEST(JointHead, MatchesReferenceLogitsBf16) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/joint_head.safetensors");
  STAVE_REQUIRE_FIXTURE("public/cases/000-docs-example/hidden-bf16.safetensors");
  const double d = check_fixture_logits("model-bf16", "bf16");
  RecordProperty("max_abs_logit_delta", std::to_string(d));
}

TEST(JointHead, MatchesReferenceLogitsMxfp4) {
  STAVE_REQUIRE_FIXTURE("public/model-mxfp4/joint_head.safetensors");
  STAVE_REQUIRE_FIXTURE("public/cases/000-docs-example/hidden-mxfp4.safetensors");
  const double d = check_fixture_logits("model-mxfp4", "mxfp4");
  RecordProperty("max_abs_logit_delta", std::to_string(d));
}

// Shared by the validation tests: the bf16 fixture head and one case's inputs.
class JointHeadInputs : public ::testing::Test {
 protected:
  void SetUp() override {
    STAVE_REQUIRE_FIXTURE("public/cases/000-docs-example/hidden-bf16.safetensors");
    release_ = open_release(test::fixture("public/model-bf16"));
    head_ = std::make_unique<JointHead>(*release_);
    const std::string dir = test::fixture("public/cases/000-docs-example");
    const nlohmann::json expected = test::read_json(dir + "/expected-bf16.json");
    hidden_ = read_hidden(dir + "/hidden-bf16.safetensors");
    ids_ = expected.at("input_ids").get<std::vector<int32_t>>();
    questions_ = questions_from(expected);
  }
  std::string error_of(const std::vector<HeadQuestion>& questions, const std::vector<int32_t>& ids) {
    try {
      head_->forward(hidden_.values.data(), hidden_.rows, ids, questions);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidRequest) << e.what();
      return e.what();
    }
    return "";
  }
  std::unique_ptr<Release> release_;
  std::unique_ptr<JointHead> head_;
  HiddenStates hidden_;
  std::vector<int32_t> ids_;
  std::vector<HeadQuestion> questions_;
};

TEST_F(JointHeadInputs, RejectsBadSpansWithClearErrors) {
  auto q = questions_;
  q[1].option_spans[2] = {206, hidden_.rows + 1};
  EXPECT_NE(error_of(q, ids_).find("option technical span [206, " + std::to_string(hidden_.rows + 1) +
                                   ") is outside the sequence of 341 tokens"),
            std::string::npos);
  q = questions_;
  q[0].question_span = {71, 71};
  EXPECT_NE(error_of(q, ids_).find("question urgent: question span [71, 71) is empty"), std::string::npos);
  q = questions_;
  q[2].question_span = {-1, 4};
  EXPECT_NE(error_of(q, ids_).find("outside the sequence"), std::string::npos);
  q = questions_;
  q[1].option_spans.clear();
  q[1].option_ids.clear();
  EXPECT_NE(error_of(q, ids_).find("question team has no options"), std::string::npos);
  q = questions_;
  q[1].option_ids.pop_back();
  EXPECT_NE(error_of(q, ids_).find("3 option spans but 2 option ids"), std::string::npos);
  EXPECT_NE(error_of({}, ids_).find("no questions"), std::string::npos);
  auto short_ids = ids_;
  short_ids.pop_back();
  EXPECT_NE(error_of(questions_, short_ids).find("340 input ids for hidden states of 341 rows"), std::string::npos);
  auto bad_ids = ids_;
  bad_ids[90] = static_cast<int32_t>(release_->config.text.vocab_size);
  EXPECT_NE(error_of(questions_, bad_ids).find("outside the vocabulary"), std::string::npos);
}

// A head on a backend that reads host memory, given hidden states lent only in device memory:
// an internal error that says so, not a read of a device address on the host.
TEST_F(JointHeadInputs, RefusesDeviceOnlyHiddenStatesOnTheHost) {
  try {
    head_->forward(HiddenRows::on_device(hidden_.values.data()), hidden_.rows, ids_, questions_);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInternal);
    EXPECT_NE(std::string(e.what()).find("only in device memory"), std::string::npos) << e.what();
  }
  EXPECT_THROW(head_->forward(HiddenRows(), hidden_.rows, ids_, questions_), Error);
}

TEST_F(JointHeadInputs, QuestionsInteract) {
  // Field self-attention couples questions (spec §3.4): dropping one changes the others.
  const auto all = head_->forward(hidden_.values.data(), hidden_.rows, ids_, questions_);
  const std::vector<HeadQuestion> first_two(questions_.begin(), questions_.begin() + 2);
  const auto fewer = head_->forward(hidden_.values.data(), hidden_.rows, ids_, first_two);
  ASSERT_EQ(fewer.size(), 2u);
  EXPECT_NE(all[0], fewer[0]);
}

TEST(MultiheadAttention, OneKeyGivesOutProjOfItsValue) {
  // With a single key the softmax weight is 1 for every head, whatever the query:
  // out = out_proj(v·Wvᵀ + bv). Computed here independently of the module.
  const int64_t E = 6, heads = 3;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist;
  auto fill = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
  };
  const auto in_w = fill(3 * E * E), in_b = fill(3 * E), out_w = fill(E * E), out_b = fill(E);
  ref::MultiheadAttentionWeights w{E, heads, in_w.data(), in_b.data(), out_w.data(), out_b.data()};
  const auto query = fill(2 * E), key = fill(E), value = fill(E);
  std::vector<float> out(2 * E);
  ref::multihead_attention(w, query.data(), 2, key.data(), value.data(), 1, out.data());
  std::vector<double> v(E);
  for (int64_t r = 0; r < E; ++r) {
    v[r] = in_b[2 * E + r];
    for (int64_t c = 0; c < E; ++c) v[r] += double(in_w[(2 * E + r) * E + c]) * value[c];
  }
  for (int64_t m = 0; m < 2; ++m)
    for (int64_t r = 0; r < E; ++r) {
      double want = out_b[r];
      for (int64_t c = 0; c < E; ++c) want += double(out_w[r * E + c]) * v[c];
      EXPECT_NEAR(out[m * E + r], want, 1e-4);
    }
}

TEST(MultiheadAttention, TwoKeysMatchHandComputedSoftmax) {
  // E = 2, 2 heads of dim 1, identity projections without bias: head h attends with weights
  // softmax(q_h·k_jh) (scale 1/sqrt(1)) over the values' component h.
  const int64_t E = 2;
  std::vector<float> in_w(3 * E * E, 0.0f), in_b(3 * E, 0.0f), out_w(E * E, 0.0f), out_b(E, 0.0f);
  for (int b = 0; b < 3; ++b)
    for (int i = 0; i < E; ++i) in_w[(b * E + i) * E + i] = 1.0f;
  for (int i = 0; i < E; ++i) out_w[i * E + i] = 1.0f;
  ref::MultiheadAttentionWeights w{E, 2, in_w.data(), in_b.data(), out_w.data(), out_b.data()};
  const std::vector<float> q = {1.0f, -2.0f}, k = {0.5f, 1.0f, -1.0f, 3.0f}, v = {10.0f, 20.0f, 30.0f, 40.0f};
  std::vector<float> out(E);
  ref::multihead_attention(w, q.data(), 1, k.data(), v.data(), 2, out.data());
  // head 0: scores 0.5, -1 -> p0 = 1/(1+e^-1.5); head 1: scores -2, -6 -> p0 = 1/(1+e^-4)
  const double a = 1.0 / (1.0 + std::exp(-1.5)), b = 1.0 / (1.0 + std::exp(-4.0));
  EXPECT_NEAR(out[0], a * 10 + (1 - a) * 30, 1e-5);
  EXPECT_NEAR(out[1], b * 20 + (1 - b) * 40, 1e-5);
}

TEST(OutputEmbeddingTable, DequantizesMxfp4RowsExactly) {
  // A [vocab=5, dim=64] MXFP4 table: codes and E8M0 scale bytes chosen by hand; the expected
  // rows decode each nibble with the E2M1 table and 2^(byte-127).
  const int64_t vocab = 5, dim = 64;
  std::vector<uint8_t> codes(vocab * dim / 2), scales(vocab * dim / 32);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>((i * 37 + 11) & 0xff);
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = static_cast<uint8_t>(120 + (i * 3) % 15);
  auto expected_value = [&](int64_t row, int64_t col) {
    const uint8_t byte = codes[row * dim / 2 + col / 2];
    const int nibble = (col % 2 == 0) ? (byte & 0x0f) : (byte >> 4);
    const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    const double v = (nibble & 8) ? -mag[nibble & 7] : mag[nibble & 7];
    return v * std::ldexp(1.0, scales[row * dim / 32 + col / 32] - 127);
  };
  LinearWeight lw;
  lw.name = "lm_head";
  lw.out = vocab;
  lw.in = dim;
  lw.format = WeightFormat::kMXFP4;
  lw.data = codes.data();
  lw.scales = scales.data();
  const OutputEmbeddingTable table(lw);
  const std::vector<int32_t> ids = {3, 1, 3, 4};
  std::vector<float> mean(dim);
  table.mean_rows(ids.data(), static_cast<int64_t>(ids.size()), mean.data());
  for (int64_t c = 0; c < dim; ++c) {
    double want = 0.0;
    for (int32_t id : ids) want += expected_value(id, c);
    want /= ids.size();
    EXPECT_FLOAT_EQ(mean[c], static_cast<float>(want)) << "column " << c;
  }
  std::vector<float> one(dim);
  const int32_t bad = 5;
  EXPECT_THROW(table.mean_rows(&bad, 1, one.data()), Error);
}

TEST(OutputEmbeddingTable, ReadsBf16AndF16Rows) {
  const int64_t vocab = 3, dim = 4;
  const std::vector<float> values = {1.5f, -2.0f, 0.25f, 8.0f, 3.0f, 0.5f, -1.0f, 2.0f, 0.0f, 1.0f, 4.0f, -0.5f};
  std::vector<uint16_t> bf(values.size()), hf(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    bf[i] = f32_to_bf16(values[i]);
    hf[i] = f32_to_f16(values[i]);
  }
  for (auto [format, data] : {std::pair{WeightFormat::kBF16, static_cast<const void*>(bf.data())},
                              std::pair{WeightFormat::kF16, static_cast<const void*>(hf.data())},
                              std::pair{WeightFormat::kF32, static_cast<const void*>(values.data())}}) {
    LinearWeight lw;
    lw.out = vocab;
    lw.in = dim;
    lw.format = format;
    lw.data = data;
    const OutputEmbeddingTable table(lw);
    const std::vector<int32_t> ids = {2, 0};
    std::vector<float> mean(dim);
    table.mean_rows(ids.data(), 2, mean.data());
    for (int64_t c = 0; c < dim; ++c) EXPECT_EQ(mean[c], (values[8 + c] + values[c]) / 2) << c;
  }
}

// A synthetic head of other dimensions (width 48, 6 heads, 1 routing layer, 3 field layers,
// ffn 40) written to disk and loaded like a release's: nothing may assume the fixture's sizes.
TEST(JointHead, RunsAnyConfiguredShape) {
  JointHeadConfig c;
  c.hidden_size = 24;
  c.width = 48;
  c.routing_layers = 1;
  c.layers = 3;
  c.heads = 6;
  c.feedforward = 40;
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 0.2f);
  std::vector<std::vector<uint16_t>> storage;
  std::vector<TensorToWrite> tensors;
  for (const ExpectedTensor& t : expected_head_tensors(c)) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    std::vector<uint16_t> v(static_cast<size_t>(n));
    for (auto& x : v) x = f32_to_bf16(dist(rng));
    storage.push_back(std::move(v));
    tensors.push_back({t.name, DType::kBF16, t.shape, storage.back().data(), storage.back().size() * 2});
  }
  const fs::path dir = fs::temp_directory_path() / ("stave_head_shape_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  write_safetensors((dir / "joint_head.safetensors").string(), tensors);
  const TensorStore store = TensorStore::open_file((dir / "joint_head.safetensors").string());

  const int64_t vocab = 50, L = 30;
  std::vector<float> table(vocab * c.hidden_size), hidden(L * c.hidden_size);
  for (float& x : table) x = dist(rng);
  for (float& x : hidden) x = dist(rng) * 5;
  LinearWeight lw;
  lw.out = vocab;
  lw.in = c.hidden_size;
  lw.format = WeightFormat::kF32;
  lw.data = table.data();
  const JointHead head(c, store, OutputEmbeddingTable(lw));
  std::vector<int32_t> ids(L);
  for (int64_t i = 0; i < L; ++i) ids[i] = static_cast<int32_t>((i * 7) % vocab);
  std::vector<HeadQuestion> qs(2);
  qs[0] = {"a", 0, {2, 5}, {{6, 8}, {9, 12}}, {"true", "false"}};
  qs[1] = {"b", 2, {13, 14}, {{15, 17}, {18, 20}, {21, 29}}, {"0", "1", "2"}};
  const auto logits = head.forward(hidden.data(), L, ids, qs);
  ASSERT_EQ(logits.size(), 2u);
  EXPECT_EQ(logits[0].size(), 2u);
  EXPECT_EQ(logits[1].size(), 3u);
  for (const auto& q : logits)
    for (float x : q) EXPECT_TRUE(std::isfinite(x));

  // A mis-shaped tensor is named in the error.
  tensors[2].shape = {c.width, c.hidden_size + 1};
  std::vector<uint16_t> wider(static_cast<size_t>(c.width * (c.hidden_size + 1)), 0);
  tensors[2].data = wider.data();
  tensors[2].nbytes = wider.size() * 2;
  write_safetensors((dir / "bad.safetensors").string(), tensors);
  const TensorStore bad = TensorStore::open_file((dir / "bad.safetensors").string());
  try {
    JointHead broken(c, bad, OutputEmbeddingTable(lw));
    ADD_FAILURE() << "a mis-shaped head tensor was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(tensors[2].name + " has shape [48, 25], expected [48, 24]"), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace stave
