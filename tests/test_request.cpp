// parse_decision_request: the reference's checks and texts (fixtures and the reference code of
// clef-decision.md §5.1), stave's errors where the reference would crash, images and limits.
#include <gtest/gtest.h>

#include "decide/image_input.h"
#include "decide/request.h"
#include "stave/errors.h"
#include "test_util.h"
#include "util/mapped_file.h"

namespace stave {
namespace {

// The first issue's message, or "" when the request is valid.
std::string error_of(std::string_view text, const RequestLimits& limits = {}) {
  try {
    parse_decision_request(text, limits);
  } catch (const RequestValidationError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidRequest);
    EXPECT_FALSE(e.issues().empty());
    if (!e.issues().empty()) {
      EXPECT_EQ(e.issues().front().message, e.what());
    }
    return e.what();
  }
  return "";
}

std::string with_questions(const std::string& questions, const std::string& extra = "") {
  return R"({"model":"clef","state":"s","questions":)" + questions + extra + "}";
}

TEST(DecisionRequest, FixtureValidationErrorsMatchTheReference) {
  STAVE_REQUIRE_FIXTURE("public/cases");
  int checked = 0;
  for (const auto& name : test::fixture_cases()) {
    auto expected = test::read_json(test::fixture("public/cases/" + name + "/expected-bf16.json"));
    std::string request = read_file(test::fixture("public/cases/" + name + "/request.json"));
    std::string err = error_of(request);
    if (expected.contains("error") && expected["error"].get<std::string>().rfind("schema requires", 0) != 0) {
      EXPECT_EQ(err, expected["error"].get<std::string>()) << name;
      ++checked;
    } else {
      EXPECT_EQ(err, "") << name;  // valid (the schema-length error comes from the encoder)
    }
  }
  EXPECT_GE(checked, 4);
}

TEST(DecisionRequest, ReferenceMessagesInReferenceOrder) {
  EXPECT_EQ(error_of(R"({"state":"s","questions":{"a":{"type":"noul"}}})"), "model and state are required");
  EXPECT_EQ(error_of(R"({"model":1,"state":"s","questions":{"a":{"type":"noul"}}})"), "model and state are required");
  EXPECT_EQ(error_of(R"({"model":"m","questions":{"a":{"type":"noul"}}})"), "model and state are required");
  EXPECT_EQ(error_of(R"({"model":"m","state":null,"questions":{"a":{"type":"noul"}}})"), "");  // present is enough
  EXPECT_EQ(error_of(R"({"model":"m","state":"s"})"), "at least one question is required");
  EXPECT_EQ(error_of(with_questions("[]")), "at least one question is required");
  EXPECT_EQ(error_of(with_questions("{}")), "at least one question is required");
  EXPECT_EQ(error_of(with_questions(R"({"q":{"instructions":"x"}})")), "q: type must be noul, choice, or score");
  EXPECT_EQ(error_of(with_questions(R"({"q":{"type":"Noul"}})")), "q: type must be noul, choice, or score");
  EXPECT_EQ(error_of(with_questions(R"({"q":{"type":1}})")), "q: type must be noul, choice, or score");
  for (const char* empty : {"", R"(,"criteria":null)", R"(,"criteria":{})", R"(,"criteria":[])", R"(,"criteria":0)",
                            R"(,"criteria":"")", R"(,"criteria":false)"}) {
    EXPECT_EQ(error_of(with_questions(std::string(R"({"q":{"type":"choice")") + empty + "}}")),
              "q: criteria must not be empty")
        << empty;
    EXPECT_EQ(error_of(with_questions(std::string(R"({"q":{"type":"score")") + empty + "}}")),
              "q: criteria must not be empty")
        << empty;
  }
  // The reference's loop checks every question before anything else can fail.
  EXPECT_EQ(error_of(with_questions(R"({"a":{"type":"noul","criteria":"xy"},"b":{"type":"rank"}})")),
            "b: type must be noul, choice, or score");
  // Falsy noul criteria are no update (`q.get("criteria") or {}`).
  EXPECT_EQ(error_of(with_questions(R"({"a":{"type":"noul","criteria":[]},"b":{"type":"noul","criteria":0}})")), "");
}

TEST(DecisionRequest, ClearErrorsWhereTheReferenceWouldCrash) {
  EXPECT_EQ(error_of("[1]"), "request body must be a JSON object");
  EXPECT_EQ(error_of(with_questions(R"({"q":"noul"})")), "q: question must be an object");
  EXPECT_NE(error_of(with_questions(R"({"q":{"type":"choice","criteria":["a","b"]}})")).find("q: criteria must be an object"),
            std::string::npos);
  EXPECT_NE(error_of(with_questions(R"({"q":{"type":"score","criteria":{"0":"a"}}})")).find("q: criteria must be an array"),
            std::string::npos);
  EXPECT_NE(error_of(with_questions(R"({"q":{"type":"score","criteria":"abc"}})")).find("q: criteria must be an array"),
            std::string::npos);
  EXPECT_NE(error_of(with_questions(R"({"q":{"type":"noul","criteria":["true"]}})")).find("q: criteria must be an object"),
            std::string::npos);
  EXPECT_NE(error_of(with_questions(R"({"":{"type":"noul"}})")).find("empty id"), std::string::npos);
  EXPECT_NE(error_of(with_questions(R"({"":{"type":"noul","instructions":""}})")).find("empty id"), std::string::npos);
  EXPECT_EQ(error_of(with_questions(R"({"":{"type":"noul","instructions":"x"}})")), "");
  EXPECT_EQ(error_of(with_questions(R"({"":{"type":"noul","instructions":0}})")), "");  // renders "0"
  // The hosted schema has no videos; stave's own limits take them (test_video_request.cpp).
  EXPECT_EQ(error_of(R"({"model":"m","state":1,"questions":{"a":{"type":"noul"}},"videos":["v"]})",
                     RequestLimits::workers_ai()),
            "videos are not supported");
}

TEST(DecisionRequest, IssuesCarryPaths) {
  JsonValue body = parse_json(R"({"model":"m","state":1,"questions":{"a":{"type":"x"},"b":{"type":"choice"}}})");
  auto issues = validate_decision_request(body);
  ASSERT_EQ(issues.size(), 2u);
  EXPECT_EQ(issues[0].path, (std::vector<std::string>{"questions", "a", "type"}));
  EXPECT_EQ(issues[0].type, "value_error");
  EXPECT_EQ(issues[1].path, (std::vector<std::string>{"questions", "b", "criteria"}));
  EXPECT_EQ(issues[1].message, "b: criteria must not be empty");
  EXPECT_EQ(issues[1].type, "missing");
  EXPECT_TRUE(validate_decision_request(parse_json(with_questions(R"({"a":{"type":"noul"}})"))).empty());
}

TEST(DecisionRequest, OptionsInReferenceOrder) {
  DecisionRequest r = parse_decision_request(with_questions(R"({
    "n": {"type":"noul","instructions":"i","criteria":{"false":null,"maybe":"x","true":{"k":1}}},
    "c": {"type":"choice","criteria":{"b":"B","é":null,"A":"a","a":["x"],"~":"t"}},
    "s": {"type":"score","instructions":{"x":1},"criteria":["zero",null,{"two":2}]},
    "d": {"type":"noul"}
  })"));
  ASSERT_EQ(r.model, "clef");
  ASSERT_EQ(r.questions.size(), 4u);
  const auto& n = r.questions[0];
  EXPECT_EQ(n.id, "n");
  EXPECT_EQ(n.type, QuestionType::kNoul);
  ASSERT_EQ(n.options.size(), 2u);
  EXPECT_EQ(n.options[0].id, "true");
  EXPECT_TRUE(n.options[0].has_description);
  EXPECT_TRUE(n.options[0].description.is_object());
  EXPECT_EQ(n.options[1].id, "false");
  EXPECT_FALSE(n.options[1].has_description);
  EXPECT_EQ(n.request_order, (std::vector<size_t>{0, 1}));

  // Python: sorted(["b","é","A","a","~"]) == ['A', 'a', 'b', '~', 'é']
  const auto& c = r.questions[1];
  std::vector<std::string> ids;
  for (const auto& o : c.options) ids.push_back(o.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"A", "a", "b", "~", "\xc3\xa9"}));
  EXPECT_FALSE(c.options[4].has_description);
  // request order b, é, A, a, ~ -> option indices 2, 4, 0, 1, 3
  EXPECT_EQ(c.request_order, (std::vector<size_t>{2, 4, 0, 1, 3}));
  EXPECT_TRUE(c.instructions.is_null());

  const auto& s = r.questions[2];
  ASSERT_EQ(s.options.size(), 3u);
  EXPECT_EQ(s.options[0].id, "0");
  EXPECT_EQ(s.options[1].id, "1");
  EXPECT_FALSE(s.options[1].has_description);
  EXPECT_EQ(s.options[2].id, "2");
  EXPECT_TRUE(s.criteria.is_array());
  EXPECT_TRUE(s.instructions.is_object());

  const auto& d = r.questions[3];
  EXPECT_EQ(d.options[0].description.as_string(), "The proposition is true or the answer is yes.");
  EXPECT_EQ(d.options[1].description.as_string(), "The proposition is false or the answer is no.");
}

