// SystemOne answers from head logits: the reference's responses in the fixtures (from the
// fixtures' own logits), and the rules the fixtures do not pin down (ties, rounding edges,
// the compatibility confidence formulas). Expected values come from the fixtures, by hand, or
// from CPython (noted where used).
#include <cmath>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "decide/answers.h"
#include "stave/errors.h"
#include "test_util.h"
#include "text/json_value.h"
#include "text/python_json.h"
#include "util/mapped_file.h"

namespace stave {
namespace {

using ordered_json = nlohmann::ordered_json;

QuestionType type_from_name(const std::string& name) {
  if (name == "noul") return QuestionType::kNoul;
  if (name == "choice") return QuestionType::kChoice;
  return QuestionType::kScore;
}

// The parts of a request the answers read (model, question ids, types, criteria), taken from
// the ordered JSON value directly so that this test does not depend on the request parser.
DecisionRequest minimal_request(const JsonValue& body) {
  DecisionRequest r;
  for (const JsonValue::Member& m : body.members()) {
    if (m.first == "model") r.model = m.second.as_string();
    if (m.first != "questions") continue;
    for (const JsonValue::Member& q : m.second.members()) {
      QuestionSpec spec;
      spec.id = q.first;
      for (const JsonValue::Member& field : q.second.members()) {
        if (field.first == "type") spec.type = type_from_name(field.second.as_string());
        if (field.first == "criteria") spec.criteria = field.second;
      }
      r.questions.push_back(std::move(spec));
    }
  }
  return r;
}

std::vector<EncodedQuestion> encoded_from(const nlohmann::json& expected) {
  std::vector<EncodedQuestion> out;
  for (const auto& q : expected.at("questions")) {
    EncodedQuestion e;
    e.id = q.at("id").get<std::string>();
    e.type = static_cast<QuestionType>(q.at("type").get<int>());
    e.option_ids = q.at("option_ids").get<std::vector<std::string>>();
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<std::vector<float>> logits_from(const nlohmann::json& expected) {
  std::vector<std::vector<float>> out;
  for (const auto& q : expected.at("logits")) {
    std::vector<float> row;
    for (const auto& x : q) row.push_back(static_cast<float>(x.get<double>()));  // fp32 values, exact
    out.push_back(std::move(row));
  }
  return out;
}

int check_fixture_responses(const std::string& variant) {
  int cases = 0;
  for (const std::string& name : test::fixture_cases()) {
    const std::string dir = test::fixture("public/cases/" + name);
    const std::string expected_text = read_file(dir + "/expected-" + variant + ".json");
    const nlohmann::json expected = nlohmann::json::parse(expected_text);
    if (!expected.contains("response")) continue;
    SCOPED_TRACE(name + " (" + variant + ")");
    const DecisionRequest request = minimal_request(parse_json(read_file(dir + "/request.json")));
    const auto encoded = encoded_from(expected);
    const auto logits = logits_from(expected);
    const int64_t tokens = static_cast<int64_t>(expected.at("input_ids").size());
    const SystemOneResponse response = build_systemone_response(request, encoded, logits, tokens);
    const std::string text = render_systemone_response(response);
    // Same keys in the same order, same types, same numbers: compare the two documents'
    // canonical dumps (ordered_json keeps member order; 1 and 1.0 dump differently).
    const ordered_json ours = ordered_json::parse(text);
    const ordered_json want = ordered_json::parse(expected_text).at("response");
    EXPECT_EQ(ours.dump(), want.dump());
    // The structured result carries the same numbers.
    EXPECT_EQ(response.answers.size(), encoded.size());
    if (response.answers.size() != encoded.size()) continue;
    for (size_t i = 0; i < encoded.size(); ++i) {
      const QuestionAnswer& a = response.answers[i];
      EXPECT_EQ(a.scored_option_ids, encoded[i].option_ids);
      EXPECT_EQ(a.logits, logits[i]);
      const ordered_json& wa = want.at("answers").at(a.id);
      if (a.type != QuestionType::kNoul) {
        EXPECT_EQ(a.option_ids.size(), wa.at("probabilities").size());
        if (a.option_ids.size() != wa.at("probabilities").size()) continue;
        size_t k = 0;
        for (const auto& [id, p] : wa.at("probabilities").items()) {
          EXPECT_EQ(a.option_ids[k], id);
          EXPECT_EQ(python_round(a.probabilities[k], 4), p.get<double>());
          EXPECT_NEAR(a.probabilities[k], p.get<double>(), 5e-5 + 1e-12);
          ++k;
        }
      }
    }
    ++cases;
  }
  return cases;
}

TEST(Answers, MatchReferenceResponsesBf16) {
  STAVE_REQUIRE_FIXTURE("public/cases/000-docs-example/expected-bf16.json");
  EXPECT_GE(check_fixture_responses("bf16"), 19);
}

TEST(Answers, MatchReferenceResponsesMxfp4) {
  STAVE_REQUIRE_FIXTURE("public/cases/000-docs-example/expected-mxfp4.json");
  EXPECT_GE(check_fixture_responses("mxfp4"), 19);
}

// One request with one question, and the head's view of it.
struct OneQuestion {
  DecisionRequest request;
  std::vector<EncodedQuestion> encoded;
};

OneQuestion one_question(const std::string& request_json, std::vector<std::string> scored_ids) {
  OneQuestion q;
  q.request = minimal_request(parse_json(request_json));
  EncodedQuestion e;
  e.id = q.request.questions.at(0).id;
  e.type = q.request.questions.at(0).type;
  e.option_ids = std::move(scored_ids);
  q.encoded.push_back(std::move(e));
  return q;
}

std::vector<std::string> levels(int n) {
  std::vector<std::string> out;
  for (int k = 0; k < n; ++k) out.push_back(std::to_string(k));
  return out;
}

TEST(Answers, TieGoesToTheFirstOptionInRequestOrder) {
  // Request order zeta, alpha, mid; the head scores in code-point order alpha, mid, zeta.
  OneQuestion q = one_question(
      R"({"model":"m","state":"s","questions":{"q":{"type":"choice","criteria":{"zeta":"z","alpha":"a","mid":"m"}}}})",
      {"alpha", "mid", "zeta"});
  auto r = build_systemone_response(q.request, q.encoded, {{1.0f, 0.5f, 1.0f}}, 10);
  EXPECT_EQ(r.answers[0].choice, "zeta");  // zeta and alpha tie; zeta comes first in the request
  r = build_systemone_response(q.request, q.encoded, {{1.0f, 1.0f, 0.5f}}, 10);
  EXPECT_EQ(r.answers[0].choice, "alpha");  // alpha and mid tie; alpha comes before mid
  // CPython: 1/(2 + exp(-0.5)) = 0.38365..., exp(-0.5)/(2 + exp(-0.5)) = 0.23269...
  EXPECT_EQ(render_systemone_response(r),
            R"({"model":"m","answers":{"q":{"type":"choice","choice":"alpha","confidence":0.3837,)"
            R"("probabilities":{"zeta":0.2327,"alpha":0.3837,"mid":0.3837}}},)"
            R"("usage":{"input_tokens":10,"output_tokens":0}})");
}

TEST(Answers, RoundsExactTiesHalfToEvenAndSpellsLikePython) {
  // 32 equal logits: every p is exactly 1/32 = 0.03125, a decimal tie at the 5th digit;
  // CPython round(0.03125, 4) == 0.0312. score = Σk/32 = 15.5 exactly.
  OneQuestion q = one_question(
      R"({"model":"m","state":"s","questions":{"s":{"type":"score","criteria":)"
      R"([0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31]}}})",
      levels(32));
  const auto r = build_systemone_response(q.request, q.encoded, {std::vector<float>(32, 0.25f)}, 7);
  const QuestionAnswer& a = r.answers[0];
  EXPECT_EQ(a.probabilities[5], 0.03125);
  EXPECT_EQ(a.value, 15.5);
  EXPECT_EQ(a.confidence, 0.03125);
  const ordered_json doc = ordered_json::parse(render_systemone_response(r));
  EXPECT_EQ(doc["answers"]["s"]["legend"]["31"], 31);
  const std::string text = render_systemone_response(r);
  EXPECT_NE(text.find(R"("score":15.5,"confidence":0.0312,"legend":{"0":0,"1":1,)"), std::string::npos) << text;

  // A certain noul: p(true) = 1/(1 + e^-100) is 1.0f in fp32 -> spelled "1.0"; the false
  // probability (≈ 3.7e-44) rounds to 0.0.
  OneQuestion n = one_question(R"({"model":"m","state":"s","questions":{"n":{"type":"noul"}}})", {"true", "false"});
  const auto rn = build_systemone_response(n.request, n.encoded, {{100.0f, 0.0f}}, 3);
  EXPECT_EQ(render_systemone_response(rn),
            R"({"model":"m","answers":{"n":{"type":"noul","noul":1.0}},"usage":{"input_tokens":3,"output_tokens":0}})");
  EXPECT_EQ(rn.answers[0].probabilities[0], 1.0);
  EXPECT_LT(rn.answers[0].probabilities[1], 1e-40);
}

TEST(Answers, NoulReadsTrueWhateverTheScoredOrder) {
  OneQuestion n = one_question(R"({"model":"m","state":"s","questions":{"n":{"type":"noul"}}})", {"true", "false"});
  // Equal logits: exactly 0.5.
  EXPECT_EQ(build_systemone_response(n.request, n.encoded, {{2.0f, 2.0f}}, 1).answers[0].value, 0.5);
  n.encoded[0].option_ids = {"false", "true"};
  EXPECT_EQ(build_systemone_response(n.request, n.encoded, {{0.0f, 100.0f}}, 1).answers[0].value, 1.0);
}

TEST(Answers, ConfidenceFormulas) {
  // Spec §5.2's Workers AI check: team {0.1762, 0.8088, 0.015} -> 0.5281 (CPython:
  // round((3*sum(p*p)-1)/2, 4)); Jev: round((3*0.8088-1)/2, 4) = 0.7132.
  const std::vector<double> p = {0.1762, 0.8088, 0.015};
  EXPECT_NEAR(confidence_value(ConfidenceMode::kWorkersAi, p), (3 * (0.1762 * 0.1762 + 0.8088 * 0.8088 + 0.015 * 0.015) - 1) / 2, 1e-15);
  EXPECT_EQ(std::round(confidence_value(ConfidenceMode::kWorkersAi, p) * 1e4) / 1e4, 0.5281);
  EXPECT_DOUBLE_EQ(confidence_value(ConfidenceMode::kJev, p), (3 * 0.8088 - 1) / 2);
  EXPECT_EQ(confidence_value(ConfidenceMode::kReference, p), 0.8088);
  // Uniform: both compatibility formulas give 0; certain: 1; one option: 1.
  EXPECT_EQ(confidence_value(ConfidenceMode::kWorkersAi, {0.25, 0.25, 0.25, 0.25}), 0.0);
  EXPECT_EQ(confidence_value(ConfidenceMode::kJev, {0.25, 0.25, 0.25, 0.25}), 0.0);
  EXPECT_EQ(confidence_value(ConfidenceMode::kWorkersAi, {0.0, 1.0, 0.0}), 1.0);
  EXPECT_EQ(confidence_value(ConfidenceMode::kJev, {0.0, 1.0}), 1.0);
  EXPECT_EQ(confidence_value(ConfidenceMode::kJev, {1.0}), 1.0);
  EXPECT_EQ(confidence_value(ConfidenceMode::kWorkersAi, {1.0}), 1.0);

}

TEST(Answers, CompatibilityConfidenceOnTheDocsExample) {
  // CPython from the fixture's logits (double softmax): team workers-ai 0.0376, jev 0.1749;
  // severity workers-ai 0.0029, jev 0.0357. Everything else is as in the reference response.
  STAVE_REQUIRE_FIXTURE("public/cases/000-docs-example/expected-bf16.json");
  const std::string dir = test::fixture("public/cases/000-docs-example");
  const nlohmann::json expected = test::read_json(dir + "/expected-bf16.json");
  const DecisionRequest request = minimal_request(parse_json(read_file(dir + "/request.json")));
  for (auto [mode, team, severity] : {std::tuple{ConfidenceMode::kWorkersAi, 0.0376, 0.0029},
                                      std::tuple{ConfidenceMode::kJev, 0.1749, 0.0357}}) {
    AnswerOptions options;
    options.confidence = mode;
    const auto r = build_systemone_response(request, encoded_from(expected), logits_from(expected), 341, options);
    ordered_json doc = ordered_json::parse(render_systemone_response(r));
    EXPECT_EQ(doc["answers"]["team"]["confidence"].get<double>(), team);
    EXPECT_EQ(doc["answers"]["severity"]["confidence"].get<double>(), severity);
    ordered_json want = expected.at("response");
    doc["answers"]["team"]["confidence"] = want["answers"]["team"]["confidence"];
    doc["answers"]["severity"]["confidence"] = want["answers"]["severity"]["confidence"];
    EXPECT_EQ(doc.dump(), ordered_json::parse(read_file(dir + "/expected-bf16.json")).at("response").dump());
  }
}

TEST(Answers, OptionalLogitsMember) {
  OneQuestion q = one_question(
      R"({"model":"m","state":"s","questions":{"c":{"type":"choice","criteria":{"b":null,"a":null}}}})", {"a", "b"});
  AnswerOptions options;
  options.include_logits = true;
  const auto r = build_systemone_response(q.request, q.encoded, {{0.1f, -2.5f}}, 4, options);
  const ordered_json doc = ordered_json::parse(render_systemone_response(r));
  ASSERT_TRUE(doc.contains("logits"));
  EXPECT_EQ(std::prev(doc.end()).key(), "logits");
  EXPECT_EQ(doc["logits"]["c"][0].get<double>(), static_cast<double>(0.1f));  // head order: a, b
  EXPECT_EQ(doc["logits"]["c"][1].get<double>(), -2.5);
  EXPECT_EQ(doc["answers"]["c"]["choice"], "a");
}

TEST(Answers, RejectsInconsistentInputs) {
  OneQuestion q = one_question(
      R"({"model":"m","state":"s","questions":{"c":{"type":"choice","criteria":{"b":null,"a":null}}}})", {"a", "b"});
  EXPECT_THROW(build_systemone_response(q.request, q.encoded, {{0.1f}}, 4), Error);
  EXPECT_THROW(build_systemone_response(q.request, q.encoded, {}, 4), Error);
  q.encoded[0].option_ids = {"a", "x"};
  EXPECT_THROW(build_systemone_response(q.request, q.encoded, {{0.1f, 0.2f}}, 4), Error);
}

TEST(Answers, JsonTextKeepsOrderAndEscapesLikeJsonDumps) {
  // CPython: json.dumps(v, ensure_ascii=False, separators=(",", ":")) with the same member order.
  const JsonValue v = parse_json(
      "{\"a\\\"b\":\"x\\\\y\\n\\t\\u0001\\u007f \\u00e9\\u2028\","
      "\"n\":[1.5e-07,1e16,-0.0,12345678901234567890,true,null,1E2]}");
  EXPECT_EQ(json_text(v), "{\"a\\\"b\":\"x\\\\y\\n\\t\\u0001\x7f \xc3\xa9\xe2\x80\xa8\","
                          "\"n\":[1.5e-07,1e+16,-0.0,12345678901234567890,true,null,100.0]}");
  EXPECT_EQ(json_text(parse_json(R"({"z":1,"a":{"y":[],"b":{}}})")), R"({"z":1,"a":{"y":[],"b":{}}})");
}

}  // namespace
}  // namespace stave
