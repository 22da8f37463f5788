// The public request API (include/stave/request.h) and the Engine entry points that take it:
// parse / validate through public types only, the question summary in request order, errors
// with every issue, the JSON limits, Engine::encode against the reference's encode_record, and
// decide(Request) against decide(text).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stave/stave.h"
#include "test_util.h"
#include "util/mapped_file.h"

namespace stave {
namespace {

std::string docs_example() { return read_file(test::fixture("public/cases/000-docs-example") + "/request.json"); }

TEST(PublicRequest, ParseKeepsTheQuestionsInRequestOrder) {
  STAVE_REQUIRE_FIXTURE("public/cases");
  const Request r = Request::parse(docs_example());
  EXPECT_EQ(r.model(), "clef");
  EXPECT_EQ(r.image_count(), 0u);
  const std::vector<RequestQuestion> q = r.questions();
  ASSERT_EQ(q.size(), 3u);
  EXPECT_EQ(q[0].id, "urgent");
  EXPECT_EQ(q[0].type, "noul");
  EXPECT_EQ(q[0].option_ids, (std::vector<std::string>{"true", "false"}));
  EXPECT_EQ(q[1].id, "team");
  EXPECT_EQ(q[1].type, "choice");
  // As the request lists them (the head scores them sorted: billing, sales, technical).
  EXPECT_EQ(q[1].option_ids, (std::vector<std::string>{"billing", "technical", "sales"}));
  EXPECT_EQ(q[2].type, "score");
  EXPECT_EQ(q[2].option_ids, (std::vector<std::string>{"0", "1", "2", "3"}));
  const Request copy = r;  // copies share the parsed body
  EXPECT_EQ(&copy.model(), &r.model());
}

TEST(PublicRequest, EveryIssueIsListedWithItsField) {
  const std::string body = R"({"model":"clef","state":"s","questions":{"a":{"type":"maybe"},"b":{"type":"choice"}}})";
  const std::vector<RequestIssue> issues = validate_request(body);
  ASSERT_GE(issues.size(), 2u);
  EXPECT_EQ(issues[0].path, (std::vector<std::string>{"questions", "a", "type"}));
  EXPECT_EQ(issues[0].message, "a: type must be noul, choice, or score");
  EXPECT_EQ(issues[0].type, "value_error");
  bool b_criteria = false;
  for (const RequestIssue& i : issues) b_criteria |= i.path == std::vector<std::string>{"questions", "b", "criteria"};
  EXPECT_TRUE(b_criteria);
  try {
    Request::parse(body);
    FAIL() << "parse accepted an invalid request";
  } catch (const RequestValidationError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidRequest);
    EXPECT_EQ(std::string(e.what()), issues[0].message);
    EXPECT_EQ(e.issues().size(), issues.size());
  }
  EXPECT_TRUE(validate_request(R"({"model":"clef","state":"s","questions":{"a":{"type":"noul"}}})").empty());
}

TEST(PublicRequest, LimitsAndBrokenJson) {
  // Not JSON: an Error of kind kInvalidRequest from both entry points.
  for (auto call : {+[] { (void)validate_request("{\"model\":"); }, +[] { (void)Request::parse("{\"model\":"); }}) {
    try {
      call();
      ADD_FAILURE() << "broken JSON accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidRequest) << e.what();
    }
  }
  RequestLimits small;
  small.json.max_bytes = 16;
  try {
    Request::parse(R"({"model":"clef","state":"a longer state","questions":{}})", small);
    ADD_FAILURE() << "a body over json.max_bytes was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kRequestTooLarge) << e.what();
  }
  // Workers AI: at most 64 questions.
  std::string many = R"({"model":"clef","state":"s","questions":{)";
  for (int i = 0; i < 65; ++i) many += (i ? "," : "") + ("\"q" + std::to_string(i)) + R"(":{"type":"noul","instructions":"?"})";
  many += "}}";
  EXPECT_TRUE(validate_request(many).empty());
  const std::vector<RequestIssue> limited = validate_request(many, RequestLimits::workers_ai());
  ASSERT_FALSE(limited.empty());
  EXPECT_EQ(limited[0].type, "limit");
}

// Engine::encode gives the reference's encode_record: ids and spans of the fixture.
TEST(PublicRequest, EngineEncodeMatchesTheReference) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16");
  STAVE_REQUIRE_FIXTURE("public/cases");
  EngineOptions options;
  options.model = test::fixture("public/model-bf16");
  options.precision = Precision::kFast;
  auto engine = Engine::load(options);
  EXPECT_FALSE(engine->info().synthetic);
  // A plain request, one whose state is cut at max_length 400, and one with an image (media).
  for (const char* name : {"000-docs-example", "015-long-state-truncated", "017-image-one"}) {
    SCOPED_TRACE(name);
    const std::string dir = test::fixture(std::string("public/cases/") + name);
    const nlohmann::json expected = test::read_json(dir + "/expected-bf16.json");
    DecideOptions o;
    o.max_length = expected["max_length"].get<int64_t>();
    const nlohmann::json got = nlohmann::json::parse(engine->encode(Request::parse(read_file(dir + "/request.json")), o));
    EXPECT_EQ(got["input_ids"], expected["input_ids"]);
    EXPECT_EQ(got["questions"], expected["questions"]);
    EXPECT_EQ(got.contains("media"), expected.contains("media"));
    if (expected.contains("media")) {
      EXPECT_EQ(got["media"], expected["media"]);
    }
  }
}

TEST(PublicRequest, DecideOnAParsedRequestIsDecideOnItsText) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16");
  STAVE_REQUIRE_FIXTURE("public/cases");
  EngineOptions options;
  options.model = test::fixture("public/model-bf16");
  options.precision = Precision::kFast;
  auto engine = Engine::load(options);
  const std::string text = docs_example();
  DecideOptions o;
  o.include_logits = true;
  EXPECT_EQ(engine->decide(Request::parse(text), o).json, engine->decide(text, o).json);
}

}  // namespace
}  // namespace stave