TEST(DecisionRequest, QuestionOrderAndStateKept) {
  DecisionRequest r = parse_decision_request(R"({"questions":{"z":{"type":"noul"},"a":{"type":"noul"},"z":{"type":"score","criteria":[1]}},
    "state":{"b":[1,2.5]},"model":"m"})");
  ASSERT_EQ(r.questions.size(), 2u);
  EXPECT_EQ(r.questions[0].id, "z");  // first position, last value
  EXPECT_EQ(r.questions[0].type, QuestionType::kScore);
  EXPECT_EQ(r.questions[1].id, "a");
  ASSERT_TRUE(r.state.is_object());
  EXPECT_EQ(r.state.find("b")->items()[1].as_double(), 2.5);
  EXPECT_TRUE(r.images.empty());
}

TEST(DecisionRequest, LimitsAreOffByDefaultAndEnforcedWhenSet) {
  std::string many = "{";
  for (int i = 0; i < 65; ++i) many += std::string(i ? "," : "") + "\"q" + std::to_string(i) + "\":{\"type\":\"noul\"}";
  many += "}";
  EXPECT_EQ(error_of(with_questions(many)), "");
  RequestLimits w = RequestLimits::workers_ai();
  EXPECT_NE(error_of(with_questions(many), w).find("at most 64 questions"), std::string::npos);

  EXPECT_EQ(error_of(with_questions(R"({"q":{"type":"choice","instructions":"i","criteria":{"a":1}}})"), w),
            "q: at least 2 options are required; got 1");
  EXPECT_EQ(error_of(with_questions(R"({"q":{"type":"score","instructions":"i","criteria":[1,2,3,4,5,6,7,8,9,10,11]}})"), w),
            "q: at most 10 score levels are allowed; got 11");
  EXPECT_NE(error_of(with_questions(R"({"q q":{"type":"noul","instructions":"i"}})"), w).find("letters, digits"),
            std::string::npos);
  EXPECT_NE(error_of(with_questions("{\"" + std::string(101, 'x') + "\":{\"type\":\"noul\",\"instructions\":\"i\"}}"), w)
                .find("at most 100 characters"),
            std::string::npos);
  EXPECT_EQ(error_of(with_questions("{\"" + std::string(100, 'x') + "\":{\"type\":\"noul\",\"instructions\":\"i\"}}"), w), "");
  EXPECT_EQ(error_of(with_questions(R"({"q":{"type":"noul","instructions":""}})"), w),
            "q: instructions must be a non-empty string, an object or an array");
  EXPECT_EQ(error_of(with_questions(R"({"q":{"type":"noul","instructions":"i","extra":1}})"), w), "q: unknown field 'extra'");
  EXPECT_EQ(error_of(with_questions(R"({"q":{"type":"noul","instructions":"i"}})", R"(,"x":1)"), w), "unknown field 'x'");
  // The reference's message still comes first.
  EXPECT_EQ(error_of(with_questions(R"({"q q":{"type":"rank"}})"), w), "q q: type must be noul, choice, or score");
}

