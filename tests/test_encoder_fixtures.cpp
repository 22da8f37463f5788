// encode_request on every public fixture case with the release tokenizer: input ids, spans,
// option ids/order and types identical to the reference's expected-bf16.json; error cases give
// the reference's message.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "decide/encoder.h"
#include "decide/request.h"
#include "stave/errors.h"
#include "test_util.h"
#include "text/tokenizer.h"
#include "util/mapped_file.h"

namespace stave {
namespace {

const Tokenizer& release_tokenizer() {
  static std::unique_ptr<Tokenizer> tok = Tokenizer::from_file(test::fixture("public/model-bf16/tokenizer.json"));
  return *tok;
}

// The media segment as the reference produced it (ids cut from expected input_ids), standing in
// for the vision path, which is tested elsewhere.
class FixtureMedia : public MediaEncoder {
 public:
  explicit FixtureMedia(const nlohmann::json& expected) : expected_(expected) {}
  std::vector<int32_t> encode_media(const DecisionRequest& request, EncodedMedia* media) const override {
    const auto& m = expected_["media"];
    int64_t offset = m["token_offset"].get<int64_t>();
    auto types = m["mm_token_type_ids"].get<std::vector<int32_t>>();
    auto ids = expected_["input_ids"].get<std::vector<int32_t>>();
    for (const auto& thw : m["image_grid_thw"]) media->image_grid_thw.push_back({thw[0], thw[1], thw[2]});
    media->mm_token_type_ids = types;
    return std::vector<int32_t>(ids.begin() + offset, ids.begin() + offset + static_cast<int64_t>(types.size()));
  }

 private:
  const nlohmann::json& expected_;
};

// A case folder: "public/<name>" (the shared fixtures) or "alt/<name>" (tests/data/alt, the same
// Qwen3 tokenizer on the alt Clef, with extra requests).
std::string case_dir(const std::string& param) {
  if (param.rfind("alt/", 0) == 0) return std::string(STAVE_SOURCE_DIR) + "/tests/data/alt/cases/" + param.substr(4);
  return test::fixture("public/cases/" + param.substr(7));
}

std::vector<std::string> all_cases() {
  std::vector<std::string> out;
  for (const auto& name : test::fixture_cases()) out.push_back("public/" + name);
  std::filesystem::path alt = std::string(STAVE_SOURCE_DIR) + "/tests/data/alt/cases";
  std::vector<std::string> alt_names;
  if (std::filesystem::exists(alt))
    for (const auto& e : std::filesystem::directory_iterator(alt))
      if (e.is_directory()) alt_names.push_back(e.path().filename().string());
  std::sort(alt_names.begin(), alt_names.end());
  for (const auto& name : alt_names) out.push_back("alt/" + name);
  return out;
}

class EncoderFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(EncoderFixture, MatchesTheReference) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/tokenizer.json");
  const std::string dir = case_dir(GetParam());
  auto expected = test::read_json(dir + "/expected-bf16.json");
  std::string text = read_file(dir + "/request.json");
  EncodeOptions options;
  options.max_length = expected["max_length"].get<int64_t>();

  if (expected.contains("error")) {
    try {
      encode_request(parse_decision_request(text), release_tokenizer(), options);
      FAIL() << "expected the error: " << expected["error"];
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidRequest);
      EXPECT_EQ(std::string(e.what()), expected["error"].get<std::string>());
    }
    return;
  }

  DecisionRequest request = parse_decision_request(text);
  std::unique_ptr<FixtureMedia> media;
  if (!request.images.empty()) {
    ASSERT_TRUE(expected.contains("media"));
    try {
      encode_request(request, release_tokenizer(), options);
      FAIL() << "a request with images needs a media encoder";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
      EXPECT_NE(std::string(e.what()).find("images"), std::string::npos) << e.what();
    }
    media = std::make_unique<FixtureMedia>(expected);
  }
  EncodedRequest got = encode_request(request, release_tokenizer(), options, media.get());

  EXPECT_EQ(got.input_ids, expected["input_ids"].get<std::vector<int32_t>>());
  const auto& qs = expected["questions"];
  ASSERT_EQ(got.questions.size(), qs.size());
  for (size_t i = 0; i < qs.size(); ++i) {
    SCOPED_TRACE("question " + std::to_string(i));
    const auto& q = got.questions[i];
    EXPECT_EQ(q.id, qs[i]["id"].get<std::string>());
    EXPECT_EQ(static_cast<int>(q.type), qs[i]["type"].get<int>());
    EXPECT_EQ(q.question_span, (Span{qs[i]["question_span"][0], qs[i]["question_span"][1]}));
    std::vector<Span> spans;
    for (const auto& s : qs[i]["option_spans"]) spans.push_back({s[0], s[1]});
    EXPECT_EQ(q.option_spans, spans);
    EXPECT_EQ(q.option_ids, qs[i]["option_ids"].get<std::vector<std::string>>());
  }
  if (expected.contains("media")) {
    ASSERT_TRUE(got.media.has_value());
    EXPECT_EQ(got.media->token_offset, expected["media"]["token_offset"].get<int64_t>());
  }
  EXPECT_EQ(got.state_tokens + got.truncated_state_tokens > 0, true);
}

std::string case_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Cases, EncoderFixture, ::testing::ValuesIn(all_cases()), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(EncoderFixture);

}  // namespace
}  // namespace stave