// A 1x1 PNG (the bytes below, base64-encoded by Python's base64.b64encode).
const std::string kPngBase64 =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";

TEST(DecisionRequest, ImagesAsDataUrlsAndObjects) {
  std::string images = R"(,"images":["data:image/png;base64,)" + kPngBase64 + R"(","DATA:Image/JPEG;base64,aGVsbG8=",
      {"content_type":"image/webp","base64":"aGk="}])";
  DecisionRequest r = parse_decision_request(with_questions(R"({"q":{"type":"noul"}})", images));
  ASSERT_EQ(r.images.size(), 3u);
  EXPECT_EQ(r.images[0].content_type, "image/png");
  EXPECT_EQ(r.images[0].data.size(), 69u);
  EXPECT_EQ(r.images[0].data.substr(0, 8), "\x89PNG\r\n\x1a\n");
  EXPECT_EQ(r.images[1].content_type, "image/jpeg");
  EXPECT_EQ(r.images[1].data, "hello");
  EXPECT_EQ(r.images[2].content_type, "image/webp");
  EXPECT_EQ(r.images[2].data, "hi");
}

TEST(DecisionRequest, ImageErrorsNameTheItem) {
  auto image_error = [](const std::string& item, const RequestLimits& limits = {}) {
    return error_of(with_questions(R"({"q":{"type":"noul"}})", ",\"images\":[" + item + "]"), limits);
  };
  EXPECT_NE(image_error(R"("https://example.com/a.png")").find("images[0]: remote image URLs are not supported"),
            std::string::npos);
  EXPECT_NE(image_error(R"("HTTP://example.com/a.png")").find("remote image URLs"), std::string::npos);
  EXPECT_NE(image_error(R"("/tmp/a.png")").find("images[0]: must be a data URL"), std::string::npos);
  EXPECT_NE(image_error(R"("/tmp/a.png")").find("file paths are not read here"), std::string::npos);
  EXPECT_NE(image_error("42").find("images[0]: must be a data URL"), std::string::npos);
  EXPECT_NE(image_error(R"("data:image/gif;base64,aGk=")").find("image/png, image/jpeg or image/webp"), std::string::npos);
  EXPECT_NE(image_error(R"("data:image/png,aGk=")").find("base64-encoded"), std::string::npos);
  EXPECT_NE(image_error(R"("data:image/png;base64")").find("no ','"), std::string::npos);
  EXPECT_NE(image_error(R"("data:image/png;base64,aGk")").find("invalid base64"), std::string::npos);
  EXPECT_NE(image_error(R"("data:image/png;base64,aG k")").find("character ' ' at position 2"), std::string::npos);
  EXPECT_NE(image_error(R"("data:image/png;base64,a=Gk")").find("'=' padding"), std::string::npos);
  EXPECT_NE(image_error(R"("data:image/png;base64,")").find("empty"), std::string::npos);
  EXPECT_NE(image_error(R"({"content_type":"image/png"})").find("images[0]: base64 must be a string"), std::string::npos);
  EXPECT_NE(image_error(R"({"base64":"aGk="})").find("images[0]: content_type must be a string"), std::string::npos);
  EXPECT_NE(image_error(R"({"content_type":"text/plain","base64":"aGk="})").find("content_type must be"), std::string::npos);
  EXPECT_NE(error_of(with_questions(R"({"q":{"type":"noul"}})", R"(,"images":"data:image/png;base64,aGk=")"))
                .find("images must be an array"),
            std::string::npos);
  EXPECT_EQ(error_of(with_questions(R"({"q":{"type":"noul"}})", R"(,"images":null)")), "");
  EXPECT_EQ(error_of(with_questions(R"({"q":{"type":"noul"}})", R"(,"images":[])")), "");

  RequestLimits limits;
  limits.max_image_bytes = 4;
  EXPECT_NE(image_error(R"("data:image/png;base64,aGVsbG8=")", limits).find("image is 5 bytes; the limit is 4"),
            std::string::npos);
  EXPECT_EQ(image_error(R"("data:image/png;base64,aGVsbA==")", limits), "");
  limits = {};
  limits.max_images = 1;
  EXPECT_NE(image_error(R"("data:image/png;base64,aGk=","data:image/png;base64,aGk=")", limits).find("at most 1 images"),
            std::string::npos);
  limits = {};
  limits.max_total_image_bytes = 3;
  EXPECT_NE(image_error(R"("data:image/png;base64,aGk=","data:image/png;base64,aGk=")", limits).find("images total"),
            std::string::npos);
}

TEST(Base64, DecodesLikePython) {
  // base64.b64decode of each input.
  std::string out, why;
  ASSERT_TRUE(decode_base64("", &out, &why));
  EXPECT_EQ(out, "");
  ASSERT_TRUE(decode_base64("YQ==", &out, &why));
  EXPECT_EQ(out, "a");
  ASSERT_TRUE(decode_base64("YWI=", &out, &why));
  EXPECT_EQ(out, "ab");
  ASSERT_TRUE(decode_base64("YWJj", &out, &why));
  EXPECT_EQ(out, "abc");
  ASSERT_TRUE(decode_base64("AP8Q/+4=", &out, &why));
  EXPECT_EQ(out, std::string("\x00\xff\x10\xff\xee", 5));
  for (const char* bad : {"Y", "YQ=", "Y===", "=YQ=", "YQ==YQ==", "YQ-_", "YQ\n="}) {
    EXPECT_FALSE(decode_base64(bad, &out, &why)) << bad;
    EXPECT_FALSE(why.empty());
  }
}

}  // namespace
}  // namespace stave
